/* The MoE MLP (exec layer; declared in ex_act.h): Mixtral's sparse block (transformers modeling_mixtral.py,
 * MixtralSparseMoeBlock at v4.46): router logits, softmax over all experts, the top k, their weights renormalised
 * to sum to 1 (so they are the softmax over the chosen logits), dropless (every token reaches its k experts),
 * no auxiliary loss. Each expert is a SwiGLU MLP over the tokens routed to it.
 *
 * Expert parallelism (Lepikhin et al. 2021, GShard §2.2; Megatron-LM's MoEAlltoAllTokenDispatcher): rank r of
 * the ep group owns experts [r·E/ep, (r+1)·E/ep). A rank sends each routed token row to its expert's owner
 * (all-to-all, rows ordered by owner, then expert, then token), the owner runs its experts over the rows of
 * every rank, and the outputs come back by the reverse all-to-all; the backward sends the output gradients
 * the same way and returns the input gradients. With one rank the exchange is a copy, and the arithmetic is
 * the same in either case: the rows of an expert are the same rows in the same order.
 *
 * Under tensor parallelism (which MoE layers take with sequence parallelism, etp = tp: Megatron's all-gather
 * token dispatcher) the layer's input rows are all-gathered, every tp rank routes the whole micro-batch alike,
 * and each runs its share of every expert's width (w1/w3 rows, w2 columns, as the dense MLP); the expert outputs
 * are all-reduced over tp, so the routing weights' gradient sees the whole output, and the rank keeps its rows.
 * In the backward the input gradient's partial sums are reduce-scattered; the router, computed whole on every
 * tp rank, adds its part once (tp rank 0) and keeps its weight gradient from tp rank 0 (g_repl elsewhere).
 * Expert tensor parallelism between 1 and tp (Megatron-LM's --expert-tensor-parallel-size; the expert mesh of
 * plan.h, etp innermost): the same within each etp group, whose ranks gather their rows (in rank order), split
 * every expert's width etp ways, sum the outputs over the group and reduce-scatter the input gradient back; the
 * ep all-to-all runs between the ranks of one etp rank. Every (expert, width share) is then one rank's of each
 * tensor-parallel group, so the step's tp all-reduce and the data-parallel reduction add up its gradient. */
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
  (void)c;
  for (int e = 0; e < EX_MAX_EXPERTS; e++) {
    free(a->x_e[e]);
    free(a->up_e[e]);
    free(a->h_e[e]);
    a->x_e[e] = a->up_e[e] = a->h_e[e] = NULL;
    a->n_e[e] = 0;
  }
  free(a->sel);
  free(a->order);
  free(a->yrow);
  free(a->cnt_send);
  free(a->cnt_recv);
  a->sel = NULL;
  a->order = NULL;
  a->yrow = NULL;
  a->cnt_send = a->cnt_recv = NULL;
}

static int ep_size(const ex_act *a) { return a->tp.ep_size > 1 ? a->tp.ep_size : 1; }

/* Rows per rank from per-(rank, local expert) counts. */
static void rows_per_rank(const int64_t *cnt, int ep, int64_t el, int64_t *rows) {
  for (int d = 0; d < ep; d++) {
    rows[d] = 0;
    for (int64_t e = 0; e < el; e++) rows[d] += cnt[d * el + e];
  }
}

/* The all-to-all of rows of H floats: send has send_rows[d] rows for rank d in order; recv gets recv_rows[s]. */
static void exchange(const ex_act *a, const float *send, const int64_t *send_rows, float *recv, const int64_t *recv_rows,
                     int64_t H) {
  if (ep_size(a) == 1) {
    memcpy(recv, send, (size_t)(send_rows[0] * H) * sizeof *recv);
    return;
  }
  a->tp.ep_rows(a->tp.user, send, send_rows, recv, recv_rows, H);
}

/* Offset in the owner's received layout (source-major, then local expert) of source s's rows of expert e. */
static int64_t recv_offset(const int64_t *cnt_recv, int ep, int64_t el, int s, int64_t e) {
  int64_t off = 0;
  for (int s2 = 0; s2 < ep; s2++)
    for (int64_t e2 = 0; e2 < el; e2++) {
      if (s2 == s && e2 == e) return off;
      off += cnt_recv[s2 * el + e2];
    }
  return off;
}

/* Routing: probabilities, the top k and their renormalised weights. */
static void route(const ex_cfg *c, ex_act *a, int64_t T) {
  int64_t E = c->E, K = c->K;
  for (int64_t t = 0; t < T; t++) {
    float *p = a->probs + t * E, mx = p[0];
    for (int64_t e = 1; e < E; e++) mx = p[e] > mx ? p[e] : mx;
    double sum = 0.0;
    for (int64_t e = 0; e < E; e++) sum += (p[e] = expf(p[e] - mx));
    for (int64_t e = 0; e < E; e++) p[e] = (float)(p[e] / sum);
    double tot = 0.0; /* top k, ties to the lower index */
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
}

/* The experts split over the tensor-parallel ranks (etp = tp); with etp = 1 (expert_whole) each rank routes its own
 * sequence-parallel rows to whole experts and no tensor-parallel collective runs in the MoE MLP; with 1 < etp < tp
 * (part_on) the etp group's rows are gathered and its ranks split every expert's width etp ways, as with etp = tp
 * within the smaller group (Megatron-LM's expert tensor parallel group, parallel_state.py; the group's rows in
 * rank order, since routing treats rows one by one). */
static bool part_on(const ex_act *a) { return a->tp.size > 1 && a->tp.etp_size > 1 && a->tp.etp_size < a->tp.size; }
static bool tp_on(const ex_act *a) { return a->tp.size > 1 && !a->tp.expert_whole && !part_on(a); }
/* The rows the MoE MLP routes: the whole micro-batch (gathered) with etp = tp, the etp group's with 1 < etp < tp,
 * else the rank's own. */
static int64_t rows_of(const ex_act *a) {
  return tp_on(a) ? a->T : part_on(a) ? a->tp.etp_size * a->T_loc : a->T_loc;
}
/* The ranks an expert's width is split over and this rank's place among them. */
static int64_t width_ways(const ex_act *a) { return tp_on(a) ? a->tp.size : part_on(a) ? a->tp.etp_size : 1; }
static int64_t width_rank(const ex_act *a) { return tp_on(a) ? a->tp.rank : part_on(a) ? a->tp.etp_rank : 0; }

/* The MoE MLP's input rows [rows_of, H] into full: gathered over tp (etp = tp) or over the etp group (1 < etp < tp);
 * nothing to gather otherwise. Also the backward's output gradient, and restore's (ex_layer.c) m_full. */
bool ex_moe_gather(const ex_act *a, int64_t H, const float *loc, float *full) {
  if (tp_on(a)) a->tp.all_gather_seq(a->tp.user, loc, full, a->B, a->S, H);
  else if (part_on(a)) a->tp.etp_gather(a->tp.user, loc, full, a->T_loc * H);
  return tp_on(a) || part_on(a);
}

/* This tp rank's share of an expert: rows [f0, f0 + Fl) of w1 and of w3, columns of w2. */
static void expert_fwd(const ex_cfg *c, const float *w13, const float *w2, int64_t f0, int64_t Fl, int64_t ne,
                       const float *x, float *up, float *h, float *y) {
  int64_t H = c->H, F = c->F;
  exo_linear(ne, Fl, H, x, H, w13 + f0 * H, H, NULL, up, 2 * Fl, 0.0f);
  exo_linear(ne, Fl, H, x, H, w13 + (F + f0) * H, H, NULL, up + Fl, 2 * Fl, 0.0f);
  exo_swiglu_fwd(ne, Fl, up, h);
  exo_linear(ne, H, Fl, h, Fl, w2 + f0, F, NULL, y, H, 0.0f);
}

static void expert_bwd(const ex_cfg *c, const float *w13, const float *w2, float *g13, float *g2, int64_t f0,
                       int64_t Fl, int64_t ne, const float *x, const float *up, const float *h, const float *dy,
                       float *dh, float *dup, float *dx) {
  int64_t H = c->H, F = c->F;
  exo_linear_bwd(ne, H, Fl, h, Fl, w2 + f0, F, dy, H, dh, Fl, 0.0f, g2 + f0, NULL);
  exo_swiglu_bwd(ne, Fl, up, dh, dup);
  exo_linear_bwd(ne, Fl, H, x, H, w13 + f0 * H, H, dup, 2 * Fl, dx, H, 0.0f, g13 + f0 * H, NULL);
  exo_linear_bwd(ne, Fl, H, x, H, w13 + (F + f0) * H, H, dup + Fl, 2 * Fl, dx, H, 1.0f, g13 + (F + f0) * H, NULL);
}

bool ex_moe_fwd(const ex_model *md, const ex_layer_w *lw, const float *w, ex_act *a, float *out_loc) {
  const ex_cfg *c = &md->c;
  int ep = ep_size(a), me = ep > 1 ? a->tp.ep_rank : 0;
  int64_t T = rows_of(a), H = c->H, E = c->E, K = c->K, el = E / ep, n = T * K;
  int64_t Fl = c->F / width_ways(a), f0 = width_rank(a) * Fl, F = Fl;
  bool oom = false, split = tp_on(a) || part_on(a);
  /* the whole micro-batch's rows (gathered under tensor parallelism), or the etp group's */
  if (split && !a->m_full) a->m_full = fbuf(a, T * H, &oom);
  if (oom) return false;
  ex_moe_gather(a, H, a->m, a->m_full);
  const float *m = split ? a->m_full : a->m;
  float *out = split ? malloc((size_t)(T * H) * sizeof *out) : out_loc;
  if (!out) return false;
  if (!a->probs) a->probs = fbuf(a, T * E, &oom);
  if (!a->wt) a->wt = fbuf(a, T * K, &oom);
  a->sel = calloc((size_t)n, sizeof *a->sel);
  a->order = calloc((size_t)n, sizeof *a->order);
  a->yrow = fbuf(a, n * H, &oom);
  a->cnt_send = calloc((size_t)(ep * el), sizeof *a->cnt_send);
  a->cnt_recv = calloc((size_t)(ep * el), sizeof *a->cnt_recv);
  int64_t *rows_s = calloc((size_t)ep, sizeof *rows_s), *rows_r = calloc((size_t)ep, sizeof *rows_r);
  float *xs = malloc((size_t)(n * H) * sizeof *xs);
  bool ok = !oom && a->sel && a->order && a->cnt_send && a->cnt_recv && rows_s && rows_r && xs;
  float *xr = NULL, *yr = NULL;
  if (ok) {
    exo_linear(T, E, H, m, H, w + lw->router, H, NULL, a->probs, E, 0.0f);
    route(c, a, T);
    int64_t j = 0; /* send order: by expert (so by owner, then local expert), then token */
    for (int64_t e = 0; e < E; e++)
      for (int64_t i = 0; i < n; i++)
        if (a->sel[i] == e) {
          a->order[j] = (int32_t)i;
          memcpy(xs + j * H, m + (i / K) * H, (size_t)H * sizeof *xs);
          a->cnt_send[e]++;
          j++;
        }
    if (ep == 1)
      memcpy(a->cnt_recv, a->cnt_send, (size_t)el * sizeof *a->cnt_recv);
    else
      a->tp.ep_counts(a->tp.user, a->cnt_send, a->cnt_recv, el);
    rows_per_rank(a->cnt_send, ep, el, rows_s);
    rows_per_rank(a->cnt_recv, ep, el, rows_r);
    int64_t n_r = 0;
    for (int s = 0; s < ep; s++) n_r += rows_r[s];
    xr = malloc((size_t)(n_r ? n_r * H : 1) * sizeof *xr);
    yr = malloc((size_t)(n_r ? n_r * H : 1) * sizeof *yr);
    ok = xr && yr;
    if (ok) exchange(a, xs, rows_s, xr, rows_r, H);
    /* the owner: each local expert over the rows of every source */
    for (int64_t e = 0; e < el && ok; e++) {
      int64_t ne = 0;
      for (int s = 0; s < ep; s++) ne += a->cnt_recv[s * el + e];
      a->n_e[e] = ne;
      a->x_e[e] = fbuf(a, ne * H, &oom);
      a->up_e[e] = fbuf(a, ne * 2 * F, &oom);
      a->h_e[e] = fbuf(a, ne * F, &oom);
      float *ye = malloc((size_t)(ne ? ne * H : 1) * sizeof *ye);
      ok = !oom && ye;
      for (int s = 0, at = 0; s < ep && ok; s++) {
        int64_t off = recv_offset(a->cnt_recv, ep, el, s, e), cnt = a->cnt_recv[s * el + e];
        memcpy(a->x_e[e] + at * H, xr + off * H, (size_t)(cnt * H) * sizeof(float));
        at += (int)cnt;
      }
      int64_t ge = (int64_t)me * el + e; /* the global expert */
      if (ok && ne) expert_fwd(c, w + lw->e13[ge], w + lw->e2[ge], f0, Fl, ne, a->x_e[e], a->up_e[e], a->h_e[e], ye);
      for (int s = 0, at = 0; s < ep && ok; s++) {
        int64_t off = recv_offset(a->cnt_recv, ep, el, s, e), cnt = a->cnt_recv[s * el + e];
        memcpy(yr + off * H, ye + at * H, (size_t)(cnt * H) * sizeof(float));
        at += (int)cnt;
      }
      free(ye);
    }
  }
  if (ok) {
    exchange(a, yr, rows_r, a->yrow, rows_s, H);
    if (tp_on(a)) a->tp.all_reduce(a->tp.user, a->yrow, n * H); /* each tp rank's share of the width, summed */
    if (part_on(a)) a->tp.etp_all_reduce(a->tp.user, a->yrow, n * H);
    memset(out, 0, (size_t)(T * H) * sizeof *out);
    for (int64_t j = 0; j < n; j++) {
      int64_t slot = a->order[j];
      float wk = a->wt[slot], *o = out + (slot / K) * H;
      for (int64_t h = 0; h < H; h++) o[h] += wk * a->yrow[j * H + h];
    }
    if (tp_on(a)) { /* this rank's positions of each sequence */
      int64_t Sl = a->S / a->tp.size;
      for (int64_t b = 0; b < a->B; b++)
        memcpy(out_loc + b * Sl * H, out + (b * a->S + (int64_t)a->tp.rank * Sl) * H, (size_t)(Sl * H) * sizeof *out);
    }
    if (part_on(a)) /* this rank's block of the group's rows */
      memcpy(out_loc, out + a->tp.etp_rank * a->T_loc * H, (size_t)(a->T_loc * H) * sizeof *out);
  }
  if (out != out_loc) free(out);
  free(rows_s);
  free(rows_r);
  free(xs);
  free(xr);
  free(yr);
  return ok;
}

bool ex_moe_bwd(const ex_model *md, const ex_layer_w *lw, const float *w, float *g, ex_act *a, const float *dout_loc,
                float *dm_loc) {
  const ex_cfg *c = &md->c;
  int ep = ep_size(a), me = ep > 1 ? a->tp.ep_rank : 0;
  int64_t T = rows_of(a), H = c->H, E = c->E, K = c->K, el = E / ep, n = T * K;
  int64_t Fl = c->F / width_ways(a), f0 = width_rank(a) * Fl, F = Fl;
  bool split = tp_on(a) || part_on(a);
  float *dout_full = split ? malloc((size_t)(T * H) * sizeof *dout_full) : NULL;
  float *dm = split ? malloc((size_t)(T * H) * sizeof *dm) : dm_loc;
  if (split && (!dout_full || !dm)) {
    free(dout_full);
    free(dm);
    return false;
  }
  ex_moe_gather(a, H, dout_loc, dout_full); /* the backward of keeping rows */
  const float *dout = split ? dout_full : dout_loc, *m = split ? a->m_full : a->m;
  /* The router runs alike on every rank of the group that gathered its rows: its gradients are kept from the
   * group's first rank (tp rank 0; with 1 < etp < tp each etp group's rank 0, whose sum over the groups the
   * step's tensor-parallel all-reduce forms), the other ranks' go to g_repl. */
  bool first = tp_on(a) ? a->tp.rank == 0 : part_on(a) ? a->tp.etp_rank == 0 : true;
  float *g_router = first || !a->tp.g_repl ? g : a->tp.g_repl;
  float *dwt = calloc((size_t)n, sizeof *dwt), *dlog = calloc((size_t)(T * E), sizeof *dlog);
  float *dys = malloc((size_t)(n * H) * sizeof *dys), *dxs = malloc((size_t)(n * H) * sizeof *dxs);
  int64_t *rows_s = calloc((size_t)ep, sizeof *rows_s), *rows_r = calloc((size_t)ep, sizeof *rows_r);
  bool ok = dwt && dlog && dys && dxs && rows_s && rows_r;
  float *dyr = NULL, *dxr = NULL;
  if (ok) {
    for (int64_t j = 0; j < n; j++) {
      int64_t slot = a->order[j], t = slot / K;
      double dot = 0.0;
      for (int64_t h = 0; h < H; h++) {
        dot += (double)dout[t * H + h] * a->yrow[j * H + h];
        dys[j * H + h] = a->wt[slot] * dout[t * H + h];
      }
      dwt[slot] = (float)dot;
    }
    rows_per_rank(a->cnt_send, ep, el, rows_s);
    rows_per_rank(a->cnt_recv, ep, el, rows_r);
    int64_t n_r = 0;
    for (int s = 0; s < ep; s++) n_r += rows_r[s];
    dyr = malloc((size_t)(n_r ? n_r * H : 1) * sizeof *dyr);
    dxr = malloc((size_t)(n_r ? n_r * H : 1) * sizeof *dxr);
    ok = dyr && dxr;
    if (ok) exchange(a, dys, rows_s, dyr, rows_r, H);
  }
  for (int64_t e = 0; e < el && ok; e++) {
    int64_t ne = a->n_e[e], ge = (int64_t)me * el + e;
    if (!ne) continue;
    float *dy = malloc((size_t)(ne * H) * sizeof *dy), *dh = malloc((size_t)(ne * F) * sizeof *dh),
          *dup = malloc((size_t)(ne * 2 * F) * sizeof *dup), *dx = malloc((size_t)(ne * H) * sizeof *dx);
    ok = dy && dh && dup && dx;
    for (int s = 0, at = 0; s < ep && ok; s++) {
      int64_t off = recv_offset(a->cnt_recv, ep, el, s, e), cnt = a->cnt_recv[s * el + e];
      memcpy(dy + at * H, dyr + off * H, (size_t)(cnt * H) * sizeof(float));
      at += (int)cnt;
    }
    if (ok)
      expert_bwd(c, w + lw->e13[ge], w + lw->e2[ge], g + lw->e13[ge], g + lw->e2[ge], f0, Fl, ne, a->x_e[e], a->up_e[e],
                 a->h_e[e], dy, dh, dup, dx);
    for (int s = 0, at = 0; s < ep && ok; s++) {
      int64_t off = recv_offset(a->cnt_recv, ep, el, s, e), cnt = a->cnt_recv[s * el + e];
      memcpy(dxr + off * H, dx + at * H, (size_t)(cnt * H) * sizeof(float));
      at += (int)cnt;
    }
    free(dy);
    free(dh);
    free(dup);
    free(dx);
  }
  if (ok) {
    exchange(a, dxr, rows_r, dxs, rows_s, H);
    memset(dm, 0, (size_t)(T * H) * sizeof *dm);
    for (int64_t j = 0; j < n; j++) {
      int64_t t = a->order[j] / K;
      for (int64_t h = 0; h < H; h++) dm[t * H + h] += dxs[j * H + h];
    }
    /* w_k = softmax over the chosen logits, so ∂L/∂logit_j = w_j·(dw_j − Σ_k w_k·dw_k) for chosen j, else 0. */
    for (int64_t t = 0; t < T; t++) {
      double s = 0.0;
      for (int64_t k = 0; k < K; k++) s += (double)a->wt[t * K + k] * dwt[t * K + k];
      for (int64_t k = 0; k < K; k++)
        dlog[t * E + a->sel[t * K + k]] = a->wt[t * K + k] * (dwt[t * K + k] - (float)s);
    }
    /* the router's part of dm once per group (its first rank), as its weight gradient */
    exo_linear_bwd(T, E, H, m, H, w + lw->router, H, dlog, E, first ? dm : NULL, H, 1.0f, g_router + lw->router, NULL);
    if (tp_on(a)) a->tp.reduce_scatter_seq(a->tp.user, dm, dm_loc, a->B, a->S, H);
    if (part_on(a)) a->tp.etp_reduce_scatter(a->tp.user, dm, dm_loc, a->T_loc * H);
  }
  free(dout_full);
  if (dm != dm_loc) free(dm);
  free(dwt);
  free(dlog);
  free(dys);
  free(dxs);
  free(dyr);
  free(dxr);
  free(rows_s);
  free(rows_r);
  return ok;
}
