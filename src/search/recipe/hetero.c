/* Heterogeneous clusters (search layer): when the cluster's node groups hold devices of different types, the
 * pipeline stages are laid on the groups and each stage gets layers in proportion to its devices' speed, within
 * their memory, as AMP (Li et al. 2022) and Metis (Um et al. 2024) balance uneven stages over mixed GPUs
 * (ANCHORS.md). The cost model costs each pipeline rank on its own group's device (cost_rank_group), so these
 * plans are judged as they would run; the stage DP, which runs after this strategy, then refines the best of
 * them to the exact optimum of the split.
 *
 * Meshes: with the default order (pp outermost) pipeline rank r holds devices [r·D, (r+1)·D) for D = tp·dp, so
 * a stage lies within one node group exactly when D divides every group's size. For every such D (pp = devices /
 * D of at least 2 and at most the layers), tp of 1, 2, 4 or 8 within a node, micro-batch sizes of 1 to 8 and
 * the three recompute granularities, the strategy offers the plan with the proportional split below (1f1b,
 * sequence parallel with tp > 1, ZeRO 1, bf16; fixed fields as the user fixed them).
 *
 * The proportional split: rank r takes one layer in tau_r seconds (its device's forward and backward of an
 * average layer) and carries e_r seconds besides (the embedding, the head, the pipeline transfers). The
 * continuous balance gives rank r x_r = (T - e_r) / tau_r layers, clamped to [lo_r, M_r] (lo_r the fewest layers
 * a chunk may hold, M_r the most its memory takes), with T chosen so that the x_r sum to the layers; the integer
 * split rounds down and gives the remaining layers to the largest fractional parts. On one device type this is
 * the even split corrected for the embedding and the head. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search/recipe/search.h"

/* Rank r's cost with n layers of block costs L spread over its v chunks (the first n mod v one more), before
 * extras; false when a chunk would be empty. */
static bool rank_with(const cost_env *env, const plan *p, const layer_cost *L, int r, int64_t n, rank_cost *R) {
  memset(R, 0, sizeof *R);
  int64_t v = p->vpp;
  for (int64_t j = 0; j < v; j++) {
    int64_t size = n / v + (j < n % v ? 1 : 0);
    if (size == 0 && v > 1) return false;
    int64_t c = j * p->pp + r;
    double act = 0;
    for (int64_t i = 0; i < size; i++) cost_rank_add_layer(env, p, L, plan_layer_recomputes(p, c, i), R, &act);
    cost_rank_end_chunk(R, act);
  }
  return true;
}

ap_status search_hetero_split(ap_ctx *ctx, const cost_env *env, const plan *base, double mem_fraction, plan *out) {
  ap_status st = plan_validate(ctx, base, cost_env_graph(env), cost_env_cluster(env)->n_devices, "hetero");
  if (st) return st;
  plan p = *base;
  p.n_chunk_recompute = 0;
  int pp = (int)p.pp;
  int64_t v = p.vpp, L = cost_env_n_layers(env);
  const graph *g = cost_env_graph(env);
  plan_groups pg;
  if ((st = cost_plan_groups(ctx, env, &p, &pg))) return st;
  double b = (double)p.micro_batch_size, s = (double)(p.seq_length > 0 ? p.seq_length : g->default_seq);
  double tau[COST_MAX_RANKS], e[COST_MAX_RANKS], lo[COST_MAX_RANKS], hi[COST_MAX_RANKS];
  layer_cost *lc = malloc(sizeof(layer_cost) * (size_t)g->n_blocks);
  if (!lc) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  double sum_hi = 0, sum_lo = 0;
  for (int r = 0; r < pp; r++) {
    double cap = 0;
    int grp = cost_rank_group(env, &p, r, &cap);
    for (int bi = 0; bi < g->n_blocks; bi++)
      if (!cost_env_facts(env)->has_layers || g->blocks[bi].role == BLOCK_LAYER) lc[bi] = cost_block_on(env, grp, &p, &pg, bi, b, s);
    /* tau: the mean time of one layer; the memory bound uses the layer block that adds the most bytes. */
    rank_cost one = {0};
    double act = 0;
    for (int64_t u = 0; u < L; u++)
      cost_rank_add_layer(env, &p, &lc[cost_env_unit_block(env)[u]], plan_layer_recomputes(&p, r, 0), &one, &act);
    tau[r] = (one.tf + one.tb) / (double)(L > 0 ? L : 1);
    rank_cost extras, R;
    cost_rank_extras(env, &p, &pg, r, &extras);
    e[r] = extras.tf + extras.tb;
    int heavy = cost_env_unit_block(env)[0];
    cost_state_bytes sb = cost_state_bytes_per_param(&cost_env_tuning(env)->memory);
    double state_bytes = cost_state_bytes_zero(&sb, 0, 1);
    for (int64_t u = 1; u < L; u++) {
      const layer_cost *x = &lc[cost_env_unit_block(env)[u]], *y = &lc[heavy];
      if (x->act_bytes[PLAN_RECOMPUTE_NONE] + state_bytes * (x->params_dense + x->params_expert) >
          y->act_bytes[PLAN_RECOMPUTE_NONE] + state_bytes * (y->params_dense + y->params_expert))
        heavy = cost_env_unit_block(env)[u];
    }
    lo[r] = v > 1 ? (double)v : (cost_env_facts(env)->has_layers && (r == 0 || r == pp - 1)) ? 0 : 1;
    hi[r] = lo[r] - 1;
    rank_cost rc[COST_MAX_RANKS];
    for (int64_t n = (int64_t)lo[r]; n <= L; n++) {
      if (!rank_with(env, &p, &lc[heavy], r, n, &R)) continue;
      cost_rank_merge(&R, &extras);
      rc[r] = R;
      if (memory_rank(env, &p, rc, r, b, s).total > cap * mem_fraction) break;
      hi[r] = (double)n;
    }
    sum_hi += hi[r];
    sum_lo += lo[r];
  }
  free(lc);
  for (int r = 0; r < pp; r++)
    if (hi[r] < lo[r])
      return ctx_fail(ctx, AP_INFEASIBLE, "hetero: pipeline rank %d cannot hold %g layers in memory", r, lo[r]);
  if (sum_hi < (double)L || sum_lo > (double)L)
    return ctx_fail(ctx, AP_INFEASIBLE, "hetero: %lld layers do not fit on %d pipeline ranks", (long long)L, pp);

  /* The balance T: the clamped x_r(T) grow with T; bisection to sum L. */
  double x[COST_MAX_RANKS], t_lo = INFINITY, t_hi = 0;
  for (int r = 0; r < pp; r++) {
    t_lo = fmin(t_lo, e[r] + lo[r] * tau[r]);
    t_hi = fmax(t_hi, e[r] + hi[r] * tau[r]);
  }
  for (int it = 0; it < 200; it++) {
    double t = 0.5 * (t_lo + t_hi), sum = 0;
    for (int r = 0; r < pp; r++) sum += fmin(hi[r], fmax(lo[r], tau[r] > 0 ? (t - e[r]) / tau[r] : hi[r]));
    if (sum < (double)L) t_lo = t;
    else t_hi = t;
  }
  int64_t n[COST_MAX_RANKS], total = 0;
  for (int r = 0; r < pp; r++) {
    x[r] = fmin(hi[r], fmax(lo[r], tau[r] > 0 ? (t_hi - e[r]) / tau[r] : hi[r]));
    n[r] = (int64_t)floor(x[r]);
    total += n[r];
  }
  /* Largest remainders first, within the bounds; ties to the earlier rank. */
  while (total != L) {
    int pick = -1;
    for (int r = 0; r < pp; r++) {
      bool can = total < L ? (double)n[r] < hi[r] : (double)n[r] > lo[r];
      if (!can) continue;
      double frac = x[r] - (double)n[r];
      if (pick < 0 || (total < L ? frac > x[pick] - (double)n[pick] : frac < x[pick] - (double)n[pick])) pick = r;
    }
    if (pick < 0) return ctx_fail(ctx, AP_INFEASIBLE, "hetero: no split of %lld layers within memory", (long long)L);
    n[pick] += total < L ? 1 : -1;
    total += total < L ? 1 : -1;
  }
  p.n_stage_layers = (int32_t)(pp * v);
  for (int r = 0; r < pp; r++)
    for (int64_t j = 0; j < v; j++) p.stage_layers[j * pp + r] = (int32_t)(n[r] / v + (j < n[r] % v ? 1 : 0));
  *out = p;
  return AP_OK;
}

/* ---- The strategy ---- */

static bool hetero_applies(const search_run *sr) {
  const hw_cluster *hc = cost_env_cluster(search_env(sr));
  for (int gi = 1; gi < hc->n_groups; gi++)
    if (strcmp(hc->groups[gi].device.name, hc->groups[0].device.name) != 0) return cost_env_n_layers(search_env(sr)) >= 2;
  return false;
}

/* The values a field takes: the user's when fixed, else the list. */
static ap_status hetero_run(search_run *sr) {
  const cost_env *env = search_env(sr);
  const search_opts *o = search_options(sr);
  const hw_cluster *hc = cost_env_cluster(env);
  int64_t n_dev = hc->n_devices, group_gcd = 0, per_node = INT64_MAX;
  for (int gi = 0; gi < hc->n_groups; gi++) {
    group_gcd = ap_gcd_i64(group_gcd, hc->groups[gi].n_devices);
    if (hc->groups[gi].devices_per_node < per_node) per_node = hc->groups[gi].devices_per_node;
  }
  static const int64_t tp_list[] = {1, 2, 4, 8}, mbs_list[] = {1, 2, 4, 8},
                       rc_list[] = {PLAN_RECOMPUTE_NONE, PLAN_RECOMPUTE_SELECTIVE, PLAN_RECOMPUTE_OP,
                                    PLAN_RECOMPUTE_FULL};
  int64_t tps[4], mbss[4], rcs[4];
  const search_space *sp = search_space_of(sr);
  int n_tp = search_space_values(sp, PLAN_F_TP, tp_list, 4, tps);
  int n_mbs = search_space_values(sp, PLAN_F_MICRO_BATCH_SIZE, mbs_list, 4, mbss);
  int n_rc = search_space_values(sp, PLAN_F_RECOMPUTE, rc_list, 4, rcs);
  ap_ctx scratch;
  memset(&scratch, 0, sizeof scratch);
  for (int it = 0; it < n_tp; it++) {
    search_progress(sr, (double)it / n_tp);
    int64_t tp = tps[it];
    if (tp > per_node) continue;
    for (int64_t stage = tp; stage <= group_gcd; stage += tp) {
      if (group_gcd % stage != 0) continue;
      int64_t pp = n_dev / stage, dp = stage / tp;
      if (pp < 2 || pp > cost_env_n_layers(env)) continue;
      if ((search_opts_fixes(o, PLAN_F_PP) && pp != o->fixed.pp) ||
          (search_opts_fixes(o, PLAN_F_DP) && dp != o->fixed.dp))
        continue;
      for (int im = 0; im < n_mbs; im++)
        for (int ir = 0; ir < n_rc; ir++) {
          if (search_should_stop(sr)) return AP_OK;
          int64_t mbs = mbss[im];
          if (o->global_batch_size % (dp * mbs) != 0) continue;
          plan q = o->fixed; /* the template: overlap switches and names */
          q.dp = dp;
          q.tp = tp;
          q.pp = pp;
          q.cp = q.ep = 1;
          q.etp = 0;
          q.vpp = 1;
          plan d;
          plan_defaults(&d);
          memcpy(q.order, d.order, sizeof q.order);
          q.schedule = search_opts_fixes(o, PLAN_F_SCHEDULE) ? o->fixed.schedule : PLAN_SCHED_1F1B;
          q.micro_batch_size = mbs;
          q.global_batch_size = o->global_batch_size;
          q.n_micro_batches = o->global_batch_size / (dp * mbs);
          q.seq_length = o->seq_length;
          q.sequence_parallel = search_opts_fixes(o, PLAN_F_SEQUENCE_PARALLEL) ? o->fixed.sequence_parallel : tp > 1;
          q.recompute = (plan_recompute)rcs[ir];
          q.recompute_layers = 0;
          q.n_chunk_recompute = 0;
          q.n_stage_layers = 0;
          q.zero_stage = search_opts_fixes(o, PLAN_F_ZERO_STAGE) ? o->fixed.zero_stage : 1;
          q.precision = search_opts_fixes(o, PLAN_F_PRECISION) ? o->fixed.precision : PLAN_PREC_BF16;
          plan split;
          ap_status st = search_hetero_split(&scratch, env, &q, o->max_mem_fraction, &split);
          if (st == AP_NOMEM) return st;
          if (st) continue;
          st = search_offer(sr, &split, NULL);
          if (st == AP_CANCELLED) return AP_OK;
          if (st && st != AP_INVALID) return st;
        }
    }
  }
  return AP_OK;
}

const search_strategy search_hetero = {
    .name = "hetero",
    .summary = "pipeline stages on node groups of different devices, layers in proportion to speed (AMP/Metis)",
    .applies = hetero_applies,
    .run = hetero_run,
};
