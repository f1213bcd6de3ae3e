/* One transformer layer's forward and backward, the embedding and the loss head (exec layer; declared in
 * exec.h). A pre-norm block: x_mid = x + Attn(Norm1(x)), y = x_mid + MLP(Norm2(x_mid)), as transformers'
 * LlamaDecoderLayer, MixtralDecoderLayer and GPT2Block compute it. The MoE MLP is Mixtral's
 * (modeling_mixtral.py MixtralSparseMoeBlock): softmax over the router logits, the top k, their weights
 * renormalised to sum to 1, dropless, no auxiliary loss.
 *
 * Recompute (plan recompute granularity) changes only what stays between forward and backward: full keeps
 * the layer input and runs the forward again in the backward; selective drops the attention probabilities
 * and recomputes them; op drops the norm and activation outputs and recomputes them from the kept matmul
 * outputs. The arithmetic, and so every number, is the same for all four. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ex_ops.h"
#include "exec/exec.h"

struct ex_act {
  int layer;
  int64_t B, S, T;
  ex_recompute rc;
  float *x, *a, *mu1, *r1, *qkv, *P, *att, *xmid, *m, *mu2, *r2, *up, *hact;
  /* MoE: router probabilities, the chosen experts and weights, and per expert its tokens and activations. */
  float *probs, *wt;
  int32_t *sel;
  int64_t n_e[EX_MAX_EXPERTS];
  int32_t *tok_e[EX_MAX_EXPERTS], *slot_e[EX_MAX_EXPERTS];
  float *up_e[EX_MAX_EXPERTS], *h_e[EX_MAX_EXPERTS], *y_e[EX_MAX_EXPERTS];
  size_t bytes;
};

static float *fbuf(ex_act *a, int64_t n, bool *oom) {
  float *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
  if (!p) *oom = true;
  a->bytes += (size_t)n * sizeof *p;
  return p;
}

static void drop(ex_act *a, float **p, int64_t n) {
  free(*p);
  *p = NULL;
  a->bytes -= (size_t)n * sizeof(float);
}

size_t ex_act_bytes(const ex_act *a) { return a ? a->bytes : 0; }

static void free_moe(ex_act *a, const ex_cfg *c) {
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

/* Frees every saved tensor but the input. */
static void free_inner(ex_act *a) {
  float **all[] = {&a->a, &a->mu1, &a->r1, &a->qkv, &a->P, &a->att, &a->xmid, &a->m, &a->mu2, &a->r2, &a->up, &a->hact,
                   &a->probs, &a->wt};
  for (size_t i = 0; i < AP_COUNT(all); i++) {
    free(*all[i]);
    *all[i] = NULL;
  }
}

void ex_act_free(ex_act *a) {
  if (!a) return;
  free_inner(a);
  for (int e = 0; e < EX_MAX_EXPERTS; e++) {
    free(a->tok_e[e]);
    free(a->slot_e[e]);
    free(a->up_e[e]);
    free(a->h_e[e]);
    free(a->y_e[e]);
  }
  free(a->sel);
  free(a->x);
  free(a);
}

/* The MoE MLP forward: out[T, H] from m[T, H]. */
static bool moe_fwd(const ex_model *md, const ex_layer_w *lw, const float *w, ex_act *a, float *out) {
  const ex_cfg *c = &md->c;
  int64_t T = a->T, H = c->H, F = c->F, E = c->E, K = c->K;
  bool oom = false;
  if (!a->probs) a->probs = fbuf(a, T * E, &oom);
  if (!a->wt) a->wt = fbuf(a, T * K, &oom);
  a->sel = calloc((size_t)(T * K), sizeof *a->sel);
  if (oom || !a->sel) return false;
  exo_linear(T, E, H, a->m, H, w + lw->router, NULL, a->probs, E, 0.0f);
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
      exo_linear(n, 2 * F, H, x_e, H, w + lw->e13[e], NULL, a->up_e[e], 2 * F, 0.0f);
      exo_swiglu_fwd(n, F, a->up_e[e], a->h_e[e]);
      exo_linear(n, H, F, a->h_e[e], F, w + lw->e2[e], NULL, a->y_e[e], H, 0.0f);
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

/* Runs the layer's forward from a->x, filling every saved tensor; writes y. */
static bool fwd_compute(const ex_model *md, const float *w, ex_act *a, float *y) {
  const ex_cfg *c = &md->c;
  const ex_layer_w *lw = &md->lw[a->layer];
  int64_t T = a->T, H = c->H, D = (c->nh + 2 * c->nkv) * c->hd, qd = c->nh * c->hd, F = c->F;
  bool ln = c->family == EX_GPT2, oom = false;
  int64_t up_w = c->family == EX_LLAMA ? 2 * F : F;
  if (!a->a) a->a = fbuf(a, T * H, &oom);
  if (!a->r1) a->r1 = fbuf(a, T, &oom);
  if (ln && !a->mu1) a->mu1 = fbuf(a, T, &oom);
  if (!a->qkv) a->qkv = fbuf(a, T * D, &oom);
  if (!a->P) a->P = fbuf(a, a->B * c->nh * a->S * a->S, &oom);
  if (!a->att) a->att = fbuf(a, T * qd, &oom);
  if (!a->xmid) a->xmid = fbuf(a, T * H, &oom);
  if (!a->m) a->m = fbuf(a, T * H, &oom);
  if (!a->r2) a->r2 = fbuf(a, T, &oom);
  if (ln && !a->mu2) a->mu2 = fbuf(a, T, &oom);
  if (!c->E && !a->up) a->up = fbuf(a, T * up_w, &oom);
  if (!c->E && !a->hact) a->hact = fbuf(a, T * F, &oom);
  if (oom) return false;
  exo_norm_fwd(ln, T, H, c->eps, a->x, w + lw->n1w, ln ? w + lw->n1b : NULL, a->a, a->mu1, a->r1);
  exo_linear(T, D, H, a->a, H, w + lw->qkv, ln ? w + lw->bqkv : NULL, a->qkv, D, 0.0f);
  if (c->family == EX_LLAMA) exo_rope(a->qkv, D, 0, c->nh + c->nkv, c->hd, T, a->S, c->rope_theta, false);
  exo_attn_fwd(a->B, a->S, c->nh, c->nkv, c->hd, a->qkv, a->P, a->att);
  memcpy(a->xmid, a->x, (size_t)(T * H) * sizeof(float));
  exo_linear(T, H, qd, a->att, qd, w + lw->o, ln ? w + lw->bo : NULL, a->xmid, H, 1.0f);
  exo_norm_fwd(ln, T, H, c->eps, a->xmid, w + lw->n2w, ln ? w + lw->n2b : NULL, a->m, a->mu2, a->r2);
  if (c->E) {
    if (a->sel) free_moe(a, c);
    if (!moe_fwd(md, lw, w, a, y)) return false;
  } else {
    exo_linear(T, up_w, H, a->m, H, w + lw->up, ln ? w + lw->bup : NULL, a->up, up_w, 0.0f);
    if (ln)
      exo_gelu_fwd(T * F, a->up, a->hact);
    else
      exo_swiglu_fwd(T, F, a->up, a->hact);
    exo_linear(T, H, F, a->hact, F, w + lw->down, ln ? w + lw->bdown : NULL, y, H, 0.0f);
  }
  for (int64_t i = 0; i < T * H; i++) y[i] += a->xmid[i];
  return true;
}

ex_act *ex_layer_fwd(const ex_model *m, int layer, const float *w, const float *x, float *y, int64_t B, int64_t S,
                     ex_recompute rc) {
  ex_act *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  a->layer = layer;
  a->B = B;
  a->S = S;
  a->T = B * S;
  a->rc = rc;
  bool oom = false;
  a->x = fbuf(a, a->T * m->c.H, &oom);
  if (oom || (memcpy(a->x, x, (size_t)(a->T * m->c.H) * sizeof(float)), !fwd_compute(m, w, a, y))) {
    ex_act_free(a);
    return NULL;
  }
  const ex_cfg *c = &m->c;
  int64_t T = a->T, H = c->H;
  if (rc == EX_RC_FULL) {
    free_inner(a);
    if (c->E) free_moe(a, c);
    a->bytes = (size_t)(T * H) * sizeof(float);
  } else if (rc == EX_RC_SELECTIVE) {
    drop(a, &a->P, a->B * c->nh * a->S * a->S);
  } else if (rc == EX_RC_OP) {
    drop(a, &a->a, T * H);
    drop(a, &a->m, T * H);
    if (!c->E) drop(a, &a->hact, T * c->F);
  }
  return a;
}

/* Brings back what the recompute policy dropped. */
static bool restore(const ex_model *md, const float *w, ex_act *a) {
  const ex_cfg *c = &md->c;
  const ex_layer_w *lw = &md->lw[a->layer];
  int64_t T = a->T, H = c->H;
  bool ln = c->family == EX_GPT2, oom = false;
  if (a->rc == EX_RC_FULL) {
    float *y = malloc((size_t)(T * H) * sizeof *y);
    bool ok = y && fwd_compute(md, w, a, y);
    free(y);
    return ok;
  }
  if (a->rc == EX_RC_SELECTIVE) {
    a->P = fbuf(a, a->B * c->nh * a->S * a->S, &oom);
    if (oom) return false;
    float *tmp = malloc((size_t)(T * c->nh * c->hd) * sizeof *tmp);
    if (!tmp) return false;
    exo_attn_fwd(a->B, a->S, c->nh, c->nkv, c->hd, a->qkv, a->P, tmp);
    free(tmp);
  } else if (a->rc == EX_RC_OP) {
    a->a = fbuf(a, T * H, &oom);
    a->m = fbuf(a, T * H, &oom);
    if (!c->E) a->hact = fbuf(a, T * c->F, &oom);
    if (oom) return false;
    exo_norm_fwd(ln, T, H, c->eps, a->x, w + lw->n1w, ln ? w + lw->n1b : NULL, a->a, a->mu1, a->r1);
    exo_norm_fwd(ln, T, H, c->eps, a->xmid, w + lw->n2w, ln ? w + lw->n2b : NULL, a->m, a->mu2, a->r2);
    if (!c->E) {
      if (ln)
        exo_gelu_fwd(T * c->F, a->up, a->hact);
      else
        exo_swiglu_fwd(T, c->F, a->up, a->hact);
    }
  }
  return true;
}

/* The MoE MLP backward: dm (written) from dout. */
static bool moe_bwd(const ex_model *md, const ex_layer_w *lw, const float *w, float *g, ex_act *a, const float *dout,
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
      exo_linear_bwd(n, H, F, a->h_e[e], F, w + lw->e2[e], dy, H, dh, F, 0.0f, g + lw->e2[e], NULL);
      exo_swiglu_bwd(n, F, a->up_e[e], dh, dup);
      exo_linear_bwd(n, 2 * F, H, x_e, H, w + lw->e13[e], dup, 2 * F, dx, H, 0.0f, g + lw->e13[e], NULL);
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
    exo_linear_bwd(T, E, H, a->m, H, w + lw->router, dlog, E, dm, H, 1.0f, g + lw->router, NULL);
  }
  free(dwt);
  free(dlog);
  return ok;
}

bool ex_layer_bwd(const ex_model *md, int layer, const float *w, float *g, ex_act *a, const float *dy, float *dx) {
  (void)layer;
  const ex_cfg *c = &md->c;
  const ex_layer_w *lw = &md->lw[a->layer];
  int64_t T = a->T, H = c->H, D = (c->nh + 2 * c->nkv) * c->hd, qd = c->nh * c->hd, F = c->F;
  bool ln = c->family == EX_GPT2;
  int64_t up_w = c->family == EX_LLAMA ? 2 * F : F;
  if (!restore(md, w, a)) {
    ex_act_free(a);
    return false;
  }
  float *dxm = malloc((size_t)(T * H) * sizeof *dxm), *dm = malloc((size_t)(T * H) * sizeof *dm);
  float *dh = malloc((size_t)(T * (qd > F ? qd : F)) * sizeof *dh);
  float *dup = malloc((size_t)(T * (up_w > D ? up_w : D)) * sizeof *dup);
  float *tmp = malloc((size_t)(a->S * a->S) * sizeof *tmp);
  bool ok = dxm && dm && dh && dup && tmp;
  if (ok) {
    /* MLP: y = x_mid + MLP(m) */
    if (c->E) {
      ok = moe_bwd(md, lw, w, g, a, dy, dm);
    } else {
      exo_linear_bwd(T, H, F, a->hact, F, w + lw->down, dy, H, dh, F, 0.0f, g + lw->down, ln ? g + lw->bdown : NULL);
      if (ln)
        exo_gelu_bwd(T * F, a->up, dh, dup);
      else
        exo_swiglu_bwd(T, F, a->up, dh, dup);
      exo_linear_bwd(T, up_w, H, a->m, H, w + lw->up, dup, up_w, dm, H, 0.0f, g + lw->up, ln ? g + lw->bup : NULL);
    }
  }
  if (ok) {
    exo_norm_bwd(ln, T, H, a->xmid, w + lw->n2w, a->mu2, a->r2, dm, dxm, g + lw->n2w, ln ? g + lw->n2b : NULL);
    for (int64_t i = 0; i < T * H; i++) dxm[i] += dy[i];
    /* Attention: x_mid = x + O(att) */
    exo_linear_bwd(T, H, qd, a->att, qd, w + lw->o, dxm, H, dh, qd, 0.0f, g + lw->o, ln ? g + lw->bo : NULL);
    exo_attn_bwd(a->B, a->S, c->nh, c->nkv, c->hd, a->qkv, a->P, dh, dup, tmp);
    if (c->family == EX_LLAMA) exo_rope(dup, D, 0, c->nh + c->nkv, c->hd, T, a->S, c->rope_theta, true);
    exo_linear_bwd(T, D, H, a->a, H, w + lw->qkv, dup, D, dm, H, 0.0f, g + lw->qkv, ln ? g + lw->bqkv : NULL);
    exo_norm_bwd(ln, T, H, a->x, w + lw->n1w, a->mu1, a->r1, dm, dx, g + lw->n1w, ln ? g + lw->n1b : NULL);
    for (int64_t i = 0; i < T * H; i++) dx[i] += dxm[i];
  }
  free(dxm);
  free(dm);
  free(dh);
  free(dup);
  free(tmp);
  ex_act_free(a);
  return ok;
}

void ex_embed_fwd(const ex_model *m, const float *w, const int32_t *tok, int64_t B, int64_t S, float *x) {
  int64_t H = m->c.H;
  for (int64_t t = 0; t < B * S; t++) {
    memcpy(x + t * H, w + m->emb + (int64_t)tok[t] * H, (size_t)H * sizeof(float));
    if (m->pos >= 0)
      for (int64_t h = 0; h < H; h++) x[t * H + h] += w[m->pos + (t % S) * H + h];
  }
}

void ex_embed_bwd(const ex_model *m, float *g, const int32_t *tok, int64_t B, int64_t S, const float *dx) {
  int64_t H = m->c.H;
  for (int64_t t = 0; t < B * S; t++)
    for (int64_t h = 0; h < H; h++) {
      g[m->emb + (int64_t)tok[t] * H + h] += dx[t * H + h];
      if (m->pos >= 0) g[m->pos + (t % S) * H + h] += dx[t * H + h];
    }
}

double ex_head_loss(const ex_model *m, const float *w, float *g, const float *x, const int32_t *labels, int64_t T,
                    double scale, bool fused, float *dx) {
  const ex_cfg *c = &m->c;
  int64_t H = c->H, V = c->V;
  bool ln = c->family == EX_GPT2;
  float *y = malloc((size_t)(T * H) * sizeof *y), *mu = malloc((size_t)T * sizeof *mu), *r = malloc((size_t)T * sizeof *r);
  float *logits = malloc((size_t)(T * V) * sizeof *logits);
  float *dlog = fused ? logits : malloc((size_t)(T * V) * sizeof *dlog);
  float *dy = malloc((size_t)(T * H) * sizeof *dy);
  double loss = NAN;
  if (y && mu && r && logits && dlog && dy) {
    loss = 0.0;
    exo_norm_fwd(ln, T, H, c->eps, x, w + m->nfw, ln ? w + m->nfb : NULL, y, mu, r);
    exo_linear(T, V, H, y, H, w + m->head, NULL, logits, V, 0.0f);
    for (int64_t t = 0; t < T; t++) {
      const float *l = logits + t * V;
      float mx = l[0];
      for (int64_t v = 1; v < V; v++) mx = l[v] > mx ? l[v] : mx;
      double sum = 0.0;
      for (int64_t v = 0; v < V; v++) sum += exp((double)l[v] - mx);
      double lse = mx + log(sum);
      loss += lse - l[labels[t]];
      /* ∂(scale·CE)/∂logit = scale·(softmax − one-hot); written over the logits when fused. */
      float *d = dlog + t * V;
      for (int64_t v = 0; v < V; v++) d[v] = (float)(scale * exp((double)l[v] - lse));
      d[labels[t]] -= (float)scale;
    }
    exo_linear_bwd(T, V, H, y, H, w + m->head, dlog, V, dy, H, 0.0f, g + m->head, NULL);
    exo_norm_bwd(ln, T, H, x, w + m->nfw, mu, r, dy, dx, g + m->nfw, ln ? g + m->nfb : NULL);
  }
  free(y);
  free(mu);
  free(r);
  free(logits);
  if (!fused) free(dlog);
  free(dy);
  return loss;
}
