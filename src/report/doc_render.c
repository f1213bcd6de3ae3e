/* ap_render (report layer): an answer document (estimate, search or validate, docs/json.md) rendered again as
 * JSON or text, with, given a token budget, the time and cost to train on it added from the document's own
 * predicted throughput (train_cost.c, the same arithmetic as compare-clusters). The CLI asks the library for
 * the document once and renders from it, so that --json, the text, --tokens and --report (html_api.c) all
 * come from the same figures.
 *
 * Error band: the prediction's band (its "calibration.band", cost/result_fmt.c: the spread of the
 * cross-validated residuals of the runs most like the plan) carries over to the time, the device-hours and the cost: a
 * residual e = predicted / measured tokens/s - 1 makes the measured time predicted · (1 + e). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonx.h"
#include "cost/result_doc.h"
#include "report/compare_search.h"
#include "report/plan_doc.h"
#include "report/train_cost.h"
#include "report/validate.h"

/* The residual band [lo, hi] of the document's throughput prediction (the estimate's, or the winner's). */
static bool train_band_of(const json_t *doc, const char *fmt, double *lo, double *hi) {
  const json_t *src = strcmp(fmt, "autopar-estimate/1") == 0 ? doc : json_array_get(jd_at(doc, "plans"), 0);
  const json_t *b = src ? jd_at(src, "calibration.band") : NULL;
  *lo = *hi = NAN;
  if (!b || !json_is_object(b)) return false;
  *lo = jd_getn(b, "error_low");
  *hi = jd_getn(b, "error_high");
  return isfinite(*lo) && isfinite(*hi) && *lo > -1 && *hi >= *lo;
}

/* The document's predicted throughput of the whole job: the estimate's, or the search winner's (none when
 * nothing fits). */
static bool doc_tokens_per_s(const json_t *doc, const char *fmt, double *tps) {
  const json_t *src = strcmp(fmt, "autopar-estimate/1") == 0 ? doc : json_array_get(jd_at(doc, "plans"), 0);
  if (!src || (strcmp(fmt, "autopar-search/2") == 0 && !jd_getb(doc, "feasible"))) return false;
  *tps = jd_getn(src, "tokens_per_s");
  return isfinite(*tps) && *tps > 0;
}

static void train_text(strbuf *sb, const train_cost *tc, double n_devices, double lo, double hi) {
  char dur[64];
  train_format_duration(tc->time_s, dur, sizeof dur);
  strbuf t = {0};
  sb_printf(&t, "time to train on %.4g tokens: %s (%.4g s) on %.0f devices, %.4g device-hours", tc->tokens, dur, tc->time_s,
            n_devices, tc->gpu_hours);
  if (isfinite(tc->cost)) sb_printf(&t, ", cost %.2f at %.4g per device-hour", tc->cost, tc->price_per_gpu_hour);
  sb_wrap(sb, "\n", "        ", t.buf ? t.buf : "", AP_TEXT_WIDTH);
  sb_free(&t);
  if (sb->buf && sb->len > 0 && sb->buf[sb->len - 1] == '\n') sb->buf[--sb->len] = '\0'; /* the lines below open with one */
  if (!isfinite(lo)) {
    sb_puts(sb, "\n  (from the predicted throughput, without an error band: see the prediction's band line)\n");
    return;
  }
  char dlo[64], dhi[64];
  train_format_duration(tc->time_s * (1 + lo), dlo, sizeof dlo);
  train_format_duration(tc->time_s * (1 + hi), dhi, sizeof dhi);
  sb_printf(sb, "\n  band: %s to %s, %.4g to %.4g device-hours", dlo, dhi, tc->gpu_hours * (1 + lo), tc->gpu_hours * (1 + hi));
  if (isfinite(tc->cost)) sb_printf(sb, ", cost %.2f to %.2f", tc->cost * (1 + lo), tc->cost * (1 + hi));
  sb_puts(sb, "\n  (from the predicted throughput and its error band, the prediction's \"band\" line)\n");
}

ap_status ap_render(ap_ctx *ctx, const char *doc_json, const char *tokens, const char *price_per_gpu_hour,
                    int format, char **out) {
  API_ENTER(ctx);
  if (!ctx) return AP_INVALID;
  if (!out) return ctx_fail(ctx, AP_INVALID, "ap_render: out must not be NULL");
  *out = NULL;
  if (!doc_json) return ctx_fail(ctx, AP_INVALID, "ap_render: doc_json must not be NULL");
  if (format != AP_OUT_TEXT && format != AP_OUT_JSON)
    return ctx_fail(ctx, AP_INVALID, "ap_render: format must be AP_OUT_TEXT or AP_OUT_JSON, got %d", format);
  double n_tokens = 0, price = 0;
  if (tokens && !train_parse_amount(tokens, &n_tokens))
    return ctx_fail(ctx, AP_INVALID, "--tokens: expected a positive amount such as 1T, 300B or 2.5e11, got \"%s\"",
                    tokens);
  if (price_per_gpu_hour) {
    char *end = NULL;
    price = strtod(price_per_gpu_hour, &end);
    if (end == price_per_gpu_hour || *end || !isfinite(price) || !(price > 0))
      return ctx_fail(ctx, AP_INVALID, "--price-per-gpu-hour: expected a positive number, got \"%s\"",
                      price_per_gpu_hour);
    if (!tokens) return ctx_fail(ctx, AP_INVALID, "--price-per-gpu-hour needs --tokens N");
  }
  json_error_t err;
  json_t *root = json_loads(doc_json, 0, &err);
  if (!root || !json_is_object(root)) {
    json_decref(root);
    return ctx_fail(ctx, AP_PARSE, "ap_render: the document is not a JSON object: %d:%d: %s", err.line, err.column,
                    err.text);
  }
  const char *fmt = jd_gets(root, "format");
  bool est = strcmp(fmt, "autopar-estimate/1") == 0, search = strcmp(fmt, "autopar-search/2") == 0;
  bool val = strcmp(fmt, "autopar-validate/1") == 0, cmp = strcmp(fmt, "autopar-compare-search/1") == 0;
  ap_status st = AP_OK;
  if (!est && !search && !val && !cmp)
    st = ctx_fail(ctx, AP_INVALID, "ap_render: expected an autopar-estimate/1, autopar-search/2, autopar-validate/1 or "
                                   "autopar-compare-search/1 document, got format \"%s\"", fmt);
  else if (tokens && (val || cmp))
    st = ctx_fail(ctx, AP_INVALID, "--tokens applies to plan and estimate documents, not %s", fmt);
  jd d = {root, false};
  train_cost tc = {0};
  double n_dev = jd_getn(root, "n_devices"), tps = 0, band_lo = NAN, band_hi = NAN;
  bool has_train = !st && tokens && doc_tokens_per_s(root, fmt, &tps);
  if (has_train) {
    train_cost_compute(n_tokens, tps, n_dev, price, &tc);
    train_cost_put(&d, root, "train", &tc);
    cost_years_warning(&d, root, n_tokens, tc.time_s); /* a budget that takes years: said, in text and JSON */
    if (train_band_of(root, fmt, &band_lo, &band_hi)) {
      json_t *t = jd_at(root, "train");
      jd_num(&d, t, "time_s_low", tc.time_s * (1 + band_lo));
      jd_num(&d, t, "time_s_high", tc.time_s * (1 + band_hi));
      jd_num(&d, t, "gpu_hours_low", tc.gpu_hours * (1 + band_lo));
      jd_num(&d, t, "gpu_hours_high", tc.gpu_hours * (1 + band_hi));
      jd_num(&d, t, "cost_low", tc.cost * (1 + band_lo));
      jd_num(&d, t, "cost_high", tc.cost * (1 + band_hi));
    }
  }
  if (!st) {
    if (format == AP_OUT_JSON) {
      *out = d.failed ? NULL : jd_dump(&d);
    } else {
      char *text = d.failed ? NULL
                   : est      ? cost_estimate_text(root)
                   : search   ? plan_doc_text(root)
                   : cmp      ? compare_search_text(root)
                              : validate_doc_text(root);
      strbuf sb = {0};
      if (text) sb_puts(&sb, text);
      free(text);
      if (has_train) train_text(&sb, &tc, n_dev, band_lo, band_hi);
      else if (text && tokens) sb_puts(&sb, "\ntime to train: none (no plan fits)\n");
      *out = text ? sb_take(&sb) : NULL;
      if (!text) sb_free(&sb);
    }
    if (!*out) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  json_decref(root);
  return st;
}
