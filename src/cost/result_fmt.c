/* Formatting of a cost result as JSON and as text (cost layer). The JSON keys carry their units. */
#include <stdio.h>
#include <stdlib.h>

#include "core/jsonx.h"
#include "cost/internal.h"

static void mem_json(strbuf *sb, const cost_mem *m) {
  sb_printf(sb,
            "{\"params_bytes\":%.6g,\"grads_bytes\":%.6g,\"optimizer_bytes\":%.6g,\"activations_bytes\":%.6g,"
            "\"logits_bytes\":%.6g,\"buffers_bytes\":%.6g,\"overhead_bytes\":%.6g,\"total_bytes\":%.6g}",
            m->params, m->grads, m->optimizer, m->activations, m->logits, m->buffers, m->overhead, m->total);
}

char *cost_result_json(const cost_env *env, const plan *p, const cost_result *r) {
  strbuf sb = {0};
  const cost_time *t = &r->time;
  sb_puts(&sb, "{\"model\":");
  jx_sb_str(&sb, env->g->name);
  sb_puts(&sb, ",\"cluster\":");
  jx_sb_str(&sb, env->hc->name);
  sb_printf(&sb, ",\"n_devices\":%lld,\"device\":", (long long)env->hc->n_devices);
  jx_sb_str(&sb, env->cm.device.name);
  sb_puts(&sb, ",\"plan\":");
  plan_to_json(p, &sb);
  sb_printf(&sb,
            ",\"iteration_time_s\":%.6g,\"time_breakdown_s\":{\"forward\":%.6g,\"backward\":%.6g,\"recompute\":%.6g,"
            "\"bubble\":%.6g,\"tp_comm_exposed\":%.6g,\"cp_comm_exposed\":%.6g,\"ep_comm_exposed\":%.6g,"
            "\"pp_comm_exposed\":%.6g,\"dp_comm_exposed\":%.6g,\"optimizer\":%.6g}",
            r->iter_s, t->forward, t->backward, t->recompute, t->bubble, t->tp_comm, t->cp_comm, t->ep_comm, t->pp_comm,
            t->dp_comm, t->optimizer);
  sb_printf(&sb,
            ",\"tokens_per_iteration\":%.6g,\"tokens_per_s\":%.6g,\"tokens_per_s_per_device\":%.6g,"
            "\"flop_per_iteration\":{\"palm\":%.6g,\"megatron\":%.6g,\"hardware\":%.6g},"
            "\"mfu\":{\"palm\":%.4f,\"megatron\":%.4f,\"hardware\":%.4f,\"peak\":\"dense bf16\"},"
            "\"tflops_per_device\":{\"palm\":%.2f,\"megatron\":%.2f}",
            r->tokens_per_iter, r->tokens_per_s, r->tokens_per_s_per_device, r->flop_palm, r->flop_megatron,
            r->flop_hardware, r->mfu_palm, r->mfu_megatron, r->hfu, r->tflops_per_device_palm,
            r->tflops_per_device_megatron);
  sb_printf(&sb, ",\"memory\":{\"capacity_bytes\":%.6g,\"peak_bytes\":%.6g,\"peak_stage\":%d,\"fits\":%s,\"stages\":[",
            r->capacity_bytes, r->peak_mem_bytes, r->peak_rank, r->fits ? "true" : "false");
  for (int i = 0; i < r->n_ranks; i++) {
    if (i) sb_puts(&sb, ",");
    mem_json(&sb, &r->mem[i]);
  }
  sb_printf(&sb, "]},\"bound\":\"%s\"}\n", r->bound);
  return sb_take(&sb);
}

static double gib(double b) { return b / 1073741824.0; }

char *cost_result_text(const cost_env *env, const plan *p, const cost_result *r) {
  strbuf sb = {0};
  const cost_time *t = &r->time;
  sb_printf(&sb, "model    %s on %s (%lld x %s)\n", env->g->name, env->hc->name, (long long)env->hc->n_devices,
            env->cm.device.name);
  sb_printf(&sb, "plan     dp %lld, tp %lld, pp %lld, cp %lld, ep %lld, vpp %lld, %s, mbs %lld x %lld micro-batches, "
                 "gbs %lld, seq %lld, sp %d, recompute %s, zero %d, %s%s\n",
            (long long)p->dp, (long long)p->tp, (long long)p->pp, (long long)p->cp, (long long)p->ep, (long long)p->vpp,
            plan_schedule_name(p->schedule), (long long)p->micro_batch_size, (long long)p->n_micro_batches,
            (long long)p->global_batch_size, (long long)(p->seq_length ? p->seq_length : env->g->default_seq),
            p->sequence_parallel ? 1 : 0, plan_recompute_name(p->recompute), p->zero_stage,
            plan_precision_name(p->precision), p->fused_loss ? ", fused loss" : "");
  sb_printf(&sb, "\niteration  %.4f s   %.0f tokens/s   %.1f tokens/s/device   bound: %s\n", r->iter_s, r->tokens_per_s,
            r->tokens_per_s_per_device, r->bound);
  sb_printf(&sb, "MFU        %.1f%% (PaLM: 6N + attention, no causal discount)   %.1f%% (Megatron: causal /2)   "
                 "HFU %.1f%%   of dense bf16 peak\n",
            100 * r->mfu_palm, 100 * r->mfu_megatron, 100 * r->hfu);
  sb_printf(&sb, "TFLOP/s    %.1f per device (PaLM), %.1f (Megatron)\n\n", r->tflops_per_device_palm,
            r->tflops_per_device_megatron);
  sb_puts(&sb, "time breakdown (critical pipeline rank)\n");
  const struct {
    const char *name;
    double v;
  } rows[] = {{"forward", t->forward},         {"backward", t->backward},         {"recompute", t->recompute},
              {"pipeline bubble", t->bubble},  {"TP comm (exposed)", t->tp_comm}, {"CP comm (exposed)", t->cp_comm},
              {"EP comm (exposed)", t->ep_comm}, {"PP comm (exposed)", t->pp_comm}, {"DP comm (exposed)", t->dp_comm},
              {"optimizer step", t->optimizer}};
  for (size_t i = 0; i < AP_COUNT(rows); i++)
    if (rows[i].v > 0)
      sb_printf(&sb, "  %-20s %9.4f s  %5.1f%%\n", rows[i].name, rows[i].v, 100 * rows[i].v / r->iter_s);
  sb_printf(&sb, "\nmemory per device (GiB), capacity %.1f: %s\n", gib(r->capacity_bytes),
            r->fits ? "fits" : "DOES NOT FIT");
  sb_printf(&sb, "  %-6s %8s %8s %8s %8s %8s %8s %8s %8s\n", "stage", "params", "grads", "optim", "activ", "logits",
            "buffers", "overhd", "total");
  for (int i = 0; i < r->n_ranks; i++) {
    const cost_mem *m = &r->mem[i];
    sb_printf(&sb, "  %-6d %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f%s\n", i, gib(m->params), gib(m->grads),
              gib(m->optimizer), gib(m->activations), gib(m->logits), gib(m->buffers), gib(m->overhead), gib(m->total),
              i == r->peak_rank ? "  <- peak" : "");
  }
  return sb_take(&sb);
}
