/* The torchtitan exporter (plan layer): a plan as a torchtitan job config in the legacy TOML form, with the
 * keys of COSTMODEL.md §6.4 (torchtitan/config/job_config.py at the parent of commit 9810191b, the last
 * release before TOML gave way to Python dataclass configs). The sections written are [training],
 * [parallelism], [activation_checkpoint] and, for async tensor parallelism, [compile]; the user merges them
 * into the model's own train config, which names the model ([model] name and flavor), the optimizer and the
 * data.
 *
 * Conventions read in torchtitan @ that commit:
 *  - data parallelism is data_parallel_replicate_degree × data_parallel_shard_degree; the shard degree (and
 *    the context-parallel ranks) use FSDP2, the replicate degree alone uses DDP, which torchtitan runs only as
 *    the sole parallelism ("DDP has not supported > 1D parallelism", llama3/infra/parallelize.py). There is
 *    no ZeRO-1/2: ZeRO-3 maps to FSDP2 resharding after forward ("always"); ZeRO 0-2 map to DDP where it runs,
 *    else to FSDP2 that keeps parameters gathered from forward to backward ("never"), and a comment says so;
 *  - with pipeline parallelism local_batch_size is split into micro-batches of
 *    pipeline_parallel_microbatch_size; without it the micro-batches are gradient-accumulation steps,
 *    global_batch_size / (local_batch_size × dp);
 *  - the split is stated exactly by module_fqns_per_model_part (tok_embeddings, layers.N, norm, output: the
 *    module names of torchtitan's llama3, qwen3 and deepseek_v3 models), one list per chunk in forward order;
 *    looped schedules place chunk c on rank c mod pp and ZBVZeroBubble in a V (distributed/pipeline_parallel.py),
 *    as plan.h does;
 *  - expert_tensor_parallel_degree is 1 or tp ("Currently we only support ETP=TP or ETP=1", parallel_dims.py).
 * docs/exports.md has the mapping table. */
#include <stdio.h>

#include "plan/export.h"

/* torch.distributed.pipelining schedule names, indexed by plan_schedule. zb-h1 is ZB1P (Qi et al. 2024),
 * which ScheduleInterleavedZeroBubble implements; with one stage per rank it is the plan's zb-h1. */
static const char *const schedule_names[] = {
    [PLAN_SCHED_GPIPE] = "GPipe",
    [PLAN_SCHED_1F1B] = "1F1B",
    [PLAN_SCHED_INTERLEAVED_1F1B] = "Interleaved1F1B",
    [PLAN_SCHED_ZB_H1] = "InterleavedZeroBubble",
    [PLAN_SCHED_ZB_V] = "ZBVZeroBubble",
};
_Static_assert(AP_COUNT(schedule_names) == PLAN_SCHED_COUNT_, "schedule_names and plan_schedule disagree");

static ap_status unsupported(ap_ctx *ctx, const char *why) {
  return ctx_fail(ctx, AP_UNSUPPORTED, "torchtitan export: %s", why);
}

/* module_fqns_per_model_part: one line per chunk. */
static void fqns(strbuf *sb, const int32_t *layers, int64_t n_chunks) {
  sb_puts(sb, "module_fqns_per_model_part = [\n");
  int64_t next = 0;
  for (int64_t c = 0; c < n_chunks; c++) {
    bool first = true;
    sb_puts(sb, "  [");
    if (c == 0) {
      sb_puts(sb, "\"tok_embeddings\"");
      first = false;
    }
    for (int32_t i = 0; i < layers[c]; i++, next++) {
      sb_printf(sb, "%s\"layers.%lld\"", first ? "" : ", ", (long long)next);
      first = false;
    }
    if (c == n_chunks - 1) sb_printf(sb, "%s\"norm\", \"output\"", first ? "" : ", ");
    sb_puts(sb, c == n_chunks - 1 ? "]\n" : "],\n");
  }
  sb_puts(sb, "]\n");
}

ap_status export_torchtitan(ap_ctx *ctx, const plan *p, const graph *g, strbuf *out) {
  plan_model_facts f;
  plan_model_facts_of(g, &f);
  if (!f.has_layers || f.n_attention_ops == 0)
    return ctx_fail(ctx, AP_UNSUPPORTED,
                    "torchtitan export: torchtitan trains its own transformer models, and model %s has no attention "
                    "layers",
                    g->name);
  if (p->precision == PLAN_PREC_FP16)
    return unsupported(ctx, "torchtitan's mixed precision is bfloat16 or float32, not fp16; re-plan with bf16");
  if (p->fused_loss)
    return unsupported(ctx, "torchtitan's loss is PyTorch's cross_entropy, with no fused in-place option in its "
                            "job config; re-plan without fused_loss");
  int64_t etp = plan_etp(p);
  bool moe = f.n_experts > 1;
  if (moe && p->ep > 1 && etp != 1 && etp != p->tp)
    return ctx_fail(ctx, AP_UNSUPPORTED,
                    "torchtitan export: torchtitan supports expert_tensor_parallel_degree 1 or tp (= %lld) only, "
                    "got etp = %lld",
                    (long long)p->tp, (long long)etp);
  int32_t layers[PLAN_MAX_CHUNKS];
  if (!export_chunk_layers(p, g, layers)) return ctx_fail(ctx, AP_INTERNAL, "torchtitan export: no pipeline split");
  int64_t n_chunks = plan_n_chunks(p);
  int32_t most = 0;
  for (int64_t c = 0; c < n_chunks; c++) most = layers[c] > most ? layers[c] : most;
  bool full = p->recompute == PLAN_RECOMPUTE_FULL;
  if (full && p->recompute_layers > 0 && p->recompute_layers < most)
    return unsupported(ctx, "torchtitan cannot recompute only the first layers of each chunk (recompute "
                            "num_layers > 0); re-plan with full recompute of every layer or selective");

  bool pipe = p->pp > 1;
  bool ddp = p->dp > 1 && p->zero_stage == 0 && p->tp == 1 && p->pp == 1 && p->cp == 1 && p->ep == 1;
  int64_t replicate = ddp ? p->dp : 1, shard = ddp ? 1 : p->dp;
  bool async_tp = p->tp_comm_overlap && p->tp > 1;

  strbuf sb = {0};
  sb_puts(&sb, "# autopar plan: ");
  export_summary(p, g, &sb);
  sb_puts(&sb, "\n# torchtitan job config, legacy TOML (job_config.py before the 2026 dataclass configs; keys from "
               "COSTMODEL.md §6.4).\n# Merge into the model's train config: [model] name and flavor, [optimizer], "
               "data and checkpointing stay yours.\n");
  sb_printf(&sb, "# launch %lld ranks\n", (long long)plan_n_devices(p));
  if (shard > 1 && p->zero_stage < 3)
    sb_printf(&sb, "# note: torchtitan has no ZeRO-%d%s; it shards with FSDP2 and keeps parameters gathered from "
                   "forward to backward (fsdp_reshard_after_forward = \"never\"), so parameters at rest take less "
                   "memory than planned\n",
              (int)p->zero_stage, p->zero_stage == 0 ? " with tp, pp, cp or ep (its DDP is one-dimensional)" : "");
  if (ddp) sb_puts(&sb, "# note: plain data parallelism runs as torchtitan's DDP (data_parallel_replicate_degree)\n");
  if (p->cp > 1) sb_puts(&sb, "# note: torchtitan applies FSDP2 over the context-parallel ranks as well\n");
  if (p->tp > 1 && !p->sequence_parallel)
    sb_puts(&sb, "# note: torchtitan's tensor parallelism always splits norms along the sequence (sequence parallel)\n");
  if (p->precision == PLAN_PREC_FP8)
    sb_puts(&sb, "# fp8: add converters = [\"float8\"] to [model] (torchtitan's Float8Linear)\n");
  export_order_note(p, "torchtitan", &sb);
  if (pipe && p->schedule == PLAN_SCHED_ZB_H1)
    sb_puts(&sb, "# note: zb-h1 is InterleavedZeroBubble (ZB1P) run with one stage per rank\n");

  sb_puts(&sb, "\n[training]\n");
  sb_printf(&sb, "local_batch_size = %lld\n",
            (long long)(pipe ? p->micro_batch_size * p->n_micro_batches : p->micro_batch_size));
  sb_printf(&sb, "global_batch_size = %lld\n", (long long)p->global_batch_size);
  sb_printf(&sb, "seq_len = %lld\n", (long long)export_seq_length(p, g));
  sb_puts(&sb, "mixed_precision_param = \"bfloat16\"\n");

  sb_puts(&sb, "\n[parallelism]\n");
  sb_printf(&sb, "data_parallel_replicate_degree = %lld\n", (long long)replicate);
  sb_printf(&sb, "data_parallel_shard_degree = %lld\n", (long long)shard);
  bool fsdp = shard > 1 || p->cp > 1;
  sb_printf(&sb, "fsdp_reshard_after_forward = \"%s\"\n",
            !fsdp ? "default" : p->zero_stage == 3 ? "always" : "never");
  sb_printf(&sb, "tensor_parallel_degree = %lld\n", (long long)p->tp);
  sb_printf(&sb, "enable_async_tensor_parallel = %s\n", async_tp ? "true" : "false");
  sb_printf(&sb, "pipeline_parallel_degree = %lld\n", (long long)p->pp);
  if (pipe) {
    sb_printf(&sb, "pipeline_parallel_schedule = \"%s\"\n", schedule_names[p->schedule]);
    sb_printf(&sb, "pipeline_parallel_microbatch_size = %lld\n", (long long)p->micro_batch_size);
    fqns(&sb, layers, n_chunks);
  }
  sb_printf(&sb, "context_parallel_degree = %lld\n", (long long)p->cp);
  sb_printf(&sb, "expert_parallel_degree = %lld\n", (long long)p->ep);
  sb_printf(&sb, "expert_tensor_parallel_degree = %lld\n", (long long)(moe && p->ep > 1 ? etp : 1));

  sb_puts(&sb, "\n[activation_checkpoint]\n");
  if (p->recompute == PLAN_RECOMPUTE_OP) {
    sb_puts(&sb, "mode = \"selective\"\nselective_ac_option = \"op\"\n");
  } else if (p->recompute == PLAN_RECOMPUTE_SELECTIVE) {
    /* Megatron's core-attention recompute: torchtitan's attention is SDPA's flash kernel, which keeps no s×s
     * scores, so there is nothing to recompute (the plan's memory is the same; its time counted the attention
     * forward once more, which torchtitan then saves). */
    sb_puts(&sb, "# recompute \"selective\" (core attention only): SDPA flash attention keeps no scores to drop\n"
                 "mode = \"none\"\n");
  } else {
    sb_printf(&sb, "mode = \"%s\"\n", plan_recompute_name(p->recompute)); /* none, full: the same names */
  }

  if (async_tp) sb_puts(&sb, "\n# async tensor parallelism takes effect only when compiled\n[compile]\nenable = true\n"
                              "components = [\"model\", \"loss\"]\n");
  if (sb.oom) {
    sb_free(&sb);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  sb_puts(out, sb.buf);
  sb_free(&sb);
  return AP_OK;
}
