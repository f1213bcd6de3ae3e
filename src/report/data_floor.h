/* The error floor of a runs table (report layer): what no cost model can beat on it.
 *
 * Rows whose inputs are identical (the same architecture, devices, batch and stated plan; only the source,
 * the release and the measurement differ) must get the same prediction from any model that reads those
 * inputs. When their measured throughputs differ, some error is unavoidable. For each such group, the least
 * sum of absolute percentage errors that one prediction p can reach is attained at one of the measured values
 * (the sum is convex and piecewise linear in p, with its kinks there), and the most rows one p can keep within
 * an APE bar b is the most intervals m(1 - b) <= p <= m(1 + b) that share a point, which is found among their
 * left ends. Summed over the
 * groups this gives the least MAPE and the least number of rows above the bar that any prediction from the
 * row's fields can reach on the table: the part of the error that is in the data.
 * Internal header: not installed, not part of the public API. */
#ifndef AP_REPORT_DATA_FLOOR_H
#define AP_REPORT_DATA_FLOOR_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"

/* One measured row: its inputs as one string (equal strings = identical inputs) and its measurement. */
typedef struct {
  const char *key;
  const char *id;
  double measured; /* > 0 */
} floor_row;

/* A group of at least two rows with identical inputs whose spread leaves a row above the bar. */
typedef struct {
  int64_t n;
  const char **ids;   /* n, in table order */
  double *measured;   /* n */
  int64_t n_over;     /* rows above the bar for the best single prediction */
} floor_group;

typedef struct {
  double bar;               /* the APE bar, e.g. 0.25 */
  int64_t n_rows;           /* rows given */
  int64_t n_groups;         /* groups of at least two rows with identical inputs */
  int64_t n_rows_grouped;   /* rows in those groups */
  double mape_floor;        /* the least MAPE over all n_rows (ungrouped rows count 0) */
  int64_t min_rows_over;    /* the least number of rows above the bar */
  int64_t n_listed;         /* groups that alone put a row above the bar, in listed[] */
  floor_group *listed;
} data_floor;

/* Computes the floor of rows[0..n) for the APE bar; memory from arena a (ids are borrowed from rows). */
AP_HIDDEN ap_status data_floor_compute(ap_ctx *ctx, arena *a, const floor_row *rows, int64_t n, double bar,
                                       data_floor *out);

#endif
