/* The search space (search layer); see space.h. */
#include <string.h>
#include <time.h>

#include "search/recipe/space.h"

void search_space_init(search_space *sp, const cost_env *env, const plan *base, unsigned fixed_mask,
                       int64_t global_batch_size, int64_t seq_length) {
  sp->env = env;
  sp->g = cost_env_graph(env);
  sp->facts = *cost_env_facts(env);
  sp->n_devices = cost_env_cluster(env)->n_devices;
  sp->global_batch_size = global_batch_size;
  sp->seq_length = seq_length > 0 ? seq_length : sp->g->default_seq;
  memcpy(&sp->base, base, sizeof sp->base);
  sp->base.ops = NULL;
  sp->base.n_ops = 0;
  sp->fixed_mask = fixed_mask;
}

int search_space_values(const search_space *sp, plan_field_id f, const int64_t *list, int n, int64_t *out) {
  if (search_space_fixes(sp, f)) {
    out[0] = plan_field_int(&sp->base, plan_field_get(f));
    return 1;
  }
  memcpy(out, list, sizeof(int64_t) * (size_t)n);
  return n;
}

double search_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void search_ticker_init(search_ticker *t, ap_ctx *ctx) {
  t->ctx = ctx;
  t->next_s = search_now_s();
  t->cancelled = false;
}

bool search_ticker_tick(search_ticker *t, double now_s, double fraction, const char *what) {
  if (t->cancelled || now_s < t->next_s) return t->cancelled;
  t->next_s = now_s + SEARCH_PROGRESS_EVERY_S;
  double f = fraction < 0 ? 0 : fraction > 1 ? 1 : fraction;
  if (ctx_progress(t->ctx, f, what)) t->cancelled = true;
  return t->cancelled;
}
