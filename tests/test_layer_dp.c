/* Tests of the layer-wise DP (src/search/recipe/layer_dp.c) against brute force, and of per-chunk recompute in the
 * cost model. On small models every assignment of a full-recompute count to every chunk is costed with
 * cost_estimate under a memory limit that binds (between the peak with no recompute and the peak with all of
 * it); the DP's plan must fit, cost what the DP predicted and be as fast as the fastest assignment that fits. */
#include <stdlib.h>

#include "testutil.h"
#include "testmodels.h"

#include "cost/internal.h"
#include "model/model.h"
#include "model/transformer.h"
#include "search/recipe/search.h"


typedef struct {
  const char *name;
  int64_t layers, hidden, heads, vocab;
  bool windowed;
  int64_t pp, vpp, tp, mbs, n_micro, seq;
  plan_schedule schedule;
  int32_t split[8]; /* stage_layers; all zero = the even split */
  double where;     /* the memory limit, from the peak with all layers recomputing (0) to none (1) */
} layer_case;

static const layer_case cases[] = {
    {"12 layers, pp 4, 1f1b", 12, 1024, 16, 32000, false, 4, 1, 1, 4, 8, 4096, PLAN_SCHED_1F1B, {0}, 0.4},
    {"16 layers, pp 2, vpp 2", 16, 1024, 16, 32000, false, 2, 2, 1, 2, 4, 4096, PLAN_SCHED_INTERLEAVED_1F1B, {0}, 0.5},
    {"18 layers, pp 3, windowed", 18, 1024, 16, 64000, true, 3, 1, 1, 2, 6, 4096, PLAN_SCHED_1F1B, {0}, 0.3},
    {"10 layers, pp 2, zb-h1", 10, 1024, 16, 32000, false, 2, 1, 2, 4, 4, 4096, PLAN_SCHED_ZB_H1, {0}, 0.6},
    {"14 layers, pp 4, uneven split", 14, 1024, 16, 32000, false, 4, 1, 1, 4, 8, 4096, PLAN_SCHED_1F1B, {2, 4, 5, 3}, 0.5},
    {"12 layers, pp 3, gpipe, tight", 12, 1024, 16, 32000, false, 3, 1, 1, 2, 6, 4096, PLAN_SCHED_GPIPE, {0}, 0.05},
};

typedef struct {
  ap_ctx *ctx;
  const cost_env *env;
  plan q;
  int32_t layers[PLAN_MAX_CHUNKS];
  double fraction, best_s;
  int64_t n;
} brute;

static void brute_rec(brute *bf, int32_t c) {
  if (c == bf->q.n_chunk_recompute) {
    cost_result r;
    if (cost_estimate(bf->ctx, bf->env, &bf->q, &r)) fail_msg("%s", ap_ctx_error(bf->ctx));
    bf->n++;
    if (r.peak_mem_bytes <= bf->fraction * r.capacity_bytes && r.pipeline_s < bf->best_s) bf->best_s = r.pipeline_s;
    return;
  }
  for (int32_t k = 0; k <= bf->layers[c]; k++) {
    bf->q.chunk_recompute_layers[c] = k;
    brute_rec(bf, c + 1);
  }
}

static double peak_fraction(ap_ctx *ctx, const cost_env *env, const plan *p) {
  cost_result r;
  if (cost_estimate(ctx, env, p, &r)) fail_msg("%s", ap_ctx_error(ctx));
  return r.peak_mem_bytes / r.capacity_bytes;
}

static void check_case(const layer_case *k) {
  ap_ctx *ctx = ap_ctx_new();
  ap_model *m = test_small_model(ctx, k->layers, k->hidden, k->heads, k->vocab, k->windowed);
  char spec[32];
  snprintf(spec, sizeof spec, "h100:%lld", (long long)(k->pp * k->tp));
  ap_cluster *cl = NULL;
  assert_int_equal(ap_cluster_load(ctx, spec, &cl), AP_OK);
  cost_env *env = NULL;
  assert_int_equal(cost_env_new(ctx, m, cl, NULL, &env), AP_OK);
  plan base;
  plan_defaults(&base);
  base.tp = k->tp;
  base.pp = k->pp;
  base.vpp = k->vpp;
  base.schedule = k->schedule;
  base.sequence_parallel = k->tp > 1;
  base.micro_batch_size = k->mbs;
  base.n_micro_batches = k->n_micro;
  base.global_batch_size = k->mbs * k->n_micro;
  base.seq_length = k->seq;
  if (k->split[0] > 0) {
    base.n_stage_layers = (int32_t)(k->pp * k->vpp);
    memcpy(base.stage_layers, k->split, sizeof(int32_t) * (size_t)base.n_stage_layers);
  }
  /* The memory limit: between the peaks with every layer recomputing and with none. */
  plan all = base, none = base;
  all.recompute = PLAN_RECOMPUTE_FULL;
  double lo = peak_fraction(ctx, env, &all), hi = peak_fraction(ctx, env, &none);
  double fraction = lo + k->where * (hi - lo);

  brute bf = {ctx, env, all, {0}, fraction, INFINITY, 0};
  bf.q.n_chunk_recompute = (int32_t)plan_n_chunks(&base);
  assert_true(plan_chunk_layers(&base, env->n_layers, bf.layers));
  brute_rec(&bf, 0);

  arena *a = arena_new();
  plan got;
  double predicted = 0;
  if (search_layer_dp_choose(ctx, a, env, &base, fraction, &got, &predicted)) fail_msg("%s: %s", k->name, ap_ctx_error(ctx));
  cost_result r;
  if (cost_estimate(ctx, env, &got, &r)) fail_msg("%s: %s", k->name, ap_ctx_error(ctx));
  char list[256] = "";
  for (int32_t c = 0; c < got.n_chunk_recompute; c++)
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", c ? "," : "", got.chunk_recompute_layers[c]);
  print_message("# %s: %lld assignments, DP [%s] %.6g s (predicted %.6g), brute force %.6g s; limit %.4g (all %.4g, none %.4g)\n",
                k->name, (long long)bf.n, list, r.pipeline_s, predicted, bf.best_s, fraction, lo, hi);
  assert_true(r.peak_mem_bytes <= fraction * r.capacity_bytes);
  assert_rel_close(predicted, r.pipeline_s, 1e-9);
  assert_rel_close(r.pipeline_s, bf.best_s, 1e-9);
  /* Below the peak with every layer recomputing nothing fits. */
  assert_int_equal(search_layer_dp_choose(ctx, a, env, &base, lo * 0.999, &got, NULL), AP_INFEASIBLE);
  arena_free(a);
  cost_env_free(env);
  ap_cluster_free(cl);
  ap_model_free(m);
  ap_ctx_free(ctx);
}

static void test_layer_dp_vs_brute_force(void **state) {
  (void)state;
  for (size_t i = 0; i < AP_COUNT(cases); i++) check_case(&cases[i]);
}

/* The cost model honours per-chunk counts: a list of every chunk's layers costs what recompute_layers 0 costs,
 * a list of K everywhere what recompute_layers K costs, and a chunk with 0 has no recompute time. */
static void test_per_chunk_recompute_cost(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  ap_model *m = test_small_model(ctx, 12, 1024, 16, 32000, false);
  ap_cluster *cl = NULL;
  assert_int_equal(ap_cluster_load(ctx, "h100:2", &cl), AP_OK);
  cost_env *env = NULL;
  assert_int_equal(cost_env_new(ctx, m, cl, NULL, &env), AP_OK);
  plan p;
  plan_defaults(&p);
  p.pp = 2;
  p.n_micro_batches = p.global_batch_size = 4;
  p.seq_length = 2048;
  p.recompute = PLAN_RECOMPUTE_FULL;
  cost_result every, two, list, none;
  assert_int_equal(cost_estimate(ctx, env, &p, &every), AP_OK);
  p.recompute_layers = 2;
  assert_int_equal(cost_estimate(ctx, env, &p, &two), AP_OK);
  p.recompute_layers = 0;
  p.n_chunk_recompute = 2;
  p.chunk_recompute_layers[0] = p.chunk_recompute_layers[1] = 6;
  assert_int_equal(cost_estimate(ctx, env, &p, &list), AP_OK);
  assert_rel_close(list.iter_s, every.iter_s, 1e-12);
  assert_rel_close(list.peak_mem_bytes, every.peak_mem_bytes, 1e-12);
  p.chunk_recompute_layers[0] = p.chunk_recompute_layers[1] = 2;
  assert_int_equal(cost_estimate(ctx, env, &p, &list), AP_OK);
  assert_rel_close(list.iter_s, two.iter_s, 1e-12);
  assert_rel_close(list.mem[0].activations, two.mem[0].activations, 1e-12);
  p.chunk_recompute_layers[0] = 6;
  p.chunk_recompute_layers[1] = 0;
  assert_int_equal(cost_estimate(ctx, env, &p, &list), AP_OK);
  p.n_chunk_recompute = 0;
  p.recompute = PLAN_RECOMPUTE_NONE;
  assert_int_equal(cost_estimate(ctx, env, &p, &none), AP_OK);
  /* Rank 0 recomputes all its layers, rank 1 none: rank 1's activations are those of no recompute. */
  assert_rel_close(list.mem[0].activations, every.mem[0].activations, 1e-12);
  assert_rel_close(list.mem[1].activations, none.mem[1].activations, 1e-12);
  assert_rel_close(list.chunk_tb_s[0], every.chunk_tb_s[0], 1e-12);
  assert_true(list.chunk_tb_s[1] < every.chunk_tb_s[1]);
  cost_env_free(env);
  ap_cluster_free(cl);
  ap_model_free(m);
  ap_ctx_free(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layer_dp_vs_brute_force),
      cmocka_unit_test(test_per_chunk_recompute_cost),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
