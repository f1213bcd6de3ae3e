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

#endif
