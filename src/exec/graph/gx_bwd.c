/* The graph runtime's backward pass (exec layer; gx.h): for each differentiable op type of gx_fwd.c, the
 * gradients of its float inputs from its outputs' gradients, accumulated (a value read by several ops sums
 * their contributions). Broadcast operands take the sum over the broadcast dims. Integer values (shapes,
 * indices, masks) carry no gradient; Shape, Constant, ConstantOfShape, Equal and Range have none. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/graph/gx_ops.h"

#define IN(i) (&r->v[nd->in[i]])
#define OUT(i) (&r->v[nd->out[i]])
#define HAS(i) (nd->n_in > (i) && nd->in[i] >= 0)
#define DIFF(i) (HAS(i) && !IN(i)->is_int)

static bool oom(gx_run *r, int k) { return gx_fail(r, k, "out of memory"); }

static bool binary(gx_run *r, int k, const float *dy) {
  const gx_node *nd = &r->g->nodes[k];
  const char op = nd->node->op_type[0];
  const gx_tensor *a = IN(0), *b = IN(1), *y = OUT(0);
  float *da = DIFF(0) ? gx_grad(r, nd->in[0]) : NULL, *db = DIFF(1) && op != 'P' ? gx_grad(r, nd->in[1]) : NULL;
  if ((DIFF(0) && !da) || (DIFF(1) && op != 'P' && !db)) return oom(r, k);
  bool same = a->n == y->n && b->n == y->n;
  for (int64_t e = 0; e < y->n; e++) {
    int64_t ia = same ? e : gx_bcast_index(a, y->rank, y->dims, e), ib = same ? e : gx_bcast_index(b, y->rank, y->dims, e);
    float x = a->is_int ? (float)a->i[ia] : a->f[ia], z = b->is_int ? (float)b->i[ib] : b->f[ib], g = dy[e];
    switch (op) {
    case 'A':
      if (da) da[ia] += g;
      if (db) db[ib] += g;
      break;
    case 'S':
      if (da) da[ia] += g;
      if (db) db[ib] -= g;
      break;
    case 'M':
      if (da) da[ia] += g * z;
      if (db) db[ib] += g * x;
      break;
    case 'D':
      if (da) da[ia] += g / z;
      if (db) db[ib] -= g * x / (z * z);
      break;
    default: /* Pow: the exponent is a constant of the graph */
      if (da) da[ia] += g * (z == 2.0f ? 2.0f * x : z * powf(x, z - 1.0f));
      break;
    }
  }
  return true;
}

static bool unary(gx_run *r, int k, const float *dy) {
  const gx_node *nd = &r->g->nodes[k];
  const char *op = nd->node->op_type;
  const gx_tensor *x = IN(0), *y = OUT(0);
  float *dx = gx_grad(r, nd->in[0]);
  if (!dx) return oom(r, k);
  /* The op is looked up once, not per element (the last case: Gelu). */
  static const char *const names[] = {"Relu", "Erf", "Tanh", "Sigmoid", "Sqrt", "Neg", "Exp"};
  int which = -1;
  for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++)
    if (!strcmp(op, names[i])) which = i;
  for (int64_t e = 0; e < x->n; e++) {
    float v = x->f[e], o = y->f[e], d;
    if (which == 0) d = v > 0 ? 1.0f : 0.0f;
    else if (which == 1) d = 1.12837916709551257f * expf(-v * v);
    else if (which == 2) d = 1.0f - o * o;
    else if (which == 3) d = o * (1.0f - o);
    else if (which == 4) d = 0.5f / o;
    else if (which == 5) d = -1.0f;
    else if (which == 6) d = o;
    else d = 0.5f * (1.0f + erff(v * (float)0.70710678118654752440)) + v * expf(-0.5f * v * v) * (float)(0.5 * 1.12837916709551257390 * 0.70710678118654752440);
    dx[e] += dy[e] * d;
  }
  return true;
}

static bool matmul(gx_run *r, int k, const float *dy) {
  const gx_node *nd = &r->g->nodes[k];
  const gx_tensor *a = IN(0), *b = IN(1), *y = OUT(0);
  int64_t M = a->dims[a->rank - 2], K = a->dims[a->rank - 1], N = b->dims[b->rank - 1];
  gx_tensor ab = *a, bb = *b;
  ab.rank -= 2, bb.rank -= 2;
  int rank = y->rank - 2;
  int64_t nb = 1;
  for (int d = 0; d < rank; d++) nb *= y->dims[d];
  float *da = gx_grad(r, nd->in[0]), *db = gx_grad(r, nd->in[1]);
  if (!da || !db) return oom(r, k);
  if (b->n == K * N && a->n == nb * M * K) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(nb * M), (int)K, (int)N, 1.0f, dy, (int)N, b->f, (int)N,
                1.0f, da, (int)K);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)K, (int)N, (int)(nb * M), 1.0f, a->f, (int)K, dy, (int)N,
                1.0f, db, (int)N);
    return true;
  }
  for (int64_t t = 0; t < nb; t++) {
    int64_t ia = gx_bcast_index(&ab, rank, y->dims, t), ib = gx_bcast_index(&bb, rank, y->dims, t);
    const float *g = dy + t * M * N;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)K, (int)N, 1.0f, g, (int)N, b->f + ib * K * N,
                (int)N, 1.0f, da + ia * M * K, (int)K);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)K, (int)N, (int)M, 1.0f, a->f + ia * M * K, (int)K, g,
                (int)N, 1.0f, db + ib * K * N, (int)N);
  }
  return true;
}

static bool gemm(gx_run *r, int k, const float *dy) {
  const gx_node *nd = &r->g->nodes[k];
  const gx_tensor *a = IN(0), *b = IN(1), *y = OUT(0);
  bool ta = gx_attr_i(nd->node, "transA", 0), tb = gx_attr_i(nd->node, "transB", 0);
  float alpha = (float)gx_attr_f(nd->node, "alpha", 1.0), beta = (float)gx_attr_f(nd->node, "beta", 1.0);
  int64_t M = y->dims[0], N = y->dims[1], K = ta ? a->dims[0] : a->dims[1];
  float *da = gx_grad(r, nd->in[0]), *db = gx_grad(r, nd->in[1]);
  if (!da || !db) return oom(r, k);
  /* Y = α·op(A)·op(B): d op(A) = α·dY·op(B)ᵀ, d op(B) = α·op(A)ᵀ·dY, stored transposed where op transposes. */
  if (!ta)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, tb ? CblasNoTrans : CblasTrans, (int)M, (int)K, (int)N, alpha, dy, (int)N,
                b->f, (int)b->dims[1], 1.0f, da, (int)K);
  else
    cblas_sgemm(CblasRowMajor, tb ? CblasTrans : CblasNoTrans, CblasTrans, (int)K, (int)M, (int)N, alpha, b->f,
                (int)b->dims[1], dy, (int)N, 1.0f, da, (int)M);
  if (!tb)
    cblas_sgemm(CblasRowMajor, ta ? CblasNoTrans : CblasTrans, CblasNoTrans, (int)K, (int)N, (int)M, alpha, a->f,
                (int)a->dims[1], dy, (int)N, 1.0f, db, (int)N);
  else
    cblas_sgemm(CblasRowMajor, CblasTrans, ta ? CblasTrans : CblasNoTrans, (int)N, (int)K, (int)M, alpha, dy, (int)N,
                a->f, (int)a->dims[1], 1.0f, db, (int)K);
  if (DIFF(2) && beta != 0.0f) {
    const gx_tensor *c = IN(2);
    float *dc = gx_grad(r, nd->in[2]);
    if (!dc) return oom(r, k);
    for (int64_t e = 0; e < M * N; e++) dc[gx_bcast_index(c, 2, y->dims, e)] += beta * dy[e];
  }
  return true;
}

static bool softmax(gx_run *r, int k, const float *dy) {
  const gx_node *nd = &r->g->nodes[k];
  const gx_tensor *y = OUT(0);
  float *dx = gx_grad(r, nd->in[0]);
  if (!dx) return oom(r, k);
  int64_t outer, len, inner;
  gx_softmax_span(r, nd, IN(0), &outer, &len, &inner);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      int64_t b = o * len * inner + in;
      double s = 0;
      for (int64_t j = 0; j < len; j++) s += (double)dy[b + j * inner] * y->f[b + j * inner];
      for (int64_t j = 0; j < len; j++) dx[b + j * inner] += y->f[b + j * inner] * (float)(dy[b + j * inner] - s);
    }
  return true;
}

static bool reduce(gx_run *r, int k, const float *dy) {
  const gx_node *nd = &r->g->nodes[k];
  const gx_tensor *x = IN(0);
  bool mask[GX_MAX_DIMS];
  gx_reduce_axes(r, k, x, mask);
  gx_tensor yk = {.rank = x->rank};
  double cnt = 1;
  for (int d = 0; d < x->rank; d++) {
    yk.dims[d] = mask[d] ? 1 : x->dims[d];
    if (mask[d]) cnt *= (double)x->dims[d];
  }
  float *dx = gx_grad(r, nd->in[0]);
  if (!dx) return oom(r, k);
  float sc = strcmp(nd->node->op_type, "ReduceMean") == 0 ? (float)(1.0 / cnt) : 1.0f;
  for (int64_t e = 0; e < x->n; e++) dx[e] += dy[gx_bcast_index(&yk, x->rank, x->dims, e)] * sc;
  return true;
}

static bool transpose(gx_run *r, int k, const float *dy) {
  const gx_node *nd = &r->g->nodes[k];
  const gx_tensor *x = IN(0), *y = OUT(0);
  int64_t perm[GX_MAX_DIMS], st[GX_MAX_DIMS], c[GX_MAX_DIMS];
  if (gx_ints(r, k, "perm", 99, perm, GX_MAX_DIMS) < 0)
    for (int d = 0; d < x->rank; d++) perm[d] = x->rank - 1 - d;
  float *dx = gx_grad(r, nd->in[0]);
  if (!dx) return oom(r, k);
  st[x->rank - 1] = 1;
  for (int d = x->rank - 2; d >= 0; d--) st[d] = st[d + 1] * x->dims[d + 1];
  for (int64_t e = 0; e < y->n; e++) {
    int64_t q = e, s = 0;
    for (int d = y->rank - 1; d >= 0; d--) c[d] = q % y->dims[d], q /= y->dims[d];
    for (int d = 0; d < y->rank; d++) s += c[d] * st[perm[d]];
    dx[s] += dy[e];
  }
  return true;
}

static bool concat(gx_run *r, int k, const float *dy) {
  const gx_node *nd = &r->g->nodes[k];
  const gx_tensor *y = OUT(0);
  int ax = gx_axis(gx_attr_i(nd->node, "axis", 0), y->rank);
  int64_t outer = 1, inner = 1, off = 0;
  for (int d = 0; d < ax; d++) outer *= y->dims[d];
  for (int d = ax + 1; d < y->rank; d++) inner *= y->dims[d];
  for (int i = 0; i < nd->n_in; i++) {
    int64_t w = IN(i)->dims[ax] * inner;
    if (DIFF(i)) {
      float *dx = gx_grad(r, nd->in[i]);
      if (!dx) return oom(r, k);
      for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < w; j++) dx[o * w + j] += dy[o * y->dims[ax] * inner + off + j];
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
  for (int d = 0; d < ax; d++) outer *= x->dims[d];
  for (int d = ax + 1; d < x->rank; d++) inner *= x->dims[d];
  float *dx = gx_grad(r, nd->in[0]);
  if (!dx) return oom(r, k);
  for (int i = 0; i < n; i++) {
    int64_t w = sz[i] * inner;
    const float *g = nd->out[i] >= 0 ? r->grad[nd->out[i]] : NULL;
    if (g)
      for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < w; j++) dx[o * x->dims[ax] * inner + off + j] += g[o * w + j];
    off += w;
  }
  return true;
}

static bool slice(gx_run *r, int k, const float *dy) {
  const gx_node *nd = &r->g->nodes[k];
  const gx_tensor *x = IN(0), *y = OUT(0);
  int64_t start[GX_MAX_DIMS], step[GX_MAX_DIMS], dims[GX_MAX_DIMS];
  gx_slice_params(r, k, x, start, step, dims);
  float *dx = gx_grad(r, nd->in[0]);
  if (!dx) return oom(r, k);
  for (int64_t e = 0; e < y->n; e++) dx[gx_slice_index(x, start, step, dims, e)] += dy[e];
  return true;
}

static bool gather(gx_run *r, int k, const float *dy) {
  const gx_node *nd = &r->g->nodes[k];
  const gx_tensor *x = IN(0), *ix = IN(1);
  int ax = gx_axis(gx_attr_i(nd->node, "axis", 0), x->rank);
  int64_t outer = 1, inner = 1, D = x->dims[ax];
  for (int d = 0; d < ax; d++) outer *= x->dims[d];
  for (int d = ax + 1; d < x->rank; d++) inner *= x->dims[d];
  float *dx = gx_grad(r, nd->in[0]);
  if (!dx) return oom(r, k);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < ix->n; j++) {
      int64_t id = ix->is_int ? ix->i[j] : (int64_t)ix->f[j];
      if (id < 0) id += D;
      for (int64_t in = 0; in < inner; in++) dx[(o * D + id) * inner + in] += dy[(o * ix->n + j) * inner + in];
    }
  return true;
}

static bool bcast_back(gx_run *r, int k, const float *dy) {
  const gx_node *nd = &r->g->nodes[k];
  const gx_tensor *y = OUT(0);
  if (strcmp(nd->node->op_type, "Expand") == 0) {
    float *dx = gx_grad(r, nd->in[0]);
    if (!dx) return oom(r, k);
    for (int64_t e = 0; e < y->n; e++) dx[gx_bcast_index(IN(0), y->rank, y->dims, e)] += dy[e];
    return true;
  }
  const gx_tensor *c = IN(0);
  float *da = DIFF(1) ? gx_grad(r, nd->in[1]) : NULL, *db = DIFF(2) ? gx_grad(r, nd->in[2]) : NULL;
  if ((DIFF(1) && !da) || (DIFF(2) && !db)) return oom(r, k);
  for (int64_t e = 0; e < y->n; e++) {
    int64_t ic = gx_bcast_index(c, y->rank, y->dims, e);
    bool cond = c->is_int ? c->i[ic] != 0 : c->f[ic] != 0;
    float *d = cond ? da : db;
    if (d) d[gx_bcast_index(cond ? IN(1) : IN(2), y->rank, y->dims, e)] += dy[e];
  }
  return true;
}

bool gx_bwd(gx_run *r, int k) {
  const gx_node *nd = &r->g->nodes[k];
  const char *op = nd->node->op_type;
  bool any = false;
  for (int o = 0; o < nd->n_out; o++) any = any || (nd->out[o] >= 0 && r->grad[nd->out[o]]);
  if (!any || !strcmp(op, "Shape") || !strcmp(op, "Constant") || !strcmp(op, "ConstantOfShape") ||
      !strcmp(op, "Equal") || !strcmp(op, "Range"))
    return true;
  if (OUT(0)->is_int) return true; /* integer results (a Cast to int64, shape arithmetic) carry no gradient */
  const float *dy = r->grad[nd->out[0]];
  if (!strcmp(op, "Split")) return split(r, k);
  if (!dy) return true;
  if (!strcmp(op, "Add") || !strcmp(op, "Sub") || !strcmp(op, "Mul") || !strcmp(op, "Div") || !strcmp(op, "Pow"))
    return binary(r, k, dy);
  if (!strcmp(op, "Relu") || !strcmp(op, "Erf") || !strcmp(op, "Tanh") || !strcmp(op, "Sigmoid") ||
      !strcmp(op, "Sqrt") || !strcmp(op, "Neg") || !strcmp(op, "Exp") || !strcmp(op, "Gelu"))
    return unary(r, k, dy);
  if (!strcmp(op, "MatMul")) return matmul(r, k, dy);
  if (!strcmp(op, "Gemm")) return gemm(r, k, dy);
  if (!strcmp(op, "Softmax")) return softmax(r, k, dy);
  if (!strcmp(op, "ReduceMean") || !strcmp(op, "ReduceSum")) return reduce(r, k, dy);
  if (!strcmp(op, "Transpose")) return transpose(r, k, dy);
  if (!strcmp(op, "Reshape") || !strcmp(op, "Flatten") || !strcmp(op, "Unsqueeze") || !strcmp(op, "Squeeze") ||
      !strcmp(op, "Identity") || !strcmp(op, "Dropout") || !strcmp(op, "Cast")) {
    if (IN(0)->is_int) return true;
    float *dx = gx_grad(r, nd->in[0]);
    if (!dx) return oom(r, k);
    for (int64_t e = 0; e < IN(0)->n; e++) dx[e] += dy[e];
    return true;
  }
  if (!strcmp(op, "Concat")) return concat(r, k, dy);
  if (!strcmp(op, "Slice")) return slice(r, k, dy);
  if (!strcmp(op, "Gather")) return IN(0)->is_int ? true : gather(r, k, dy);
  if (!strcmp(op, "Expand") || !strcmp(op, "Where")) return bcast_back(r, k, dy);
  return gx_bwd_nn(r, k);
}
