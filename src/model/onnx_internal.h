/* The ONNX importer's shared state (model layer, core library): the table of named values, and the per-op
 * entry points that the importer (onnx_import.c), the shape inference (onnx_shape.c) and the op rules
 * (onnx_ops.c) share. Not used outside those three files. */
#ifndef AP_MODEL_ONNX_INTERNAL_H
#define AP_MODEL_ONNX_INTERNAL_H

#include "model/onnx.h"

/* One named value of the ONNX graph: a graph input, an initializer or a node output. */
typedef struct {
  const char *name;
  int elem_type;
  int n_dims; /* -1 while unknown */
  int64_t dims[ONNX_MAX_DIMS];
  int64_t n_vals; /* known integer contents (shape arithmetic), or -1 */
  int64_t *vals;
  bool is_init;     /* an initializer */
  bool activation;  /* depends on a graph input's data (not only on initializers, constants or shapes) */
  int64_t pending_params; /* trainable parameters that flowed into this value and no emitted op has counted yet */
  int producer;     /* node index, or -1 */
  int tensor;       /* graph tensor index, or -1 */
  /* Where each of its dims went in its graph tensor (set with tensor): ONNX dim d is graph dims g_first[d] ..
   * g_first[d] + g_count[d] - 1 (two where B·S or B·heads was relabelled into two dims). */
  int8_t g_first[ONNX_MAX_DIMS], g_count[ONNX_MAX_DIMS];
  /* What each dim is in terms of the graph inputs' batch and sequence (an OX_TAG_*), tagged at the graph inputs
   * and carried through each node by its operator's semantics (onnx_dims.c ox_dim_tags); tagged false where no
   * rule applied (the importer then falls back to matching sizes). */
  bool tagged;
  uint8_t tag[ONNX_MAX_DIMS];
} ox_val;

/* A dim's symbolic meaning: literal, the batch B, the sequence S, B·S merged, or B times a literal (torch's
 * [S, B·heads, d] attention layout). */
enum { OX_TAG_NONE, OX_TAG_B, OX_TAG_S, OX_TAG_BS, OX_TAG_BX };

typedef struct {
  ap_ctx *ctx;
  arena *a;
  const char *file;
  const onnx_model *m;
  ox_val *vals;
  int n_vals, cap_vals;
  int *hash; /* open addressing over vals by name; -1 empty */
  int hash_cap;
  int64_t opset;
  /* The node being read: its display name and its value indices (-1 for an omitted input or output). */
  const onnx_node *node;
  const char *node_name;
  int in[64], out[OP_MAX_OUT];
  int n_in, n_out;
  struct ox_names *names; /* the node outputs and initializers by name (onnx_packed.c), or NULL */
} ox;

/* Fails with "file: node 'name' (op_type T): message". */
AP_HIDDEN ap_status ox_fail(const ox *x, ap_status st, const char *fmt, ...) AP_PRINTF(3, 4);
/* The value of input i of the current node, or NULL when omitted or beyond its inputs. */
AP_HIDDEN ox_val *ox_in(const ox *x, int i);
AP_HIDDEN ox_val *ox_out(const ox *x, int i);
AP_HIDDEN const onnx_attr *ox_attr(const onnx_node *n, const char *name);
AP_HIDDEN int64_t ox_attr_i(const onnx_node *n, const char *name, int64_t def);
AP_HIDDEN double ox_attr_f(const onnx_node *n, const char *name, double def);
AP_HIDDEN int64_t ox_numel(const ox_val *v);
/* Whether a shape keeps every count far from int64 overflow: each dim at most 1e12 and the product of the
 * dims (zeros counted as 1) at most 1e15, the op-graph reader's limits (graph_json.c). */
AP_HIDDEN bool ox_dims_ok(int n, const int64_t *dims);

/* Shape inference and constant propagation for the current node (onnx_shape.c): fills the outputs' shapes
 * that the file leaves unknown and their integer contents where the inputs' are known; fails naming the node
 * when an output's shape cannot be known. */
typedef ap_status (*ox_infer_fn)(ox *x);

/* How an op type becomes a graph op (onnx_ops.c). */
typedef struct {
  const char *op_type;
  ox_infer_fn infer;
  int rule; /* an OX_RULE_* of onnx_ops.c */
  double flop_per_elem;
  int save; /* OX_SAVE_* bits */
} ox_op_spec;

/* The spec of an op type of the default domain, or NULL when autopar does not read it. */
AP_HIDDEN const ox_op_spec *ox_find_op(const char *op_type);
/* Fills op (kind, weights, FLOP rule, saved tensors) for the current node, whose activation inputs are
 * graph tensors. Takes the node's pending parameters into op. */
AP_HIDDEN ap_status ox_make_op(ox *x, const ox_op_spec *spec, graph_op *op);
/* Fills op's dim correspondence (graph.h in_dim, whole_dims) for the current node from its operator's
 * semantics (onnx_dims.c); src[k] is the node input that op input k is. */
AP_HIDDEN void ox_dim_map(ox *x, graph_op *op, const int *src);
/* Packed projections (onnx_packed.c): per node, its role in a MatMul (+ bias Add) -> equal Split pattern, the
 * three nodes' indices and the parts. */
enum { OX_PACKED_MATMUL = 1, OX_PACKED_BIAS, OX_PACKED_SPLIT };
typedef struct {
  int role; /* 0: none */
  int mm, add, split; /* node indices; add -1 when there is no bias */
  int parts;
} ox_packed;
/* Finds the patterns over the model's nodes into pk[n_nodes]. */
AP_HIDDEN ap_status ox_packed_scan(ox *x, ox_packed *pk);
/* The initializer a packed MatMul's weight is: its input 1, or (*transposed) the input of the Transpose that
 * feeds it; NULL when neither is a 2-D initializer. at: the MatMul's node index. */
AP_HIDDEN const onnx_tensor *ox_packed_weight(const ox *x, const onnx_node *mm, int64_t at, bool *transposed);
/* At the MatMul node ni (the current node, shapes inferred): drops the pattern unless its shapes fit. */
AP_HIDDEN void ox_packed_check(ox *x, ox_packed *pk, int ni);

/* Tags the current node's outputs (ox_val tag) from its inputs' tags; b0 and s0 are the graph inputs' batch and
 * sequence sizes (0 when none). */
AP_HIDDEN void ox_dim_tags(ox *x, int64_t b0, int64_t s0);

/* Checks the current node against its ONNX operator definition (onnx_check.c): input and output counts,
 * attribute types and flags, and the relations between inputs (Conv's group and channels, bias lengths, norm
 * scales); fails naming the node. Run before shape inference. */
AP_HIDDEN ap_status ox_check_node(const ox *x);

/* Helpers shared by onnx_shape.c and onnx_shape_nn.c: fail unless v (input i) has a known shape; set output
 * i's shape (unless declared) and element type; resolve a possibly negative axis against rank r; the numpy
 * broadcast of n values; an ints attribute, else the known values of input `input` (-1 when both are absent,
 * *known false when the input's values are not known). */
AP_HIDDEN ap_status ox_need(const ox *x, const ox_val *v, int i);
AP_HIDDEN ap_status ox_set_shape(ox *x, int i, int n, const int64_t *dims, int elem_type);
AP_HIDDEN bool ox_axis(int64_t a, int r, int *out);
AP_HIDDEN ap_status ox_broadcast_dims(ox *x, ox_val *const *v, int n, int *rank, int64_t *dims);
AP_HIDDEN int64_t ox_ints(ox *x, const char *attr, int input, const int64_t **out, bool *known);

/* Inference entry points (onnx_shape.c and onnx_shape_nn.c), named by rule. */
AP_HIDDEN ap_status ox_infer_same(ox *x);
AP_HIDDEN ap_status ox_infer_broadcast(ox *x);
AP_HIDDEN ap_status ox_infer_matmul(ox *x);
AP_HIDDEN ap_status ox_infer_gemm(ox *x);
AP_HIDDEN ap_status ox_infer_conv(ox *x);
AP_HIDDEN ap_status ox_infer_conv_transpose(ox *x);
AP_HIDDEN ap_status ox_infer_pool(ox *x);
AP_HIDDEN ap_status ox_infer_global_pool(ox *x);
AP_HIDDEN ap_status ox_infer_norm(ox *x);
AP_HIDDEN ap_status ox_infer_reduce(ox *x);
AP_HIDDEN ap_status ox_infer_reshape(ox *x);
AP_HIDDEN ap_status ox_infer_flatten(ox *x);
AP_HIDDEN ap_status ox_infer_squeeze(ox *x);
AP_HIDDEN ap_status ox_infer_unsqueeze(ox *x);
AP_HIDDEN ap_status ox_infer_transpose(ox *x);
AP_HIDDEN ap_status ox_infer_concat(ox *x);
AP_HIDDEN ap_status ox_infer_split(ox *x);
AP_HIDDEN ap_status ox_infer_slice(ox *x);
AP_HIDDEN ap_status ox_infer_gather(ox *x);
AP_HIDDEN ap_status ox_infer_shape(ox *x);
AP_HIDDEN ap_status ox_infer_constant(ox *x);
AP_HIDDEN ap_status ox_infer_constant_of_shape(ox *x);
AP_HIDDEN ap_status ox_infer_cast(ox *x);
AP_HIDDEN ap_status ox_infer_expand(ox *x);
AP_HIDDEN ap_status ox_infer_range(ox *x);
AP_HIDDEN ap_status ox_infer_dropout(ox *x);
AP_HIDDEN ap_status ox_infer_loss(ox *x);
AP_HIDDEN ap_status ox_infer_arg_reduce(ox *x);

#endif
