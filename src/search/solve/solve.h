/* Solve strategies for problem files (search layer): the registry that `autopar solve` picks from, the options
 * every strategy takes (an evaluation budget for tests, a time budget for users, a seed) and the results they
 * fill in. Each strategy is one file under src/search/ (sharding_ilp.c through the "ilp" part, inter_op.c,
 * elim_dp.c, greedy.c, mcmc.c, mcts.c, rl.c, recursive.c); none includes another. docs/solve.md describes
 * what each does on a problem file. */
#ifndef AP_SEARCH_SOLVE_H
#define AP_SEARCH_SOLVE_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/rng.h"
#include "search/solve/problem.h"

typedef struct {
  int64_t max_evals;    /* evaluations of the objective a heuristic may spend; 0 = no limit */
  double time_budget_s; /* wall-clock limit; 0 = none */
  uint64_t seed;
  const int32_t *annotate; /* per node: the strategy a user fixed (greedy's seeds), -1 for none; NULL = none */
  double mcmc_alpha;       /* Metropolis acceptance exp(-alpha * delta), delta in the problem's cost units */
  ap_ctx *progress;        /* where the budget reports progress (and may be told to stop); NULL = nowhere */
  bool skip_lower_bound;   /* the ILP skips its LP relaxation (lower_bound NAN): the inter-op pass's many stage
                              solves use only the optimum, and the relaxation took a third of their time */
  double deadline_s;       /* solve_clock_s() by which the strategy returns, model building included (one wall
                              clock for the whole command, issue 19 class 3); 0 = time_budget_s from its start */
} solve_opts;

/* Defaults: 20,000 evaluations (the test budget), 60 s, seed 1, alpha 1.2 (FlexFlow's searchAlpha at
 * HEAD, src/runtime/model.cc; NOTES.md "FlexFlow's MCMC"). */
AP_HIDDEN void solve_opts_init(solve_opts *o);

typedef enum { SOLVE_OPTIMAL, SOLVE_FEASIBLE, SOLVE_INFEASIBLE } solve_status;

typedef struct {
  solve_status status;
  double objective;
  double lower_bound; /* NAN when the strategy has none */
  int32_t *choice;    /* per group (caller-allocated, sp_problem.n_groups entries) */
  int64_t n_evals;    /* objective evaluations (heuristics), or 0 */
  const char *answer_from; /* NULL: the strategy's own answer; else what gave it when the time budget ended first
                              (the ILP: "greedy", its heuristic start, when CBC had no better incumbent) */
  bool timed_out;     /* the time budget ended before the strategy finished (the result is its best so far) */
} sp_result;

typedef struct {
  int32_t first_layer, last_layer, submesh, config;
} stp_stage;

typedef struct {
  solve_status status;
  double objective;
  double lower_bound;
  int32_t n_stages;
  stp_stage *stages; /* caller-allocated, n_layers entries */
  int64_t n_evals;
} stp_result;

typedef struct {
  const char *name;
  const char *summary;
  bool exact; /* an "infeasible" from it is a proof, not a search that came back empty-handed */
  /* Either may be NULL: the strategy does not solve that kind of problem. */
  ap_status (*sharding)(ap_ctx *ctx, const sp_problem *p, const solve_opts *o, sp_result *r);
  ap_status (*stage)(ap_ctx *ctx, const stp_problem *p, const solve_opts *o, stp_result *r);
} solve_strategy;

/* The registry (solve.c), in the order `autopar solve --help` lists it. */
AP_HIDDEN const solve_strategy *solve_strategies(size_t *n_out);
AP_HIDDEN const solve_strategy *solve_strategy_find(const char *name);

/* A budget: counts evaluations and watches the clock (read every 64 evaluations, so cheap); every 1024
 * evaluations it reports progress through the context's callback, which may stop the search (the strategy
 * then returns the best it has, as when the budget runs out). */
typedef struct {
  int64_t max_evals, n_evals;
  double limit_s, t0_s;
  bool out;
  ap_ctx *progress;
} solve_budget;
AP_HIDDEN double solve_clock_s(void);
AP_HIDDEN void solve_budget_start(solve_budget *b, const solve_opts *o);
/* Counts one evaluation; returns true once the budget is spent. */
AP_HIDDEN bool solve_budget_spend(solve_budget *b);
/* The deadline o sets (o->deadline_s, or time_budget_s from now); INFINITY when neither. */
AP_HIDDEN double solve_deadline_s(const solve_opts *o);
/* Seconds left (INFINITY when no time limit). */
AP_HIDDEN double solve_budget_left_s(const solve_budget *b);

/* Fills r from the best choice a heuristic found (copying it into r->choice): feasible when it violates
 * nothing, else infeasible. */
AP_HIDDEN void solve_finish_heuristic(const sp_problem *p, const int32_t *best, sp_score s, const solve_budget *b,
                                      sp_result *r);
/* Per group, its allowed strategies in increasing unary cost (ties by index): allowed[g][0..n_allowed[g]).
 * Allocated in arena a; NULL when out of memory. */
AP_HIDDEN int32_t **solve_allowed_lists(arena *a, const sp_problem *p, int32_t **n_allowed_out);

/* The strategies (one file each). */
AP_HIDDEN ap_status solve_ilp(ap_ctx *ctx, const sp_problem *p, const solve_opts *o, sp_result *r);
AP_HIDDEN ap_status solve_inter_op(ap_ctx *ctx, const stp_problem *p, const solve_opts *o, stp_result *r);
AP_HIDDEN ap_status solve_elim_dp(ap_ctx *ctx, const sp_problem *p, const solve_opts *o, sp_result *r);
/* Eliminates the groups of p with at most two neighbours (elim_dp.c), solves what is left with kernel_solve and
 * rebuilds the whole choice; without a memory budget only (with one, kernel_solve gets p unchanged). */
AP_HIDDEN ap_status solve_elim_presolved(ap_ctx *ctx, const sp_problem *p, const solve_opts *o, sp_result *r,
                                         ap_status (*kernel_solve)(ap_ctx *, const sp_problem *, const solve_opts *,
                                                                   sp_result *));
AP_HIDDEN ap_status solve_greedy(ap_ctx *ctx, const sp_problem *p, const solve_opts *o, sp_result *r);
AP_HIDDEN ap_status solve_mcmc(ap_ctx *ctx, const sp_problem *p, const solve_opts *o, sp_result *r);
AP_HIDDEN ap_status solve_mcts(ap_ctx *ctx, const sp_problem *p, const solve_opts *o, sp_result *r);
AP_HIDDEN ap_status solve_rl(ap_ctx *ctx, const sp_problem *p, const solve_opts *o, sp_result *r);
AP_HIDDEN ap_status solve_recursive(ap_ctx *ctx, const sp_problem *p, const solve_opts *o, sp_result *r);

#endif
