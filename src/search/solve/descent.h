/* A finishing local descent for the stochastic searches (search layer; mcmc.c, mcts.c and rl.c end with it): from a
 * choice, first-improvement moves of one group to another allowed strategy, scored in full by sp_eval and
 * compared by sp_better (less violation first, so a choice over a hard budget walks back into the feasible
 * set before it trades cost), until a sweep over every group improves nothing or the budget is spent. The chain,
 * the rollouts and REINFORCE's samples find the region of a good choice; the last few units of cost between a
 * sampled choice and its single-move local optimum are what a descent finds for a few hundred evaluations
 * (a Monte Carlo search with a local search finish). Each keeps a tenth of their budget for it
 * (solve_budget_reserve). */
#ifndef AP_SEARCH_DESCENT_H
#define AP_SEARCH_DESCENT_H

#include "search/solve/solve.h"

/* Improves choice (per group) in place; *s is its score on entry and on return. Every score counts against b;
 * stops when b is out. allowed/n_allowed are solve_allowed_lists'. */
AP_HIDDEN void solve_descend(const sp_problem *p, int32_t *const *allowed, const int32_t *n_allowed, int32_t *choice,
                             sp_score *s, solve_budget *b);

/* Holds back a tenth of b's evaluations (and of its time) for the finish: b then runs out early. */
typedef struct {
  int64_t max_evals;
  double limit_s;
} solve_reserve;
AP_HIDDEN void solve_budget_reserve(solve_budget *b, solve_reserve *r);
/* Gives the held-back part back. A budget the progress callback stopped stays stopped. */
AP_HIDDEN void solve_budget_release(solve_budget *b, const solve_reserve *r);

#endif
