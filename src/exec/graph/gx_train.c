/* One micro-batch through the graph (exec layer; gx.h): the forward pass in node order (torch.onnx.export and
 * every ONNX writer emit nodes topologically, as the standard requires), the loss on the graph's output, the
 * backward pass in reverse node order, and the weights' gradients into the flat buffer. Every value stays
 * alive until the backward pass (no recomputation): the graphs this runtime trains are small. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/graph/gx.h"
#include "exec/graph/gx_shard.h"

void gx_run_free(gx_run *r) {
  if (r->v)
    for (int v = 0; v < r->g->n_vals; v++) gx_free(&r->v[v]);
  if (r->grad)
    for (int v = 0; v < r->g->n_vals; v++) free(r->grad[v]);
  free(r->v);
  free(r->grad);
  r->v = NULL;
  r->grad = NULL;
}

/* Cross entropy of the output's last axis against class ids (mean-free: the sum over rows), or the squared
 * error summed over elements; writes dy = d(loss sum · scale)/dy. */
double gx_loss(gx_run *r, const gx_tensor *y, const gx_tensor *lab, int loss, double scale, float *dy) {
  if (loss == GX_LOSS_MSE) {
    if (lab->n != y->n) {
      snprintf(r->err, sizeof r->err, "labels: %lld values for an output of %lld (mse takes the output's shape)",
               (long long)lab->n, (long long)y->n);
      return NAN;
    }
    double s = 0;
    for (int64_t e = 0; e < y->n; e++) {
      double d = (double)y->f[e] - (lab->is_int ? (double)lab->i[e] : lab->f[e]);
      s += d * d;
      dy[e] = (float)(2.0 * d * scale);
    }
    return s;
  }
  int64_t C = y->rank ? y->dims[y->rank - 1] : 1, rows = C ? y->n / C : 0;
  if (lab->n != rows) {
    snprintf(r->err, sizeof r->err, "labels: %lld values for %lld rows of the output (cross-entropy takes one class id "
             "per row of the output's last axis)", (long long)lab->n, (long long)rows);
    return NAN;
  }
  double s = 0;
  for (int64_t i = 0; i < rows; i++) {
    const float *p = y->f + i * C;
    int64_t c = lab->is_int ? lab->i[i] : (int64_t)lab->f[i];
    if (c < 0 || c >= C) {
      snprintf(r->err, sizeof r->err, "labels: class id %lld outside [0, %lld)", (long long)c, (long long)C);
      return NAN;
    }
    float mx = -INFINITY;
    for (int64_t j = 0; j < C; j++) mx = p[j] > mx ? p[j] : mx;
    double z = 0;
    for (int64_t j = 0; j < C; j++) z += exp((double)(p[j] - mx));
    s += log(z) - (double)(p[c] - mx);
    for (int64_t j = 0; j < C; j++) dy[i * C + j] = (float)((exp((double)(p[j] - mx)) / z - (j == c)) * scale);
  }
  return s;
}

double gx_step(gx_run *r, const gx_tensor *inputs, const gx_tensor *labels, int loss, double scale) {
  const gx_graph *g = r->g;
  r->err[0] = '\0';
  r->v = calloc((size_t)g->n_vals, sizeof *r->v);
  r->grad = calloc((size_t)g->n_vals, sizeof *r->grad);
  if (!r->v || !r->grad) {
    snprintf(r->err, sizeof r->err, "out of memory");
    gx_run_free(r);
    return NAN;
  }
  for (int v = 0; v < g->n_vals; v++) {
    r->v[v].rank = -1;
    if (g->consts[v].rank < 0) continue;
    r->v[v] = g->consts[v];
    r->v[v].view = true;
    if (g->param_of[v] >= 0) r->v[v].f = (float *)r->w + g->params[g->param_of[v]].off;
  }
  double result = NAN;
  for (int i = 0; i < g->n_inputs; i++) {
    gx_tensor *t = &r->v[g->inputs[i]];
    if (!gx_alloc(t, inputs[i].is_int, inputs[i].rank, inputs[i].dims)) goto oom;
    if (t->is_int) memcpy(t->i, inputs[i].i, sizeof *t->i * (size_t)t->n);
    else memcpy(t->f, inputs[i].f, sizeof *t->f * (size_t)t->n);
  }
  for (int k = 0; k < g->n_nodes; k++)
    if (!gx_fwd(r, k)) goto done;
  gx_tensor *y = &r->v[g->output];
  if (y->rank < 0 || y->is_int) {
    snprintf(r->err, sizeof r->err, "the output '%s' is not a float tensor", g->names[g->output]);
    goto done;
  }
  float *dy = gx_grad(r, g->output);
  if (!dy) goto oom;
  result = gx_loss(r, y, labels, loss, scale, dy);
  if (isnan(result)) goto done;
  for (int k = g->n_nodes - 1; k >= 0; k--)
    if (!gx_bwd(r, k)) {
      result = NAN;
      goto done;
    }
  for (int p = 0; p < g->n_params; p++) {
    const float *gr = r->grad[g->params[p].val];
    if (!gr) continue;
    float *dst = r->gw + g->params[p].off;
    for (int64_t e = 0; e < g->params[p].n; e++) dst[e] += gr[e];
  }
  goto done;
oom:
  snprintf(r->err, sizeof r->err, "out of memory");
done:
  gx_run_free(r);
  return result;
}

bool gx_shapes(gx_run *r, const gx_tensor *inputs, gx_shape *out) {
  const gx_graph *g = r->g;
  r->v = calloc((size_t)g->n_vals, sizeof *r->v);
  r->grad = calloc((size_t)g->n_vals, sizeof *r->grad);
  bool ok = r->v && r->grad;
  for (int v = 0; ok && v < g->n_vals; v++) {
    r->v[v].rank = -1;
    if (g->consts[v].rank < 0) continue;
    r->v[v] = g->consts[v];
    r->v[v].view = true;
    if (g->param_of[v] >= 0) r->v[v].f = (float *)r->w + g->params[g->param_of[v]].off;
  }
  for (int i = 0; ok && i < g->n_inputs; i++) {
    gx_tensor *t = &r->v[g->inputs[i]];
    ok = gx_alloc(t, inputs[i].is_int, inputs[i].rank, inputs[i].dims);
    if (ok && t->is_int) memcpy(t->i, inputs[i].i, sizeof *t->i * (size_t)t->n);
    else if (ok) memcpy(t->f, inputs[i].f, sizeof *t->f * (size_t)t->n);
  }
  for (int k = 0; ok && k < g->n_nodes; k++) ok = gx_fwd(r, k);
  for (int v = 0; ok && v < g->n_vals; v++) {
    out[v].rank = r->v[v].rank;
    if (r->v[v].rank > 0) memcpy(out[v].dims, r->v[v].dims, sizeof out[v].dims);
  }
  if (!ok && !r->err[0]) snprintf(r->err, sizeof r->err, "out of memory");
  gx_run_free(r);
  return ok;
}
