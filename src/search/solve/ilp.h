/* The "ilp" optional part's table of entry points (search layer; docs/build.md "Optional parts"). The part
 * (src/search/solve/sharding_ilp.c, built into libautopar-ilp.a with CBC) defines ap_part_ilp(), whose ops point to
 * this table; the core reaches it only through ctx_part_ops(ctx, "ilp") and fails with AP_UNSUPPORTED naming
 * the part where a context has none. */
#ifndef AP_SEARCH_ILP_H
#define AP_SEARCH_ILP_H

#include "search/solve/solve.h"

typedef struct {
  /* Solves a sharding problem exactly (Alpa's intra-op ILP) within o->time_budget_s, and its LP relaxation
   * for r->lower_bound. Statuses: optimal, feasible (time limit reached with an incumbent), infeasible. */
  ap_status (*solve_sharding)(ap_ctx *ctx, const sp_problem *p, const solve_opts *o, sp_result *r);
} ilp_ops;

#endif
