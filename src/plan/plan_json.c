/* autopar's JSON form of a plan (plan layer), "autopar-plan/1", documented in docs/plan-format.md. The
 * writer puts down every field, so a plan written and read back is the same plan (plan_equal), and a file
 * written by plan_to_json is written again byte for byte after plan_from_json: `autopar plan` emits these
 * files and `autopar estimate --plan` reads them back unchanged. The reader is strict about names (an unknown
 * key is an error, which catches typos) and lenient about presence (absent fields take plan_defaults'
 * values), and it checks types and ranges only; the constraints between fields are plan_validate's. */
#include <stdio.h>
#include <string.h>

#include "plan/plan.h"

#define PLAN_FORMAT "autopar-plan/1"

/* The most layers one chunk may list, and the most a recompute count may name. TUNING: ten times the
 * deepest published transformer (GPT-3's 96 and Llama 3.1 405B's 126 layers are far below it); it only
 * keeps a typo from looking like a plan. */
#define PLAN_MAX_LAYERS 1000000

/* ---- Writing ---- */

static void put_i64(strbuf *sb, const char *key, int64_t v, bool comma) {
  sb_printf(sb, "%s\"%s\":%lld", comma ? "," : "", key, (long long)v);
}
static void put_bool(strbuf *sb, const char *key, bool v, bool comma) {
  sb_printf(sb, "%s\"%s\":%s", comma ? "," : "", key, v ? "true" : "false");
}
static void put_str(strbuf *sb, const char *key, const char *v, bool comma) {
  sb_printf(sb, "%s\"%s\":", comma ? "," : "", key);
  jx_sb_str(sb, v);
}

/* A name field held in a fixed array, read safely even if it lacks its NUL. */
static void put_name(strbuf *sb, const char *key, const char *v) {
  char buf[PLAN_NAME_MAX];
  snprintf(buf, sizeof buf, "%.*s", PLAN_NAME_MAX - 1, v);
  put_str(sb, key, buf, true);
}

void plan_to_json(const plan *p, strbuf *sb) {
  sb_puts(sb, "{");
  put_str(sb, "format", PLAN_FORMAT, false);
  put_name(sb, "model", p->model);
  put_name(sb, "cluster", p->cluster);
  put_i64(sb, "global_batch_size", p->global_batch_size, true);
  put_i64(sb, "seq_length", p->seq_length, true);

  sb_puts(sb, ",\"parallel\":{");
  put_i64(sb, "dp", p->dp, false);
  put_i64(sb, "tp", p->tp, true);
  put_i64(sb, "pp", p->pp, true);
  put_i64(sb, "cp", p->cp, true);
  put_i64(sb, "ep", p->ep, true);
  put_i64(sb, "etp", p->etp, true);
  put_i64(sb, "vpp", p->vpp, true);
  sb_puts(sb, ",\"order\":[");
  for (int i = 0; i < PLAN_N_ORDER; i++) {
    if (i) sb_puts(sb, ",");
    jx_sb_str(sb, plan_axis_name(p->order[i]));
  }
  sb_puts(sb, "]}");

  sb_puts(sb, ",\"pipeline\":{");
  put_str(sb, "schedule", plan_schedule_name(p->schedule), false);
  put_i64(sb, "micro_batch_size", p->micro_batch_size, true);
  put_i64(sb, "n_micro_batches", p->n_micro_batches, true);
  sb_puts(sb, ",\"stage_layers\":[");
  int32_t n = p->n_stage_layers < 0 ? 0 : p->n_stage_layers > PLAN_MAX_CHUNKS ? PLAN_MAX_CHUNKS : p->n_stage_layers;
  for (int32_t c = 0; c < n; c++) sb_printf(sb, "%s%d", c ? "," : "", (int)p->stage_layers[c]);
  sb_puts(sb, "]}");

  put_bool(sb, "sequence_parallel", p->sequence_parallel, true);
  sb_puts(sb, ",\"recompute\":{");
  put_str(sb, "granularity", plan_recompute_name(p->recompute), false);
  put_i64(sb, "num_layers", p->recompute_layers, true);
  /* Written only when the plan lists per-chunk counts, so that the files of every other plan keep their form. */
  int32_t nr = p->n_chunk_recompute < 0 ? 0 : p->n_chunk_recompute > PLAN_MAX_CHUNKS ? PLAN_MAX_CHUNKS : p->n_chunk_recompute;
  if (nr > 0) {
    sb_puts(sb, ",\"per_chunk\":[");
    for (int32_t c = 0; c < nr; c++) sb_printf(sb, "%s%d", c ? "," : "", (int)p->chunk_recompute_layers[c]);
    sb_puts(sb, "]");
  }
  sb_puts(sb, "}");
  sb_puts(sb, ",\"optimizer\":{");
  put_i64(sb, "zero_stage", p->zero_stage, false);
  sb_puts(sb, "}");
  put_str(sb, "precision", plan_precision_name(p->precision), true);
  /* Written only when set, so that the files of every other plan keep their form. */
  if (p->fused_loss) put_bool(sb, "fused_loss", true, true);
  if (p->stack != PLAN_STACK_DEFAULT) put_str(sb, "stack", plan_stack_name(p->stack), true);
  sb_puts(sb, ",\"overlap\":{");
  put_bool(sb, "grad_reduce", p->overlap_grad_reduce, false);
  put_bool(sb, "param_gather", p->overlap_param_gather, true);
  put_bool(sb, "tp_comm", p->tp_comm_overlap, true);
  sb_puts(sb, "}}");
}

/* ---- Reading ---- */

/* The keys each object may hold, so that a misspelt key is reported rather than silently ignored. */
static const char *const top_keys[] = {"format",   "model",             "cluster",   "global_batch_size",
                                       "seq_length", "parallel",        "pipeline",  "sequence_parallel",
                                       "recompute",  "optimizer",       "precision", "fused_loss",
                                       "stack",      "overlap"};
static const char *const parallel_keys[] = {"dp", "tp", "pp", "cp", "ep", "etp", "vpp", "order"};
static const char *const pipeline_keys[] = {"schedule", "micro_batch_size", "n_micro_batches", "stage_layers"};
static const char *const recompute_keys[] = {"granularity", "num_layers", "per_chunk"};
static const char *const optimizer_keys[] = {"zero_stage"};
static const char *const overlap_keys[] = {"grad_reduce", "param_gather", "tp_comm"};

static ap_status check_keys(const jx_src *s, json_t *obj, const char *const *keys, size_t n) {
  const char *key;
  json_t *v;
  json_object_foreach(obj, key, v) {
    (void)v;
    bool known = false;
    for (size_t i = 0; i < n && !known; i++) known = strcmp(key, keys[i]) == 0;
    if (!known) {
      char list[512] = "";
      for (size_t i = 0; i < n; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", keys[i]);
      return jx_fail(s, key, "unknown field (expected one of: %s)", list);
    }
  }
  return AP_OK;
}

/* The sub-object at key, or NULL when absent; fails when present but not an object. */
static ap_status section(const jx_src *s, json_t *root, const char *key, json_t **out) {
  *out = jx_lookup(root, key, NULL);
  if (*out && !json_is_object(*out)) return jx_fail(s, key, "expected an object");
  return AP_OK;
}

/* An optional name string copied into a fixed array. */
static ap_status read_name(const jx_src *s, json_t *root, const char *key, char *out) {
  const char *v = NULL;
  ap_status st = jx_str(s, root, key, false, &v, NULL);
  if (st || !v) return st;
  if (strlen(v) >= PLAN_NAME_MAX) return jx_fail(s, key, "longer than %d bytes", PLAN_NAME_MAX - 1);
  memcpy(out, v, strlen(v) + 1);
  return AP_OK;
}

/* An optional enum given by name; table lookups go through the plan_*_from_name parsers. */
typedef bool (*from_name_fn)(const char *name, int *out);

static bool schedule_from(const char *n, int *o) {
  plan_schedule v;
  bool ok = plan_schedule_from_name(n, &v);
  if (ok) *o = (int)v;
  return ok;
}
static bool recompute_from(const char *n, int *o) {
  plan_recompute v;
  bool ok = plan_recompute_from_name(n, &v);
  if (ok) *o = (int)v;
  return ok;
}
static bool stack_from(const char *n, int *o) {
  plan_stack v;
  bool ok = plan_stack_from_name(n, &v);
  if (ok) *o = (int)v;
  return ok;
}

static bool precision_from(const char *n, int *o) {
  plan_precision v;
  bool ok = plan_precision_from_name(n, &v);
  if (ok) *o = (int)v;
  return ok;
}

static ap_status read_enum(const jx_src *s, json_t *obj, const char *key, from_name_fn parse, const char *choices,
                           int *out, bool *found) {
  const char *v = NULL;
  ap_status st = jx_str(s, obj, key, false, &v, found);
  if (st || !v) return st;
  if (!parse(v, out)) return jx_fail(s, key, "expected one of %s, got \"%s\"", choices, v);
  return AP_OK;
}

/* An optional integer stored in an int32 field. */
static ap_status read_i32(const jx_src *s, json_t *obj, const char *key, int64_t min, int64_t max, int32_t *out) {
  int64_t v = *out;
  ap_status st = jx_i64(s, obj, key, false, min, max, &v, NULL);
  if (!st) *out = (int32_t)v;
  return st;
}

static ap_status read_parallel(const jx_src *top, json_t *obj, plan *p) {
  jx_src s = {top->ctx, top->file, "parallel"};
  ap_status st;
  if ((st = check_keys(&s, obj, parallel_keys, AP_COUNT(parallel_keys)))) return st;
  if ((st = jx_i64(&s, obj, "dp", false, 1, PLAN_MAX_DEGREE, &p->dp, NULL))) return st;
  if ((st = jx_i64(&s, obj, "tp", false, 1, PLAN_MAX_DEGREE, &p->tp, NULL))) return st;
  if ((st = jx_i64(&s, obj, "pp", false, 1, PLAN_MAX_DEGREE, &p->pp, NULL))) return st;
  if ((st = jx_i64(&s, obj, "cp", false, 1, PLAN_MAX_DEGREE, &p->cp, NULL))) return st;
  if ((st = jx_i64(&s, obj, "ep", false, 1, PLAN_MAX_DEGREE, &p->ep, NULL))) return st;
  if ((st = jx_i64(&s, obj, "etp", false, 0, PLAN_MAX_DEGREE, &p->etp, NULL))) return st;
  if ((st = jx_i64(&s, obj, "vpp", false, 1, PLAN_MAX_CHUNKS, &p->vpp, NULL))) return st;
  json_t *order = jx_lookup(obj, "order", NULL);
  if (!order) return AP_OK;
  if (!json_is_array(order) || json_array_size(order) != PLAN_N_ORDER)
    return jx_fail(&s, "order", "expected an array of the %d axes tp, cp, ep, dp, pp", PLAN_N_ORDER);
  unsigned seen = 0;
  for (size_t i = 0; i < PLAN_N_ORDER; i++) {
    json_t *e = json_array_get(order, i);
    plan_axis a;
    if (!json_is_string(e) || !plan_axis_from_name(json_string_value(e), &a) || (unsigned)a >= PLAN_N_ORDER)
      return jx_fail(&s, "order", "[%zu]: expected one of tp, cp, ep, dp, pp", i);
    if (seen & (1u << a)) return jx_fail(&s, "order", "\"%s\" appears twice", plan_axis_name(a));
    seen |= 1u << a;
    p->order[i] = a;
  }
  return AP_OK;
}

static ap_status read_pipeline(const jx_src *top, json_t *obj, plan *p, bool *n_micro_found) {
  jx_src s = {top->ctx, top->file, "pipeline"};
  ap_status st;
  if ((st = check_keys(&s, obj, pipeline_keys, AP_COUNT(pipeline_keys)))) return st;
  int sched = (int)p->schedule;
  if ((st = read_enum(&s, obj, "schedule", schedule_from, "gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-v", &sched, NULL)))
    return st;
  p->schedule = (plan_schedule)sched;
  if ((st = jx_i64(&s, obj, "micro_batch_size", false, 1, PLAN_MAX_COUNT, &p->micro_batch_size, NULL))) return st;
  if ((st = jx_i64(&s, obj, "n_micro_batches", false, 1, PLAN_MAX_COUNT, &p->n_micro_batches, n_micro_found)))
    return st;
  json_t *split = jx_lookup(obj, "stage_layers", NULL);
  if (!split) return AP_OK; /* absent or null: the even split */
  if (!json_is_array(split)) return jx_fail(&s, "stage_layers", "expected an array of layer counts, one per chunk");
  size_t n = json_array_size(split);
  if (n > PLAN_MAX_CHUNKS) return jx_fail(&s, "stage_layers", "expected at most %d chunks, got %zu", PLAN_MAX_CHUNKS, n);
  for (size_t i = 0; i < n; i++) {
    json_t *e = json_array_get(split, i);
    if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > PLAN_MAX_LAYERS)
      return jx_fail(&s, "stage_layers", "[%zu]: expected an integer in [0, %d]", i, PLAN_MAX_LAYERS);
    p->stage_layers[i] = (int32_t)json_integer_value(e);
  }
  p->n_stage_layers = (int32_t)n;
  return AP_OK;
}

/* recompute.per_chunk: absent, null or [] for none; else one count of layers per chunk. */
static ap_status read_per_chunk(const jx_src *s, json_t *obj, plan *p) {
  json_t *list = jx_lookup(obj, "per_chunk", NULL);
  if (!list) return AP_OK;
  if (!json_is_array(list)) return jx_fail(s, "per_chunk", "expected an array of layer counts, one per chunk");
  size_t n = json_array_size(list);
  if (n > PLAN_MAX_CHUNKS) return jx_fail(s, "per_chunk", "expected at most %d chunks, got %zu", PLAN_MAX_CHUNKS, n);
  for (size_t i = 0; i < n; i++) {
    json_t *e = json_array_get(list, i);
    if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > PLAN_MAX_LAYERS)
      return jx_fail(s, "per_chunk", "[%zu]: expected an integer in [0, %d]", i, PLAN_MAX_LAYERS);
    p->chunk_recompute_layers[i] = (int32_t)json_integer_value(e);
  }
  p->n_chunk_recompute = (int32_t)n;
  return AP_OK;
}

/* n·m, or -1 when it exceeds PLAN_MAX_COUNT (then the batch is left for plan_validate to report). */
static int64_t mul_capped(int64_t n, int64_t m) {
  int64_t r;
  return __builtin_mul_overflow(n, m, &r) || r > PLAN_MAX_COUNT ? -1 : r;
}

ap_status plan_from_json(ap_ctx *ctx, const char *file, json_t *root, plan *out) {
  jx_src s = {ctx, file, ""};
  plan_defaults(out);
  if (!json_is_object(root)) return ctx_fail(ctx, AP_INVALID, "%s: a plan must be a JSON object", file);
  ap_status st;
  if ((st = check_keys(&s, root, top_keys, AP_COUNT(top_keys)))) return st;
  const char *format = NULL;
  if ((st = jx_str(&s, root, "format", false, &format, NULL))) return st;
  if (format && strcmp(format, PLAN_FORMAT) != 0)
    return jx_fail(&s, "format", "expected \"%s\", got \"%s\"", PLAN_FORMAT, format);
  if ((st = read_name(&s, root, "model", out->model))) return st;
  if ((st = read_name(&s, root, "cluster", out->cluster))) return st;
  bool gbs_found = false, n_micro_found = false;
  if ((st = jx_i64(&s, root, "global_batch_size", false, 1, PLAN_MAX_COUNT, &out->global_batch_size, &gbs_found)))
    return st;
  if ((st = jx_i64(&s, root, "seq_length", false, 0, PLAN_MAX_COUNT, &out->seq_length, NULL))) return st;

  json_t *obj;
  if ((st = section(&s, root, "parallel", &obj))) return st;
  if (obj && (st = read_parallel(&s, obj, out))) return st;
  if ((st = section(&s, root, "pipeline", &obj))) return st;
  if (obj && (st = read_pipeline(&s, obj, out, &n_micro_found))) return st;

  if ((st = jx_bool(&s, root, "sequence_parallel", false, &out->sequence_parallel, NULL))) return st;
  if ((st = section(&s, root, "recompute", &obj))) return st;
  if (obj) {
    jx_src r = {ctx, file, "recompute"};
    if ((st = check_keys(&r, obj, recompute_keys, AP_COUNT(recompute_keys)))) return st;
    int gran = (int)out->recompute;
    if ((st = read_enum(&r, obj, "granularity", recompute_from, "none, selective, op, full", &gran, NULL))) return st;
    out->recompute = (plan_recompute)gran;
    if ((st = read_i32(&r, obj, "num_layers", 0, PLAN_MAX_LAYERS, &out->recompute_layers))) return st;
    if ((st = read_per_chunk(&r, obj, out))) return st;
  }
  if ((st = section(&s, root, "optimizer", &obj))) return st;
  if (obj) {
    jx_src o = {ctx, file, "optimizer"};
    if ((st = check_keys(&o, obj, optimizer_keys, AP_COUNT(optimizer_keys)))) return st;
    if ((st = read_i32(&o, obj, "zero_stage", 0, 3, &out->zero_stage))) return st;
  }
  int prec = (int)out->precision;
  if ((st = read_enum(&s, root, "precision", precision_from, "bf16, fp16, fp8", &prec, NULL))) return st;
  out->precision = (plan_precision)prec;
  if ((st = jx_bool(&s, root, "fused_loss", false, &out->fused_loss, NULL))) return st;
  int stk = (int)out->stack;
  if ((st = read_enum(&s, root, "stack", stack_from,
                      "megatron-lm, megatron-bridge, nemo, megatron-deepspeed, torchtitan, llm-foundry, deepspeed, autopar, any",
                      &stk, NULL)))
    return st;
  out->stack = (plan_stack)stk;
  if ((st = section(&s, root, "overlap", &obj))) return st;
  if (obj) {
    jx_src o = {ctx, file, "overlap"};
    if ((st = check_keys(&o, obj, overlap_keys, AP_COUNT(overlap_keys)))) return st;
    if ((st = jx_bool(&o, obj, "grad_reduce", false, &out->overlap_grad_reduce, NULL))) return st;
    if ((st = jx_bool(&o, obj, "param_gather", false, &out->overlap_param_gather, NULL))) return st;
    if ((st = jx_bool(&o, obj, "tp_comm", false, &out->tp_comm_overlap, NULL))) return st;
  }

  /* Derive the missing batch field as Megatron does (arguments.py: num_micro_batches = global_batch_size /
   * (micro_batch_size · dp)). A global batch that does not divide is left for plan_validate to name. */
  int64_t per_step = mul_capped(out->micro_batch_size, out->dp);
  if (!n_micro_found && gbs_found) {
    if (per_step > 0 && out->global_batch_size % per_step == 0) out->n_micro_batches = out->global_batch_size / per_step;
  } else if (!gbs_found && per_step > 0) {
    int64_t gbs = mul_capped(per_step, out->n_micro_batches);
    if (gbs > 0) out->global_batch_size = gbs;
  }
  return AP_OK;
}
