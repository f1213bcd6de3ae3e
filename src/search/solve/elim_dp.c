/* Elimination DP on sharding problem files (search layer; strategy "elim-dp"): exact on problems whose
 * interaction graph (groups joined by an edge or alias) is series-parallel, which includes every chain and
 * tree (forest), as dynamic programming over an elimination order of width 2 (Bertelè & Brioschi,
 * "Nonserial Dynamic Programming", 1972, ch. 2; the series and parallel reductions of Valdes, Tarjan & Lawler,
 * SIAM J. Comput. 11(2), 1982).
 *
 * Repeatedly a group v with at most two neighbours is eliminated: with none, its best strategy adds to a
 * constant; with one neighbour a, min over v of (u_v + T_av) adds to a's unary cost; with two, a and b,
 * min over v of (u_v + T_av + T_bv) becomes a new table between a and b, merged into any table they already
 * share (the parallel reduction). The argmin of each step is kept, and the choice is rebuilt in reverse
 * order. A graph where every remaining group has three or more neighbours is not series-parallel: the
 * strategy then fails with AP_UNSUPPORTED. A memory budget couples all nodes of a program point and is not
 * decomposable, so it is refused as well (use ilp).
 *
 * The same elimination, stopped when every remaining group has three or more neighbours, is the ILP's presolve
 * (solve_elim_presolved): the chains and trees hanging off a model's graph (norms, activations, residual adds,
 * the loss) are solved exactly here and folded into the kernel's unary costs and pair tables, so that CBC sees
 * only the kernel. Exact, because every step is the min over the eliminated group for each assignment of its
 * neighbours; the kernel's lower bound plus the eliminated constant bounds the whole. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search/solve/solve.h"

typedef struct {
  int32_t a, b; /* rows = a's strategies, cols = b's */
  double *t;
  bool alive;
} factor;

typedef struct {
  int32_t n_nb;
  int32_t nb[2];
  int32_t *arg; /* best strategy of v per (strategy of nb[0]) [x strategy of nb[1]] */
} elim_step;

typedef struct {
  const sp_problem *p;
  arena *a;
  factor *f;
  int32_t n_f, cap_f;
  int32_t **inc; /* per group: factor indices (dynamic) */
  int32_t *n_inc, *cap_inc;
  double **u;
  bool *gone;
} elim;

static ap_status push_inc(elim *e, int32_t g, int32_t fi) {
  if (e->n_inc[g] == e->cap_inc[g]) {
    int32_t cap = e->cap_inc[g] ? 2 * e->cap_inc[g] : 4;
    int32_t *n = arena_alloc(e->a, (size_t)cap * sizeof *n);
    if (!n) return AP_NOMEM;
    if (e->n_inc[g]) memcpy(n, e->inc[g], (size_t)e->n_inc[g] * sizeof *n);
    e->inc[g] = n;
    e->cap_inc[g] = cap;
  }
  e->inc[g][e->n_inc[g]++] = fi;
  return AP_OK;
}

/* The live factors of g, compacting its list; their count (after merging, at most one per neighbour). */
static int32_t live_factors(elim *e, int32_t g) {
  int32_t n = 0;
  for (int32_t k = 0; k < e->n_inc[g]; k++)
    if (e->f[e->inc[g][k]].alive) e->inc[g][n++] = e->inc[g][k];
  e->n_inc[g] = n;
  return n;
}

static int32_t other(const factor *f, int32_t g) { return f->a == g ? f->b : f->a; }

static double fval(const elim *e, const factor *f, int32_t g, int32_t kg, int32_t kh) {
  return f->a == g ? f->t[(size_t)kg * (size_t)e->p->n_s[f->b] + (size_t)kh]
                   : f->t[(size_t)kh * (size_t)e->p->n_s[f->b] + (size_t)kg];
}

/* Adds table t (rows a, cols b) into the live factor between a and b, or makes one. */
static ap_status add_factor(elim *e, int32_t a, int32_t b, double *t) {
  live_factors(e, a);
  for (int32_t k = 0; k < e->n_inc[a]; k++) {
    factor *f = &e->f[e->inc[a][k]];
    if (other(f, a) != b) continue;
    int32_t na = e->p->n_s[a], nb = e->p->n_s[b];
    for (int32_t x = 0; x < na; x++)
      for (int32_t y = 0; y < nb; y++) {
        size_t i = f->a == a ? (size_t)x * (size_t)nb + (size_t)y : (size_t)y * (size_t)na + (size_t)x;
        f->t[i] += t[(size_t)x * (size_t)nb + (size_t)y];
      }
    return AP_OK;
  }
  if (e->n_f == e->cap_f) {
    int32_t cap = 2 * e->cap_f + 8;
    factor *n = arena_alloc(e->a, (size_t)cap * sizeof *n);
    if (!n) return AP_NOMEM;
    if (e->n_f) memcpy(n, e->f, (size_t)e->n_f * sizeof *n);
    e->f = n;
    e->cap_f = cap;
  }
  e->f[e->n_f] = (factor){a, b, t, true};
  if (push_inc(e, a, e->n_f) || push_inc(e, b, e->n_f)) return AP_NOMEM;
  e->n_f++;
  return AP_OK;
}

/* Eliminates v (at most two live factors), recording the step. */
static ap_status eliminate(elim *e, int32_t v, elim_step *st, double *constant) {
  const sp_problem *p = e->p;
  int32_t nv = p->n_s[v];
  factor *fs[2] = {NULL, NULL};
  st->n_nb = live_factors(e, v);
  for (int32_t k = 0; k < st->n_nb; k++) {
    fs[k] = &e->f[e->inc[v][k]];
    st->nb[k] = other(fs[k], v);
  }
  int32_t n0 = st->n_nb > 0 ? p->n_s[st->nb[0]] : 1, n1 = st->n_nb > 1 ? p->n_s[st->nb[1]] : 1;
  st->arg = arena_alloc(e->a, (size_t)n0 * (size_t)n1 * sizeof *st->arg);
  double *out = arena_alloc(e->a, (size_t)n0 * (size_t)n1 * sizeof *out);
  if (!st->arg || !out) return AP_NOMEM;
  for (int32_t x = 0; x < n0; x++)
    for (int32_t y = 0; y < n1; y++) {
      double best = INFINITY;
      int32_t arg = 0;
      for (int32_t k = 0; k < nv; k++) {
        double c = e->u[v][k];
        if (fs[0]) c += fval(e, fs[0], v, k, x);
        if (fs[1]) c += fval(e, fs[1], v, k, y);
        if (c < best) best = c, arg = k;
      }
      out[(size_t)x * (size_t)n1 + (size_t)y] = best;
      st->arg[(size_t)x * (size_t)n1 + (size_t)y] = arg;
    }
  for (int32_t k = 0; k < st->n_nb; k++) fs[k]->alive = false;
  e->gone[v] = true;
  if (st->n_nb == 0) *constant += out[0];
  else if (st->n_nb == 1)
    for (int32_t x = 0; x < n0; x++) e->u[st->nb[0]][x] += out[x];
  else return add_factor(e, st->nb[0], st->nb[1], out);
  return AP_OK;
}

/* Sets up the factors of p and eliminates groups with at most two live factors until none is left (all = the
 * whole problem must go: AP_UNSUPPORTED otherwise) or, with all false, until every remaining group has three or
 * more. order[0 .. *n_done) are the eliminated groups in elimination order. */
static ap_status elim_run(ap_ctx *ctx, const sp_problem *p, arena *a, bool all, elim *e, elim_step **steps_out,
                          int32_t **order_out, int32_t *n_done_out, double *constant, double deadline_s) {
  int32_t G = p->n_groups;
  *e = (elim){p, a, NULL, 0, 0, NULL, NULL, NULL, NULL, NULL};
  e->inc = arena_alloc(a, (size_t)(G + 1) * sizeof *e->inc);
  e->n_inc = arena_alloc(a, (size_t)(G + 1) * sizeof *e->n_inc);
  e->cap_inc = arena_alloc(a, (size_t)(G + 1) * sizeof *e->cap_inc);
  e->u = arena_alloc(a, (size_t)(G + 1) * sizeof *e->u);
  e->gone = arena_alloc(a, (size_t)(G + 1) * sizeof *e->gone);
  elim_step *steps = arena_alloc(a, (size_t)(G + 1) * sizeof *steps);
  int32_t *order = arena_alloc(a, (size_t)(G + 1) * sizeof *order);
  int32_t *stack = arena_alloc(a, (size_t)(G + 1) * 4 * sizeof *stack);
  if (!e->inc || !e->n_inc || !e->cap_inc || !e->u || !e->gone || !steps || !order || !stack) return AP_NOMEM;
  for (int32_t g = 0; g < G; g++) {
    e->u[g] = arena_alloc(a, (size_t)p->n_s[g] * sizeof(double));
    if (!e->u[g]) return AP_NOMEM;
    memcpy(e->u[g], p->unary[g], (size_t)p->n_s[g] * sizeof(double));
  }
  for (int32_t k = 0; k < p->n_pairs; k++) {
    size_t n = (size_t)p->n_s[p->pairs[k].g] * (size_t)p->n_s[p->pairs[k].h];
    double *t = arena_alloc(a, n * sizeof *t);
    if (!t) return AP_NOMEM;
    memcpy(t, p->pairs[k].cost, n * sizeof *t);
    if (add_factor(e, p->pairs[k].g, p->pairs[k].h, t)) return AP_NOMEM;
  }
  /* Worklist of groups with at most two live factors; a group may be pushed again as its neighbours go. */
  int32_t n_stack = 0, n_done = 0, cap_stack = G * 4;
  for (int32_t g = G - 1; g >= 0; g--)
    if (live_factors(e, g) <= 2) stack[n_stack++] = g;
  *constant = 0;
  while (n_done < G) {
    int32_t v = -1;
    while (n_stack > 0 && v < 0) {
      int32_t c = stack[--n_stack];
      if (!e->gone[c] && live_factors(e, c) <= 2) v = c;
    }
    if (v < 0) {
      for (int32_t g = 0; g < G && v < 0; g++)
        if (!e->gone[g] && live_factors(e, g) <= 2) v = g;
    }
    if (v < 0) {
      if (!all) break; /* the worklist holds every group that reached two factors: the rest is the kernel */
      return ctx_fail(ctx, AP_UNSUPPORTED,
                      "%s: the problem's graph is not series-parallel (every one of its %d remaining nodes has 3 or "
                      "more neighbours); elim-dp is exact only on series-parallel graphs: use --strategy ilp",
                      p->file, G - n_done);
    }
    /* The one wall clock of the command (solve.h deadline_s): an elimination costs n_s^3, so a problem of
     * many large strategy sets must not run past it. As a presolve, what is left becomes the kernel. */
    if ((n_done & 15) == 0 && solve_clock_s() > deadline_s) {
      if (!all) break;
      return ctx_fail(ctx, AP_CANCELLED, "%s: elim-dp ran past the time budget after eliminating %d of %d groups (an "
                      "exact method has no partial answer: raise --time-budget, or use --strategy greedy)",
                      p->file, n_done, G);
    }
    if (eliminate(e, v, &steps[v], constant)) return AP_NOMEM;
    order[n_done++] = v;
    for (int32_t k = 0; k < steps[v].n_nb; k++) {
      int32_t nb = steps[v].nb[k];
      if (n_stack == cap_stack) { /* compact: drop entries already gone */
        int32_t m = 0;
        for (int32_t q = 0; q < n_stack; q++)
          if (!e->gone[stack[q]]) stack[m++] = stack[q];
        n_stack = m;
      }
      if (n_stack < cap_stack) stack[n_stack++] = nb;
    }
  }
  *steps_out = steps;
  *order_out = order;
  *n_done_out = n_done;
  return AP_OK;
}

/* Rebuilds the eliminated groups' strategies in reverse order, the kernel's (if any) already in choice. */
static void elim_expand(const sp_problem *p, const elim_step *steps, const int32_t *order, int32_t n_done,
                        int32_t *choice) {
  for (int32_t k = n_done - 1; k >= 0; k--) {
    int32_t v = order[k];
    const elim_step *s = &steps[v];
    int32_t x = s->n_nb > 0 ? choice[s->nb[0]] : 0, y = s->n_nb > 1 ? choice[s->nb[1]] : 0;
    int32_t n1 = s->n_nb > 1 ? p->n_s[s->nb[1]] : 1;
    choice[v] = s->arg[(size_t)x * (size_t)n1 + (size_t)y];
  }
}

ap_status solve_elim_dp(ap_ctx *ctx, const sp_problem *p, const solve_opts *o, sp_result *r) {
  if (p->mem_active)
    return ctx_fail(ctx, AP_UNSUPPORTED,
                    "%s: elim-dp cannot take a memory budget over liveness sets (it couples all nodes alive at a "
                    "point); use --strategy ilp",
                    p->file);
  arena *a = arena_new();
  if (!a) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
  elim e;
  elim_step *steps = NULL;
  int32_t *order = NULL, n_done = 0;
  double constant = 0;
  ap_status st = elim_run(ctx, p, a, true, &e, &steps, &order, &n_done, &constant, solve_deadline_s(o));
  if (!st) {
    elim_expand(p, steps, order, n_done, r->choice);
    sp_score sc = sp_eval(p, r->choice);
    r->n_evals = 1;
    if (isinf(constant) || sc.violation > 0) {
      r->status = SOLVE_INFEASIBLE;
      r->objective = r->lower_bound = NAN;
    } else {
      r->status = SOLVE_OPTIMAL;
      r->objective = sc.objective;
      r->lower_bound = constant;
    }
  }
  if (st == AP_NOMEM) st = ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
  arena_free(a);
  return st;
}

/* The kernel left by a partial elimination as a problem of its own (reduced form only: groups, unary costs,
 * pairs and their adjacency; no nodes, no memory), kernel[i] its i-th group's index in p. */
static ap_status kernel_problem(const elim *e, const int32_t *kernel, int32_t n_k, const int32_t *index_of,
                                sp_problem *k) {
  const sp_problem *p = e->p;
  arena *a = e->a;
  memset(k, 0, sizeof *k);
  k->a = a;
  k->file = p->file;
  k->n_groups = n_k;
  k->n_s = arena_alloc(a, (size_t)n_k * sizeof *k->n_s);
  k->unary = arena_alloc(a, (size_t)n_k * sizeof *k->unary);
  k->pairs = arena_alloc(a, (size_t)(e->n_f + 1) * sizeof *k->pairs);
  k->adj_start = arena_alloc(a, (size_t)(n_k + 1) * sizeof *k->adj_start);
  k->adj = arena_alloc(a, (size_t)(2 * e->n_f + 1) * sizeof *k->adj);
  if (!k->n_s || !k->unary || !k->pairs || !k->adj_start || !k->adj) return AP_NOMEM;
  for (int32_t i = 0; i < n_k; i++) k->n_s[i] = p->n_s[kernel[i]], k->unary[i] = e->u[kernel[i]];
  for (int32_t f = 0; f < e->n_f; f++) {
    const factor *fc = &e->f[f];
    if (!fc->alive) continue;
    int32_t ga = index_of[fc->a], gb = index_of[fc->b];
    sp_pair *q = &k->pairs[k->n_pairs++];
    if (ga < gb) {
      *q = (sp_pair){ga, gb, fc->t};
      continue;
    }
    /* stored rows = a: transpose so that rows are the smaller index's strategies */
    int32_t na = p->n_s[fc->a], nb = p->n_s[fc->b];
    double *t = arena_alloc(a, (size_t)na * (size_t)nb * sizeof *t);
    if (!t) return AP_NOMEM;
    for (int32_t x = 0; x < na; x++)
      for (int32_t y = 0; y < nb; y++) t[(size_t)y * (size_t)na + (size_t)x] = fc->t[(size_t)x * (size_t)nb + (size_t)y];
    *q = (sp_pair){gb, ga, t};
  }
  memset(k->adj_start, 0, (size_t)(n_k + 1) * sizeof *k->adj_start);
  for (int32_t q = 0; q < k->n_pairs; q++) k->adj_start[k->pairs[q].g + 1]++, k->adj_start[k->pairs[q].h + 1]++;
  for (int32_t i = 0; i < n_k; i++) k->adj_start[i + 1] += k->adj_start[i];
  int32_t *fill = arena_alloc(a, (size_t)(n_k + 1) * sizeof *fill);
  if (!fill) return AP_NOMEM;
  memcpy(fill, k->adj_start, (size_t)n_k * sizeof *fill);
  for (int32_t q = 0; q < k->n_pairs; q++) k->adj[fill[k->pairs[q].g]++] = q, k->adj[fill[k->pairs[q].h]++] = q;
  return AP_OK;
}

ap_status solve_elim_presolved(ap_ctx *ctx, const sp_problem *p, const solve_opts *o, sp_result *r,
                               ap_status (*kernel_solve)(ap_ctx *, const sp_problem *, const solve_opts *,
                                                         sp_result *)) {
  if (p->mem_active) return kernel_solve(ctx, p, o, r);
  arena *a = arena_new();
  if (!a) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
  elim e;
  elim_step *steps = NULL;
  int32_t *order = NULL, n_done = 0;
  double constant = 0;
  ap_status st = elim_run(ctx, p, a, false, &e, &steps, &order, &n_done, &constant, solve_deadline_s(o));
  int32_t G = p->n_groups, n_k = G - n_done;
  int32_t *kernel = st ? NULL : arena_alloc(a, (size_t)(n_k + 1) * sizeof *kernel);
  int32_t *index_of = st ? NULL : arena_alloc(a, (size_t)(G + 1) * sizeof *index_of);
  if (!st && (!kernel || !index_of)) st = AP_NOMEM;
  sp_result kr = {0};
  kr.lower_bound = 0;
  if (!st) {
    int32_t m = 0;
    for (int32_t g = 0; g < G; g++) index_of[g] = e.gone[g] ? -1 : m, m += e.gone[g] ? 0 : 1;
    for (int32_t g = 0; g < G; g++)
      if (!e.gone[g]) kernel[index_of[g]] = g;
    kr.status = SOLVE_OPTIMAL;
    if (n_k > 0) {
      sp_problem k;
      kr.choice = arena_alloc(a, (size_t)n_k * sizeof *kr.choice);
      if (!kr.choice || kernel_problem(&e, kernel, n_k, index_of, &k)) st = AP_NOMEM;
      if (!st) st = kernel_solve(ctx, &k, o, &kr);
      if (!st && kr.status != SOLVE_INFEASIBLE)
        for (int32_t i = 0; i < n_k; i++) r->choice[kernel[i]] = kr.choice[i];
    }
  }
  if (!st) {
    r->n_evals = kr.n_evals;
    r->answer_from = kr.answer_from;
    r->timed_out = kr.timed_out;
    if (kr.status == SOLVE_INFEASIBLE || isinf(constant)) {
      r->status = SOLVE_INFEASIBLE;
      r->objective = r->lower_bound = NAN;
    } else {
      elim_expand(p, steps, order, n_done, r->choice);
      sp_score sc = sp_eval(p, r->choice);
      if (sc.violation > 0) {
        r->status = SOLVE_INFEASIBLE;
        r->objective = r->lower_bound = NAN;
      } else {
        r->status = kr.status;
        r->objective = sc.objective;
        r->lower_bound = constant + (n_k > 0 ? kr.lower_bound : 0);
      }
    }
  }
  if (st == AP_NOMEM) st = ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
  arena_free(a);
  return st;
}
