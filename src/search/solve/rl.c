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
 * So A_g is the batch-standardised value of −(g's cost + its incident resharding costs + its memory term),
 * a forbidden term counting as the batch's largest finite term, doubled. Standardising within the batch makes
 * the step size independent of the problem's cost units. With a memory budget, a sample whose peak is over the
 * budget charges each group its own memory at that peak point times a price: the penalty per byte under a
 * penalty (the derivative of the penalty in that group's memory), a Lagrangian multiplier under a hard budget,
 * raised while most samples of a batch break the budget and lowered while most keep it (mem_guide.h). The
 * best sampled choice and the policy's final argmax choice are scored, and the better one is finished by a
 * local descent (descent.h) on the tenth of the budget kept for it. Seeded: the same seed and budget give the
 * same result. */
#include <math.h>
#include <string.h>

#include "search/solve/descent.h"
#include "search/solve/mem_guide.h"

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
  mem_guide mg;
  bool ok = allowed && theta && pi && samples && choices && local && bad && best && mg_init(&mg, a, p, allowed, n_allowed);
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
  solve_reserve reserve;
  solve_budget_reserve(&b, &reserve);
  sp_score best_s = {INFINITY, INFINITY, 0};
  int32_t peak_at[BATCH]; /* each sample's point of largest memory when it is over the budget, else -1 */
  /* The price per byte of a group's memory at an over-budget peak: the penalty's own under a penalty; under a
   * hard budget a Lagrangian multiplier, raised while most samples break the budget and lowered while most
   * keep it (TUNING: from the balancing price, by factors 1.5 and 1/1.2). */
  double price = p->has_penalty ? p->penalty_per_byte : mg.unit_price;
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
      for (int32_t g = 0; g < G; g++) {
        int32_t nb = 0;
        local[(size_t)n_b * (size_t)G + (size_t)g] = local_cost(p, c, g, &nb, &max_term);
        bad[(size_t)n_b * (size_t)G + (size_t)g] = nb;
      }
      double peak;
      int32_t t_peak = mg_peak_point(&mg, c, &peak);
      peak_at[n_b] = t_peak >= 0 && peak > p->budget_bytes ? t_peak : -1;
    }
    if (n_b < 2) continue;
    if (!p->has_penalty && mg.active) {
      int32_t n_over = 0;
      for (int32_t i = 0; i < n_b; i++) n_over += peak_at[i] >= 0;
      if (2 * n_over > n_b) price *= 1.5;
      else price /= 1.2;
    }
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
        /* The group's memory at the peak of a sample over budget is its share of the excess. */
        int32_t k_g = choices[at];
        double mem = peak_at[i] >= 0 ? price * mg_mem_at(&mg, g, k_g, peak_at[i]) : 0;
        rw[i] = -(local[at] + bad_cost * bad[at] + mem);
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
  solve_budget_release(&b, &reserve);
  if (!b.out) {
    sp_score s = sp_eval(p, c);
    solve_budget_spend(&b);
    if (sp_better(s, best_s)) {
      best_s = s;
      memcpy(best, c, (size_t)G * sizeof *best);
    }
  }
  solve_descend(p, allowed, n_allowed, best, &best_s, &b);
  solve_finish_heuristic(p, best, best_s, &b, r);
  arena_free(a);
  return AP_OK;
}
