/* Calibration (report layer): `autopar calibrate FILE.csv` fits the cost model's constants per chip (every
 * device type on one chip shares them: an A100 40 GB and 80 GB) and per link class to measured runs, stores
 * the error bands of validate's residuals per device family and stack (calibrate_bands.c), and reports the
 * error before and after, in-sample and out of sample.
 *
 * Method. A validate pass models every row (choosing its unstated plan fields under the calibration in force)
 * and keeps each row's cost environment and plan. The fit then minimises the mean absolute percentage error of
 * the predicted tokens/s per device, |predicted / measured - 1|, the figure validate reports (a mean absolute
 * log error, tried first, weighs over- and under-prediction alike and left the MAPE 0.2 points higher on
 * runs.csv), by coordinate descent: each constant in turn is set by a golden-section search inside its
 * physical range (calib.h), re-evaluating only the rows it affects (a chip's rows for chip constants, all
 * rows for global ones), for a few sweeps. Plans are then chosen again under the fitted constants and the fit
 * repeated, twice, since a different calibration can change what a tuned team would pick (a third round
 * changes the MAPE on runs.csv by less than 0.1 point).
 *
 * Out of sample: validate --cv source and --cv chip (calibrate_cv.c): each source, then each chip, predicted
 * by the same fit on the other groups only (a chip no other group measures takes the fitted constants of the
 * nearest chip of its family, else of its vendor: calib_nearest). Their per-group figures go in the file's
 * "fit" summary, and their residuals, each with what describes its run, in "residuals": the points every
 * prediction's error band is built from (validate_band.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jdoc.h"
#include "core/jsonx.h"
#include "cost/calib.h"
#include "report/calibrate.h"
#include "report/calibrate_fit.h"
#include "report/validate.h"
#include "report/validate_band.h"

/* The report's text, every figure read from its document. */
static void calibrate_text(strbuf *sb, const json_t *doc) {
  const char *device = jd_gets(doc, "device");
  sb_printf(sb, "calibrated %lld rows of %s%s%s\n", (long long)jd_geti(doc, "rows"), jd_gets(doc, "csv"),
            *device ? " on " : "", device);
  sb_printf(sb, "MAPE before        %.1f%%\nMAPE after         %.1f%% (in sample, full validate with the fitted constants)\n",
            100 * jd_getn(doc, "mape_before"), 100 * jd_getn(doc, "mape_after"));
  double loo = jd_getn(doc, "leave_one_source_out_mape"), mem_before = jd_getn(doc, "memory_mape_before");
  if (isfinite(loo))
    sb_printf(sb, "leave-one-source-out MAPE %.1f%%, leave-one-chip-out %.1f%% (each source, each chip predicted by "
                  "constants fitted on the others: validate --cv)\n", 100 * loo, 100 * jd_getn(doc, "leave_one_chip_out_mape"));
  if (isfinite(mem_before))
    sb_printf(sb, "memory MAPE %.1f%% before, %.1f%% after (rows that report a measured peak)\n", 100 * mem_before,
              100 * jd_getn(doc, "memory_mape_after"));
  else
    sb_puts(sb, "memory: no row reports a measured peak\n");
  sb_printf(sb, "written to %s\n", jd_gets(doc, "output"));
}

ap_status calibrate_file(ap_ctx *ctx, const char *csv_path, const char *device, const char *out_path, int format,
                         int effort, char **report_out) {
  *report_out = NULL;
  /* effort 0 is the full fit; 1 a quick one (one sweep of 8 steps) for tests. */
  int sweeps = effort ? 1 : FIT_SWEEPS, steps = effort ? 8 : GOLDEN_STEPS;
  cost_calib *start = malloc(sizeof *start), *cal = malloc(sizeof *cal);
  cost_result *scratch = malloc(2 * sizeof *scratch); /* [1]: validate_fit_disagrees' completion */
  validate_report *rep = NULL;
  cal_row *rows = NULL;
  const char *fold_names[MAX_FOLDS] = {0};
  int n_folds = 0;
  strbuf sb = {0}, fitj = {0};
  ap_status st = (!start || !cal || !scratch) ? ctx_fail(ctx, AP_NOMEM, "out of memory") : AP_OK;
  /* Start from the --calibration file when one is given, else from the documented defaults, so that the
   * shipped calibration (make calibrate) does not depend on the one it replaces. */
  if (!st) {
    if (ctx->calibration) st = calib_of_ctx(ctx, start);
    else calib_defaults(start);
  }
  double before = NAN, after_fixed = NAN, after = NAN, mem_before = NAN, mem_after = NAN;
  int n_rows = 0;
  /* Round 1: plans under the calibration in force; fit. Rounds 2 and 3: plans under the fitted constants; fit
   * again. */
  if (!st) *cal = *start;
  /* Progress: three rounds of a validation and two fits each, then one fit per source left out (their count
   * is known after the first round); the inner validation reports none of its own. */
  int n_steps = 9, step = 0;
  for (int round = 0; round < 3 && !st; round++) {
    validate_report_free(rep);
    rep = NULL;
    free(rows);
    rows = NULL;
    for (int i = 0; i < n_folds; i++) free((char *)fold_names[i]);
    n_folds = 0;
    /* Validate under the current constants (the start, then the fitted ones). */
    ap_ctx vctx = ctx_child(ctx);
    vctx.progress_fn = NULL;
    calib_lend(&vctx, cal);
    if (!st && (st = validate_file_keep(&vctx, csv_path, &rep))) ctx_fail(ctx, st, "%s", vctx.error);
    if (st) break;
    rows = malloc(sizeof *rows * (size_t)(validate_report_n_rows(rep) + 1));
    if (!rows) {
      st = ctx_fail(ctx, AP_NOMEM, "out of memory");
      break;
    }
    n_rows = calfit_collect_rows(rep, cal, device, CV_SOURCE, rows, fold_names, &n_folds);
    if (n_rows == 0) {
      st = ctx_fail(ctx, AP_INVALID, "%s: no modelled row with a measured throughput%s%s", csv_path,
                    device ? " on device " : "", device ? device : "");
      break;
    }
    fit_state f = {cal, rows, n_rows, scratch, -1, sweeps, steps, false};
    fit_state fm = f;
    fm.memory = true;
    if (round == 0) {
      before = calfit_mape_of(&f, -1, NULL);
      mem_before = calfit_mape_of(&fm, -1, NULL);
    }
    /* Memory constants first (they decide which plans fit), then the throughput constants. */
    if (round == 0) n_steps = 11;
    if (ctx_progress(ctx, (double)++step / n_steps, "validating")) st = ctx_fail(ctx, AP_CANCELLED, "cancelled");
    if (st) break;
    calfit_fit(&fm);
    mem_after = calfit_mape_of(&fm, -1, NULL);
    if (ctx_progress(ctx, (double)++step / n_steps, "fitting memory")) st = ctx_fail(ctx, AP_CANCELLED, "cancelled");
    if (st) break;
    calfit_fit(&f);
    after_fixed = calfit_mape_of(&f, -1, NULL);
    if (ctx_progress(ctx, (double)++step / n_steps, "fitting throughput")) st = ctx_fail(ctx, AP_CANCELLED, "cancelled");
  }
  /* Out of sample: validate --cv source and chip (calibrate_cv.c), whose residuals are the calibration's points
   * for the error bands (validate_band.c): each row as predicted without its source, and without its chip. */
  double loo_mape = NAN, chip_mape = NAN;
  if (!st) {
    sb_printf(&fitj, "{\"rows\": %d, \"mape_before\": ", n_rows);
    jx_sb_num(&fitj, before);
    sb_puts(&fitj, ", \"mape_after\": ");
    jx_sb_num(&fitj, after_fixed);
    cal->n_points = 0;
    static const char *const groupings[2] = {"source", "chip"};
    for (int k = 0; k < 2 && !st && !device; k++) {
      if (ctx_progress(ctx, (double)++step / n_steps, groupings[k][0] == 's' ? "leave-one-source-out" : "leave-one-chip-out")) {
        st = ctx_fail(ctx, AP_CANCELLED, "cancelled");
        break;
      }
      validate_report *cv = NULL;
      ap_ctx cctx = ctx_child(ctx);
      cctx.progress_fn = NULL;
      if ((st = validate_cv(&cctx, csv_path, groupings[k], effort, &cv))) {
        ctx_fail(ctx, st, "%s", cctx.error);
        break;
      }
      const validate_summary *cs = validate_report_summary(cv);
      if (k == 0) loo_mape = cs->mape;
      else chip_mape = cs->mape;
      sb_printf(&fitj, ", \"leave_one_%s_out\": [", groupings[k]);
      for (int64_t fo = 0; fo < cs->n_folds; fo++) {
        sb_printf(&fitj, "%s{\"group\": ", fo ? ", " : "");
        jx_sb_str(&fitj, cs->folds[fo].name);
        sb_printf(&fitj, ", \"rows\": %lld, \"mape\": ", (long long)cs->folds[fo].n);
        jx_sb_num(&fitj, cs->folds[fo].mape);
        sb_printf(&fitj, ", \"memory_rows\": %lld, \"memory_mape\": ", (long long)cs->folds[fo].mem_n);
        jx_sb_num(&fitj, cs->folds[fo].mem_mape);
        sb_puts(&fitj, "}");
      }
      sb_printf(&fitj, "], \"leave_one_%s_out_mape\": ", groupings[k]);
      jx_sb_num(&fitj, cs->mape);
      sb_printf(&fitj, ", \"leave_one_%s_out_memory_mape\": ", groupings[k]);
      jx_sb_num(&fitj, cs->mem_mape);
      for (int64_t i = 0; i < validate_report_n_rows(cv) && cal->n_points < CALIB_MAX_POINTS; i++) {
        const validate_row *v = validate_report_row(cv, i);
        if (v->error) continue;
        band_point_of(v, &cal->points[cal->n_points]);
        const calib_point *pt = &cal->points[cal->n_points];
        if (isfinite(pt->err) || isfinite(pt->mem_err)) cal->n_points++;
      }
      validate_report_free(cv);
    }
  }
  if (!st) {
    sb_puts(&fitj, ", \"memory_mape_before\": ");
    jx_sb_num(&fitj, mem_before);
    sb_puts(&fitj, ", \"memory_mape_after\": ");
    jx_sb_num(&fitj, mem_after);
    sb_puts(&fitj, "}");
  }
  if (!st) calfit_warn_at_edges(ctx, cal);
  char *fit_summary = st ? NULL : sb_take(&fitj);
  if (!st && !fit_summary) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  if (!st) {
    /* The error after the fit, in sample, from a full validate run with the fitted constants. */
    ap_ctx vctx = ctx_child(ctx);
    vctx.progress_fn = NULL;
    calib_lend(&vctx, cal);
    validate_report *final = NULL;
    if ((st = validate_file(&vctx, csv_path, &final))) ctx_fail(ctx, st, "%s", vctx.error);
    else after = validate_report_summary(final)->mape;
    /* The error bands from the same run's residuals, per device family and stack. */
    if (!st) st = calibrate_bands(ctx, final, cal);
    validate_report_free(final);
  }
  if (!st) {
    snprintf(cal->source, sizeof cal->source, "autopar calibrate %s%s%s (%d rows)", util_basename(csv_path),
             device ? " --device " : "", device ? device : "", n_rows);
    strbuf cj = {0};
    calib_to_json(cal, fit_summary, &cj);
    char *text = sb_take(&cj);
    if (!text) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
    /* What is written must read back: parse it first, then write it (atomically). */
    cost_calib *check = st ? NULL : malloc(sizeof *check);
    if (!st && !check) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
    if (!st && (st = calib_parse(ctx, out_path, text, strlen(text), check)))
      ctx_fail(ctx, AP_INTERNAL, "calibrate: the fitted calibration does not read back: %s", ap_ctx_error(ctx));
    free(check);
    if (!st) st = util_write_file_atomic(ctx, out_path, text);
    free(text);
  }
  if (!st) {
    /* The report is one document (autopar-calibrate/1, docs/json.md); the text is rendered from it. */
    jd doc;
    jd_init(&doc, "autopar-calibrate/1");
    jd_str(&doc, doc.root, "csv", csv_path);
    jd_str(&doc, doc.root, "device", device);
    jd_str(&doc, doc.root, "output", out_path);
    jd_int(&doc, doc.root, "rows", n_rows);
    jd_num(&doc, doc.root, "mape_before", before);
    jd_num(&doc, doc.root, "mape_after_fixed_plans", after_fixed);
    jd_num(&doc, doc.root, "mape_after", after);
    jd_num(&doc, doc.root, "leave_one_source_out_mape", loo_mape);
    jd_num(&doc, doc.root, "leave_one_chip_out_mape", chip_mape);
    jd_num(&doc, doc.root, "memory_mape_before", mem_before);
    jd_num(&doc, doc.root, "memory_mape_after", mem_after);
    jd_put(&doc, doc.root, "fit", json_loads(fit_summary, 0, NULL));
    if (format == AP_OUT_JSON) {
      char *js = jd_dump(&doc);
      if (js) sb_puts(&sb, js);
      else sb.oom = true;
      free(js);
    } else if (doc.failed) {
      sb.oom = true;
    } else {
      calibrate_text(&sb, doc.root);
    }
    jd_free(&doc);
    *report_out = sb_take(&sb);
    if (!*report_out) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  free(fit_summary);
  sb_free(&sb);
  sb_free(&fitj);
  for (int i = 0; i < n_folds; i++) free((char *)fold_names[i]);
  free(rows);
  validate_report_free(rep);
  free(scratch);
  free(start);
  free(cal);
  return st;
}

ap_status ap_calibrate(ap_ctx *ctx, const char *csv_path, const char *device, const char *out_path, int format,
                       char **out) {
  API_ENTER(ctx);
  if (!ctx || !out) return ctx_fail(ctx, AP_INVALID, "ap_calibrate: ctx and out must not be NULL");
  *out = NULL;
  if (!csv_path || !*csv_path) return ctx_fail(ctx, AP_INVALID, "ap_calibrate: expected a runs CSV file name");
  if (format != AP_OUT_TEXT && format != AP_OUT_JSON)
    return ctx_fail(ctx, AP_INVALID, "ap_calibrate: format: expected AP_OUT_TEXT or AP_OUT_JSON, got %d", format);
  if (!out_path || !*out_path) return ctx_fail(ctx, AP_INVALID, "calibrate: -o FILE is required");
  if (util_same_file(csv_path, out_path))
    return ctx_fail(ctx, AP_INVALID, "%s: the output is the input runs table; write the calibration elsewhere", out_path);
  /* Before the fit (tens of seconds): an output that cannot be written fails now, with one line. */
  ap_status wst = util_check_writable(ctx, out_path);
  if (wst) return wst;
  return calibrate_file(ctx, csv_path, device, out_path, format, 0, out);
}
