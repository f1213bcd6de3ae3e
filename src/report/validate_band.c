/* Error bands from cross-validated residuals (report layer; validate_band.h).
 *
 * A band is built for one target (a row to predict) from a pool of cross-validated residuals
 * r = ln(predicted / measured) by the neighbour rule of cost/calib_band.c (calib_points_band, the same body
 * that estimate and plan use), turned into where the measurement falls: measured = predicted / e^r, so the band
 * is [predicted / e^r90, predicted / e^r10]. Memory has its own pool (the rows that report a peak) and band. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/stack.h"
#include "report/validate_band.h"

void band_point_of(const validate_row *v, band_point *p) {
  memset(p, 0, sizeof *p);
  ap_ctx scratch = {0};
  hw_device d;
  snprintf(p->family, sizeof p->family, "%s", hw_device_find(&scratch, v->gpu, &d) == AP_OK && d.family[0] ? d.family : "unknown");
  snprintf(p->stack, sizeof p->stack, "%s",
           plan_stack_name(v->plan.stack == PLAN_STACK_DEFAULT ? plan_stack_default(true) : v->plan.stack));
  p->moe = v->moe;
  p->offload = v->plan.offload_optimizer != PLAN_OFFLOAD_NONE || v->plan.offload_param != PLAN_OFFLOAD_NONE;
  p->chip_unseen = v->chip_unseen;
  p->num_gpus = v->num_gpus > 0 ? (double)v->num_gpus : 1;
  p->err = p->mem_err = NAN;
  if (v->error) return;
  if (v->has_measured && !v->measured_oom && v->measured_tokens > 0 && v->predicted_tokens > 0)
    p->err = log(v->predicted_tokens / v->measured_tokens);
  if (v->has_mem && v->measured_mem_bytes > 0 && v->compared_mem_bytes > 0) p->mem_err = log(v->compared_mem_bytes / v->measured_mem_bytes);
}

/* Row v's bands from the pool (use: which points; NULL all). */
static ap_status fill_row(ap_ctx *ctx, validate_report *rep, validate_row *v, const band_point *pool, int n,
                          const bool *use) {
  if (v->error) return AP_OK;
  band_point t;
  band_point_of(v, &t);
  calib_near_band b[2];
  int got[2] = {0, 0};
  v->has_band = v->has_mem_band = false;
  if (v->predicted_tokens > 0 && (got[0] = calib_points_band(&t, pool, n, use, false, &b[0])) > 0) {
    v->has_band = true;
    v->band_low = v->predicted_tokens / exp(b[0].r_hi);
    v->band_high = v->predicted_tokens / exp(b[0].r_lo);
  }
  double mem = v->has_mem ? v->compared_mem_bytes : v->predicted_peak_mem_bytes;
  if (mem > 0 && (got[1] = calib_points_band(&t, pool, n, use, true, &b[1])) > 0) {
    v->has_mem_band = true;
    v->mem_band_low_bytes = mem / exp(b[1].r_hi);
    v->mem_band_high_bytes = mem / exp(b[1].r_lo);
    /* The fit test on the band's upper edge, as a ratio to the prediction, applied to the peak rank's total. */
    v->peak_band_high_bytes = v->predicted_peak_mem_bytes / exp(b[1].r_lo);
    v->fits_band_high = v->fits && v->peak_band_high_bytes <= v->capacity_bytes;
  } else {
    v->fits_band_high = v->fits;
  }
  if (got[0] < 0 || got[1] < 0) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  char text[800];
  snprintf(text, sizeof text, "%s%s%s%s%s", v->has_band ? "throughput: " : "", v->has_band ? b[0].from : "",
           v->has_band && v->has_mem_band ? "; " : "", v->has_mem_band ? "memory: " : "", v->has_mem_band ? b[1].from : "");
  if ((v->has_band || v->has_mem_band) && !(v->band_from = validate_report_strdup(rep, text)))
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  return AP_OK;
}

ap_status band_fill_cv(ap_ctx *ctx, validate_report *rep, const int *fold_of_row) {
  int64_t n = validate_report_n_rows(rep);
  band_point *pool = malloc(sizeof *pool * (size_t)(n + 1));
  bool *use = malloc(sizeof *use * (size_t)(n + 1));
  ap_status st = (!pool || !use) ? ctx_fail(ctx, AP_NOMEM, "out of memory") : AP_OK;
  for (int64_t i = 0; !st && i < n; i++) band_point_of(validate_report_row(rep, i), &pool[i]);
  for (int64_t i = 0; !st && i < n; i++) {
    for (int64_t j = 0; j < n; j++) use[j] = fold_of_row[j] != fold_of_row[i];
    st = fill_row(ctx, rep, validate_report_row_mut(rep, i), pool, (int)n, use);
  }
  free(pool);
  free(use);
  return st;
}

ap_status band_fill_pool(ap_ctx *ctx, validate_report *rep, const band_point *pool, int n) {
  ap_status st = AP_OK;
  for (int64_t i = 0; !st && i < validate_report_n_rows(rep); i++)
    st = fill_row(ctx, rep, validate_report_row_mut(rep, i), pool, n, NULL);
  return st;
}
