/* The op-graph JSON reader's field readers (model layer): its error messages ("file: where.key: message", with a
 * did-you-mean for a misspelt key or kind), the small checked readers (names, integer pairs, dtypes, keys
 * against a list) and the tensors of a block (shapes, references by name). graph_json.c and graph_json_kinds.c
 * call it; it calls neither. docs/graph-format.md is the format's reference. */
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/graph_json_internal.h"

/* ---- Errors ---- */

/* Records "file: where.key: message" (key "[i]" attaches without a dot) and returns st. */
ap_status gj_failf(const rd *r, ap_status st, const char *where, const char *key, const char *fmt, ...)
    AP_PRINTF(5, 6);
ap_status gj_failf(const rd *r, ap_status st, const char *where, const char *key, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!*where && !*key) return ctx_fail(r->ctx, st, "%s: %s", r->file, msg);
  const char *sep = (*where && *key && key[0] != '[') ? "." : "";
  return ctx_fail(r->ctx, st, "%s: %s%s%s: %s", r->file, where, sep, key, msg);
}

ap_status gj_oom(const rd *r) { return ctx_fail(r->ctx, AP_NOMEM, "%s: out of memory reading the graph", r->file); }

/* Writes "; did you mean a, b?" into out when some candidate is close to name, else "". */
void gj_suggestion(const char *name, const char *const *cands, size_t n, char *out, size_t out_n) {
  char list[256];
  util_suggest(name, cands, n, list, sizeof list);
  if (*list) snprintf(out, out_n, "; did you mean %s?", list);
  else if (out_n) out[0] = '\0';
}

/* Splits a '|'-separated list into buf (modified copy) and names; returns the count. */
static size_t split_names(const char *list, char *buf, size_t buf_n, const char **names, size_t cap) {
  snprintf(buf, buf_n, "%s", list);
  size_t n = 0;
  for (char *p = buf; *p && n < cap;) {
    names[n++] = p;
    char *bar = strchr(p, '|');
    if (!bar) break;
    *bar = '\0';
    p = bar + 1;
  }
  return n;
}

/* Rejects any key of obj that is not in `allowed` ('|'-separated), so that a misspelt field ("wieght") is an
 * error rather than a silently ignored default. Keys that start with '_' are comments and are skipped. */
ap_status gj_check_keys(const rd *r, const char *where, json_t *obj, const char *allowed) {
  char buf[512];
  const char *names[48];
  size_t n = split_names(allowed, buf, sizeof buf, names, AP_COUNT(names));
  char shown[64], msg[480];
  if (!jx_unknown_key(obj, names, n, JX_KEYS_COMMENTS, shown, sizeof shown, msg, sizeof msg)) return AP_OK;
  return gj_failf(r, AP_INVALID, where, shown, "%s", msg);
}

/* ---- Small readers ---- */

/* A required or optional name: a non-empty string of at most MAX_NAME bytes. */
ap_status gj_read_name(const rd *r, const char *where, json_t *obj, const char *key, bool required,
                       const char **out) {
  jx_src s = {r->ctx, r->file, where};
  ap_status st = jx_str(&s, obj, key, required, out, NULL);
  if (st) return st;
  if (*out && (!**out || strlen(*out) > MAX_NAME))
    return gj_failf(r, AP_INVALID, where, key, "expected a non-empty name of at most %d bytes", MAX_NAME);
  return AP_OK;
}

/* Reads an integer (jx_int_of's rule); false for anything else, with *huge set for an integral real beyond
 * 2^53 (out of range, not "not an integer"). */
static bool int_value(json_t *v, int64_t *out, bool *huge) {
  double real;
  jx_int_kind k = jx_int_of(v, out, &real);
  if (huge && k == JX_INT_HUGE) *huge = true;
  return k == JX_INT;
}

/* A pair [a, b] of integers in [min, max]; with allow_scalar, a single integer n means [n, n]. */
ap_status gj_read_pair(const rd *r, const char *where, json_t *obj, const char *key, bool required,
                       bool allow_scalar, int64_t min, int64_t max, int64_t out[2], bool *found) {
  json_t *v = jx_lookup(obj, key, NULL);
  if (found) *found = v != NULL;
  if (!v) {
    if (!required) return AP_OK;
    return gj_failf(r, AP_INVALID, where, key, "required field missing");
  }
  int64_t x[2];
  bool ok, huge = false;
  if (allow_scalar && int_value(v, &x[0], &huge)) {
    x[1] = x[0];
    ok = true;
  } else {
    ok = json_is_array(v) && json_array_size(v) == 2 && int_value(json_array_get(v, 0), &x[0], &huge) &&
         int_value(json_array_get(v, 1), &x[1], &huge);
  }
  if (!ok || x[0] < min || x[0] > max || x[1] < min || x[1] > max)
    return gj_failf(r, AP_INVALID, where, key, "%sexpected %s[a, b] of integers in [%lld, %lld]",
                    huge ? "out of range: " : "",
                    allow_scalar ? "an integer or " : "", (long long)min, (long long)max);
  out[0] = x[0];
  out[1] = x[1];
  return AP_OK;
}

/* ---- Tensors ---- */

/* The product of a tensor's literal dimensions (those other than B and S); bounded by MAX_LITERAL_NUMEL. */
int64_t gj_literal_numel(const graph_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->n_dims; i++)
    if (t->dims[i] > 0) n *= t->dims[i];
  return n;
}

bool gj_has_dim(const graph_tensor *t, int64_t d) {
  for (int i = 0; i < t->n_dims; i++)
    if (t->dims[i] == d) return true;
  return false;
}

bool gj_same_shape(const graph_tensor *a, const graph_tensor *b) {
  if (a->n_dims != b->n_dims) return false;
  for (int i = 0; i < a->n_dims; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

static int find_tensor(const graph_block *blk, const char *name) {
  for (int i = 0; i < blk->n_tensors; i++)
    if (strcmp(blk->tensors[i].name, name) == 0) return i;
  return -1;
}

/* Resolves a JSON string naming a tensor of the current block; the error suggests close names. */
ap_status gj_resolve(const rd *r, const char *where, const char *key, json_t *v, int *out) {
  const graph_block *blk = r->gb.blk;
  if (!json_is_string(v)) return gj_failf(r, AP_INVALID, where, key, "expected a tensor name (a string)");
  const char *name = json_string_value(v);
  int t = find_tensor(blk, name);
  if (t >= 0) {
    *out = t;
    return AP_OK;
  }
  char sugg[300] = "";
  const char **names = malloc(sizeof(char *) * (size_t)blk->n_tensors);
  if (names) {
    for (int i = 0; i < blk->n_tensors; i++) names[i] = blk->tensors[i].name;
    gj_suggestion(name, names, (size_t)blk->n_tensors, sugg, sizeof sugg);
    free(names);
  }
  return gj_failf(r, AP_INVALID, where, key, "unknown tensor \"%.64s\"%s", name, sugg);
}

static ap_status read_shape(const rd *r, const char *where, json_t *jt, int64_t dims[GRAPH_MAX_DIMS], int *n_out) {
  json_t *shape = json_object_get(jt, "shape");
  if (!shape || json_is_null(shape)) return gj_failf(r, AP_INVALID, where, "shape", "required field missing");
  if (!json_is_array(shape) || json_array_size(shape) < 1 || json_array_size(shape) > GRAPH_MAX_DIMS)
    return gj_failf(r, AP_INVALID, where, "shape", "expected an array of 1 to %d dimensions", GRAPH_MAX_DIMS);
  int n = (int)json_array_size(shape);
  double lit = 1;
  for (int i = 0; i < n; i++) {
    json_t *d = json_array_get(shape, (size_t)i);
    char key[32];
    snprintf(key, sizeof key, "shape[%d]", i);
    int64_t x;
    bool huge = false;
    if (json_is_string(d) && strcmp(json_string_value(d), "B") == 0) {
      dims[i] = DIM_B;
    } else if (json_is_string(d) && strcmp(json_string_value(d), "S") == 0) {
      dims[i] = DIM_S;
    } else if (int_value(d, &x, &huge) && x >= 1 && x <= MAX_DIM) {
      dims[i] = x;
      lit *= (double)x;
    } else if (int_value(d, &x, NULL)) {
      return gj_failf(r, AP_INVALID, where, key, "expected a dimension in [1, %lld], got %lld", MAX_DIM, (long long)x);
    } else if (huge) {
      return gj_failf(r, AP_INVALID, where, key, "out of range: expected a dimension in [1, %lld], got %g", MAX_DIM,
                      json_real_value(d));
    } else {
      return gj_failf(r, AP_INVALID, where, key, "expected an integer > 0 or \"B\" (micro-batch) or \"S\" (sequence)");
    }
  }
  if (lit > MAX_LITERAL_NUMEL)
    return gj_failf(r, AP_INVALID, where, "shape", "more than %g elements besides B and S", MAX_LITERAL_NUMEL);
  *n_out = n;
  return AP_OK;
}

ap_status gj_read_dtype(const rd *r, const char *where, json_t *obj, dtype *out) {
  const char *name = NULL;
  jx_src s = {r->ctx, r->file, where};
  ap_status st = jx_str(&s, obj, "dtype", false, &name, NULL);
  if (st || !name) return st;
  if (dtype_parse(name, out)) return AP_OK;
  const char *names[DT_COUNT_];
  for (size_t i = 0; i < DT_COUNT_; i++) names[i] = dtype_name((dtype)i);
  char sugg[300];
  gj_suggestion(name, names, DT_COUNT_, sugg, sizeof sugg);
  return gj_failf(r, AP_INVALID, where, "dtype", "unknown dtype \"%.32s\"%s (known: fp32, tf32, bf16, fp16, fp8, fp4, int64, int32, u8)",
               name, sugg);
}

ap_status gj_read_tensor(rd *r, const char *where, json_t *jt) {
  if (!json_is_object(jt)) return gj_failf(r, AP_INVALID, where, "", "expected a tensor object");
  ap_status st = gj_check_keys(r, where, jt, "name|shape|dtype|tp_dim|seq_parallel");
  if (st) return st;
  const char *name = NULL;
  if ((st = gj_read_name(r, where, jt, "name", true, &name))) return st;
  if (find_tensor(r->gb.blk, name) >= 0)
    return gj_failf(r, AP_INVALID, where, "name", "duplicate tensor name \"%s\" in this block", name);
  int64_t dims[GRAPH_MAX_DIMS];
  int n = 0;
  if ((st = read_shape(r, where, jt, dims, &n))) return st;
  dtype dt = r->default_dt;
  if ((st = gj_read_dtype(r, where, jt, &dt))) return st;
  jx_src s = {r->ctx, r->file, where};
  int64_t tp_dim = -1;
  if ((st = jx_i64(&s, jt, "tp_dim", false, 0, n - 1, &tp_dim, NULL))) return st;
  bool sp = false;
  if ((st = jx_bool(&s, jt, "seq_parallel", false, &sp, NULL))) return st;
  graph_tensor probe = {.n_dims = n};
  memcpy(probe.dims, dims, sizeof dims[0] * (size_t)n);
  if (sp && (!gj_has_dim(&probe, DIM_S) || tp_dim >= 0))
    return gj_failf(r, AP_INVALID, where, "seq_parallel",
                 "sequence parallelism splits the \"S\" dimension of a tensor that tensor parallelism leaves whole: "
                 "the tensor needs an \"S\" dimension and tp_dim null");
  if (graph_tensor_add(&r->gb, name, dt, (int)tp_dim, sp, dims, n) < 0) return gj_oom(r);
  return AP_OK;
}
