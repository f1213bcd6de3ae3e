/* Lower bounds of the cost model's formulas (cost layer); see bound.h for what each bounds and the test that
 * holds it to its formula. The derivations are written beside each bound. */
#include <math.h>

#include "cost/bound.h"

/* Each rank's time t_r (forward + backward of one micro-batch) is at least the sum of its chunks, so
 * sum t >= S and max t >= S/pp; in schedule.c's closed forms:
 *  - 1F1B, GPipe: sum + (m-1)·max >= (m + pp - 1)·S/pp;
 *  - interleaved over v chunks: m·max + (sum - max)/v = (m - 1/v)·max + sum/v >= (m + (pp-1)/v)·S/pp;
 *  - zero bubble: m·max + (sum z - max z)/k with z_r >= max(0, t_r - c·w_r), k = 1, c = 2 for zb-h1 and
 *    k = 4, c = 1 for zb-v (schedule.c writes zb-v's z with the 1/4 inside), and sum w = W: z_r >= t_r - c·w_r
 *    and max z <= max t, so sum z - max z >= S - c·W - max t, and the time is at least
 *    m·max + (S - c·W - max)/k = (m - 1/k)·max + (S - c·W)/k >= (m - 1/k)·S/pp + (S - c·W)/k; it is also at
 *    least m·max >= m·S/pp since sum z - max z >= 0.
 * The data-parallel synchronisation and the optimizer step only add. */
double cost_bound_pipeline_s(plan_schedule s, int64_t vpp, double m, double pp, double S, double W) {
  double avg = S / pp;
  switch (s) {
  case PLAN_SCHED_GPIPE:
  case PLAN_SCHED_1F1B: return (m + pp - 1) * avg;
  case PLAN_SCHED_INTERLEAVED_1F1B: return (m + (pp - 1) / (double)vpp) * avg;
  case PLAN_SCHED_ZB_H1: return fmax(m * avg, (m - 1) * avg + (S - COST_ZB_H1_W_MULT * W));
  case PLAN_SCHED_ZB_V:
    return fmax(m * avg, (m - 1 / COST_ZB_V_FILL_DIV) * avg + (S - COST_ZB_V_W_MULT * W) / COST_ZB_V_FILL_DIV);
  case PLAN_SCHED_COUNT_: break;
  }
  return 0;
}

void cost_param_counts_of(const graph *g, cost_param_counts *out) {
  *out = (cost_param_counts){0};
  for (int bi = 0; bi < g->n_blocks; bi++) {
    const graph_block *blk = &g->blocks[bi];
    for (int k = 0; k < blk->n_ops; k++) {
      const graph_op *op = &blk->ops[k];
      double n = (double)graph_op_params(op) * (double)blk->repeat;
      if (op->n_experts > 1) out->expert += n;
      else if (op->tp_split) out->split += n;
      else out->replicated += n;
    }
  }
}

/* Bytes per parameter of the model states (cost_state_bytes_per_param, the one source memory.c reads too), each
 * divided over the group that shards it at the stage (cost_state_bytes_zero). The factor 1 - 1e-9 keeps the
 * bound strictly below rounding of the same sum in memory.c. */
double cost_bound_states_bytes(const cost_env *env, const cost_param_counts *pc, int64_t tp, int64_t cp, int64_t dp,
                               int64_t pp, int64_t ep, int64_t etp, int32_t z, bool z0_shards_optimizer) {
  cost_state_bytes sb = cost_state_bytes_per_param(&cost_env_tuning(env)->memory);
  int64_t e_tp = etp > 0 ? etp : tp;
  double n_dp = (double)(dp * cp), n_edp = (double)(tp * cp * dp) / (double)(e_tp * ep);
  if (n_edp < 1) n_edp = 1;
  double dense = pc->split / (double)tp + pc->replicated, expert = pc->expert / (double)(e_tp * ep);
  /* An optimizer that shards itself without ZeRO (cost_state_bytes.zero1_without_zero) keeps at least ZeRO-1's. */
  int32_t zo = z == 0 && z0_shards_optimizer ? 1 : z;
  double per_d = cost_state_bytes_zero(&sb, zo, n_dp), per_e = cost_state_bytes_zero(&sb, zo, n_edp);
  return (dense * per_d + expert * per_e) / (double)pp * (1 - 1e-9);
}

void cost_bound_mem_at_zero(const plan *p, const cost_result *r, double *z2_bytes, double *z3_bytes) {
  double n_dp = (double)(p->dp * p->cp), n_edp = (double)plan_edp(p);
  double keep = 1 - 1 / fmax(fmax(n_dp, n_edp), 1);
  double z2 = p->zero_stage >= 3 ? r->peak_mem_bytes : 0, z3 = z2;
  /* From ZeRO-0 the optimizer states shard too, and its step copies change: no bound. */
  for (int i = 0; i < r->n_ranks && i < COST_MAX_RANKS && p->zero_stage >= 1; i++) {
    const cost_mem *mm = &r->mem[i];
    double grads = p->zero_stage <= 1 ? mm->grads : 0, params = p->zero_stage <= 2 ? mm->params : 0;
    /* ZeRO-3 drops a ZeRO-1/2 optimizer's step copies and reduction buckets (memory.c; its own gathered
     * parameters are among the buffers again, at least 0), and the reserve they carried. */
    double transient = mm->activations + mm->logits + mm->buffers + mm->step;
    double gone = p->zero_stage <= 2 ? mm->step + mm->buffers : 0;
    double gone_reserve = transient > 0 ? mm->reserve * gone / transient : 0;
    z2 = fmax(z2, mm->total - grads * keep);
    z3 = fmax(z3, mm->total - (grads + params) * keep - gone - gone_reserve);
  }
  *z2_bytes = p->zero_stage >= 2 ? INFINITY : z2;
  *z3_bytes = z3;
}

double cost_bound_compute_s(const cost_env *env, plan_precision precision, int64_t gbs, int64_t seq) {
  const hw_cluster *hc = cost_env_cluster(env);
  hw_dtype dt = cost_gemm_dtype(precision);
  double peak = 0;
  for (int gi = 0; gi < hc->n_groups; gi++) {
    double pk = hc->groups[gi].device.peak_flop_per_s[dt];
    if (pk <= 0) pk = hc->groups[gi].device.peak_flop_per_s[HW_DTYPE_BF16];
    if (pk > peak) peak = pk;
  }
  if (!(peak > 0)) return 0;
  const graph *g = cost_env_graph(env);
  return 0.5 * (double)gbs * graph_train_flop_per_seq(g, (double)seq, false) / ((double)hc->n_devices * peak);
}

/* The two terms of schedule.c's interleaved closed forms (schedule_time_s and schedule_lockstep_s), each
 * m·(the slowest rank's t, or the pace) plus a sum over every rank but the slowest, crit. Every piece (t_r, the
 * slowest chunk per rank, each round's slowest chunk, the extras spread over the chunks) is a sum or a maximum
 * of nonnegative times, so it never falls when a time grows; what can fall is the sum, when another rank
 * becomes crit. After one rank grows by g in [grow_min_s, grow_max_s], crit is a rank r with t'_r >= max t: one
 * already at the maximum (then the time is at least m·max + the sum of the present terms less r's), or one
 * below it that grew (t_r + grow_max >= max; then the maximum is at least t_r + grow_min). The bound is the
 * least of these over r. */
double cost_bound_interleaved_s(const plan *p, const rank_cost *rc, int n, const double *chunk_tf_s,
                                const double *chunk_tb_s, double grow_min_s, double grow_max_s) {
  if (p->schedule != PLAN_SCHED_INTERLEAVED_1F1B || n < 1 || n != p->pp || n > COST_MAX_RANKS) return 0;
  int64_t v = p->vpp, n_chunks = plan_n_chunks(p);
  double m = (double)p->n_micro_batches, max = 0, g[COST_MAX_RANKS], g_sum = 0;
  for (int r = 0; r < n; r++) {
    double t = rc[r].tf + rc[r].tb;
    double edges = rc[r].edge_tf_s[0] + rc[r].edge_tb_s[0] + rc[r].edge_tf_s[1] + rc[r].edge_tb_s[1];
    g[r] = ap_fmax(rc[r].chunk_t_max_s + edges, t / (double)v);
    max = ap_fmax(max, t);
    g_sum += g[r];
  }
  double own[COST_MAX_RANKS] = {0}, cmax[COST_MAX_RANKS] = {0}, round[PLAN_MAX_CHUNKS] = {0};
  int64_t seen[COST_MAX_RANKS] = {0};
  for (int64_t c = 0; c < n_chunks; c++) own[plan_chunk_rank(p, c)] += chunk_tf_s[c] + chunk_tb_s[c];
  for (int64_t c = 0; c < n_chunks; c++) {
    int64_t r = plan_chunk_rank(p, c), j = seen[r]++;
    double t = chunk_tf_s[c] + chunk_tb_s[c] + ap_fmax(0, rc[r].tf + rc[r].tb - own[r]) / (double)v;
    round[j] = ap_fmax(round[j], t);
    cmax[r] = ap_fmax(cmax[r], t);
  }
  double pace = 0, c_sum = 0;
  for (int64_t j = 0; j < v; j++) pace += round[j];
  for (int r = 0; r < n; r++) c_sum += cmax[r];
  /* Margins for the rounding of the sums of t: a rank within 10^-12 of the maximum counts as at it. */
  double eps = 1e-12 * max, lb = INFINITY;
  for (int r = 0; r < n; r++) {
    double t = rc[r].tf + rc[r].tb, top = max;
    if (t < max - eps) {
      if (t + grow_max_s < max - eps) continue; /* cannot become crit */
      top = ap_fmax(max, t + grow_min_s * (1 - 1e-9) - eps);
    }
    double a = m * top + (g_sum - g[r]), b = m * ap_fmax(pace, top) + (c_sum - cmax[r]);
    lb = fmin(lb, ap_fmax(a, b));
  }
  return isfinite(lb) ? lb : 0;
}
