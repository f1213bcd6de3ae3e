/* The public plan API (plan layer): creating, reading, setting by name and printing plans. Setting by name is
 * what the CLI's --tp 8 --pp 4 … flags call; the keys, their aliases and their parsing are the field table's
 * (plan_fields.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_api.h"
#include "plan/stack.h"

ap_status ap_plan_new(ap_ctx *ctx, ap_plan **out) {
  API_ENTER(ctx);
  if (!ctx || !out) return ctx_fail(ctx, AP_INVALID, "ap_plan_new: ctx and out must not be NULL");
  *out = calloc(1, sizeof **out);
  if (!*out) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  plan_defaults(&(*out)->p);
  return AP_OK;
}

void ap_plan_free(ap_plan *ap) {
  if (!ap) return;
  if (ap->doc2) json_decref(ap->doc2);
  plan_free(&ap->p);
  free(ap);
}

ap_status plan_blame_file(ap_ctx *ctx, const ap_plan *ap, ap_status st) {
  if ((st != AP_INVALID && st != AP_UNSUPPORTED) || !ctx || !ap || !ap->origin[0] || strncmp(ctx->error, "plan: ", 6) != 0)
    return st;
  char msg[sizeof ctx->error];
  snprintf(msg, sizeof msg, "%s", ctx->error + 6);
  return ctx_fail(ctx, st, "%s: %s", ap->origin, msg);
}

ap_status ap_plan_load(ap_ctx *ctx, const char *path, ap_plan **out) {
  API_ENTER(ctx);
  if (!ctx || !out) return ctx_fail(ctx, AP_INVALID, "ap_plan_load: ctx and out must not be NULL");
  *out = NULL;
  if (!path || !*path) return ctx_fail(ctx, AP_INVALID, "ap_plan_load: expected a plan file name");
  json_t *root = NULL;
  ap_status st = jx_load_file(ctx, path, &root);
  if (st) return st;
  ap_plan *ap = calloc(1, sizeof *ap);
  if (!ap) {
    json_decref(root);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  json_t *format = json_is_object(root) ? json_object_get(root, "format") : NULL;
  if (json_is_string(format) && strcmp(json_string_value(format), PLAN_FORMAT_2) == 0) {
    /* An op-level plan: kept whole until its graph is known (ap_graph_plan_estimate and the others). */
    plan_defaults(&ap->p);
    ap->doc2 = root;
    snprintf(ap->origin, sizeof ap->origin, "%s", path);
    *out = ap;
    return AP_OK;
  }
  if (json_is_string(format) && strcmp(json_string_value(format), "autopar-plan/1") != 0) {
    /* Named before the /1 reader would stop at the first key it does not know. */
    st = ctx_fail(ctx, AP_INVALID, "%s: format: expected \"autopar-plan/1\" or \"%s\", got \"%.64s\"", path,
                  PLAN_FORMAT_2, json_string_value(format));
    json_decref(root);
    free(ap);
    return st;
  }
  st = plan_from_json(ctx, path, root, &ap->p);
  ap->loss_set = json_object_get(root, "fused_loss") != NULL;
  ap->prec_set = json_object_get(root, "precision") != NULL;
  json_decref(root);
  if (st) {
    free(ap);
    return st;
  }
  snprintf(ap->origin, sizeof ap->origin, "%s", path);
  /* A plan file states its degrees and batch in full. */
  ap->dp_set = ap->n_micro_set = ap->gbs_set = true;
  *out = ap;
  return AP_OK;
}

int ap_plan_format(const ap_plan *ap) { return ap && ap->doc2 ? 2 : 1; }

ap_status plan_refuse_doc2(ap_ctx *ctx, const ap_plan *ap, const char *what) {
  if (!ap || !ap->doc2) return AP_OK;
  return ctx_fail(ctx, AP_INVALID, "%s: an autopar-plan/2 plan (a general graph's op-level plan) is read against its "
                  "graph: %s does not take it (estimate, simulate and export it with --model naming the graph; "
                  "ap_graph_plan_estimate in the library)", ap->origin, what);
}

ap_status ap_plan_json(ap_ctx *ctx, const ap_plan *ap, char **json_out) {
  API_ENTER(ctx);
  if (json_out) *json_out = NULL;
  if (!ctx || !ap || !json_out) return ctx_fail(ctx, AP_INVALID, "ap_plan_json: ctx, plan and json_out must not be NULL");
  ap_status refused = plan_refuse_doc2(ctx, ap, "ap_plan_json");
  if (refused) return refused;
  strbuf sb = {0};
  plan_to_json(&ap->p, &sb);
  sb_puts(&sb, "\n");
  *json_out = sb_take(&sb);
  return *json_out ? AP_OK : ctx_fail(ctx, AP_NOMEM, "out of memory");
}

void plan_resolve(ap_plan *ap, int64_t n_devices) {
  plan *p = &ap->p;
  /* Sequence parallelism splits along the tensor-parallel group: with tp = 1 it is nothing, and Megatron-LM
   * turns it off (megatron/training/arguments.py validate_args: sequence_parallel = False when
   * tensor_model_parallel_size == 1). The plan says so too, so that its JSON and its summary agree. */
  if (p->tp == 1) p->sequence_parallel = false;
  if (!ap->loss_set) p->fused_loss = plan_stack_fused_default(p->stack);
  int64_t inner = p->tp * p->pp * p->cp;
  if (!ap->dp_set && inner > 0 && n_devices % inner == 0) p->dp = n_devices / inner;
  int64_t per = p->micro_batch_size * p->dp;
  if (!ap->n_micro_set && ap->gbs_set && per > 0 && p->global_batch_size % per == 0)
    p->n_micro_batches = p->global_batch_size / per;
  if (!ap->gbs_set) p->global_batch_size = per * p->n_micro_batches;
}

ap_status ap_plan_set(ap_ctx *ctx, ap_plan *ap, const char *key, const char *value) {
  API_ENTER(ctx);
  if (!ctx || !ap || !key || !value) return ctx_fail(ctx, AP_INVALID, "ap_plan_set: ctx, plan, key and value must not be NULL");
  ap_status refused = plan_refuse_doc2(ctx, ap, "setting a plan field");
  if (refused) return refused;
  const plan_field *f = plan_field_find(key);
  if (!f || (f->flags & PLAN_FF_NO_KEY)) return ctx_fail(ctx, AP_INVALID, "plan: unknown field \"%s\"", key);
  ap_status st = plan_field_parse(ctx, f, key, value, &ap->p);
  if (st) return st;
  if (f->id == PLAN_F_DP) ap->dp_set = true;
  if (f->id == PLAN_F_N_MICRO_BATCHES) ap->n_micro_set = true;
  if (f->id == PLAN_F_GLOBAL_BATCH_SIZE) ap->gbs_set = true;
  if (f->id == PLAN_F_FUSED_LOSS) ap->loss_set = true;
  if (f->id == PLAN_F_PRECISION) ap->prec_set = true;
  return AP_OK;
}

/* The i-th field set by name (i from 0), in the table's order. */
static const plan_field *keyed_field(size_t i) {
  size_t n;
  const plan_field *fields = plan_fields(&n);
  for (size_t k = 0; k < n; k++)
    if (!(fields[k].flags & PLAN_FF_NO_KEY) && i-- == 0) return &fields[k];
  return NULL;
}

const char *ap_plan_key(size_t i, const char **help) {
  const plan_field *f = keyed_field(i);
  if (help) *help = f ? f->help : NULL;
  return f ? plan_field_name(f->id) : NULL;
}

const char *ap_plan_key_aliases(size_t i) {
  const plan_field *f = keyed_field(i);
  return f ? f->aliases : NULL;
}

int ap_plan_key_range(size_t i, int64_t *min, int64_t *max) {
  const plan_field *f = keyed_field(i);
  if (!f || (f->kind != PLAN_FK_INT && f->kind != PLAN_FK_BOOL)) return 0;
  if (min) *min = f->min;
  if (max) *max = f->max;
  return 1;
}
