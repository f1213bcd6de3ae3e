/* Time and cost to train (train_cost.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/jsonx.h"
#include "report/train_cost.h"

void train_cost_compute(double tokens, double tokens_per_s, double n_devices, double price, train_cost *out) {
  out->tokens = tokens;
  out->time_s = tokens_per_s > 0 ? tokens / tokens_per_s : INFINITY;
  out->gpu_hours = out->time_s * n_devices / 3600.0;
  out->price_per_gpu_hour = price > 0 ? price : NAN;
  out->cost = price > 0 ? out->gpu_hours * price : NAN;
}

bool train_parse_amount(const char *s, double *out) {
  if (!s || !*s) return false;
  char *end = NULL;
  double v = strtod(s, &end);
  if (end == s) return false;
  double mul = 1;
  switch (*end) {
  case 'k': case 'K': mul = 1e3, end++; break;
  case 'M': mul = 1e6, end++; break;
  case 'B': case 'G': mul = 1e9, end++; break;
  case 'T': mul = 1e12, end++; break;
  default: break;
  }
  if (*end || !isfinite(v) || !(v > 0) || !isfinite(v * mul)) return false;
  *out = v * mul;
  return true;
}

void train_format_duration(double s, char *out, size_t n) {
  if (!isfinite(s)) snprintf(out, n, "never");
  else if (s >= 2 * 365.25 * 86400) snprintf(out, n, "%.1f years", s / (365.25 * 86400));
  else if (s >= 2 * 86400) snprintf(out, n, "%.1f days", s / 86400);
  else if (s >= 2 * 3600) snprintf(out, n, "%.1f hours", s / 3600);
  else if (s >= 120) snprintf(out, n, "%.1f minutes", s / 60);
  else snprintf(out, n, "%.1f s", s);
}

void train_cost_put(jd *d, json_t *o, const char *key, const train_cost *c) {
  json_t *t = jd_obj(d, o, key);
  jd_num(d, t, "tokens", c->tokens);
  jd_num(d, t, "time_s", c->time_s);
  jd_num(d, t, "gpu_hours", c->gpu_hours);
  jd_num(d, t, "cost", c->cost);
  jd_num(d, t, "price_per_gpu_hour", c->price_per_gpu_hour);
}
