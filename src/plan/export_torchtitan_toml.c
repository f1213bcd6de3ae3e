/* The torchtitan exporter, TOML form (plan layer): a plan as a torchtitan job config for v0.2.x, the last
 * releases that read TOML (v0.2.2 = pytorch/torchtitan @ 73a0e6979dd10b6b1904098eb3c8f62c18ab87ce, just
 * before commit 9810191b replaced the TOML job config by a Python dataclass registry; export_torchtitan.c
 * writes that form). Every key written is in tests/data/framework_args.tsv under torchtitan-toml. The
 * sections written are [model], [training], [parallelism], [activation_checkpoint] and, for async tensor
 * parallelism, [compile]; the user merges them into the model's train config
 * (torchtitan/models/MODEL/train_configs/, one TOML file per size), which keeps the optimizer, data and checkpointing.
 *
 * Conventions read in torchtitan @ v0.2.2 (torchtitan/config/job_config.py and the code it names):
 *  - data parallelism is data_parallel_replicate_degree × data_parallel_shard_degree; the shard degree (and
 *    the context-parallel ranks) use FSDP2, the replicate degree alone uses DDP, which torchtitan runs only as
 *    the sole parallelism ("DDP has not supported > 1D parallelism", models/deepseek_v3/infra/parallelize.py).
 *    There is no ZeRO-1/2: ZeRO-3 maps to FSDP2 resharding after forward ("always"); ZeRO 0-2 map to DDP where
 *    it runs, else to FSDP2 that keeps parameters gathered from forward to backward ("never");
 *  - with pipeline parallelism local_batch_size is split into micro-batches of
 *    pipeline_parallel_microbatch_size; without it the micro-batches are gradient-accumulation steps,
 *    global_batch_size / (local_batch_size × dp);
 *  - expert_tensor_parallel_degree is 1 or tp ("Currently we only support ETP=TP or ETP=1",
 *    distributed/parallel_dims.py);
 *  - float8 is the converter registered as "quantize.linear.float8" (components/quantization/float8.py),
 *    listed in [model] converters;
 *  - activation_checkpoint.mode is "none", "full" or "selective" with selective_ac_option "op" (per op) or a
 *    layer interval. */
#include <stdio.h>

#include "plan/export.h"

ap_status torchtitan_toml_can_express(ap_ctx *ctx, const plan *p, const graph *g) {
  const tt_flavor *t;
  ap_status st = tt_model_of(ctx, "torchtitan-toml", g, TT_TOML, &t);
  if (!st) st = tt_common_check(ctx, "torchtitan-toml", p, g);
  if (st) return st;
  if (p->fused_loss)
    return ctx_fail(ctx, AP_UNSUPPORTED,
                    "torchtitan-toml export: torchtitan v0.2.2's loss is the unchunked cross entropy "
                    "(components/loss.py); the fused loss the plan has, ChunkedLossWrapper, came later (9530a874, "
                    "--format torchtitan)");
  int64_t etp = plan_etp(p);
  if (p->ep > 1 && etp != 1 && etp != p->tp)
    return ctx_fail(ctx, AP_UNSUPPORTED,
                    "torchtitan-toml export: torchtitan v0.2.2 supports expert_tensor_parallel_degree 1 or tp (= %lld) "
                    "only, got etp = %lld",
                    (long long)p->tp, (long long)etp);
  return AP_OK;
}

ap_status export_torchtitan_toml(ap_ctx *ctx, const plan *p, const graph *g, const export_launch *l, strbuf *out) {
  ap_status st = torchtitan_toml_can_express(ctx, p, g);
  if (st) return st;
  const tt_flavor *t;
  tt_model_of(ctx, "torchtitan-toml", g, TT_TOML, &t);
  int32_t layers[PLAN_MAX_CHUNKS];
  export_chunk_layers(p, g, layers);
  bool moe = t->n_experts > 0;
  bool pipe = p->pp > 1;
  bool ddp = p->dp > 1 && p->zero_stage == 0 && p->tp == 1 && p->pp == 1 && p->cp == 1 && p->ep == 1;
  int64_t replicate = ddp ? p->dp : 1, shard = ddp ? 1 : p->dp;
  bool async_tp = p->tp_comm_overlap && p->tp > 1;
  export_sched sc; /* the schedule's kind and micro-batches, from the schedule data */
  if ((st = export_schedule_facts(ctx, p, &sc))) return st;

  strbuf sb = {0};
  sb_puts(&sb, "# autopar plan: ");
  export_summary(p, g, &sb);
  sb_puts(&sb, "\n# torchtitan v0.2.x job config (TOML; v0.2.2 is the last release that reads it, later sources take "
               "--format torchtitan).\n# Merge into the model's train config; [optimizer], data and checkpointing "
               "stay yours.\n");
  export_launch_comment(l, " -m torchtitan.train --job.config_file THIS.toml", NULL, &sb);
  sb_printf(&sb, "# %lld ranks\n", (long long)plan_n_devices(p));
  export_launch_note(p, l, &sb);
  if (shard > 1 && p->zero_stage < 3)
    sb_printf(&sb, "# note: torchtitan has no ZeRO-%d%s; it shards with FSDP2 and keeps parameters gathered from "
                   "forward to backward (fsdp_reshard_after_forward = \"never\"), so parameters at rest take less "
                   "memory than planned\n",
              (int)p->zero_stage, p->zero_stage == 0 ? " with tp, pp, cp or ep (its DDP is one-dimensional)" : "");
  if (ddp) sb_puts(&sb, "# note: plain data parallelism runs as torchtitan's DDP (data_parallel_replicate_degree)\n");
  if (p->cp > 1) sb_puts(&sb, "# note: torchtitan applies FSDP2 over the context-parallel ranks as well\n");
  if (p->tp > 1 && !p->sequence_parallel)
    sb_puts(&sb, "# note: torchtitan v0.2.2's tensor parallelism always splits norms along the sequence (sequence "
                 "parallel)\n");
  if (pipe && p->schedule == PLAN_SCHED_ZB_H1)
    sb_puts(&sb, "# note: zb-h1 is InterleavedZeroBubble (ZB1P) run with one stage per rank\n");
  export_schedule_note(&sc, &sb);

  sb_printf(&sb, "\n[model]\nname = \"%s\"\nflavor = \"%s\"\n", t->model, t->flavor);
  if (p->precision == PLAN_PREC_FP8) sb_puts(&sb, "converters = [\"quantize.linear.float8\"]\n");

  sb_puts(&sb, "\n[training]\n");
  /* With pp the local batch is split into the schedule's micro-batches (pipeline_parallel_microbatch_size each). */
  sb_printf(&sb, "local_batch_size = %lld\n",
            (long long)(pipe ? p->micro_batch_size * sc.micro_batches : p->micro_batch_size));
  sb_printf(&sb, "global_batch_size = %lld\n", (long long)p->global_batch_size);
  sb_printf(&sb, "seq_len = %lld\n", (long long)export_seq_length(p, g));
  sb_puts(&sb, "mixed_precision_param = \"bfloat16\"\n");

  sb_puts(&sb, "\n[parallelism]\n");
  sb_printf(&sb, "data_parallel_replicate_degree = %lld\n", (long long)replicate);
  sb_printf(&sb, "data_parallel_shard_degree = %lld\n", (long long)shard);
  bool fsdp = shard > 1 || p->cp > 1;
  sb_printf(&sb, "fsdp_reshard_after_forward = \"%s\"\n", !fsdp ? "default" : p->zero_stage == 3 ? "always" : "never");
  sb_printf(&sb, "tensor_parallel_degree = %lld\n", (long long)p->tp);
  sb_printf(&sb, "enable_async_tensor_parallel = %s\n", async_tp ? "true" : "false");
  sb_printf(&sb, "pipeline_parallel_degree = %lld\n", (long long)p->pp);
  if (pipe) {
    sb_printf(&sb, "pipeline_parallel_schedule = \"%s\"\n", tt_schedule_name(sc.kind));
    sb_printf(&sb, "pipeline_parallel_microbatch_size = %lld\n", (long long)p->micro_batch_size);
    sb_puts(&sb, "module_fqns_per_model_part = [\n");
    tt_fqns(&sb, "  ", layers, plan_n_chunks(p), "\"norm\", \"output\"");
    sb_puts(&sb, "]\n");
  }
  sb_printf(&sb, "context_parallel_degree = %lld\n", (long long)p->cp);
  sb_printf(&sb, "expert_parallel_degree = %lld\n", (long long)p->ep);
  sb_printf(&sb, "expert_tensor_parallel_degree = %lld\n", (long long)(moe && p->ep > 1 ? plan_etp(p) : 1));

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

  if (async_tp)
    sb_puts(&sb, "\n# async tensor parallelism takes effect only when compiled\n[compile]\nenable = true\n"
                 "components = [\"model\", \"loss\"]\n");
  if (sb.oom) {
    sb_free(&sb);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  sb_puts(out, sb.buf);
  sb_free(&sb);
  return AP_OK;
}
