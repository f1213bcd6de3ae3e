/* The ONNX importer's checks of each node against the ONNX operator definition (model layer, core library;
 * issue 19, class 6), run by the importer (onnx_import.c) on every node before shape inference: the number
 * of inputs and outputs each op type takes, the type of every attribute autopar knows and the range of its
 * flags, and the relations between inputs that the definitions state and that shape inference alone does not
 * see (a Conv's group against its channels and its weight, a bias's length, the normalisations' scale
 * shapes, a Gemm's C against (M, N), a loss's labels against its scores). Without them a Conv with group 0,
 * or a weight whose channels disagree with the input, was accepted and costed. Source of every rule:
 * onnx/docs/Operators.md at v1.13.0 (the ops' "Inputs", "Outputs" and "Attributes" sections; Conv: "X.shape[1]
 * == (W.shape[1] * group) == C", "B: 1D bias of size M"; ConvTranspose: W [C, M/group, k…]). Failures name the
 * file and the node (ox_fail). */
#include <string.h>

#include "model/onnx_internal.h"

enum { MANY = 64 }; /* a variadic count: the importer's own input limit (ox.in) */

/* The inputs and outputs an op type takes, opsets 7 to 17 together (an input that became an attribute or
 * back, as Squeeze's axes in opset 13, widens the range). */
typedef struct {
  const char *op_type;
  int min_in, max_in, min_out, max_out;
} arity;

static const arity arities[] = {
    {"Relu", 1, 1, 1, 1}, {"LeakyRelu", 1, 1, 1, 1}, {"Sigmoid", 1, 1, 1, 1}, {"Tanh", 1, 1, 1, 1},
    {"Erf", 1, 1, 1, 1}, {"Gelu", 1, 1, 1, 1}, {"Exp", 1, 1, 1, 1}, {"Log", 1, 1, 1, 1},
    {"Sqrt", 1, 1, 1, 1}, {"Reciprocal", 1, 1, 1, 1}, {"Neg", 1, 1, 1, 1}, {"Abs", 1, 1, 1, 1},
    {"Floor", 1, 1, 1, 1}, {"Ceil", 1, 1, 1, 1}, {"Not", 1, 1, 1, 1}, {"Softplus", 1, 1, 1, 1},
    {"Elu", 1, 1, 1, 1}, {"Selu", 1, 1, 1, 1}, {"HardSigmoid", 1, 1, 1, 1}, {"HardSwish", 1, 1, 1, 1},
    {"Clip", 1, 3, 1, 1}, {"Trilu", 1, 2, 1, 1}, {"Softmax", 1, 1, 1, 1}, {"LogSoftmax", 1, 1, 1, 1},
    {"Identity", 1, 1, 1, 1}, {"Cast", 1, 1, 1, 1},
    {"Add", 2, 2, 1, 1}, {"Sub", 2, 2, 1, 1}, {"Mul", 2, 2, 1, 1}, {"Div", 2, 2, 1, 1}, {"Pow", 2, 2, 1, 1},
    {"Max", 1, MANY, 1, 1}, {"Min", 1, MANY, 1, 1}, {"Mod", 2, 2, 1, 1}, {"Equal", 2, 2, 1, 1},
    {"Less", 2, 2, 1, 1}, {"Greater", 2, 2, 1, 1}, {"LessOrEqual", 2, 2, 1, 1}, {"GreaterOrEqual", 2, 2, 1, 1},
    {"And", 2, 2, 1, 1}, {"Or", 2, 2, 1, 1}, {"Xor", 2, 2, 1, 1}, {"Where", 3, 3, 1, 1}, {"PRelu", 2, 2, 1, 1},
    {"Sum", 1, MANY, 1, 1}, {"Mean", 1, MANY, 1, 1},
    {"MatMul", 2, 2, 1, 1}, {"Gemm", 2, 3, 1, 1}, {"Conv", 2, 3, 1, 1}, {"ConvTranspose", 2, 3, 1, 1},
    {"MaxPool", 1, 1, 1, 2}, {"AveragePool", 1, 1, 1, 1}, {"GlobalAveragePool", 1, 1, 1, 1},
    {"GlobalMaxPool", 1, 1, 1, 1}, {"BatchNormalization", 5, 5, 1, 5}, {"LayerNormalization", 2, 3, 1, 3},
    {"InstanceNormalization", 3, 3, 1, 1},
    {"ReduceMean", 1, 2, 1, 1}, {"ReduceSum", 1, 2, 1, 1}, {"ReduceMax", 1, 2, 1, 1}, {"ReduceMin", 1, 2, 1, 1},
    {"ReduceProd", 1, 2, 1, 1}, {"ReduceL2", 1, 2, 1, 1}, {"ReduceSumSquare", 1, 2, 1, 1},
    {"ArgMax", 1, 1, 1, 1}, {"ArgMin", 1, 1, 1, 1},
    {"Reshape", 2, 2, 1, 1}, {"Flatten", 1, 1, 1, 1}, {"Squeeze", 1, 2, 1, 1}, {"Unsqueeze", 1, 2, 1, 1},
    {"Transpose", 1, 1, 1, 1}, {"Concat", 1, MANY, 1, 1}, {"Split", 1, 2, 1, MANY}, {"Slice", 1, 5, 1, 1},
    {"Gather", 2, 2, 1, 1}, {"Expand", 2, 2, 1, 1}, {"Shape", 1, 1, 1, 1}, {"Constant", 0, 0, 1, 1},
    {"ConstantOfShape", 1, 1, 1, 1}, {"Range", 3, 3, 1, 1}, {"Dropout", 1, 3, 1, 2},
    {"SoftmaxCrossEntropyLoss", 2, 3, 1, 2}, {"NegativeLogLikelihoodLoss", 2, 3, 1, 1},
};

/* The attributes autopar reads or that change an op's shapes, with the type every ONNX op that has them gives
 * them; flag: an INT that must be 0 or 1. An attribute not listed is not read. */
typedef struct {
  const char *name;
  onnx_attr_type type;
  bool flag;
} attr_rule;

static const attr_rule attr_rules[] = {
    {"axis", ONNX_ATTR_INT, false},          {"axes", ONNX_ATTR_INTS, false},
    {"keepdims", ONNX_ATTR_INT, true},       {"noop_with_empty_axes", ONNX_ATTR_INT, true},
    {"select_last_index", ONNX_ATTR_INT, true}, {"group", ONNX_ATTR_INT, false},
    {"kernel_shape", ONNX_ATTR_INTS, false}, {"strides", ONNX_ATTR_INTS, false},
    {"pads", ONNX_ATTR_INTS, false},         {"dilations", ONNX_ATTR_INTS, false},
    {"output_padding", ONNX_ATTR_INTS, false}, {"output_shape", ONNX_ATTR_INTS, false},
    {"auto_pad", ONNX_ATTR_STRING, false},   {"ceil_mode", ONNX_ATTR_INT, true},
    {"count_include_pad", ONNX_ATTR_INT, true}, {"storage_order", ONNX_ATTR_INT, true},
    {"perm", ONNX_ATTR_INTS, false},         {"transA", ONNX_ATTR_INT, true},
    {"transB", ONNX_ATTR_INT, true},         {"alpha", ONNX_ATTR_FLOAT, false},
    {"beta", ONNX_ATTR_FLOAT, false},        {"gamma", ONNX_ATTR_FLOAT, false},
    {"epsilon", ONNX_ATTR_FLOAT, false},     {"momentum", ONNX_ATTR_FLOAT, false},
    {"training_mode", ONNX_ATTR_INT, true},  {"to", ONNX_ATTR_INT, false},
    {"split", ONNX_ATTR_INTS, false},        {"upper", ONNX_ATTR_INT, true},
    {"allowzero", ONNX_ATTR_INT, true},      {"reduction", ONNX_ATTR_STRING, false},
    {"ignore_index", ONNX_ATTR_INT, false},  {"approximate", ONNX_ATTR_STRING, false},
    {"ratio", ONNX_ATTR_FLOAT, false},
};

static ap_status check_attrs(const ox *x) {
  const onnx_node *nd = x->node;
  for (int i = 0; i < nd->n_attrs; i++) {
    const onnx_attr *a = &nd->attrs[i];
    if (!a->name) continue;
    for (size_t k = 0; k < AP_COUNT(attr_rules); k++) {
      const attr_rule *r = &attr_rules[k];
      if (strcmp(r->name, a->name) != 0) continue;
      /* an integer-valued FLOAT (alpha = 1) written as INT by some exporters is not what the definition says */
      if (a->type != r->type)
        return ox_fail(x, AP_INVALID, "attribute '%s' has the wrong type (the ONNX definition makes it %s)", a->name,
                       r->type == ONNX_ATTR_INT ? "an int" : r->type == ONNX_ATTR_INTS ? "a list of ints"
                       : r->type == ONNX_ATTR_FLOAT ? "a float" : "a string");
      if (r->flag && a->i != 0 && a->i != 1)
        return ox_fail(x, AP_INVALID, "attribute '%s' is %lld (expected 0 or 1)", a->name, (long long)a->i);
      break;
    }
  }
  return AP_OK;
}

/* Whether input i is present with a known shape (checks of relations skip what is absent; inference fails on
 * a required input that is). */
static const ox_val *known(const ox *x, int i) {
  const ox_val *v = ox_in(x, i);
  return v && v->n_dims >= 0 ? v : NULL;
}

/* A 1-D input i of length n, when present. */
static ap_status need_vector(const ox *x, int i, const char *what, int64_t n) {
  const ox_val *v = known(x, i);
  if (!v) return AP_OK;
  if (v->n_dims != 1 || v->dims[0] != n)
    return ox_fail(x, AP_INVALID, "the %s (input %d) must be 1-D of length %lld, got rank %d%s%lld", what, i,
                   (long long)n, v->n_dims, v->n_dims >= 1 ? " length " : "", v->n_dims >= 1 ? (long long)v->dims[0] : 0LL);
  return AP_OK;
}

static ap_status check_group(const ox *x, int64_t *group) {
  *group = ox_attr_i(x->node, "group", 1);
  if (*group < 1 || *group > 1000000)
    return ox_fail(x, AP_INVALID, "group is %lld (expected an integer in [1, 1000000])", (long long)*group);
  return AP_OK;
}

/* Conv: X [N, C, d…], W [M, C/group, k…], B [M]; C and M divisible by group; kernel_shape, when given, W's k…. */
static ap_status check_conv(const ox *x) {
  int64_t group;
  ap_status st = check_group(x, &group);
  if (st) return st;
  const ox_val *in = known(x, 0), *w = known(x, 1);
  if (!in || !w || in->n_dims < 3 || w->n_dims != in->n_dims) return AP_OK; /* inference says which */
  int64_t c = in->dims[1], m = w->dims[0];
  if (c % group)
    return ox_fail(x, AP_INVALID, "group %lld does not divide the input's %lld channels", (long long)group, (long long)c);
  if (m % group)
    return ox_fail(x, AP_INVALID, "group %lld does not divide the weight's %lld output channels", (long long)group,
                   (long long)m);
  if (w->dims[1] != c / group)
    return ox_fail(x, AP_INVALID, "the weight has %lld input channels per group, the input %lld channels in %lld groups "
                   "(expected W.shape[1] * group == C)", (long long)w->dims[1], (long long)c, (long long)group);
  const onnx_attr *ks = ox_attr(x->node, "kernel_shape");
  if (ks && ks->n_ints == in->n_dims - 2)
    for (int i = 0; i < ks->n_ints; i++)
      if (ks->ints[i] != w->dims[2 + i])
        return ox_fail(x, AP_INVALID, "kernel_shape[%d] is %lld, the weight's kernel %lld", i, (long long)ks->ints[i],
                       (long long)w->dims[2 + i]);
  return need_vector(x, 2, "bias", m);
}

/* ConvTranspose: X [N, C, d…], W [C, M/group, k…], B [M]; C divisible by group. */
static ap_status check_conv_transpose(const ox *x) {
  int64_t group;
  ap_status st = check_group(x, &group);
  if (st) return st;
  const ox_val *in = known(x, 0), *w = known(x, 1);
  if (!in || !w || in->n_dims < 3 || w->n_dims != in->n_dims) return AP_OK;
  if (w->dims[0] != in->dims[1])
    return ox_fail(x, AP_INVALID, "the weight's first dimension (%lld) must be the input's %lld channels",
                   (long long)w->dims[0], (long long)in->dims[1]);
  if (in->dims[1] % group)
    return ox_fail(x, AP_INVALID, "group %lld does not divide the input's %lld channels", (long long)group,
                   (long long)in->dims[1]);
  return need_vector(x, 2, "bias", w->dims[1] * group);
}

/* Gemm: C unidirectionally broadcastable to [M, N]. */
static ap_status check_gemm(const ox *x) {
  const ox_val *a = known(x, 0), *b = known(x, 1), *c = known(x, 2);
  if (!a || !b || !c || a->n_dims != 2 || b->n_dims != 2) return AP_OK;
  int64_t mn[2] = {a->dims[ox_attr_i(x->node, "transA", 0) ? 1 : 0], b->dims[ox_attr_i(x->node, "transB", 0) ? 0 : 1]};
  if (c->n_dims > 2) return ox_fail(x, AP_INVALID, "C (input 2) has rank %d (at most 2)", c->n_dims);
  for (int i = 0; i < c->n_dims; i++) {
    int64_t d = c->dims[c->n_dims - 1 - i], want = mn[1 - i];
    if (d != 1 && d != want)
      return ox_fail(x, AP_INVALID, "C (input 2) does not broadcast to [%lld, %lld]", (long long)mn[0], (long long)mn[1]);
  }
  return AP_OK;
}

/* BatchNormalization: scale, B, mean and var of [C]; InstanceNormalization: scale and B of [C]. */
static ap_status check_channel_norm(const ox *x, int n_params) {
  const ox_val *in = known(x, 0);
  if (!in || in->n_dims < 2) return AP_OK;
  static const char *const what[] = {"", "scale", "bias", "running mean", "running variance"};
  for (int i = 1; i <= n_params; i++) {
    ap_status st = need_vector(x, i, what[i], in->dims[1]);
    if (st) return st;
  }
  return AP_OK;
}

/* LayerNormalization: Scale and B broadcastable to X's dims from axis on. */
static ap_status check_layer_norm(const ox *x) {
  const ox_val *in = known(x, 0);
  int axis;
  if (!in) return AP_OK;
  if (!ox_axis(ox_attr_i(x->node, "axis", -1), in->n_dims, &axis))
    return ox_fail(x, AP_INVALID, "axis %lld is out of range for rank %d", (long long)ox_attr_i(x->node, "axis", -1),
                   in->n_dims);
  for (int i = 1; i <= 2; i++) {
    const ox_val *p = known(x, i);
    if (!p) continue;
    if (p->n_dims > in->n_dims - axis)
      return ox_fail(x, AP_INVALID, "input %d has rank %d, more than the %d normalised dimensions", i, p->n_dims,
                     in->n_dims - axis);
    for (int k = 0; k < p->n_dims; k++) {
      int64_t d = p->dims[p->n_dims - 1 - k], want = in->dims[in->n_dims - 1 - k];
      if (d != 1 && d != want)
        return ox_fail(x, AP_INVALID, "input %d does not broadcast to the normalised dimensions", i);
    }
  }
  return AP_OK;
}

/* Softmax and LogSoftmax: axis in [-r, r - 1]. */
static ap_status check_axis(const ox *x, int64_t def) {
  const ox_val *in = known(x, 0);
  int axis;
  if (in && !ox_axis(ox_attr_i(x->node, "axis", def), in->n_dims, &axis))
    return ox_fail(x, AP_INVALID, "axis %lld is out of range for rank %d", (long long)ox_attr_i(x->node, "axis", def),
                   in->n_dims);
  return AP_OK;
}

/* Gather: integer indices. Clip: min and max scalars. Where: a boolean condition. */
static ap_status check_int_input(const ox *x, int i) {
  const ox_val *v = ox_in(x, i);
  if (v && v->elem_type && v->elem_type != ONNX_INT64 && v->elem_type != ONNX_INT32)
    return ox_fail(x, AP_INVALID, "input %d must be int32 or int64 indices, got element type %d", i, v->elem_type);
  return AP_OK;
}

static ap_status check_scalar_inputs(const ox *x, int from) {
  for (int i = from; i < x->n_in; i++) {
    const ox_val *v = known(x, i);
    if (v && ox_numel(v) != 1) return ox_fail(x, AP_INVALID, "input %d must be a scalar, got %lld elements", i, (long long)ox_numel(v));
  }
  return AP_OK;
}

/* SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss: scores [N, C, d…], labels [N, d…] of integers, weights [C]. */
static ap_status check_loss(const ox *x) {
  const ox_val *sc = known(x, 0), *lb = known(x, 1);
  if (!sc || !lb) return AP_OK;
  if (sc->n_dims < 2 || lb->n_dims != sc->n_dims - 1)
    return ox_fail(x, AP_INVALID, "scores of rank %d need labels of rank %d, got %d", sc->n_dims, sc->n_dims - 1, lb->n_dims);
  for (int i = 0; i < lb->n_dims; i++)
    if (lb->dims[i] != sc->dims[i == 0 ? 0 : i + 1])
      return ox_fail(x, AP_INVALID, "the labels' dimension %d (%lld) disagrees with the scores'", i, (long long)lb->dims[i]);
  ap_status st = check_int_input(x, 1);
  return st ? st : need_vector(x, 2, "weights", sc->dims[1]);
}

ap_status ox_check_node(const ox *x) {
  const char *t = x->node->op_type;
  const arity *ar = NULL;
  for (size_t i = 0; i < AP_COUNT(arities) && !ar; i++)
    if (strcmp(arities[i].op_type, t) == 0) ar = &arities[i];
  if (ar && (x->n_in < ar->min_in || x->n_in > ar->max_in))
    return ox_fail(x, AP_INVALID, "%d inputs (the ONNX definition takes %d to %d)", x->n_in, ar->min_in, ar->max_in);
  if (ar && (x->n_out < ar->min_out || x->n_out > ar->max_out))
    return ox_fail(x, AP_INVALID, "%d outputs (the ONNX definition takes %d to %d)", x->n_out, ar->min_out, ar->max_out);
  if (ar && ar->min_in > 0 && !ox_in(x, 0)) return ox_fail(x, AP_INVALID, "input 0 is required");
  ap_status st = check_attrs(x);
  if (st) return st;
  if (strcmp(t, "Conv") == 0) return check_conv(x);
  if (strcmp(t, "ConvTranspose") == 0) return check_conv_transpose(x);
  if (strcmp(t, "Gemm") == 0) return check_gemm(x);
  if (strcmp(t, "BatchNormalization") == 0) return check_channel_norm(x, 4);
  if (strcmp(t, "InstanceNormalization") == 0) return check_channel_norm(x, 2);
  if (strcmp(t, "LayerNormalization") == 0) return check_layer_norm(x);
  if (strcmp(t, "Softmax") == 0 || strcmp(t, "LogSoftmax") == 0) return check_axis(x, -1);
  if (strcmp(t, "Gather") == 0) return check_int_input(x, 1);
  if (strcmp(t, "Clip") == 0) return check_scalar_inputs(x, 1);
  if (strcmp(t, "SoftmaxCrossEntropyLoss") == 0 || strcmp(t, "NegativeLogLikelihoodLoss") == 0) return check_loss(x);
  if (strcmp(t, "Where") == 0) {
    const ox_val *c = ox_in(x, 0);
    if (c && c->elem_type && c->elem_type != ONNX_BOOL)
      return ox_fail(x, AP_INVALID, "the condition (input 0) must be bool, got element type %d", c->elem_type);
  }
  return AP_OK;
}
