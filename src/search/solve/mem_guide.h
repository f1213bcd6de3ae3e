/* Memory guidance for the stochastic searches (search layer; mcmc.c, mcts.c and rl.c use it): what a memory
 * budget over liveness sets (docs/solve.md, autopar-sharding-problem/1) says about one group's strategy while
 * the others are fixed or still open, so that moves, rollouts and policy updates can see the budget instead of
 * meeting it only in the final score.
 *
 * A tracker holds, per program point, the memory of the groups decided so far and the least memory the groups
 * still open can take there (each at its leanest allowed strategy): their sum is a lower bound on that point's
 * memory in any completion, and the largest over the points a lower bound on the peak. A strategy whose bound
 * exceeds a hard budget cannot be completed into a feasible choice (so a rollout never takes it while another
 * fits); under an over-budget penalty the bound's excess is priced at the problem's cost per byte. The same
 * per-group terms give each group's share of the memory at a point (the credit rl.c gives it for an excess).
 * Everything lives in the caller's arena. */
#ifndef AP_SEARCH_MEM_GUIDE_H
#define AP_SEARCH_MEM_GUIDE_H

#include "search/solve/solve.h"

typedef struct {
  int32_t point;
  const double *mem_bytes; /* per strategy of the group: its memory at that point */
  double min_bytes;        /* the least over the group's allowed strategies */
} mg_term;

typedef struct {
  const sp_problem *p;
  bool active;             /* the problem has a budget and program points; otherwise every call is neutral */
  int32_t *term_start;     /* CSR per group over terms */
  mg_term *terms;
  double *used;            /* per point: decided groups' memory */
  double *rest;            /* per point: open groups' least memory */
  double *rest_full;       /* per point: every group's least memory (the state after mg_reset) */
  double unit_price;       /* cost units per byte at which the groups' cost and memory spreads balance */
  double price;            /* what mg_extra_cost charges per byte a strategy takes above the group's leanest
                              (0 after mg_init; a search sets it, e.g. to a multiple of unit_price) */
} mem_guide;

/* Builds the guide; false when out of memory. allowed/n_allowed are solve_allowed_lists'. */
AP_HIDDEN bool mg_init(mem_guide *m, arena *a, const sp_problem *p, int32_t *const *allowed, const int32_t *n_allowed);
/* Every group open. */
AP_HIDDEN void mg_reset(mem_guide *m);
/* Decides group g at strategy k (g must be open). */
AP_HIDDEN void mg_set(mem_guide *m, int32_t g, int32_t k);
/* The lower bound on the peak if open group g took strategy k, minus the budget (<= 0: it may still fit). */
AP_HIDDEN double mg_excess_bytes(const mem_guide *m, int32_t g, int32_t k);
/* What taking k costs a rollout beyond its local terms: under a penalty, the penalty on the bound's excess
 * over what it already is; under a hard budget, INFINITY when the bound exceeds it; 0 without a budget. Plus
 * price times the bytes k takes above the group's leanest strategy (a Lagrangian price on the budget, so that
 * early groups do not spend all of it). */
AP_HIDDEN double mg_extra_cost(const mem_guide *m, int32_t g, int32_t k);
/* Of a complete choice: the point of largest memory (-1 without a budget) and its memory. */
AP_HIDDEN int32_t mg_peak_point(const mem_guide *m, const int32_t *choice, double *peak_bytes);
/* Group g's memory at point t under strategy k (0 when g has no term there). */
AP_HIDDEN double mg_mem_at(const mem_guide *m, int32_t g, int32_t k, int32_t t);

#endif
