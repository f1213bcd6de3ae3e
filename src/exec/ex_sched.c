/* The order of pipeline work each rank follows (exec layer; ex_sched.h): one function that turns the plan's
 * schedule into a per-rank list of forward and backward items. It stands in for the shared schedule data
 * (src/plan/schedule.{c,h}, being written elsewhere) until that lands; its output shape, a per-rank timeline of
 * (kind, micro-batch, chunk), is meant to be replaced by that data one for one.
 *  - gpipe (Huang et al. 2019): every forward, then every backward.
 *  - 1f1b (PipeDream-Flush, Narayanan et al. 2021 §2.2): pp − r − 1 warm-up forwards, then one forward and one
 *    backward in turn, then the remaining backwards.
 *  - interleaved-1f1b (Narayanan et al. 2021 §2.2): Megatron-LM's order (megatron/core/pipeline_parallel/
 *    schedules.py, forward_backward_pipelining_with_interleaving at core_r0.9.0): virtual micro-batch k runs
 *    local chunk (k mod pp·vpp) div pp (reversed for backwards) on micro-batch (k div pp·vpp)·pp + k mod pp,
 *    with (pp − r − 1)·2 + (vpp − 1)·pp warm-up forwards.
 *  - zb-h1 and zb-v (Qi et al. 2024 §2.1 and §6) split each backward into B (input gradient) and W (weight
 *    gradient). Their order here comes from a unit-time list schedule of the plan's chunk placement (zb-v's V:
 *    plan_chunk_rank): at each step every rank runs a ready B if it has one, else a ready F while its live
 *    activations (F done, W not) stay under the schedule's bound — 1F1B's pp − r micro-batches for zb-h1, 2·pp
 *    chunk activations (pp micro-batches of two half-stages) for zb-v — else its oldest pending W, which thus fills
 *    what would be bubbles. It keeps each schedule's placement and memory bound and the zero-bubble principle of
 *    W passes in the gaps, not the papers' hand-built timelines. The simulated timeline is a witness that the
 *    order runs without deadlock.
 */
#include <stdlib.h>

#include "exec/ex_sched.h"
#include "plan/plan.h"

static int push(rk_item *items, int n, int cap, rk_kind k, int64_t mb, int64_t chunk) {
  if (n < cap) items[n] = (rk_item){k, (int32_t)mb, (int32_t)chunk};
  return n + 1;
}

/* Megatron's virtual micro-batch k of rank r: its global chunk and micro-batch. */
static void virtual_mb(const rk_plan *p, int r, int64_t k, bool forward, int64_t *chunk, int64_t *mb) {
  int64_t group = p->pp * p->vpp, in_group = k % group, local = in_group / p->pp;
  if (!forward) local = p->vpp - 1 - local;
  *chunk = local * p->pp + r;
  *mb = (k / group) * p->pp + in_group % p->pp;
}

/* The list schedule above. Returns the number of items of rank me, or -1 on a stall or out of memory. */
static int zero_bubble(const rk_plan *p, int me, rk_item *items, int cap, bool v_shape) {
  int64_t C = p->pp * p->vpp, M = p->n_mb, n = M * C;
  /* per (mb, chunk): the step at which F, B, W finished (-1 not yet) */
  int64_t *f = malloc((size_t)n * sizeof *f), *b = malloc((size_t)n * sizeof *b), *w = malloc((size_t)n * sizeof *w);
  int64_t *live = calloc((size_t)p->pp, sizeof *live);
  int count = 0;
  bool ok = f && b && w && live;
  for (int64_t i = 0; ok && i < n; i++) f[i] = b[i] = w[i] = -1;
  int64_t done = 0;
  for (int64_t t = 0; ok && done < 3 * n; t++) {
    int64_t progressed = 0;
    for (int r = 0; r < p->pp; r++) {
      int64_t limit = v_shape ? 2 * p->pp : p->pp - r, pick = -1;
      rk_kind kind = RK_F;
      for (int64_t i = 0; i < n && pick < 0; i++) { /* B: the lowest micro-batch, then the latest chunk */
        int64_t mb = i / C, c = C - 1 - i % C, k = mb * C + c;
        if (p->chunk_rank[c] != r || b[k] >= 0 || f[k] < 0 || f[k] >= t) continue;
        if (c == C - 1 || (b[k + 1] >= 0 && b[k + 1] < t)) pick = k, kind = RK_B;
      }
      for (int64_t i = 0; i < n && pick < 0 && live[r] < limit; i++) { /* F: the lowest micro-batch, latest chunk */
        int64_t mb = i / C, c = C - 1 - i % C, k = mb * C + c;
        if (p->chunk_rank[c] != r || f[k] >= 0) continue;
        if (c == 0 || (f[k - 1] >= 0 && f[k - 1] < t)) pick = k, kind = RK_F;
      }
      for (int64_t i = 0; i < n && pick < 0; i++) /* W: the oldest B first */
        if (p->chunk_rank[i % C] == r && b[i] >= 0 && b[i] < t && w[i] < 0) pick = i, kind = RK_W;
      if (pick < 0) continue;
      if (kind == RK_F) f[pick] = t, live[r]++;
      if (kind == RK_B) b[pick] = t;
      if (kind == RK_W) w[pick] = t, live[r]--;
      if (r == me) {
        if (count < cap) items[count] = (rk_item){kind, (int32_t)(pick / C), (int32_t)(pick % C)};
        count++;
      }
      progressed++;
      done++;
    }
    if (!progressed) ok = false; /* nothing could run: a stall */
  }
  free(f);
  free(b);
  free(w);
  free(live);
  return ok && count <= cap ? count : -1;
}

int rk_schedule_order(const rk_plan *p, int r, rk_item *items, int cap) {
  int n = 0;
  int64_t nmb = p->n_mb;
  if (p->schedule == PLAN_SCHED_GPIPE) {
    for (int64_t i = 0; i < nmb; i++) n = push(items, n, cap, RK_F, i, r);
    for (int64_t i = 0; i < nmb; i++) n = push(items, n, cap, RK_B, i, r);
  } else if (p->schedule == PLAN_SCHED_1F1B) {
    int64_t warm = p->pp - r - 1 < nmb ? p->pp - r - 1 : nmb;
    for (int64_t i = 0; i < warm; i++) n = push(items, n, cap, RK_F, i, r);
    for (int64_t i = 0; i < nmb - warm; i++) {
      n = push(items, n, cap, RK_F, warm + i, r);
      n = push(items, n, cap, RK_B, i, r);
    }
    for (int64_t i = nmb - warm; i < nmb; i++) n = push(items, n, cap, RK_B, i, r);
  } else if (p->schedule == PLAN_SCHED_INTERLEAVED_1F1B) {
    int64_t total = nmb * p->vpp, warm = (p->pp - r - 1) * 2 + (p->vpp - 1) * p->pp, chunk, mb;
    if (warm > total) warm = total;
    for (int64_t k = 0; k < warm; k++) {
      virtual_mb(p, r, k, true, &chunk, &mb);
      n = push(items, n, cap, RK_F, mb, chunk);
    }
    for (int64_t i = 0; i < total - warm; i++) {
      virtual_mb(p, r, warm + i, true, &chunk, &mb);
      n = push(items, n, cap, RK_F, mb, chunk);
      virtual_mb(p, r, i, false, &chunk, &mb);
      n = push(items, n, cap, RK_B, mb, chunk);
    }
    for (int64_t k = total - warm; k < total; k++) {
      virtual_mb(p, r, k, false, &chunk, &mb);
      n = push(items, n, cap, RK_B, mb, chunk);
    }
  } else if (p->schedule == PLAN_SCHED_ZB_H1 || p->schedule == PLAN_SCHED_ZB_V) {
    return zero_bubble(p, r, items, cap, p->schedule == PLAN_SCHED_ZB_V);
  } else {
    return -1;
  }
  return n <= cap ? n : -1;
}
