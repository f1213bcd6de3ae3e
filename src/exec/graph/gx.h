/* The graph runtime of the executor (exec layer, optional part "exec"; docs/executor.md "ONNX graphs"): runs an
 * ONNX graph as its nodes say, forward and backward by hand in fp32 on OpenBLAS, beside the transformer runtime
 * of src/exec/ex_*.c, whose optimizer (ex_adamw_step) and safetensors reader it reuses. A graph is decoded by
 * the "onnx" part with every tensor's values kept (onnx_part_ops.decode); gx_graph.c turns it into value
 * indices, the trainable initializers and one flat parameter buffer; gx_fwd.c and gx_bwd.c hold each op
 * kind's forward and backward; gx_train.c runs one micro-batch and the loss. Shapes are taken from the
 * tensors as they run, so integer shape arithmetic (Shape, Gather, Concat, Unsqueeze of torch.onnx.export's
 * graphs) runs as data. The MPI driver is src/exec/graph/grank.c.
 * Internal header: not installed, not part of the public API. */
#ifndef AP_EXEC_GX_H
#define AP_EXEC_GX_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"
#include "exec/exec.h"
#include "model/onnx.h"

enum { GX_MAX_DIMS = 8, GX_MAX_IO = 64 };

/* A tensor as the runtime holds it: fp32 data (f) or integers (i, int64; bool is 0/1) of shape dims. */
typedef struct {
  bool is_int;
  int rank;
  int64_t dims[GX_MAX_DIMS];
  int64_t n;
  float *f;
  int64_t *i;
  bool view; /* f points into the parameter buffer or an initializer: not freed with the tensor */
} gx_tensor;

typedef struct {
  const onnx_node *node;
  const char *name; /* the node's name, or <op_type>_<index> as the importer names it */
  int n_in, n_out;
  int in[GX_MAX_IO], out[GX_MAX_IO]; /* value indices; -1 for an omitted input or output */
} gx_node;

/* A trainable initializer: its value, its place in the flat buffer, and whether AdamW decays it. */
typedef struct {
  int val;
  const char *name;
  int64_t off, n;
} gx_param;

typedef struct {
  const onnx_model *m;
  int n_vals;
  const char **names;
  gx_tensor *consts;  /* per value: the initializer's or a Constant's tensor (rank -1 when not one) */
  int n_nodes;
  gx_node *nodes;
  int n_inputs;       /* graph inputs that are not initializers, in file order */
  int *inputs;
  int output;         /* the single graph output */
  int n_params;
  gx_param *params;
  int *param_of;      /* per value: its index in params, or -1 */
  int *producer;      /* per value: the node that computes it, or -1 */
  bool *dep;          /* per value: computed from a graph input (an activation), not only from weights and constants */
  int64_t n_weights;  /* floats in the flat buffer */
  ex_model table;     /* the parameter table in ex_model's form, for ex_adamw_step's per-tensor decay */
} gx_graph;

/* Builds the graph from a decoded model (arena-owned strings stay the arena's). AP_UNSUPPORTED names the node
 * and op type the runtime does not run, or the graph's shape (not one output). Frees with gx_graph_free. */
AP_HIDDEN ap_status gx_graph_build(ap_ctx *ctx, const char *file, const onnx_model *m, gx_graph *g);
AP_HIDDEN void gx_graph_free(gx_graph *g);
/* The initial weights into w (n_weights floats): the initializers' values, or, where init (a safetensors
 * file, may be NULL) has a tensor of that name, its values (the shape must match). */
AP_HIDDEN ap_status gx_graph_init(ap_ctx *ctx, const gx_graph *g, const char *init, float *w);

/* A part of a packed projection (gx_packed.c): the MatMul node "<MatMul>#q" and its bias Add (-1: none) after
 * the rewrite, the initializers it reads part `part` of n_parts of (the weight's columns as the MatMul reads
 * them, [k, n] per part; transposed: stored [n_parts·n, k], as torch.onnx writes nn.Linear's weight). */
typedef struct {
  int mm, add;
  const char *weight, *bias;
  bool transposed;
  int part, n_parts;
  int64_t k, n;
} gx_packed;

/* Rewrites the decoded model's packed projections that the plan names in parts (names: the plan's op names) into
 * one Slice-of-the-weight, MatMul and bias Add per part, and names every unnamed node <op_type>_<index> of the
 * original graph (strings and nodes in arena a). AP_INVALID names the MatMul when the plan reads it in parts
 * but the graph is not the pattern. *out (malloc'd, or NULL) lists the parts. */
AP_HIDDEN ap_status gx_unpack(ap_ctx *ctx, arena *a, const char *file, onnx_model *m, const char *const *names,
                              int n_names, gx_packed **out, int *n_out);

/* The communication an op needs inside itself: the sum of n doubles over the ranks that share its samples
 * (BatchNormalization's statistics: the mesh axes that split the batch, `axes`, a bit per mesh axis). NULL
 * sum: one rank. */
typedef struct {
  void *user;
  void (*sum)(void *user, unsigned axes, double *buf, int64_t n);
  unsigned axes;
} gx_comm;

/* One forward and backward pass's state: every value's tensor and gradient. */
typedef struct {
  const gx_graph *g;
  const float *w;
  float *gw; /* gradient of the flat buffer, accumulated */
  gx_tensor *v;
  float **grad; /* per value: its gradient (v's shape), or NULL */
  const gx_comm *comm;
  char err[420];
} gx_run;

enum { GX_LOSS_XENT, GX_LOSS_MSE };

/* Runs the forward pass of one micro-batch: inputs[k] is graph input k's tensor (copied). Then the loss
 * against labels (class ids for cross entropy over the output's last axis, or the output's shape for mse),
 * and the backward pass, accumulating the gradient of (loss sum · scale) into gw. Returns the loss summed
 * over the samples (cross entropy) or elements (mse), or NaN with r->err set (an op that fails, such as a
 * shape that disagrees, names the node). */
AP_HIDDEN double gx_step(gx_run *r, const gx_tensor *inputs, const gx_tensor *labels, int loss, double scale);
AP_HIDDEN void gx_run_free(gx_run *r);
/* The loss of output y against labels (the sum over rows or elements) and dy = d(sum · scale)/dy. */
AP_HIDDEN double gx_loss(gx_run *r, const gx_tensor *y, const gx_tensor *lab, int loss, double scale, float *dy);

/* ---- Tensors and ops (gx_tensor.c, gx_fwd.c, gx_bwd.c) ---- */
AP_HIDDEN bool gx_alloc(gx_tensor *t, bool is_int, int rank, const int64_t *dims);
AP_HIDDEN void gx_free(gx_tensor *t);
/* The numpy broadcast of a and b's shapes into out; false when they do not broadcast. */
AP_HIDDEN bool gx_bcast_shape(const gx_tensor *a, const gx_tensor *b, int *rank, int64_t *dims);
/* The flat index into t of element k of a tensor of shape (rank, dims) that t broadcasts to. */
AP_HIDDEN int64_t gx_bcast_index(const gx_tensor *t, int rank, const int64_t *dims, int64_t k);

/* Node k's forward: reads r->v[in], writes r->v[out]. Returns false with r->err naming the node. */
AP_HIDDEN bool gx_fwd(gx_run *r, int k);
/* Node k's backward: adds the input gradients from the output gradients (outputs without one are zero). */
AP_HIDDEN bool gx_bwd(gx_run *r, int k);
/* The gradient buffer of value v, zeroed on first use; NULL on out of memory. */
AP_HIDDEN float *gx_grad(gx_run *r, int v);
AP_HIDDEN bool gx_fail(gx_run *r, int k, const char *fmt, ...) AP_PRINTF(3, 4);
AP_HIDDEN const onnx_attr *gx_attr(const onnx_node *n, const char *name);
AP_HIDDEN int64_t gx_attr_i(const onnx_node *n, const char *name, int64_t def);
AP_HIDDEN double gx_attr_f(const onnx_node *n, const char *name, double def);

#endif
