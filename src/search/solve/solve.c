/* The registry of solve strategies and what they share (search layer; see solve.h): options, the budget,
 * the finishing of a heuristic's result, and the core side of the "ilp" strategy, which reaches CBC only
 * through the optional part (search/ilp.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "search/solve/descent.h"
#include "search/solve/ilp.h"
#include "search/solve/solve.h"

static const solve_strategy strategies[] = {
    {"ilp", "exact intra-op ILP through CBC, LP relaxation as lower bound (Alpa)", true, solve_ilp, NULL},
    {"inter-op", "exact stage DP over layer ranges, submeshes and configs (Alpa)", true, NULL, solve_inter_op},
    {"elim-dp", "exact elimination DP on series-parallel (incl. tree and chain) problems", true, solve_elim_dp, NULL},
    {"greedy", "sharding propagation along edges from annotations or the cheapest node (GSPMD)", false, solve_greedy,
     NULL},
    {"mcmc", "Metropolis search over per-node strategies (FlexFlow)", false, solve_mcmc, NULL},
    {"mcts", "UCT tree search over per-node decisions", false, solve_mcts, NULL},
    {"rl", "REINFORCE with a softmax policy per node", false, solve_rl, NULL},
    {"recursive", "recursive bisection of the nodes with exact re-optimisation of small blocks", false, solve_recursive,
     NULL},
};

const solve_strategy *solve_strategies(size_t *n_out) {
  *n_out = AP_COUNT(strategies);
  return strategies;
}

const solve_strategy *solve_strategy_find(const char *name) {
  for (size_t i = 0; i < AP_COUNT(strategies); i++)
    if (strcmp(strategies[i].name, name) == 0) return &strategies[i];
  return NULL;
}

void solve_opts_init(solve_opts *o) {
  memset(o, 0, sizeof *o);
  o->max_evals = 20000;
  o->time_budget_s = 60;
  o->seed = 1;
  o->mcmc_alpha = 1.2;
}

double solve_clock_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double solve_deadline_s(const solve_opts *o) {
  if (o->deadline_s > 0) return o->deadline_s;
  return o->time_budget_s > 0 ? solve_clock_s() + o->time_budget_s : INFINITY;
}

void solve_budget_start(solve_budget *b, const solve_opts *o) {
  b->max_evals = o->max_evals;
  b->n_evals = 0;
  b->limit_s = o->time_budget_s;
  b->t0_s = solve_clock_s();
  /* One deadline for the whole command: what reading and presolving took is not given again. */
  if (o->deadline_s > 0) {
    double left = o->deadline_s - b->t0_s;
    b->limit_s = left > 1e-6 ? left : 1e-6;
  }
  b->out = false;
  b->progress = o->progress;
}

bool solve_budget_spend(solve_budget *b) {
  b->n_evals++;
  if (b->max_evals > 0 && b->n_evals >= b->max_evals) b->out = true;
  /* The clock every 64 evaluations, and at every one of the first 64: on a big problem one evaluation can take
   * milliseconds, and a short budget must not wait 64 of them. */
  if (b->limit_s > 0 && (b->n_evals < 64 || (b->n_evals & 63) == 0) && solve_clock_s() - b->t0_s >= b->limit_s)
    b->out = true;
  if (b->progress && (b->n_evals & 1023) == 0) {
    double f = b->max_evals > 0 ? (double)b->n_evals / (double)b->max_evals
                                : b->limit_s > 0 ? (solve_clock_s() - b->t0_s) / b->limit_s : 0;
    if (ctx_progress(b->progress, f < 1 ? f : 1, "solve")) b->out = true;
  }
  return b->out;
}

double solve_budget_left_s(const solve_budget *b) {
  if (b->limit_s <= 0) return INFINITY;
  double left = b->limit_s - (solve_clock_s() - b->t0_s);
  return left > 0 ? left : 0;
}

void solve_finish_heuristic(const sp_problem *p, const int32_t *best, sp_score s, const solve_budget *b,
                            sp_result *r) {
  memcpy(r->choice, best, (size_t)p->n_groups * sizeof *best);
  r->status = s.violation > 0 ? SOLVE_INFEASIBLE : SOLVE_FEASIBLE;
  r->objective = s.objective;
  r->lower_bound = NAN;
  r->n_evals = b->n_evals;
}

/* A strategy and its unary cost, for sorting a group's allowed strategies. */
typedef struct {
  int32_t k;
  double cost;
} ranked;

static int ranked_cmp(const void *x, const void *y) {
  const ranked *a = x, *b = y;
  if (a->cost != b->cost) return a->cost < b->cost ? -1 : 1;
  return (a->k > b->k) - (a->k < b->k);
}

int32_t **solve_allowed_lists(arena *a, const sp_problem *p, int32_t **n_allowed_out) {
  int32_t **lists = arena_alloc(a, (size_t)p->n_groups * sizeof *lists);
  int32_t *n_allowed = arena_alloc(a, (size_t)p->n_groups * sizeof *n_allowed);
  if (!lists || !n_allowed) return NULL;
  for (int32_t g = 0; g < p->n_groups; g++) {
    ranked *tmp = arena_alloc(a, (size_t)p->n_s[g] * sizeof *tmp);
    lists[g] = arena_alloc(a, (size_t)p->n_s[g] * sizeof **lists);
    if (!tmp || !lists[g]) return NULL;
    int32_t n = 0;
    for (int32_t k = 0; k < p->n_s[g]; k++)
      if (sp_allowed(p, g, k)) tmp[n++] = (ranked){k, p->unary[g][k]};
    qsort(tmp, (size_t)n, sizeof *tmp, ranked_cmp);
    for (int32_t i = 0; i < n; i++) lists[g][i] = tmp[i].k;
    n_allowed[g] = n;
  }
  *n_allowed_out = n_allowed;
  return lists;
}

/* The ILP on the presolved kernel, under one deadline: greedy's choice first (one evaluation) improved by a
 * local descent (solve_descend: less violation first, so a choice over a hard memory budget walks back into
 * the feasible set) for at most a tenth of the time. When the time budget ends first (in the build, before CBC
 * can start, or in CBC without a better incumbent), the answer is that heuristic's, with the time left spent
 * descending further, and the result says so (answer_from). It is not given to CBC as a MIP start
 * (Cbc_setMIPStartI): with one, CBC 2.10.8 left 1 of the 300 brute-force problems of tests/test_solve_ilp.c
 * (kind 3, seed 18) unproved. */
static void heuristic(const sp_problem *p, arena *a, int32_t *h, double limit_s, sp_score *s) {
  int32_t *n_allowed = NULL, **allowed = solve_allowed_lists(a, p, &n_allowed);
  if (!allowed) return;
  solve_opts od;
  solve_opts_init(&od);
  od.max_evals = 0;
  od.time_budget_s = limit_s > 1e-6 ? limit_s : 1e-6;
  solve_budget b;
  solve_budget_start(&b, &od);
  solve_descend(p, allowed, n_allowed, h, s, &b);
}

/* Per group, the allowed strategy of least memory summed over the program points: the start when greedy's
 * choice breaks the memory budget (memory at a point is a sum over groups, so the leanest choice is the one
 * most likely to fit; the descent then trades cost back). */
static void leanest(const sp_problem *p, arena *a, int32_t *h) {
  double **tot = arena_alloc(a, ((size_t)p->n_groups + 1) * sizeof *tot);
  for (int32_t g = 0; tot && g < p->n_groups; g++)
    if (!(tot[g] = arena_alloc(a, (size_t)p->n_s[g] * sizeof **tot))) return;
  if (!tot) return;
  for (int32_t g = 0; g < p->n_groups; g++) memset(tot[g], 0, (size_t)p->n_s[g] * sizeof **tot);
  for (int32_t t = 0; p->mem_active && t < p->n_points; t++)
    for (int32_t q = 0; q < p->mem[t].n_terms; q++) {
      const sp_memterm *tm = &p->mem[t].terms[q];
      for (int32_t k = 0; k < p->n_s[tm->g]; k++) tot[tm->g][k] += tm->mem_bytes[k];
    }
  for (int32_t g = 0; g < p->n_groups; g++) {
    int32_t best = -1;
    for (int32_t k = 0; k < p->n_s[g]; k++)
      if (sp_allowed(p, g, k) && (best < 0 || tot[g][k] < tot[g][best])) best = k;
    if (best >= 0) h[g] = best;
  }
}

static ap_status ilp_kernel(ap_ctx *ctx, const sp_problem *p, const solve_opts *o, sp_result *r) {
  const ilp_ops *ops = ctx_part_ops(ctx, "ilp");
  int32_t *h = malloc(((size_t)p->n_groups + 1) * sizeof *h);
  arena *a = arena_new();
  if (!h || !a) {
    free(h);
    arena_free(a);
    return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
  }
  solve_opts og = *o;
  og.annotate = NULL;
  og.max_evals = 0;
  sp_result rh = {SOLVE_INFEASIBLE, NAN, NAN, h, 0, NULL, false};
  ap_status st = solve_greedy(ctx, p, &og, &rh);
  double deadline = solve_deadline_s(o);
  sp_score hs = sp_eval(p, h);
  if (!st && hs.violation > 0 && p->mem_active) {
    int32_t *lean = arena_alloc(a, ((size_t)p->n_groups + 1) * sizeof *lean);
    if (lean) {
      memcpy(lean, h, (size_t)p->n_groups * sizeof *h);
      leanest(p, a, lean);
      sp_score ls = sp_eval(p, lean);
      if (sp_better(ls, hs)) memcpy(h, lean, (size_t)p->n_groups * sizeof *h), hs = ls;
    }
  }
  if (!st && isfinite(deadline)) heuristic(p, a, h, 0.1 * (deadline - solve_clock_s()), &hs);
  if (!st) st = ops->solve_sharding(ctx, p, o, r);
  bool worse = st == AP_OK && r->status != SOLVE_INFEASIBLE && hs.violation <= 0 && hs.objective < r->objective;
  if (r->timed_out && (st == AP_CANCELLED || worse)) {
    if (st == AP_CANCELLED) heuristic(p, a, h, deadline - solve_clock_s(), &hs);
    if (hs.violation <= 0) {
      memcpy(r->choice, h, (size_t)p->n_groups * sizeof *h);
      r->status = SOLVE_FEASIBLE;
      r->objective = hs.objective;
      r->lower_bound = st == AP_OK ? r->lower_bound : NAN;
      r->answer_from = "greedy and descent";
      st = AP_OK;
    } else if (st == AP_CANCELLED) {
      st = ctx_fail(ctx, AP_CANCELLED, "%s: the time budget (%g s) ended before the ILP or its heuristic start "
                    "found a choice within the memory budget", p->file, o->time_budget_s);
    }
  }
  free(h);
  arena_free(a);
  return st;
}

ap_status solve_ilp(ap_ctx *ctx, const sp_problem *p, const solve_opts *o, sp_result *r) {
  const ilp_ops *ops = ctx_part_ops(ctx, "ilp");
  if (!ops)
    return ctx_fail(ctx, AP_UNSUPPORTED,
                    "the intra-op ILP (part \"ilp\", CBC) is not built into this autopar (build without "
                    "CORE_ONLY=1, or pick another --strategy such as elim-dp or mcmc)");
  solve_opts od = *o;
  od.deadline_s = solve_deadline_s(o); /* the presolve's time counts too */
  if (!isfinite(od.deadline_s)) od.deadline_s = 0;
  return solve_elim_presolved(ctx, p, &od, r, ilp_kernel);
}
