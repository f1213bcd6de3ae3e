/* The public plan API (plan layer): creating, reading, setting by name and printing plans. Setting by name is
 * what the CLI's --tp 8 --pp 4 … flags call, one table entry per key. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_api.h"

ap_status ap_plan_new(ap_ctx *ctx, ap_plan **out) {
  *out = calloc(1, sizeof **out);
  if (!*out) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  plan_defaults(&(*out)->p);
  return AP_OK;
}

void ap_plan_free(ap_plan *ap) { free(ap); }

ap_status ap_plan_load(ap_ctx *ctx, const char *path, ap_plan **out) {
  *out = NULL;
  json_t *root = NULL;
  ap_status st = jx_load_file(ctx, path, &root);
  if (st) return st;
  ap_plan *ap = calloc(1, sizeof *ap);
  if (!ap) {
    json_decref(root);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  st = plan_from_json(ctx, path, root, &ap->p);
  json_decref(root);
  if (st) {
    free(ap);
    return st;
  }
  /* A plan file states its degrees and batch in full. */
  ap->dp_set = ap->n_micro_set = ap->gbs_set = true;
  *out = ap;
  return AP_OK;
}

ap_status ap_plan_json(ap_ctx *ctx, const ap_plan *ap, char **json_out) {
  strbuf sb = {0};
  plan_to_json(&ap->p, &sb);
  sb_puts(&sb, "\n");
  *json_out = sb_take(&sb);
  return *json_out ? AP_OK : ctx_fail(ctx, AP_NOMEM, "out of memory");
}

void plan_resolve(ap_plan *ap, int64_t n_devices) {
  plan *p = &ap->p;
  int64_t inner = p->tp * p->pp * p->cp;
  if (!ap->dp_set && inner > 0 && n_devices % inner == 0) p->dp = n_devices / inner;
  int64_t per = p->micro_batch_size * p->dp;
  if (!ap->n_micro_set && ap->gbs_set && per > 0 && p->global_batch_size % per == 0)
    p->n_micro_batches = p->global_batch_size / per;
  if (!ap->gbs_set) p->global_batch_size = per * p->n_micro_batches;
}

typedef enum { K_I64, K_I32, K_BOOL, K_SCHED, K_RECOMP, K_PREC, K_STACK, K_ORDER, K_STAGES } key_kind;

static const struct {
  const char *key;
  key_kind kind;
  size_t offset;
  const char *help;
} keys[] = {
    {"tp", K_I64, offsetof(plan, tp), "tensor-parallel degree"},
    {"pp", K_I64, offsetof(plan, pp), "pipeline-parallel degree"},
    {"dp", K_I64, offsetof(plan, dp), "data-parallel degree"},
    {"cp", K_I64, offsetof(plan, cp), "context-parallel degree"},
    {"ep", K_I64, offsetof(plan, ep), "expert-parallel degree"},
    {"etp", K_I64, offsetof(plan, etp), "expert tensor-parallel degree"},
    {"vpp", K_I64, offsetof(plan, vpp), "virtual stages per pipeline rank"},
    {"mbs", K_I64, offsetof(plan, micro_batch_size), "micro-batch size, sequences"},
    {"gbs", K_I64, offsetof(plan, global_batch_size), "global batch, sequences"},
    {"seq", K_I64, offsetof(plan, seq_length), "sequence length, tokens"},
    {"micro-batches", K_I64, offsetof(plan, n_micro_batches), "micro-batches per iteration"},
    {"recompute-layers", K_I32, offsetof(plan, recompute_layers), "layers per chunk with full recompute"},
    {"zero", K_I32, offsetof(plan, zero_stage), "ZeRO stage 0-3"},
    {"sp", K_BOOL, offsetof(plan, sequence_parallel), "sequence parallel (0 or 1)"},
    {"fused-loss", K_BOOL, offsetof(plan, fused_loss), "fused in-place cross entropy (0 or 1)"},
    {"tp-comm-overlap", K_BOOL, offsetof(plan, tp_comm_overlap), "TP communication overlap"},
    {"overlap-grad-reduce", K_BOOL, offsetof(plan, overlap_grad_reduce), "overlap gradient reduction"},
    {"overlap-param-gather", K_BOOL, offsetof(plan, overlap_param_gather), "overlap parameter gather"},
    {"schedule", K_SCHED, offsetof(plan, schedule), "gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-v"},
    {"recompute", K_RECOMP, offsetof(plan, recompute), "none, selective, op, full"},
    {"precision", K_PREC, offsetof(plan, precision), "bf16, fp16, fp8"},
    {"stack", K_STACK, offsetof(plan, stack),
     "megatron-lm, megatron-bridge, nemo, megatron-deepspeed, torchtitan, llm-foundry, deepspeed, autopar, any"},
    {"order", K_ORDER, offsetof(plan, order), "mesh order, innermost first, e.g. tp,cp,ep,dp,pp"},
    {"stage-layers", K_STAGES, offsetof(plan, stage_layers), "layers per pipeline chunk, e.g. 20,20,20,20"},
};

ap_status ap_plan_set(ap_ctx *ctx, ap_plan *ap, const char *key, const char *value) {
  char *base = (char *)&ap->p;
  for (size_t i = 0; i < AP_COUNT(keys); i++) {
    if (strcmp(keys[i].key, key) != 0) continue;
    void *f = base + keys[i].offset;
    switch (keys[i].kind) {
    case K_I64:
    case K_I32: {
      int64_t v = 0;
      bool zero_ok = keys[i].kind == K_I32 || strcmp(key, "etp") == 0;
      if (zero_ok && strcmp(value, "0") == 0) v = 0;
      else if (!util_parse_i64(value, &v) || v > PLAN_MAX_COUNT)
        return ctx_fail(ctx, AP_INVALID, "--%s: expected a positive integer (%s), got \"%s\"", key, keys[i].help, value);
      if (keys[i].kind == K_I32) {
        if (v > 1 << 30) return ctx_fail(ctx, AP_INVALID, "--%s: value too large: %s", key, value);
        *(int32_t *)f = (int32_t)v;
      } else {
        *(int64_t *)f = v;
      }
      if (strcmp(key, "dp") == 0) ap->dp_set = true;
      if (strcmp(key, "micro-batches") == 0) ap->n_micro_set = true;
      if (strcmp(key, "gbs") == 0) ap->gbs_set = true;
      return AP_OK;
    }
    case K_BOOL:
      if (strcmp(value, "1") == 0 || strcmp(value, "true") == 0) *(bool *)f = true;
      else if (strcmp(value, "0") == 0 || strcmp(value, "false") == 0) *(bool *)f = false;
      else return ctx_fail(ctx, AP_INVALID, "--%s: expected 0 or 1, got \"%s\"", key, value);
      return AP_OK;
    case K_SCHED:
      if (!plan_schedule_from_name(value, (plan_schedule *)f))
        return ctx_fail(ctx, AP_INVALID, "--%s: expected one of %s, got \"%s\"", key, keys[i].help, value);
      return AP_OK;
    case K_RECOMP:
      if (!plan_recompute_from_name(value, (plan_recompute *)f))
        return ctx_fail(ctx, AP_INVALID, "--%s: expected one of %s, got \"%s\"", key, keys[i].help, value);
      return AP_OK;
    case K_PREC:
      if (!plan_precision_from_name(value, (plan_precision *)f))
        return ctx_fail(ctx, AP_INVALID, "--%s: expected one of %s, got \"%s\"", key, keys[i].help, value);
      return AP_OK;
    case K_STACK:
      if (!plan_stack_from_name(value, (plan_stack *)f))
        return ctx_fail(ctx, AP_INVALID, "--%s: expected one of %s, got \"%s\"", key, keys[i].help, value);
      return AP_OK;
    case K_ORDER: {
      plan_axis order[PLAN_N_ORDER];
      int n = 0;
      char buf[128];
      snprintf(buf, sizeof buf, "%s", value);
      char *save = NULL;
      for (char *tok = strtok_r(buf, ",-", &save); tok; tok = strtok_r(NULL, ",-", &save)) {
        if (n >= PLAN_N_ORDER || !plan_axis_from_name(tok, &order[n]) || order[n] > PLAN_AXIS_PP)
          return ctx_fail(ctx, AP_INVALID, "--order: expected a permutation of tp,cp,ep,dp,pp, got \"%s\"", value);
        n++;
      }
      if (n != PLAN_N_ORDER)
        return ctx_fail(ctx, AP_INVALID, "--order: expected a permutation of tp,cp,ep,dp,pp, got \"%s\"", value);
      memcpy(ap->p.order, order, sizeof order);
      return AP_OK;
    }
    case K_STAGES: {
      int32_t n = 0;
      const char *q = value;
      while (*q) {
        char *end = NULL;
        long v = strtol(q, &end, 10);
        if (end == q || v < 0 || v > 1 << 20 || n >= PLAN_MAX_CHUNKS || (*end && *end != ','))
          return ctx_fail(ctx, AP_INVALID, "--stage-layers: expected comma-separated layer counts, got \"%s\"", value);
        ap->p.stage_layers[n++] = (int32_t)v;
        q = *end ? end + 1 : end;
      }
      ap->p.n_stage_layers = n;
      return AP_OK;
    }
    }
  }
  return ctx_fail(ctx, AP_INVALID, "plan: unknown field \"%s\"", key);
}
