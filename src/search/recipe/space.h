/* The search space (search layer): one description of a planning problem and of what in it is fixed, shared
 * by every strategy of the driver (search.h: the driver builds it from search_opts) and by the completion of
 * stated fields (complete.h: built from the partial plan and its stated fields). A field is fixed when its
 * bit (PLAN_F(TP) | …, the ids of the field table in plan/plan_fields.c) is in fixed_mask; its value is then
 * base's. Each strategy keeps its own candidate lists for the free fields, and asks search_space_values for
 * the list a field really takes, so that "a fixed field has one candidate" is written once.
 * Internal header: not installed, not part of the public API. */
#ifndef AP_SEARCH_SPACE_H
#define AP_SEARCH_SPACE_H

#include "cost/cost.h"

typedef struct {
  const cost_env *env;
  const graph *g;
  plan_model_facts facts;
  int64_t n_devices;
  int64_t global_batch_size; /* sequences per iteration of every plan */
  int64_t seq_length;        /* tokens per sequence, resolved (the model's default when the problem says 0) */
  /* The template of every plan: the fixed fields' values, and the fields no strategy searches (the overlap
   * switches, the model and cluster names). */
  plan base;
  unsigned fixed_mask;
} search_space;

/* Fills *sp for env's model and cluster; base is copied (its ops are not: a template carries none). */
AP_HIDDEN void search_space_init(search_space *sp, const cost_env *env, const plan *base, unsigned fixed_mask,
                                 int64_t global_batch_size, int64_t seq_length);
static inline bool search_space_fixes(const search_space *sp, plan_field_id f) { return (sp->fixed_mask >> f) & 1u; }
/* The candidates of an integer, bool or enum field: base's value alone when it is fixed, else list[0..n-1]
 * (copied to out, which holds n entries). Returns the count. */
AP_HIDDEN int search_space_values(const search_space *sp, plan_field_id f, const int64_t *list, int n, int64_t *out);

/* Progress and cancellation, a service of the driver (search.c) that the completion (complete.c) shares: the
 * clock, and at most every SEARCH_PROGRESS_EVERY_S a report to the context's progress callback, which may ask
 * to stop; once it has, cancelled stays true. */
typedef struct {
  ap_ctx *ctx;
  double next_s;  /* the clock (search_now_s) at which the next report is due */
  bool cancelled; /* the callback asked to stop */
} search_ticker;

/* TUNING: how often the progress callback hears from a search, seconds; a tenth of a second is smooth on a
 * terminal and costs nothing next to thousands of evaluations. */
#define SEARCH_PROGRESS_EVERY_S 0.1

/* A monotonic clock, seconds. */
AP_HIDDEN double search_now_s(void);
/* A ticker for ctx whose first report is due at once. */
AP_HIDDEN void search_ticker_init(search_ticker *t, ap_ctx *ctx);
/* When a report is due at time now_s: tells the callback fraction (clamped to [0, 1]) and what, and schedules
 * the next; returns t->cancelled. */
AP_HIDDEN bool search_ticker_tick(search_ticker *t, double now_s, double fraction, const char *what);

#endif
