/* One transformer layer's forward and backward, the embedding and the loss head (exec layer; declared in
 * exec.h). A pre-norm block: x_mid = x + Attn(Norm1(x)), y = x_mid + MLP(Norm2(x_mid)), as transformers'
 * LlamaDecoderLayer, MixtralDecoderLayer and GPT2Block compute it; the MoE MLP is in ex_moe.c. Under tensor
 * parallelism (ex_tp in exec.h) each rank computes its heads and its share of the MLP width, with Megatron's
 * communication: f/g conjugates (Shoeybi et al. 2019 §3, Fig. 3) without sequence parallelism, all-gather and
 * reduce-scatter with it (Korthikanti et al. 2022 §4.2.2, Fig. 5).
 *
 * Recompute (plan recompute granularity) changes only what stays between forward and backward: full keeps
 * the layer input and runs the forward again in the backward; selective drops the attention probabilities
 * and recomputes them; op drops the norm and activation outputs and recomputes them from the kept matmul
 * outputs. The arithmetic, and so every number, is the same for all four. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ex_act.h"
#include "exec/ex_ops.h"

static const ex_tp one_rank = {.rank = 0, .size = 1};

static float *fbuf(ex_act *a, int64_t n, bool *oom) {
  float *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
  if (!p) *oom = true;
  a->bytes += (size_t)n * sizeof *p;
  return p;
}

static void drop(ex_act *a, float **p, int64_t n) {
  if (!*p) return;
  free(*p);
  *p = NULL;
  a->bytes -= (size_t)n * sizeof(float);
}

size_t ex_act_bytes(const ex_act *a) { return a ? a->bytes : 0; }

/* Frees every saved tensor but the input. */
static void free_inner(ex_act *a) {
  float **all[] = {&a->a, &a->mu1, &a->r1, &a->a_full, &a->qkv, &a->P, &a->att, &a->kvf, &a->xmid, &a->m, &a->mu2, &a->r2,
                   &a->m_full, &a->up, &a->hact, &a->probs, &a->wt};
  for (size_t i = 0; i < AP_COUNT(all); i++) {
    free(*all[i]);
    *all[i] = NULL;
  }
}

void ex_act_free(ex_act *a) {
  if (!a) return;
  for (int i = 0; i < a->n_wrec; i++) free(a->wrec[i].dy);
  free_inner(a);
  ex_moe_free(a, NULL);
  free(a->x);
  free(a);
}

/* This rank's sizes. */
typedef struct {
  int64_t nhl, nkvl, qdl, kvl, Dl, Fl, upl;       /* local heads, KV heads, q width, kv width, qkv width, MLP */
  int64_t q0, k0, v0, f0;                          /* first local row of q, k, v in W_qkv; first MLP row */
} local_dims;

static local_dims dims_of(const ex_cfg *c, const ex_tp *tp) {
  local_dims d;
  int64_t t = tp->size, r = tp->rank;
  d.nhl = c->nh / t;
  d.nkvl = c->nkv / t;
  d.qdl = d.nhl * c->hd;
  d.kvl = d.nkvl * c->hd;
  d.Dl = d.qdl + 2 * d.kvl;
  d.Fl = c->F / t;
  d.upl = c->family == EX_LLAMA ? 2 * d.Fl : d.Fl;
  d.q0 = r * d.qdl;
  d.k0 = c->nh * c->hd + r * d.kvl;
  d.v0 = (c->nh + c->nkv) * c->hd + r * d.kvl;
  d.f0 = r * d.Fl;
  return d;
}

/* exo_linear_bwd, or under a split backward its input-gradient half now and the weight gradient recorded for
 * ex_layer_bwd_weight (a copy of dy; x must stay alive in a). */
static bool lin_bwd(ex_act *a, int64_t T, int64_t out, int64_t in, const float *x, int64_t ldx, const float *W,
                    int64_t ldw, const float *dy, int64_t ldy, float *dx, int64_t lddx, float beta, float *dW,
                    float *db) {
  if (!a->defer) {
    exo_linear_bwd(T, out, in, x, ldx, W, ldw, dy, ldy, dx, lddx, beta, dW, db);
    return true;
  }
  if (a->n_wrec == EX_MAX_WREC) return false;
  float *copy = malloc((size_t)(T * out) * sizeof *copy);
  if (!copy) return false;
  for (int64_t t = 0; t < T; t++) memcpy(copy + t * out, dy + t * ldy, (size_t)out * sizeof *copy);
  a->wrec[a->n_wrec++] = (ex_wrec){T, out, in, ldx, ldw, x, copy, dW};
  a->bytes += (size_t)(T * out) * sizeof *copy;
  exo_linear_fwd_bwd_input(T, out, in, W, ldw, dy, ldy, dx, lddx, beta, db);
  return true;
}

/* The column-parallel q, k, v projection: qkv[T, Dl] = a_full · W_rowsᵀ (+ b). */
static void qkv_fwd(const ex_cfg *c, const ex_layer_w *lw, const float *w, const local_dims *d, int64_t T,
                    const float *a_full, float *qkv) {
  bool ln = c->family == EX_GPT2;
  int64_t H = c->H, rows[3] = {d->q0, d->k0, d->v0}, n[3] = {d->qdl, d->kvl, d->kvl}, col = 0;
  for (int i = 0; i < 3; i++) {
    exo_linear(T, n[i], H, a_full, H, w + lw->qkv + rows[i] * H, H, ln ? w + lw->bqkv + rows[i] : NULL, qkv + col,
               d->Dl, 0.0f);
    col += n[i];
  }
}

static bool qkv_bwd(ex_act *a, const ex_cfg *c, const ex_layer_w *lw, const float *w, float *g, const local_dims *d,
                    int64_t T, const float *a_full, const float *dqkv, float *da) {
  bool ln = c->family == EX_GPT2, ok = true;
  int64_t H = c->H, rows[3] = {d->q0, d->k0, d->v0}, n[3] = {d->qdl, d->kvl, d->kvl}, col = 0;
  for (int i = 0; i < 3 && ok; i++) {
    ok = lin_bwd(a, T, n[i], H, a_full, H, w + lw->qkv + rows[i] * H, H, dqkv + col, d->Dl, da, H, i ? 1.0f : 0.0f,
                 g + lw->qkv + rows[i] * H, ln ? g + lw->bqkv + rows[i] : NULL);
    col += n[i];
  }
  return ok;
}

/* The column-parallel first MLP matmul: Llama's [gate | up] slices into up[T, 2Fl], GPT-2's c_fc into [T, Fl]. */
static void up_fwd(const ex_cfg *c, const ex_layer_w *lw, const float *w, const local_dims *d, int64_t T,
                   const float *m_full, float *up) {
  int64_t H = c->H;
  if (c->family == EX_GPT2) {
    exo_linear(T, d->Fl, H, m_full, H, w + lw->up + d->f0 * H, H, w + lw->bup + d->f0, up, d->Fl, 0.0f);
    return;
  }
  exo_linear(T, d->Fl, H, m_full, H, w + lw->up + d->f0 * H, H, NULL, up, 2 * d->Fl, 0.0f);
  exo_linear(T, d->Fl, H, m_full, H, w + lw->up + (c->F + d->f0) * H, H, NULL, up + d->Fl, 2 * d->Fl, 0.0f);
}

static bool up_bwd(ex_act *a, const ex_cfg *c, const ex_layer_w *lw, const float *w, float *g, const local_dims *d,
                   int64_t T, const float *m_full, const float *dup, float *dm) {
  int64_t H = c->H;
  if (c->family == EX_GPT2)
    return lin_bwd(a, T, d->Fl, H, m_full, H, w + lw->up + d->f0 * H, H, dup, d->Fl, dm, H, 0.0f,
                   g + lw->up + d->f0 * H, g + lw->bup + d->f0);
  return lin_bwd(a, T, d->Fl, H, m_full, H, w + lw->up + d->f0 * H, H, dup, 2 * d->Fl, dm, H, 0.0f,
                 g + lw->up + d->f0 * H, NULL) &&
         lin_bwd(a, T, d->Fl, H, m_full, H, w + lw->up + (c->F + d->f0) * H, H, dup + d->Fl, 2 * d->Fl, dm, H, 1.0f,
                 g + lw->up + (c->F + d->f0) * H, NULL);
}

/* The row-parallel output's reduction: all-reduce (out stays [T, H]) or reduce-scatter into loc [T_loc, H]. */
static void reduce_out(const ex_act *a, float *full, float *loc, int64_t H) {
  const ex_tp *tp = &a->tp;
  if (tp->size == 1) {
    if (loc != full) memcpy(loc, full, (size_t)(a->T * H) * sizeof *loc);
  } else if (tp->sp) {
    tp->reduce_scatter_seq(tp->user, full, loc, a->B, a->S, H);
  } else {
    tp->all_reduce(tp->user, full, a->T * H);
    if (loc != full) memcpy(loc, full, (size_t)(a->T * H) * sizeof *loc);
  }
}

/* The column-parallel input: the whole sequence (gathered under sequence parallelism, else loc itself). */
static const float *gather_in(const ex_act *a, const float *loc, float *full, int64_t H) {
  if (!a->tp.sp || a->tp.size == 1) return loc;
  a->tp.all_gather_seq(a->tp.user, loc, full, a->B, a->S, H);
  return full;
}

static int64_t cp_of(const ex_act *a) { return a->tp.cp_size > 1 ? a->tp.cp_size : 1; }

/* RoPE on the local q and k heads, at the rows' positions (the context-parallel layout's when it has one). */
static void rope(const ex_cfg *c, const ex_act *a, const local_dims *d, float *qkv, bool inverse) {
  if (c->family != EX_LLAMA) return;
  exo_rope_pos(qkv, d->Dl, 0, d->nhl + d->nkvl, c->hd, a->T, a->S, cp_of(a) > 1 ? a->tp.cp_pos : NULL, c->rope_theta,
               inverse);
}

/* The attention core: P and att from qkv; under context parallelism first all-gathers k and v into a->kvf. */
static bool attn_fwd(ex_act *a, const local_dims *d, int64_t hd, bool gather) {
  if (cp_of(a) == 1) {
    exo_attn_fwd(a->B, a->S, d->nhl, d->nkvl, hd, a->qkv, a->P, a->att);
    return true;
  }
  int64_t KW = 2 * d->kvl, Sk = a->S * cp_of(a);
  if (gather) {
    float *loc = malloc((size_t)(a->T * KW) * sizeof *loc);
    if (!loc) return false;
    for (int64_t t = 0; t < a->T; t++) memcpy(loc + t * KW, a->qkv + t * d->Dl + d->qdl, (size_t)KW * sizeof *loc);
    a->tp.cp_gather(a->tp.user, loc, a->kvf, a->B, a->S, KW);
    free(loc);
  }
  exo_attn_pos_fwd(a->B, a->S, Sk, a->tp.cp_pos, d->nhl, d->nkvl, hd, a->qkv, d->Dl, a->kvf, a->P, a->att);
  return true;
}

/* Its backward: dqkv [T, Dl] from datt; the k and v gradients of the whole sequence are reduce-scattered back. */
static bool attn_bwd(ex_act *a, const local_dims *d, int64_t hd, const float *datt, float *dqkv, float *tmp) {
  if (cp_of(a) == 1) {
    exo_attn_bwd(a->B, a->S, d->nhl, d->nkvl, hd, a->qkv, a->P, datt, dqkv, tmp);
    return true;
  }
  int64_t KW = 2 * d->kvl, Sk = a->S * cp_of(a);
  float *dkv = calloc((size_t)(a->B * Sk * KW), sizeof *dkv), *t2 = malloc((size_t)(a->S * Sk) * sizeof *t2);
  float *loc = malloc((size_t)(a->T * KW) * sizeof *loc);
  bool ok = dkv && t2 && loc;
  (void)tmp;
  if (ok) {
    exo_attn_pos_bwd(a->B, a->S, Sk, a->tp.cp_pos, d->nhl, d->nkvl, hd, a->qkv, d->Dl, a->kvf, a->P, datt, dqkv, dkv, t2);
    a->tp.cp_reduce_scatter(a->tp.user, dkv, loc, a->B, a->S, KW);
    for (int64_t t = 0; t < a->T; t++) memcpy(dqkv + t * d->Dl + d->qdl, loc + t * KW, (size_t)KW * sizeof *loc);
  }
  free(dkv);
  free(t2);
  free(loc);
  return ok;
}

/* Runs the layer's forward from a->x, filling every saved tensor; writes y [T_loc, H]. */
static bool fwd_compute(const ex_model *md, const float *w, ex_act *a, float *y) {
  const ex_cfg *c = &md->c;
  const ex_layer_w *lw = &md->lw[a->layer];
  local_dims d = dims_of(c, &a->tp);
  int64_t T = a->T, TL = a->T_loc, H = c->H;
  bool ln = c->family == EX_GPT2, oom = false, sp = a->tp.sp && a->tp.size > 1;
  if (!a->a) a->a = fbuf(a, TL * H, &oom);
  if (!a->r1) a->r1 = fbuf(a, TL, &oom);
  if (ln && !a->mu1) a->mu1 = fbuf(a, TL, &oom);
  if (sp && !a->a_full) a->a_full = fbuf(a, T * H, &oom);
  if (!a->qkv) a->qkv = fbuf(a, T * d.Dl, &oom);
  if (!a->P) a->P = fbuf(a, a->B * d.nhl * a->S * a->S * cp_of(a), &oom);
  if (cp_of(a) > 1 && !a->kvf) a->kvf = fbuf(a, a->B * a->S * cp_of(a) * 2 * d.kvl, &oom);
  if (!a->att) a->att = fbuf(a, T * d.qdl, &oom);
  if (!a->xmid) a->xmid = fbuf(a, TL * H, &oom);
  if (!a->m) a->m = fbuf(a, TL * H, &oom);
  if (!a->r2) a->r2 = fbuf(a, TL, &oom);
  if (ln && !a->mu2) a->mu2 = fbuf(a, TL, &oom);
  if (sp && !a->m_full) a->m_full = fbuf(a, T * H, &oom);
  if (!c->E && !a->up) a->up = fbuf(a, T * d.upl, &oom);
  if (!c->E && !a->hact) a->hact = fbuf(a, T * d.Fl, &oom);
  float *full = malloc((size_t)(T * H) * sizeof *full);
  if (oom || !full) {
    free(full);
    return false;
  }
  exo_norm_fwd(ln, TL, H, c->eps, a->x, w + lw->n1w, ln ? w + lw->n1b : NULL, a->a, a->mu1, a->r1);
  const float *a_full = gather_in(a, a->a, a->a_full, H);
  qkv_fwd(c, lw, w, &d, T, a_full, a->qkv);
  rope(c, a, &d, a->qkv, false);
  if (!attn_fwd(a, &d, c->hd, true)) {
    free(full);
    return false;
  }
  exo_linear(T, H, d.qdl, a->att, d.qdl, w + lw->o + d.q0, c->nh * c->hd, NULL, full, H, 0.0f);
  reduce_out(a, full, a->xmid, H);
  for (int64_t i = 0; i < TL * H; i++) a->xmid[i] += a->x[i] + (ln ? w[lw->bo + i % H] : 0.0f);
  exo_norm_fwd(ln, TL, H, c->eps, a->xmid, w + lw->n2w, ln ? w + lw->n2b : NULL, a->m, a->mu2, a->r2);
  if (c->E) {
    if (a->sel) ex_moe_free(a, c);
    if (!ex_moe_fwd(md, lw, w, a, y)) {
      free(full);
      return false;
    }
  } else {
    const float *m_full = gather_in(a, a->m, a->m_full, H);
    up_fwd(c, lw, w, &d, T, m_full, a->up);
    if (ln)
      exo_gelu_fwd(T * d.Fl, a->up, a->hact);
    else
      exo_swiglu_fwd(T, d.Fl, a->up, a->hact);
    exo_linear(T, H, d.Fl, a->hact, d.Fl, w + lw->down + d.f0, c->F, NULL, full, H, 0.0f);
    reduce_out(a, full, y, H);
  }
  for (int64_t i = 0; i < TL * H; i++) y[i] += a->xmid[i] + (ln ? w[lw->bdown + i % H] : 0.0f);
  free(full);
  return true;
}

ex_act *ex_layer_fwd(const ex_model *m, int layer, const float *w, const float *x, float *y, int64_t B, int64_t S,
                     ex_recompute rc, const ex_tp *tp) {
  ex_act *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  a->layer = layer;
  a->B = B;
  a->S = S;
  a->T = B * S;
  a->tp = tp ? *tp : one_rank;
  a->T_loc = a->tp.sp && a->tp.size > 1 ? a->T / a->tp.size : a->T;
  a->rc = rc;
  bool oom = false;
  int64_t H = m->c.H;
  a->x = fbuf(a, a->T_loc * H, &oom);
  if (oom || (memcpy(a->x, x, (size_t)(a->T_loc * H) * sizeof(float)), !fwd_compute(m, w, a, y))) {
    ex_act_free(a);
    return NULL;
  }
  const ex_cfg *c = &m->c;
  local_dims d = dims_of(c, &a->tp);
  if (rc == EX_RC_FULL) {
    free_inner(a);
    if (c->E) ex_moe_free(a, c);
    a->bytes = (size_t)(a->T_loc * H) * sizeof(float);
  } else if (rc == EX_RC_SELECTIVE) {
    drop(a, &a->P, a->B * d.nhl * a->S * a->S * cp_of(a));
  } else if (rc == EX_RC_OP) {
    drop(a, &a->a, a->T_loc * H);
    drop(a, &a->a_full, a->T * H);
    drop(a, &a->m, a->T_loc * H);
    drop(a, &a->m_full, a->T * H);
    if (!c->E) drop(a, &a->hact, a->T * d.Fl);
  }
  return a;
}

/* Brings back what the recompute policy dropped. */
static bool restore(const ex_model *md, const float *w, ex_act *a) {
  const ex_cfg *c = &md->c;
  const ex_layer_w *lw = &md->lw[a->layer];
  local_dims d = dims_of(c, &a->tp);
  int64_t T = a->T, TL = a->T_loc, H = c->H;
  bool ln = c->family == EX_GPT2, oom = false, sp = a->tp.sp && a->tp.size > 1;
  if (a->rc == EX_RC_FULL) {
    float *y = malloc((size_t)(TL * H) * sizeof *y);
    bool ok = y && fwd_compute(md, w, a, y);
    free(y);
    return ok;
  }
  if (a->rc == EX_RC_SELECTIVE) {
    a->P = fbuf(a, a->B * d.nhl * a->S * a->S * cp_of(a), &oom);
    float *keep = a->att, *tmp = malloc((size_t)(T * d.qdl) * sizeof *tmp);
    if (oom || !tmp) {
      free(tmp);
      return false;
    }
    a->att = tmp; /* the probabilities again; the output is kept already */
    bool ok = attn_fwd(a, &d, c->hd, false);
    a->att = keep;
    free(tmp);
    if (!ok) return false;
  } else if (a->rc == EX_RC_OP) {
    a->a = fbuf(a, TL * H, &oom);
    a->m = fbuf(a, TL * H, &oom);
    if (sp) a->a_full = fbuf(a, T * H, &oom);
    if (sp) a->m_full = fbuf(a, T * H, &oom);
    if (!c->E) a->hact = fbuf(a, T * d.Fl, &oom);
    if (oom) return false;
    exo_norm_fwd(ln, TL, H, c->eps, a->x, w + lw->n1w, ln ? w + lw->n1b : NULL, a->a, a->mu1, a->r1);
    exo_norm_fwd(ln, TL, H, c->eps, a->xmid, w + lw->n2w, ln ? w + lw->n2b : NULL, a->m, a->mu2, a->r2);
    gather_in(a, a->a, a->a_full, H);
    if (c->E) /* the MoE router's input, gathered as the MoE MLP's mode needs */
      ex_moe_gather(a, H, a->m, a->m_full);
    else
      gather_in(a, a->m, a->m_full, H);
    if (!c->E) {
      if (ln)
        exo_gelu_fwd(T * d.Fl, a->up, a->hact);
      else
        exo_swiglu_fwd(T, d.Fl, a->up, a->hact);
    }
  }
  return true;
}

/* Σ over rows of dy [TL, H] into the bias gradient gb. */
static void bias_grad(float *gb, const float *dy, int64_t TL, int64_t H) {
  for (int64_t t = 0; t < TL; t++)
    for (int64_t h = 0; h < H; h++) gb[h] += dy[t * H + h];
}

/* The backward; under a->defer the weight-gradient GEMMs are recorded, not run. Keeps a. */
static bool bwd_impl(const ex_model *md, const float *w, float *g, ex_act *a, const float *dy, float *dx) {
  const ex_cfg *c = &md->c;
  const ex_layer_w *lw = &md->lw[a->layer];
  if (!restore(md, w, a)) return false;
  local_dims d = dims_of(c, &a->tp);
  int64_t T = a->T, TL = a->T_loc, H = c->H;
  bool ln = c->family == EX_GPT2, sp = a->tp.sp && a->tp.size > 1;
  /* Parameters every rank computes whole (norms, row-parallel biases) without sequence parallelism. */
  float *gr = a->tp.size > 1 && !sp && a->tp.g_repl ? a->tp.g_repl : g;
  float *dxm = malloc((size_t)(TL * H) * sizeof *dxm), *dm = malloc((size_t)(T * H) * sizeof *dm);
  float *dfull = malloc((size_t)(T * H) * sizeof *dfull);
  float *dh = malloc((size_t)(T * (d.qdl > d.Fl ? d.qdl : d.Fl)) * sizeof *dh);
  float *dup = malloc((size_t)(T * (d.upl > d.Dl ? d.upl : d.Dl)) * sizeof *dup);
  float *tmp = malloc((size_t)(a->S * a->S) * sizeof *tmp);
  bool ok = dxm && dm && dfull && dh && dup && tmp;
  if (ok) {
    /* MLP: y = x_mid + MLP(m) (+ b_down) */
    if (c->E) {
      ok = ex_moe_bwd(md, lw, w, g, a, dy, dm);
    } else {
      if (ln) bias_grad(gr + lw->bdown, dy, TL, H);
      const float *dy_full = gather_in(a, dy, dfull, H); /* the backward of reduce-scatter; of all-reduce: identity */
      ok = lin_bwd(a, T, H, d.Fl, a->hact, d.Fl, w + lw->down + d.f0, c->F, dy_full, H, dh, d.Fl, 0.0f,
                   g + lw->down + d.f0, NULL);
      if (ln)
        exo_gelu_bwd(T * d.Fl, a->up, dh, dup);
      else
        exo_swiglu_bwd(T, d.Fl, a->up, dh, dup);
      ok = ok && up_bwd(a, c, lw, w, g, &d, T, a->m_full ? a->m_full : a->m, dup, dm);
      reduce_out(a, dm, dm, H); /* the backward of the input's all-gather (or of its copy to every rank) */
    }
  }
  if (ok) {
    exo_norm_bwd(ln, TL, H, a->xmid, w + lw->n2w, a->mu2, a->r2, dm, dxm, gr + lw->n2w, ln ? gr + lw->n2b : NULL);
    for (int64_t i = 0; i < TL * H; i++) dxm[i] += dy[i];
    /* Attention: x_mid = x + O(att) (+ b_o) */
    if (ln) bias_grad(gr + lw->bo, dxm, TL, H);
    const float *do_full = gather_in(a, dxm, dfull, H);
    ok = lin_bwd(a, T, H, d.qdl, a->att, d.qdl, w + lw->o + d.q0, c->nh * c->hd, do_full, H, dh, d.qdl, 0.0f,
                 g + lw->o + d.q0, NULL);
    ok = ok && attn_bwd(a, &d, c->hd, dh, dup, tmp);
    rope(c, a, &d, dup, true);
    ok = ok && qkv_bwd(a, c, lw, w, g, &d, T, a->a_full ? a->a_full : a->a, dup, dm);
    reduce_out(a, dm, dm, H);
    exo_norm_bwd(ln, TL, H, a->x, w + lw->n1w, a->mu1, a->r1, dm, dx, gr + lw->n1w, ln ? gr + lw->n1b : NULL);
    for (int64_t i = 0; i < TL * H; i++) dx[i] += dxm[i];
  }
  free(dxm);
  free(dm);
  free(dfull);
  free(dh);
  free(dup);
  free(tmp);
  return ok;
}

bool ex_layer_bwd(const ex_model *md, const float *w, float *g, ex_act *a, const float *dy, float *dx) {
  bool ok = bwd_impl(md, w, g, a, dy, dx);
  ex_act_free(a);
  return ok;
}

bool ex_layer_bwd_input(const ex_model *md, const float *w, float *g, ex_act *a, const float *dy, float *dx) {
  a->defer = true;
  return bwd_impl(md, w, g, a, dy, dx);
}

void ex_layer_bwd_weight(ex_act *a) {
  for (int i = 0; i < a->n_wrec; i++) {
    const ex_wrec *r = &a->wrec[i];
    exo_linear_wgrad(r->T, r->out, r->in, r->x, r->ldx, r->dy, r->out, r->dW, r->ldw);
  }
  ex_act_free(a);
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
    exo_norm_fwd(ln, T, H, c->eps, x, w + m->nfw, ln ? w + m->nfb : NULL, y, mu, r);
    exo_linear(T, V, H, y, H, w + m->head, H, NULL, logits, V, 0.0f);
    loss = exo_xent(T, V, logits, labels, scale, dlog);
    exo_linear_bwd(T, V, H, y, H, w + m->head, H, dlog, V, dy, H, 0.0f, g + m->head, NULL);
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
