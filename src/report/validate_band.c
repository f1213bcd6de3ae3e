/* Error bands from cross-validated residuals (report layer; validate_band.h).
 *
 * A band is built for one target (a row to predict) from a pool of cross-validated residuals
 * r = ln(predicted / measured): the BAND_K pool points nearest to the target under a distance that counts what
 * makes errors differ (a chip no fit had a row of, another stack, dense against MoE, offload, another device
 * family, a decade of scale), their 10th and 90th percentiles widened by the few-rows and the unlikeness
 * factors below, turned into where the measurement falls: measured = predicted / e^r, so the band is
 * [predicted / e^r90, predicted / e^r10]. Memory has its own pool (the rows that report a peak) and band. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/stack.h"
#include "report/validate_band.h"

/* TUNING: the distance of each difference, in units of a decade of devices. A chip that no fit measured is the
 * largest (leave-one-chip-out's errors are twice leave-one-source-out's on runs.csv); a stack or dense/MoE or
 * offload changes the mechanisms that dominate; a family changes the kernels. */
static const double D_CHIP_UNSEEN = 3.0, D_STACK = 1.5, D_MOE = 1.5, D_OFFLOAD = 1.5, D_FAMILY = 1.0;
/* TUNING: 20 residuals put the 10th and 90th percentiles two order statistics from the ends; memory, with 46
 * rows in runs.csv, takes 10. */
enum { BAND_K = 20, MEM_BAND_K = 10 };
/* TUNING: the half-widths grow by WIDEN_FEW / n (few rows: the percentiles of n points undershoot the spread)
 * and by WIDEN_FAR per unit of mean distance (rows unlike the target); and never fall below MIN_HALF (the data
 * floor: identical inputs measured a few percent apart). */
static const double WIDEN_FEW = 3.0, WIDEN_FAR = 0.5, MIN_HALF = 0.02;

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

static double distance(const band_point *t, const band_point *p) {
  return (t->chip_unseen != p->chip_unseen) * D_CHIP_UNSEEN + (strcmp(t->stack, p->stack) != 0) * D_STACK +
         (t->moe != p->moe) * D_MOE + (t->offload != p->offload) * D_OFFLOAD + (strcmp(t->family, p->family) != 0) * D_FAMILY +
         fabs(log10(t->num_gpus / p->num_gpus));
}

typedef struct {
  double d, r;
  int i;
} near_pt;

static int cmp_near(const void *a, const void *b) {
  const near_pt *x = a, *y = b;
  if (x->d != y->d) return x->d < y->d ? -1 : 1;
  return x->i - y->i;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double quantile(const double *x, int n, double q) {
  double pos = q * (n - 1);
  int i = (int)floor(pos);
  if (i >= n - 1) return x[n - 1];
  return x[i] + (pos - i) * (x[i + 1] - x[i]);
}

/* The band of residuals near target t among pool points with use[i] (memory: mem_err, else err): its low and
 * high residual, and a line on what it was built from into from. false when the pool has none. */
static bool build(const band_point *t, const band_point *pool, int n, const bool *use, bool memory, near_pt *nb,
                  double *r_lo, double *r_hi, char *from, size_t from_n) {
  int m = 0;
  for (int i = 0; i < n; i++) {
    double r = memory ? pool[i].mem_err : pool[i].err;
    if ((use && !use[i]) || !isfinite(r)) continue;
    nb[m++] = (near_pt){distance(t, &pool[i]), r, i};
  }
  if (m == 0) return false;
  qsort(nb, (size_t)m, sizeof *nb, cmp_near);
  int k = m < (memory ? MEM_BAND_K : BAND_K) ? m : (memory ? MEM_BAND_K : BAND_K);
  double rs[BAND_K], mean_d = 0;
  int same_stack = 0, same_family = 0, same_moe = 0, same_unseen = 0;
  double g_lo = INFINITY, g_hi = 0;
  for (int j = 0; j < k; j++) {
    const band_point *p = &pool[nb[j].i];
    rs[j] = nb[j].r;
    mean_d += nb[j].d / k;
    same_stack += strcmp(p->stack, t->stack) == 0;
    same_family += strcmp(p->family, t->family) == 0;
    same_moe += p->moe == t->moe;
    same_unseen += p->chip_unseen == t->chip_unseen;
    if (p->num_gpus < g_lo) g_lo = p->num_gpus;
    if (p->num_gpus > g_hi) g_hi = p->num_gpus;
  }
  qsort(rs, (size_t)k, sizeof *rs, cmp_double);
  double lo = quantile(rs, k, (1 - VALIDATE_BAND_LEVEL) / 2), hi = quantile(rs, k, (1 + VALIDATE_BAND_LEVEL) / 2);
  double mid = quantile(rs, k, 0.5), widen = 1 + WIDEN_FEW / k + WIDEN_FAR * mean_d;
  double h_lo = fmax((mid - lo) * widen, MIN_HALF), h_hi = fmax((hi - mid) * widen, MIN_HALF);
  *r_lo = mid - h_lo;
  *r_hi = mid + h_hi;
  snprintf(from, from_n,
           "%d cross-validated %s nearest: %d on %s, %d on %s, %d %s, %d with the chip %s, %.0f-%.0f GPUs (mean distance %.2f)",
           k, memory ? "memory residuals" : "residuals", same_stack, t->stack, same_family, t->family, same_moe,
           t->moe ? "MoE" : "dense", same_unseen, t->chip_unseen ? "unseen" : "fitted", g_lo, g_hi, mean_d);
  return true;
}

/* Row v's bands from the pool (use: which points; NULL all). */
static ap_status fill_row(ap_ctx *ctx, validate_report *rep, validate_row *v, const band_point *pool, int n,
                          const bool *use, near_pt *nb) {
  if (v->error) return AP_OK;
  band_point t;
  band_point_of(v, &t);
  char from[2][320] = {"", ""};
  double lo, hi;
  v->has_band = v->has_mem_band = false;
  if (v->predicted_tokens > 0 && build(&t, pool, n, use, false, nb, &lo, &hi, from[0], sizeof from[0])) {
    v->has_band = true;
    v->band_low = v->predicted_tokens / exp(hi);
    v->band_high = v->predicted_tokens / exp(lo);
  }
  double mem = v->has_mem ? v->compared_mem_bytes : v->predicted_peak_mem_bytes;
  if (mem > 0 && build(&t, pool, n, use, true, nb, &lo, &hi, from[1], sizeof from[1])) {
    v->has_mem_band = true;
    v->mem_band_low_bytes = mem / exp(hi);
    v->mem_band_high_bytes = mem / exp(lo);
    /* The fit test on the band's upper edge, as a ratio to the prediction, applied to the peak rank's total. */
    v->peak_band_high_bytes = v->predicted_peak_mem_bytes / exp(lo);
    v->fits_band_high = v->fits && v->peak_band_high_bytes <= v->capacity_bytes;
  } else {
    v->fits_band_high = v->fits;
  }
  char text[700];
  snprintf(text, sizeof text, "%s%s%s%s%s", v->has_band ? "throughput: " : "", from[0],
           v->has_band && v->has_mem_band ? "; " : "", v->has_mem_band ? "memory: " : "", from[1]);
  if ((v->has_band || v->has_mem_band) && !(v->band_from = validate_report_strdup(rep, text)))
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  return AP_OK;
}

ap_status band_fill_cv(ap_ctx *ctx, validate_report *rep, const int *fold_of_row) {
  int64_t n = validate_report_n_rows(rep);
  band_point *pool = malloc(sizeof *pool * (size_t)(n + 1));
  bool *use = malloc(sizeof *use * (size_t)(n + 1));
  near_pt *nb = malloc(sizeof *nb * (size_t)(n + 1));
  ap_status st = (!pool || !use || !nb) ? ctx_fail(ctx, AP_NOMEM, "out of memory") : AP_OK;
  for (int64_t i = 0; !st && i < n; i++) band_point_of(validate_report_row(rep, i), &pool[i]);
  for (int64_t i = 0; !st && i < n; i++) {
    for (int64_t j = 0; j < n; j++) use[j] = fold_of_row[j] != fold_of_row[i];
    st = fill_row(ctx, rep, validate_report_row_mut(rep, i), pool, (int)n, use, nb);
  }
  free(pool);
  free(use);
  free(nb);
  return st;
}

ap_status band_fill_pool(ap_ctx *ctx, validate_report *rep, const band_point *pool, int n) {
  near_pt *nb = malloc(sizeof *nb * (size_t)(n + 1));
  if (!nb) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  ap_status st = AP_OK;
  for (int64_t i = 0; !st && i < validate_report_n_rows(rep); i++)
    st = fill_row(ctx, rep, validate_report_row_mut(rep, i), pool, n, NULL, nb);
  free(nb);
  return st;
}
