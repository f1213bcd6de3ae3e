/* The figures of a validation run (report layer): per-row errors folded into MAPE, median, Spearman rank
 * correlation, OOM agreement and the repeat-measurement floor (data_floor.h), for the whole table and for each
 * group. validate.c calls validate_summarise once every row is predicted; validate.h says what each figure is. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/data_floor.h"
#include "report/validate_internal.h"

/* A row's miss: what a row the tool cannot model adds to MAPE, as if it had predicted no throughput. */
static const double MISS_APE = 1.0;

double validate_miss_ape(void) { return MISS_APE; }

/* ---- Summary -------------------------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y ? 1 : 0;
}

/* The median of v[0..n-1] (sorts v). */
static double median(double *v, int64_t n) {
  if (n <= 0) return NAN;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Ranks of x[0..n-1] (1-based, ties get the mean of their ranks) into r. O(n²): groups are small. */
static void ranks(const double *x, int64_t n, double *r) {
  for (int64_t i = 0; i < n; i++) {
    int64_t below = 0, equal = 0;
    for (int64_t j = 0; j < n; j++) {
      if (x[j] < x[i]) below++;
      else if (x[j] == x[i]) equal++;
    }
    r[i] = (double)below + (double)(equal + 1) / 2.0;
  }
}

/* Spearman's rho: Pearson's correlation of the ranks; NAN when either side has no spread. */
static double spearman(const double *x, const double *y, int64_t n, double *scratch) {
  double *rx = scratch, *ry = scratch + n;
  ranks(x, n, rx);
  ranks(y, n, ry);
  double mx = 0, my = 0;
  for (int64_t i = 0; i < n; i++) mx += rx[i], my += ry[i];
  mx /= (double)n;
  my /= (double)n;
  double sxy = 0, sxx = 0, syy = 0;
  for (int64_t i = 0; i < n; i++) {
    sxy += (rx[i] - mx) * (ry[i] - my);
    sxx += (rx[i] - mx) * (rx[i] - mx);
    syy += (ry[i] - my) * (ry[i] - my);
  }
  return sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : NAN;
}

/* The APE bar of the data floor's row count (data_floor.h): the "no row worse than 25%". */
#define FLOOR_BAR 0.25

/* A modelled row measured ok: it has both throughputs. */
static bool is_compared(const validate_row *v) { return !v->error && v->has_measured && !v->measured_oom; }

ap_status validate_summarise(ap_ctx *ctx, validate_report *rep) {
  validate_summary *s = &rep->sum;
  int64_t n = rep->n_rows;
  memset(s, 0, sizeof *s);
  s->n_rows = n;
  s->mape = s->median_ape = s->mean_signed_error = s->spearman = s->mem_mape = NAN;
  double *buf = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1) * 5);
  int64_t *members = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
  bool *grouped = calloc((size_t)(n > 0 ? n : 1), sizeof(bool));
  s->groups = arena_alloc(rep->a, sizeof *s->groups * (size_t)(n > 0 ? n : 1));
  if (!buf || !members || !grouped || !s->groups) {
    free(buf);
    free(members);
    free(grouped);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  /* Throughput. */
  double sum = 0, signed_sum = 0, mem_sum = 0, by_sum[VALIDATE_MEM_COUNT_] = {0};
  int64_t n_signed = 0;
  for (int64_t i = 0; i < n; i++) {
    const validate_row *v = &rep->rows[i];
    if (v->error) s->n_errors++;
    if (v->has_measured && !v->measured_oom) {
      double ape = v->error ? MISS_APE : v->ape;
      buf[s->n++] = ape;
      sum += ape;
      if (!v->error) {
        signed_sum += (v->predicted_tokens - v->measured_tokens) / v->measured_tokens;
        n_signed++;
        if (!s->worst_id || v->ape > s->worst_ape) {
          s->worst_id = v->id;
          s->worst_ape = v->ape;
        }
      }
    }
    if (!v->error && v->measured_oom) {
      s->oom_rows++;
      s->oom_predicted_oom += !v->fits;
    } else if (!v->error) {
      s->ok_rows++;
      s->ok_predicted_fit += v->fits;
    }
    if (!v->error && v->has_mem) {
      s->mem_n++;
      mem_sum += v->mem_ape;
      s->mem_n_by[v->mem_convention]++;
      by_sum[v->mem_convention] += v->mem_ape;
    }
  }
  if (s->n > 0) {
    s->mape = sum / (double)s->n;
    s->median_ape = median(buf, s->n);
  }
  if (n_signed > 0) s->mean_signed_error = signed_sum / (double)n_signed;
  if (s->mem_n > 0) s->mem_mape = mem_sum / (double)s->mem_n;
  for (int k = 0; k < VALIDATE_MEM_COUNT_; k++)
    s->mem_mape_by[k] = s->mem_n_by[k] > 0 ? by_sum[k] / (double)s->mem_n_by[k] : NAN;

  /* Rank correlation within groups of the same model and gpu, in order of first appearance. */
  double rho_sum = 0;
  for (int64_t i = 0; i < n; i++) {
    const validate_row *v = &rep->rows[i];
    if (grouped[i] || !is_compared(v)) continue;
    int64_t m = 0;
    for (int64_t j = i; j < n; j++) {
      const validate_row *w = &rep->rows[j];
      if (!grouped[j] && is_compared(w) && strcmp(w->model, v->model) == 0 && strcmp(w->gpu, v->gpu) == 0) {
        grouped[j] = true;
        members[m++] = j;
      }
    }
    if (m < 3) continue;
    double *x = buf, *y = buf + m, *scratch = buf + 2 * m;
    for (int64_t k = 0; k < m; k++) {
      x[k] = rep->rows[members[k]].predicted_tokens;
      y[k] = rep->rows[members[k]].measured_tokens;
    }
    validate_group *g = &s->groups[s->n_groups++];
    g->model = v->model;
    g->gpu = v->gpu;
    g->n = m;
    g->rho = spearman(x, y, m, scratch);
    if (!isnan(g->rho)) {
      rho_sum += g->rho;
      s->n_ranked++;
    }
  }
  if (s->n_ranked > 0) s->spearman = rho_sum / (double)s->n_ranked;
  /* The floor the data puts under the throughput error: every row with a measured throughput, modelled or not. */
  floor_row *fr = arena_alloc(rep->a, sizeof *fr * (size_t)(n > 0 ? n : 1));
  int64_t n_fr = 0;
  for (int64_t i = 0; fr && i < n; i++) {
    const validate_row *v = &rep->rows[i];
    if (v->has_measured && !v->measured_oom) fr[n_fr++] = (floor_row){v->input_key, v->id, v->measured_tokens};
  }
  ap_status fst = fr ? data_floor_compute(ctx, rep->a, fr, n_fr, FLOOR_BAR, &s->floor) : ctx_fail(ctx, AP_NOMEM, "out of memory");
  if (fst) {
    free(buf);
    free(members);
    free(grouped);
    return fst;
  }
  /* Cross-validation's groups, and the bands' coverage: a measurement inside its row's band. */
  s->cv = rep->cv;
  s->folds = rep->folds;
  s->n_folds = rep->n_folds;
  s->band_level = VALIDATE_BAND_LEVEL;
  for (int64_t i = 0; i < n; i++) {
    const validate_row *v = &rep->rows[i];
    if (v->error) continue;
    if (v->has_band && v->has_measured && !v->measured_oom) {
      s->band_n++;
      s->band_covered += v->measured_tokens >= v->band_low && v->measured_tokens <= v->band_high;
    }
    if (v->measured_oom) s->oom_fit_band_high += v->fits_band_high;
    else s->ok_fit_band_high += v->fits_band_high;
    if (v->has_mem_band && v->has_mem) {
      s->mem_band_n++;
      s->mem_band_covered += v->measured_mem_bytes >= v->mem_band_low_bytes && v->measured_mem_bytes <= v->mem_band_high_bytes;
    }
  }
  /* The planner against the stated plans. */
  s->searched = rep->search;
  for (int64_t i = 0; rep->search && i < n; i++) {
    const validate_row *v = &rep->rows[i];
    if (v->error || !v->searched) continue;
    if (!v->has_best) s->search_none_fit++;
    if (v->search_note && v->has_best) s->search_truncated++;
    if (!v->fits) {
      s->search_stated_unfit++;
      continue;
    }
    s->search_compared++;
    double ratio = v->has_best ? v->best_tokens / v->predicted_tokens : 0;
    if (ratio >= 1 - 1e-9) {
      s->search_at_least++;
    } else {
      s->search_slower++;
      if (!s->search_worst_id || ratio < s->search_worst_ratio) {
        s->search_worst_id = v->id;
        s->search_worst_ratio = ratio;
      }
    }
  }
  free(buf);
  free(members);
  free(grouped);
  return AP_OK;
}
