/* The order of pipeline work each rank follows (exec layer, rank program): one function that turns the plan's
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
 * zb-h1 and zb-v split each backward into input and weight gradients; the executor does not split them yet. */
#include "exec/rank.h"
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
  } else {
    return -1;
  }
  return n <= cap ? n : -1;
}
