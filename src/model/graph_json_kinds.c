/* The op-graph JSON reader's kind table (model layer): for each op kind (matmul, attention, norm, elementwise,
 * embedding, router, dispatch, combine, loss, conv2d, pool) the fields it accepts besides the common ones, how
 * many inputs it takes, and the reader that checks its own fields against its tensors' shapes. graph_json.c
 * looks a kind up in gj_kind_specs; the readers use graph_json_fields.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/graph_json_internal.h"

/* ---- Ops ---- */

static ap_status rd_matmul(rd *r, const char *where, json_t *jo, graph_op *op);
static ap_status rd_attention(rd *r, const char *where, json_t *jo, graph_op *op);
static ap_status rd_pointwise(rd *r, const char *where, json_t *jo, graph_op *op);
static ap_status rd_embedding(rd *r, const char *where, json_t *jo, graph_op *op);
static ap_status rd_conv2d(rd *r, const char *where, json_t *jo, graph_op *op);
static ap_status rd_pool(rd *r, const char *where, json_t *jo, graph_op *op);
static ap_status rd_none(rd *r, const char *where, json_t *jo, graph_op *op);


const kind_spec gj_kind_specs[OP_KIND_COUNT_] = {
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
_Static_assert(AP_COUNT(gj_kind_specs) == OP_KIND_COUNT_, "gj_kind_specs and op_kind disagree");

static ap_status rd_none(rd *r, const char *where, json_t *jo, graph_op *op) {
  (void)r, (void)where, (void)jo, (void)op;
  return AP_OK;
}

/* MATMUL and ROUTER: "weight": [k, n] with k the input's last dimension and n the output's. */
static ap_status rd_matmul(rd *r, const char *where, json_t *jo, graph_op *op) {
  jx_src s = {r->ctx, r->file, where};
  int64_t w[2];
  ap_status st = gj_read_pair(r, where, jo, "weight", true, false, 1, MAX_DIM, w, NULL);
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
    return gj_failf(r, AP_INVALID, where, xk < 1 ? "in[0]" : "out",
                 "the last dimension of \"%s\" is \"%s\"; a %s needs a number there (the weight's %s)",
                 xk < 1 ? x->name : y->name, (xk < 1 ? xk : yn) == DIM_B ? "B" : "S", op_kind_name(op->kind),
                 xk < 1 ? "k" : "n");
  if (xk != op->weight_k)
    return gj_failf(r, AP_INVALID, where, "weight[0]", "expected %lld (the last dimension of input \"%s\"), got %lld",
                 (long long)xk, x->name, (long long)op->weight_k);
  if (yn != op->weight_n)
    return gj_failf(r, AP_INVALID, where, "weight[1]", "expected %lld (the last dimension of output \"%s\"), got %lld",
                 (long long)yn, y->name, (long long)op->weight_n);
  return AP_OK;
}

/* Fails unless the literal part of tensor t's shape is a multiple of m (heads × head_dim). */
static ap_status check_heads(rd *r, const char *where, const char *key, const graph_tensor *t, int64_t m,
                             const char *what) {
  if (gj_literal_numel(t) % m == 0) return AP_OK;
  return gj_failf(r, AP_INVALID, where, key, "tensor \"%s\": its dimensions besides B and S must hold %s = %lld per token",
               t->name, what, (long long)m);
}

static ap_status rd_attention(rd *r, const char *where, json_t *jo, graph_op *op) {
  jx_src s = {r->ctx, r->file, where};
  ap_status st;
  if ((st = jx_i64(&s, jo, "heads", true, 1, MAX_SMALL, &op->heads, NULL))) return st;
  op->kv_heads = op->heads;
  if ((st = jx_i64(&s, jo, "kv_heads", false, 1, op->heads, &op->kv_heads, NULL))) return st;
  if (op->heads % op->kv_heads)
    return gj_failf(r, AP_INVALID, where, "kv_heads", "must divide heads (%lld), got %lld", (long long)op->heads,
                 (long long)op->kv_heads);
  if ((st = jx_i64(&s, jo, "head_dim", true, 1, MAX_SMALL, &op->head_dim_qk, NULL))) return st;
  op->head_dim_v = op->head_dim_qk;
  if ((st = jx_i64(&s, jo, "head_dim_v", false, 1, MAX_SMALL, &op->head_dim_v, NULL))) return st;
  if ((st = jx_bool(&s, jo, "causal", false, &op->causal, NULL))) return st;
  if ((st = jx_i64(&s, jo, "window", false, 0, MAX_DIM, &op->window, NULL))) return st;
  const graph_tensor *t = r->gb.blk->tensors;
  const graph_tensor *q = &t[op->in[0]], *k = &t[op->in[1]], *v = &t[op->in[2]], *o = &t[op->out];
  if (!gj_has_dim(q, DIM_S))
    return gj_failf(r, AP_INVALID, where, "in[0]",
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
  if (op->kind == OP_NORM && !gj_same_shape(&t[op->in[0]], &t[op->out]))
    return gj_failf(r, AP_INVALID, where, "out", "a norm's output \"%s\" must have the shape of its input \"%s\"",
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
  if (has_rows && has_params) return gj_failf(r, AP_INVALID, where, "rows", "give rows or params, not both");
  if (!has_rows && !has_params)
    return gj_failf(r, AP_INVALID, where, "rows", "required field missing (the table's row count; or give params)");
  if (has_rows) {
    const graph_tensor *y = &r->gb.blk->tensors[op->out];
    int64_t dim = y->dims[y->n_dims - 1];
    if (dim < 1)
      return gj_failf(r, AP_INVALID, where, "out", "the last dimension of \"%s\" (the embedding width) must be a number",
                   y->name);
    if ((double)rows * (double)dim > MAX_LITERAL_NUMEL)
      return gj_failf(r, AP_INVALID, where, "rows", "the table rows × %lld exceeds %g parameters", (long long)dim,
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
  return gj_failf(r, AP_INVALID, where, "out",
               "output \"%s\" is %lldx%lld but input %lldx%lld with kernel %lldx%lld, stride %lldx%lld, padding "
               "%lldx%lld gives %lldx%lld",
               y->name, (long long)y->dims[2], (long long)y->dims[3], (long long)x->dims[2], (long long)x->dims[3],
               (long long)kernel[0], (long long)kernel[1], (long long)stride[0], (long long)stride[1],
               (long long)pad[0], (long long)pad[1], (long long)want[0], (long long)want[1]);
}

static ap_status need_nchw(rd *r, const char *where, const char *key, const graph_tensor *t) {
  if (t->n_dims == 4) return AP_OK;
  return gj_failf(r, AP_INVALID, where, key, "tensor \"%s\" must be 4-D [N, C, H, W], got %d dimensions", t->name,
               t->n_dims);
}

/* CONV2D: input [N, Cin, H, W], output [N, Cout, Ho, Wo]; the weight is [Cin/groups · kh · kw, Cout]. */
static ap_status rd_conv2d(rd *r, const char *where, json_t *jo, graph_op *op) {
  jx_src s = {r->ctx, r->file, where};
  int64_t kernel[2], stride[2] = {1, 1}, pad[2] = {0, 0}, groups = 1;
  ap_status st;
  if ((st = gj_read_pair(r, where, jo, "kernel", true, true, 1, MAX_SMALL, kernel, NULL))) return st;
  if ((st = gj_read_pair(r, where, jo, "stride", false, true, 1, MAX_SMALL, stride, NULL))) return st;
  if ((st = gj_read_pair(r, where, jo, "padding", false, true, 0, MAX_SMALL, pad, NULL))) return st;
  if ((st = jx_i64(&s, jo, "groups", false, 1, MAX_SMALL, &groups, NULL))) return st;
  if ((st = jx_bool(&s, jo, "bias", false, &op->has_bias, NULL))) return st;
  if ((st = jx_bool(&s, jo, "tied", false, &op->tied, NULL))) return st;
  const graph_tensor *x = &r->gb.blk->tensors[op->in[0]], *y = &r->gb.blk->tensors[op->out];
  if ((st = need_nchw(r, where, "in[0]", x)) || (st = need_nchw(r, where, "out", y))) return st;
  int64_t cin = x->dims[1], cout = y->dims[1];
  if (cin < 1 || cout < 1)
    return gj_failf(r, AP_INVALID, where, cin < 1 ? "in[0]" : "out", "the channel dimension (index 1) must be a number");
  if (x->dims[0] != y->dims[0])
    return gj_failf(r, AP_INVALID, where, "out", "the batch dimension of \"%s\" differs from the input's", y->name);
  if (cin % groups || cout % groups)
    return gj_failf(r, AP_INVALID, where, "groups", "must divide the input channels (%lld) and output channels (%lld)",
                 (long long)cin, (long long)cout);
  double k = (double)(cin / groups) * (double)kernel[0] * (double)kernel[1];
  if (k > (double)MAX_DIM) return gj_failf(r, AP_INVALID, where, "kernel", "Cin × kh × kw exceeds %lld", MAX_DIM);
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
  if ((st = gj_read_pair(r, where, jo, "kernel", true, true, 1, MAX_SMALL, kernel, NULL))) return st;
  if ((st = gj_read_pair(r, where, jo, "stride", false, true, 1, MAX_SMALL, stride, &has_stride))) return st;
  if (!has_stride) memcpy(stride, kernel, sizeof stride);
  if ((st = gj_read_pair(r, where, jo, "padding", false, true, 0, MAX_SMALL, pad, NULL))) return st;
  op->kernel_h = kernel[0];
  op->kernel_w = kernel[1];
  const graph_tensor *x = &r->gb.blk->tensors[op->in[0]], *y = &r->gb.blk->tensors[op->out];
  if ((st = need_nchw(r, where, "in[0]", x))) return st;
  if (y->n_dims != 4 && y->n_dims != 2)
    return gj_failf(r, AP_INVALID, where, "out", "tensor \"%s\" must be [N, C, H, W] or, for a global pool, [N, C]",
                 y->name);
  if (x->dims[0] != y->dims[0] || x->dims[1] != y->dims[1])
    return gj_failf(r, AP_INVALID, where, "out", "\"%s\" must keep the input's batch and channel dimensions", y->name);
  if (y->n_dims == 2) {
    if (x->dims[2] > 0 && x->dims[3] > 0 && (kernel[0] != x->dims[2] || kernel[1] != x->dims[3]))
      return gj_failf(r, AP_INVALID, where, "kernel", "a global pool to [N, C] needs kernel [%lld, %lld] (the input's H, W)",
                   (long long)x->dims[2], (long long)x->dims[3]);
    return AP_OK;
  }
  return check_spatial(r, where, x, y, kernel, stride, pad);
}
