/* The dim correspondence of an ONNX node (model layer, core library; graph.h in_dim and whole_dims): which dim
 * of the node's first output each dim of each activation input is, element for element, and which output dims
 * the op needs whole, from the operator's definition in the ONNX spec (onnx/docs/Operators.md at v1.14):
 *  - pointwise ops, Cast, Dropout, Expand, Where and the n-ary Sum, Mean, Max, Min: numpy broadcasting (dims
 *    right-aligned; a dim of size 1 that the output broadcasts is not mapped);
 *  - Softmax and LogSoftmax: broadcasting, and the axis whole (opset >= 13: the axis alone; before 13 the input
 *    is coerced to 2-D at `axis`, so every dim from it on);
 *  - Trilu: its last two dims whole (the mask depends on each element's row and column);
 *  - Transpose: output dim j is input dim perm[j] (default perm: the dims reversed);
 *  - Concat: every dim but the axis maps to itself; the axis is whole (an output chunk of it is no chunk of the
 *    inputs); Split: the input's axis is read whole, the other dims map to themselves;
 *  - Slice: the dims it slices are read whole, the others map to themselves;
 *  - Gather of an activation: the data's dims before and after `axis` map to the output's, the axis is read
 *    whole; the indices' dims (when they are an activation) map to the output's dims from `axis` on;
 *  - Reduce* and ArgMax/ArgMin: the kept dims map (keepdims or not), the reduced ones are read whole;
 *  - LayerNormalization: every dim from `axis` on whole; InstanceNormalization: the spatial dims whole;
 *    BatchNormalization: the spatial dims whole (its N is a reduced dim too, priced with the statistics'
 *    all-reduce by the sharding layer: shard_cost.c).
 * Matmuls, convolutions, pools, embeddings, losses and views are mapped by the sharding layer from their kind
 * and shapes (src/shard/shard_loops.c); their dims_known stays false. The ONNX-level map is then carried to
 * the graph's dims through each value's relabelling (onnx_internal.h g_first, g_count).
 * The same correspondence carries the batch and sequence tags from the graph inputs to every value
 * (ox_dim_tags, with the rules of matmuls, convolutions, embeddings and views added), so that the importer
 * relabels B and S by what a dim is, not by its size (onnx_import.c relabel_tags). */
#include <string.h>

#include "model/onnx_internal.h"

static bool is(const char *t, const char *const *list) {
  for (; *list; list++)
    if (strcmp(t, *list) == 0) return true;
  return false;
}

static const char *const broadcasting[] = {
    "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Erf", "Gelu", "Exp", "Log", "Sqrt", "Reciprocal", "Neg", "Abs", "Floor",
    "Ceil", "Not", "Softplus", "Elu", "Selu", "HardSigmoid", "HardSwish", "Clip", "Cast", "Dropout", "Expand", "Where",
    "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod", "Equal", "Less", "Greater", "LessOrEqual",
    "GreaterOrEqual", "And", "Or", "Xor", "PRelu", "Sum", "Mean", "Softmax", "LogSoftmax", "Trilu", NULL};
static const char *const reductions[] = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd",
                                         "ReduceL2", "ReduceSumSquare", "ArgMax", "ArgMin", NULL};

/* Broadcasting: input dim d is output dim (no - ni + d) when their sizes agree and exceed 1. */
static void map_bcast(const ox_val *in, const ox_val *out, int8_t *m) {
  int ni = in->n_dims, no = out->n_dims;
  for (int d = 0; d < ni; d++) {
    int j = no - ni + d;
    m[d] = (int8_t)(j >= 0 && in->dims[d] == out->dims[j] && in->dims[d] > 1 ? j : -1);
  }
}

static void map_same(const ox_val *in, const ox_val *out, int8_t *m, int skip) {
  for (int d = 0; d < in->n_dims; d++)
    m[d] = (int8_t)(d != skip && d < out->n_dims && in->dims[d] == out->dims[d] && in->dims[d] > 1 ? d : -1);
}

/* The ONNX-level map of input `in` (node input `idx`) onto output `out`; false when the op is not one of
 * those above. *whole gets the output dims the op needs whole. */
static bool onnx_map(ox *x, int idx, const ox_val *in, const ox_val *out, int8_t *m, uint32_t *whole) {
  const onnx_node *nd = x->node;
  const char *t = nd->op_type;
  int ni = in->n_dims, no = out->n_dims, a;
  for (int d = 0; d < ni; d++) m[d] = -1;
  if (is(t, broadcasting)) {
    map_bcast(in, out, m);
    if (strcmp(t, "Softmax") == 0 || strcmp(t, "LogSoftmax") == 0) {
      bool v13 = x->opset >= 13;
      if (ox_axis(ox_attr_i(nd, "axis", v13 ? -1 : 1), no, &a))
        for (int j = a; j < (v13 ? a + 1 : no); j++) *whole |= 1u << j;
    } else if (strcmp(t, "Trilu") == 0) {
      for (int j = no - 2; j < no; j++)
        if (j >= 0) *whole |= 1u << j;
    }
    return true;
  }
  if (strcmp(t, "Transpose") == 0) {
    const onnx_attr *p = ox_attr(nd, "perm");
    for (int j = 0; j < no && j < ni; j++) {
      int64_t src = p && p->type == ONNX_ATTR_INTS && p->n_ints == no ? p->ints[j] : no - 1 - j;
      if (src >= 0 && src < ni && in->dims[src] > 1) m[src] = (int8_t)j;
    }
    return true;
  }
  if (strcmp(t, "Concat") == 0 || strcmp(t, "Split") == 0) {
    if (!ox_axis(ox_attr_i(nd, "axis", 0), ni, &a)) return false;
    map_same(in, out, m, a);
    if (strcmp(t, "Concat") == 0) *whole |= 1u << a;
    return true;
  }
  if (strcmp(t, "Slice") == 0) {
    const int64_t *axes = NULL;
    bool known;
    int64_t na = ox_ints(x, "axes", 3, &axes, &known);
    bool sliced[ONNX_MAX_DIMS] = {false};
    if (known && na > 0) {
      for (int64_t i = 0; i < na; i++)
        if (ox_axis(axes[i], ni, &a)) sliced[a] = true;
    } else { /* absent (every dim is sliced) or not known at import */
      for (int d = 0; d < ni; d++) sliced[d] = true;
    }
    for (int d = 0; d < ni; d++)
      m[d] = (int8_t)(!sliced[d] && d < no && in->dims[d] == out->dims[d] && in->dims[d] > 1 ? d : -1);
    return true;
  }
  if (strcmp(t, "Gather") == 0) {
    const ox_val *data = ox_in(x, 0), *ind = ox_in(x, 1);
    if (!data || !ind || !ox_axis(ox_attr_i(nd, "axis", 0), data->n_dims, &a)) return false;
    int ri = ind->n_dims;
    if (idx == 0) {
      for (int d = 0; d < ni; d++) {
        int j = d < a ? d : d > a ? d - 1 + ri : -1;
        m[d] = (int8_t)(j >= 0 && j < no && in->dims[d] == out->dims[j] && in->dims[d] > 1 ? j : -1);
      }
    } else {
      for (int d = 0; d < ni; d++) {
        int j = a + d;
        m[d] = (int8_t)(j < no && in->dims[d] == out->dims[j] && in->dims[d] > 1 ? j : -1);
      }
    }
    return true;
  }
  if (is(t, reductions)) {
    bool red[ONNX_MAX_DIMS] = {false};
    bool keep = ox_attr_i(nd, "keepdims", 1) != 0;
    if (strncmp(t, "Arg", 3) == 0) {
      if (!ox_axis(ox_attr_i(nd, "axis", 0), ni, &a)) return false;
      red[a] = true;
    } else {
      const int64_t *axes = NULL;
      bool known;
      int64_t n = ox_ints(x, "axes", 1, &axes, &known);
      if (!known) return false;
      if (n <= 0) {
        bool noop = ox_attr_i(nd, "noop_with_empty_axes", 0) != 0;
        for (int d = 0; d < ni; d++) red[d] = !noop;
      }
      for (int64_t i = 0; i < n; i++)
        if (ox_axis(axes[i], ni, &a)) red[a] = true;
    }
    for (int d = 0, j = 0; d < ni; d++) {
      if (red[d]) {
        if (keep) j++;
        continue;
      }
      m[d] = (int8_t)(j < no && in->dims[d] == out->dims[j] && in->dims[d] > 1 ? j : -1);
      j++;
    }
    return true;
  }
  if (strcmp(t, "LayerNormalization") == 0 || strcmp(t, "InstanceNormalization") == 0 ||
      strcmp(t, "BatchNormalization") == 0) {
    if (idx != 0) return false;
    map_same(in, out, m, -1);
    int from = 2;
    if (strcmp(t, "LayerNormalization") == 0 && !ox_axis(ox_attr_i(nd, "axis", -1), no, &from)) return false;
    for (int j = from; j < no; j++) *whole |= 1u << j;
    return true;
  }
  return false;
}

void ox_dim_map(ox *x, graph_op *op, const int *src) {
  op->dims_known = false;
  if (op->kind != OP_ELEMENTWISE && op->kind != OP_NORM) return;
  if (op->is_view) return;
  const ox_val *out = NULL;
  for (int i = 0; i < x->n_out; i++) {
    const ox_val *v = ox_out(x, i);
    if (v && v->tensor == op->out) out = v;
  }
  if (!out || out->n_dims > ONNX_MAX_DIMS) return;
  graph_op r = *op;
  memset(r.in_dim, -1, sizeof r.in_dim);
  uint32_t whole = 0;
  for (int k = 0; k < op->n_in; k++) {
    const ox_val *in = ox_in(x, src[k]);
    int8_t m[ONNX_MAX_DIMS];
    if (!in || in->n_dims > ONNX_MAX_DIMS || !onnx_map(x, src[k], in, out, m, &whole)) return;
    for (int d = 0; d < in->n_dims; d++) {
      int j = m[d];
      if (j < 0) continue;
      int gi = in->g_first[d], go = out->g_first[j], n = in->g_count[d];
      if (n != out->g_count[j]) n = 1; /* relabelled differently: the leading factors still match */
      for (int s = 0; s < n; s++)
        if (gi + s < GRAPH_MAX_DIMS && go + s < GRAPH_MAX_DIMS) r.in_dim[k][gi + s] = (int8_t)(go + s);
    }
  }
  r.whole_dims = 0;
  for (int j = 0; j < out->n_dims; j++)
    if (whole & (1u << j))
      for (int s = 0; s < out->g_count[j]; s++)
        if (out->g_first[j] + s < GRAPH_MAX_DIMS) r.whole_dims = (uint8_t)(r.whole_dims | (1u << (out->g_first[j] + s)));
  r.dims_known = true;
  *op = r;
}

/* ---- Batch and sequence tags (onnx_internal.h OX_TAG_*) ---- */

/* The tag of an output dim of size o that is input dims i .. k-1 merged (a view). */
static uint8_t merged_tag(const uint8_t *t, int i, int k) {
  if (k == i + 1) return t[i];
  if (k == i + 2 && t[i] == OX_TAG_B && t[i + 1] == OX_TAG_S) return OX_TAG_BS;
  if (t[i] != OX_TAG_B) return OX_TAG_NONE;
  for (int q = i + 1; q < k; q++)
    if (t[q] != OX_TAG_NONE) return OX_TAG_NONE;
  return OX_TAG_BX;
}

/* A view (Reshape, Flatten, Squeeze, Unsqueeze, Identity): output dims that start at the element offset of an
 * input dim take its tag, or the merged tag of the input dims they cover; the pieces of a split B·S or B·k
 * input dim are B and then S (or the literal). */
static void tag_view(const ox_val *in, ox_val *out, int64_t b0, int64_t s0) {
  int ni = in->n_dims, no = out->n_dims;
  int64_t pin[ONNX_MAX_DIMS + 1];
  pin[0] = 1;
  for (int i = 0; i < ni; i++) pin[i + 1] = pin[i] * in->dims[i];
  int64_t po = 1;
  for (int j = 0; j < no; j++) {
    int64_t o = out->dims[j];
    uint8_t tg = OX_TAG_NONE;
    for (int i = 0; i < ni && o > 1; i++) {
      if (in->dims[i] <= 1) continue;
      if (pin[i] == po) {
        if (in->dims[i] == o) {
          tg = in->tag[i];
        } else if (o > in->dims[i]) {
          int k = i;
          while (k < ni && pin[k + 1] / pin[i] < o) k++;
          if (k < ni && pin[k + 1] / pin[i] == o) tg = merged_tag(in->tag, i, k + 1);
          else if (in->tag[i] == OX_TAG_B && o % in->dims[i] == 0) tg = OX_TAG_BX; /* B and a leading factor */
        } else if (o == b0 && (in->tag[i] == OX_TAG_BS || in->tag[i] == OX_TAG_BX)) {
          tg = OX_TAG_B;
        }
        break;
      }
      if (pin[i] < po && po < pin[i + 1]) { /* a later piece of input dim i */
        if (in->tag[i] == OX_TAG_BS && po / pin[i] == b0 && o == s0) tg = OX_TAG_S;
        break;
      }
    }
    out->tag[j] = tg;
    po *= o;
  }
}

void ox_dim_tags(ox *x, int64_t b0, int64_t s0) {
  const onnx_node *nd = x->node;
  const char *t = nd->op_type;
  const ox_val *in0 = ox_in(x, 0), *in1 = ox_in(x, 1);
  bool view = strcmp(t, "Reshape") == 0 || strcmp(t, "Flatten") == 0 || strcmp(t, "Squeeze") == 0 ||
              strcmp(t, "Unsqueeze") == 0 || strcmp(t, "Identity") == 0;
  (void)s0;
  for (int k = 0; k < x->n_out; k++) {
    ox_val *out = ox_out(x, k);
    if (!out || out->n_dims < 0 || out->n_dims > ONNX_MAX_DIMS) continue;
    int no = out->n_dims;
    memset(out->tag, OX_TAG_NONE, sizeof out->tag);
    out->tagged = false;
    bool sized = true; /* every dim at least 1 (an empty tensor fails later, in add_tensor) */
    for (int j = 0; j < no; j++) sized = sized && out->dims[j] >= 1;
    for (int j = 0; in0 && j < in0->n_dims; j++) sized = sized && in0->dims[j] >= 1;
    if (!sized) continue;
    if (view) {
      if (in0 && in0->tagged && in0->n_dims <= ONNX_MAX_DIMS) tag_view(in0, out, b0, s0), out->tagged = true;
      continue;
    }
    if (strcmp(t, "MatMul") == 0 || strcmp(t, "Gemm") == 0) {
      if (!in0 || !in0->tagged || no < 1) continue;
      int nx = in0->n_dims;
      for (int j = 0; j < no - 1; j++) { /* leading dims and M from the left operand (broadcast) */
        int i = nx - 1 - (no - 1 - j);
        if (i >= 0 && in0->dims[i] == out->dims[j]) out->tag[j] = in0->tag[i];
        else if (in1 && in1->activation && in1->tagged) {
          int iy = in1->n_dims - 2 - (no - 2 - j);
          if (iy >= 0 && in1->dims[iy] == out->dims[j]) out->tag[j] = in1->tag[iy];
        }
      }
      if (in1 && in1->activation && in1->tagged && strcmp(t, "MatMul") == 0) out->tag[no - 1] = in1->tag[in1->n_dims - 1];
      out->tagged = true;
      continue;
    }
    static const char *const batch_first[] = {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool",
                                              "GlobalMaxPool", NULL};
    if (is(t, batch_first)) {
      if (in0 && in0->tagged && no > 0) out->tag[0] = in0->tag[0], out->tagged = true;
      continue;
    }
    if (strcmp(t, "Gather") == 0 && in0 && !in0->activation && in1 && in1->tagged) { /* an embedding lookup */
      for (int j = 0; j < in1->n_dims && j < no; j++) out->tag[j] = in1->tag[j];
      out->tagged = true;
      continue;
    }
    /* The rest by their dim correspondence: each output dim takes the tag of an input dim mapped onto it. */
    bool any = false;
    for (int i = 0; i < x->n_in; i++) {
      const ox_val *v = ox_in(x, i);
      if (!v || !v->activation || !v->tagged || v->n_dims > ONNX_MAX_DIMS) continue;
      int8_t m[ONNX_MAX_DIMS];
      uint32_t whole = 0;
      if (!onnx_map(x, i, v, out, m, &whole)) continue;
      any = true;
      for (int d = 0; d < v->n_dims; d++)
        if (m[d] >= 0 && out->tag[m[d]] == OX_TAG_NONE) out->tag[m[d]] = v->tag[d];
    }
    out->tagged = any;
  }
}
