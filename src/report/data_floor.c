/* The error floor of a runs table (report layer); see data_floor.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/data_floor.h"

typedef struct {
  const floor_row *r;
  int64_t index; /* table order, to keep groups and their members in it */
} keyed;

static int cmp_keyed(const void *pa, const void *pb) {
  const keyed *a = pa, *b = pb;
  int c = strcmp(a->r->key, b->r->key);
  if (c) return c;
  return (a->index > b->index) - (a->index < b->index);
}

/* The least sum of |p/m - 1| over one group, for p among the measured values (where the minimum lies). */
static double least_ape_sum(const keyed *g, int64_t n) {
  double best = INFINITY;
  for (int64_t i = 0; i < n; i++) {
    double p = g[i].r->measured, sum = 0;
    for (int64_t j = 0; j < n; j++) sum += fabs(p / g[j].r->measured - 1.0);
    if (sum < best) best = sum;
  }
  return best;
}

/* The most rows of one group that one prediction keeps within the bar: the prediction is tried at every left
 * end m(1 - bar) of the rows' intervals. */
static int64_t most_within(const keyed *g, int64_t n, double bar) {
  int64_t best = 0;
  for (int64_t i = 0; i < n; i++) {
    double p = g[i].r->measured * (1.0 - bar);
    int64_t k = 0;
    for (int64_t j = 0; j < n; j++) {
      double m = g[j].r->measured;
      /* A relative slack of 1e-12 keeps a row whose interval ends exactly at p. */
      if (p >= m * (1.0 - bar) * (1 - 1e-12) && p <= m * (1.0 + bar) * (1 + 1e-12)) k++;
    }
    if (k > best) best = k;
  }
  return best;
}

ap_status data_floor_compute(ap_ctx *ctx, arena *a, const floor_row *rows, int64_t n, double bar, data_floor *out) {
  memset(out, 0, sizeof *out);
  out->bar = bar;
  out->n_rows = n;
  if (n <= 0) return AP_OK;
  keyed *k = malloc(sizeof *k * (size_t)n);
  if (!k) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  for (int64_t i = 0; i < n; i++) k[i] = (keyed){&rows[i], i};
  qsort(k, (size_t)n, sizeof *k, cmp_keyed);
  double sum = 0;
  /* Two passes over the runs of equal keys: count the listed groups, then fill them. */
  for (int pass = 0; pass < 2; pass++) {
    int64_t listed = 0;
    for (int64_t i = 0, j; i < n; i = j) {
      for (j = i + 1; j < n && strcmp(k[j].r->key, k[i].r->key) == 0; j++) {
      }
      int64_t size = j - i;
      if (size < 2) continue;
      int64_t over = size - most_within(k + i, size, bar);
      if (pass == 0) {
        out->n_groups++;
        out->n_rows_grouped += size;
        sum += least_ape_sum(k + i, size);
        out->min_rows_over += over;
      }
      if (over == 0) continue;
      if (pass == 1) {
        floor_group *fg = &out->listed[listed];
        fg->n = size;
        fg->n_over = over;
        fg->ids = arena_alloc(a, sizeof *fg->ids * (size_t)size);
        fg->measured = arena_alloc(a, sizeof *fg->measured * (size_t)size);
        if (!fg->ids || !fg->measured) {
          free(k);
          return ctx_fail(ctx, AP_NOMEM, "out of memory");
        }
        for (int64_t q = 0; q < size; q++) {
          fg->ids[q] = k[i + q].r->id;
          fg->measured[q] = k[i + q].r->measured;
        }
      }
      listed++;
    }
    if (pass == 0) {
      out->n_listed = listed;
      out->listed = listed ? arena_alloc(a, sizeof *out->listed * (size_t)listed) : NULL;
      if (listed && !out->listed) {
        free(k);
        return ctx_fail(ctx, AP_NOMEM, "out of memory");
      }
    }
  }
  out->mape_floor = sum / (double)n;
  free(k);
  return AP_OK;
}
