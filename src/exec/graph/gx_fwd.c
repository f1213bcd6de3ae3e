/* The graph runtime's forward pass (exec layer; gx.h): each ONNX op type as the operator reference states it
 * (onnx/docs/Operators.md at ONNX 1.12, the opset Debian's python3-onnx ships). Float ops run in fp32 (GEMMs
 * on OpenBLAS); integer tensors (shapes and indices) in int64. Attributes and inputs the runtime does not take
 * (auto_pad, ceil_mode, a Dropout that drops) fail naming the node. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/graph/gx.h"
#include "exec/graph/gx_ops.h"

#define IN(i) (&r->v[nd->in[i]])
#define OUT(i) (&r->v[nd->out[i]])
#define HAS(i) (nd->n_in > (i) && nd->in[i] >= 0)

static bool oom(gx_run *r, int k) { return gx_fail(r, k, "out of memory"); }

static bool binary(gx_run *r, int k) {
  const gx_node *nd = &r->g->nodes[k];
  const char *op = nd->node->op_type;
  const gx_tensor *a = IN(0), *b = IN(1);
  int rank;
  int64_t dims[GX_MAX_DIMS];
  if (!gx_bcast_shape(a, b, &rank, dims)) return gx_fail(r, k, "the input shapes do not broadcast");
  bool cmp = strcmp(op, "Equal") == 0, is_int = a->is_int && b->is_int;
  gx_tensor *y = OUT(0);
  if (!gx_alloc(y, is_int || cmp, rank, dims)) return oom(r, k);
  bool same = a->n == y->n && b->n == y->n;
  for (int64_t e = 0; e < y->n; e++) {
    int64_t ia = same ? e : gx_bcast_index(a, rank, dims, e), ib = same ? e : gx_bcast_index(b, rank, dims, e);
    if (is_int || (cmp && a->is_int && b->is_int)) {
      int64_t x = a->i[ia], z = b->i[ib], v = 0;
      switch (op[0]) {
      case 'A': v = x + z; break;
      case 'S': v = x - z; break;
      case 'M': v = x * z; break;
      case 'D': v = z ? x / z : 0; break;
      case 'E': v = x == z; break;
      default: return gx_fail(r, k, "integer operands are not supported");
      }
      y->i[e] = v;
      continue;
    }
    double x = a->is_int ? (double)a->i[ia] : a->f[ia], z = b->is_int ? (double)b->i[ib] : b->f[ib];
    if (cmp) {
      y->i[e] = x == z;
      continue;
    }
    float fx = (float)x, fz = (float)z, v;
    switch (op[0]) {
    case 'A': v = fx + fz; break;
    case 'S': v = fx - fz; break;
    case 'M': v = fx * fz; break;
    case 'D': v = fx / fz; break;
    default: v = fz == 2.0f ? fx * fx : fz == 0.5f ? sqrtf(fx) : powf(fx, fz); break; /* Pow */
    }
    y->f[e] = v;
  }
  return true;
}

static float gelu(float x) { return 0.5f * x * (1.0f + erff(x * (float)0.70710678118654752440)); }

static bool unary(gx_run *r, int k) {
  const gx_node *nd = &r->g->nodes[k];
  const char *op = nd->node->op_type;
  const gx_tensor *x = IN(0);
  gx_tensor *y = OUT(0);
  if (x->is_int) return gx_fail(r, k, "expected a float input");
  if (!gx_alloc(y, false, x->rank, x->dims)) return oom(r, k);
  /* The op is looked up once, not per element. */
  static const char *const names[] = {"Relu", "Erf", "Tanh", "Sigmoid", "Sqrt", "Neg", "Exp", "Gelu"};
  int which = -1;
  for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++)
    if (strcmp(op, names[i]) == 0) which = i;
  for (int64_t e = 0; e < x->n; e++) {
    float v = x->f[e];
    switch (which) {
    case 0: v = v > 0 ? v : 0; break;
    case 1: v = erff(v); break;
    case 2: v = tanhf(v); break;
    case 3: v = 1.0f / (1.0f + expf(-v)); break;
    case 4: v = sqrtf(v); break;
    case 5: v = -v; break;
    case 6: v = expf(v); break;
    case 7: v = gelu(v); break;
    default: break;
    }
    y->f[e] = v;
  }
  return true;
}

/* MatMul: numpy matmul of operands of rank >= 2 (batch dims broadcast). */
static bool matmul(gx_run *r, int k) {
  const gx_node *nd = &r->g->nodes[k];
  const gx_tensor *a = IN(0), *b = IN(1);
  if (a->rank < 2 || b->rank < 2 || a->is_int || b->is_int) return gx_fail(r, k, "expected float operands of rank >= 2");
  int64_t M = a->dims[a->rank - 2], K = a->dims[a->rank - 1], N = b->dims[b->rank - 1];
  if (b->dims[b->rank - 2] != K) return gx_fail(r, k, "the operands' inner dims differ (%lld, %lld)", (long long)K,
                                                (long long)b->dims[b->rank - 2]);
  gx_tensor ab = *a, bb = *b;
  ab.rank -= 2, bb.rank -= 2;
  int rank;
  int64_t dims[GX_MAX_DIMS];
  if (!gx_bcast_shape(&ab, &bb, &rank, dims)) return gx_fail(r, k, "the batch dims do not broadcast");
  int64_t nb = 1;
  for (int d = 0; d < rank; d++) nb *= dims[d];
  dims[rank] = M, dims[rank + 1] = N;
  gx_tensor *y = OUT(0);
  if (!gx_alloc(y, false, rank + 2, dims)) return oom(r, k);
  if (bb.rank == 0 || (b->n == K * N)) { /* one weight matrix: all batches in one GEMM */
    bool a_full = a->n == nb * M * K;
    if (a_full) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(nb * M), (int)N, (int)K, 1.0f, a->f, (int)K, b->f,
                  (int)N, 0.0f, y->f, (int)N);
      return true;
    }
  }
  for (int64_t t = 0; t < nb; t++) {
    int64_t ia = gx_bcast_index(&ab, rank, dims, t), ib = gx_bcast_index(&bb, rank, dims, t);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f, a->f + ia * M * K, (int)K,
                b->f + ib * K * N, (int)N, 0.0f, y->f + t * M * N, (int)N);
  }
  return true;
}

static bool gemm(gx_run *r, int k) {
  const gx_node *nd = &r->g->nodes[k];
  const gx_tensor *a = IN(0), *b = IN(1);
  bool ta = gx_attr_i(nd->node, "transA", 0), tb = gx_attr_i(nd->node, "transB", 0);
  float alpha = (float)gx_attr_f(nd->node, "alpha", 1.0), beta = (float)gx_attr_f(nd->node, "beta", 1.0);
  if (a->rank != 2 || b->rank != 2) return gx_fail(r, k, "expected operands of rank 2");
  int64_t M = ta ? a->dims[1] : a->dims[0], K = ta ? a->dims[0] : a->dims[1], N = tb ? b->dims[0] : b->dims[1];
  if ((tb ? b->dims[1] : b->dims[0]) != K) return gx_fail(r, k, "the operands' inner dims differ");
  gx_tensor *y = OUT(0);
  if (!gx_alloc(y, false, 2, (int64_t[]){M, N})) return oom(r, k);
  if (HAS(2) && beta != 0.0f) {
    const gx_tensor *c = IN(2);
    for (int64_t e = 0; e < M * N; e++) y->f[e] = beta * c->f[gx_bcast_index(c, 2, y->dims, e)];
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K,
              alpha, a->f, (int)a->dims[1], b->f, (int)b->dims[1], 1.0f, y->f, (int)N);
  return true;
}

static bool softmax(gx_run *r, int k) {
  const gx_node *nd = &r->g->nodes[k];
  const gx_tensor *x = IN(0);
  gx_tensor *y = OUT(0);
  if (!gx_alloc(y, false, x->rank, x->dims)) return oom(r, k);
  int64_t outer, len, inner;
  gx_softmax_span(r, nd, x, &outer, &len, &inner);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      const float *p = x->f + o * len * inner + in;
      float *q = y->f + o * len * inner + in, mx = -INFINITY;
      for (int64_t j = 0; j < len; j++) mx = p[j * inner] > mx ? p[j * inner] : mx;
      double s = 0;
      for (int64_t j = 0; j < len; j++) s += (q[j * inner] = expf(p[j * inner] - mx));
      for (int64_t j = 0; j < len; j++) q[j * inner] = (float)(q[j * inner] / s);
    }
  return true;
}

static bool reduce(gx_run *r, int k) {
  const gx_node *nd = &r->g->nodes[k];
  const gx_tensor *x = IN(0);
  bool mask[GX_MAX_DIMS], keep = gx_attr_i(nd->node, "keepdims", 1);
  if (!gx_reduce_axes(r, k, x, mask)) return gx_fail(r, k, "axes out of range");
  int64_t dims[GX_MAX_DIMS], kd[GX_MAX_DIMS];
  int rank = 0;
  double cnt = 1;
  for (int d = 0; d < x->rank; d++) {
    kd[d] = mask[d] ? 1 : x->dims[d];
    if (mask[d]) cnt *= (double)x->dims[d];
    if (!mask[d] || keep) dims[rank++] = kd[d];
  }
  gx_tensor *y = OUT(0);
  if (!gx_alloc(y, false, rank, dims)) return oom(r, k);
  gx_tensor yk = *y;
  yk.rank = x->rank;
  memcpy(yk.dims, kd, sizeof kd);
  double *acc = calloc((size_t)(y->n ? y->n : 1), sizeof *acc);
  if (!acc) return oom(r, k);
  for (int64_t e = 0; e < x->n; e++) acc[gx_bcast_index(&yk, x->rank, x->dims, e)] += x->f[e];
  bool mean = strcmp(nd->node->op_type, "ReduceMean") == 0;
  for (int64_t e = 0; e < y->n; e++) y->f[e] = (float)(mean ? acc[e] / cnt : acc[e]);
  free(acc);
  return true;
}

/* Element offsets of a copy between tensors: Transpose, Concat, Split and Slice move blocks by index maps. */
static void unravel(int64_t e, int rank, const int64_t *dims, int64_t *c) {
  for (int d = rank - 1; d >= 0; d--) {
    c[d] = e % dims[d];
    e /= dims[d];
  }
}

static bool transpose(gx_run *r, int k) {
  const gx_node *nd = &r->g->nodes[k];
  const gx_tensor *x = IN(0);
  int64_t perm[GX_MAX_DIMS], dims[GX_MAX_DIMS], c[GX_MAX_DIMS], st[GX_MAX_DIMS];
  int n = gx_ints(r, k, "perm", 99, perm, GX_MAX_DIMS);
  if (n < 0)
    for (int d = 0; d < x->rank; d++) perm[d] = x->rank - 1 - d;
  else if (n != x->rank) return gx_fail(r, k, "perm has %d entries for rank %d", n, x->rank);
  for (int d = 0; d < x->rank; d++) dims[d] = x->dims[perm[d]];
  st[x->rank - 1] = 1;
  for (int d = x->rank - 2; d >= 0; d--) st[d] = st[d + 1] * x->dims[d + 1];
  gx_tensor *y = OUT(0);
  if (!gx_alloc(y, x->is_int, x->rank, dims)) return oom(r, k);
  for (int64_t e = 0; e < y->n; e++) {
    unravel(e, y->rank, dims, c);
    int64_t s = 0;
    for (int d = 0; d < y->rank; d++) s += c[d] * st[perm[d]];
    if (x->is_int) y->i[e] = x->i[s];
    else y->f[e] = x->f[s];
  }
  return true;
}

static bool copy_shape(gx_run *r, int k, int rank, const int64_t *dims) {
  const gx_node *nd = &r->g->nodes[k];
  const gx_tensor *x = IN(0);
  int64_t n = 1;
  for (int d = 0; d < rank; d++) n *= dims[d];
  if (n != x->n) return gx_fail(r, k, "%lld elements cannot take the new shape", (long long)x->n);
  gx_tensor *y = OUT(0);
  if (!gx_alloc(y, x->is_int, rank, dims)) return oom(r, k);
  if (x->is_int) memcpy(y->i, x->i, sizeof *y->i * (size_t)n);
  else memcpy(y->f, x->f, sizeof *y->f * (size_t)n);
  return true;
}

static bool reshape_like(gx_run *r, int k) {
  const gx_node *nd = &r->g->nodes[k];
  const char *op = nd->node->op_type;
  const gx_tensor *x = IN(0);
  int64_t dims[GX_MAX_DIMS * 2];
  int rank = 0;
  if (strcmp(op, "Reshape") == 0) {
    rank = gx_ints_in(r, k, 1, dims, GX_MAX_DIMS);
    if (rank < 0) return gx_fail(r, k, "expected a shape input of at most %d values", GX_MAX_DIMS);
    int64_t known = 1;
    int neg = -1;
    for (int d = 0; d < rank; d++) {
      if (dims[d] == 0 && !gx_attr_i(nd->node, "allowzero", 0)) dims[d] = x->dims[d];
      if (dims[d] == -1) neg = d;
      else known *= dims[d];
    }
    if (neg >= 0) dims[neg] = known ? x->n / known : 0;
  } else if (strcmp(op, "Flatten") == 0) {
    int ax = gx_axis(gx_attr_i(nd->node, "axis", 1), x->rank);
    dims[0] = dims[1] = 1;
    for (int d = 0; d < x->rank; d++) dims[d < ax ? 0 : 1] *= x->dims[d];
    rank = 2;
  } else if (strcmp(op, "Unsqueeze") == 0) {
    int64_t ax[GX_MAX_DIMS];
    int n = gx_ints(r, k, "axes", 1, ax, GX_MAX_DIMS);
    rank = x->rank + (n > 0 ? n : 0);
    bool ins[GX_MAX_DIMS * 2] = {false};
    for (int i = 0; i < n; i++) ins[gx_axis(ax[i], rank)] = true;
    for (int d = 0, s = 0; d < rank; d++) dims[d] = ins[d] ? 1 : x->dims[s++];
  } else if (strcmp(op, "Squeeze") == 0) {
    int64_t ax[GX_MAX_DIMS];
    int n = gx_ints(r, k, "axes", 1, ax, GX_MAX_DIMS);
    bool drop[GX_MAX_DIMS] = {false};
    for (int i = 0; i < n; i++) drop[gx_axis(ax[i], x->rank)] = true;
    for (int d = 0; d < x->rank; d++)
      if (!(n > 0 ? drop[d] : x->dims[d] == 1)) dims[rank++] = x->dims[d];
  } else { /* Identity, Dropout */
    rank = x->rank;
    memcpy(dims, x->dims, sizeof *dims * (size_t)rank);
  }
  return copy_shape(r, k, rank, dims);
}

static bool dropout(gx_run *r, int k) {
  const gx_node *nd = &r->g->nodes[k];
  double ratio = gx_attr_f(nd->node, "ratio", 0.5);
  if (HAS(1)) ratio = IN(1)->is_int ? (double)IN(1)->i[0] : IN(1)->f[0];
  bool train = HAS(2) && (IN(2)->is_int ? IN(2)->i[0] : IN(2)->f[0] != 0);
  if (train && ratio != 0.0) return gx_fail(r, k, "ratio %g: the graph executor runs Dropout with ratio 0 only", ratio);
  if (!reshape_like(r, k)) return false;
  if (nd->n_out > 1 && nd->out[1] >= 0) {
    const gx_tensor *x = IN(0);
    if (!gx_alloc(OUT(1), true, x->rank, x->dims)) return oom(r, k);
    for (int64_t e = 0; e < x->n; e++) OUT(1)->i[e] = 1;
  }
  return true;
}

static bool concat(gx_run *r, int k) {
  const gx_node *nd = &r->g->nodes[k];
  const gx_tensor *x0 = IN(0);
  int ax = gx_axis(gx_attr_i(nd->node, "axis", 0), x0->rank);
  int64_t dims[GX_MAX_DIMS];
  memcpy(dims, x0->dims, sizeof dims);
  dims[ax] = 0;
  bool is_int = true;
  for (int i = 0; i < nd->n_in; i++) {
    if (IN(i)->rank != x0->rank) return gx_fail(r, k, "input %d has rank %d, input 0 %d", i, IN(i)->rank, x0->rank);
    dims[ax] += IN(i)->dims[ax];
    is_int = is_int && IN(i)->is_int;
  }
  gx_tensor *y = OUT(0);
  if (!gx_alloc(y, is_int, x0->rank, dims)) return oom(r, k);
  int64_t outer = 1, inner = 1, off = 0;
  for (int d = 0; d < ax; d++) outer *= dims[d];
  for (int d = ax + 1; d < x0->rank; d++) inner *= dims[d];
  for (int i = 0; i < nd->n_in; i++) {
    const gx_tensor *x = IN(i);
    int64_t w = x->dims[ax] * inner;
    for (int64_t o = 0; o < outer; o++)
      for (int64_t j = 0; j < w; j++) {
        int64_t s = o * w + j, t = o * dims[ax] * inner + off + j;
        if (is_int) y->i[t] = x->i[s];
        else y->f[t] = x->is_int ? (float)x->i[s] : x->f[s];
      }
    off += w;
  }
  return true;
}

static bool split(gx_run *r, int k) {
  const gx_node *nd = &r->g->nodes[k];
  const gx_tensor *x = IN(0);
  int ax = gx_axis(gx_attr_i(nd->node, "axis", 0), x->rank);
  int64_t sz[GX_MAX_IO], outer = 1, inner = 1, off = 0;
  int n = gx_split_sizes(r, k, x, ax, sz);
  if (n != nd->n_out) return gx_fail(r, k, "%d parts for %d outputs", n, nd->n_out);
  for (int d = 0; d < ax; d++) outer *= x->dims[d];
  for (int d = ax + 1; d < x->rank; d++) inner *= x->dims[d];
  for (int i = 0; i < n; i++) {
    int64_t dims[GX_MAX_DIMS];
    memcpy(dims, x->dims, sizeof dims);
    dims[ax] = sz[i];
    if (nd->out[i] < 0) {
      off += sz[i] * inner;
      continue;
    }
    gx_tensor *y = OUT(i);
    if (!gx_alloc(y, x->is_int, x->rank, dims)) return oom(r, k);
    int64_t w = sz[i] * inner;
    for (int64_t o = 0; o < outer; o++)
      for (int64_t j = 0; j < w; j++) {
        int64_t s = o * x->dims[ax] * inner + off + j;
        if (x->is_int) y->i[o * w + j] = x->i[s];
        else y->f[o * w + j] = x->f[s];
      }
    off += w;
  }
  return true;
}

static bool slice(gx_run *r, int k) {
  const gx_node *nd = &r->g->nodes[k];
  const gx_tensor *x = IN(0);
  int64_t start[GX_MAX_DIMS], step[GX_MAX_DIMS], dims[GX_MAX_DIMS];
  if (!gx_slice_params(r, k, x, start, step, dims)) return gx_fail(r, k, "bad starts, ends, axes or steps");
  gx_tensor *y = OUT(0);
  if (!gx_alloc(y, x->is_int, x->rank, dims)) return oom(r, k);
  for (int64_t e = 0; e < y->n; e++) {
    int64_t s = gx_slice_index(x, start, step, dims, e);
    if (x->is_int) y->i[e] = x->i[s];
    else y->f[e] = x->f[s];
  }
  return true;
}

static bool gather(gx_run *r, int k) {
  const gx_node *nd = &r->g->nodes[k];
  const gx_tensor *x = IN(0), *ix = IN(1);
  int ax = gx_axis(gx_attr_i(nd->node, "axis", 0), x->rank);
  int64_t dims[GX_MAX_DIMS * 2], outer = 1, inner = 1;
  int rank = 0;
  for (int d = 0; d < ax; d++) dims[rank++] = x->dims[d], outer *= x->dims[d];
  for (int d = 0; d < ix->rank; d++) dims[rank++] = ix->dims[d];
  for (int d = ax + 1; d < x->rank; d++) dims[rank++] = x->dims[d], inner *= x->dims[d];
  if (rank > GX_MAX_DIMS) return gx_fail(r, k, "output rank %d", rank);
  gx_tensor *y = OUT(0);
  if (!gx_alloc(y, x->is_int, rank, dims)) return oom(r, k);
  int64_t D = x->dims[ax];
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < ix->n; j++) {
      int64_t id = ix->is_int ? ix->i[j] : (int64_t)ix->f[j];
      if (id < 0) id += D;
      if (id < 0 || id >= D) return gx_fail(r, k, "index %lld outside [0, %lld)", (long long)id, (long long)D);
      for (int64_t in = 0; in < inner; in++) {
        int64_t s = (o * D + id) * inner + in, t = (o * ix->n + j) * inner + in;
        if (x->is_int) y->i[t] = x->i[s];
        else y->f[t] = x->f[s];
      }
    }
  return true;
}

static bool from_tensor(gx_tensor *y, const onnx_tensor *t) {
  bool is_int = t->elem_type != ONNX_FLOAT && t->elem_type != ONNX_DOUBLE;
  if (!gx_alloc(y, is_int, t->n_dims, t->dims)) return false;
  if (!is_int && t->f32) memcpy(y->f, t->f32, sizeof *y->f * (size_t)y->n);
  else if (is_int && t->n_vals == y->n) memcpy(y->i, t->vals, sizeof *y->i * (size_t)y->n);
  else return false;
  return true;
}

static bool constant(gx_run *r, int k) {
  const gx_node *nd = &r->g->nodes[k];
  const onnx_attr *a = gx_attr(nd->node, "value");
  gx_tensor *y = OUT(0);
  if (a && a->type == ONNX_ATTR_TENSOR) {
    if (!from_tensor(y, a->t)) return gx_fail(r, k, "its value is not a float or integer tensor stored in the file");
    return true;
  }
  if ((a = gx_attr(nd->node, "value_float")) && gx_alloc(y, false, 0, NULL)) y->f[0] = (float)a->f;
  else if ((a = gx_attr(nd->node, "value_int")) && gx_alloc(y, true, 0, NULL)) y->i[0] = a->i;
  else if ((a = gx_attr(nd->node, "value_ints")) && gx_alloc(y, true, 1, (int64_t[]){a->n_ints}))
    memcpy(y->i, a->ints, sizeof *y->i * (size_t)a->n_ints);
  else if ((a = gx_attr(nd->node, "value_floats")) && a->floats && gx_alloc(y, false, 1, (int64_t[]){a->n_floats}))
    memcpy(y->f, a->floats, sizeof *y->f * (size_t)a->n_floats);
  else return gx_fail(r, k, "no value the graph executor reads");
  return true;
}

static bool shape_ops(gx_run *r, int k) {
  const gx_node *nd = &r->g->nodes[k];
  const char *op = nd->node->op_type;
  gx_tensor *y = OUT(0);
  if (strcmp(op, "Shape") == 0) {
    const gx_tensor *x = IN(0);
    int64_t b = gx_attr_i(nd->node, "start", 0), e = gx_attr_i(nd->node, "end", x->rank);
    if (b < 0) b += x->rank;
    if (e < 0) e += x->rank;
    if (e > x->rank) e = x->rank;
    if (!gx_alloc(y, true, 1, (int64_t[]){e > b ? e - b : 0})) return oom(r, k);
    for (int64_t d = b; d < e; d++) y->i[d - b] = x->dims[d];
    return true;
  }
  if (strcmp(op, "ConstantOfShape") == 0) {
    int64_t dims[GX_MAX_DIMS];
    int n = gx_ints_in(r, k, 0, dims, GX_MAX_DIMS);
    const onnx_attr *a = gx_attr(nd->node, "value");
    gx_tensor v = {.rank = -1};
    if (a && a->type == ONNX_ATTR_TENSOR && !from_tensor(&v, a->t)) return gx_fail(r, k, "bad value");
    bool is_int = v.rank >= 0 && v.is_int;
    if (n < 0 || !gx_alloc(y, is_int, n, dims)) {
      gx_free(&v);
      return gx_fail(r, k, "bad shape or out of memory");
    }
    for (int64_t e = 0; e < y->n; e++)
      if (is_int) y->i[e] = v.i[0];
      else y->f[e] = v.rank >= 0 ? v.f[0] : 0.0f;
    gx_free(&v);
    return true;
  }
  if (strcmp(op, "Cast") == 0) {
    const gx_tensor *x = IN(0);
    int64_t to = gx_attr_i(nd->node, "to", ONNX_FLOAT);
    bool is_int = to != ONNX_FLOAT && to != ONNX_DOUBLE && to != ONNX_FLOAT16 && to != ONNX_BFLOAT16;
    if (!gx_alloc(y, is_int, x->rank, x->dims)) return oom(r, k);
    for (int64_t e = 0; e < x->n; e++)
      if (is_int) y->i[e] = x->is_int ? (to == ONNX_BOOL ? x->i[e] != 0 : x->i[e]) : (int64_t)x->f[e];
      else y->f[e] = x->is_int ? (float)x->i[e] : x->f[e];
    return true;
  }
  if (strcmp(op, "Range") == 0) {
    const gx_tensor *a = IN(0), *b = IN(1), *c = IN(2);
    if (!a->is_int || !b->is_int || !c->is_int || !c->i[0]) return gx_fail(r, k, "expected integer start, limit, delta");
    int64_t n = (b->i[0] - a->i[0] + c->i[0] - (c->i[0] > 0 ? 1 : -1)) / c->i[0];
    if (!gx_alloc(y, true, 1, (int64_t[]){n > 0 ? n : 0})) return oom(r, k);
    for (int64_t e = 0; e < y->n; e++) y->i[e] = a->i[0] + e * c->i[0];
    return true;
  }
  return gx_fail(r, k, "internal: not a shape op");
}

/* Expand and Where: broadcasting copies. */
static bool bcast_copy(gx_run *r, int k) {
  const gx_node *nd = &r->g->nodes[k];
  gx_tensor *y = OUT(0);
  int rank;
  int64_t dims[GX_MAX_DIMS];
  if (strcmp(nd->node->op_type, "Expand") == 0) {
    const gx_tensor *x = IN(0);
    gx_tensor s = {.rank = 0};
    int n = gx_ints_in(r, k, 1, s.dims, GX_MAX_DIMS);
    s.rank = n;
    if (n < 0 || !gx_bcast_shape(x, &s, &rank, dims)) return gx_fail(r, k, "the shape does not broadcast");
    if (!gx_alloc(y, x->is_int, rank, dims)) return oom(r, k);
    for (int64_t e = 0; e < y->n; e++) {
      int64_t s_ = gx_bcast_index(x, rank, dims, e);
      if (x->is_int) y->i[e] = x->i[s_];
      else y->f[e] = x->f[s_];
    }
    return true;
  }
  const gx_tensor *c = IN(0), *a = IN(1), *b = IN(2);
  int r1;
  int64_t d1[GX_MAX_DIMS];
  gx_tensor tmp = {.rank = 0};
  if (!gx_bcast_shape(a, b, &r1, d1)) return gx_fail(r, k, "the inputs do not broadcast");
  tmp.rank = r1;
  memcpy(tmp.dims, d1, sizeof d1);
  if (!gx_bcast_shape(c, &tmp, &rank, dims)) return gx_fail(r, k, "the condition does not broadcast");
  bool is_int = a->is_int && b->is_int;
  if (!gx_alloc(y, is_int, rank, dims)) return oom(r, k);
  for (int64_t e = 0; e < y->n; e++) {
    int64_t ic = gx_bcast_index(c, rank, dims, e);
    bool cond = c->is_int ? c->i[ic] != 0 : c->f[ic] != 0;
    const gx_tensor *src = cond ? a : b;
    int64_t s = gx_bcast_index(src, rank, dims, e);
    if (is_int) y->i[e] = src->i[s];
    else y->f[e] = src->is_int ? (float)src->i[s] : src->f[s];
  }
  return true;
}

bool gx_fwd(gx_run *r, int k) {
  const gx_node *nd = &r->g->nodes[k];
  const char *op = nd->node->op_type;
  for (int i = 0; i < nd->n_in; i++)
    if (nd->in[i] >= 0 && r->v[nd->in[i]].rank < 0) return gx_fail(r, k, "input %d has no value", i);
  if (!strcmp(op, "Add") || !strcmp(op, "Sub") || !strcmp(op, "Mul") || !strcmp(op, "Div") || !strcmp(op, "Pow") ||
      !strcmp(op, "Equal"))
    return binary(r, k);
  if (!strcmp(op, "Relu") || !strcmp(op, "Erf") || !strcmp(op, "Tanh") || !strcmp(op, "Sigmoid") ||
      !strcmp(op, "Sqrt") || !strcmp(op, "Neg") || !strcmp(op, "Exp") || !strcmp(op, "Gelu")) {
    if (!strcmp(op, "Gelu") && gx_attr(nd->node, "approximate") && strcmp(gx_attr(nd->node, "approximate")->s, "none"))
      return gx_fail(r, k, "approximate=%s: only the exact (erf) GELU runs", gx_attr(nd->node, "approximate")->s);
    return unary(r, k);
  }
  if (!strcmp(op, "MatMul")) return matmul(r, k);
  if (!strcmp(op, "Gemm")) return gemm(r, k);
  if (!strcmp(op, "Softmax")) return softmax(r, k);
  if (!strcmp(op, "ReduceMean") || !strcmp(op, "ReduceSum")) return reduce(r, k);
  if (!strcmp(op, "Transpose")) return transpose(r, k);
  if (!strcmp(op, "Reshape") || !strcmp(op, "Flatten") || !strcmp(op, "Unsqueeze") || !strcmp(op, "Squeeze") ||
      !strcmp(op, "Identity"))
    return reshape_like(r, k);
  if (!strcmp(op, "Dropout")) return dropout(r, k);
  if (!strcmp(op, "Concat")) return concat(r, k);
  if (!strcmp(op, "Split")) return split(r, k);
  if (!strcmp(op, "Slice")) return slice(r, k);
  if (!strcmp(op, "Gather")) return gather(r, k);
  if (!strcmp(op, "Constant")) return constant(r, k);
  if (!strcmp(op, "Shape") || !strcmp(op, "ConstantOfShape") || !strcmp(op, "Cast") || !strcmp(op, "Range"))
    return shape_ops(r, k);
  if (!strcmp(op, "Expand") || !strcmp(op, "Where")) return bcast_copy(r, k);
  return gx_fwd_nn(r, k);
}
