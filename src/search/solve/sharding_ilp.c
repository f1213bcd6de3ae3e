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
 * Every column and row is named (NOTES.md: NULL names crash CBC). The LP relaxation (all columns
 * continuous, a clone of the model) is solved too: its value is the lower bound reported. The choice CBC
 * returns is scored again with sp_eval, so the objective printed is the problem's own, at full precision, and
 * "optimal" is reported only when that score meets CBC's proved bound. CBC's integer preprocessing is off (it
 * returned a wrong optimum on a generated problem; see ilp_solve_sharding). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <Cbc_C_Interface.h>

#include "search/solve/ilp.h"

typedef struct {
  Cbc_Model *m;
  int n_cols;
  int *s_col; /* first column of each group's s */
  double offset; /* constant objective terms (pairs of single-strategy groups) */
  bool const_infeasible;
} ilp_model;

static int add_col(ilp_model *im, const char *name, double ub, double obj, bool integer) {
  Cbc_addCol(im->m, name, 0.0, ub, obj, integer ? 1 : 0, 0, NULL, NULL);
  return im->n_cols++;
}

/* Builds the model; false when out of memory. */
static bool build(const sp_problem *p, ilp_model *im) {
  char name[96];
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
    for (int32_t k = 0; k < p->n_s[g]; k++) {
      snprintf(name, sizeof name, "s_%d_%d", g, k);
      add_col(im, name, fixed0[g][k] ? 0.0 : 1.0, fixed0[g][k] ? 0.0 : obj[g][k], true);
    }
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
    snprintf(name, sizeof name, "one_%d", g);
    if (ok) Cbc_addRow(im->m, name, p->n_s[g], cols, coefs, 'E', 1.0);
  }
  for (int32_t e = 0; ok && e < p->n_pairs; e++) {
    const sp_pair *t = &p->pairs[e];
    int32_t ng = p->n_s[t->g], nh = p->n_s[t->h];
    if (ng == 1 || nh == 1) continue;
    int e0 = im->n_cols;
    for (int32_t a = 0; a < ng; a++)
      for (int32_t b = 0; b < nh; b++) {
        double c = t->cost[(size_t)a * (size_t)nh + (size_t)b];
        snprintf(name, sizeof name, "e_%d_%d_%d", e, a, b);
        add_col(im, name, isinf(c) ? 0.0 : 1.0, isinf(c) ? 0.0 : c, false);
      }
    ENSURE(ng * nh + 1);
    for (int32_t k = 0; ok && k < ng * nh; k++) cols[k] = e0 + k, coefs[k] = 1;
    snprintf(name, sizeof name, "esum_%d", e);
    if (ok) Cbc_addRow(im->m, name, ng * nh, cols, coefs, 'E', 1.0);
    for (int32_t a = 0; ok && a < ng; a++) {
      for (int32_t b = 0; b < nh; b++) cols[b] = e0 + a * nh + b, coefs[b] = 1;
      cols[nh] = im->s_col[t->g] + a, coefs[nh] = -1;
      snprintf(name, sizeof name, "erow_%d_%d", e, a);
      Cbc_addRow(im->m, name, nh + 1, cols, coefs, 'L', 0.0);
    }
    for (int32_t b = 0; ok && b < nh; b++) {
      for (int32_t a = 0; a < ng; a++) cols[a] = e0 + a * nh + b, coefs[a] = 1;
      cols[ng] = im->s_col[t->h] + b, coefs[ng] = -1;
      snprintf(name, sizeof name, "ecol_%d_%d", e, b);
      Cbc_addRow(im->m, name, ng + 1, cols, coefs, 'L', 0.0);
    }
  }
  if (ok && p->mem_active) {
    double scale = p->budget_bytes > 1 ? p->budget_bytes : 1;
    int z = p->has_penalty ? add_col(im, "z_over", DBL_MAX, p->penalty_per_byte * scale, false) : -1;
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
      snprintf(name, sizeof name, "mem_%d", t);
      Cbc_addRow(im->m, name, n, cols, coefs, 'L', p->budget_bytes / scale);
    }
  }
#undef ENSURE
  free(cols);
  free(coefs);
done:
  for (int32_t g = 0; obj && fixed0 && g < G; g++) {
    free(obj[g]);
    free(fixed0[g]);
  }
  free(obj);
  free(fixed0);
  return ok;
}

/* The LP relaxation's value (a lower bound), or NAN when it does not solve. */
static double lp_bound(Cbc_Model *m, int n_cols, double offset) {
  Cbc_Model *lp = Cbc_clone(m);
  if (!lp) return NAN;
  for (int c = 0; c < n_cols; c++) Cbc_setContinuous(lp, c);
  Cbc_setLogLevel(lp, 0);
  Cbc_solve(lp);
  double v = Cbc_isProvenOptimal(lp) ? Cbc_getObjValue(lp) + offset : NAN;
  Cbc_deleteModel(lp);
  return v;
}

static ap_status ilp_solve_sharding(ap_ctx *ctx, const sp_problem *p, const solve_opts *o, sp_result *r) {
  ilp_model im = {Cbc_newModel(), 0, NULL, 0, false};
  if (!im.m) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
  Cbc_setProblemName(im.m, "autopar_sharding");
  if (!build(p, &im)) {
    Cbc_deleteModel(im.m);
    free(im.s_col);
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
  if (o->time_budget_s > 0) Cbc_setMaximumSeconds(im.m, o->time_budget_s);
  r->lower_bound = im.const_infeasible || o->skip_lower_bound ? NAN : lp_bound(im.m, im.n_cols, im.offset);
  r->n_evals = 0;
  Cbc_solve(im.m);
  ap_status st = AP_OK;
  const double *x = Cbc_getColSolution(im.m);
  bool optimal = Cbc_isProvenOptimal(im.m), has_sol = Cbc_numberSavedSolutions(im.m) > 0 || optimal;
  if (im.const_infeasible || Cbc_isProvenInfeasible(im.m) || (!has_sol && Cbc_status(im.m) == 0)) {
    r->status = SOLVE_INFEASIBLE;
    r->objective = r->lower_bound = NAN;
  } else if (!has_sol || !x) {
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
  free(im.s_col);
  return st;
}

static const ilp_ops ops = {ilp_solve_sharding};
static const ap_part part = {"ilp", &ops};

const ap_part *ap_part_ilp(void) { return &part; }
