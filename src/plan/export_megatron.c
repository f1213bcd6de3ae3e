/* The Megatron-LM exporter (plan layer): a plan as a torchrun command line for Megatron-LM's pretrain_gpt.py
 * that trains the model the plan was costed for (export_megatron_model.c) with the plan's parallelism,
 * batch, recompute, optimizer sharding and precision, one flag per line with ` \` continuations.
 *
 * Target: Megatron-LM @ d98e8a64ddf34856e74b24714e3bedb2f5a39553 (August 2026); every flag and value type is
 * in tests/data/framework_args.tsv. The combinations follow the checks Megatron makes before it trains
 * (megatron/training/arguments.py validate_args, megatron/core/transformer/transformer_config.py
 * __post_init__), so that every argument set written here is one Megatron accepts together:
 *  - the rank order is tp-cp-ep-dp-pp, or tp-cp-ep-pp-dp with --use-tp-pp-dp-mapping
 *    (megatron/training/initialize.py); no other order can be stated;
 *  - an even split is Megatron's default, or --num-layers-per-virtual-pipeline-stage with virtual stages;
 *    any other split is --pipeline-model-parallel-layout, one "|"-separated stage per chunk in layer order
 *    (chunk index = virtual stage × pp + rank), E for the embedding, t per layer, m per MTP layer, L for the
 *    loss (pipeline_parallel_layer_layout.py parse_str_to_list, validate_layer_layout: the MTP layers go in
 *    the last stage); arguments.py allows no more than one of these split flags;
 *  - selective recompute takes neither --recompute-method nor --recompute-num-layers; full takes both;
 *  - --overlap-param-gather needs the distributed optimizer or Megatron-FSDP and --overlap-grad-reduce;
 *  - Megatron-FSDP requires --ckpt-format fsdp_dtensor and turns on the distributed optimizer itself;
 *  - --tp-comm-overlap needs --sequence-parallel; --fp16 and --bf16 exclude each other;
 *  - MoE with linear biases (add_bias_linear) needs --expert-tensor-parallel-size 1 ("Bias in Moe is only
 *    supported when ETP==1", transformer_config.py);
 *  - --cross-entropy-loss-fusion with --cross-entropy-fusion-impl te is rejected ("Transformer Engine cross
 *    entropy loss fusion is disabled due to stability issues", arguments.py); the native implementation is
 *    the one left.
 * docs/exports.md has the mapping table and what is not exported. */
#include <stdio.h>
#include <string.h>

#include "plan/export.h"

static ap_status unsupported(ap_ctx *ctx, const char *why) {
  return ctx_fail(ctx, AP_UNSUPPORTED, "megatron export: %s", why);
}

/* ---- Can Megatron-LM run this plan? ---- */

ap_status megatron_can_express(ap_ctx *ctx, const plan *p, const graph *g) {
  mshape s;
  if (!megatron_shape_of(g, &s))
    return ctx_fail(ctx, AP_UNSUPPORTED,
                    "megatron export: model %s is not a transformer Megatron-LM builds (it needs layer blocks with "
                    "attention, an MLP and an LM head, as from a preset or a Hugging Face config)",
                    g->name);
  ap_status st = megatron_model_check(ctx, &s, g);
  if (st) return st;
  if (p->offload_optimizer != PLAN_OFFLOAD_NONE || p->offload_param != PLAN_OFFLOAD_NONE)
    return unsupported(ctx, "Megatron-LM has no parameter offload to host memory or NVMe, and autopar does not "
                            "write its optimizer CPU offload (export offload plans to deepspeed)");
  if (p->pp > 1 && (p->schedule == PLAN_SCHED_ZB_H1 || p->schedule == PLAN_SCHED_ZB_V))
    return ctx_fail(ctx, AP_UNSUPPORTED,
                    "megatron export: Megatron-LM has no %s schedule (it runs 1F1B and interleaved 1F1B)",
                    plan_schedule_name(p->schedule));
  if (p->recompute == PLAN_RECOMPUTE_OP)
    return unsupported(ctx, "Megatron-LM has no per-op selective checkpointing (recompute \"op\", torchtitan's "
                            "selective_ac_option op)");
  int64_t seq = export_seq_length(p, g);
  if (s.learned_pos && seq > s.pos_rows)
    return ctx_fail(ctx, AP_INVALID,
                    "megatron export: seq_length = %lld exceeds the model's %lld learned positions (Megatron requires "
                    "max_position_embeddings >= seq_length)",
                    (long long)seq, (long long)s.pos_rows);
  if (!export_order_is(p, "tp-cp-ep-dp-pp") && !export_order_is(p, "tp-cp-ep-pp-dp")) {
    char mine[64];
    export_order_text(p, p->order, mine, sizeof mine);
    return ctx_fail(ctx, AP_UNSUPPORTED,
                    "megatron export: Megatron-LM numbers ranks tp-cp-ep-dp-pp, or tp-cp-ep-pp-dp with "
                    "--use-tp-pp-dp-mapping (initialize.py); the plan's order %s is neither",
                    mine);
  }
  if (s.n_experts <= 1 && p->ep > 1) return unsupported(ctx, "ep > 1 needs routed experts, and the model is dense");
  /* "Bias in Moe is only supported when ETP==1" (transformer_config.py): add_bias_linear stays on for a model
   * with biases on every linear layer. */
  if (s.n_experts > 1 && megatron_all_bias(&s) && plan_etp(p) != 1)
    return ctx_fail(ctx, AP_UNSUPPORTED,
                    "megatron export: the model has linear biases, and Megatron supports biases in MoE only with "
                    "expert tensor parallelism 1 (transformer_config.py), got etp = %lld",
                    (long long)plan_etp(p));
  return AP_OK;
}

/* ---- The pipeline split ---- */

/* "Et*4|t*4|t*4|t*3mL": the chunks in layer order (chunk c = virtual stage c / pp on rank c mod pp, plan.h). */
static void layout_text(const int32_t *layers, int64_t n, int64_t mtp, strbuf *sb) {
  for (int64_t c = 0; c < n; c++) {
    if (c) sb_puts(sb, "|");
    if (c == 0) sb_puts(sb, "E");
    if (layers[c] == 1) sb_puts(sb, "t");
    else if (layers[c] > 1) sb_printf(sb, "t*%d", (int)layers[c]);
    if (c == n - 1) {
      for (int64_t i = 0; i < mtp; i++) sb_puts(sb, "m");
      sb_puts(sb, "L");
    }
  }
}

static void pipeline_flags(margs *m, const plan *p, const graph *g, const int32_t *layers, const export_sched *sc) {
  margs_flag_i(m, "--pipeline-model-parallel-size", p->pp);
  if (p->pp == 1) return;
  int64_t n = plan_n_chunks(p);
  bool uniform = true;
  for (int64_t c = 1; c < n; c++) uniform = uniform && layers[c] == layers[0];
  if (uniform) {
    if (sc->chunks_per_stage > 1) margs_flag_i(m, "--num-layers-per-virtual-pipeline-stage", layers[0]);
    return;
  }
  strbuf lay = {0};
  sb_puts(&lay, "'");
  layout_text(layers, n, g->arch.mtp_layers, &lay);
  sb_puts(&lay, "'");
  margs_flag(m, "--pipeline-model-parallel-layout", lay.buf ? lay.buf : "");
  sb_free(&lay);
}

static void parallel_flags(margs *m, const plan *p, const mshape *s) {
  margs_flag_i(m, "--tensor-model-parallel-size", p->tp);
  margs_flag_i(m, "--context-parallel-size", p->cp);
  if (s->n_experts > 1) {
    margs_flag_i(m, "--expert-model-parallel-size", p->ep);
    margs_flag_i(m, "--expert-tensor-parallel-size", plan_etp(p));
  }
  if (export_order_is(p, "tp-cp-ep-pp-dp") && !export_order_is(p, "tp-cp-ep-dp-pp"))
    margs_flag(m, "--use-tp-pp-dp-mapping", NULL);
  if (p->sequence_parallel && p->tp > 1) margs_flag(m, "--sequence-parallel", NULL);
}

static void training_flags(margs *m, const plan *p, const export_sched *sc) {
  margs_flag_i(m, "--micro-batch-size", p->micro_batch_size);
  /* Megatron derives its micro-batches per iteration from this: global / (micro x dp), the schedule's count. */
  margs_flag_i(m, "--global-batch-size", p->micro_batch_size * sc->micro_batches * p->dp);
  if (p->recompute == PLAN_RECOMPUTE_SELECTIVE) {
    margs_flag(m, "--recompute-granularity", "selective");
  } else if (p->recompute == PLAN_RECOMPUTE_FULL) {
    margs_flag(m, "--recompute-granularity", "full");
    margs_flag(m, "--recompute-method", p->recompute_layers > 0 ? "block" : "uniform");
    margs_flag_i(m, "--recompute-num-layers", p->recompute_layers > 0 ? p->recompute_layers : 1);
  }
  bool fsdp = p->zero_stage >= 2;
  if (p->zero_stage == 1) margs_flag(m, "--use-distributed-optimizer", NULL);
  if (fsdp) {
    margs_flag(m, "--use-megatron-fsdp", NULL);
    margs_flag(m, "--data-parallel-sharding-strategy", p->zero_stage == 2 ? "optim_grads" : "optim_grads_params");
    margs_flag(m, "--ckpt-format", "fsdp_dtensor");
  }
  if (p->overlap_grad_reduce) margs_flag(m, "--overlap-grad-reduce", NULL);
  if (p->overlap_param_gather && p->zero_stage >= 1) {
    if (p->overlap_grad_reduce) margs_flag(m, "--overlap-param-gather", NULL);
    else margs_note(m, "note: --overlap-param-gather left out: Megatron accepts it only with --overlap-grad-reduce");
  }
  if (p->tp_comm_overlap && p->sequence_parallel && p->tp > 1) margs_flag(m, "--tp-comm-overlap", NULL);
  if (p->fused_loss) {
    margs_flag(m, "--cross-entropy-loss-fusion", NULL);
    margs_flag(m, "--cross-entropy-fusion-impl", "native");
  }
  margs_flag(m, p->precision == PLAN_PREC_FP16 ? "--fp16" : "--bf16", NULL);
  if (p->precision == PLAN_PREC_FP8) {
    margs_flag(m, "--fp8-format", "hybrid");
    margs_flag(m, "--fp8-recipe", "delayed");
  }
}

ap_status export_megatron(ap_ctx *ctx, const plan *p, const graph *g, const export_launch *l, strbuf *out) {
  ap_status st = megatron_can_express(ctx, p, g);
  if (st) return st;
  mshape s;
  megatron_shape_of(g, &s);
  int32_t layers[PLAN_MAX_CHUNKS];
  if (p->pp > 1 && !export_chunk_layers(p, g, layers)) return ctx_fail(ctx, AP_INTERNAL, "megatron export: no pipeline split");
  int64_t seq = export_seq_length(p, g);

  /* The schedule's facts (virtual stages, micro-batches, in flight) from the schedule data; a GPipe plan runs
   * as 1F1B, whose in-flight count the note gives. */
  export_sched sc, sc_run;
  if ((st = export_schedule_facts(ctx, p, &sc))) return st;
  sc_run = sc;
  if (p->pp > 1 && p->schedule == PLAN_SCHED_GPIPE) {
    plan q;
    if (plan_copy(&q, p)) return ctx_fail(ctx, AP_NOMEM, "out of memory");
    q.schedule = PLAN_SCHED_1F1B;
    st = export_schedule_facts(ctx, &q, &sc_run);
    plan_free(&q);
    if (st) return st;
  }
  margs a = {{0}, {0}};
  megatron_model_flags(&a, &s, g, seq);
  parallel_flags(&a, p, &s);
  pipeline_flags(&a, p, g, layers, &sc);
  training_flags(&a, p, &sc);

  /* The header: what the plan is, what the user still adds, and the environment Megatron checks. */
  strbuf h = {0};
  sb_puts(&h, "# autopar plan: ");
  export_summary(p, g, &h);
  sb_puts(&h, "\n# Megatron-LM @ d98e8a64 (August 2026) pretrain_gpt.py. Save as megatron.sh in Megatron-LM's folder; "
              "add data (--data-path or --mock-data),\n# tokenizer, optimizer, learning-rate and checkpoint flags.\n");
  sb_printf(&h, "# %lld ranks: Megatron derives dp = world / (tp x pp x cp) = %lld / (%lld x %lld x %lld) = %lld\n",
            (long long)plan_n_devices(p), (long long)plan_n_devices(p), (long long)p->tp, (long long)p->pp,
            (long long)p->cp, (long long)p->dp);
  export_launch_note(p, l, &h);
  if (p->zero_stage >= 2)
    sb_puts(&h, "# env: leave CUDA_DEVICE_MAX_CONNECTIONS unset or > 1 (Megatron-FSDP asserts it)\n");
  else if (p->tp > 1 || p->cp > 1)
    sb_puts(&h, "# env: export CUDA_DEVICE_MAX_CONNECTIONS=1 (Megatron asserts it for tp or cp > 1 before Blackwell)\n");
  export_schedule_note(&sc_run, &h);
  if (p->pp > 1 && p->schedule == PLAN_SCHED_GPIPE)
    sb_printf(&h, "# note: Megatron-LM has no GPipe schedule; it runs this plan as 1F1B (the same bubble, %lld chunk "
                  "passes in flight on stage 0 instead of GPipe's %lld)\n",
              (long long)sc_run.in_flight_stage0, (long long)sc.in_flight_stage0);
  if (g->arch.mtp_layers > 0)
    sb_printf(&h, "# note: --mtp-num-layers %lld trains the model's multi-token-prediction module, which the plan's "
                  "time and memory do not include\n",
              (long long)g->arch.mtp_layers);
  if (!g->arch.stated)
    sb_puts(&h, "# note: the model's source states no rope base, norm epsilon or dropout; Megatron's defaults stand "
                "where not written below\n");
  sb_puts(&h, a.notes.buf ? a.notes.buf : "");
  export_launch_comment(l, NULL, "megatron.sh", &h);
  export_torchrun(l, "${RDZV_HOST:?set RDZV_HOST to the address of the first node}", &h);
  sb_puts(&h, " pretrain_gpt.py \\\n");
  sb_puts(&h, a.body.buf ? a.body.buf : "");
  sb_puts(&h, "\n");
  sb_free(&a.body);
  sb_free(&a.notes);
  if (h.oom) {
    sb_free(&h);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  sb_puts(out, h.buf);
  sb_free(&h);
  return AP_OK;
}
