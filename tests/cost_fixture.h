/* A model on a cluster and its cost environment, for the tests that reach the cost layer's internals
 * (test_cost, test_groups, test_moe_host): one fixture instead of a copy per file. Include after testutil.h. */
#ifndef AP_TEST_COST_FIXTURE_H
#define AP_TEST_COST_FIXTURE_H

#include "cost/internal.h"
#include "model/model.h"

/* ctx, model m, cluster and env, freed with env_close. With model NULL, f->ctx and f->m are the caller's (a
 * model it built). */
typedef struct {
  ap_ctx *ctx;
  ap_model *m;
  ap_cluster *cl;
  cost_env *env;
  const graph *g;
} env_fixture;

static inline void env_open(env_fixture *f, const char *model, const char *cluster) {
  if (model) {
    f->ctx = ap_ctx_new();
    f->m = NULL;
    assert_int_equal(ap_model_load(f->ctx, model, &f->m), AP_OK);
  }
  f->cl = NULL;
  f->env = NULL;
  assert_int_equal(ap_cluster_load(f->ctx, cluster, &f->cl), AP_OK);
  assert_int_equal(cost_env_new(f->ctx, f->m, f->cl, NULL, &f->env), AP_OK);
  f->g = model_graph(f->m);
}

static inline void env_close(env_fixture *f) {
  cost_env_free(f->env);
  ap_cluster_free(f->cl);
  ap_model_free(f->m);
  ap_ctx_free(f->ctx);
}

#endif
