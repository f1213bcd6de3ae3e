/* The MoE MLP (exec layer; declared in ex_act.h): Mixtral's sparse block (transformers modeling_mixtral.py,
 * MixtralSparseMoeBlock at v4.46): router logits, softmax over all experts, the top k, their weights renormalised
 * to sum to 1 (so they are the softmax over the chosen logits), dropless (every token reaches its k experts),
 * no auxiliary loss. Each expert is a SwiGLU MLP over the tokens routed to it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ex_act.h"
#include "exec/ex_ops.h"

static float *fbuf(ex_act *a, int64_t n, bool *oom) {
  float *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
  if (!p) *oom = true;
  a->bytes += (size_t)n * sizeof *p;
  return p;
}

void ex_moe_free(ex_act *a, const ex_cfg *c) {
  for (int64_t e = 0; e < c->E; e++) {
    free(a->tok_e[e]);
    free(a->slot_e[e]);
    free(a->up_e[e]);
    free(a->h_e[e]);
    free(a->y_e[e]);
    a->tok_e[e] = a->slot_e[e] = NULL;
    a->up_e[e] = a->h_e[e] = a->y_e[e] = NULL;
    a->bytes -= (size_t)a->n_e[e] * (size_t)(3 * c->F + c->H) * sizeof(float);
    a->n_e[e] = 0;
  }
  free(a->sel);
  a->sel = NULL;
}

bool ex_moe_fwd(const ex_model *md, const ex_layer_w *lw, const float *w, ex_act *a, float *out) {
  const ex_cfg *c = &md->c;
  int64_t T = a->T, H = c->H, F = c->F, E = c->E, K = c->K;
  bool oom = false;
  if (!a->probs) a->probs = fbuf(a, T * E, &oom);
  if (!a->wt) a->wt = fbuf(a, T * K, &oom);
  a->sel = calloc((size_t)(T * K), sizeof *a->sel);
  if (oom || !a->sel) return false;
  exo_linear(T, E, H, a->m, H, w + lw->router, H, NULL, a->probs, E, 0.0f);
  for (int64_t t = 0; t < T; t++) {
    float *p = a->probs + t * E, mx = p[0];
    for (int64_t e = 1; e < E; e++) mx = p[e] > mx ? p[e] : mx;
    double sum = 0.0;
    for (int64_t e = 0; e < E; e++) sum += (p[e] = expf(p[e] - mx));
    for (int64_t e = 0; e < E; e++) p[e] = (float)(p[e] / sum);
    /* top k, ties to the lower index */
    double tot = 0.0;
    for (int64_t k = 0; k < K; k++) {
      int64_t best = -1;
      for (int64_t e = 0; e < E; e++) {
        bool taken = false;
        for (int64_t j = 0; j < k; j++) taken |= a->sel[t * K + j] == e;
        if (!taken && (best < 0 || p[e] > p[best])) best = e;
      }
      a->sel[t * K + k] = (int32_t)best;
      tot += p[best];
    }
    for (int64_t k = 0; k < K; k++) a->wt[t * K + k] = (float)(p[a->sel[t * K + k]] / tot);
  }
  memset(out, 0, (size_t)(T * H) * sizeof *out);
  for (int64_t e = 0; e < E; e++) {
    int64_t n = 0;
    for (int64_t i = 0; i < T * K; i++) n += a->sel[i] == e;
    a->n_e[e] = n;
    a->tok_e[e] = calloc((size_t)(n ? n : 1), sizeof(int32_t));
    a->slot_e[e] = calloc((size_t)(n ? n : 1), sizeof(int32_t));
    float *x_e = calloc((size_t)(n ? n * H : 1), sizeof(float));
    a->up_e[e] = calloc((size_t)(n ? n * 2 * F : 1), sizeof(float));
    a->h_e[e] = calloc((size_t)(n ? n * F : 1), sizeof(float));
    a->y_e[e] = calloc((size_t)(n ? n * H : 1), sizeof(float));
    a->bytes += (size_t)n * (size_t)(3 * F + H) * sizeof(float);
    if (!a->tok_e[e] || !a->slot_e[e] || !x_e || !a->up_e[e] || !a->h_e[e] || !a->y_e[e]) {
      free(x_e);
      return false;
    }
    int64_t j = 0;
    for (int64_t i = 0; i < T * K; i++)
      if (a->sel[i] == e) {
        a->tok_e[e][j] = (int32_t)(i / K);
        a->slot_e[e][j] = (int32_t)i;
        memcpy(x_e + j * H, a->m + (i / K) * H, (size_t)H * sizeof(float));
        j++;
      }
    if (n) {
      exo_linear(n, 2 * F, H, x_e, H, w + lw->e13[e], H, NULL, a->up_e[e], 2 * F, 0.0f);
      exo_swiglu_fwd(n, F, a->up_e[e], a->h_e[e]);
      exo_linear(n, H, F, a->h_e[e], F, w + lw->e2[e], F, NULL, a->y_e[e], H, 0.0f);
    }
    for (int64_t i = 0; i < n; i++) {
      float wk = a->wt[a->slot_e[e][i]];
      float *o = out + (int64_t)a->tok_e[e][i] * H;
      for (int64_t h = 0; h < H; h++) o[h] += wk * a->y_e[e][i * H + h];
    }
    free(x_e);
  }
  return true;
}

bool ex_moe_bwd(const ex_model *md, const ex_layer_w *lw, const float *w, float *g, ex_act *a, const float *dout,
                    float *dm) {
  const ex_cfg *c = &md->c;
  int64_t T = a->T, H = c->H, F = c->F, E = c->E, K = c->K;
  float *dwt = calloc((size_t)(T * K), sizeof *dwt), *dlog = calloc((size_t)(T * E), sizeof *dlog);
  bool ok = dwt && dlog;
  memset(dm, 0, (size_t)(T * H) * sizeof *dm);
  for (int64_t e = 0; e < E && ok; e++) {
    int64_t n = a->n_e[e];
    if (!n) continue;
    float *dy = malloc((size_t)(n * H) * sizeof *dy), *dh = malloc((size_t)(n * F) * sizeof *dh),
          *dup = malloc((size_t)(n * 2 * F) * sizeof *dup), *x_e = malloc((size_t)(n * H) * sizeof *x_e),
          *dx = malloc((size_t)(n * H) * sizeof *dx);
    ok = dy && dh && dup && x_e && dx;
    for (int64_t i = 0; i < n && ok; i++) {
      int64_t t = a->tok_e[e][i], s = a->slot_e[e][i];
      double dot = 0.0;
      for (int64_t h = 0; h < H; h++) {
        dot += (double)dout[t * H + h] * a->y_e[e][i * H + h];
        dy[i * H + h] = a->wt[s] * dout[t * H + h];
      }
      dwt[s] = (float)dot;
      memcpy(x_e + i * H, a->m + t * H, (size_t)H * sizeof(float));
    }
    if (ok) {
      exo_linear_bwd(n, H, F, a->h_e[e], F, w + lw->e2[e], F, dy, H, dh, F, 0.0f, g + lw->e2[e], NULL);
      exo_swiglu_bwd(n, F, a->up_e[e], dh, dup);
      exo_linear_bwd(n, 2 * F, H, x_e, H, w + lw->e13[e], H, dup, 2 * F, dx, H, 0.0f, g + lw->e13[e], NULL);
      for (int64_t i = 0; i < n; i++)
        for (int64_t h = 0; h < H; h++) dm[(int64_t)a->tok_e[e][i] * H + h] += dx[i * H + h];
    }
    free(dy);
    free(dh);
    free(dup);
    free(x_e);
    free(dx);
  }
  if (ok) {
    /* w_k = softmax over the chosen logits, so ∂L/∂logit_j = w_j·(dw_j − Σ_k w_k·dw_k) for chosen j, else 0. */
    for (int64_t t = 0; t < T; t++) {
      double s = 0.0;
      for (int64_t k = 0; k < K; k++) s += (double)a->wt[t * K + k] * dwt[t * K + k];
      for (int64_t k = 0; k < K; k++)
        dlog[t * E + a->sel[t * K + k]] = a->wt[t * K + k] * (dwt[t * K + k] - (float)s);
    }
    exo_linear_bwd(T, E, H, a->m, H, w + lw->router, H, dlog, E, dm, H, 1.0f, g + lw->router, NULL);
  }
  free(dwt);
  free(dlog);
  return ok;
}

