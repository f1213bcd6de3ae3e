/* The neighbour rule of error bands (cost layer; calib.h): one body for validate's rows (report/validate_band.c)
 * and for every prediction of estimate and plan (cost_env_point_band).
 *
 * A band is built for one target from a pool of cross-validated residuals r = ln(predicted / measured): the
 * CALIB_BAND_K pool points nearest to the target under a distance that counts what makes errors differ (a chip
 * no fit had a row of, another stack, dense against MoE, offload, another device family, a decade of scale),
 * their 10th and 90th percentiles widened by the few-rows and the unlikeness factors below. Memory has its own
 * pool (the points that report a peak) and takes MEM_BAND_K. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/calib.h"

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

static double distance(const calib_point *t, const calib_point *p) {
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

double calib_quantile(const double *x, int n, double q) {
  double pos = q * (n - 1);
  int i = (int)floor(pos);
  if (i >= n - 1) return x[n - 1];
  return x[i] + (pos - i) * (x[i + 1] - x[i]);
}

int calib_points_band(const calib_point *t, const calib_point *pool, int n, const bool *use, bool memory,
                      calib_near_band *out) {
  memset(out, 0, sizeof *out);
  near_pt *nb = malloc(sizeof *nb * (size_t)(n + 1));
  if (!nb) return -1;
  int m = 0;
  for (int i = 0; i < n; i++) {
    double r = memory ? pool[i].mem_err : pool[i].err;
    if ((use && !use[i]) || !isfinite(r)) continue;
    nb[m++] = (near_pt){distance(t, &pool[i]), r, i};
  }
  if (m == 0) {
    free(nb);
    return 0;
  }
  qsort(nb, (size_t)m, sizeof *nb, cmp_near);
  int kmax = memory ? MEM_BAND_K : BAND_K, k = m < kmax ? m : kmax;
  double rs[BAND_K], mean_d = 0;
  int same_stack = 0, same_family = 0, same_moe = 0, same_unseen = 0, same_offload = 0;
  double g_lo = INFINITY, g_hi = 0;
  for (int j = 0; j < k; j++) {
    const calib_point *p = &pool[nb[j].i];
    rs[j] = nb[j].r;
    mean_d += nb[j].d / k;
    same_stack += strcmp(p->stack, t->stack) == 0;
    same_family += strcmp(p->family, t->family) == 0;
    same_moe += p->moe == t->moe;
    same_unseen += p->chip_unseen == t->chip_unseen;
    same_offload += p->offload == t->offload;
    if (p->num_gpus < g_lo) g_lo = p->num_gpus;
    if (p->num_gpus > g_hi) g_hi = p->num_gpus;
  }
  free(nb);
  qsort(rs, (size_t)k, sizeof *rs, cmp_double);
  double lo = calib_quantile(rs, k, (1 - CALIB_BAND_LEVEL) / 2), hi = calib_quantile(rs, k, (1 + CALIB_BAND_LEVEL) / 2);
  double mid = calib_quantile(rs, k, 0.5), widen = 1 + WIDEN_FEW / k + WIDEN_FAR * mean_d;
  double h_lo = fmax((mid - lo) * widen, MIN_HALF), h_hi = fmax((hi - mid) * widen, MIN_HALF);
  out->r_lo = mid - h_lo;
  out->r_hi = mid + h_hi;
  out->k = k;
  out->mean_distance = mean_d;
  out->widen = widen;
  /* The offload count only where the target offloads, so that validate's rows keep their line. */
  char off[48] = "";
  if (t->offload) snprintf(off, sizeof off, ", %d with offload", same_offload);
  snprintf(out->from, sizeof out->from,
           "%d cross-validated %s nearest: %d on %s, %d on %s, %d %s%s, %d with the chip %s, %.0f-%.0f GPUs (mean distance %.2f)",
           k, memory ? "memory residuals" : "residuals", same_stack, t->stack, same_family, t->family, same_moe,
           t->moe ? "MoE" : "dense", off, same_unseen, t->chip_unseen ? "unseen" : "fitted", g_lo, g_hi, mean_d);
  return 1;
}
