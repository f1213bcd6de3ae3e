/* The inter-op stage DP on stage problem files (search layer; strategy "inter-op"): Alpa's training DP,
 * alpa/pipeline_parallel/stage_construction.py training_dp_impl (SURVEY.md §3.1), exact.
 *
 * A solution is a sequence of stages covering layers 0..L-1 in order, stage k running layers i..j on submesh
 * m with config c at t(i,j,m,c) per micro-batch, the submeshes' devices summing to exactly n_devices. Its
 * pipeline latency is Σ t + (B − 1) · max t (Alpa's objective). For each threshold t_max over the sorted
 * distinct stage costs, f[s][i][d] is the least summed cost of layers i..L-1 as s stages on d devices with
 * every stage ≤ t_max and each stage followed by at most max_succ_stages(i,j,m,c) stages; the objective of the
 * path found is evaluated with its own largest stage. The loop stops once B · t_max reaches the best objective:
 * any solution whose largest stage is ≥ t_max costs at least B · t_max. Taking t_max = the largest stage of an
 * optimal solution finds a path at least as good, so the minimum over thresholds is the optimum.
 *
 * On graphs (later), the stage costs come from the intra-op ILP per candidate stage, memoised across repeated
 * layers; on a problem file they are given. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search/solve/solve.h"

static int dbl_cmp(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

typedef struct {
  int32_t S, L, N;
  double *f, *fmax;
  int32_t *arg; /* flattened (j, m, c) of the first stage, -1 none */
} dp_tab;

static size_t at(const dp_tab *t, int32_t s, int32_t i, int32_t d) {
  return ((size_t)s * (size_t)(t->L + 1) + (size_t)i) * (size_t)(t->N + 1) + (size_t)d;
}

/* One DP pass for threshold t_max. */
static void dp_pass(const stp_problem *p, dp_tab *t, double t_max) {
  size_t n = (size_t)(t->S + 1) * (size_t)(t->L + 1) * (size_t)(t->N + 1);
  for (size_t k = 0; k < n; k++) {
    t->f[k] = INFINITY;
    t->fmax[k] = 0;
    t->arg[k] = -1;
  }
  t->f[at(t, 0, t->L, 0)] = 0;
  for (int32_t s = 1; s <= t->S; s++)
    for (int32_t i = t->L - 1; i >= 0; i--)
      for (int32_t d = 1; d <= t->N; d++) {
        size_t here = at(t, s, i, d);
        for (int32_t j = i; j < t->L; j++)
          for (int32_t m = 0; m < p->n_submeshes; m++) {
            int32_t size = p->submesh_size[m];
            if (size > d) continue;
            double rest = t->f[at(t, s - 1, j + 1, d - size)];
            if (isinf(rest)) continue;
            for (int32_t c = 0; c < p->n_configs; c++) {
              size_t e = stp_at(p, i, j, m, c);
              double cost = p->cost[e];
              if (isnan(cost) || cost > t_max) continue;
              if (p->max_succ && p->max_succ[e] >= 0 && s - 1 > p->max_succ[e]) continue;
              if (cost + rest < t->f[here]) {
                t->f[here] = cost + rest;
                double mx = t->fmax[at(t, s - 1, j + 1, d - size)];
                t->fmax[here] = cost > mx ? cost : mx;
                t->arg[here] = (j * p->n_submeshes + m) * p->n_configs + c;
              }
            }
          }
      }
}

ap_status solve_inter_op(ap_ctx *ctx, const stp_problem *p, const solve_opts *o, stp_result *r) {
  size_t n_all = (size_t)p->n_layers * (size_t)p->n_layers * (size_t)p->n_submeshes * (size_t)p->n_configs;
  dp_tab t = {p->n_layers < p->n_devices ? p->n_layers : p->n_devices, p->n_layers, p->n_devices, NULL, NULL, NULL};
  size_t n_tab = (size_t)(t.S + 1) * (size_t)(t.L + 1) * (size_t)(t.N + 1);
  /* TUNING: 2^26 cells (about 1.3 GB over the three tables) is past any instance the DP finishes in minutes. */
  if (n_tab > ((size_t)1 << 26))
    return ctx_fail(ctx, AP_UNSUPPORTED, "%s: a DP over %d layers and %d devices is too large for inter-op", p->file,
                    p->n_layers, p->n_devices);
  double *vals = malloc((n_all + 1) * sizeof *vals);
  t.f = malloc(n_tab * sizeof *t.f);
  t.fmax = malloc(n_tab * sizeof *t.fmax);
  t.arg = malloc(n_tab * sizeof *t.arg);
  if (!vals || !t.f || !t.fmax || !t.arg) {
    free(vals), free(t.f), free(t.fmax), free(t.arg);
    return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
  }
  size_t n_vals = 0;
  for (size_t e = 0; e < n_all; e++)
    if (!isnan(p->cost[e])) vals[n_vals++] = p->cost[e];
  qsort(vals, n_vals, sizeof *vals, dbl_cmp);
  solve_budget b;
  solve_budget_start(&b, o);
  b.max_evals = 0; /* exact: only the clock can stop it */
  double best = INFINITY, B = (double)p->n_micro_batches;
  bool cut_short = false;
  r->n_stages = 0;
  for (size_t v = 0; v < n_vals; v++) {
    if (v > 0 && vals[v] == vals[v - 1]) continue;
    if (B * vals[v] >= best) break;
    if (solve_budget_left_s(&b) <= 0) {
      cut_short = true;
      break;
    }
    dp_pass(p, &t, vals[v]);
    r->n_evals++;
    for (int32_t s = 1; s <= t.S; s++) {
      size_t k = at(&t, s, 0, t.N);
      if (isinf(t.f[k])) continue;
      double obj = t.f[k] + (B - 1) * t.fmax[k];
      if (obj >= best) continue;
      best = obj;
      /* Backtrack this threshold's path now: the tables are overwritten by the next one. */
      int32_t i = 0, d = t.N, n = 0;
      for (int32_t left = s; left >= 1; left--) {
        int32_t a = t.arg[at(&t, left, i, d)];
        stp_stage *st = &r->stages[n++];
        st->first_layer = i;
        st->config = a % p->n_configs;
        st->submesh = (a / p->n_configs) % p->n_submeshes;
        st->last_layer = a / p->n_configs / p->n_submeshes;
        i = st->last_layer + 1;
        d -= p->submesh_size[st->submesh];
      }
      r->n_stages = n;
    }
  }
  free(vals), free(t.f), free(t.fmax), free(t.arg);
  if (isinf(best)) {
    r->status = cut_short ? SOLVE_FEASIBLE : SOLVE_INFEASIBLE;
    if (cut_short) return ctx_fail(ctx, AP_CANCELLED, "%s: inter-op found no solution within the time budget", p->file);
    r->objective = NAN;
    r->lower_bound = NAN;
    return AP_OK;
  }
  r->objective = best;
  r->status = cut_short ? SOLVE_FEASIBLE : SOLVE_OPTIMAL;
  r->lower_bound = cut_short ? NAN : best;
  return AP_OK;
}
