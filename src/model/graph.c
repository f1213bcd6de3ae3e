/* The model graph: tensor and op accounting (model layer). Turns an op's kind and symbolic shapes into FLOP,
 * bytes and parameter counts at a concrete micro-batch and sequence length. The FLOP rules follow the
 * conventions of COSTMODEL.md §1.1: a multiply-add is 2 FLOP; a GEMM's backward is one GEMM for the input
 * gradient and one for the weight gradient, each as large as the forward (Narayanan et al. 2021 §5.1). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/graph.h"

static const struct {
  const char *name;
  size_t bytes;
} dtype_table[] = {
#define X(e, s, n) [DT_##e] = {s, n},
    DTYPE_MAP(X)
#undef X
};
_Static_assert(AP_COUNT(dtype_table) == DT_COUNT_, "dtype table and enum disagree");

const char *dtype_name(dtype dt) { return dt < DT_COUNT_ ? dtype_table[dt].name : "?"; }
size_t dtype_bytes(dtype dt) { return dt < DT_COUNT_ ? dtype_table[dt].bytes : 0; }
bool dtype_parse(const char *name, dtype *out) {
  for (size_t i = 0; i < DT_COUNT_; i++)
    if (strcmp(name, dtype_table[i].name) == 0) {
      *out = (dtype)i;
      return true;
    }
  return false;
}

static const char *const op_kind_names[] = {
#define X(e, s) [OP_##e] = s,
    OP_KIND_MAP(X)
#undef X
};
_Static_assert(AP_COUNT(op_kind_names) == OP_KIND_COUNT_, "op kind table and enum disagree");

const char *op_kind_name(op_kind k) { return k < OP_KIND_COUNT_ ? op_kind_names[k] : "?"; }
bool op_kind_parse(const char *name, op_kind *out) {
  for (size_t i = 0; i < OP_KIND_COUNT_; i++)
    if (strcmp(name, op_kind_names[i]) == 0) {
      *out = (op_kind)i;
      return true;
    }
  return false;
}

double graph_tensor_numel(const graph_tensor *t, double b, double s) {
  double n = 1;
  for (int i = 0; i < t->n_dims; i++) n *= graph_dim(t->dims[i], b, s);
  return n;
}

double graph_tensor_bytes(const graph_tensor *t, double b, double s) {
  return graph_tensor_numel(t, b, s) * (double)dtype_bytes(t->dt);
}

/* Whether the op's weight_k × weight_n (+ bias) are its own parameters. */
static bool owns_weight(const graph_op *op) {
  return !op->tied && !op->weight_is_input && (op->kind == OP_MATMUL || op->kind == OP_ROUTER || op->kind == OP_CONV2D);
}

int64_t graph_op_params(const graph_op *op) {
  int64_t p = op->extra_params;
  if (owns_weight(op))
    p += (op->weight_k * op->weight_n + (op->has_bias ? op->weight_n : 0)) * op->n_experts;
  return p;
}

int64_t graph_op_params_active(const graph_op *op) {
  if (op->n_experts <= 1) return graph_op_params(op);
  int64_t per_expert = op->weight_k * op->weight_n + (op->has_bias ? op->weight_n : 0);
  return op->extra_params + (owns_weight(op) ? per_expert * op->top_k : 0);
}

op_cost graph_op_eval(const graph_block *blk, const graph_op *op, double b, double s) {
  op_cost c = {0};
  const graph_tensor *out = &blk->tensors[op->out];
  double out_n = graph_tensor_numel(out, b, s);
  double in_bytes = 0;
  for (int i = 0; i < op->n_in; i++) in_bytes += graph_tensor_bytes(&blk->tensors[op->in[i]], b, s);
  double param_bytes = (double)graph_op_params_active(op) * (double)dtype_bytes(out->dt);
  c.read_bytes = in_bytes;
  c.write_bytes = out_n * (double)dtype_bytes(out->dt);
  for (int i = 1; i < op->n_out; i++) c.write_bytes += graph_tensor_bytes(&blk->tensors[op->outs[i]], b, s);
  switch (op->kind) {
  case OP_MATMUL:
  case OP_ROUTER: {
    /* Rows M = elements of the input over K; for routed experts the input carries the top_k copies of each
     * token, so M already counts k rows per token. 2·M·K·N forward, the same for dgrad and wgrad. */
    const graph_tensor *x = &blk->tensors[op->in[0]];
    double m = graph_tensor_numel(x, b, s) / (double)op->weight_k;
    double f = 2.0 * m * (double)op->weight_k * (double)op->weight_n;
    c.fwd_gemm_flop = f;
    c.dgrad_flop = f;
    c.wgrad_flop = f;
    c.bwd_gemm_flop = 2 * f;
    if (op->weight_is_input) {
      /* A product of two activations [..., M, K] · [..., K, N]: 2·K FLOP per output element, K taken from the
       * left operand's symbolic shape (it is S in P·V). The backward pass is the gradient of each operand, one
       * GEMM as large as the forward each (the same rule), and there is no weight to update. */
      f = 2.0 * out_n * (x->n_dims > 0 ? graph_dim(x->dims[x->n_dims - 1], b, s) : 1.0);
      c.fwd_gemm_flop = f;
      c.bwd_gemm_flop = 2 * f;
      c.dgrad_flop = 2 * f;
      c.wgrad_flop = 0;
    }
    if (op->has_bias) {
      c.fwd_vector_flop += m * (double)op->weight_n;
      c.wgrad_flop += m * (double)op->weight_n;
    }
    if (op->kind == OP_ROUTER) c.fwd_vector_flop += 5.0 * m * (double)op->weight_n; /* softmax + top-k */
    c.read_bytes += param_bytes;
    break;
  }
  case OP_ATTENTION: {
    /* Q Kᵀ is 2·T·L·a·d_qk and P V is 2·T·L·a·d_v for T query tokens and L keys each (COSTMODEL.md §1.1),
     * with no causal discount (Narayanan et al. 2021; PaLM Appendix B). The backward pass is four such
     * GEMMs (dQ, dK, dV, dP), twice the forward. A sliding window limits L. */
    const graph_tensor *q = &blk->tensors[op->in[0]];
    double tokens = graph_tensor_numel(q, b, s) / ((double)op->heads * (double)op->head_dim_qk);
    double keys = (op->window > 0 && (double)op->window < s) ? (double)op->window : s;
    double f = 2.0 * tokens * keys * (double)op->heads * (double)(op->head_dim_qk + op->head_dim_v);
    c.fwd_gemm_flop = f;
    c.attn_quadratic_flop = op->window > 0 && (double)op->window < s ? 0 : f;
    c.fwd_vector_flop = 4.0 * tokens * keys * (double)op->heads; /* scale, max, exp, sum of the softmax */
    c.dgrad_flop = 2 * f + 2 * c.fwd_vector_flop;
    c.bwd_gemm_flop = 2 * f;
    break;
  }
  case OP_NORM:
  case OP_ELEMENTWISE:
    c.fwd_vector_flop = op->flop_per_elem * out_n;
    c.dgrad_flop = 2 * c.fwd_vector_flop;
    c.wgrad_flop = op->extra_params > 0 ? 2 * out_n : 0;
    c.read_bytes += param_bytes;
    break;
  case OP_EMBEDDING:
    c.wgrad_flop = out_n; /* scatter-add of the output gradient into the table rows */
    c.read_bytes = c.write_bytes;
    break;
  case OP_DISPATCH:
    c.read_bytes = c.write_bytes;
    break;
  case OP_COMBINE:
    c.fwd_vector_flop = 2.0 * graph_tensor_numel(&blk->tensors[op->in[0]], b, s);
    c.dgrad_flop = 2 * c.fwd_vector_flop;
    break;
  case OP_LOSS: {
    double in_n = graph_tensor_numel(&blk->tensors[op->in[0]], b, s);
    c.fwd_vector_flop = 5.0 * in_n; /* max, subtract, exp, sum, log-gather */
    c.dgrad_flop = 2.0 * in_n;
    c.write_bytes = 4.0; /* one fp32 loss; the logits gradient is written in the backward pass */
    break;
  }
  case OP_CONV2D: {
    /* Each output element is a dot product of length C_in·k_h·k_w = weight_k. A transposed convolution
     * states its own FLOP per output element (its work follows its input). */
    double f = op->gemm_flop_per_elem > 0 ? op->gemm_flop_per_elem * out_n : 2.0 * out_n * (double)op->weight_k;
    c.fwd_gemm_flop = f;
    c.dgrad_flop = f;
    c.wgrad_flop = f;
    c.bwd_gemm_flop = 2 * f;
    c.read_bytes += param_bytes;
    break;
  }
  case OP_POOL:
    c.fwd_vector_flop = out_n * (double)(op->kernel_h * op->kernel_w);
    c.dgrad_flop = c.fwd_vector_flop;
    break;
  case OP_KIND_COUNT_:
    break;
  }
  if (op->is_view) c.read_bytes = c.write_bytes = 0;
  return c;
}

static void cost_add(op_cost *a, const op_cost *b) {
  a->fwd_gemm_flop += b->fwd_gemm_flop;
  a->fwd_vector_flop += b->fwd_vector_flop;
  a->dgrad_flop += b->dgrad_flop;
  a->wgrad_flop += b->wgrad_flop;
  a->bwd_gemm_flop += b->bwd_gemm_flop;
  a->read_bytes += b->read_bytes;
  a->write_bytes += b->write_bytes;
  a->attn_quadratic_flop += b->attn_quadratic_flop;
}

op_cost graph_block_eval(const graph_block *blk, double b, double s) {
  op_cost sum = {0};
  for (int i = 0; i < blk->n_ops; i++) {
    op_cost c = graph_op_eval(blk, &blk->ops[i], b, s);
    cost_add(&sum, &c);
  }
  return sum;
}

double graph_block_saved_bytes(const graph_block *blk, double b, double s) {
  double total = 0;
  /* A tensor saved by several ops is stored once: mark each the first time it is seen. */
  unsigned char seen[512];
  unsigned char *mark = blk->n_tensors <= (int)sizeof seen ? seen : calloc((size_t)blk->n_tensors, 1);
  if (!mark) return NAN;
  memset(mark, 0, (size_t)blk->n_tensors < sizeof seen ? (size_t)blk->n_tensors : sizeof seen);
  for (int i = 0; i < blk->n_ops; i++) {
    const graph_op *op = &blk->ops[i];
    for (int k = 0; k < op->n_saved; k++) {
      int t = op->saved[k];
      if (!mark[t]) {
        mark[t] = 1;
        total += graph_tensor_bytes(&blk->tensors[t], b, s);
      }
    }
    if (op->mask_of >= 0) total += graph_tensor_numel(&blk->tensors[op->mask_of], b, s);
  }
  if (mark != seen) free(mark);
  return total;
}

int64_t graph_block_params(const graph_block *blk) {
  int64_t p = 0;
  for (int i = 0; i < blk->n_ops; i++) p += graph_op_params(&blk->ops[i]);
  return p;
}

int64_t graph_block_params_active(const graph_block *blk) {
  int64_t p = 0;
  for (int i = 0; i < blk->n_ops; i++) p += graph_op_params_active(&blk->ops[i]);
  return p;
}

int64_t graph_params_total(const graph *g) {
  int64_t p = 0;
  for (int i = 0; i < g->n_blocks; i++) p += graph_block_params(&g->blocks[i]) * g->blocks[i].repeat;
  return p;
}

int64_t graph_params_active(const graph *g) {
  int64_t p = 0;
  for (int i = 0; i < g->n_blocks; i++) p += graph_block_params_active(&g->blocks[i]) * g->blocks[i].repeat;
  return p;
}

double graph_train_flop_per_seq(const graph *g, double s, bool gemm_only) {
  double f = 0;
  for (int i = 0; i < g->n_blocks; i++) {
    op_cost c = graph_block_eval(&g->blocks[i], 1, s);
    double per = gemm_only ? c.fwd_gemm_flop + c.bwd_gemm_flop
                           : c.fwd_gemm_flop + c.fwd_vector_flop + c.dgrad_flop + c.wgrad_flop;
    f += per * (double)g->blocks[i].repeat;
  }
  return f;
}

/* ---- Building ---- */

graph_block *graph_block_begin(graph_builder *gb, graph *g, const char *name, block_role role, int64_t repeat) {
  graph_block *nb = arena_alloc(gb->a, sizeof(graph_block) * (size_t)(g->n_blocks + 1));
  if (!nb) {
    gb->oom = true;
    return NULL;
  }
  if (g->n_blocks) memcpy(nb, g->blocks, sizeof(graph_block) * (size_t)g->n_blocks);
  g->blocks = nb;
  graph_block *blk = &g->blocks[g->n_blocks++];
  *blk = (graph_block){.name = arena_strdup(gb->a, name), .role = role, .repeat = repeat, .input = -1, .output = -1};
  gb->blk = blk;
  gb->cap_tensors = gb->cap_ops = 0;
  return blk;
}

static bool grow(graph_builder *gb, void **arr, int n, int *cap, size_t elem) {
  if (n < *cap) return true;
  int nc = *cap ? *cap * 2 : 16;
  void *p = arena_alloc(gb->a, elem * (size_t)nc);
  if (!p) {
    gb->oom = true;
    return false;
  }
  if (n) memcpy(p, *arr, elem * (size_t)n);
  *arr = p;
  *cap = nc;
  return true;
}

int graph_tensor_add(graph_builder *gb, const char *name, dtype dt, int tp_dim, bool seq_parallel,
                     const int64_t *dims, int n_dims) {
  graph_block *blk = gb->blk;
  if (!blk || !grow(gb, (void **)&blk->tensors, blk->n_tensors, &gb->cap_tensors, sizeof(graph_tensor))) return -1;
  graph_tensor *t = &blk->tensors[blk->n_tensors];
  *t = (graph_tensor){.name = arena_strdup(gb->a, name), .dt = dt, .tp_dim = tp_dim, .seq_parallel = seq_parallel};
  if (!t->name) {
    gb->oom = true;
    return -1;
  }
  for (int i = 0; i < n_dims && i < GRAPH_MAX_DIMS && dims[i] != 0; i++) t->dims[t->n_dims++] = dims[i];
  return blk->n_tensors++;
}

int graph_op_add(graph_builder *gb, const graph_op *op) {
  graph_block *blk = gb->blk;
  if (!blk || !grow(gb, (void **)&blk->ops, blk->n_ops, &gb->cap_ops, sizeof(graph_op))) return -1;
  graph_op *o = &blk->ops[blk->n_ops];
  *o = *op;
  if (o->n_out == 0 && o->out >= 0) {
    o->n_out = 1;
    o->outs[0] = o->out;
  }
  if (op->op_type && !(o->op_type = arena_strdup(gb->a, op->op_type))) {
    gb->oom = true;
    return -1;
  }
  o->name = arena_strdup(gb->a, op->name);
  if (!o->name) {
    gb->oom = true;
    return -1;
  }
  for (int i = 0; i < o->n_weights && i < OP_MAX_WEIGHTS; i++)
    if (op->weights[i].name && !(o->weights[i].name = arena_strdup(gb->a, op->weights[i].name))) {
      gb->oom = true;
      return -1;
    }
  return blk->n_ops++;
}

graph_op graph_op_init(op_kind kind, const char *name) {
  return (graph_op){.name = name, .kind = kind, .out = -1, .mask_of = -1, .n_experts = 1, .top_k = 1};
}

ap_status graph_validate(ap_ctx *ctx, const graph *g, const char *file) {
  for (int bi = 0; bi < g->n_blocks; bi++) {
    const graph_block *blk = &g->blocks[bi];
    if (blk->repeat < 1) return ctx_fail(ctx, AP_INVALID, "%s: block %s: repeat must be >= 1", file, blk->name);
    for (int oi = 0; oi < blk->n_ops; oi++) {
      const graph_op *op = &blk->ops[oi];
      bool ok = op->out >= 0 && op->out < blk->n_tensors && op->n_in >= 0 && op->n_in <= OP_MAX_IN &&
                op->n_saved >= 0 && op->n_saved <= OP_MAX_SAVED && op->mask_of < blk->n_tensors;
      for (int k = 0; ok && k < op->n_in; k++) ok = op->in[k] >= 0 && op->in[k] < blk->n_tensors;
      for (int k = 0; ok && k < op->n_saved; k++) ok = op->saved[k] >= 0 && op->saved[k] < blk->n_tensors;
      /* n_out 0: an op made without graph_op_add that names only out */
      ok = ok && op->n_out >= 0 && op->n_out <= OP_MAX_OUT && (op->n_out == 0 || op->outs[0] == op->out);
      for (int k = 1; ok && k < op->n_out; k++) ok = op->outs[k] >= 0 && op->outs[k] < blk->n_tensors;
      if (!ok) return ctx_fail(ctx, AP_INVALID, "%s: block %s, op %s: tensor reference out of range", file, blk->name, op->name);
      bool needs_in = op->kind != OP_EMBEDDING;
      if (needs_in && op->n_in < 1)
        return ctx_fail(ctx, AP_INVALID, "%s: block %s, op %s: needs at least one input", file, blk->name, op->name);
      if (op->weight_is_input && (op->kind != OP_MATMUL || op->n_in < 2 || op->weight_k < 1 || op->weight_n < 1))
        return ctx_fail(ctx, AP_INVALID, "%s: block %s, op %s: a product of two activations needs a matmul with two inputs",
                        file, blk->name, op->name);
      if ((op->kind == OP_MATMUL || op->kind == OP_ROUTER) && !op->weight_is_input) {
        const graph_tensor *x = &blk->tensors[op->in[0]], *y = &blk->tensors[op->out];
        if (op->weight_k < 1 || op->weight_n < 1 || x->n_dims < 1 || x->dims[x->n_dims - 1] != op->weight_k ||
            y->n_dims < 1 || y->dims[y->n_dims - 1] != op->weight_n)
          return ctx_fail(ctx, AP_INVALID,
                          "%s: block %s, op %s: matmul shapes disagree (input last dim must equal k, output last dim n)",
                          file, blk->name, op->name);
      }
      if (op->kind == OP_ATTENTION) {
        if (op->heads < 1 || op->kv_heads < 1 || op->head_dim_qk < 1 || op->head_dim_v < 1 || op->heads % op->kv_heads)
          return ctx_fail(ctx, AP_INVALID, "%s: block %s, op %s: attention heads must be >= 1 and divisible by kv_heads",
                          file, blk->name, op->name);
        if (op->n_in < 3)
          return ctx_fail(ctx, AP_INVALID, "%s: block %s, op %s: attention takes q, k, v inputs", file, blk->name, op->name);
      }
      /* Each op's parameters stay below 1e13 so that sums over ops and repeats cannot overflow int64. */
      double params = (double)op->extra_params +
                      ((double)op->weight_k * (double)op->weight_n + (double)op->weight_n) * (double)op->n_experts;
      if (op->extra_params < 0 || op->weight_k < 0 || op->weight_n < 0 || params > 1e13)
        return ctx_fail(ctx, AP_INVALID, "%s: block %s, op %s: parameter count out of range (more than 1e13)", file,
                        blk->name, op->name);
      if (op->n_experts < 1 || op->top_k < 1 || op->top_k > op->n_experts)
        return ctx_fail(ctx, AP_INVALID, "%s: block %s, op %s: need 1 <= top_k <= n_experts", file, blk->name, op->name);
    }
  }
  return AP_OK;
}
