/* The graph runtime's tensors (exec layer; gx.h): allocation, numpy broadcasting (onnx/docs/Broadcasting.md,
 * multidirectional), node attributes, the one-line failure that names the node, and the attribute-or-input
 * lists and index maps that the forward, backward and sharded passes share (gx_ops.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/graph/gx_ops.h"

bool gx_alloc(gx_tensor *t, bool is_int, int rank, const int64_t *dims) {
  memset(t, 0, sizeof *t);
  if (rank < 0 || rank > GX_MAX_DIMS) return false;
  t->is_int = is_int;
  t->rank = rank;
  t->n = 1;
  for (int d = 0; d < rank; d++) {
    t->dims[d] = dims[d];
    t->n *= dims[d];
  }
  size_t n = (size_t)(t->n ? t->n : 1);
  if (is_int) t->i = calloc(n, sizeof *t->i);
  else t->f = calloc(n, sizeof *t->f);
  return is_int ? t->i != NULL : t->f != NULL;
}

void gx_free(gx_tensor *t) {
  if (!t) return;
  if (!t->view) {
    free(t->f);
    free(t->i);
  }
  t->f = NULL;
  t->i = NULL;
  t->rank = -1;
}

bool gx_bcast_shape(const gx_tensor *a, const gx_tensor *b, int *rank, int64_t *dims) {
  int r = a->rank > b->rank ? a->rank : b->rank;
  for (int d = 0; d < r; d++) {
    int da = d - (r - a->rank), db = d - (r - b->rank);
    int64_t x = da >= 0 ? a->dims[da] : 1, y = db >= 0 ? b->dims[db] : 1;
    if (x != y && x != 1 && y != 1) return false;
    dims[d] = x == 1 ? y : x;
  }
  *rank = r;
  return true;
}

int64_t gx_bcast_index(const gx_tensor *t, int rank, const int64_t *dims, int64_t k) {
  /* Fast path (the same index): a tensor whose dims are the trailing dims of the broadcast shape (a bias [N] over
   * [M, N], a scalar), whose element is k modulo the product of its dims (not t->n: matmul passes its operands
   * with the two matrix dims cut from rank, n unchanged). */
  bool suffix = t->rank <= rank;
  int64_t size = 1;
  for (int d = 0; suffix && d < t->rank; d++) suffix = t->dims[d] == dims[rank - t->rank + d], size *= t->dims[d];
  if (suffix) return size > 0 ? k % size : 0;
  int64_t idx = 0, stride = 1;
  for (int d = rank - 1; d >= 0; d--) {
    int64_t c = k % dims[d];
    k /= dims[d];
    int td = d - (rank - t->rank);
    if (td < 0) continue;
    if (t->dims[td] != 1) idx += c * stride;
    stride *= t->dims[td];
  }
  return idx;
}

const onnx_attr *gx_attr(const onnx_node *n, const char *name) {
  for (int i = 0; i < n->n_attrs; i++)
    if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
  return NULL;
}

int64_t gx_attr_i(const onnx_node *n, const char *name, int64_t def) {
  const onnx_attr *a = gx_attr(n, name);
  return a && a->type == ONNX_ATTR_INT ? a->i : def;
}

double gx_attr_f(const onnx_node *n, const char *name, double def) {
  const onnx_attr *a = gx_attr(n, name);
  return a && a->type == ONNX_ATTR_FLOAT ? a->f : def;
}

bool gx_fail(gx_run *r, int k, const char *fmt, ...) {
  char msg[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(r->err, sizeof r->err, "node '%.120s' (op_type %.30s): %.200s", r->g->nodes[k].name,
           r->g->nodes[k].node->op_type, msg);
  return false;
}

float *gx_grad(gx_run *r, int v) {
  if (v < 0) return NULL;
  if (!r->grad[v]) r->grad[v] = calloc((size_t)(r->v[v].n ? r->v[v].n : 1), sizeof(float));
  return r->grad[v];
}

#define HAS(i) (nd->n_in > (i) && nd->in[i] >= 0)
#define IN(i) (&r->v[nd->in[i]])

int gx_axis(int64_t a, int rank) { return (int)(a < 0 ? a + rank : a); }

/* The integer list of input i (shape-like inputs), into out (at most GX_MAX_DIMS·8 values); -1 when absent. */
int gx_ints_in(gx_run *r, int k, int i, int64_t *out, int cap) {
  const gx_node *nd = &r->g->nodes[k];
  if (!HAS(i)) return -1;
  const gx_tensor *t = IN(i);
  if (t->n > cap) return -1;
  for (int64_t j = 0; j < t->n; j++) out[j] = t->is_int ? t->i[j] : (int64_t)t->f[j];
  return (int)t->n;
}

/* The ints attribute name, else the values of input i (ONNX moved axes, split, pads from attributes to inputs
 * at opset 13). */
int gx_ints(gx_run *r, int k, const char *name, int i, int64_t *out, int cap) {
  const onnx_attr *a = gx_attr(r->g->nodes[k].node, name);
  if (a && a->type == ONNX_ATTR_INTS) {
    int n = a->n_ints < cap ? a->n_ints : cap;
    memcpy(out, a->ints, sizeof *out * (size_t)n);
    return n;
  }
  return gx_ints_in(r, k, i, out, cap);
}


/* Softmax over axis (opset >= 13) or over every dim from axis on (opset < 13, the coerced 2-D form). */
void gx_softmax_span(const gx_run *r, const gx_node *nd, const gx_tensor *x, int64_t *outer, int64_t *len,
                     int64_t *inner) {
  int64_t def = r->g->m->opset >= 13 ? -1 : 1;
  int ax = gx_axis(gx_attr_i(nd->node, "axis", def), x->rank);
  *outer = 1, *len = 1, *inner = 1;
  for (int d = 0; d < ax; d++) *outer *= x->dims[d];
  if (r->g->m->opset >= 13) {
    *len = x->dims[ax];
    for (int d = ax + 1; d < x->rank; d++) *inner *= x->dims[d];
  } else {
    for (int d = ax; d < x->rank; d++) *len *= x->dims[d];
  }
}


/* Reduction axes of ReduceMean/ReduceSum into mask; returns false when an axis is out of range. */
bool gx_reduce_axes(gx_run *r, int k, const gx_tensor *x, bool *mask) {
  int64_t ax[GX_MAX_DIMS * 2];
  int n = gx_ints(r, k, "axes", 1, ax, GX_MAX_DIMS * 2);
  for (int d = 0; d < x->rank; d++) mask[d] = n <= 0;
  for (int i = 0; i < n; i++) {
    int d = gx_axis(ax[i], x->rank);
    if (d < 0 || d >= x->rank) return false;
    mask[d] = true;
  }
  return true;
}


/* Split's part sizes along its axis (the split attribute or input, else equal parts). */
int gx_split_sizes(gx_run *r, int k, const gx_tensor *x, int ax, int64_t *sz) {
  const gx_node *nd = &r->g->nodes[k];
  int n = gx_ints(r, k, "split", 1, sz, GX_MAX_IO);
  if (n <= 0) {
    n = nd->n_out;
    for (int i = 0; i < n; i++) sz[i] = x->dims[ax] / n;
  }
  return n;
}


/* Slice's start and step per dim of x (the inputs of opset >= 10, clamped as the reference does). */
bool gx_slice_params(gx_run *r, int k, const gx_tensor *x, int64_t *start, int64_t *step, int64_t *dims) {
  int64_t st[GX_MAX_DIMS], en[GX_MAX_DIMS], ax[GX_MAX_DIMS], sp[GX_MAX_DIMS];
  int n = gx_ints(r, k, "starts", 1, st, GX_MAX_DIMS), ne = gx_ints(r, k, "ends", 2, en, GX_MAX_DIMS);
  int na = gx_ints(r, k, "axes", 3, ax, GX_MAX_DIMS), ns = gx_ints_in(r, k, 4, sp, GX_MAX_DIMS);
  if (n < 0 || ne != n) return false;
  for (int d = 0; d < x->rank; d++) start[d] = 0, step[d] = 1, dims[d] = x->dims[d];
  for (int i = 0; i < n; i++) {
    int d = na > 0 ? gx_axis(ax[i], x->rank) : i;
    int64_t s = ns > 0 ? sp[i] : 1, D = x->dims[d], b = st[i], e = en[i];
    if (s == 0 || d < 0 || d >= x->rank) return false;
    if (b < 0) b += D;
    if (e < 0) e += D;
    if (s > 0) {
      b = b < 0 ? 0 : b > D ? D : b;
      e = e < 0 ? 0 : e > D ? D : e;
      dims[d] = e > b ? (e - b + s - 1) / s : 0;
    } else {
      b = b < 0 ? -1 : b > D - 1 ? D - 1 : b;
      e = e < -1 ? -1 : e > D - 1 ? D - 1 : e;
      dims[d] = b > e ? (b - e - s - 1) / -s : 0;
    }
    start[d] = b, step[d] = s;
  }
  return true;
}

/* The flat index into x of element e of the slice. */
int64_t gx_slice_index(const gx_tensor *x, const int64_t *start, const int64_t *step, const int64_t *dims, int64_t e) {
  int64_t s = 0, stride = 1;
  for (int d = x->rank - 1; d >= 0; d--) {
    int64_t c = e % dims[d];
    e /= dims[d];
    s += (start[d] + c * step[d]) * stride;
    stride *= x->dims[d];
  }
  return s;
}

