/* Time and cost to train (report layer): from a predicted throughput, the wall-clock time to process a token
 * budget, the device-hours it takes and, given a price per device-hour, what it costs. Shared by `--tokens` on
 * plan and estimate and by compare-clusters, so the three can never disagree.
 * Internal header: not installed, not part of the public API. */
#ifndef AP_REPORT_TRAIN_COST_H
#define AP_REPORT_TRAIN_COST_H

#include <stdbool.h>

#include "core/core.h"
#include "core/jdoc.h"

typedef struct {
  double tokens;          /* the token budget */
  double time_s;          /* tokens / (tokens per second of the whole job) */
  double gpu_hours;       /* time_s × devices / 3600 */
  double cost;            /* gpu_hours × price; NaN without a price */
  double price_per_gpu_hour;
} train_cost;

/* Fills *out; tokens_per_s is the whole job's. A non-positive throughput gives infinite time and hours. */
AP_HIDDEN void train_cost_compute(double tokens, double tokens_per_s, double n_devices, double price_per_gpu_hour,
                                  train_cost *out);
/* Parses a positive amount with an optional suffix k, M, B or G, T (10^3, 10^6, 10^9, 10^12): "1T", "2.5e11",
 * "300B". False on anything else, or a value that is not finite and > 0. */
AP_HIDDEN bool train_parse_amount(const char *s, double *out);
/* "390.6 years" / "12.3 days" / "4.5 hours" / "30 minutes": a duration for people. */
AP_HIDDEN void train_format_duration(double s, char *out, size_t n);
/* Puts {"tokens", "time_s", "gpu_hours", "cost" (null without a price), "price_per_gpu_hour" (null without a
 * price)} under key in o (docs/json.md). */
AP_HIDDEN void train_cost_put(jd *d, json_t *o, const char *key, const train_cost *c);

#endif
