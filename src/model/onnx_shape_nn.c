/* ONNX shape inference for the neural-network ops (model layer, core library): MatMul, Gemm, convolutions,
 * pooling, normalisations, reductions, Dropout and the losses. The shared helpers and the shape-moving ops are in
 * onnx_shape.c; the rules follow the ONNX operator specification (onnx/docs/Operators.md at v1.12.0): MatMul as
 * numpy.matmul, the Conv, ConvTranspose and MaxPool output-size formulas, Reduce* with axes and keepdims. */
#include <string.h>

#include "model/onnx_internal.h"

/* Kernel sizes, strides, dilations, pads and groups are at most 1e6 (graph_json.c's MAX_SMALL), so that the size
 * formulas stay far from int64 overflow with dims up to 1e12. */
#define OX_MAX_SMALL 1000000

/* ---- Linear algebra ---- */

ap_status ox_infer_matmul(ox *x) {
  ox_val *a = ox_in(x, 0), *b = ox_in(x, 1);
  ap_status st;
  if ((st = ox_need(x, a, 0)) || (st = ox_need(x, b, 1))) return st;
  if (a->n_dims < 1 || b->n_dims < 1) return ox_fail(x, AP_INVALID, "MatMul inputs must have at least one dimension");
  ox_val ea = *a, eb = *b; /* 1-D operands: [K] → [1, K] and [K] → [K, 1] */
  if (ea.n_dims == 1) ea.dims[1] = ea.dims[0], ea.dims[0] = 1, ea.n_dims = 2;
  if (eb.n_dims == 1) eb.dims[1] = 1, eb.n_dims = 2;
  int64_t k1 = ea.dims[ea.n_dims - 1], k2 = eb.dims[eb.n_dims - 2];
  if (k1 != k2) return ox_fail(x, AP_INVALID, "MatMul inner dimensions disagree: %lld and %lld", (long long)k1, (long long)k2);
  ox_val ba = ea, bb = eb; /* batch dims */
  ba.n_dims -= 2;
  bb.n_dims -= 2;
  ox_val *bv[2] = {&ba, &bb};
  int r;
  int64_t dims[ONNX_MAX_DIMS + 2];
  if ((st = ox_broadcast_dims(x, bv, 2, &r, dims))) return st;
  if (a->n_dims > 1) dims[r++] = ea.dims[ea.n_dims - 2];
  if (b->n_dims > 1) dims[r++] = eb.dims[eb.n_dims - 1];
  return ox_set_shape(x, 0, r, dims, a->elem_type);
}

ap_status ox_infer_gemm(ox *x) {
  ox_val *a = ox_in(x, 0), *b = ox_in(x, 1);
  ap_status st;
  if ((st = ox_need(x, a, 0)) || (st = ox_need(x, b, 1))) return st;
  if (a->n_dims != 2 || b->n_dims != 2) return ox_fail(x, AP_INVALID, "Gemm inputs must be 2-D");
  bool ta = ox_attr_i(x->node, "transA", 0) != 0, tb = ox_attr_i(x->node, "transB", 0) != 0;
  int64_t m = a->dims[ta ? 1 : 0], ka = a->dims[ta ? 0 : 1], kb = b->dims[tb ? 1 : 0], n = b->dims[tb ? 0 : 1];
  if (ka != kb) return ox_fail(x, AP_INVALID, "Gemm inner dimensions disagree: %lld and %lld", (long long)ka, (long long)kb);
  int64_t dims[2] = {m, n};
  return ox_set_shape(x, 0, 2, dims, a->elem_type);
}

/* ---- Convolution and pooling ---- */

/* Reads an ints attribute of n entries (default def each); false when present with another length. */
static bool spatial_attr(const onnx_node *nd, const char *name, int n, int64_t def, int64_t *out) {
  const onnx_attr *at = ox_attr(nd, name);
  for (int i = 0; i < n; i++) out[i] = def;
  if (!at || at->type != ONNX_ATTR_INTS) return true;
  if (at->n_ints != n) return false;
  for (int i = 0; i < n; i++) out[i] = at->ints[i];
  return true;
}

/* Output spatial sizes of a convolution or pooling window (ONNX Conv/MaxPool: floor or, with ceil_mode,
 * ceil of (in + pads − dilated kernel) / stride + 1; SAME_* auto_pad: ceil(in / stride); VALID: no pads). */
static ap_status window_out(ox *x, const ox_val *in, int ns, const int64_t *kernel, bool ceil_mode, int64_t *out) {
  int64_t strides[ONNX_MAX_DIMS], dil[ONNX_MAX_DIMS], pads[2 * ONNX_MAX_DIMS];
  if (!spatial_attr(x->node, "strides", ns, 1, strides) || !spatial_attr(x->node, "dilations", ns, 1, dil) ||
      !spatial_attr(x->node, "pads", 2 * ns, 0, pads))
    return ox_fail(x, AP_INVALID, "strides, dilations or pads do not match the %d spatial dimensions", ns);
  const onnx_attr *ap = ox_attr(x->node, "auto_pad");
  const char *mode = ap && ap->type == ONNX_ATTR_STRING ? ap->s : "NOTSET";
  for (int i = 0; i < ns; i++) {
    int64_t d = in->dims[2 + i], s = strides[i], k = (kernel[i] - 1) * dil[i] + 1;
    if (s < 1 || dil[i] < 1 || kernel[i] < 1 || pads[i] < 0 || pads[ns + i] < 0 || s > OX_MAX_SMALL ||
        dil[i] > OX_MAX_SMALL || kernel[i] > OX_MAX_SMALL || pads[i] > OX_MAX_SMALL || pads[ns + i] > OX_MAX_SMALL)
      return ox_fail(x, AP_INVALID, "kernel, strides, dilations and pads must be positive (pads >= 0) and bounded");
    if (strncmp(mode, "SAME", 4) == 0) {
      out[i] = (d + s - 1) / s;
    } else {
      int64_t span = d + (strcmp(mode, "VALID") == 0 ? 0 : pads[i] + pads[ns + i]) - k;
      if (span < 0) return ox_fail(x, AP_INVALID, "the kernel (%lld) is larger than the padded input (%lld)", (long long)k, (long long)(span + k));
      out[i] = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    }
  }
  return AP_OK;
}

ap_status ox_infer_conv(ox *x) {
  ox_val *in = ox_in(x, 0), *w = ox_in(x, 1);
  ap_status st;
  if ((st = ox_need(x, in, 0)) || (st = ox_need(x, w, 1))) return st;
  int ns = in->n_dims - 2;
  if (ns < 1 || w->n_dims != in->n_dims) return ox_fail(x, AP_INVALID, "Conv needs [N, C, spatial...] input and a weight of the same rank");
  int64_t kernel[ONNX_MAX_DIMS], dims[ONNX_MAX_DIMS];
  if (!spatial_attr(x->node, "kernel_shape", ns, 0, kernel)) return ox_fail(x, AP_INVALID, "kernel_shape has the wrong length");
  for (int i = 0; i < ns; i++)
    if (kernel[i] == 0) kernel[i] = w->dims[2 + i];
  if ((st = window_out(x, in, ns, kernel, false, dims + 2))) return st;
  dims[0] = in->dims[0];
  dims[1] = w->dims[0];
  return ox_set_shape(x, 0, in->n_dims, dims, in->elem_type);
}

ap_status ox_infer_conv_transpose(ox *x) {
  ox_val *in = ox_in(x, 0), *w = ox_in(x, 1);
  ap_status st;
  if ((st = ox_need(x, in, 0)) || (st = ox_need(x, w, 1))) return st;
  int ns = in->n_dims - 2;
  if (ns < 1 || w->n_dims != in->n_dims) return ox_fail(x, AP_INVALID, "ConvTranspose needs [N, C, spatial...] input and a weight of the same rank");
  int64_t kernel[ONNX_MAX_DIMS], strides[ONNX_MAX_DIMS], dil[ONNX_MAX_DIMS], pads[2 * ONNX_MAX_DIMS], opad[ONNX_MAX_DIMS];
  int64_t oshape[ONNX_MAX_DIMS], dims[ONNX_MAX_DIMS];
  if (!spatial_attr(x->node, "kernel_shape", ns, 0, kernel) || !spatial_attr(x->node, "strides", ns, 1, strides) ||
      !spatial_attr(x->node, "dilations", ns, 1, dil) || !spatial_attr(x->node, "pads", 2 * ns, 0, pads) ||
      !spatial_attr(x->node, "output_padding", ns, 0, opad) || !spatial_attr(x->node, "output_shape", ns, 0, oshape))
    return ox_fail(x, AP_INVALID, "an attribute does not match the %d spatial dimensions", ns);
  int64_t group = ox_attr_i(x->node, "group", 1);
  if (group < 1 || group > OX_MAX_SMALL) return ox_fail(x, AP_INVALID, "group must be in [1, 1e6]");
  for (int i = 0; i < ns; i++) {
    int64_t k = kernel[i] ? kernel[i] : w->dims[2 + i];
    if (k < 1 || strides[i] < 1 || dil[i] < 1 || k > OX_MAX_SMALL || strides[i] > OX_MAX_SMALL || dil[i] > OX_MAX_SMALL ||
        opad[i] < 0 || opad[i] > OX_MAX_SMALL || pads[i] < 0 || pads[i] > OX_MAX_SMALL || pads[ns + i] < 0 ||
        pads[ns + i] > OX_MAX_SMALL || oshape[i] < 0 || oshape[i] > 1000000000000LL)
      return ox_fail(x, AP_INVALID, "kernel, strides and dilations must be in [1, 1e6], pads and output_padding in [0, 1e6]");
    dims[2 + i] = oshape[i] ? oshape[i]
                            : strides[i] * (in->dims[2 + i] - 1) + opad[i] + (k - 1) * dil[i] + 1 - pads[i] - pads[ns + i];
  }
  dims[0] = in->dims[0];
  dims[1] = w->dims[1] * group;
  return ox_set_shape(x, 0, in->n_dims, dims, in->elem_type);
}

ap_status ox_infer_pool(ox *x) {
  ox_val *in = ox_in(x, 0);
  ap_status st = ox_need(x, in, 0);
  if (st) return st;
  int ns = in->n_dims - 2;
  int64_t kernel[ONNX_MAX_DIMS], dims[ONNX_MAX_DIMS];
  const onnx_attr *ks = ox_attr(x->node, "kernel_shape");
  if (ns < 1 || !ks || ks->type != ONNX_ATTR_INTS || ks->n_ints != ns)
    return ox_fail(x, AP_INVALID, "a pool needs [N, C, spatial...] input and kernel_shape of one entry per spatial dim");
  memcpy(kernel, ks->ints, sizeof kernel[0] * (size_t)ns);
  if ((st = window_out(x, in, ns, kernel, ox_attr_i(x->node, "ceil_mode", 0) != 0, dims + 2))) return st;
  dims[0] = in->dims[0];
  dims[1] = in->dims[1];
  if ((st = ox_set_shape(x, 0, in->n_dims, dims, in->elem_type))) return st;
  return ox_set_shape(x, 1, in->n_dims, dims, ONNX_INT64); /* MaxPool's optional indices */
}

ap_status ox_infer_global_pool(ox *x) {
  ox_val *in = ox_in(x, 0);
  ap_status st = ox_need(x, in, 0);
  if (st) return st;
  if (in->n_dims < 3) return ox_fail(x, AP_INVALID, "a global pool needs [N, C, spatial...] input");
  int64_t dims[ONNX_MAX_DIMS];
  for (int i = 0; i < in->n_dims; i++) dims[i] = i < 2 ? in->dims[i] : 1;
  return ox_set_shape(x, 0, in->n_dims, dims, in->elem_type);
}

/* BatchNormalization: Y like X, the running statistics and saved statistics [C]. LayerNormalization: Y like
 * X, Mean and InvStdDev like X with the normalised dimensions set to 1. */
ap_status ox_infer_norm(ox *x) {
  ox_val *in = ox_in(x, 0);
  ap_status st = ox_need(x, in, 0);
  if (st) return st;
  if ((st = ox_set_shape(x, 0, in->n_dims, in->dims, in->elem_type))) return st;
  if (strcmp(x->node->op_type, "BatchNormalization") == 0) {
    if (in->n_dims < 2) return ox_fail(x, AP_INVALID, "BatchNormalization needs [N, C, ...] input");
    for (int i = 1; i < x->n_out; i++)
      if ((st = ox_set_shape(x, i, 1, &in->dims[1], in->elem_type))) return st;
    return AP_OK;
  }
  int axis;
  if (!ox_axis(ox_attr_i(x->node, "axis", -1), in->n_dims, &axis)) return ox_fail(x, AP_INVALID, "axis out of range");
  int64_t dims[ONNX_MAX_DIMS];
  for (int i = 0; i < in->n_dims; i++) dims[i] = i < axis ? in->dims[i] : 1;
  for (int i = 1; i < x->n_out; i++)
    if ((st = ox_set_shape(x, i, in->n_dims, dims, ONNX_FLOAT))) return st;
  return AP_OK;
}

/* ---- Reductions ---- */

static ap_status reduce_dims(ox *x, const ox_val *in, const int64_t *axes, int64_t n_axes, bool keep, int elem) {
  bool red[ONNX_MAX_DIMS] = {false};
  for (int64_t i = 0; i < n_axes; i++) {
    int a;
    if (!ox_axis(axes[i], in->n_dims, &a)) return ox_fail(x, AP_INVALID, "axis %lld out of range", (long long)axes[i]);
    red[a] = true;
  }
  if (n_axes == 0)
    for (int i = 0; i < in->n_dims; i++) red[i] = true;
  int64_t dims[ONNX_MAX_DIMS];
  int r = 0;
  for (int i = 0; i < in->n_dims; i++)
    if (!red[i]) dims[r++] = in->dims[i];
    else if (keep) dims[r++] = 1;
  return ox_set_shape(x, 0, r, dims, elem);
}

ap_status ox_infer_reduce(ox *x) {
  ox_val *in = ox_in(x, 0);
  ap_status st = ox_need(x, in, 0);
  if (st) return st;
  const int64_t *axes = NULL;
  bool known;
  int64_t n = ox_ints(x, "axes", 1, &axes, &known);
  if (!known) return ox_fail(x, AP_INVALID, "the reduction axes (input 1) are not known at import");
  if (n < 0) n = 0;
  if (n == 0 && ox_attr_i(x->node, "noop_with_empty_axes", 0)) return ox_set_shape(x, 0, in->n_dims, in->dims, in->elem_type);
  return reduce_dims(x, in, axes, n, ox_attr_i(x->node, "keepdims", 1) != 0, in->elem_type);
}

ap_status ox_infer_arg_reduce(ox *x) {
  ox_val *in = ox_in(x, 0);
  ap_status st = ox_need(x, in, 0);
  if (st) return st;
  int64_t axis = ox_attr_i(x->node, "axis", 0);
  return reduce_dims(x, in, &axis, 1, ox_attr_i(x->node, "keepdims", 1) != 0, ONNX_INT64);
}

ap_status ox_infer_dropout(ox *x) {
  ox_val *in = ox_in(x, 0);
  ap_status st = ox_need(x, in, 0);
  if (st) return st;
  if ((st = ox_set_shape(x, 0, in->n_dims, in->dims, in->elem_type))) return st;
  return ox_set_shape(x, 1, in->n_dims, in->dims, ONNX_BOOL);
}

/* SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss: scores [N, C, d...], labels [N, d...]; the loss is a
 * scalar unless reduction = "none" (then like the labels); SoftmaxCrossEntropyLoss's log_prob like the scores. */
ap_status ox_infer_loss(ox *x) {
  ox_val *sc = ox_in(x, 0), *lb = ox_in(x, 1);
  ap_status st;
  if ((st = ox_need(x, sc, 0)) || (st = ox_need(x, lb, 1))) return st;
  const onnx_attr *r = ox_attr(x->node, "reduction");
  bool none = r && r->type == ONNX_ATTR_STRING && strcmp(r->s, "none") == 0;
  if ((st = ox_set_shape(x, 0, none ? lb->n_dims : 0, lb->dims, sc->elem_type))) return st;
  return ox_set_shape(x, 1, sc->n_dims, sc->dims, sc->elem_type);
}
