/* Tests of the MoE host floor (cost/layer.c, compute_tuning.moe_host_s): on a stack whose dropless MoE layers
 * wait on the tokens per expert every forward (plan/stack.c [MLM-moe-sync]: Megatron-LM, Megatron-Bridge,
 * NeMo), a MoE layer takes at least moe_host_s per micro-batch, a third forward and two thirds backward, with
 * the weight-gradient share of the backward kept; a dense layer, and a stack without the wait, keep their GPU
 * time. */
#include <stdlib.h>

#include "testutil.h"
#include "cost_fixture.h"

#include "cost/internal.h"
#include "model/model.h"
#include "plan/plan_api.h"
#include "plan/stack.h"

/* The first layer block that is (or is not) a MoE layer; -1 if none. */
static int block_of(const graph *g, bool moe) {
  for (int i = 0; i < g->n_blocks; i++)
    if (g->blocks[i].role == BLOCK_LAYER && g->blocks[i].is_moe == moe) return i;
  return -1;
}

static layer_cost block_cost(env_fixture *f, plan_stack stack, double host_s, int bi) {
  plan p;
  plan_defaults(&p);
  p.dp = 8, p.ep = 8, p.seq_length = 4096, p.stack = stack;
  plan_groups pg;
  assert_int_equal(cost_plan_groups(f->ctx, f->env, &p, &pg), AP_OK);
  cost_tuning t = *cost_env_tuning(f->env);
  t.compute.moe_host_s = host_s;
  cost_env_set_tuning(f->env, &t);
  return cost_block(f->env, &p, &pg, bi, 1, 4096);
}

static void test_megatron_moe_layer_is_host_bound(void **state) {
  (void)state;
  env_fixture f;
  env_open(&f, "qwen3-30b-a3b", "dgx-h100:8");
  int moe = block_of(f.g, true);
  assert_true(moe >= 0);
  const plan_stack stacks[] = {PLAN_STACK_MEGATRON_LM, PLAN_STACK_MEGATRON_BRIDGE, PLAN_STACK_NEMO};
  for (size_t i = 0; i < sizeof stacks / sizeof stacks[0]; i++) {
    assert_true(plan_stack_get(stacks[i])->moe_host_sync);
    layer_cost gpu = block_cost(&f, stacks[i], 0.0, moe);
    layer_cost host = block_cost(&f, stacks[i], 3.0, moe); /* 3 s: far above a layer's GPU time */
    assert_true(gpu.fwd_s + gpu.bwd_s > 0 && gpu.fwd_s + gpu.bwd_s < 0.1);
    assert_rel_close(host.fwd_s, 1.0, 1e-12);
    assert_rel_close(host.bwd_s, 2.0, 1e-12);
    assert_rel_close(host.recompute_full_s, 1.0, 1e-12); /* the recomputed forward waits as well */
    assert_rel_close(host.wgrad_s / host.bwd_s, gpu.wgrad_s / gpu.bwd_s, 1e-12);
    /* Below the GPU time the floor changes nothing. */
    layer_cost low = block_cost(&f, stacks[i], 1e-9, moe);
    assert_rel_close(low.fwd_s, gpu.fwd_s, 1e-12);
    assert_rel_close(low.bwd_s, gpu.bwd_s, 1e-12);
  }
  env_close(&f);
}

static void test_other_stacks_and_dense_layers_keep_gpu_time(void **state) {
  (void)state;
  env_fixture f;
  env_open(&f, "qwen3-30b-a3b", "dgx-h100:8");
  int moe = block_of(f.g, true);
  const plan_stack others[] = {PLAN_STACK_TORCHTITAN, PLAN_STACK_AUTOPAR, PLAN_STACK_ANY};
  for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
    assert_false(plan_stack_get(others[i])->moe_host_sync);
    layer_cost gpu = block_cost(&f, others[i], 0.0, moe), host = block_cost(&f, others[i], 3.0, moe);
    assert_rel_close(host.fwd_s, gpu.fwd_s, 1e-12);
    assert_rel_close(host.bwd_s, gpu.bwd_s, 1e-12);
  }
  env_close(&f);
  /* A dense layer on Megatron-LM: Llama's layers have no experts. */
  env_open(&f, "llama-3.1-8b", "dgx-h100:8");
  int dense = block_of(f.g, false);
  assert_true(dense >= 0);
  plan p;
  plan_defaults(&p);
  p.dp = 8, p.seq_length = 4096, p.stack = PLAN_STACK_MEGATRON_LM;
  plan_groups pg;
  assert_int_equal(cost_plan_groups(f.ctx, f.env, &p, &pg), AP_OK);
  layer_cost gpu = cost_block(f.env, &p, &pg, dense, 1, 4096);
  cost_tuning t = *cost_env_tuning(f.env);
  t.compute.moe_host_s = 3.0;
  cost_env_set_tuning(f.env, &t);
  layer_cost host = cost_block(f.env, &p, &pg, dense, 1, 4096);
  assert_rel_close(host.fwd_s, gpu.fwd_s, 1e-12);
  assert_rel_close(host.bwd_s, gpu.bwd_s, 1e-12);
  env_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_megatron_moe_layer_is_host_bound),
      cmocka_unit_test(test_other_stacks_and_dense_layers_keep_gpu_time),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
