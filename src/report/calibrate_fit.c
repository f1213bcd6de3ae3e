/* The fit of a calibration (report layer; calibrate_fit.h): coordinate descent of the cost model's constants
 * over the rows of a kept validate report (calibrate.c's "Method"), and the groupings cross-validation leaves
 * out (calibrate_cv.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/calib.h"
#include "hw/hw.h"
#include "plan/stack.h"
#include "report/calibrate_fit.h"
#include "report/validate.h"

/* The constants the fit adjusts, and in what order, are the table's (cost_tuning_params: fit_time, fit_memory);
 * the rest keep their values: memory constants belong to the memory fit, attn_bwd_eff follows attn_fwd_eff at
 * its default ratio. */


static double row_error(fit_state *f, const cal_row *r);

/* The backward attention efficiency that goes with a fitted forward one: the default ratio of the two, kept
 * inside attn_bwd_eff's own range (calib.c), so that the written file loads. */
static double derived_attn_bwd(double fwd) {
  compute_tuning d = compute_tuning_defaults();
  size_t n;
  const calib_param *ps = calib_params(&n);
  double lo = 0, hi = 1, x = fwd * d.attn_bwd_eff / d.attn_fwd_eff;
  for (size_t k = 0; k < n; k++)
    if (strcmp(ps[k].name, "attn_bwd_eff") == 0) lo = ps[k].min, hi = ps[k].max;
  return x < lo ? lo : x > hi ? hi : x;
}

/* The row's measured quantity under the current constants: tokens/s per device, or the compared memory. */
static double row_predict(fit_state *f, const cal_row *r) {
  (void)row_error(f, r);
  return f->memory ? validate_compared_mem(r->v, r->v->kept_env, f->scratch) : f->scratch->tokens_per_s_per_device;
}

/* The row's error under the current constants: the APE of its throughput, or for the memory fit the absolute
 * log error of its compared memory. */
static double row_error(fit_state *f, const cal_row *r) {
  cost_tuning t = {f->cal->chips[r->dev].compute, f->cal->comm, f->cal->memory, f->cal->overlap};
  /* attn_bwd_eff keeps its default ratio to attn_fwd_eff. */
  t.compute.attn_bwd_eff = derived_attn_bwd(t.compute.attn_fwd_eff);
  cost_env_set_tuning(r->v->kept_env, &t);
  ap_ctx ctx = {0};
  if (cost_estimate(&ctx, r->v->kept_env, &r->v->plan, f->scratch)) return 5.0; /* cannot happen for a kept row */
  if (f->memory) return fabs(log(validate_compared_mem(r->v, r->v->kept_env, f->scratch) / r->v->measured_mem_bytes));
  return fabs(f->scratch->tokens_per_s_per_device / r->v->measured_tokens - 1.0);
}

/* Mean row error over the rows a constant affects (dev < 0: every row). The memory fit also counts every
 * training row measured to run whose plan the constants would no longer fit (validate_fit_disagrees), at
 * OOM_PENALTY each: the memory constants decide the fit test, so they must keep every measured run fitting. */
/* TUNING: 1.0 per row, a hundred times a typical memory error: every ok row predicted to fit is a target, not
 * a trade-off. */
static const double OOM_PENALTY = 1.0;

static double objective(fit_state *f, int dev) {
  double sum = 0, penalty = 0;
  int n = 0;
  for (int i = 0; i < f->n_rows; i++) {
    const cal_row *r = &f->rows[i];
    if (r->fold == f->exclude_fold || (dev >= 0 && r->dev != dev)) continue;
    if (f->memory && r->tput) {
      (void)row_error(f, r);
      penalty += validate_fit_disagrees(r->v, f->scratch, f->scratch + 1) ? OOM_PENALTY : 0;
    }
    if (!(f->memory ? r->mem : r->tput)) continue;
    sum += row_error(f, r);
    n++;
  }
  return (n ? sum / n : 0) + penalty;
}

/* Whether any training row uses what parameter k of device dev models. */
static bool param_applies(const fit_state *f, const calib_param *k, int dev) {
  for (int i = 0; i < f->n_rows; i++) {
    const cal_row *r = &f->rows[i];
    if (r->fold == f->exclude_fold || (dev >= 0 && r->dev != dev) || !(f->memory ? r->mem : r->tput)) continue;
    if (strcmp(k->name, "fp8_gemm_speedup") == 0 && !r->fp8) continue;
    if ((strcmp(k->name, "moe_gemm_factor") == 0 || strcmp(k->name, "moe_host_s") == 0) && !r->moe) continue;
    if (strcmp(k->name, "overlap.ep") == 0 && !r->moe) continue;
    return true;
  }
  return false;
}

/* Golden-section search of one constant in [min, max]; leaves the best value found in place. */
/* TUNING: the pull of each constant toward its documented default, in units of the objective (mean absolute
 * percentage error) per squared range. Several constants trade off against each other on the reference runs (an
 * overlap fraction against a link efficiency); without a pull the fit drifts between range ends from one refit
 * to the next. 0.05 costs a constant moved across its whole range as much as a 5% prediction error. */
static const double PULL = 0.05;

/* The documented default of a constant: the table's (tuning.c). */
static double default_of(const calib_param *k) { return k->value; }

/* The objective for constant k at its current value: the error plus the pull toward the default. */
static double penalised(fit_state *f, const calib_param *k, int dev, double x) {
  double r = (x - default_of(k)) / (k->max - k->min);
  return objective(f, dev) + PULL * r * r;
}

/* The device constants tied across chips: one value for every chip, fitted on all their rows. Fitted per chip,
 * moe_gemm_factor (the grouped expert GEMM kernels' efficiency relative to dense GEMMs: software, measured on the
 * MoE rows of one source) lowers leave-one-source-out MAPE by 0.02 point and raises leave-one-chip-out's by 0.25
 * (docs/cost-model.md "Every fitted constant"). moe_host_s, whose per-chip fit gains no more out of sample
 * (-0.01, +0.05), stays per chip: tied with it, the in-sample MAPE rose from 7.8% to 8.0% (the B200's host wait
 * is 8.2 ms a layer against GH100's 6.7). */
static const char *const TIED[] = {"moe_gemm_factor"};

static bool tied(const calib_param *k) {
  if (k->scope != COST_SCOPE_DEVICE) return false;
  for (size_t i = 0; i < sizeof TIED / sizeof TIED[0]; i++)
    if (strcmp(k->name, TIED[i]) == 0) return true;
  return false;
}

/* A tied device constant: k of every chip set to x. */
static void set_all(fit_state *f, const calib_param *k, double x) {
  for (int d = 0; d < f->cal->n_chips; d++) *calib_param_ref(f->cal, k, d) = x;
}

/* Golden-section search of one constant in [min, max] (dev < 0: a global one, or a tied one set on every chip);
 * leaves the best value found in place. */
static void fit_one(fit_state *f, const calib_param *k, int dev) {
  bool all = dev < 0 && k->scope == COST_SCOPE_DEVICE;
  double *x = calib_param_ref(f->cal, k, dev < 0 ? 0 : dev);
#define SET(v) (all ? set_all(f, k, (v)) : (void)(*x = (v)))
  const double phi = 0.6180339887498949;
  double lo = k->min, hi = k->max, best = *x, best_obj = penalised(f, k, dev, *x);
  double a = hi - phi * (hi - lo), b = lo + phi * (hi - lo);
  SET(a);
  double fa = penalised(f, k, dev, a);
  SET(b);
  double fb = penalised(f, k, dev, b);
  for (int i = 0; i < f->steps; i++) {
    if (fa < fb) {
      hi = b, b = a, fb = fa;
      a = hi - phi * (hi - lo);
      SET(a);
      fa = penalised(f, k, dev, a);
    } else {
      lo = a, a = b, fa = fb;
      b = lo + phi * (hi - lo);
      SET(b);
      fb = penalised(f, k, dev, b);
    }
  }
  double cand = fa < fb ? a : b, cand_obj = fa < fb ? fa : fb;
  SET(cand_obj < best_obj ? cand : best);
#undef SET
}

/* The memory fit adjusts the constants marked fit_memory in the table (memory.reserve_fraction, context_bytes,
 * expandable_reserve_fraction: the allocator reserves and the CUDA context, which the measured peaks show) against the
 * rows that report a peak, under the constraint that every row measured to run still fits (objective); the
 * library workspaces keep their documented value. */
void calfit_fit(fit_state *f) {
  size_t n_params;
  const calib_param *ps = calib_params(&n_params);
  int n_turns = 0;
  for (size_t k = 0; k < n_params; k++) {
    int turn = f->memory ? ps[k].fit_memory : ps[k].fit_time;
    if (turn > n_turns) n_turns = turn;
  }
  for (int sweep = 0; sweep < f->sweeps; sweep++)
    for (int q = 1; q <= n_turns; q++)
      for (size_t k = 0; k < n_params; k++) {
        if ((f->memory ? ps[k].fit_memory : ps[k].fit_time) != q) continue;
        if (ps[k].scope == COST_SCOPE_GLOBAL || tied(&ps[k])) {
          if (param_applies(f, &ps[k], -1)) fit_one(f, &ps[k], -1);
        } else {
          for (int d = 0; d < f->cal->n_chips; d++)
            if (param_applies(f, &ps[k], d)) fit_one(f, &ps[k], d);
        }
      }
  /* The calibration holds the backward attention efficiency the fit evaluated with (row_error derives it from
   * the forward one), so that the written file predicts what the fit saw; devices without rows keep theirs. */
  for (size_t k = 0; k < n_params && !f->memory; k++) {
    if (strcmp(ps[k].name, "attn_fwd_eff") != 0) continue;
    for (int d = 0; d < f->cal->n_chips; d++) {
      compute_tuning *c = &f->cal->chips[d].compute;
      if (param_applies(f, &ps[k], d) || tied(&ps[k])) c->attn_bwd_eff = derived_attn_bwd(c->attn_fwd_eff);
    }
  }
}

/* Warns (through the context's log) about every fitted constant that ended within 1% of an end of its range:
 * there the data pushed it as far as physics allows, a sign that something else in the model is missing. */
void calfit_warn_at_edges(ap_ctx *ctx, cost_calib *cal) {
  size_t n_params;
  const calib_param *ps = calib_params(&n_params);
  for (size_t k = 0; k < n_params; k++) {
    int n_dev = ps[k].scope == COST_SCOPE_DEVICE ? cal->n_chips : 1;
    for (int d = 0; d < n_dev; d++) {
      double x = *calib_param_ref(cal, &ps[k], d), span = ps[k].max - ps[k].min;
      if (x - ps[k].min < 0.01 * span || ps[k].max - x < 0.01 * span)
        ctx_log(ctx, AP_LOG_WARN, "calibrate: %s%s%s = %g is at the end of its range [%g, %g]",
                ps[k].scope == COST_SCOPE_DEVICE ? cal->chips[d].name : "",
                ps[k].scope == COST_SCOPE_DEVICE ? "." : "", ps[k].name, x, ps[k].min, ps[k].max);
    }
  }
}

/* ---- Groupings ------------------------------------------------------------------------------------------- */

static const char *const grouping_names[CV_COUNT_] = {"source", "chip", "release", "stack"};

const char *cv_grouping_name(cv_grouping g) { return (int)g >= 0 && g < CV_COUNT_ ? grouping_names[g] : "?"; }

bool cv_grouping_from_name(const char *name, cv_grouping *out) {
  for (int g = 0; name && g < CV_COUNT_; g++)
    if (strcmp(name, grouping_names[g]) == 0) {
      *out = (cv_grouping)g;
      return true;
    }
  return false;
}

/* The release named in a source text: a container version ("26.02.01 NeMo Container": the word before
 * " NeMo Container"), else the first commit ("@495218376", up to a space, comma or closing parenthesis); ""
 * when it names neither (a paper's table). */
static void release_of(const char *source, char *out, size_t n) {
  out[0] = '\0';
  const char *c = strstr(source, " NeMo Container");
  if (c) {
    const char *b = c;
    while (b > source && b[-1] != ' ' && b[-1] != '\'') b--;
    snprintf(out, n, "%.*s", (int)(c - b), b);
    return;
  }
  const char *at = strchr(source, '@');
  if (at) snprintf(out, n, "%.*s", (int)strcspn(at, " ,)'"), at);
}

void cv_key(const validate_row *v, cv_grouping g, char *out, size_t n) {
  const char *source = v->source ? v->source : "";
  size_t len = strcspn(source, " ");
  switch (g) {
  case CV_CHIP: {
    ap_ctx scratch = {0};
    hw_device d;
    if (hw_device_find(&scratch, v->gpu, &d) == AP_OK) calib_chip_of(&d, out, n);
    else snprintf(out, n, "%s", v->gpu);
    break;
  }
  case CV_RELEASE: {
    char rel[96];
    release_of(source, rel, sizeof rel);
    snprintf(out, n, "%.*s%s%s", (int)len, source, rel[0] ? " " : "", rel);
    break;
  }
  case CV_STACK:
    snprintf(out, n, "%s", plan_stack_name(v->plan.stack == PLAN_STACK_DEFAULT ? plan_stack_default(true) : v->plan.stack));
    break;
  default: snprintf(out, n, "%.*s", (int)len, source); break;
  }
}

int cv_fold_index(const char *key, const char **names, int *n_names, int cap) {
  for (int i = 0; i < *n_names; i++)
    if (strcmp(names[i], key) == 0) return i;
  if (*n_names >= cap) return cap - 1;
  size_t len = strlen(key);
  char *copy = malloc(len + 1);
  if (!copy) return 0;
  memcpy(copy, key, len + 1);
  names[*n_names] = copy;
  return (*n_names)++;
}

int calfit_collect_rows(const validate_report *rep, cost_calib *cal, const char *device, cv_grouping g, cal_row *rows,
                        const char **fold_names, int *n_folds) {
  int n = 0;
  for (int64_t i = 0; i < validate_report_n_rows(rep); i++) {
    const validate_row *v = validate_report_row(rep, i);
    bool tput = v->has_measured && !v->measured_oom, mem = v->has_mem;
    if (!v->kept_env || !(tput || mem)) continue;
    const hw_device *hd = &cost_env_cluster(v->kept_env)->groups[0].device;
    if (device && strcmp(device, hd->name) != 0) continue;
    char chip[HW_NAME_MAX], key[256];
    calib_chip_of(hd, chip, sizeof chip);
    calib_chip *d = calib_chip_entry(cal, chip);
    if (!d) continue;
    const graph *gr = cost_env_graph(v->kept_env);
    bool moe = false;
    for (int b = 0; b < gr->n_blocks; b++) moe |= gr->blocks[b].is_moe;
    cv_key(v, g, key, sizeof key);
    rows[n++] = (cal_row){v, (int)(d - cal->chips), cv_fold_index(key, fold_names, n_folds, MAX_FOLDS),
                          v->plan.precision == PLAN_PREC_FP8, moe, tput, mem};
  }
  return n;
}

/* After a fit that left out some rows: a chip with no training row takes the fitted compute constants of the
 * nearest chip of its family, else of its vendor, that had some (calib_tuning_for_device's rule for an unlisted
 * chip), as a user without runs of that chip would get them. */
void calfit_borrow_for_unfitted(fit_state *f) {
  bool trained[CALIB_MAX_CHIPS] = {false};
  for (int i = 0; i < f->n_rows; i++)
    if (f->rows[i].fold != f->exclude_fold && f->rows[i].tput) trained[f->rows[i].dev] = true;
  for (int d = 0; d < f->cal->n_chips; d++) {
    if (trained[d]) continue;
    const calib_chip *e = &f->cal->chips[d];
    int s = calib_nearest(f->cal, e->name, e->family, e->vendor, e->bf16_peak, trained, NULL);
    if (s >= 0) f->cal->chips[d].compute = f->cal->chips[s].compute;
  }
}

/* MAPE of the rows of one fold (or all rows when fold < 0) under the calibration. */
double calfit_mape_of(fit_state *f, int fold, int *n_out) {
  double sum = 0;
  int n = 0;
  for (int i = 0; i < f->n_rows; i++) {
    const cal_row *r = &f->rows[i];
    if ((fold >= 0 && r->fold != fold) || !(f->memory ? r->mem : r->tput)) continue;
    double want = f->memory ? r->v->measured_mem_bytes : r->v->measured_tokens;
    sum += fabs(row_predict(f, r) - want) / want;
    n++;
  }
  if (n_out) *n_out = n;
  return n ? sum / n : NAN;
}

