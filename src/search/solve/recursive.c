/* Recursive partitioning on sharding problem files (search layer; strategy "recursive").
 *
 * D-Rec and Tofu (Wang et al., "Supporting Very Large Models using Automatic Dataflow Graph Partitioning",
 * EuroSys 2019, §4) partition recursively over *devices*: log2 n rounds, each a 2-way cut of every tensor
 * decided by a DP over the graph. A problem file has no device axis and no tensor dims to cut, so that form
 * comes with the graph path. What carries over to a problem file is the divide and conquer over the *nodes*:
 * the groups (in file order, topological in practice) are bisected recursively until a block's joint choices
 * number at most LEAF; each such block is solved exactly by enumeration with the rest fixed; on the way back
 * up, a window of groups straddling each cut is re-solved exactly the same way, so that decisions on both
 * sides of a cut meet. Passes repeat from the result until one improves nothing or the budget is spent. It
 * starts from every group's cheapest allowed strategy. A local method: it reports "feasible". */
#include <string.h>

#include "search/solve/solve.h"

/* TUNING: 256 joint choices per block: 4 groups of 4 strategies, enough to move a pair across a cut together,
 * and a pass over 50 groups stays near 10,000 evaluations. */
enum { LEAF = 256 };

typedef struct {
  const sp_problem *p;
  int32_t **allowed, *n_allowed;
  int32_t *cur, *pos;
  sp_score cur_s;
  solve_budget *b;
  bool improved;
} rec;

/* The joint choices of groups lo..hi-1, capped at LEAF + 1. */
static int64_t combos(const rec *r, int32_t lo, int32_t hi) {
  int64_t n = 1;
  for (int32_t g = lo; g < hi && n <= LEAF; g++) n *= r->n_allowed[g] > 0 ? r->n_allowed[g] : 1;
  return n;
}

/* Tries every joint choice of groups lo..hi-1 (odometer over their allowed lists), keeping the best. */
static void block_opt(rec *r, int32_t lo, int32_t hi) {
  int32_t G = r->p->n_groups;
  if (lo < 0) lo = 0;
  if (hi > G) hi = G;
  int32_t *saved = r->pos; /* scratch: the odometer positions */
  for (int32_t g = lo; g < hi; g++) saved[g] = 0;
  int32_t *best = r->pos + G; /* scratch: the best block choice */
  memcpy(best + lo, r->cur + lo, (size_t)(hi - lo) * sizeof *best);
  for (;;) {
    for (int32_t g = lo; g < hi; g++)
      if (r->n_allowed[g] > 0) r->cur[g] = r->allowed[g][saved[g]];
    if (r->b->out) break;
    sp_score s = sp_eval(r->p, r->cur);
    solve_budget_spend(r->b);
    if (sp_better(s, r->cur_s)) {
      r->cur_s = s;
      r->improved = true;
      memcpy(best + lo, r->cur + lo, (size_t)(hi - lo) * sizeof *best);
    }
    int32_t g = lo;
    for (; g < hi; g++) {
      if (++saved[g] < (r->n_allowed[g] > 0 ? r->n_allowed[g] : 1)) break;
      saved[g] = 0;
    }
    if (g == hi) break;
  }
  memcpy(r->cur + lo, best + lo, (size_t)(hi - lo) * sizeof *best);
}

static void recurse(rec *r, int32_t lo, int32_t hi) {
  if (r->b->out || hi <= lo) return;
  if (combos(r, lo, hi) <= LEAF) {
    block_opt(r, lo, hi);
    return;
  }
  int32_t mid = lo + (hi - lo) / 2;
  recurse(r, lo, mid);
  recurse(r, mid, hi);
  /* The window across the cut: grow it on alternate sides while the joint choices fit in LEAF. */
  int32_t a = mid - 1, z = mid + 1;
  for (bool left = false;; left = !left) {
    int32_t na = left ? a - 1 : a, nz = left ? z : z + 1;
    if (na < lo || nz > hi || combos(r, na, nz) > LEAF) break;
    a = na, z = nz;
  }
  if (combos(r, a, z) <= LEAF) block_opt(r, a, z);
}

ap_status solve_recursive(ap_ctx *ctx, const sp_problem *p, const solve_opts *o, sp_result *res) {
  int32_t G = p->n_groups;
  arena *a = arena_new();
  rec r = {p, NULL, NULL, NULL, NULL, {0, 0, 0}, NULL, false};
  r.allowed = a ? solve_allowed_lists(a, p, &r.n_allowed) : NULL;
  r.cur = a ? arena_alloc(a, (size_t)G * sizeof *r.cur) : NULL;
  r.pos = a ? arena_alloc(a, 2 * (size_t)G * sizeof *r.pos) : NULL;
  if (!r.allowed || !r.cur || !r.pos) {
    arena_free(a);
    return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
  }
  for (int32_t g = 0; g < G; g++) r.cur[g] = r.n_allowed[g] > 0 ? r.allowed[g][0] : 0;
  solve_budget b;
  solve_budget_start(&b, o);
  r.b = &b;
  r.cur_s = sp_eval(p, r.cur);
  solve_budget_spend(&b);
  do {
    r.improved = false;
    recurse(&r, 0, G);
  } while (r.improved && !b.out);
  solve_finish_heuristic(p, r.cur, sp_eval(p, r.cur), &b, res);
  arena_free(a);
  return AP_OK;
}
