/* The intra-op ILP through CBC's C API (search layer, optional part "ilp"; mk/ilp.mk, docs/build.md). This is
 * the only file that includes Cbc_C_Interface.h; the core reaches it through ap_part_ilp()'s table
 * (search/ilp.h).
 *
 * Formulation: Alpa's (alpa/shard_parallel/auto_sharding.py, _call_solver_serialized_args; SURVEY.md §3.1),
 * on the problem's reduced form (problem_reduce.c), so that followers share their leader's variables and every
 * coefficient of a row or of the objective appears once per column (NOTES.md: duplicate coefficients make CBC
 * return a wrong optimum):
 *  - s_g_k ∈ {0,1} per group g and strategy k, Σ_k s_g_k = 1 (Alpa's constraint b); objective coefficient the
 *    group's merged compute + communication cost;
 *  - per pair of groups (g, h) that both have more than one strategy, e_p_a_b ∈ [0,1] with Σ e = 1 (e),
 *    Σ_b e_p_a_b ≤ s_g_a (f) and Σ_a e_p_a_b ≤ s_h_b (g); objective coefficient the merged resharding cost.
 *    With s integral and one-hot these force e = s_g s_hᵀ, so e need not be integer (Alpa declares it
 *    binary; the optimum is the same). A pair where one side has a single strategy folds into the other
 *    side's objective coefficients;
 *  - aliases (h) and null entries: the forbidden variables are fixed to 0 (upper bound 0), never priced with
 *    a large cost (NOTES.md);
 *  - memory (c): per program point Σ m_g_k s_g_k ≤ budget, or with overbudget_cost_per_byte, ≤ budget + z
 *    with z ≥ 0 priced at that cost per byte (z is then the excess of the peak). Memory rows are scaled by
 *    the budget so that their coefficients are near 1.
 * The model is built in arrays and loaded in one Cbc_loadProblem, which takes no names (NOTES.md's crash on
 * NULL names is Cbc_addCol's and Cbc_addRow's, no longer called). The LP relaxation (all columns
 * continuous, a clone of the model) is solved too: its value is the lower bound reported. The choice CBC
 * returns is scored again with sp_eval, so the objective printed is the problem's own, at full precision, and
 * "optimal" is reported only when that score meets CBC's proved bound. CBC's integer preprocessing is off (it
 * returned a wrong optimum on a generated problem; see ilp_solve_sharding). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <Cbc_C_Interface.h>

#include "search/solve/ilp.h"

typedef struct {
  Cbc_Model *m;
  int n_cols, n_rows;
  int *s_col; /* first column of each group's s */
  double offset; /* constant objective terms (pairs of single-strategy groups) */
  bool const_infeasible;
  double deadline_s; /* solve_clock_s() at which the build gives up */
  bool timed_out;
  /* The model as it is built: columns (bounds, objective, integrality), rows (bounds) and the coefficients
   * as (row, column, value) triplets, loaded into CBC in one Cbc_loadProblem. Adding columns and rows one by
   * one through Cbc_addCol/Cbc_addRow resized CBC's matrix per call: a 1,000-node, 16-strategy problem (442,000
   * columns) took minutes to build before CBC's own time limit even started (NOTES.md, issue 19 class 3). */
  double *col_lb, *col_ub, *obj;
  char *is_int;
  int cap_cols;
  double *row_lb, *row_ub;
  int cap_rows;
  int *t_row, *t_col;
  double *t_val;
  size_t n_t, cap_t;
  bool oom;
} ilp_model;

/* TUNING: seconds of CLP's root LP per coefficient of the model, measured on this project's 2-core machine
 * under load with tools/gen_problem.py problems (83k coefficients 0.9 s, 248k 1.9 s, 1.1M 8.6 s: about 8 us
 * each, near linear). CBC's time limit does not interrupt the root LP, so this is what decides whether CBC
 * can start at all within a time budget; a faster machine only gives CBC up earlier than it had to. */
#define ILP_LP_S_PER_NZ 8e-6
/* TUNING: CBC's root node (the LP, then cut generation and the root heuristics) runs before its first check of
 * the seconds limit; measured on the same 1.1M-coefficient model under a 30 s limit, Cbc_solve took 136 s wall,
 * about 15 root LPs. So CBC is started only when this many root LPs fit in the time left. */
#define ILP_ROOT_LPS 16

static bool grow(void **p, size_t elem, size_t need, size_t *cap) {
  if (need <= *cap) return true;
  size_t nc = *cap ? *cap : 1024;
  while (nc < need) nc *= 2;
  void *q = realloc(*p, nc * elem);
  if (!q) return false;
  *p = q;
  *cap = nc;
  return true;
}

static bool grow_cols(ilp_model *im) {
  if (im->n_cols < im->cap_cols) return true;
  size_t c = (size_t)im->cap_cols, c1 = c, c2 = c, c3 = c, need = (size_t)im->n_cols + 1;
  bool ok = grow((void **)&im->col_lb, sizeof(double), need, &c) && grow((void **)&im->col_ub, sizeof(double), need, &c1) &&
            grow((void **)&im->obj, sizeof(double), need, &c2) && grow((void **)&im->is_int, 1, need, &c3);
  if (ok) im->cap_cols = (int)c;
  return ok;
}

static int add_col(ilp_model *im, double ub, double obj, bool integer) {
  if (im->oom) return -1;
  if (!grow_cols(im)) {
    im->oom = true;
    return -1;
  }
  im->col_lb[im->n_cols] = 0;
  im->col_ub[im->n_cols] = ub;
  im->obj[im->n_cols] = obj;
  im->is_int[im->n_cols] = integer;
  return im->n_cols++;
}

/* Adds a row lb <= Σ coefs·cols <= ub; false when out of memory or past the deadline (checked every 65,536
 * coefficients, so the build honours the time budget too). */
static bool add_row(ilp_model *im, int n, const int *cols, const double *coefs, double lb, double ub) {
  if (im->oom || im->timed_out) return false;
  size_t c = (size_t)im->cap_rows, c1 = c, need = (size_t)im->n_rows + 1;
  if (!grow((void **)&im->row_lb, sizeof(double), need, &c) || !grow((void **)&im->row_ub, sizeof(double), need, &c1))
    return !(im->oom = true);
  im->cap_rows = (int)c;
  size_t t1 = im->cap_t, t2 = im->cap_t, t3 = im->cap_t, nt = im->n_t + (size_t)n;
  if (!grow((void **)&im->t_row, sizeof(int), nt, &t1) || !grow((void **)&im->t_col, sizeof(int), nt, &t2) ||
      !grow((void **)&im->t_val, sizeof(double), nt, &t3))
    return !(im->oom = true);
  im->cap_t = t1;
  if ((im->n_t >> 16) != (nt >> 16) && solve_clock_s() > im->deadline_s) return !(im->timed_out = true);
  for (int k = 0; k < n; k++) im->t_row[im->n_t] = im->n_rows, im->t_col[im->n_t] = cols[k], im->t_val[im->n_t++] = coefs[k];
  im->row_lb[im->n_rows] = lb;
  im->row_ub[im->n_rows++] = ub;
  return true;
}

/* Hands the built model to CBC in column-major form, one call (Cbc_loadProblem takes no names, and CBC then
 * names nothing: NOTES.md's crash on NULL names is Cbc_addCol's). False when out of memory or past the deadline. */
static bool load(ilp_model *im) {
  int nc = im->n_cols;
  int *start = calloc((size_t)nc + 1, sizeof *start), *index = malloc((im->n_t + 1) * sizeof *index);
  double *value = malloc((im->n_t + 1) * sizeof *value);
  bool ok = start && index && value;
  for (size_t i = 0; ok && i < im->n_t; i++) start[im->t_col[i] + 1]++;
  for (int c = 0; ok && c < nc; c++) start[c + 1] += start[c];
  int *fill = ok ? malloc(((size_t)nc + 1) * sizeof *fill) : NULL;
  ok = ok && fill;
  if (ok) memcpy(fill, start, (size_t)nc * sizeof *fill);
  for (size_t i = 0; ok && i < im->n_t; i++) {
    int at = fill[im->t_col[i]]++;
    index[at] = im->t_row[i];
    value[at] = im->t_val[i];
  }
  if (ok) {
    Cbc_loadProblem(im->m, nc, im->n_rows, start, index, value, im->col_lb, im->col_ub, im->obj, im->row_lb, im->row_ub);
    for (int c = 0; c < nc; c++)
      if (im->is_int[c]) Cbc_setInteger(im->m, c);
  }
  free(start);
  free(index);
  free(value);
  free(fill);
  if (!ok) {
    im->oom = true;
    return false;
  }
  if (solve_clock_s() > im->deadline_s) {
    im->timed_out = true;
    return false;
  }
  return true;
}

static void model_free(ilp_model *im) {
  free(im->s_col);
  free(im->col_lb);
  free(im->col_ub);
  free(im->obj);
  free(im->is_int);
  free(im->row_lb);
  free(im->row_ub);
  free(im->t_row);
  free(im->t_col);
  free(im->t_val);
}

/* Builds the model; false when out of memory (im->oom) or past the deadline (im->timed_out). */
static bool build(const sp_problem *p, ilp_model *im) {
  int32_t G = p->n_groups;
  im->s_col = malloc(((size_t)G + 1) * sizeof *im->s_col);
  double **obj = malloc(((size_t)G + 1) * sizeof *obj); /* s objective coefficients, pairs folded in */
  bool **fixed0 = malloc(((size_t)G + 1) * sizeof *fixed0);
  bool ok = im->s_col && obj && fixed0;
  for (int32_t g = 0; ok && g < G; g++) {
    obj[g] = malloc((size_t)p->n_s[g] * sizeof **obj);
    fixed0[g] = malloc((size_t)p->n_s[g] * sizeof **fixed0);
    ok = obj[g] && fixed0[g];
    for (int32_t k = 0; ok && k < p->n_s[g]; k++) {
      fixed0[g][k] = !sp_allowed(p, g, k);
      obj[g][k] = fixed0[g][k] ? 0 : p->unary[g][k];
    }
  }
  if (!ok) goto done;
  /* Fold pairs with a single-strategy side into the other side before any column exists. */
  for (int32_t e = 0; e < p->n_pairs; e++) {
    const sp_pair *t = &p->pairs[e];
    int32_t ng = p->n_s[t->g], nh = p->n_s[t->h];
    if (ng > 1 && nh > 1) continue;
    int32_t side = ng == 1 ? t->h : t->g, n = ng == 1 ? nh : ng;
    if (ng == 1 && nh == 1) {
      if (isinf(t->cost[0])) im->const_infeasible = true;
      else im->offset += t->cost[0];
      continue;
    }
    for (int32_t k = 0; k < n; k++) {
      double c = t->cost[k]; /* one row or one column: index k either way */
      if (isinf(c)) fixed0[side][k] = true;
      else obj[side][k] += c;
    }
  }
  for (int32_t g = 0; g < G; g++) {
    im->s_col[g] = im->n_cols;
    for (int32_t k = 0; k < p->n_s[g]; k++) add_col(im, fixed0[g][k] ? 0.0 : 1.0, fixed0[g][k] ? 0.0 : obj[g][k], true);
  }
  int cap = 16;
  int *cols = malloc((size_t)cap * sizeof *cols);
  double *coefs = malloc((size_t)cap * sizeof *coefs);
  if (!cols || !coefs) ok = false;
#define ENSURE(n)                                                                                          \
  if (ok && (n) > cap) {                                                                                  \
    cap = (n);                                                                                            \
    int *c2 = realloc(cols, (size_t)cap * sizeof *cols);                                                   \
    if (c2) cols = c2;                                                                                    \
    double *v2 = realloc(coefs, (size_t)cap * sizeof *coefs);                                              \
    if (v2) coefs = v2;                                                                                   \
    ok = c2 && v2;                                                                                        \
  }
  for (int32_t g = 0; ok && g < G; g++) {
    ENSURE(p->n_s[g]);
    for (int32_t k = 0; ok && k < p->n_s[g]; k++) cols[k] = im->s_col[g] + k, coefs[k] = 1;
    ok = ok && add_row(im, p->n_s[g], cols, coefs, 1.0, 1.0); /* one_g */
  }
  for (int32_t e = 0; ok && e < p->n_pairs; e++) {
    const sp_pair *t = &p->pairs[e];
    int32_t ng = p->n_s[t->g], nh = p->n_s[t->h];
    if (ng == 1 || nh == 1) continue;
    int e0 = im->n_cols;
    for (int32_t a = 0; a < ng; a++)
      for (int32_t b = 0; b < nh; b++) {
        double c = t->cost[(size_t)a * (size_t)nh + (size_t)b];
        add_col(im, isinf(c) ? 0.0 : 1.0, isinf(c) ? 0.0 : c, false);
      }
    ENSURE(ng * nh + 1);
    for (int32_t k = 0; ok && k < ng * nh; k++) cols[k] = e0 + k, coefs[k] = 1;
    ok = ok && add_row(im, ng * nh, cols, coefs, 1.0, 1.0); /* esum_e */
    for (int32_t a = 0; ok && a < ng; a++) {
      for (int32_t b = 0; b < nh; b++) cols[b] = e0 + a * nh + b, coefs[b] = 1;
      cols[nh] = im->s_col[t->g] + a, coefs[nh] = -1;
      ok = add_row(im, nh + 1, cols, coefs, -DBL_MAX, 0.0); /* erow_e_a */
    }
    for (int32_t b = 0; ok && b < nh; b++) {
      for (int32_t a = 0; a < ng; a++) cols[a] = e0 + a * nh + b, coefs[a] = 1;
      cols[ng] = im->s_col[t->h] + b, coefs[ng] = -1;
      ok = add_row(im, ng + 1, cols, coefs, -DBL_MAX, 0.0); /* ecol_e_b */
    }
  }
  if (ok && p->mem_active) {
    double scale = p->budget_bytes > 1 ? p->budget_bytes : 1;
    int z = p->has_penalty ? add_col(im, DBL_MAX, p->penalty_per_byte * scale, false) : -1;
    for (int32_t t = 0; ok && t < p->n_points; t++) {
      const sp_mempoint *mp = &p->mem[t];
      int n = 0;
      for (int32_t q = 0; ok && q < mp->n_terms; q++) {
        const sp_memterm *tm = &mp->terms[q];
        ENSURE(n + p->n_s[tm->g] + 1);
        for (int32_t k = 0; ok && k < p->n_s[tm->g]; k++)
          if (tm->mem_bytes[k] != 0) cols[n] = im->s_col[tm->g] + k, coefs[n++] = tm->mem_bytes[k] / scale;
      }
      ENSURE(n + 1);
      if (!ok) break;
      if (z >= 0) cols[n] = z, coefs[n++] = -1;
      ok = add_row(im, n, cols, coefs, -DBL_MAX, p->budget_bytes / scale); /* mem_t */
    }
  }
#undef ENSURE
  free(cols);
  free(coefs);
  ok = ok && !im->oom && load(im);
done:
  if (!ok && !im->timed_out) im->oom = true;
  for (int32_t g = 0; obj && fixed0 && g < G; g++) {
    free(obj[g]);
    free(fixed0[g]);
  }
  free(obj);
  free(fixed0);
  return ok;
}

/* The LP relaxation's value (a lower bound), or NAN when it does not solve within limit_s. */
static double lp_bound(Cbc_Model *m, int n_cols, double offset, double limit_s) {
  Cbc_Model *lp = Cbc_clone(m);
  if (!lp) return NAN;
  for (int c = 0; c < n_cols; c++) Cbc_setContinuous(lp, c);
  Cbc_setLogLevel(lp, 0);
  Cbc_setParameter(lp, "timeMode", "elapsed");
  Cbc_setMaximumSeconds(lp, limit_s);
  Cbc_solve(lp);
  double v = Cbc_isProvenOptimal(lp) ? Cbc_getObjValue(lp) + offset : NAN;
  Cbc_deleteModel(lp);
  return v;
}

/* The time budget is one wall clock over building and solving (docs/solve.md): the deadline is o->deadline_s
 * (or time_budget_s from here); the build stops at it, the LP relaxation gets at most a fifth of what is left
 * and CBC the rest as its own seconds limit (elapsed time). Stopped by it with an incumbent, the result is
 * feasible; with none, AP_CANCELLED and r->timed_out, and the caller (solve.c) answers with its heuristic. */
static ap_status ilp_solve_sharding(ap_ctx *ctx, const sp_problem *p, const solve_opts *o, sp_result *r) {
  ilp_model im = {.m = Cbc_newModel(), .deadline_s = solve_deadline_s(o)};
  r->n_evals = 0;
  r->timed_out = false;
  if (!im.m) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
  Cbc_setProblemName(im.m, "autopar_sharding");
  if (!build(p, &im)) {
    bool late = im.timed_out;
    Cbc_deleteModel(im.m);
    model_free(&im);
    r->timed_out = late;
    if (late)
      return ctx_fail(ctx, AP_CANCELLED, "%s: the time budget (%g s) ended while the ILP was being built", p->file,
                      o->time_budget_s);
    return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
  }
  Cbc_setLogLevel(im.m, 0);
  Cbc_setParameter(im.m, "threads", "1"); /* deterministic */
  Cbc_setParameter(im.m, "timeMode", "elapsed"); /* the budget is wall-clock, as for every strategy */
  /* CBC's integer preprocessing (CglPreProcess, default "sos") is off: on the generator's problem
   * tests/test_solve_ilp.c seed 7005 (30 nodes, hard budget) it fixed all 17 remaining columns to a choice of
   * 471.1 and called it optimal, while 467.63 is feasible (peak 39,900 of 40,271.6 bytes) and is what CBC
   * finds without it (CBC 2.10.8; 1 of 360 such problems; the same class as coin-or/Cbc issues #283, #724 and
   * #752, wrong optima that "-preprocess off" cures). */
  Cbc_setParameter(im.m, "preprocess", "off");
  /* CLP's LP presolve is off too: the planner's problems (a kernel of 5 to 14 groups with up to 25 strategies
   * after the elimination presolve, whose pair columns presolve cannot remove) spent about half of CBC's time
   * in it; without it T5-small on dgx-h100:4x8 plans in 5.0 s CPU instead of 8.0, and the ten plans of the
   * five shipped ONNX models on h100-sxm:8 and dgx-h100:4x8 are the same (bench/graph_plan.txt). */
  Cbc_setParameter(im.m, "presolve", "off");
  /* "optimal" means proved to the last digit: CBC stops only when the incumbent is within 1e-9 of its bound
   * (absolute) and 1e-12 (relative), never at a percentage gap. */
  Cbc_setAllowableGap(im.m, 1e-9);
  Cbc_setAllowableFractionGap(im.m, 1e-12);
  bool limited = isfinite(im.deadline_s);
  double left = limited ? im.deadline_s - solve_clock_s() : INFINITY, lp_s = ILP_LP_S_PER_NZ * (double)im.n_t;
  r->lower_bound = NAN;
  /* CBC's seconds limit does not reach CLP's root LP nor the root's cuts and heuristics (nor the separate
   * relaxation): measured here, a 1,000-node, 16-strategy problem (1.1 million coefficients) spent 8.6 s in
   * Cbc_solve under a 1 s limit and 136 s under 30 s. So a model whose root would not fit in the time left is not
   * handed to CBC at all: the caller answers with its heuristic. */
  if (limited && ILP_ROOT_LPS * lp_s > left) {
    r->timed_out = true;
    Cbc_deleteModel(im.m);
    model_free(&im);
    return ctx_fail(ctx, AP_CANCELLED, "%s: the ILP (%d columns, %zu coefficients) would not solve within the time "
                    "budget (%g s)", p->file, im.n_cols, im.n_t, o->time_budget_s);
  }
  if (!im.const_infeasible && !o->skip_lower_bound && left > 0 && (!limited || lp_s <= 0.2 * left))
    r->lower_bound = lp_bound(im.m, im.n_cols, im.offset, limited ? 0.2 * left : 1e9);
  left = limited ? im.deadline_s - solve_clock_s() : INFINITY;
  ap_status st = AP_OK;
  if (limited && left <= 0) {
    r->timed_out = true;
    Cbc_deleteModel(im.m);
    model_free(&im);
    return ctx_fail(ctx, AP_CANCELLED, "%s: the time budget (%g s) ended before CBC could start", p->file,
                    o->time_budget_s);
  }
  if (limited) {
    Cbc_setMaximumSeconds(im.m, left);
  }
  Cbc_solve(im.m);
  r->timed_out = Cbc_isSecondsLimitReached(im.m) || (limited && solve_clock_s() > im.deadline_s);
  const double *x = Cbc_getColSolution(im.m);
  bool optimal = Cbc_isProvenOptimal(im.m), has_sol = Cbc_numberSavedSolutions(im.m) > 0 || optimal;
  if (im.const_infeasible || Cbc_isProvenInfeasible(im.m) || (!has_sol && Cbc_status(im.m) == 0)) {
    r->status = SOLVE_INFEASIBLE;
    r->objective = r->lower_bound = NAN;
  } else if (!has_sol || !x) {
    r->timed_out = true;
    st = ctx_fail(ctx, AP_CANCELLED, "%s: the ILP found no solution within the time budget (%g s)", p->file,
                  o->time_budget_s);
  } else {
    for (int32_t g = 0; g < p->n_groups; g++) {
      int32_t pick = 0;
      for (int32_t k = 1; k < p->n_s[g]; k++)
        if (x[im.s_col[g] + k] > x[im.s_col[g] + pick]) pick = k;
      r->choice[g] = pick;
    }
    sp_score s = sp_eval(p, r->choice);
    if (s.violation > 0) {
      st = ctx_fail(ctx, AP_INTERNAL, "%s: CBC returned a choice that breaks a constraint (violation %g)", p->file,
                    s.violation);
    } else {
      /* A proof holds only if autopar's own score of the choice meets CBC's bound and the LP bound lies
       * below it; otherwise the result is a feasible choice with the bound, never "optimal". */
      double bound = Cbc_getBestPossibleObjValue(im.m) + im.offset, tol = 1e-7 * (1 + fabs(s.objective));
      bool proved = optimal && s.objective <= bound + tol && !(r->lower_bound > s.objective + tol);
      r->status = proved ? SOLVE_OPTIMAL : SOLVE_FEASIBLE;
      r->objective = s.objective;
    }
  }
  Cbc_deleteModel(im.m);
  model_free(&im);
  return st;
}

static const ilp_ops ops = {ilp_solve_sharding};
static const ap_part part = {"ilp", &ops};

const ap_part *ap_part_ilp(void) { return &part; }
