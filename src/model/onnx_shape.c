/* ONNX shape inference and constant propagation (model layer, core library). For the node being imported,
 * computes each output's shape where the file's value_info leaves it out, and the integer contents of small
 * outputs where the inputs' are known (the Shape → Gather → Unsqueeze → Concat → Reshape arithmetic of
 * exports). Shapes the file declares are kept as declared. The rules follow the ONNX operator specification
 * (onnx/docs/Operators.md at v1.12.0, the version of Debian's libonnx-dev): broadcasting per
 * onnx/docs/Broadcasting.md (numpy rules). This file holds the shared helpers, the elementwise ops and the
 * shape-moving ops; onnx_shape_nn.c the matmuls, convolutions, pools, norms, reductions and losses. An output
 * whose shape cannot be known is an error naming the node. */
#include <math.h>
#include <string.h>

#include "model/onnx_internal.h"

/* ---- Helpers ---- */

ap_status ox_need(const ox *x, const ox_val *v, int i) {
  if (!v) return ox_fail(x, AP_INVALID, "input %d is missing", i);
  if (v->n_dims < 0) return ox_fail(x, AP_INVALID, "input %d ('%.200s') has no known shape", i, v->name);
  return AP_OK;
}

/* Known contents that agree with the value's shape (a declared shape may disagree with what was computed). */
static bool has_vals(const ox_val *v) { return v && v->n_vals >= 0 && v->vals && v->n_vals == ox_numel(v); }

/* Sets output i's shape unless the file declared one; its element type unless known. */
ap_status ox_set_shape(ox *x, int i, int n, const int64_t *dims, int elem_type) {
  ox_val *o = ox_out(x, i);
  if (!o) return AP_OK;
  if (n > ONNX_MAX_DIMS) return ox_fail(x, AP_INVALID, "output %d would have %d dimensions (at most %d)", i, n, ONNX_MAX_DIMS);
  if (o->n_dims < 0) {
    for (int k = 0; k < n; k++)
      if (dims[k] < 0) return ox_fail(x, AP_INVALID, "output %d ('%.200s'): dimension %d comes out negative", i, o->name, k);
    if (!ox_dims_ok(n, dims))
      return ox_fail(x, AP_INVALID, "output %d ('%.200s'): a dimension above 1e12 or more than 1e15 elements", i, o->name);
    o->n_dims = n;
    if (n) memcpy(o->dims, dims, sizeof dims[0] * (size_t)n);
  }
  if (!o->elem_type) o->elem_type = elem_type;
  return AP_OK;
}

static ap_status set_vals(ox *x, int i, int64_t n, const int64_t *v) {
  ox_val *o = ox_out(x, i);
  if (!o || n < 0 || n > ONNX_MAX_VALUES) return AP_OK;
  int64_t *c = arena_alloc(x->a, sizeof *c * (size_t)(n ? n : 1));
  if (!c) return ctx_fail(x->ctx, AP_NOMEM, "%s: out of memory", x->file);
  if (n) memcpy(c, v, sizeof *c * (size_t)n);
  o->vals = c;
  o->n_vals = n;
  return AP_OK;
}

/* Resolves a possibly negative axis against rank r; false when out of range. */
bool ox_axis(int64_t a, int r, int *out) {
  if (a < 0) a += r;
  if (a < 0 || a >= r) return false;
  *out = (int)a;
  return true;
}

int64_t ox_ints(ox *x, const char *attr, int input, const int64_t **out, bool *known) {
  const onnx_attr *at = ox_attr(x->node, attr);
  *known = true;
  if (at && at->type == ONNX_ATTR_INTS) {
    *out = at->ints;
    return at->n_ints;
  }
  const ox_val *v = ox_in(x, input);
  if (v) {
    if (!has_vals(v)) {
      *known = false;
      return 0;
    }
    *out = v->vals;
    return v->n_vals;
  }
  *out = NULL;
  return -1; /* absent */
}

static bool is_bool_op(const char *t) {
  static const char *const ops[] = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Not"};
  for (size_t i = 0; i < AP_COUNT(ops); i++)
    if (strcmp(t, ops[i]) == 0) return true;
  return false;
}

/* ---- Elementwise ---- */

ap_status ox_infer_same(ox *x) {
  ox_val *a = ox_in(x, 0);
  ap_status st = ox_need(x, a, 0);
  if (st) return st;
  int et = is_bool_op(x->node->op_type) ? ONNX_BOOL : a->elem_type;
  for (int i = 0; i < x->n_out; i++)
    if ((st = ox_set_shape(x, i, a->n_dims, a->dims, et))) return st;
  const char *t = x->node->op_type;
  if (has_vals(a) && (strcmp(t, "Identity") == 0 || strcmp(t, "Neg") == 0 || strcmp(t, "Abs") == 0)) {
    int64_t v[ONNX_MAX_VALUES];
    for (int64_t i = 0; i < a->n_vals; i++) {
      int64_t e = a->vals[i];
      v[i] = t[0] == 'N' ? (e == INT64_MIN ? e : -e) : t[0] == 'A' ? (e < 0 && e != INT64_MIN ? -e : e) : e;
    }
    return set_vals(x, 0, a->n_vals, v);
  }
  return AP_OK;
}

/* The broadcast shape of the given values (numpy rules); fails naming the clash. */
ap_status ox_broadcast_dims(ox *x, ox_val *const *v, int n, int *rank, int64_t *dims) {
  int r = 0;
  for (int i = 0; i < n; i++)
    if (v[i]->n_dims > r) r = v[i]->n_dims;
  for (int k = 0; k < r; k++) dims[k] = 1;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < v[i]->n_dims; k++) {
      int64_t d = v[i]->dims[k], *o = &dims[r - v[i]->n_dims + k];
      if (d == *o || d == 1) continue;
      if (*o == 1) *o = d;
      else return ox_fail(x, AP_INVALID, "cannot broadcast dimension %lld of input %d ('%.200s') against %lld",
                          (long long)d, i, v[i]->name, (long long)*o);
    }
  *rank = r;
  return AP_OK;
}

/* The flat index into v of the output element at flat index idx of a broadcast shape (rank r, dims). */
static int64_t bcast_index(const ox_val *v, int64_t idx, int r, const int64_t *dims) {
  int64_t off = 0, stride = 1;
  for (int k = r - 1; k >= 0; k--) {
    int64_t c = idx % dims[k];
    idx /= dims[k];
    int vk = k - (r - v->n_dims);
    if (vk < 0) continue;
    if (v->dims[vk] != 1) off += c * stride;
    stride *= v->dims[vk];
  }
  return off;
}

static bool int_op(const char *t, int64_t a, int64_t b, int64_t *out) {
  if (strcmp(t, "Add") == 0) return !__builtin_add_overflow(a, b, out);
  if (strcmp(t, "Sub") == 0) return !__builtin_sub_overflow(a, b, out);
  if (strcmp(t, "Mul") == 0) return !__builtin_mul_overflow(a, b, out);
  if (strcmp(t, "Div") == 0) {
    if (b == 0 || (a == INT64_MIN && b == -1)) return false;
    *out = a / b;
    return true;
  }
  if (strcmp(t, "Mod") == 0) {
    if (b == 0 || (a == INT64_MIN && b == -1)) return false;
    *out = a % b;
    return true;
  }
  if (strcmp(t, "Equal") == 0) return *out = a == b, true;
  if (strcmp(t, "Less") == 0) return *out = a < b, true;
  if (strcmp(t, "Greater") == 0) return *out = a > b, true;
  if (strcmp(t, "Max") == 0) return *out = a > b ? a : b, true;
  if (strcmp(t, "Min") == 0) return *out = a < b ? a : b, true;
  return false;
}

ap_status ox_infer_broadcast(ox *x) {
  ox_val *v[3];
  int n = x->n_in < 3 ? x->n_in : 3;
  if (n < 1) return ox_fail(x, AP_INVALID, "needs at least one input");
  for (int i = 0; i < n; i++) {
    v[i] = ox_in(x, i);
    ap_status st = ox_need(x, v[i], i);
    if (st) return st;
  }
  for (int i = 3; i < x->n_in; i++) { /* variadic Sum/Max/Min/Mean: the rest must match the broadcast too */
    ap_status st = ox_need(x, ox_in(x, i), i);
    if (st) return st;
  }
  int r;
  int64_t dims[ONNX_MAX_DIMS];
  ap_status st = ox_broadcast_dims(x, v, n, &r, dims);
  if (st) return st;
  const char *t = x->node->op_type;
  bool where = strcmp(t, "Where") == 0;
  int et = is_bool_op(t) ? ONNX_BOOL : where && n > 1 ? v[1]->elem_type : v[0]->elem_type;
  if ((st = ox_set_shape(x, 0, r, dims, et))) return st;
  bool known = n == (where ? 3 : 2);
  for (int i = 0; i < n; i++) known = known && has_vals(v[i]);
  if (!known) return AP_OK;
  int64_t total = 1;
  for (int k = 0; k < r; k++) total *= dims[k];
  if (total > ONNX_MAX_VALUES) return AP_OK;
  int64_t out[ONNX_MAX_VALUES];
  for (int64_t i = 0; i < total; i++) {
    int64_t a = v[0]->vals[bcast_index(v[0], i, r, dims)], b = v[1]->vals[bcast_index(v[1], i, r, dims)];
    if (where) out[i] = a ? b : v[2]->vals[bcast_index(v[2], i, r, dims)];
    else if (!int_op(t, a, b, &out[i])) return AP_OK;
  }
  return set_vals(x, 0, total, out);
}

/* ---- Shape movers ---- */

ap_status ox_infer_reshape(ox *x) {
  ox_val *in = ox_in(x, 0), *sh = ox_in(x, 1);
  ap_status st = ox_need(x, in, 0);
  if (st) return st;
  ox_val *o = ox_out(x, 0);
  if (!has_vals(sh)) {
    if (o && o->n_dims >= 0) goto vals;
    return ox_fail(x, AP_INVALID, "the target shape (input 1) is not known at import; save shape inference's value_info");
  }
  if (sh->n_vals > ONNX_MAX_DIMS) return ox_fail(x, AP_INVALID, "target shape of %lld dimensions", (long long)sh->n_vals);
  int64_t dims[ONNX_MAX_DIMS], known = 1, total = ox_numel(in);
  int minus = -1;
  bool allowzero = ox_attr_i(x->node, "allowzero", 0) != 0;
  for (int i = 0; i < (int)sh->n_vals; i++) {
    int64_t d = sh->vals[i];
    if (d == 0 && !allowzero) {
      if (i >= in->n_dims) return ox_fail(x, AP_INVALID, "target dim %d is 0 (copy) but the input has %d dims", i, in->n_dims);
      d = in->dims[i];
    }
    if (d == -1) {
      if (minus >= 0) return ox_fail(x, AP_INVALID, "the target shape has two -1 entries");
      minus = i;
      d = 1;
    } else if (d < 0) {
      return ox_fail(x, AP_INVALID, "target dim %d is %lld", i, (long long)d);
    }
    dims[i] = d;
    if (d && __builtin_mul_overflow(known, d, &known)) return ox_fail(x, AP_INVALID, "target shape overflows");
  }
  if (minus >= 0) dims[minus] = known ? total / known : 0;
  int64_t n = 1;
  for (int i = 0; i < (int)sh->n_vals; i++)
    if (__builtin_mul_overflow(n, dims[i], &n)) return ox_fail(x, AP_INVALID, "target shape overflows");
  if (total >= 0 && n != total)
    return ox_fail(x, AP_INVALID, "cannot reshape %lld elements into %lld", (long long)total, (long long)n);
  if ((st = ox_set_shape(x, 0, (int)sh->n_vals, dims, in->elem_type))) return st;
vals:
  return has_vals(in) ? set_vals(x, 0, in->n_vals, in->vals) : AP_OK;
}

ap_status ox_infer_flatten(ox *x) {
  ox_val *in = ox_in(x, 0);
  ap_status st = ox_need(x, in, 0);
  if (st) return st;
  int64_t a = ox_attr_i(x->node, "axis", 1);
  if (a < 0) a += in->n_dims;
  if (a < 0 || a > in->n_dims) return ox_fail(x, AP_INVALID, "axis out of range");
  int64_t dims[2] = {1, 1};
  for (int i = 0; i < in->n_dims; i++)
    if (__builtin_mul_overflow(dims[i < a ? 0 : 1], in->dims[i], &dims[i < a ? 0 : 1])) return ox_fail(x, AP_INVALID, "overflow");
  if ((st = ox_set_shape(x, 0, 2, dims, in->elem_type))) return st;
  return has_vals(in) ? set_vals(x, 0, in->n_vals, in->vals) : AP_OK;
}

ap_status ox_infer_squeeze(ox *x) {
  ox_val *in = ox_in(x, 0);
  ap_status st = ox_need(x, in, 0);
  if (st) return st;
  const int64_t *axes = NULL;
  bool known;
  int64_t n = ox_ints(x, "axes", 1, &axes, &known);
  if (!known) return ox_fail(x, AP_INVALID, "the axes (input 1) are not known at import");
  bool drop[ONNX_MAX_DIMS] = {false};
  for (int64_t i = 0; i < n; i++) {
    int a;
    if (!ox_axis(axes[i], in->n_dims, &a) || in->dims[a] != 1)
      return ox_fail(x, AP_INVALID, "axis %lld is out of range or not of size 1", (long long)axes[i]);
    drop[a] = true;
  }
  int64_t dims[ONNX_MAX_DIMS];
  int r = 0;
  for (int i = 0; i < in->n_dims; i++)
    if (!(n > 0 ? drop[i] : in->dims[i] == 1)) dims[r++] = in->dims[i];
  if ((st = ox_set_shape(x, 0, r, dims, in->elem_type))) return st;
  return has_vals(in) ? set_vals(x, 0, in->n_vals, in->vals) : AP_OK;
}

ap_status ox_infer_unsqueeze(ox *x) {
  ox_val *in = ox_in(x, 0);
  ap_status st = ox_need(x, in, 0);
  if (st) return st;
  const int64_t *axes = NULL;
  bool known;
  int64_t n = ox_ints(x, "axes", 1, &axes, &known);
  if (!known || n < 1) return ox_fail(x, AP_INVALID, "the axes are missing or not known at import");
  int r = in->n_dims + (int)(n > ONNX_MAX_DIMS ? ONNX_MAX_DIMS + 1 : n);
  if (r > ONNX_MAX_DIMS) return ox_fail(x, AP_INVALID, "more than %d dimensions", ONNX_MAX_DIMS);
  bool ins[ONNX_MAX_DIMS] = {false};
  for (int64_t i = 0; i < n; i++) {
    int a;
    if (!ox_axis(axes[i], r, &a) || ins[a]) return ox_fail(x, AP_INVALID, "axis %lld out of range or repeated", (long long)axes[i]);
    ins[a] = true;
  }
  int64_t dims[ONNX_MAX_DIMS];
  for (int i = 0, k = 0; i < r; i++) dims[i] = ins[i] ? 1 : in->dims[k++];
  if ((st = ox_set_shape(x, 0, r, dims, in->elem_type))) return st;
  return has_vals(in) ? set_vals(x, 0, in->n_vals, in->vals) : AP_OK;
}

ap_status ox_infer_transpose(ox *x) {
  ox_val *in = ox_in(x, 0);
  ap_status st = ox_need(x, in, 0);
  if (st) return st;
  const onnx_attr *p = ox_attr(x->node, "perm");
  int64_t dims[ONNX_MAX_DIMS];
  bool seen[ONNX_MAX_DIMS] = {false};
  if (p && p->type == ONNX_ATTR_INTS && p->n_ints != in->n_dims) return ox_fail(x, AP_INVALID, "perm has the wrong length");
  for (int i = 0; i < in->n_dims; i++) {
    int64_t a = p && p->type == ONNX_ATTR_INTS ? p->ints[i] : in->n_dims - 1 - i;
    if (a < 0 || a >= in->n_dims || seen[a]) return ox_fail(x, AP_INVALID, "perm is not a permutation");
    seen[a] = true;
    dims[i] = in->dims[a];
  }
  return ox_set_shape(x, 0, in->n_dims, dims, in->elem_type);
}

ap_status ox_infer_concat(ox *x) {
  ox_val *first = ox_in(x, 0);
  ap_status st = ox_need(x, first, 0);
  if (st) return st;
  int axis;
  if (!ox_axis(ox_attr_i(x->node, "axis", 0), first->n_dims, &axis)) return ox_fail(x, AP_INVALID, "axis out of range");
  int64_t dims[ONNX_MAX_DIMS], vals[ONNX_MAX_VALUES], n_vals = 0;
  memcpy(dims, first->dims, sizeof dims[0] * (size_t)first->n_dims);
  dims[axis] = 0;
  bool known = first->n_dims == 1;
  for (int i = 0; i < x->n_in; i++) {
    ox_val *v = ox_in(x, i);
    if ((st = ox_need(x, v, i))) return st;
    if (v->n_dims != first->n_dims) return ox_fail(x, AP_INVALID, "input %d has rank %d, input 0 %d", i, v->n_dims, first->n_dims);
    for (int k = 0; k < v->n_dims; k++)
      if (k != axis && v->dims[k] != first->dims[k]) return ox_fail(x, AP_INVALID, "input %d differs off the concat axis", i);
    if (__builtin_add_overflow(dims[axis], v->dims[axis], &dims[axis])) return ox_fail(x, AP_INVALID, "overflow");
    known = known && has_vals(v) && n_vals + v->n_vals <= ONNX_MAX_VALUES;
    if (known) {
      memcpy(vals + n_vals, v->vals, sizeof vals[0] * (size_t)v->n_vals);
      n_vals += v->n_vals;
    }
  }
  if ((st = ox_set_shape(x, 0, first->n_dims, dims, first->elem_type))) return st;
  return known ? set_vals(x, 0, n_vals, vals) : AP_OK;
}

ap_status ox_infer_split(ox *x) {
  ox_val *in = ox_in(x, 0);
  ap_status st = ox_need(x, in, 0);
  if (st) return st;
  int axis;
  if (!ox_axis(ox_attr_i(x->node, "axis", 0), in->n_dims, &axis)) return ox_fail(x, AP_INVALID, "axis out of range");
  const int64_t *split = NULL;
  bool known;
  int64_t n = ox_ints(x, "split", 1, &split, &known);
  if (!known) return ox_fail(x, AP_INVALID, "the split sizes (input 1) are not known at import");
  if (n >= 0 && n != x->n_out) return ox_fail(x, AP_INVALID, "%lld split sizes for %d outputs", (long long)n, x->n_out);
  int64_t dims[ONNX_MAX_DIMS], sum = 0;
  memcpy(dims, in->dims, sizeof dims[0] * (size_t)in->n_dims);
  for (int i = 0; i < x->n_out; i++) {
    int64_t part = n >= 0 ? split[i] : (in->dims[axis] + x->n_out - 1) / x->n_out;
    if (n < 0 && i == x->n_out - 1) part = in->dims[axis] - sum;
    if (part < 0 || __builtin_add_overflow(sum, part, &sum)) return ox_fail(x, AP_INVALID, "bad split sizes");
    dims[axis] = part;
    if ((st = ox_set_shape(x, i, in->n_dims, dims, in->elem_type))) return st;
  }
  if (sum != in->dims[axis])
    return ox_fail(x, AP_INVALID, "split sizes sum to %lld, the axis has %lld", (long long)sum, (long long)in->dims[axis]);
  return AP_OK;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

ap_status ox_infer_slice(ox *x) {
  ox_val *in = ox_in(x, 0);
  ap_status st = ox_need(x, in, 0);
  if (st) return st;
  const int64_t *starts, *ends, *axes = NULL, *steps = NULL;
  bool k1, k2, k3 = true, k4 = true;
  int64_t ns = ox_ints(x, "starts", 1, &starts, &k1), ne = ox_ints(x, "ends", 2, &ends, &k2);
  int64_t na = ox_ints(x, "axes", 3, &axes, &k3), nst = ox_in(x, 4) ? ox_ints(x, "", 4, &steps, &k4) : -1;
  ox_val *o = ox_out(x, 0);
  if (!(k1 && k2 && k3 && k4) || ns < 0 || ne != ns || (na >= 0 && na != ns) || (nst >= 0 && nst != ns)) {
    if (o && o->n_dims >= 0) return AP_OK;
    return ox_fail(x, AP_INVALID, "starts, ends, axes or steps are missing, disagree, or are not known at import");
  }
  int64_t dims[ONNX_MAX_DIMS], first = 0, step0 = 1;
  memcpy(dims, in->dims, sizeof dims[0] * (size_t)in->n_dims);
  for (int64_t i = 0; i < ns; i++) {
    int a;
    if (!ox_axis(na >= 0 ? axes[i] : i, in->n_dims, &a)) return ox_fail(x, AP_INVALID, "axis out of range");
    int64_t d = in->dims[a], s = nst >= 0 ? steps[i] : 1, b = starts[i], e = ends[i];
    if (s == 0 || s == INT64_MIN) return ox_fail(x, AP_INVALID, "a step is 0 or out of range");
    if (b < 0) b = b < -d ? 0 : b + d;
    if (e < 0) e = e < -d ? -1 : e + d;
    int64_t len;
    if (s > 0) {
      b = clamp64(b, 0, d), e = clamp64(e, 0, d);
      len = e > b ? (e - b - 1) / s + 1 : 0;
    } else {
      b = clamp64(b, 0, d - 1), e = clamp64(e, -1, d - 1);
      len = b > e ? (b - e - 1) / (-s) + 1 : 0;
    }
    dims[a] = len;
    if (a == 0) first = b, step0 = s;
  }
  if ((st = ox_set_shape(x, 0, in->n_dims, dims, in->elem_type))) return st;
  if (has_vals(in) && in->n_dims == 1 && o && o->n_dims == 1 && o->dims[0] == dims[0]) {
    int64_t v[ONNX_MAX_VALUES];
    for (int64_t i = 0; i < dims[0]; i++) v[i] = in->vals[first + i * step0];
    return set_vals(x, 0, dims[0], v);
  }
  return AP_OK;
}

ap_status ox_infer_gather(ox *x) {
  ox_val *data = ox_in(x, 0), *idx = ox_in(x, 1);
  ap_status st;
  if ((st = ox_need(x, data, 0)) || (st = ox_need(x, idx, 1))) return st;
  int axis;
  if (!ox_axis(ox_attr_i(x->node, "axis", 0), data->n_dims, &axis)) return ox_fail(x, AP_INVALID, "axis out of range");
  int64_t dims[2 * ONNX_MAX_DIMS];
  int r = 0;
  for (int i = 0; i < axis; i++) dims[r++] = data->dims[i];
  for (int i = 0; i < idx->n_dims; i++) dims[r++] = idx->dims[i];
  for (int i = axis + 1; i < data->n_dims; i++) dims[r++] = data->dims[i];
  if ((st = ox_set_shape(x, 0, r, dims, data->elem_type))) return st;
  if (has_vals(data) && has_vals(idx) && data->n_dims == 1) {
    int64_t v[ONNX_MAX_VALUES];
    for (int64_t i = 0; i < idx->n_vals; i++) {
      int64_t k = idx->vals[i] < 0 ? idx->vals[i] + data->n_vals : idx->vals[i];
      if (k < 0 || k >= data->n_vals) return ox_fail(x, AP_INVALID, "index %lld out of range", (long long)idx->vals[i]);
      v[i] = data->vals[k];
    }
    return set_vals(x, 0, idx->n_vals, v);
  }
  return AP_OK;
}

ap_status ox_infer_shape(ox *x) {
  ox_val *in = ox_in(x, 0);
  ap_status st = ox_need(x, in, 0);
  if (st) return st;
  int64_t b = ox_attr_i(x->node, "start", 0), e = ox_attr_i(x->node, "end", in->n_dims), r = in->n_dims;
  if (b < 0) b += r;
  if (e < 0) e += r;
  b = clamp64(b, 0, r), e = clamp64(e, 0, r);
  int64_t n = e > b ? e - b : 0;
  if ((st = ox_set_shape(x, 0, 1, &n, ONNX_INT64))) return st;
  return set_vals(x, 0, n, in->dims + b);
}

ap_status ox_infer_constant(ox *x) {
  const onnx_node *nd = x->node;
  for (int i = 0; i < nd->n_attrs; i++) {
    const onnx_attr *at = &nd->attrs[i];
    int64_t one = 1;
    if (strcmp(at->name, "value") == 0 && at->type == ONNX_ATTR_TENSOR) {
      ap_status st = ox_set_shape(x, 0, at->t->n_dims, at->t->dims, at->t->elem_type);
      return st ? st : at->t->n_vals >= 0 ? set_vals(x, 0, at->t->n_vals, at->t->vals) : AP_OK;
    }
    if (strcmp(at->name, "value_int") == 0 && at->type == ONNX_ATTR_INT) {
      ap_status st = ox_set_shape(x, 0, 0, NULL, ONNX_INT64);
      return st ? st : set_vals(x, 0, 1, &at->i);
    }
    if (strcmp(at->name, "value_ints") == 0 && at->type == ONNX_ATTR_INTS) {
      int64_t n = at->n_ints;
      ap_status st = ox_set_shape(x, 0, 1, &n, ONNX_INT64);
      return st ? st : set_vals(x, 0, n, at->ints);
    }
    if (strcmp(at->name, "value_float") == 0 && at->type == ONNX_ATTR_FLOAT) return ox_set_shape(x, 0, 0, &one, ONNX_FLOAT);
    if (strcmp(at->name, "value_floats") == 0 && at->type == ONNX_ATTR_FLOATS) {
      int64_t n = at->n_floats;
      return ox_set_shape(x, 0, 1, &n, ONNX_FLOAT);
    }
  }
  return ox_fail(x, AP_INVALID, "a Constant needs a value, value_int(s) or value_float(s) attribute (others are not read)");
}

ap_status ox_infer_constant_of_shape(ox *x) {
  ox_val *sh = ox_in(x, 0);
  ox_val *o = ox_out(x, 0);
  const onnx_attr *v = ox_attr(x->node, "value");
  const onnx_tensor *t = v && v->type == ONNX_ATTR_TENSOR ? v->t : NULL;
  int et = t ? t->elem_type : ONNX_FLOAT;
  if (!has_vals(sh)) {
    if (o && o->n_dims >= 0) return AP_OK;
    return ox_fail(x, AP_INVALID, "the shape (input 0) is not known at import");
  }
  if (sh->n_vals > ONNX_MAX_DIMS) return ox_fail(x, AP_INVALID, "more than %d dimensions", ONNX_MAX_DIMS);
  ap_status st = ox_set_shape(x, 0, (int)sh->n_vals, sh->vals, et);
  if (st) return st;
  int64_t n = ox_numel(ox_out(x, 0));
  if (t && t->n_vals == 1 && n >= 0 && n <= ONNX_MAX_VALUES) {
    int64_t fill[ONNX_MAX_VALUES];
    for (int64_t i = 0; i < n; i++) fill[i] = t->vals[0];
    return set_vals(x, 0, n, fill);
  }
  return AP_OK;
}

ap_status ox_infer_cast(ox *x) {
  ox_val *in = ox_in(x, 0);
  ap_status st = ox_need(x, in, 0);
  if (st) return st;
  int64_t to = ox_attr_i(x->node, "to", 0);
  if (to < 1 || to > 16) return ox_fail(x, AP_INVALID, "Cast needs a data type 'to'");
  if ((st = ox_set_shape(x, 0, in->n_dims, in->dims, (int)to))) return st;
  bool int_to = to == ONNX_INT64 || to == ONNX_INT32 || to == ONNX_INT16 || to == ONNX_INT8 || to == ONNX_UINT8 ||
                to == ONNX_BOOL || to == ONNX_UINT16 || to == ONNX_UINT32 || to == ONNX_UINT64;
  if (!has_vals(in) || !int_to) return AP_OK;
  int64_t v[ONNX_MAX_VALUES];
  for (int64_t i = 0; i < in->n_vals; i++) v[i] = to == ONNX_BOOL ? in->vals[i] != 0 : in->vals[i];
  return set_vals(x, 0, in->n_vals, v);
}

ap_status ox_infer_expand(ox *x) {
  ox_val *in = ox_in(x, 0), *sh = ox_in(x, 1);
  ap_status st = ox_need(x, in, 0);
  if (st) return st;
  ox_val *o = ox_out(x, 0);
  if (!has_vals(sh)) {
    if (o && o->n_dims >= 0) return AP_OK;
    return ox_fail(x, AP_INVALID, "the target shape (input 1) is not known at import");
  }
  if (sh->n_vals > ONNX_MAX_DIMS) return ox_fail(x, AP_INVALID, "more than %d dimensions", ONNX_MAX_DIMS);
  ox_val target = {.name = sh->name, .n_dims = (int)sh->n_vals};
  for (int i = 0; i < target.n_dims; i++) {
    if (sh->vals[i] < 0) return ox_fail(x, AP_INVALID, "target dim %d is negative", i);
    target.dims[i] = sh->vals[i];
  }
  ox_val *v[2] = {in, &target};
  int r;
  int64_t dims[ONNX_MAX_DIMS];
  if ((st = ox_broadcast_dims(x, v, 2, &r, dims))) return st;
  return ox_set_shape(x, 0, r, dims, in->elem_type);
}

ap_status ox_infer_range(ox *x) {
  ox_val *b = ox_in(x, 0), *e = ox_in(x, 1), *d = ox_in(x, 2);
  ox_val *o = ox_out(x, 0);
  if (!has_vals(b) || !has_vals(e) || !has_vals(d) || b->n_vals != 1 || e->n_vals != 1 || d->n_vals != 1 || !d->vals[0]) {
    if (o && o->n_dims >= 0) return AP_OK;
    return ox_fail(x, AP_INVALID, "start, limit and delta must be known scalars at import");
  }
  int64_t s = b->vals[0], l = e->vals[0], st_ = d->vals[0];
  double nd = ((double)l - (double)s) / (double)st_;
  if (nd > 1e12) return ox_fail(x, AP_INVALID, "the range is too long");
  int64_t n = nd <= 0 ? 0 : (int64_t)ceil(nd);
  ap_status st = ox_set_shape(x, 0, 1, &n, b->elem_type);
  if (st || n > ONNX_MAX_VALUES) return st;
  int64_t v[ONNX_MAX_VALUES];
  for (int64_t i = 0; i < n; i++) {
    int64_t step;
    if (__builtin_mul_overflow(i, st_, &step) || __builtin_add_overflow(s, step, &v[i])) return AP_OK;
  }
  return set_vals(x, 0, n, v);
}

