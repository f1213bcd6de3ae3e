/* The graph runtime's tensors (exec layer; gx.h): allocation, numpy broadcasting (onnx/docs/Broadcasting.md,
 * multidirectional), node attributes and the one-line failure that names the node. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/graph/gx.h"

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
