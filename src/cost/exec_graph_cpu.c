/* The graph executor's cost on a CPU core measured by `autopar profile` (cost layer; compute.h
 * compute_op_exec_graph). Where a device's profile carries the executor's kernels (the "executor" object), an
 * op of a general graph is priced as src/exec/graph/ runs it, from the profile's measurements and nothing
 * fitted to a plan:
 *  - Gemm and MatMul: the cblas_sgemm calls gx_fwd.c and gx_bwd.c make (forward, input gradient, weight
 *    gradient or the second operand's gradient), each at the measured seconds per FLOP of the nearest measured
 *    shapes of its layout (exec_cpu_gemm_s); a batched MatMul of activations, one call per batch matrix;
 *  - Conv: per sample, im2col then one GEMM [C_out, L] = W [C_out, C_in·k] · col [C_in·k, L] (gx_nn.c conv),
 *    backward im2col again, the weight-gradient GEMM dy · colᵀ and the column-gradient GEMM Wᵀ · dy and
 *    col2im; im2col and col2im are scalar loops with a bounds test per column element, priced as the other
 *    scalar loops below, per element;
 *  - every other op: a scalar loop over its elements (gx_fwd.c: one pass per output element, an index computed
 *    per element), at the executor's measured per-element kernel times: transcendental ops (Erf, Tanh,
 *    Sigmoid, Exp, Gelu, Softmax, the loss) at the GELU kernel's per-element time (erff per element),
 *    the rest (arithmetic, ReLU, norms, pools, copies: Concat, Slice, Transpose, Gather) at the norm kernel's
 *    per-element time, forward and backward (BatchNormalization's backward also its statistics pass again);
 *    the loss at the cross-entropy kernel's per-logit time;
 *    views (Reshape, Flatten, Squeeze) nothing.
 * The collectives (src/shard/shard_cost.c coll_time_s) are the profile's isolated MPI times by size: its
 * in-step excess is the wait for a partner that other jobs descheduled, which bench/graph_executor.py removes
 * by giving the ranks their own scheduling group. Not priced: malloc and first-touch of each op's output buffer,
 * and the per-op dispatch (a string compare and a call, well under a microsecond): the profile measures neither. */
#include <math.h>
#include <string.h>

#include "cost/compute.h"

static bool is_transcendental(const char *t) {
  static const char *const k[] = {"Erf", "Tanh", "Sigmoid", "Exp", "Gelu", "Softmax", "LogSoftmax", "Log"};
  for (size_t i = 0; t && i < sizeof k / sizeof k[0]; i++)
    if (strcmp(t, k[i]) == 0) return true;
  return false;
}

static double dim_of(const graph_tensor *t, int d, double b, double s) {
  return d >= 0 && d < t->n_dims ? graph_dim(t->dims[d], b, s) : 1.0;
}

bool compute_op_exec_graph(const compute_model *cm, const graph_block *blk, const graph_op *op, double b, double s,
                           compute_op_time *out) {
  const exec_cpu_profile *x = cm ? cm->exec : NULL;
  if (!x || !x->present) return false;
  compute_op_time r = {0};
  op_cost c = graph_op_eval(blk, op, b, s);
  r.fwd_flop = c.fwd_gemm_flop + c.fwd_vector_flop;
  r.bwd_flop = c.dgrad_flop + c.wgrad_flop;
  r.fwd_bytes = c.read_bytes + c.write_bytes;
  r.bwd_bytes = 2 * r.fwd_bytes;
  const graph_tensor *y = &blk->tensors[op->out];
  double out_n = graph_tensor_numel(y, b, s), in_n = 0;
  for (int i = 0; i < op->n_in; i++) in_n += graph_tensor_numel(&blk->tensors[op->in[i]], b, s);
  if (op->kind == OP_MATMUL && op->weight_is_input && op->n_in >= 2) {
    /* [..., M, K] · [..., K, N]: one NN GEMM per batch matrix forward, dA = dY·Bᵀ (NT) and dB = Aᵀ·dY (TN). */
    const graph_tensor *a = &blk->tensors[op->in[0]];
    double M = dim_of(y, y->n_dims - 2, b, s), N = dim_of(y, y->n_dims - 1, b, s), K = dim_of(a, a->n_dims - 1, b, s);
    double nb = M * N > 0 ? out_n / (M * N) : 0;
    r.fwd_s = nb * exec_cpu_gemm_s(x, EXEC_NN, M, N, K);
    r.bwd_s = nb * (exec_cpu_gemm_s(x, EXEC_NT, M, K, N) + exec_cpu_gemm_s(x, EXEC_TN, K, N, M));
  } else if (op->kind == OP_MATMUL || op->kind == OP_ROUTER) {
    /* x [rows, k] times the weight: forward one GEMM over all rows; input gradient dY·W, weight gradient
     * Xᵀ·dY (gx_bwd.c gemm_bwd), and the bias's sum over rows. */
    double k = (double)op->weight_k, n = (double)op->weight_n, rows = k > 0 ? in_n / k : 0;
    if (op->n_in > 0) rows = graph_tensor_numel(&blk->tensors[op->in[0]], b, s) / (k > 0 ? k : 1);
    r.fwd_s = exec_cpu_gemm_s(x, EXEC_NT, rows, n, k) + (op->has_bias ? out_n * x->norm_fwd_s : 0);
    r.bwd_s = exec_cpu_gemm_s(x, EXEC_NN, rows, k, n) + exec_cpu_gemm_s(x, EXEC_TN, n, k, rows) +
              (op->has_bias ? out_n * x->norm_bwd_s : 0);
  } else if (op->kind == OP_CONV2D) {
    double n_img = dim_of(y, 0, b, s), cout = (double)op->weight_n, kk = (double)op->weight_k;
    double L = n_img * cout > 0 ? out_n / (n_img * cout) : 0;
    double col_s = kk * L * x->norm_fwd_s; /* im2col or col2im of one sample: a scalar loop per column element */
    r.fwd_s = n_img * (exec_cpu_gemm_s(x, EXEC_NN, cout, L, kk) + col_s) + (op->has_bias ? out_n * x->norm_fwd_s : 0);
    r.bwd_s = n_img * (exec_cpu_gemm_s(x, EXEC_NT, cout, kk, L) + exec_cpu_gemm_s(x, EXEC_TN, kk, L, cout) + 2 * col_s) +
              (op->has_bias ? out_n * x->norm_bwd_s : 0);
  } else if (op->is_view) {
    r.fwd_s = r.bwd_s = 0;
  } else if (op->kind == OP_LOSS) {
    double logits = op->n_in > 0 ? graph_tensor_numel(&blk->tensors[op->in[0]], b, s) : out_n;
    r.fwd_s = logits * x->xent_s;
    r.bwd_s = logits * x->norm_bwd_s;
  } else {
    /* One scalar pass over the larger of the output and the inputs (a pool reads k_h·k_w inputs per output, a
     * reduction reads its whole input), backward the same over the input gradients. */
    double elems = fmax(out_n, op->kind == OP_POOL ? out_n * (double)(op->kernel_h * op->kernel_w) : in_n);
    bool tr = is_transcendental(op->op_type);
    r.fwd_s = elems * (tr ? x->gelu_fwd_s : x->norm_fwd_s);
    r.bwd_s = elems * (tr ? x->gelu_bwd_s : x->norm_bwd_s);
    /* BatchNormalization's backward recomputes the batch statistics (gx_nn.c batchnorm) before its own two
     * passes: the forward's statistics pass again. */
    if (op->op_type && strcmp(op->op_type, "BatchNormalization") == 0) r.bwd_s += elems * x->norm_fwd_s;
  }
  *out = r;
  return true;
}
