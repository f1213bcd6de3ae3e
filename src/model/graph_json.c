/* The op-graph JSON reader (model layer): turns an "autopar-graph/1" file, a model described block by block
 * and op by op, into the same graph type that the transformer builder produces (graph.h), so that an MLP or
 * a CNN is costed by the same cost model as a Llama. docs/graph-format.md is the reference for the format.
 *
 * The reader is strict: every field is checked against its kind's field list (a typo is an error, not a
 * silently ignored key), every tensor reference must name a tensor of the block, ops must come in execution
 * order, and the weight shapes must agree with the tensors they multiply. Every error is one line naming the
 * file and the field path ("net.json: blocks[0].ops[2].in[0]: unknown tensor \"y\""). Everything the graph
 * keeps (names included) is copied into the caller's arena, because the JSON tree is freed after reading.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonx.h"
#include "model/graph_json.h"

#define GRAPH_FORMAT "autopar-graph/1"
#define GRAPH_FORMAT_PREFIX "autopar-graph/"

/* Limits that keep every count in an int and every parameter sum far from int64 overflow (graph.c sums
 * parameters in int64). A literal dimension is at most 1e12; a tensor's literal part (the product of its
 * dimensions other than B and S) at most 1e15 elements; the whole model at most 1e17 parameters, as for the
 * transformer builder (tf_config_check). */
enum { MAX_BLOCKS = 1024, MAX_TENSORS = 4096, MAX_OPS = 4096, MAX_NAME = 256 };
#define MAX_DIM 1000000000000LL
#define MAX_SMALL 1000000LL /* heads, head dims, kernel sizes, strides, groups, experts */
#define MAX_REPEAT 1000000LL
#define MAX_LITERAL_NUMEL 1e15
#define MAX_PARAMS 1e17
#define MAX_SEQ 100000000LL

/* One reading session. */
typedef struct {
  ap_ctx *ctx;
  arena *a;
  const char *file;
  graph_builder gb;
  graph *g;
  dtype default_dt;
  double params_total; /* running total, to refuse models whose int64 sums could overflow */
  /* Per block: which op produces each tensor and which op first reads it (-1 for none), to check that
   * ops come in execution order and that each tensor has at most one producer. */
  int *producer, *first_reader;
} rd;

/* ---- Errors ---- */

/* Records "file: where.key: message" (key "[i]" attaches without a dot) and returns st. */
static ap_status failf(const rd *r, ap_status st, const char *where, const char *key, const char *fmt, ...)
    AP_PRINTF(5, 6);
static ap_status failf(const rd *r, ap_status st, const char *where, const char *key, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!*where && !*key) return ctx_fail(r->ctx, st, "%s: %s", r->file, msg);
  const char *sep = (*where && *key && key[0] != '[') ? "." : "";
  return ctx_fail(r->ctx, st, "%s: %s%s%s: %s", r->file, where, sep, key, msg);
}

static ap_status oom(const rd *r) { return ctx_fail(r->ctx, AP_NOMEM, "%s: out of memory reading the graph", r->file); }

/* Writes "; did you mean a, b?" into out when some candidate is close to name, else "". */
static void suggestion(const char *name, const char *const *cands, size_t n, char *out, size_t out_n) {
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
static ap_status check_keys(const rd *r, const char *where, json_t *obj, const char *allowed) {
  char buf[512];
  const char *names[48];
  size_t n = split_names(allowed, buf, sizeof buf, names, AP_COUNT(names));
  char shown[64], msg[480];
  if (!jx_unknown_key(obj, names, n, JX_KEYS_COMMENTS, shown, sizeof shown, msg, sizeof msg)) return AP_OK;
  return failf(r, AP_INVALID, where, shown, "%s", msg);
}

/* ---- Small readers ---- */

/* A required or optional name: a non-empty string of at most MAX_NAME bytes. */
static ap_status read_name(const rd *r, const char *where, json_t *obj, const char *key, bool required,
                           const char **out) {
  jx_src s = {r->ctx, r->file, where};
  ap_status st = jx_str(&s, obj, key, required, out, NULL);
  if (st) return st;
  if (*out && (!**out || strlen(*out) > MAX_NAME))
    return failf(r, AP_INVALID, where, key, "expected a non-empty name of at most %d bytes", MAX_NAME);
  return AP_OK;
}

/* Reads an integer or an integral number from a JSON value; false for anything else. */
static bool int_value(json_t *v, int64_t *out) {
  if (json_is_integer(v)) {
    *out = (int64_t)json_integer_value(v);
    return true;
  }
  if (json_is_real(v)) {
    double x = json_real_value(v);
    if (x == floor(x) && fabs(x) < 9e15) {
      *out = (int64_t)x;
      return true;
    }
  }
  return false;
}

/* A pair [a, b] of integers in [min, max]; with allow_scalar, a single integer n means [n, n]. */
static ap_status read_pair(const rd *r, const char *where, json_t *obj, const char *key, bool required,
                           bool allow_scalar, int64_t min, int64_t max, int64_t out[2], bool *found) {
  json_t *v = jx_lookup(obj, key, NULL);
  if (found) *found = v != NULL;
  if (!v) {
    if (!required) return AP_OK;
    return failf(r, AP_INVALID, where, key, "required field missing");
  }
  int64_t x[2];
  bool ok;
  if (allow_scalar && int_value(v, &x[0])) {
    x[1] = x[0];
    ok = true;
  } else {
    ok = json_is_array(v) && json_array_size(v) == 2 && int_value(json_array_get(v, 0), &x[0]) &&
         int_value(json_array_get(v, 1), &x[1]);
  }
  if (!ok || x[0] < min || x[0] > max || x[1] < min || x[1] > max)
    return failf(r, AP_INVALID, where, key, "expected %s[a, b] of integers in [%lld, %lld]",
                 allow_scalar ? "an integer or " : "", (long long)min, (long long)max);
  out[0] = x[0];
  out[1] = x[1];
  return AP_OK;
}

/* ---- Tensors ---- */

/* The product of a tensor's literal dimensions (those other than B and S); bounded by MAX_LITERAL_NUMEL. */
static int64_t literal_numel(const graph_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->n_dims; i++)
    if (t->dims[i] > 0) n *= t->dims[i];
  return n;
}

static bool has_dim(const graph_tensor *t, int64_t d) {
  for (int i = 0; i < t->n_dims; i++)
    if (t->dims[i] == d) return true;
  return false;
}

static bool same_shape(const graph_tensor *a, const graph_tensor *b) {
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
static ap_status resolve(const rd *r, const char *where, const char *key, json_t *v, int *out) {
  const graph_block *blk = r->gb.blk;
  if (!json_is_string(v)) return failf(r, AP_INVALID, where, key, "expected a tensor name (a string)");
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
    suggestion(name, names, (size_t)blk->n_tensors, sugg, sizeof sugg);
    free(names);
  }
  return failf(r, AP_INVALID, where, key, "unknown tensor \"%.64s\"%s", name, sugg);
}

static ap_status read_shape(const rd *r, const char *where, json_t *jt, int64_t dims[GRAPH_MAX_DIMS], int *n_out) {
  json_t *shape = json_object_get(jt, "shape");
  if (!shape || json_is_null(shape)) return failf(r, AP_INVALID, where, "shape", "required field missing");
  if (!json_is_array(shape) || json_array_size(shape) < 1 || json_array_size(shape) > GRAPH_MAX_DIMS)
    return failf(r, AP_INVALID, where, "shape", "expected an array of 1 to %d dimensions", GRAPH_MAX_DIMS);
  int n = (int)json_array_size(shape);
  double lit = 1;
  for (int i = 0; i < n; i++) {
    json_t *d = json_array_get(shape, (size_t)i);
    char key[32];
    snprintf(key, sizeof key, "shape[%d]", i);
    int64_t x;
    if (json_is_string(d) && strcmp(json_string_value(d), "B") == 0) {
      dims[i] = DIM_B;
    } else if (json_is_string(d) && strcmp(json_string_value(d), "S") == 0) {
      dims[i] = DIM_S;
    } else if (int_value(d, &x) && x >= 1 && x <= MAX_DIM) {
      dims[i] = x;
      lit *= (double)x;
    } else if (int_value(d, &x)) {
      return failf(r, AP_INVALID, where, key, "expected a dimension in [1, %lld], got %lld", MAX_DIM, (long long)x);
    } else {
      return failf(r, AP_INVALID, where, key, "expected an integer > 0 or \"B\" (micro-batch) or \"S\" (sequence)");
    }
  }
  if (lit > MAX_LITERAL_NUMEL)
    return failf(r, AP_INVALID, where, "shape", "more than %g elements besides B and S", MAX_LITERAL_NUMEL);
  *n_out = n;
  return AP_OK;
}

static ap_status read_dtype(const rd *r, const char *where, json_t *obj, dtype *out) {
  const char *name = NULL;
  jx_src s = {r->ctx, r->file, where};
  ap_status st = jx_str(&s, obj, "dtype", false, &name, NULL);
  if (st || !name) return st;
  if (dtype_parse(name, out)) return AP_OK;
  const char *names[DT_COUNT_];
  for (size_t i = 0; i < DT_COUNT_; i++) names[i] = dtype_name((dtype)i);
  char sugg[300];
  suggestion(name, names, DT_COUNT_, sugg, sizeof sugg);
  return failf(r, AP_INVALID, where, "dtype", "unknown dtype \"%.32s\"%s (known: fp32, tf32, bf16, fp16, fp8, fp4, int64, int32, u8)",
               name, sugg);
}

static ap_status read_tensor(rd *r, const char *where, json_t *jt) {
  if (!json_is_object(jt)) return failf(r, AP_INVALID, where, "", "expected a tensor object");
  ap_status st = check_keys(r, where, jt, "name|shape|dtype|tp_dim|seq_parallel");
  if (st) return st;
  const char *name = NULL;
  if ((st = read_name(r, where, jt, "name", true, &name))) return st;
  if (find_tensor(r->gb.blk, name) >= 0)
    return failf(r, AP_INVALID, where, "name", "duplicate tensor name \"%s\" in this block", name);
  int64_t dims[GRAPH_MAX_DIMS];
  int n = 0;
  if ((st = read_shape(r, where, jt, dims, &n))) return st;
  dtype dt = r->default_dt;
  if ((st = read_dtype(r, where, jt, &dt))) return st;
  jx_src s = {r->ctx, r->file, where};
  int64_t tp_dim = -1;
  if ((st = jx_i64(&s, jt, "tp_dim", false, 0, n - 1, &tp_dim, NULL))) return st;
  bool sp = false;
  if ((st = jx_bool(&s, jt, "seq_parallel", false, &sp, NULL))) return st;
  graph_tensor probe = {.n_dims = n};
  memcpy(probe.dims, dims, sizeof dims[0] * (size_t)n);
  if (sp && (!has_dim(&probe, DIM_S) || tp_dim >= 0))
    return failf(r, AP_INVALID, where, "seq_parallel",
                 "sequence parallelism splits the \"S\" dimension of a tensor that tensor parallelism leaves whole: "
                 "the tensor needs an \"S\" dimension and tp_dim null");
  if (graph_tensor_add(&r->gb, name, dt, (int)tp_dim, sp, dims, n) < 0) return oom(r);
  return AP_OK;
}

/* ---- Ops ---- */

typedef ap_status (*kind_reader)(rd *r, const char *where, json_t *jo, graph_op *op);

static ap_status rd_matmul(rd *r, const char *where, json_t *jo, graph_op *op);
static ap_status rd_attention(rd *r, const char *where, json_t *jo, graph_op *op);
static ap_status rd_pointwise(rd *r, const char *where, json_t *jo, graph_op *op);
static ap_status rd_embedding(rd *r, const char *where, json_t *jo, graph_op *op);
static ap_status rd_conv2d(rd *r, const char *where, json_t *jo, graph_op *op);
static ap_status rd_pool(rd *r, const char *where, json_t *jo, graph_op *op);
static ap_status rd_none(rd *r, const char *where, json_t *jo, graph_op *op);

/* Per kind: the fields it accepts besides the common ones, how many inputs it takes, and its reader. */
typedef struct {
  const char *keys;
  int min_in, max_in;
  kind_reader read;
} kind_spec;

#define OP_COMMON_KEYS "name|kind|in|out|save|mask|tp_split|params"
static const kind_spec kind_specs[] = {
    [OP_MATMUL] = {"weight|bias|experts|top_k|tied", 1, 1, rd_matmul},
    [OP_ATTENTION] = {"heads|kv_heads|head_dim|head_dim_v|causal|window", 3, 3, rd_attention},
    [OP_NORM] = {"flop_per_elem", 1, 1, rd_pointwise},
    [OP_ELEMENTWISE] = {"flop_per_elem", 1, OP_MAX_IN, rd_pointwise},
    [OP_EMBEDDING] = {"rows", 0, 1, rd_embedding},
    [OP_ROUTER] = {"weight|bias|tied", 1, 1, rd_matmul},
    [OP_DISPATCH] = {"", 1, 2, rd_none},
    [OP_COMBINE] = {"", 1, 2, rd_none},
    [OP_LOSS] = {"", 1, 2, rd_none},
    [OP_CONV2D] = {"kernel|stride|padding|groups|bias|tied", 1, 1, rd_conv2d},
    [OP_POOL] = {"kernel|stride|padding", 1, 1, rd_pool},
};
_Static_assert(AP_COUNT(kind_specs) == OP_KIND_COUNT_, "kind_specs and op_kind disagree");

static ap_status rd_none(rd *r, const char *where, json_t *jo, graph_op *op) {
  (void)r, (void)where, (void)jo, (void)op;
  return AP_OK;
}

/* MATMUL and ROUTER: "weight": [k, n] with k the input's last dimension and n the output's. */
static ap_status rd_matmul(rd *r, const char *where, json_t *jo, graph_op *op) {
  jx_src s = {r->ctx, r->file, where};
  int64_t w[2];
  ap_status st = read_pair(r, where, jo, "weight", true, false, 1, MAX_DIM, w, NULL);
  if (st) return st;
  op->weight_k = w[0];
  op->weight_n = w[1];
  if ((st = jx_bool(&s, jo, "bias", false, &op->has_bias, NULL))) return st;
  if ((st = jx_bool(&s, jo, "tied", false, &op->tied, NULL))) return st;
  if (op->kind == OP_MATMUL) {
    if ((st = jx_i64(&s, jo, "experts", false, 1, MAX_SMALL, &op->n_experts, NULL))) return st;
    if ((st = jx_i64(&s, jo, "top_k", false, 1, op->n_experts, &op->top_k, NULL))) return st;
  }
  const graph_block *blk = r->gb.blk;
  const graph_tensor *x = &blk->tensors[op->in[0]], *y = &blk->tensors[op->out];
  int64_t xk = x->dims[x->n_dims - 1], yn = y->dims[y->n_dims - 1];
  if (xk < 1 || yn < 1)
    return failf(r, AP_INVALID, where, xk < 1 ? "in[0]" : "out",
                 "the last dimension of \"%s\" is \"%s\"; a %s needs a number there (the weight's %s)",
                 xk < 1 ? x->name : y->name, (xk < 1 ? xk : yn) == DIM_B ? "B" : "S", op_kind_name(op->kind),
                 xk < 1 ? "k" : "n");
  if (xk != op->weight_k)
    return failf(r, AP_INVALID, where, "weight[0]", "expected %lld (the last dimension of input \"%s\"), got %lld",
                 (long long)xk, x->name, (long long)op->weight_k);
  if (yn != op->weight_n)
    return failf(r, AP_INVALID, where, "weight[1]", "expected %lld (the last dimension of output \"%s\"), got %lld",
                 (long long)yn, y->name, (long long)op->weight_n);
  return AP_OK;
}

/* Fails unless the literal part of tensor t's shape is a multiple of m (heads × head_dim). */
static ap_status check_heads(rd *r, const char *where, const char *key, const graph_tensor *t, int64_t m,
                             const char *what) {
  if (literal_numel(t) % m == 0) return AP_OK;
  return failf(r, AP_INVALID, where, key, "tensor \"%s\": its dimensions besides B and S must hold %s = %lld per token",
               t->name, what, (long long)m);
}

static ap_status rd_attention(rd *r, const char *where, json_t *jo, graph_op *op) {
  jx_src s = {r->ctx, r->file, where};
  ap_status st;
  if ((st = jx_i64(&s, jo, "heads", true, 1, MAX_SMALL, &op->heads, NULL))) return st;
  op->kv_heads = op->heads;
  if ((st = jx_i64(&s, jo, "kv_heads", false, 1, op->heads, &op->kv_heads, NULL))) return st;
  if (op->heads % op->kv_heads)
    return failf(r, AP_INVALID, where, "kv_heads", "must divide heads (%lld), got %lld", (long long)op->heads,
                 (long long)op->kv_heads);
  if ((st = jx_i64(&s, jo, "head_dim", true, 1, MAX_SMALL, &op->head_dim_qk, NULL))) return st;
  op->head_dim_v = op->head_dim_qk;
  if ((st = jx_i64(&s, jo, "head_dim_v", false, 1, MAX_SMALL, &op->head_dim_v, NULL))) return st;
  if ((st = jx_bool(&s, jo, "causal", false, &op->causal, NULL))) return st;
  if ((st = jx_i64(&s, jo, "window", false, 0, MAX_DIM, &op->window, NULL))) return st;
  const graph_tensor *t = r->gb.blk->tensors;
  const graph_tensor *q = &t[op->in[0]], *k = &t[op->in[1]], *v = &t[op->in[2]], *o = &t[op->out];
  if (!has_dim(q, DIM_S))
    return failf(r, AP_INVALID, where, "in[0]",
                 "the query \"%s\" needs an \"S\" dimension: each query attends over the sequence", q->name);
  if ((st = check_heads(r, where, "in[0]", q, op->heads * op->head_dim_qk, "heads × head_dim"))) return st;
  if ((st = check_heads(r, where, "in[1]", k, op->kv_heads * op->head_dim_qk, "kv_heads × head_dim"))) return st;
  if ((st = check_heads(r, where, "in[2]", v, op->kv_heads * op->head_dim_v, "kv_heads × head_dim_v"))) return st;
  return check_heads(r, where, "out", o, op->heads * op->head_dim_v, "heads × head_dim_v");
}

/* NORM and ELEMENTWISE: FLOP per output element; a norm keeps its input's shape. */
static ap_status rd_pointwise(rd *r, const char *where, json_t *jo, graph_op *op) {
  jx_src s = {r->ctx, r->file, where};
  ap_status st = jx_f64(&s, jo, "flop_per_elem", true, 0, 1e6, &op->flop_per_elem, NULL);
  if (st) return st;
  const graph_tensor *t = r->gb.blk->tensors;
  if (op->kind == OP_NORM && !same_shape(&t[op->in[0]], &t[op->out]))
    return failf(r, AP_INVALID, where, "out", "a norm's output \"%s\" must have the shape of its input \"%s\"",
                 t[op->out].name, t[op->in[0]].name);
  return AP_OK;
}

/* EMBEDDING: "rows" of the output's last dimension each, or an explicit "params". */
static ap_status rd_embedding(rd *r, const char *where, json_t *jo, graph_op *op) {
  jx_src s = {r->ctx, r->file, where};
  int64_t rows = 0;
  bool has_rows = false, has_params = jx_lookup(jo, "params", NULL) != NULL;
  ap_status st = jx_i64(&s, jo, "rows", false, 1, MAX_DIM, &rows, &has_rows);
  if (st) return st;
  if (has_rows && has_params) return failf(r, AP_INVALID, where, "rows", "give rows or params, not both");
  if (!has_rows && !has_params)
    return failf(r, AP_INVALID, where, "rows", "required field missing (the table's row count; or give params)");
  if (has_rows) {
    const graph_tensor *y = &r->gb.blk->tensors[op->out];
    int64_t dim = y->dims[y->n_dims - 1];
    if (dim < 1)
      return failf(r, AP_INVALID, where, "out", "the last dimension of \"%s\" (the embedding width) must be a number",
                   y->name);
    if ((double)rows * (double)dim > MAX_LITERAL_NUMEL)
      return failf(r, AP_INVALID, where, "rows", "the table rows × %lld exceeds %g parameters", (long long)dim,
                   MAX_LITERAL_NUMEL);
    op->extra_params = rows * dim;
  }
  return AP_OK;
}

/* Checks an NCHW spatial size: out = floor((in + 2·pad − kernel) / stride) + 1 (PyTorch's Conv2d and
 * MaxPool2d rule), where both sizes are literal. */
static ap_status check_spatial(rd *r, const char *where, const graph_tensor *x, const graph_tensor *y,
                               const int64_t kernel[2], const int64_t stride[2], const int64_t pad[2]) {
  int64_t want[2];
  for (int i = 0; i < 2; i++) {
    int64_t in = x->dims[2 + i], out = y->dims[2 + i];
    if (in < 1 || out < 1) return AP_OK; /* a symbolic spatial size is the author's business */
    int64_t span = in + 2 * pad[i] - kernel[i];
    want[i] = span < 0 ? 0 : span / stride[i] + 1;
  }
  if (want[0] == y->dims[2] && want[1] == y->dims[3]) return AP_OK;
  return failf(r, AP_INVALID, where, "out",
               "output \"%s\" is %lldx%lld but input %lldx%lld with kernel %lldx%lld, stride %lldx%lld, padding "
               "%lldx%lld gives %lldx%lld",
               y->name, (long long)y->dims[2], (long long)y->dims[3], (long long)x->dims[2], (long long)x->dims[3],
               (long long)kernel[0], (long long)kernel[1], (long long)stride[0], (long long)stride[1],
               (long long)pad[0], (long long)pad[1], (long long)want[0], (long long)want[1]);
}

static ap_status need_nchw(rd *r, const char *where, const char *key, const graph_tensor *t) {
  if (t->n_dims == 4) return AP_OK;
  return failf(r, AP_INVALID, where, key, "tensor \"%s\" must be 4-D [N, C, H, W], got %d dimensions", t->name,
               t->n_dims);
}

/* CONV2D: input [N, Cin, H, W], output [N, Cout, Ho, Wo]; the weight is [Cin/groups · kh · kw, Cout]. */
static ap_status rd_conv2d(rd *r, const char *where, json_t *jo, graph_op *op) {
  jx_src s = {r->ctx, r->file, where};
  int64_t kernel[2], stride[2] = {1, 1}, pad[2] = {0, 0}, groups = 1;
  ap_status st;
  if ((st = read_pair(r, where, jo, "kernel", true, true, 1, MAX_SMALL, kernel, NULL))) return st;
  if ((st = read_pair(r, where, jo, "stride", false, true, 1, MAX_SMALL, stride, NULL))) return st;
  if ((st = read_pair(r, where, jo, "padding", false, true, 0, MAX_SMALL, pad, NULL))) return st;
  if ((st = jx_i64(&s, jo, "groups", false, 1, MAX_SMALL, &groups, NULL))) return st;
  if ((st = jx_bool(&s, jo, "bias", false, &op->has_bias, NULL))) return st;
  if ((st = jx_bool(&s, jo, "tied", false, &op->tied, NULL))) return st;
  const graph_tensor *x = &r->gb.blk->tensors[op->in[0]], *y = &r->gb.blk->tensors[op->out];
  if ((st = need_nchw(r, where, "in[0]", x)) || (st = need_nchw(r, where, "out", y))) return st;
  int64_t cin = x->dims[1], cout = y->dims[1];
  if (cin < 1 || cout < 1)
    return failf(r, AP_INVALID, where, cin < 1 ? "in[0]" : "out", "the channel dimension (index 1) must be a number");
  if (x->dims[0] != y->dims[0])
    return failf(r, AP_INVALID, where, "out", "the batch dimension of \"%s\" differs from the input's", y->name);
  if (cin % groups || cout % groups)
    return failf(r, AP_INVALID, where, "groups", "must divide the input channels (%lld) and output channels (%lld)",
                 (long long)cin, (long long)cout);
  double k = (double)(cin / groups) * (double)kernel[0] * (double)kernel[1];
  if (k > (double)MAX_DIM) return failf(r, AP_INVALID, where, "kernel", "Cin × kh × kw exceeds %lld", MAX_DIM);
  op->weight_k = (cin / groups) * kernel[0] * kernel[1];
  op->weight_n = cout;
  op->kernel_h = kernel[0];
  op->kernel_w = kernel[1];
  return check_spatial(r, where, x, y, kernel, stride, pad);
}

/* POOL: input [N, C, H, W]; output [N, C, Ho, Wo], or [N, C] for a global pool whose kernel is [H, W]. The
 * stride defaults to the kernel (PyTorch's MaxPool2d / AvgPool2d). */
static ap_status rd_pool(rd *r, const char *where, json_t *jo, graph_op *op) {
  int64_t kernel[2], stride[2], pad[2] = {0, 0};
  bool has_stride = false;
  ap_status st;
  if ((st = read_pair(r, where, jo, "kernel", true, true, 1, MAX_SMALL, kernel, NULL))) return st;
  if ((st = read_pair(r, where, jo, "stride", false, true, 1, MAX_SMALL, stride, &has_stride))) return st;
  if (!has_stride) memcpy(stride, kernel, sizeof stride);
  if ((st = read_pair(r, where, jo, "padding", false, true, 0, MAX_SMALL, pad, NULL))) return st;
  op->kernel_h = kernel[0];
  op->kernel_w = kernel[1];
  const graph_tensor *x = &r->gb.blk->tensors[op->in[0]], *y = &r->gb.blk->tensors[op->out];
  if ((st = need_nchw(r, where, "in[0]", x))) return st;
  if (y->n_dims != 4 && y->n_dims != 2)
    return failf(r, AP_INVALID, where, "out", "tensor \"%s\" must be [N, C, H, W] or, for a global pool, [N, C]",
                 y->name);
  if (x->dims[0] != y->dims[0] || x->dims[1] != y->dims[1])
    return failf(r, AP_INVALID, where, "out", "\"%s\" must keep the input's batch and channel dimensions", y->name);
  if (y->n_dims == 2) {
    if (x->dims[2] > 0 && x->dims[3] > 0 && (kernel[0] != x->dims[2] || kernel[1] != x->dims[3]))
      return failf(r, AP_INVALID, where, "kernel", "a global pool to [N, C] needs kernel [%lld, %lld] (the input's H, W)",
                   (long long)x->dims[2], (long long)x->dims[3]);
    return AP_OK;
  }
  return check_spatial(r, where, x, y, kernel, stride, pad);
}

/* Parameters of an op in double, mirroring graph_op_params, so that overflow is refused before any int64 sum. */
static double op_params_f(const graph_op *op) {
  double p = (double)op->extra_params;
  if (!op->tied && (op->kind == OP_MATMUL || op->kind == OP_ROUTER || op->kind == OP_CONV2D))
    p += ((double)op->weight_k * (double)op->weight_n + (op->has_bias ? (double)op->weight_n : 0)) *
         (double)op->n_experts;
  return p;
}

/* A tied weight must have an earlier op (in this or an earlier block) whose weight or table it can share:
 * a matmul/router/conv2d weight of k × n, or an embedding table of as many parameters. */
static bool has_tie_target(const graph *g, const graph_op *op) {
  double want = (double)op->weight_k * (double)op->weight_n;
  for (int b = 0; b < g->n_blocks; b++)
    for (int i = 0; i < g->blocks[b].n_ops; i++) {
      const graph_op *o = &g->blocks[b].ops[i];
      if (o->kind == OP_EMBEDDING && (double)o->extra_params == want) return true;
      if ((o->kind == OP_MATMUL || o->kind == OP_ROUTER || o->kind == OP_CONV2D) && !o->tied &&
          (double)o->weight_k * (double)o->weight_n == want)
        return true;
    }
  return false;
}

/* Reads "in": an array of min..max tensor names, each produced earlier in the block or by no op at all. */
static ap_status read_inputs(rd *r, const char *where, json_t *jo, const kind_spec *spec, graph_op *op, int oi) {
  json_t *in = json_object_get(jo, "in");
  if (!in || json_is_null(in)) {
    if (spec->min_in == 0) return AP_OK;
    return failf(r, AP_INVALID, where, "in", "required field missing");
  }
  size_t n = json_is_array(in) ? json_array_size(in) : 0;
  if (!json_is_array(in) || n < (size_t)spec->min_in || n > (size_t)spec->max_in) {
    if (spec->min_in == spec->max_in)
      return failf(r, AP_INVALID, where, "in", "expected an array of %d tensor name%s for a %s op", spec->min_in,
                   spec->min_in == 1 ? "" : "s", op_kind_name(op->kind));
    return failf(r, AP_INVALID, where, "in", "expected an array of %d to %d tensor names for a %s op", spec->min_in,
                 spec->max_in, op_kind_name(op->kind));
  }
  for (size_t i = 0; i < n; i++) {
    char key[32];
    snprintf(key, sizeof key, "in[%zu]", i);
    int t;
    ap_status st = resolve(r, where, key, json_array_get(in, i), &t);
    if (st) return st;
    if (r->producer[t] < 0 && r->first_reader[t] < 0) r->first_reader[t] = oi;
    op->in[op->n_in++] = t;
  }
  return AP_OK;
}

/* One output tensor of op: checks it against the op's inputs and earlier producers and readers. */
static ap_status read_one_output(rd *r, const char *where, const char *key, json_t *v, graph_op *op, int oi, int *out) {
  int t;
  ap_status st = resolve(r, where, key, v, &t);
  if (st) return st;
  const graph_block *blk = r->gb.blk;
  for (int i = 0; i < op->n_in; i++)
    if (op->in[i] == t) return failf(r, AP_INVALID, where, key, "\"%s\" is also an input of this op", blk->tensors[t].name);
  if (r->producer[t] >= 0)
    return failf(r, AP_INVALID, where, key, "tensor \"%s\" is already the output of op \"%s\"", blk->tensors[t].name,
                 r->producer[t] == oi ? "(this op)" : blk->ops[r->producer[t]].name);
  if (r->first_reader[t] >= 0)
    return failf(r, AP_INVALID, where, key,
                 "tensor \"%s\" is read by the earlier op \"%s\" (list ops in execution order)", blk->tensors[t].name,
                 blk->ops[r->first_reader[t]].name);
  r->producer[t] = oi;
  *out = t;
  return AP_OK;
}

/* "out": a tensor name, or an array of 1 to OP_MAX_OUT names for an op with several outputs (the first is
 * the one the op's kind rules read, e.g. a matmul's n). */
static ap_status read_output(rd *r, const char *where, json_t *jo, graph_op *op, int oi) {
  json_t *out = json_object_get(jo, "out");
  if (!out || json_is_null(out)) return failf(r, AP_INVALID, where, "out", "required field missing");
  if (!json_is_array(out)) {
    ap_status st = read_one_output(r, where, "out", out, op, oi, &op->out);
    op->n_out = 1;
    op->outs[0] = op->out;
    return st;
  }
  if (json_array_size(out) < 1 || json_array_size(out) > OP_MAX_OUT)
    return failf(r, AP_INVALID, where, "out", "expected a tensor name or an array of 1 to %d tensor names", OP_MAX_OUT);
  for (size_t i = 0; i < json_array_size(out); i++) {
    char key[32];
    snprintf(key, sizeof key, "out[%zu]", i);
    ap_status st = read_one_output(r, where, key, json_array_get(out, i), op, oi, &op->outs[i]);
    if (st) return st;
    op->n_out = (int)i + 1;
  }
  op->out = op->outs[0];
  return AP_OK;
}

/* Reads "save" (tensors kept for the backward pass) and "mask" (a tensor whose element count gives a
 * 1-byte-per-element mask, as for dropout). */
static ap_status read_saved(rd *r, const char *where, json_t *jo, graph_op *op) {
  json_t *save = json_object_get(jo, "save");
  if (save && !json_is_null(save)) {
    if (!json_is_array(save) || json_array_size(save) > OP_MAX_SAVED)
      return failf(r, AP_INVALID, where, "save", "expected an array of at most %d tensor names", OP_MAX_SAVED);
    for (size_t i = 0; i < json_array_size(save); i++) {
      char key[32];
      snprintf(key, sizeof key, "save[%zu]", i);
      int t;
      ap_status st = resolve(r, where, key, json_array_get(save, i), &t);
      if (st) return st;
      for (int k = 0; k < op->n_saved; k++)
        if (op->saved[k] == t) return failf(r, AP_INVALID, where, key, "\"%s\" is listed twice", r->gb.blk->tensors[t].name);
      op->saved[op->n_saved++] = t;
    }
  }
  json_t *mask = json_object_get(jo, "mask");
  if (mask && !json_is_null(mask)) return resolve(r, where, "mask", mask, &op->mask_of);
  return AP_OK;
}

static ap_status read_op(rd *r, const char *where, json_t *jo, int oi) {
  if (!json_is_object(jo)) return failf(r, AP_INVALID, where, "", "expected an op object");
  jx_src s = {r->ctx, r->file, where};
  const char *kind_name = NULL;
  ap_status st = jx_str(&s, jo, "kind", true, &kind_name, NULL);
  if (st) return st;
  op_kind kind;
  if (!op_kind_parse(kind_name, &kind)) {
    const char *names[OP_KIND_COUNT_];
    for (size_t i = 0; i < OP_KIND_COUNT_; i++) names[i] = op_kind_name((op_kind)i);
    char sugg[300];
    suggestion(kind_name, names, OP_KIND_COUNT_, sugg, sizeof sugg);
    return failf(r, AP_INVALID, where, "kind",
                 "unknown op kind \"%.64s\"%s (known: matmul, attention, norm, elementwise, embedding, router, "
                 "dispatch, combine, loss, conv2d, pool)",
                 kind_name, sugg);
  }
  const kind_spec *spec = &kind_specs[kind];
  char keys[256];
  snprintf(keys, sizeof keys, "%s%s%s", OP_COMMON_KEYS, *spec->keys ? "|" : "", spec->keys);
  if ((st = check_keys(r, where, jo, keys))) return st;
  const char *name = NULL;
  if ((st = read_name(r, where, jo, "name", true, &name))) return st;
  const graph_block *blk = r->gb.blk;
  for (int i = 0; i < blk->n_ops; i++)
    if (strcmp(blk->ops[i].name, name) == 0)
      return failf(r, AP_INVALID, where, "name", "duplicate op name \"%s\" in this block", name);
  graph_op op = graph_op_init(kind, name);
  if ((st = read_inputs(r, where, jo, spec, &op, oi))) return st;
  if ((st = read_output(r, where, jo, &op, oi))) return st;
  if ((st = read_saved(r, where, jo, &op))) return st;
  if ((st = jx_bool(&s, jo, "tp_split", false, &op.tp_split, NULL))) return st;
  if ((st = jx_i64(&s, jo, "params", false, 0, (int64_t)MAX_LITERAL_NUMEL, &op.extra_params, NULL))) return st;
  if ((st = spec->read(r, where, jo, &op))) return st;
  if (op.tied && !has_tie_target(r->g, &op))
    return failf(r, AP_INVALID, where, "tied", "no earlier op has a %lld × %lld weight (or embedding table) to share",
                 (long long)op.weight_k, (long long)op.weight_n);
  double p = op_params_f(&op);
  if (p > MAX_PARAMS) return failf(r, AP_INVALID, where, "", "more than %g parameters", MAX_PARAMS);
  if (graph_op_add(&r->gb, &op) < 0) return oom(r);
  return AP_OK;
}

/* ---- Blocks ---- */

static const char *const role_names[] = {[BLOCK_EMBED] = "embed", [BLOCK_LAYER] = "layer", [BLOCK_HEAD] = "head",
                                         [BLOCK_OTHER] = "other"};
_Static_assert(AP_COUNT(role_names) == BLOCK_OTHER + 1, "role_names and block_role disagree");

static ap_status read_role(const rd *r, const char *where, json_t *jb, block_role *out) {
  const char *name = NULL;
  jx_src s = {r->ctx, r->file, where};
  ap_status st = jx_str(&s, jb, "role", false, &name, NULL);
  if (st || !name) return st;
  for (size_t i = 0; i < AP_COUNT(role_names); i++)
    if (strcmp(name, role_names[i]) == 0) {
      *out = (block_role)i;
      return AP_OK;
    }
  char sugg[300];
  suggestion(name, role_names, AP_COUNT(role_names), sugg, sizeof sugg);
  return failf(r, AP_INVALID, where, "role", "unknown role \"%.32s\"%s (known: embed, layer, head, other)", name, sugg);
}

/* "input"/"output": a tensor name, or null for none. Absent: the input is the first tensor that an op reads
 * and none produces, the output is the last op's output. */
static ap_status read_boundary(rd *r, const char *where, json_t *jb, const char *key, int fallback, int *out) {
  json_t *v = json_object_get(jb, key);
  if (!v) {
    *out = fallback;
    return AP_OK;
  }
  if (json_is_null(v)) {
    *out = -1;
    return AP_OK;
  }
  return resolve(r, where, key, v, out);
}

static ap_status read_block(rd *r, json_t *jb, int bi) {
  char where[32];
  snprintf(where, sizeof where, "blocks[%d]", bi);
  if (!json_is_object(jb)) return failf(r, AP_INVALID, where, "", "expected a block object");
  ap_status st = check_keys(r, where, jb, "name|role|repeat|tensors|ops|input|output");
  if (st) return st;
  const char *name = NULL;
  if ((st = read_name(r, where, jb, "name", true, &name))) return st;
  for (int i = 0; i < r->g->n_blocks; i++)
    if (strcmp(r->g->blocks[i].name, name) == 0)
      return failf(r, AP_INVALID, where, "name", "duplicate block name \"%s\"", name);
  block_role role = BLOCK_OTHER;
  if ((st = read_role(r, where, jb, &role))) return st;
  jx_src s = {r->ctx, r->file, where};
  int64_t repeat = 1;
  if ((st = jx_i64(&s, jb, "repeat", false, 1, MAX_REPEAT, &repeat, NULL))) return st;
  json_t *tensors = json_object_get(jb, "tensors"), *ops = json_object_get(jb, "ops");
  if (!tensors || json_is_null(tensors)) return failf(r, AP_INVALID, where, "tensors", "required field missing");
  if (!json_is_array(tensors) || json_array_size(tensors) < 1 || json_array_size(tensors) > MAX_TENSORS)
    return failf(r, AP_INVALID, where, "tensors", "expected an array of 1 to %d tensors", MAX_TENSORS);
  if (!ops || json_is_null(ops)) return failf(r, AP_INVALID, where, "ops", "required field missing");
  if (!json_is_array(ops) || json_array_size(ops) < 1 || json_array_size(ops) > MAX_OPS)
    return failf(r, AP_INVALID, where, "ops", "expected an array of 1 to %d ops", MAX_OPS);

  graph_block *blk = graph_block_begin(&r->gb, r->g, name, role, repeat);
  if (!blk || !blk->name) return oom(r);
  int n_tensors = (int)json_array_size(tensors), n_ops = (int)json_array_size(ops);
  for (int i = 0; i < n_tensors; i++) {
    char tw[96];
    snprintf(tw, sizeof tw, "%s.tensors[%d]", where, i);
    if ((st = read_tensor(r, tw, json_array_get(tensors, (size_t)i)))) return st;
  }
  r->producer = arena_alloc(r->a, sizeof(int) * (size_t)n_tensors);
  r->first_reader = arena_alloc(r->a, sizeof(int) * (size_t)n_tensors);
  if (!r->producer || !r->first_reader) return oom(r);
  for (int i = 0; i < n_tensors; i++) r->producer[i] = r->first_reader[i] = -1;
  for (int i = 0; i < n_ops; i++) {
    char ow[96];
    snprintf(ow, sizeof ow, "%s.ops[%d]", where, i);
    if ((st = read_op(r, ow, json_array_get(ops, (size_t)i), i))) return st;
  }

  int first_input = -1;
  for (int t = 0; t < n_tensors && first_input < 0; t++)
    if (r->producer[t] < 0 && r->first_reader[t] >= 0) first_input = t;
  if ((st = read_boundary(r, where, jb, "input", first_input, &blk->input))) return st;
  if ((st = read_boundary(r, where, jb, "output", blk->ops[n_ops - 1].out, &blk->output))) return st;

  double p = 0;
  for (int i = 0; i < blk->n_ops; i++) {
    const graph_op *op = &blk->ops[i];
    p += op_params_f(op);
    if (op->n_experts > 1 || op->kind == OP_ROUTER || op->kind == OP_DISPATCH || op->kind == OP_COMBINE)
      blk->is_moe = true;
  }
  r->params_total += p * (double)repeat;
  if (r->params_total > MAX_PARAMS)
    return failf(r, AP_INVALID, where, "", "the model exceeds %g parameters", MAX_PARAMS);
  return AP_OK;
}

/* ---- The file ---- */

bool graph_json_detect(json_t *root) {
  if (!json_is_object(root)) return false;
  json_t *f = json_object_get(root, "format");
  if (json_is_string(f) && strncmp(json_string_value(f), GRAPH_FORMAT_PREFIX, strlen(GRAPH_FORMAT_PREFIX)) == 0)
    return true;
  return json_is_array(json_object_get(root, "blocks"));
}

static ap_status read_top(rd *r, json_t *root, graph *g) {
  if (!json_is_object(root)) return failf(r, AP_INVALID, "", "", "expected a JSON object at the top level");
  jx_src s = {r->ctx, r->file, ""};
  const char *format = NULL;
  ap_status st = jx_str(&s, root, "format", true, &format, NULL);
  if (st) return st;
  if (strcmp(format, GRAPH_FORMAT) != 0) {
    bool other_version = strncmp(format, GRAPH_FORMAT_PREFIX, strlen(GRAPH_FORMAT_PREFIX)) == 0;
    return failf(r, other_version ? AP_UNSUPPORTED : AP_INVALID, "", "format", "expected \"%s\", got \"%.64s\"%s",
                 GRAPH_FORMAT, format, other_version ? " (a version this autopar does not read)" : "");
  }
  if ((st = check_keys(r, "", root,
                       "format|name|model_type|source|default_seq|dtype|causal_lm|vocab_size|hidden_size|n_layers|"
                       "blocks")))
    return st;
  const char *name = NULL, *model_type = "graph", *source = "";
  if ((st = read_name(r, "", root, "name", true, &name))) return st;
  if ((st = read_name(r, "", root, "model_type", false, &model_type))) return st;
  if ((st = jx_str(&s, root, "source", false, &source, NULL))) return st;
  g->default_seq = 1;
  if ((st = jx_i64(&s, root, "default_seq", false, 1, MAX_SEQ, &g->default_seq, NULL))) return st;
  if ((st = read_dtype(r, "", root, &r->default_dt))) return st;
  if ((st = jx_bool(&s, root, "causal_lm", false, &g->causal_lm, NULL))) return st;
  if ((st = jx_i64(&s, root, "vocab_size", false, 0, MAX_DIM, &g->vocab_size, NULL))) return st;
  if ((st = jx_i64(&s, root, "hidden_size", false, 0, MAX_DIM, &g->hidden_size, NULL))) return st;
  bool has_layers = false;
  if ((st = jx_i64(&s, root, "n_layers", false, 0, MAX_REPEAT * MAX_BLOCKS, &g->n_layers, &has_layers))) return st;
  g->name = arena_strdup(r->a, name);
  g->model_type = arena_strdup(r->a, model_type);
  g->source = arena_strdup(r->a, source);
  if (!g->name || !g->model_type || !g->source) return oom(r);

  json_t *blocks = json_object_get(root, "blocks");
  if (!blocks || json_is_null(blocks)) return failf(r, AP_INVALID, "", "blocks", "required field missing");
  if (!json_is_array(blocks) || json_array_size(blocks) < 1 || json_array_size(blocks) > MAX_BLOCKS)
    return failf(r, AP_INVALID, "", "blocks", "expected an array of 1 to %d blocks", MAX_BLOCKS);
  for (size_t i = 0; i < json_array_size(blocks); i++)
    if ((st = read_block(r, json_array_get(blocks, i), (int)i))) return st;
  if (r->gb.oom) return oom(r);
  if (!has_layers)
    for (int i = 0; i < g->n_blocks; i++)
      if (g->blocks[i].role == BLOCK_LAYER) g->n_layers += g->blocks[i].repeat;
  if ((st = graph_validate(r->ctx, g, r->file))) return st;
  return graph_build_edges(r->ctx, r->a, g);
}

ap_status graph_json_read(ap_ctx *ctx, arena *a, const char *file, json_t *root, graph *out) {
  graph g;
  memset(&g, 0, sizeof g);
  memset(out, 0, sizeof *out);
  rd r = {.ctx = ctx, .a = a, .file = file ? file : "graph", .gb = {.a = a, .ctx = ctx}, .g = &g, .default_dt = DT_BF16};
  ap_status st = read_top(&r, root, &g);
  if (st) return st;
  *out = g;
  return AP_OK;
}
