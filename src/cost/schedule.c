/* Closed-form pipeline schedule times (cost layer): the fast screen that every plan gets; sim.c simulates the
 * finalists event by event. Per pipeline rank r, tf and tb are one micro-batch's forward and backward time of
 * all the rank's chunks (recompute and exposed communication included) and tw the weight-gradient part of tb. */
#include <math.h>

#include "cost/bound.h"
#include "cost/internal.h"

/* ZB-V's order (plan/schedule.h, built at equal times) admits one new micro-batch per step only while at most
 * pp/2 are in flight: a rank holds chunk r and chunk 2·pp - 1 - r, so from then on each micro-batch also waits
 * for the passes of the up chunk, one more step each, until the pipeline is full at m = pp. The extra steps:
 * min(m, pp) - pp/2 when positive (the simulator's slope is two steps per micro-batch between pp/2 and pp;
 * tests/test_closed_form.c). */
static double zbv_half_fill(double m, int n) { return ap_fmax(0, (m < (double)n ? m : (double)n) - (double)n / 2); }

double schedule_time_s(const plan *p, const rank_cost *rc, int n, cost_time *out) {
  (void)out; /* the breakdown is filled by estimate.c from the per-rank sums */
  double m = (double)p->n_micro_batches, v = (double)p->vpp;
  double sum = 0, max = 0, zb_sum = 0, zb_max = 0, zbv_sum = 0, zbv_max = 0;
  /* The latency of the zero-bubble kinds: one micro-batch's forward and input-gradient passes through every
   * rank, then the first rank's last weight-gradient pass (W is deferred, so it is off the path elsewhere);
   * each further micro-batch enters one step behind, a step being the slowest rank's F + B or B + W for ZB-H1
   * (one of the two pairs a stage runs back to back in the steady state) and the larger of its F and B for
   * ZB-V (the two chunks of a rank alternate). With fewer micro-batches than stages the pipeline never fills,
   * so this, not m·max t_r, sets the time (checked against the simulator of plan/schedule.h's orders in
   * tests/test_cost.c, m = 1 … 4·pp). */
  double path = 0, step_h1 = 0, step_v = 0;
  for (int r = 0; r < n; r++) {
    double tbi = rc[r].tb - rc[r].tw;
    path += rc[r].tf + tbi;
    step_h1 = ap_fmax(step_h1, ap_fmax(rc[r].tf + tbi, tbi + rc[r].tw));
    step_v = ap_fmax(step_v, ap_fmax(rc[r].tf, tbi));
  }
  double tw0 = n > 0 ? rc[0].tw : 0;
  /* Interleaved fill: the first micro-batch's forward (and the last one's backward) passes one chunk of every
   * other rank, the slowest chunk of each where the split is uneven (t_r / v for equal chunks). */
  int crit = 0;
  for (int r = 1; r < n; r++)
    if (rc[r].tf + rc[r].tb > rc[crit].tf + rc[crit].tb) crit = r;
  double fill_int = 0;
  for (int r = 0; r < n; r++) {
    if (r == crit) continue;
    double edges = rc[r].edge_tf_s[0] + rc[r].edge_tb_s[0] + rc[r].edge_tf_s[1] + rc[r].edge_tb_s[1];
    fill_int += ap_fmax(rc[r].chunk_t_max_s + edges, (rc[r].tf + rc[r].tb) / v);
  }
  for (int r = 0; r < n; r++) {
    double t = rc[r].tf + rc[r].tb;
    sum += t;
    max = ap_fmax(max, t);
    /* Zero-bubble schedules fill the drain with deferred weight-gradient work: the bubble of a rank shrinks from
     * tf + tb to tf + tb - 2·tw (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", §2.1, ZB-H1). */
    double zb = ap_fmax(0, ap_fmax(t - COST_ZB_H1_W_MULT * rc[r].tw, rc[r].tb - rc[r].tw)); /* never below one input-gradient pass */
    zb_sum += zb;
    zb_max = ap_fmax(zb_max, zb);
    /* ZB-V: two chunks per rank in a V (Qi et al. 2024 §6). The paper's hand-built schedule reaches zero bubble
     * at T_F = T_B = T_W; the order of plan/schedule.h (built at equal times) leaves each rank a fill of a
     * quarter of its F + B at equal times, which is what the simulator replays, so the closed form charges it. */
    double zbv = ap_fmax(0, t - COST_ZB_V_W_MULT * rc[r].tw) / COST_ZB_V_FILL_DIV;
    zbv_sum += zbv;
    zbv_max = ap_fmax(zbv_max, zbv);
  }
  switch (p->schedule) {
  case PLAN_SCHED_GPIPE:
  case PLAN_SCHED_1F1B:
    /* Each micro-batch passes every rank once; the slowest rank sets the pace for the other m - 1 (GPipe, Huang
     * et al. 2019 §2.3; 1F1B has the same time, Narayanan et al. 2021 §2.2.1: bubble (p-1)/m for equal ranks). */
    return sum + (m - 1) * max;
  case PLAN_SCHED_INTERLEAVED_1F1B:
    /* v chunks per rank shrink the fill and drain by v (Narayanan et al. 2021 §2.2.2: bubble (p-1)/(v·m)). */
    return m * max + fill_int;
  case PLAN_SCHED_ZB_H1:
    return ap_fmax(m * max + (zb_sum - zb_max), path + tw0 + (m - 1) * step_h1);
  case PLAN_SCHED_ZB_V:
    return ap_fmax(m * max + (zbv_sum - zbv_max), path + tw0 / 2 + (m - 1 + zbv_half_fill(m, n)) * step_v);
  case PLAN_SCHED_COUNT_:
    break;
  }
  return NAN;
}

double schedule_lockstep_s(const plan *p, const rank_cost *rc, int n, const double *chunk_tf_s,
                           const double *chunk_tb_s, const double *chunk_tw_s) {
  bool zbv = p->schedule == PLAN_SCHED_ZB_V;
  if ((p->schedule != PLAN_SCHED_INTERLEAVED_1F1B && !zbv) || n < 1 || n != p->pp) return 0;
  int64_t v = p->vpp, n_chunks = plan_n_chunks(p);
  double m = (double)p->n_micro_batches, max = 0;
  int crit = 0;
  for (int r = 0; r < n; r++) {
    max = ap_fmax(max, rc[r].tf + rc[r].tb);
    if (rc[r].tf + rc[r].tb > rc[crit].tf + rc[crit].tb) crit = r;
  }
  /* Megatron's interleaved order runs the micro-batches in groups of pp through the j-th chunk of every rank
   * before its (j + 1)-th (schedules.py, get_model_chunk_id), and ZB-V alternates a rank's two chunks (Qi et al.
   * 2024 §6): with interleaving the ranks move in lockstep chunk by chunk, the j-th round taking the slowest
   * rank's j-th chunk (ZB-V's ranks are not bound so: each pays its own skew, below).
   * What a rank's time holds beyond its chunks (its exposed sends) is spread over its v chunks. The fill is one
   * chunk of every other rank, the slowest of each (interleaved); for ZB-V as schedule_time_s. */
  /* Only the first n ranks' and v rounds' entries are used, and only they are cleared: the search calls this
   * once per candidate split. */
  double own[COST_MAX_RANKS], cmax[COST_MAX_RANKS], step[COST_MAX_RANKS];
  double first_t[COST_MAX_RANKS], first_fb[COST_MAX_RANKS], skew_t[COST_MAX_RANKS], skew_fb[COST_MAX_RANKS];
  double round[PLAN_MAX_CHUNKS];
  int64_t seen[COST_MAX_RANKS];
  if (n_chunks > PLAN_MAX_CHUNKS || v > PLAN_MAX_CHUNKS) return 0;
  for (int r = 0; r < n; r++)
    own[r] = cmax[r] = step[r] = first_t[r] = first_fb[r] = skew_t[r] = skew_fb[r] = 0, seen[r] = 0;
  for (int64_t j = 0; j < v; j++) round[j] = 0;
  for (int64_t c = 0; c < n_chunks; c++) {
    int64_t r = plan_chunk_rank(p, c);
    own[r] += chunk_tf_s[c] + chunk_tb_s[c];
  }
  for (int64_t c = 0; c < n_chunks; c++) {
    int64_t r = plan_chunk_rank(p, c), j = seen[r]++;
    double extra = ap_fmax(0, rc[r].tf + rc[r].tb - own[r]) / (double)v;
    double t = chunk_tf_s[c] + chunk_tb_s[c] + extra;
    round[j] = ap_fmax(round[j], t);
    cmax[r] = ap_fmax(cmax[r], t);
    step[r] += ap_fmax(chunk_tf_s[c], chunk_tb_s[c] - chunk_tw_s[c]) + extra / 2;
    double fb = chunk_tf_s[c] + chunk_tb_s[c] - chunk_tw_s[c];
    if (j == 0) {
      first_t[r] = t;
      first_fb[r] = fb;
    } else if (j == 1) {
      skew_t[r] = fabs(t - first_t[r]);
      skew_fb[r] = fabs(fb - first_fb[r]);
    }
  }
  double pace = 0, fill = 0, zfill = 0, zfill_max = 0, path = 0, step_max = 0, skew_max = 0;
  for (int64_t j = 0; j < v; j++) pace += round[j];
  for (int r = 0; r < n; r++) {
    if (r != crit) fill += cmax[r];
    double z = ap_fmax(0, rc[r].tf + rc[r].tb - COST_ZB_V_W_MULT * rc[r].tw) / COST_ZB_V_FILL_DIV;
    zfill += z;
    zfill_max = ap_fmax(zfill_max, z);
    path += rc[r].tf + rc[r].tb - rc[r].tw;
    step_max = ap_fmax(step_max, step[r] + skew_fb[r]);
    skew_max = ap_fmax(skew_max, rc[r].tf + rc[r].tb + ap_fmax(skew_t[r], fabs(rc[r].tb - rc[r].tw - rc[r].tf)) / 2);
  }
  if (!zbv) return m * ap_fmax(pace, max) + fill;
  /* ZB-V pairs a pass of a rank's down chunk with one of its up chunk (the order is built at equal times), so
   * where the two chunks differ the faster one's passes wait: half the difference per micro-batch in the steady
   * state, the whole difference of F + B per step while the pipeline fills; where a forward and an
   * input-gradient pass differ, half their difference per micro-batch (the simulator loses 0.5 to 1 times it,
   * more at larger pp), the larger of the two waits counting (what the simulator replays of
   * plan/schedule.h's order: tests/test_closed_form.c). The latency as in schedule_time_s, each further
   * micro-batch one step of the slowest rank behind. */
  double latency = path + rc[0].tw / 2 + (m - 1 + zbv_half_fill(m, n)) * step_max;
  return ap_fmax(m * ap_fmax(max, skew_max) + (zfill - zfill_max), latency);
}

double schedule_pipeline_s(const plan *p, rank_cost *rc, int n, double *chunk_tf_s, double *chunk_tb_s,
                           double *chunk_tw_s, cost_time *out) {
  int64_t n_chunks = plan_n_chunks(p);
  for (int r = 0; r < n; r++)
    for (int e = 0; e < 2; e++) {
      int64_t ch = e ? n_chunks - 1 : 0;
      chunk_tf_s[ch] += rc[r].edge_tf_s[e];
      chunk_tb_s[ch] += rc[r].edge_tb_s[e];
      chunk_tw_s[ch] += rc[r].edge_tw_s[e];
    }
  return ap_fmax(schedule_time_s(p, rc, n, out), schedule_lockstep_s(p, rc, n, chunk_tf_s, chunk_tb_s, chunk_tw_s));
}
