/* MCMC over per-node strategies on sharding problem files (search layer; strategy "mcmc"), after FlexFlow's
 * search loop (flexflow/FlexFlow src/runtime/model.cc, FFModel::mcmc_optimize; SURVEY.md §3.2, NOTES.md
 * "FlexFlow's MCMC"):
 *  - a move sets one random group (a node and its followers) to another random allowed strategy; with
 *    probability PROPAGATION_CHANCE it then also propagates the change along the group's edges, each
 *    neighbour taking its locally cheapest strategy given the new one (FlexFlow's optional propagation move,
 *    which copies a config along an edge: a problem file's strategy indices mean nothing across nodes, so
 *    "the same config" becomes "the config that fits best");
 *  - Metropolis acceptance: a better state always, a worse one with probability exp(-alpha · Δ), alpha = 1.2
 *    by default (FlexFlow's searchAlpha at HEAD), Δ in the problem's cost units (FlexFlow's are ms);
 *  - the chain goes back to the best state every clamp(budget / 100, 1, 1000) iterations;
 *  - it starts from each group's cheapest allowed strategy (FlexFlow starts from data parallelism, which a
 *    problem file does not name).
 * A state that breaks a constraint (a forbidden pair, a hard memory budget) is compared by how much it breaks
 * first: a move that reduces the violation is accepted, one that increases it is rejected, and Metropolis
 * applies between states of equal violation, so the chain walks out of infeasible regions (over a hard
 * memory budget too; a penalty is part of the objective). A tenth of the budget is kept for a local descent
 * from the best state (descent.h), as MCTS and RL end: on the large strategy sets of a 2-axis mesh (up to 121
 * per op) the chain's last accepted moves are rarely the single-move optimum around its best state.
 * Each move is scored in full: on a problem file one evaluation is a sum over its terms. The delta simulation
 * the issue asks of MCMC (re-simulating only from the first affected event) concerns the graph path's
 * event simulator, which problem files do not use; it comes with that path. */
#include <string.h>

#include "search/descent.h"

/* TUNING: half the moves propagate. Single-node moves alone rarely leave a local optimum where resharding
 * ties neighbours together (a change pays the resharding on every edge until the neighbours follow). */
static const double PROPAGATION_CHANCE = 0.5;

/* Sets each neighbour of g to its locally cheapest allowed strategy given the current choice. */
static void propagate(const sp_problem *p, int32_t *cur, int32_t g, int32_t *const *allowed, const int32_t *n_allowed) {
  for (int32_t q = p->adj_start[g]; q < p->adj_start[g + 1]; q++) {
    int32_t h = sp_pair_other(&p->pairs[p->adj[q]], g);
    double best = INFINITY;
    for (int32_t i = 0; i < n_allowed[h]; i++) {
      int32_t k = allowed[h][i];
      double c = p->unary[h][k];
      for (int32_t r = p->adj_start[h]; r < p->adj_start[h + 1] && c < best; r++) {
        const sp_pair *e = &p->pairs[p->adj[r]];
        c += sp_pair_cost(p, e, h, k, cur[sp_pair_other(e, h)]);
      }
      if (c < best) best = c, cur[h] = k;
    }
  }
}

ap_status solve_mcmc(ap_ctx *ctx, const sp_problem *p, const solve_opts *o, sp_result *r) {
  int32_t G = p->n_groups;
  arena *a = arena_new();
  int32_t *n_allowed = NULL;
  int32_t **allowed = a ? solve_allowed_lists(a, p, &n_allowed) : NULL;
  int32_t *cur = a ? arena_alloc(a, (size_t)G * sizeof *cur) : NULL;
  int32_t *best = a ? arena_alloc(a, (size_t)G * sizeof *best) : NULL;
  int32_t *movable = a ? arena_alloc(a, (size_t)G * sizeof *movable) : NULL;
  int32_t *prev = a ? arena_alloc(a, (size_t)G * sizeof *prev) : NULL;
  if (!allowed || !cur || !best || !movable || !prev) {
    arena_free(a);
    return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
  }
  int32_t n_movable = 0;
  for (int32_t g = 0; g < G; g++) {
    cur[g] = n_allowed[g] > 0 ? allowed[g][0] : 0;
    if (n_allowed[g] >= 2) movable[n_movable++] = g;
  }
  rng rg;
  rng_seed(&rg, o->seed);
  solve_budget b;
  solve_budget_start(&b, o);
  solve_reserve reserve;
  solve_budget_reserve(&b, &reserve);
  sp_score cur_s = sp_eval(p, cur), best_s = cur_s;
  memcpy(best, cur, (size_t)G * sizeof *best);
  bool out = solve_budget_spend(&b);
  /* TUNING: FlexFlow's reset span; with only a time budget, the cap (1000). */
  int64_t span = o->max_evals > 0 ? o->max_evals / 100 : 1000;
  if (span < 1) span = 1;
  if (span > 1000) span = 1000;
  int64_t last_reset = 0;
  for (int64_t iter = 1; !out && n_movable > 0; iter++) {
    if (iter - last_reset >= span) {
      memcpy(cur, best, (size_t)G * sizeof *cur);
      cur_s = best_s;
      last_reset = iter;
    }
    int32_t g = movable[rng_below(&rg, (uint64_t)n_movable)];
    int32_t old = cur[g];
    bool prop = rng_uniform(&rg) < PROPAGATION_CHANCE;
    if (prop) memcpy(prev, cur, (size_t)G * sizeof *prev);
    /* Another allowed strategy, uniformly. */
    int32_t pick = (int32_t)rng_below(&rg, (uint64_t)(n_allowed[g] - 1));
    int32_t k = allowed[g][pick];
    if (k == old) k = allowed[g][n_allowed[g] - 1];
    cur[g] = k;
    if (prop) propagate(p, cur, g, allowed, n_allowed);
    sp_score s = sp_eval(p, cur);
    out = solve_budget_spend(&b);
    if (sp_better(s, best_s)) {
      best_s = s;
      memcpy(best, cur, (size_t)G * sizeof *best);
    }
    bool accept;
    if (s.violation != cur_s.violation) accept = s.violation < cur_s.violation;
    else accept = s.objective <= cur_s.objective || rng_uniform(&rg) < exp(-o->mcmc_alpha * (s.objective - cur_s.objective));
    if (accept) cur_s = s;
    else if (prop) memcpy(cur, prev, (size_t)G * sizeof *cur);
    else cur[g] = old;
  }
  solve_budget_release(&b, &reserve);
  solve_descend(p, allowed, n_allowed, best, &best_s, &b);
  solve_finish_heuristic(p, best, best_s, &b, r);
  arena_free(a);
  return AP_OK;
}
