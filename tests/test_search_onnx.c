/* The stochastic searches on a real model's sharding problem (the "onnx" part, so listed in mk/onnx.mk): MCMC
 * on the shipped GPT-2-small-shaped decoder (examples/onnx/gpt2_small.onnx, gbs 64) over 2-axis meshes, up to
 * 25 strategies per group, at the budget of 20,000 evaluations, seeds 1 to 8. Before its tree-block moves
 * and its temperature in ms (src/search/solve/mcmc.c) it ended 57% above on dgx-h100:4x8's [4, 8] mesh, where
 * the optimum moves the batch split to the other mesh axis than the chain's first basin. Every one of seeds 1 to
 * 8 must end within 2% of the optimum, and none below it. (On main at 88191e6, where GPT-2's packed c_attn was
 * one MatMul and a Split, that mesh had two basins: 4 of the 8 seeds ended 30.3% above; the check ran seed 1
 * alone, which landed in either as the problem's strategy lists changed. With the packed projection read as
 * its parts, onnx_packed.c, all 8 reach the optimum on both meshes.) The figures for every family, model and mesh are in bench/search.txt.
 * Without the "ilp" part the optimum is not at hand and the test says so and skips. */
#include "testutil.h"

#include "hw/hw.h"
#include "model/model.h"
#include "search/graph/graph_plan.h"

static void check_mesh(ap_ctx *ctx, const ap_model *m, const char *cluster, int64_t rows, int64_t cols, int min_ok) {
  ap_cluster *cl = NULL;
  assert_int_equal(ap_cluster_load(ctx, cluster, &cl), AP_OK);
  const hw_cluster *c = hw_cluster_of(cl);
  arena *a = arena_new();
  compute_model cm;
  graph_problem gp;
  gplan_opts o;
  gplan_opts_init(&o);
  o.gbs = 64;
  assert_int_equal(compute_model_init(ctx, a, &c->groups[0].device, NULL, &cm), AP_OK);
  assert_int_equal(gplan_problem(ctx, a, model_graph(m), c, &cm, &o, (int64_t[]){rows, cols}, &gp), AP_OK);
  int max_s = 0;
  for (int32_t g = 0; g < gp.sp.n_groups; g++) max_s = gp.sp.n_s[g] > max_s ? gp.sp.n_s[g] : max_s;
  assert_true(max_s >= 20); /* the 2-axis strategy sets */
  int32_t *ch = arena_alloc(a, (size_t)gp.sp.n_groups * sizeof *ch);
  solve_opts so;
  solve_opts_init(&so);
  so.time_budget_s = 0; /* the evaluation budget alone */
  sp_result ilp = {.choice = ch}, mc = {.choice = ch};
  assert_int_equal(solve_ilp(ctx, &gp.sp, &so, &ilp), AP_OK);
  assert_int_equal(ilp.status, SOLVE_OPTIMAL);
  so.max_evals = 20000;
  int n_ok = 0;
  double worst = 0;
  for (uint64_t seed = 1; seed <= 8; seed++) {
    so.seed = seed;
    assert_int_equal(solve_mcmc(ctx, &gp.sp, &so, &mc), AP_OK);
    assert_int_equal(mc.status, SOLVE_FEASIBLE);
    assert_true(mc.n_evals <= 20000);
    assert_true(mc.objective >= ilp.objective * (1 - 1e-9)); /* never below the optimum */
    n_ok += mc.objective <= 1.02 * ilp.objective;
    worst = mc.objective > worst ? mc.objective : worst;
  }
  print_message("# %s [%lld, %lld]: %d of 8 seeds within 2%% of the ILP's %.6g s, the worst %.1f%% above\n", cluster,
                (long long)rows, (long long)cols, n_ok, ilp.objective, 100 * (worst / ilp.objective - 1));
  if (n_ok < min_ok)
    fail_msg("%s [%lld, %lld]: %d of 8 seeds within 2%% of the ILP's %.6g s, want %d (the worst %.1f%% above)", cluster,
             (long long)rows, (long long)cols, n_ok, ilp.objective, min_ok, 100 * (worst / ilp.objective - 1));
  arena_free(a);
  ap_cluster_free(cl);
}

static void test_mcmc_gpt2_two_axis_seeds_within_2_percent(void **state) {
  (void)state;
#ifndef AP_PART_ILP
  skip();
#else
  ap_ctx *ctx = ap_ctx_new();
  assert_int_equal(ap_ctx_add_part(ctx, ap_part_onnx()), AP_OK);
  assert_int_equal(ap_ctx_add_part(ctx, ap_part_ilp()), AP_OK);
  ap_model *m = NULL;
  assert_int_equal(ap_model_load(ctx, "examples/onnx/gpt2_small.onnx", &m), AP_OK);
  check_mesh(ctx, m, "dgx-h100:4x8", 4, 8, 8);
  check_mesh(ctx, m, "h100-sxm:8", 2, 4, 8);
  ap_model_free(m);
  ap_ctx_free(ctx);
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mcmc_gpt2_two_axis_seeds_within_2_percent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
