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
 * Out of sample: leave-one-source-out. Rows are grouped by their source (the text of the source column up to
 * its first space, e.g. "mosaicml/llm-foundry"); for each group the constants are fitted on the other groups
 * only and the group is predicted with them. A chip seen only in the left-out group takes the fitted
 * constants of the nearest chip of its family, else of its vendor (calib_nearest), or keeps the constants it
 * had before the fit when there is none, which is what a user with no runs of that chip would get. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jdoc.h"
#include "core/jsonx.h"
#include "cost/calib.h"
#include "report/calibrate.h"
#include "report/validate.h"

/* The constants the fit adjusts, and in what order, are the table's (cost_tuning_params: fit_time, fit_memory);
 * the rest keep their values: memory constants belong to the memory fit, attn_bwd_eff follows attn_fwd_eff at
 * its default ratio. */

/* TUNING: three sweeps of 14 golden-section steps each settle every constant to about 0.1% of its range
 * (0.618^14 ≈ 1e-3); further sweeps change the fitted MAPE by less than 0.1 point on runs.csv. */
enum { FIT_SWEEPS = 3, GOLDEN_STEPS = 14 };

typedef struct {
  const validate_row *v;
  int dev;       /* index in the calibration's device table */
  int fold;      /* source group */
  bool fp8, moe; /* whether the row exercises fp8 GEMMs and routed experts */
  bool tput, mem; /* whether it has a measured throughput, a measured peak memory */
} cal_row;

typedef struct {
  cost_calib *cal;
  cal_row *rows;
  int n_rows;
  cost_result *scratch; /* two */
  int exclude_fold; /* -1 = fit on every row */
  int sweeps, steps;
  bool memory; /* fit the memory constants to measured peaks instead of throughput */
} fit_state;

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

/* Golden-section search of one constant in [min, max]; leaves the best value found in place. */
static void fit_one(fit_state *f, const calib_param *k, int dev) {
  double *x = calib_param_ref(f->cal, k, dev < 0 ? 0 : dev);
  const double phi = 0.6180339887498949;
  double lo = k->min, hi = k->max, best = *x, best_obj = penalised(f, k, dev, *x);
  double a = hi - phi * (hi - lo), b = lo + phi * (hi - lo);
  *x = a;
  double fa = penalised(f, k, dev, a);
  *x = b;
  double fb = penalised(f, k, dev, b);
  for (int i = 0; i < f->steps; i++) {
    if (fa < fb) {
      hi = b, b = a, fb = fa;
      a = hi - phi * (hi - lo);
      *x = a;
      fa = penalised(f, k, dev, a);
    } else {
      lo = a, a = b, fa = fb;
      b = lo + phi * (hi - lo);
      *x = b;
      fb = penalised(f, k, dev, b);
    }
  }
  double cand = fa < fb ? a : b, cand_obj = fa < fb ? fa : fb;
  *x = cand_obj < best_obj ? cand : best;
}

/* The memory fit adjusts the constants marked fit_memory in the table (memory.reserve_fraction, context_bytes,
 * expandable_reserve_fraction: the allocator reserves and the CUDA context, which the measured peaks show) against the
 * rows that report a peak, under the constraint that every row measured to run still fits (objective); the
 * library workspaces keep their documented value. */
static void fit(fit_state *f) {
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
        if (ps[k].scope == COST_SCOPE_GLOBAL) {
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
      if (param_applies(f, &ps[k], d)) c->attn_bwd_eff = derived_attn_bwd(c->attn_fwd_eff);
    }
  }
}

/* Warns (through the context's log) about every fitted constant that ended within 1% of an end of its range:
 * there the data pushed it as far as physics allows, a sign that something else in the model is missing. */
static void warn_at_edges(ap_ctx *ctx, cost_calib *cal) {
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

/* The source group of a row: its source text up to the first space. */
static int fold_of(const char *source, const char **names, int *n_names, int cap) {
  char key[128];
  size_t len = strcspn(source, " ");
  if (len >= sizeof key) len = sizeof key - 1;
  memcpy(key, source, len);
  key[len] = '\0';
  for (int i = 0; i < *n_names; i++)
    if (strcmp(names[i], key) == 0) return i;
  if (*n_names >= cap) return cap - 1;
  char *copy = malloc(len + 1);
  if (!copy) return 0;
  memcpy(copy, key, len + 1);
  names[*n_names] = copy;
  return (*n_names)++;
}

enum { MAX_FOLDS = 64 };

/* Builds the fit rows from a kept report; each row fits the constants of its device's chip, and chips missing
 * from the calibration are added with defaults. */
static int collect_rows(const validate_report *rep, cost_calib *cal, const char *device, cal_row *rows,
                        const char **fold_names, int *n_folds) {
  int n = 0;
  for (int64_t i = 0; i < validate_report_n_rows(rep); i++) {
    const validate_row *v = validate_report_row(rep, i);
    bool tput = v->has_measured && !v->measured_oom, mem = v->has_mem;
    if (!v->kept_env || !(tput || mem)) continue;
    const hw_device *hd = &cost_env_cluster(v->kept_env)->groups[0].device;
    if (device && strcmp(device, hd->name) != 0) continue;
    char chip[HW_NAME_MAX];
    calib_chip_of(hd, chip, sizeof chip);
    calib_chip *d = calib_chip_entry(cal, chip);
    if (!d) continue;
    const graph *g = cost_env_graph(v->kept_env);
    bool moe = false;
    for (int b = 0; b < g->n_blocks; b++) moe |= g->blocks[b].is_moe;
    rows[n++] = (cal_row){v, (int)(d - cal->chips), fold_of(v->source, fold_names, n_folds, MAX_FOLDS),
                          v->plan.precision == PLAN_PREC_FP8, moe, tput, mem};
  }
  return n;
}

/* After a fit that left out some rows: a chip with no training row takes the fitted compute constants of the
 * nearest chip of its family, else of its vendor, that had some (calib_tuning_for_device's rule for an unlisted
 * chip), as a user without runs of that chip would get them. */
static void borrow_for_unfitted(fit_state *f) {
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
static double mape_of(fit_state *f, int fold, int *n_out) {
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

/* The report's text, every figure read from its document. */
static void calibrate_text(strbuf *sb, const json_t *doc) {
  const char *device = jd_gets(doc, "device");
  sb_printf(sb, "calibrated %lld rows of %s%s%s\n", (long long)jd_geti(doc, "rows"), jd_gets(doc, "csv"),
            *device ? " on " : "", device);
  sb_printf(sb, "MAPE before        %.1f%%\nMAPE after         %.1f%% (in sample, full validate with the fitted constants)\n",
            100 * jd_getn(doc, "mape_before"), 100 * jd_getn(doc, "mape_after"));
  double loo = jd_getn(doc, "leave_one_source_out_mape"), mem_before = jd_getn(doc, "memory_mape_before");
  if (isfinite(loo))
    sb_printf(sb, "leave-one-source-out MAPE %.1f%% (each source predicted by constants fitted on the others)\n", 100 * loo);
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
  cost_calib *start = malloc(sizeof *start), *cal = malloc(sizeof *cal), *loo = malloc(sizeof *loo);
  cost_result *scratch = malloc(2 * sizeof *scratch); /* [1]: validate_fit_disagrees' completion */
  validate_report *rep = NULL;
  cal_row *rows = NULL;
  const char *fold_names[MAX_FOLDS] = {0};
  int n_folds = 0;
  strbuf sb = {0}, fitj = {0};
  ap_status st = (!start || !cal || !loo || !scratch) ? ctx_fail(ctx, AP_NOMEM, "out of memory") : AP_OK;
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
    n_rows = collect_rows(rep, cal, device, rows, fold_names, &n_folds);
    if (n_rows == 0) {
      st = ctx_fail(ctx, AP_INVALID, "%s: no modelled row with a measured throughput%s%s", csv_path,
                    device ? " on device " : "", device ? device : "");
      break;
    }
    fit_state f = {cal, rows, n_rows, scratch, -1, sweeps, steps, false};
    fit_state fm = f;
    fm.memory = true;
    if (round == 0) {
      before = mape_of(&f, -1, NULL);
      mem_before = mape_of(&fm, -1, NULL);
    }
    /* Memory constants first (they decide which plans fit), then the throughput constants. */
    if (round == 0) n_steps = 9 + n_folds;
    if (ctx_progress(ctx, (double)++step / n_steps, "validating")) st = ctx_fail(ctx, AP_CANCELLED, "cancelled");
    if (st) break;
    fit(&fm);
    mem_after = mape_of(&fm, -1, NULL);
    if (ctx_progress(ctx, (double)++step / n_steps, "fitting memory")) st = ctx_fail(ctx, AP_CANCELLED, "cancelled");
    if (st) break;
    fit(&f);
    after_fixed = mape_of(&f, -1, NULL);
    if (ctx_progress(ctx, (double)++step / n_steps, "fitting throughput")) st = ctx_fail(ctx, AP_CANCELLED, "cancelled");
  }
  /* Leave-one-source-out on the last round's plans. */
  double loo_sum = 0;
  int loo_n = 0;
  if (!st) {
    sb_printf(&fitj, "{\"rows\": %d, \"mape_before\": ", n_rows);
    jx_sb_num(&fitj, before);
    sb_puts(&fitj, ", \"mape_after\": ");
    jx_sb_num(&fitj, after_fixed);
    sb_puts(&fitj, ", \"leave_one_source_out\": [");
    int n_listed = 0;
    for (int fo = 0; fo < n_folds; fo++) {
      /* Start from the constants in force before the fit, in the device order the rows index. */
      *loo = *cal;
      loo->comm = start->comm;
      loo->overlap = start->overlap;
      loo->memory = start->memory;
      for (int d = 0; d < loo->n_chips; d++) loo->chips[d].compute = calib_tuning_for_chip(start, &loo->chips[d], NULL).compute;
      fit_state f = {loo, rows, n_rows, scratch, fo, sweeps, steps, false};
      int n = 0;
      (void)mape_of(&f, fo, &n);
      if (ctx_progress(ctx, (double)++step / n_steps, "leave-one-source-out")) {
        st = ctx_fail(ctx, AP_CANCELLED, "cancelled");
        break;
      }
      if (n == 0) continue; /* a source with no measured throughput has nothing to predict */
      fit(&f);
      borrow_for_unfitted(&f);
      double m = mape_of(&f, fo, &n);
      loo_sum += m * n;
      loo_n += n;
      sb_printf(&fitj, "%s{\"source\": ", n_listed++ ? ", " : "");
      jx_sb_str(&fitj, fold_names[fo]);
      sb_printf(&fitj, ", \"rows\": %d, \"mape\": ", n);
      jx_sb_num(&fitj, m);
      sb_puts(&fitj, "}");
    }
    sb_puts(&fitj, "], \"leave_one_source_out_mape\": ");
    jx_sb_num(&fitj, loo_n ? loo_sum / loo_n : NAN);
  }
  if (!st) {
    sb_puts(&fitj, ", \"memory_mape_before\": ");
    jx_sb_num(&fitj, mem_before);
    sb_puts(&fitj, ", \"memory_mape_after\": ");
    jx_sb_num(&fitj, mem_after);
    sb_puts(&fitj, "}");
  }
  if (!st) warn_at_edges(ctx, cal);
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
    double loo_mape = loo_n ? loo_sum / loo_n : NAN;
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
  free(loo);
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
