/* REINFORCE on sharding problem files (search layer; strategy "rl"): a policy-gradient search (Williams,
 * "Simple statistical gradient-following algorithms for connectionist reinforcement learning", Machine
 * Learning 8, 1992) with one softmax policy per group (a node and its followers) over its allowed strategies,
 * in the spirit of the device-placement RL planners the survey lists (Mirhoseini et al., ICML 2017).
 *
 * Each update samples a batch of choices from the policy (every group independently), scores them, and moves
 * each group's logits by
 *   θ_g[k] += lr · A_g · (1[k = sampled] − π_g[k]) / batch
 * (the gradient of log π_g for a softmax). The reward is −objective, and its baseline is per group: the
 * terms of the objective that do not involve g (the costs of other nodes and of edges not touching g) do not
 * depend on g's sample, since the groups are sampled independently, so subtracting them keeps the estimate
 * unbiased (Williams 1992, §4: any baseline independent of the action) while removing most of its variance.
 * So A_g is the batch-standardised value of −(g's cost + its incident resharding costs + the memory penalty),
 * a forbidden term counting as the batch's largest finite term, doubled. Standardising within the batch makes
 * the step size independent of the problem's cost units. The best sampled choice is the result; the policy's
 * final argmax choice is scored too. Seeded: the same seed and budget give the same result. */
#include <math.h>
#include <string.h>

#include "search/solve.h"

/* TUNING: batch and learning rate picked on random 20- to 50-node trees and DAGs (tests/test_solve*.c) so
 * that 20,000 evaluations converge; the logits are clamped so that a policy never becomes fully deterministic. */
enum { BATCH = 25 };
static const double LR = 1.0, LOGIT_MAX = 30.0, CONVERGED = 0.99;

static void softmax(const double *theta, int32_t n, double *pi) {
  double mx = -INFINITY, sum = 0;
  for (int32_t k = 0; k < n; k++) mx = theta[k] > mx ? theta[k] : mx;
  for (int32_t k = 0; k < n; k++) sum += pi[k] = exp(theta[k] - mx);
  for (int32_t k = 0; k < n; k++) pi[k] /= sum;
}

/* g's own terms under choice c: its cost and incident pairs; forbidden ones counted in *n_bad, and the
 * largest finite term raised into *max_term. */
static double local_cost(const sp_problem *p, const int32_t *c, int32_t g, int32_t *n_bad, double *max_term) {
  double sum = 0, u = p->unary[g][c[g]];
  if (isinf(u)) ++*n_bad;
  else sum += u, *max_term = fmax(*max_term, u);
  for (int32_t q = p->adj_start[g]; q < p->adj_start[g + 1]; q++) {
    const sp_pair *e = &p->pairs[p->adj[q]];
    double x = sp_pair_cost(p, e, g, c[g], c[sp_pair_other(e, g)]);
    if (isinf(x)) ++*n_bad;
    else sum += x, *max_term = fmax(*max_term, x);
  }
  return sum;
}

ap_status solve_rl(ap_ctx *ctx, const sp_problem *p, const solve_opts *o, sp_result *r) {
  int32_t G = p->n_groups;
  arena *a = arena_new();
  int32_t *n_allowed = NULL;
  int32_t **allowed = a ? solve_allowed_lists(a, p, &n_allowed) : NULL;
  double **theta = a ? arena_alloc(a, (size_t)G * sizeof *theta) : NULL;
  double **pi = a ? arena_alloc(a, (size_t)G * sizeof *pi) : NULL;
  int32_t *samples = a ? arena_alloc(a, (size_t)BATCH * (size_t)G * sizeof *samples) : NULL; /* positions */
  int32_t *choices = a ? arena_alloc(a, (size_t)BATCH * (size_t)G * sizeof *choices) : NULL;
  double *local = a ? arena_alloc(a, (size_t)BATCH * (size_t)G * sizeof *local) : NULL;
  int32_t *bad = a ? arena_alloc(a, (size_t)BATCH * (size_t)G * sizeof *bad) : NULL;
  int32_t *best = a ? arena_alloc(a, (size_t)G * sizeof *best) : NULL;
  bool ok = allowed && theta && pi && samples && choices && local && bad && best;
  for (int32_t g = 0; ok && g < G; g++) {
    int32_t n = n_allowed[g] > 0 ? n_allowed[g] : 1;
    theta[g] = arena_alloc(a, (size_t)n * sizeof **theta);
    pi[g] = arena_alloc(a, (size_t)n * sizeof **pi);
    ok = theta[g] && pi[g];
  }
  if (!ok) {
    arena_free(a);
    return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
  }
  rng rg;
  rng_seed(&rg, o->seed);
  solve_budget b;
  solve_budget_start(&b, o);
  sp_score best_s = {INFINITY, INFINITY, 0};
  double global[BATCH]; /* the memory part of each sample's objective (or its hard excess) */
  bool out = false;
  int64_t n_restarts = 0;
  while (!out) {
    int32_t n_b = 0;
    double max_term = 0;
    for (; n_b < BATCH && !out; n_b++) {
      int32_t *pos = &samples[(size_t)n_b * (size_t)G], *c = &choices[(size_t)n_b * (size_t)G];
      for (int32_t g = 0; g < G; g++) {
        int32_t n = n_allowed[g];
        pos[g] = 0;
        if (n > 1) {
          softmax(theta[g], n, pi[g]);
          double u = rng_uniform(&rg), acc = 0;
          pos[g] = n - 1;
          for (int32_t k = 0; k < n; k++)
            if ((acc += pi[g][k]) > u) {
              pos[g] = k;
              break;
            }
        }
        c[g] = n > 0 ? allowed[g][pos[g]] : 0;
      }
      sp_score s = sp_eval(p, c);
      out = solve_budget_spend(&b);
      if (sp_better(s, best_s)) {
        best_s = s;
        memcpy(best, c, (size_t)G * sizeof *best);
      }
      double terms = 0, n_bad_all = 0;
      for (int32_t g = 0; g < G; g++) {
        int32_t nb = 0;
        local[(size_t)n_b * (size_t)G + (size_t)g] = local_cost(p, c, g, &nb, &max_term);
        bad[(size_t)n_b * (size_t)G + (size_t)g] = nb;
      }
      for (int32_t g = 0; g < G; g++) {
        double x = p->unary[g][c[g]];
        if (x < INFINITY) terms += x;
        else n_bad_all++;
      }
      for (int32_t e = 0; e < p->n_pairs; e++) {
        const sp_pair *t = &p->pairs[e];
        double x = t->cost[(size_t)c[t->g] * (size_t)p->n_s[t->h] + (size_t)c[t->h]];
        if (x < INFINITY) terms += x;
        else n_bad_all++;
      }
      /* What sp_eval adds beyond the node and edge terms: the penalty, or the hard excess as violation. */
      global[n_b] = s.objective - terms + (s.violation - n_bad_all);
    }
    if (n_b < 2) continue;
    /* A policy that has become deterministic in every group samples one choice over and over: start it
     * again from uniform (the best choice is kept), as restarts do for a local search. */
    bool converged = true;
    for (int32_t g = 0; g < G && converged; g++)
      if (n_allowed[g] > 1) {
        softmax(theta[g], n_allowed[g], pi[g]);
        double mx = 0;
        for (int32_t k = 0; k < n_allowed[g]; k++) mx = fmax(mx, pi[g][k]);
        converged = mx > CONVERGED;
      }
    if (converged) {
      for (int32_t g = 0; g < G; g++)
        for (int32_t k = 0; k < n_allowed[g]; k++) theta[g][k] = 0;
      n_restarts++;
      continue;
    }
    double bad_cost = 2 * max_term + 1;
    for (int32_t g = 0; g < G; g++) {
      int32_t n = n_allowed[g];
      if (n < 2) continue;
      double rw[BATCH], mean = 0, var = 0;
      for (int32_t i = 0; i < n_b; i++) {
        size_t at = (size_t)i * (size_t)G + (size_t)g;
        rw[i] = -(local[at] + bad_cost * bad[at] + (global[i] > 0 ? global[i] * bad_cost : 0));
        mean += rw[i];
      }
      mean /= n_b;
      for (int32_t i = 0; i < n_b; i++) var += (rw[i] - mean) * (rw[i] - mean);
      double sd = sqrt(var / n_b);
      if (!(sd > 1e-12 * (fabs(mean) + 1))) continue;
      softmax(theta[g], n, pi[g]);
      for (int32_t i = 0; i < n_b; i++) {
        double step = LR * (rw[i] - mean) / sd / n_b;
        int32_t k_s = samples[(size_t)i * (size_t)G + (size_t)g];
        for (int32_t k = 0; k < n; k++) theta[g][k] += step * ((k == k_s ? 1.0 : 0.0) - pi[g][k]);
      }
      for (int32_t k = 0; k < n; k++) theta[g][k] = fmax(-LOGIT_MAX, fmin(LOGIT_MAX, theta[g][k]));
    }
  }
  int32_t *c = choices; /* the policy's own greedy choice */
  for (int32_t g = 0; g < G; g++) {
    int32_t arg = 0;
    for (int32_t k = 1; k < n_allowed[g]; k++)
      if (theta[g][k] > theta[g][arg]) arg = k;
    c[g] = n_allowed[g] > 0 ? allowed[g][arg] : 0;
  }
  sp_score s = sp_eval(p, c);
  b.n_evals++;
  if (sp_better(s, best_s)) {
    best_s = s;
    memcpy(best, c, (size_t)G * sizeof *best);
  }
  solve_finish_heuristic(p, best, best_s, &b, r);
  arena_free(a);
  return AP_OK;
}
