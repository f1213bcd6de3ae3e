/* Cross-validation (report layer; calibrate.h): `autopar validate FILE.csv --cv source|chip|release|stack`.
 *
 * The rows are grouped (calibrate_fit.h: the source, the chip of the gpu, the source's release, the stack) and
 * each group is predicted by a calibration fitted without it: starting from the constants in force before any
 * fit (the --calibration file, else the documented defaults, as `autopar calibrate` starts), the memory
 * constants and then the throughput constants are fitted (calibrate.c's "Method") to the rows of the other
 * groups only, and a chip that none of them measures takes the fitted constants of the nearest chip of its
 * family, else of its vendor (calib_nearest: what a user with no runs of that chip gets; its datasheet peaks,
 * bandwidths and capacity are its own, hw presets). A full validate under that calibration then predicts the
 * group's rows, choosing their unstated plan fields again. The report is validate's, its rows those
 * out-of-group predictions, its summary the same figures over them plus the groups' own (summary.cv).
 *
 * The fit rows are those of one validate pass under the starting constants (their unstated fields chosen
 * under those constants, not under any fit that saw the left-out group), so nothing of a group reaches its
 * prediction. Each row's error band is built from the cross-validated residuals of the other groups' rows
 * most like it (validate_band.c), so the coverage the summary reports is out of sample too. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/calib.h"
#include "report/calibrate.h"
#include "report/calibrate_fit.h"
#include "report/validate.h"
#include "report/validate_band.h"

/* The constants in force before any fit, in cal's chip order: start's. */
static void reset_to_start(cost_calib *loo, const cost_calib *cal, const cost_calib *start) {
  *loo = *cal;
  loo->comm = start->comm;
  loo->overlap = start->overlap;
  loo->memory = start->memory;
  for (int d = 0; d < loo->n_chips; d++) loo->chips[d].compute = calib_tuning_for_chip(start, &loo->chips[d], NULL).compute;
}

/* A full validate of csv_path under calibration c. */
static ap_status validate_under(ap_ctx *ctx, const char *csv_path, const cost_calib *c, bool keep, validate_report **out) {
  ap_ctx vctx = ctx_child(ctx);
  vctx.progress_fn = NULL;
  calib_lend(&vctx, c);
  ap_status st = keep ? validate_file_keep(&vctx, csv_path, out) : validate_file(&vctx, csv_path, out);
  if (st) ctx_fail(ctx, st, "%s", vctx.error);
  return st;
}

ap_status validate_cv(ap_ctx *ctx, const char *csv_path, const char *grouping, int effort, validate_report **out) {
  *out = NULL;
  cv_grouping g;
  if (!cv_grouping_from_name(grouping, &g))
    return ctx_fail(ctx, AP_INVALID, "validate: --cv must be one of source, chip, release, stack; got \"%.64s\"",
                    grouping ? grouping : "");
  int sweeps = effort ? 1 : FIT_SWEEPS, steps = effort ? 8 : GOLDEN_STEPS;
  cost_calib *start = malloc(sizeof *start), *cal = malloc(sizeof *cal), *loo = malloc(sizeof *loo);
  cost_result *scratch = malloc(2 * sizeof *scratch);
  validate_report *kept = NULL, *base = NULL;
  cal_row *rows = NULL;
  int *fold_of_row = NULL;
  validate_fold *folds = NULL;
  const char *names[MAX_FOLDS] = {0};
  int n_folds = 0, n_rows = 0;
  ap_status st = (!start || !cal || !loo || !scratch) ? ctx_fail(ctx, AP_NOMEM, "out of memory") : AP_OK;
  if (!st) {
    if (ctx->calibration) st = calib_of_ctx(ctx, start);
    else calib_defaults(start);
  }
  if (!st) *cal = *start;
  /* The fit rows, under the starting constants; base, the report the out-of-group rows are gathered in. */
  if (!st) st = validate_under(ctx, csv_path, start, true, &kept);
  if (!st) st = validate_under(ctx, csv_path, start, false, &base);
  int64_t n_all = st ? 0 : validate_report_n_rows(base);
  if (!st) {
    rows = malloc(sizeof *rows * (size_t)(validate_report_n_rows(kept) + 1));
    fold_of_row = malloc(sizeof *fold_of_row * (size_t)(n_all + 1));
    folds = calloc(MAX_FOLDS, sizeof *folds);
    if (!rows || !fold_of_row || !folds) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  if (!st) {
    n_rows = calfit_collect_rows(kept, cal, NULL, g, rows, names, &n_folds);
    /* Every row has a group, those the fit does not read (no measurement, or not modelled) too. */
    for (int64_t i = 0; i < n_all; i++) {
      char key[256];
      cv_key(validate_report_row(base, i), g, key, sizeof key);
      fold_of_row[i] = cv_fold_index(key, names, &n_folds, MAX_FOLDS);
    }
  }
  for (int fo = 0; fo < n_folds && !st; fo++) {
    if (ctx_progress(ctx, (double)fo / n_folds, "cross-validating")) {
      st = ctx_fail(ctx, AP_CANCELLED, "cancelled");
      break;
    }
    reset_to_start(loo, cal, start);
    fit_state fm = {loo, rows, n_rows, scratch, fo, sweeps, steps, true};
    calfit_fit(&fm);
    fit_state f = fm;
    f.memory = false;
    calfit_fit(&f);
    calfit_borrow_for_unfitted(&f);
    /* Which chips the fit saw a measured throughput of. */
    bool seen[CALIB_MAX_CHIPS] = {false};
    for (int i = 0; i < n_rows; i++)
      if (rows[i].fold != fo && rows[i].tput) seen[rows[i].dev] = true;
    validate_report *fr = NULL;
    if ((st = validate_under(ctx, csv_path, loo, false, &fr))) break;
    validate_fold *fd = &folds[fo];
    fd->name = names[fo];
    double sum = 0, mem_sum = 0;
    for (int64_t i = 0; i < n_all; i++) {
      if (fold_of_row[i] != fo) continue;
      validate_report_set_row(base, i, validate_report_row(fr, i));
      validate_row *v = validate_report_row_mut(base, i);
      if (!(v->fold = validate_report_strdup(base, names[fo]))) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
      char chip[HW_NAME_MAX];
      cv_key(v, CV_CHIP, chip, sizeof chip);
      int d = calib_chip_index(loo, chip);
      v->chip_unseen = d < 0 || !seen[d];
      if (v->has_measured && !v->measured_oom) {
        fd->n++;
        sum += v->error ? validate_miss_ape() : v->ape;
        fd->chips_unseen += v->chip_unseen;
      }
      if (!v->error && v->has_mem) {
        fd->mem_n++;
        mem_sum += v->mem_ape;
      }
    }
    fd->mape = fd->n ? sum / (double)fd->n : NAN;
    fd->mem_mape = fd->mem_n ? mem_sum / (double)fd->mem_n : NAN;
    ap_status hst = validate_report_hold(ctx, base, fr);
    if (!st) st = hst;
  }
  /* Each row's band from the other groups' out-of-group residuals. */
  if (!st) st = band_fill_cv(ctx, base, fold_of_row);
  if (!st) st = validate_report_resummarise(ctx, base, cv_grouping_name(g), folds, n_folds);
  for (int i = 0; i < n_folds; i++) free((char *)names[i]);
  free(folds);
  free(fold_of_row);
  free(rows);
  validate_report_free(kept);
  free(scratch);
  free(start);
  free(cal);
  free(loo);
  if (st) {
    validate_report_free(base);
    return st;
  }
  *out = base;
  return AP_OK;
}
