/* The ONNX import session's small readers (model layer, core library): its error line (ox_fail, naming the file
 * and node), a node's inputs and outputs, its attributes, and element counts and the dimension limits. The
 * importer (onnx_import.c), the op table (onnx_ops.c) and shape inference (onnx_shape*.c) all call them; they
 * call none of those files, so the importer and the op table call one way (onnx_import.c -> onnx_ops.c). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "model/onnx_internal.h"

ap_status ox_fail(const ox *x, ap_status st, const char *fmt, ...) {
  char msg[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ctx_fail(x->ctx, st, "%s: node '%.200s' (op_type %.64s): %s", x->file, x->node_name, x->node->op_type, msg);
}

ox_val *ox_in(const ox *x, int i) { return i < x->n_in && x->in[i] >= 0 ? &x->vals[x->in[i]] : NULL; }
ox_val *ox_out(const ox *x, int i) { return i < x->n_out && x->out[i] >= 0 ? &x->vals[x->out[i]] : NULL; }

const onnx_attr *ox_attr(const onnx_node *n, const char *name) {
  for (int i = 0; i < n->n_attrs; i++)
    if (n->attrs[i].name && strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
  return NULL;
}

int64_t ox_attr_i(const onnx_node *n, const char *name, int64_t def) {
  const onnx_attr *a = ox_attr(n, name);
  return a && a->type == ONNX_ATTR_INT ? a->i : def;
}

double ox_attr_f(const onnx_node *n, const char *name, double def) {
  const onnx_attr *a = ox_attr(n, name);
  return a && a->type == ONNX_ATTR_FLOAT ? a->f : def;
}

int64_t ox_numel(const ox_val *v) {
  if (!v || v->n_dims < 0) return -1;
  int64_t n = 1;
  for (int i = 0; i < v->n_dims; i++)
    if (v->dims[i] < 0 || __builtin_mul_overflow(n, v->dims[i], &n)) return -1;
  return n;
}

bool ox_dims_ok(int n, const int64_t *dims) {
  double p = 1;
  for (int i = 0; i < n; i++) {
    if (dims[i] < 0 || dims[i] > 1000000000000LL) return false;
    p *= dims[i] > 0 ? (double)dims[i] : 1.0;
  }
  return p <= 1e15;
}
