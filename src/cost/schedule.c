/* Closed-form pipeline schedule times (cost layer): the fast screen that every plan gets; sim.c simulates the
 * finalists event by event. Per pipeline rank r, tf and tb are one micro-batch's forward and backward time of
 * all the rank's chunks (recompute and exposed communication included) and tw the weight-gradient part of tb. */
#include <math.h>

#include "cost/bound.h"
#include "cost/internal.h"

double schedule_time_s(const plan *p, const rank_cost *rc, int n, cost_time *out) {
  (void)out; /* the breakdown is filled by estimate.c from the per-rank sums */
  double m = (double)p->n_micro_batches, v = (double)p->vpp;
  double sum = 0, max = 0, zb_sum = 0, zb_max = 0, zbv_sum = 0, zbv_max = 0;
  for (int r = 0; r < n; r++) {
    double t = rc[r].tf + rc[r].tb;
    sum += t;
    max = fmax(max, t);
    /* Zero-bubble schedules fill the drain with deferred weight-gradient work: the bubble of a rank shrinks from
     * tf + tb to tf + tb - 2·tw (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", §2.1, ZB-H1). */
    double zb = fmax(0, t - COST_ZB_H1_W_MULT * rc[r].tw);
    zb_sum += zb;
    zb_max = fmax(zb_max, zb);
    /* ZB-V: two chunks per rank in a V; the fill of each chunk pass is its F + B − 3·W, zero when the three are
     * equal (Qi et al. 2024 §6: "zero bubble when T_F = T_B = T_W"), in half-stage units. */
    double zbv = fmax(0, t - COST_ZB_V_W_MULT * rc[r].tw) / 2;
    zbv_sum += zbv;
    zbv_max = fmax(zbv_max, zbv);
  }
  switch (p->schedule) {
  case PLAN_SCHED_GPIPE:
  case PLAN_SCHED_1F1B:
    /* Each micro-batch passes every rank once; the slowest rank sets the pace for the other m - 1 (GPipe, Huang
     * et al. 2019 §2.3; 1F1B has the same time, Narayanan et al. 2021 §2.2.1: bubble (p-1)/m for equal ranks). */
    return sum + (m - 1) * max;
  case PLAN_SCHED_INTERLEAVED_1F1B:
    /* v chunks per rank shrink the fill and drain by v (Narayanan et al. 2021 §2.2.2: bubble (p-1)/(v·m)). */
    return m * max + (sum - max) / v;
  case PLAN_SCHED_ZB_H1:
    return m * max + (zb_sum - zb_max);
  case PLAN_SCHED_ZB_V:
    return m * max + (zbv_sum - zbv_max);
  case PLAN_SCHED_COUNT_:
    break;
  }
  return NAN;
}
