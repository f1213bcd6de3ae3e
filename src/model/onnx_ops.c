/* The ONNX op types autopar reads and how each becomes a graph op (model layer, core library): the op kind
 * the cost model uses, the forward FLOP rule (the backward follows from the kind, graph.c graph_op_eval, as
 * for the transformer builder), the weights and parameters, and the tensors kept for the backward pass.
 *
 * FLOP per output element of pointwise ops: 1 for arithmetic, comparisons and activations counted that way
 * by the op-graph examples (ReLU, residual add: docs/graph-format.md); GELU 8 and the normalisations 7, as
 * the transformer builder counts them (src/model/transformer.c mlp and norm); softmax 4 (scale, max, exp, sum,
 * as graph.c counts the attention softmax); reductions one per input element. Pointwise ops are memory-bound,
 * so these counts rarely decide a time. Saved tensors follow PyTorch's autograd formulas
 * (pytorch/pytorch tools/autograd/derivatives.yaml at v1.13.0: relu, sigmoid, tanh, exp, sqrt and softmax keep
 * their result; gelu, erf, log, pow keep their input; mul and div keep both operands; matmul and conv keep
 * their inputs; the norms keep their input; dropout keeps its mask; max pooling keeps its input). */
#include <string.h>

#include "model/onnx_internal.h"

enum {
  OX_RULE_POINTWISE, /* ELEMENTWISE, flop_per_elem per output element */
  OX_RULE_VIEW,      /* reshape-like: no data moves */
  OX_RULE_COPY,      /* moves data, no arithmetic (transpose, concat, slice, split, expand, cast) */
  OX_RULE_NORM,
  OX_RULE_MATMUL,
  OX_RULE_GEMM,
  OX_RULE_CONV,
  OX_RULE_CONVT,
  OX_RULE_POOL,
  OX_RULE_GPOOL,
  OX_RULE_REDUCE,
  OX_RULE_GATHER,
  OX_RULE_DROPOUT,
  OX_RULE_LOSS
};
enum { OX_SAVE_IN0 = 1, OX_SAVE_INS = 2, OX_SAVE_OUT = 4 };

#define PW(t, f, s) {t, ox_infer_same, OX_RULE_POINTWISE, f, s}
#define BC(t, f, s) {t, ox_infer_broadcast, OX_RULE_POINTWISE, f, s}
static const ox_op_spec specs[] = {
    /* activations and unary math */
    PW("Relu", 1, OX_SAVE_OUT), PW("LeakyRelu", 1, OX_SAVE_IN0), PW("Sigmoid", 1, OX_SAVE_OUT), PW("Tanh", 1, OX_SAVE_OUT),
    PW("Erf", 1, OX_SAVE_IN0), PW("Gelu", 8, OX_SAVE_IN0), PW("Exp", 1, OX_SAVE_OUT), PW("Log", 1, OX_SAVE_IN0),
    PW("Sqrt", 1, OX_SAVE_OUT), PW("Reciprocal", 1, OX_SAVE_OUT), PW("Neg", 1, 0), PW("Abs", 1, OX_SAVE_IN0),
    PW("Floor", 1, 0), PW("Ceil", 1, 0), PW("Not", 1, 0), PW("Softplus", 1, OX_SAVE_IN0), PW("Elu", 1, OX_SAVE_OUT),
    PW("Selu", 1, OX_SAVE_OUT), PW("HardSigmoid", 1, OX_SAVE_IN0), PW("HardSwish", 1, OX_SAVE_IN0),
    PW("Clip", 1, OX_SAVE_IN0), PW("Trilu", 1, 0), PW("Softmax", 4, OX_SAVE_OUT), PW("LogSoftmax", 4, OX_SAVE_OUT),
    {"Identity", ox_infer_same, OX_RULE_VIEW, 0, 0},
    {"Cast", ox_infer_cast, OX_RULE_COPY, 0, 0},
    /* binary (broadcasting) */
    BC("Add", 1, 0), BC("Sub", 1, 0), BC("Mul", 1, OX_SAVE_INS), BC("Div", 1, OX_SAVE_INS), BC("Pow", 1, OX_SAVE_INS),
    BC("Max", 1, OX_SAVE_INS), BC("Min", 1, OX_SAVE_INS), BC("Mod", 1, 0), BC("Equal", 1, 0), BC("Less", 1, 0),
    BC("Greater", 1, 0), BC("LessOrEqual", 1, 0), BC("GreaterOrEqual", 1, 0), BC("And", 1, 0), BC("Or", 1, 0),
    BC("Xor", 1, 0), BC("Where", 1, OX_SAVE_IN0), BC("PRelu", 1, OX_SAVE_INS), BC("Sum", 1, 0), BC("Mean", 1, 0),
    /* linear algebra, convolution, pooling, normalisation */
    {"MatMul", ox_infer_matmul, OX_RULE_MATMUL, 0, OX_SAVE_INS},
    {"Gemm", ox_infer_gemm, OX_RULE_GEMM, 0, OX_SAVE_INS},
    {"Conv", ox_infer_conv, OX_RULE_CONV, 0, OX_SAVE_IN0},
    {"ConvTranspose", ox_infer_conv_transpose, OX_RULE_CONVT, 0, OX_SAVE_IN0},
    {"MaxPool", ox_infer_pool, OX_RULE_POOL, 0, OX_SAVE_IN0},
    {"AveragePool", ox_infer_pool, OX_RULE_POOL, 0, 0},
    {"GlobalAveragePool", ox_infer_global_pool, OX_RULE_GPOOL, 0, 0},
    {"GlobalMaxPool", ox_infer_global_pool, OX_RULE_GPOOL, 0, OX_SAVE_IN0},
    {"BatchNormalization", ox_infer_norm, OX_RULE_NORM, 7, OX_SAVE_IN0},
    {"LayerNormalization", ox_infer_norm, OX_RULE_NORM, 7, OX_SAVE_IN0},
    {"InstanceNormalization", ox_infer_same, OX_RULE_NORM, 7, OX_SAVE_IN0},
    /* reductions */
    {"ReduceMean", ox_infer_reduce, OX_RULE_REDUCE, 1, 0},
    {"ReduceSum", ox_infer_reduce, OX_RULE_REDUCE, 1, 0},
    {"ReduceMax", ox_infer_reduce, OX_RULE_REDUCE, 1, OX_SAVE_IN0},
    {"ReduceMin", ox_infer_reduce, OX_RULE_REDUCE, 1, OX_SAVE_IN0},
    {"ReduceProd", ox_infer_reduce, OX_RULE_REDUCE, 1, OX_SAVE_IN0},
    {"ReduceL2", ox_infer_reduce, OX_RULE_REDUCE, 2, OX_SAVE_IN0},
    {"ReduceSumSquare", ox_infer_reduce, OX_RULE_REDUCE, 2, OX_SAVE_IN0},
    {"ArgMax", ox_infer_arg_reduce, OX_RULE_REDUCE, 1, 0},
    {"ArgMin", ox_infer_arg_reduce, OX_RULE_REDUCE, 1, 0},
    /* shape and data movement */
    {"Reshape", ox_infer_reshape, OX_RULE_VIEW, 0, 0},
    {"Flatten", ox_infer_flatten, OX_RULE_VIEW, 0, 0},
    {"Squeeze", ox_infer_squeeze, OX_RULE_VIEW, 0, 0},
    {"Unsqueeze", ox_infer_unsqueeze, OX_RULE_VIEW, 0, 0},
    {"Transpose", ox_infer_transpose, OX_RULE_COPY, 0, 0},
    {"Concat", ox_infer_concat, OX_RULE_COPY, 0, 0},
    {"Split", ox_infer_split, OX_RULE_COPY, 0, 0},
    {"Slice", ox_infer_slice, OX_RULE_COPY, 0, 0},
    {"Gather", ox_infer_gather, OX_RULE_GATHER, 0, 0},
    {"Expand", ox_infer_expand, OX_RULE_COPY, 0, 0},
    {"Shape", ox_infer_shape, OX_RULE_COPY, 0, 0},
    {"Constant", ox_infer_constant, OX_RULE_COPY, 0, 0},
    {"ConstantOfShape", ox_infer_constant_of_shape, OX_RULE_COPY, 0, 0},
    {"Range", ox_infer_range, OX_RULE_COPY, 0, 0},
    {"Dropout", ox_infer_dropout, OX_RULE_DROPOUT, 2, 0},
    /* losses */
    {"SoftmaxCrossEntropyLoss", ox_infer_loss, OX_RULE_LOSS, 0, OX_SAVE_IN0},
    {"NegativeLogLikelihoodLoss", ox_infer_loss, OX_RULE_LOSS, 0, 0},
};
#undef PW
#undef BC

const ox_op_spec *ox_find_op(const char *op_type) {
  for (size_t i = 0; i < AP_COUNT(specs); i++)
    if (strcmp(specs[i].op_type, op_type) == 0) return &specs[i];
  return NULL;
}

/* Takes the parameters that flowed into input i (an initializer, or a value computed from one) into the op. */
static int64_t take(ox *x, int i) {
  ox_val *v = ox_in(x, i);
  if (!v || v->activation) return 0;
  int64_t p = v->pending_params;
  v->pending_params = 0;
  return p;
}

static int64_t prod(const int64_t *d, int n) {
  int64_t p = 1;
  for (int i = 0; i < n; i++) p *= d[i];
  return p;
}

/* A weight operand (input i) that must not be an activation; fails naming the op otherwise. */
static ap_status weight_in(ox *x, int i, const char *what, ox_val **out) {
  ox_val *w = ox_in(x, i);
  if (!w || w->n_dims < 0) return ox_fail(x, AP_INVALID, "the %s (input %d) is missing or has no shape", what, i);
  if (w->activation)
    return ox_fail(x, AP_UNSUPPORTED, "the %s (input %d) is computed from the graph's inputs; autopar reads a %s only "
                   "from initializers", what, i, what);
  *out = w;
  return AP_OK;
}

/* Sets a weight [k, n] (+ bias [n]) on op: the op's own parameters when the pending counts are exactly those,
 * else the weight is shared with an earlier op (tied) and whatever is pending is the op's extra_params. */
static void set_weight(graph_op *op, int64_t k, int64_t n, int64_t pend_w, bool bias_present, int64_t pend_b) {
  op->weight_k = k;
  op->weight_n = n;
  if ((double)pend_w == (double)k * (double)n && (!bias_present || pend_b == n)) {
    op->has_bias = bias_present;
  } else {
    op->tied = true;
    op->extra_params += pend_w + pend_b;
  }
}

/* Records the trainable weights the op reads (inputs that carry parameters no op has counted yet), as stored,
 * in input order; where[w] is weight w's input index. Their logical dims are set by set_logical. */
static void note_weights(ox *x, graph_op *op, int *where) {
  op->n_weights = 0;
  for (int i = 0; i < x->n_in && op->n_weights < OP_MAX_WEIGHTS; i++) {
    ox_val *v = ox_in(x, i);
    if (!v || v->activation || v->pending_params <= 0 || v->n_dims < 0 || v->n_dims > GRAPH_MAX_DIMS) continue;
    graph_weight *w = &op->weights[op->n_weights];
    w->name = v->name;
    w->n_dims = v->n_dims;
    for (int d = 0; d < v->n_dims; d++) w->dims[d] = v->dims[d], w->logical[d] = -1;
    where[op->n_weights++] = i;
  }
}

/* The logical dim of each stored dim (graph.h graph_weight), per rule, from the input the weight comes in on:
 * a matmul's weight [k, n] (Gemm transB: [n, k]) and its bias [n]; a convolution's weight [C_out, C_in/g, k…]
 * (transposed: [C_in, C_out/g, k…], ONNX's Conv and ConvTranspose) and its bias [C_out]; an embedding table
 * [rows, H]; a norm's scale and bias, and any other op's single parameter operand (a bias, a scale, a class
 * token), on the dim that has all its elements. */
static void set_logical(graph_op *op, int rule, bool trans_b, const int *where) {
  for (int k = 0; k < op->n_weights; k++) {
    graph_weight *w = &op->weights[k];
    int in = where[k], n = w->n_dims;
    int8_t *l = w->logical;
    switch (rule) {
    case OX_RULE_MATMUL:
    case OX_RULE_GEMM:
      if (in == 1 && n == 2) l[0] = trans_b ? 1 : 0, l[1] = trans_b ? 0 : 1;
      else if (in == 2 && n >= 1 && w->dims[n - 1] == op->weight_n) l[n - 1] = 1;
      break;
    case OX_RULE_CONV:
    case OX_RULE_CONVT:
      if (in == 1) {
        for (int d = 0; d < n; d++) l[d] = (int8_t)(d < 3 ? d : 3);
        if (rule == OX_RULE_CONVT && n >= 2) l[0] = 1, l[1] = 0;
      } else if (in == 2 && n == 1) {
        l[0] = 0;
      }
      break;
    case OX_RULE_GATHER:
      if (in == 0 && n == 2) l[0] = 0, l[1] = 1;
      break;
    default: {
      int64_t numel = 1;
      for (int d = 0; d < n; d++) numel *= w->dims[d];
      for (int d = n - 1; d >= 0; d--)
        if (w->dims[d] == numel && numel > 1) {
          l[d] = 0;
          break;
        }
      break;
    }
    }
  }
}

ap_status ox_make_op(ox *x, const ox_op_spec *spec, graph_op *op) {
  const onnx_node *nd = x->node;
  ox_val *in0 = ox_in(x, 0), *out0 = ox_out(x, 0);
  ap_status st;
  int where[OP_MAX_WEIGHTS];
  note_weights(x, op, where);
  op->flop_per_elem = spec->flop_per_elem;
  switch (spec->rule) {
  case OX_RULE_POINTWISE:
  case OX_RULE_COPY:
    break;
  case OX_RULE_VIEW:
    op->is_view = true;
    break;
  case OX_RULE_DROPOUT:
    op->mask_of = out0 ? out0->tensor : -1;
    break;
  case OX_RULE_NORM: {
    op->kind = OP_NORM;
    break; /* scale and bias are pending on inputs 1 and 2; BatchNorm's running statistics are not trainable */
  }
  case OX_RULE_REDUCE: {
    int64_t ni = ox_numel(in0), no = ox_numel(out0);
    op->flop_per_elem = no > 0 ? spec->flop_per_elem * (double)ni / (double)no : 0;
    break;
  }
  case OX_RULE_MATMUL: {
    ox_val *b = ox_in(x, 1);
    if (!in0 || !b) return ox_fail(x, AP_INVALID, "MatMul needs two inputs");
    if (!in0->activation)
      return ox_fail(x, AP_UNSUPPORTED, "a MatMul whose left operand is a weight is not supported (transpose the product)");
    op->kind = OP_MATMUL;
    if (!b->activation && b->n_dims == 2) {
      set_weight(op, b->dims[0], b->dims[1], take(x, 1), false, 0);
    } else if (b->activation && in0->n_dims >= 2 && b->n_dims >= 2) {
      /* a product of two activations (attention scores, P·V): the contraction and the output columns at the
       * file's reference sizes; graph.c computes the FLOP from the tensors' symbolic shapes */
      op->weight_is_input = true;
      op->weight_k = in0->dims[in0->n_dims - 1];
      op->weight_n = b->dims[b->n_dims - 1];
    } else {
      return ox_fail(x, AP_UNSUPPORTED, "MatMul operands of ranks %d and %d (a weight must be 2-D, activations at least 2-D)",
                     in0->n_dims, b->n_dims);
    }
    break;
  }
  case OX_RULE_GEMM: {
    ox_val *w, *c = ox_in(x, 2);
    if ((st = weight_in(x, 1, "weight", &w))) return st;
    if (ox_attr_i(nd, "transA", 0)) return ox_fail(x, AP_UNSUPPORTED, "Gemm with transA = 1 is not supported");
    if (c && c->activation) return ox_fail(x, AP_UNSUPPORTED, "Gemm with a computed C (not an initializer) is not supported");
    bool tb = ox_attr_i(nd, "transB", 0) != 0;
    op->kind = OP_MATMUL;
    int64_t pw = take(x, 1), pb = c ? take(x, 2) : 0;
    set_weight(op, w->dims[tb ? 1 : 0], w->dims[tb ? 0 : 1], pw, c != NULL && pb > 0, pb);
    break;
  }
  case OX_RULE_CONV:
  case OX_RULE_CONVT: {
    ox_val *w, *bias = ox_in(x, 2);
    if ((st = weight_in(x, 1, "weight", &w))) return st;
    if (bias && bias->activation) return ox_fail(x, AP_UNSUPPORTED, "a computed bias is not supported");
    int64_t group = ox_attr_i(nd, "group", 1), ks = prod(w->dims + 2, w->n_dims - 2);
    op->kind = OP_CONV2D;
    op->kernel_h = w->n_dims > 2 ? w->dims[2] : 1;
    op->kernel_w = w->n_dims > 3 ? prod(w->dims + 3, w->n_dims - 3) : 1;
    int64_t pw = take(x, 1), pb = bias ? take(x, 2) : 0;
    if (spec->rule == OX_RULE_CONV) {
      set_weight(op, w->dims[1] * ks, w->dims[0], pw, bias != NULL && pb > 0, pb);
    } else {
      /* W is [C_in, C_out / group, k...]: each input element meets C_out/group · k weights, so the work per
       * output element is 2 · (C_in / group) · k · (input spatial size / output spatial size). */
      int64_t cout = w->dims[1] * group;
      set_weight(op, w->dims[0] / (group > 0 ? group : 1) * ks, cout, pw, bias != NULL && pb > 0, pb);
      double in_sp = (double)prod(in0->dims + 2, in0->n_dims - 2), out_sp = (double)prod(out0->dims + 2, out0->n_dims - 2);
      op->gemm_flop_per_elem = out_sp > 0 ? 2.0 * (double)op->weight_k * in_sp / out_sp : 0;
    }
    break;
  }
  case OX_RULE_POOL:
  case OX_RULE_GPOOL: {
    op->kind = OP_POOL;
    if (spec->rule == OX_RULE_POOL) {
      const onnx_attr *k = ox_attr(nd, "kernel_shape");
      double kp = 1;
      for (int i = 0; i < k->n_ints; i++) kp *= (double)k->ints[i];
      if (kp > 1e9) return ox_fail(x, AP_INVALID, "the pooling window holds %g elements (at most 1e9)", kp);
    }
    if (spec->rule == OX_RULE_POOL) {
      const onnx_attr *k = ox_attr(nd, "kernel_shape");
      op->kernel_h = k->ints[0];
      op->kernel_w = prod(k->ints + 1, k->n_ints - 1);
    } else {
      op->kernel_h = in0->n_dims > 2 ? in0->dims[2] : 1;
      op->kernel_w = in0->n_dims > 3 ? prod(in0->dims + 3, in0->n_dims - 3) : 1;
    }
    break;
  }
  case OX_RULE_GATHER:
    if (in0 && !in0->activation) op->kind = OP_EMBEDDING; /* a table lookup: the indices are the activation */
    break;
  case OX_RULE_LOSS:
    op->kind = OP_LOSS;
    break;
  }
  /* Whatever parameters are still pending on the op's other inputs are its own (norm scales, a class token). */
  for (int i = 0; i < x->n_in; i++) op->extra_params += take(x, i);
  set_logical(op, spec->rule, spec->rule == OX_RULE_GEMM && ox_attr_i(nd, "transB", 0) != 0, where);
  /* Saved tensors: activation inputs or outputs that are graph tensors. */
  for (int i = 0; i < x->n_in && op->n_saved < OP_MAX_SAVED; i++) {
    ox_val *v = ox_in(x, i);
    bool want = (spec->save & OX_SAVE_INS) || ((spec->save & OX_SAVE_IN0) && i == 0);
    if (want && v && v->activation && v->tensor >= 0) {
      bool dup = false;
      for (int k = 0; k < op->n_saved; k++) dup = dup || op->saved[k] == v->tensor;
      if (!dup) op->saved[op->n_saved++] = v->tensor;
    }
  }
  if ((spec->save & OX_SAVE_OUT) && out0 && out0->tensor >= 0 && op->n_saved < OP_MAX_SAVED)
    op->saved[op->n_saved++] = out0->tensor;
  return AP_OK;
}
