/* Error bands of a calibration (report layer; calibrate.h): from the residuals of a validate run under the
 * fitted constants, for each device family and stack of the runs table the spread of predicted / measured
 * tokens/s - 1, kept in the calibration file so that every prediction on that family and stack can say how
 * far measured runs fell from such predictions (cost/result_fmt.c). A group needs CALIB_BAND_MIN_ROWS rows;
 * the family alone, the stack alone and all rows ("any") are groups too, for the predictions whose own group
 * is too small or absent (calib_band_for). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/calib.h"
#include "plan/stack.h"
#include "report/calibrate.h"
#include "report/validate.h"

/* TUNING: percentiles of fewer than 5 residuals say little (the 10th and 90th of 4 are nearly the extremes);
 * such a group takes its family's, its stack's or every row's band instead. */
enum { CALIB_BAND_MIN_ROWS = 5 };
/* The band holds the middle 80% of the residuals. */
static const double BAND_LOW_Q = 0.10, BAND_HIGH_Q = 0.90;

typedef struct {
  char family[HW_NAME_MAX], stack[HW_NAME_MAX];
  double e;
} residual;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}


/* Adds the band of the residuals matching (family, stack), "any" matching all, when there are enough. */
static void add_band(cost_calib *cal, const residual *r, int n, const char *family, const char *stack, double *buf) {
  if (cal->n_bands >= CALIB_MAX_BANDS) return;
  for (int i = 0; i < cal->n_bands; i++)
    if (strcmp(cal->bands[i].family, family) == 0 && strcmp(cal->bands[i].stack, stack) == 0) return;
  int m = 0;
  double abs_sum = 0;
  for (int i = 0; i < n; i++) {
    if ((strcmp(family, "any") != 0 && strcmp(r[i].family, family) != 0) ||
        (strcmp(stack, "any") != 0 && strcmp(r[i].stack, stack) != 0))
      continue;
    buf[m++] = r[i].e;
    abs_sum += fabs(r[i].e);
  }
  if (m < CALIB_BAND_MIN_ROWS) return;
  qsort(buf, (size_t)m, sizeof *buf, cmp_double);
  calib_band *b = &cal->bands[cal->n_bands++];
  snprintf(b->family, sizeof b->family, "%s", family);
  snprintf(b->stack, sizeof b->stack, "%s", stack);
  b->rows = m;
  b->error_low = calib_quantile(buf, m, BAND_LOW_Q);
  b->error_high = calib_quantile(buf, m, BAND_HIGH_Q);
  b->mape = abs_sum / m;
}

ap_status calibrate_bands(ap_ctx *ctx, const validate_report *rep, cost_calib *cal) {
  cal->n_bands = 0;
  int64_t n_rows = validate_report_n_rows(rep);
  residual *r = malloc(sizeof *r * (size_t)(n_rows + 1));
  double *buf = malloc(sizeof *buf * (size_t)(n_rows + 1));
  if (!r || !buf) {
    free(r);
    free(buf);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  int n = 0;
  for (int64_t i = 0; i < n_rows; i++) {
    const validate_row *v = validate_report_row(rep, i);
    if (v->error || !v->has_measured || v->measured_oom || !(v->measured_tokens > 0) || !(v->predicted_tokens > 0))
      continue;
    residual *o = &r[n++];
    ap_ctx scratch = {0};
    hw_device d;
    snprintf(o->family, sizeof o->family, "%s",
             hw_device_find(&scratch, v->gpu, &d) == AP_OK && d.family[0] ? d.family : "unknown");
    /* A row without a stack runs the default of a transformer (every runs-table row is one). */
    const plan_stack_info *s =
        plan_stack_get(v->plan.stack == PLAN_STACK_DEFAULT ? plan_stack_default(true) : v->plan.stack);
    snprintf(o->stack, sizeof o->stack, "%s", s ? s->name : "any");
    o->e = v->predicted_tokens / v->measured_tokens - 1;
  }
  /* The most specific groups first (calib_band_for tries them in that order anyway). */
  for (int i = 0; i < n; i++) add_band(cal, r, n, r[i].family, r[i].stack, buf);
  for (int i = 0; i < n; i++) add_band(cal, r, n, r[i].family, "any", buf);
  for (int i = 0; i < n; i++) add_band(cal, r, n, "any", r[i].stack, buf);
  add_band(cal, r, n, "any", "any", buf);
  free(r);
  free(buf);
  return AP_OK;
}
