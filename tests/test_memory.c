/* Tests of the memory model's bookkeeping and of the advice when nothing fits: over many plans (models, meshes,
 * ZeRO stages, recompute kinds, stacks, offload), every stage's parts add up to its total, in the cost result,
 * in estimate's JSON document and in its text table; the allocator reserve is memory.reserve_fraction of the
 * transient bytes (memory.expandable_reserve_fraction on a stack with expandable segments); the fit verdict is the
 * total against the capacity. The advice (report/advice.c) offers each saver that helps, ZeRO-1 included, and
 * its verdicts are the cost model's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "testutil.h"

#include "cost/internal.h"
#include "cost/result_doc.h"
#include "plan/stack.h"
#include "report/advice.h"

/* The sum of a stage's parts, by the parts table estimate's JSON and text use. */
static double parts_sum(const cost_mem *m) {
  size_t n;
  const cost_mem_part *mp = cost_mem_parts(&n);
  double sum = 0;
  for (size_t k = 0; k < n; k++) {
    double v;
    memcpy(&v, (const char *)m + mp[k].offset, sizeof v);
    sum += v;
  }
  return sum;
}

/* Checks one costed plan: the parts, the reserve, the verdict, the JSON document and the text table. */
static void check_result(const cost_env *env, const plan *p, const cost_result *r, const char *what) {
  double rf = cost_reserve_fraction(env, p);
  assert_rel_close(r->reserve_fraction, rf, 1e-15);
  for (int i = 0; i < r->n_ranks; i++) {
    const cost_mem *m = &r->mem[i];
    if (fabs(parts_sum(m) - m->total) > 1e-9 * m->total)
      fail_msg("%s stage %d: parts add up to %.17g, total %.17g", what, i, parts_sum(m), m->total);
    double transient = m->activations + m->logits + m->buffers + m->step;
    assert_rel_close(m->reserve + 1.0, rf * transient + 1.0, 1e-12);
    /* The context: the CUDA context, a stack's eagerly loaded modules, one communicator's buffers per group. */
    const plan_stack_info *si = plan_stack_get(p->stack);
    double eager = si ? si->mem.eager_context_bytes : 0;
    if (!cost_exec_cpu_on(env, 0, p))
      assert_rel_close(m->context, (eager > 0 ? eager : env->tuning.memory.context_bytes) +
                                       env->tuning.memory.comm_bytes * cost_rank_nccl_comms(env, p, i),
                        1e-12);
  }
  assert_true(r->fits == (r->peak_mem_bytes <= r->capacity_bytes && r->host_mem_bytes <= r->host_capacity_bytes));
  jd d;
  cost_estimate_doc(&d, env, p, r, NULL);
  assert_false(d.failed);
  json_t *stages = json_object_get(json_object_get(d.root, "memory"), "stages");
  assert_int_equal(json_array_size(stages), r->n_ranks);
  size_t n;
  const cost_mem_part *mp = cost_mem_parts(&n);
  for (size_t i = 0; i < json_array_size(stages); i++) {
    json_t *s = json_array_get(stages, i);
    double sum = 0;
    for (size_t k = 0; k < n; k++) sum += json_number_value(json_object_get(s, mp[k].key));
    double total = json_number_value(json_object_get(s, "total_bytes"));
    if (fabs(sum - total) > 1e-9 * total) fail_msg("%s JSON stage %zu: parts %.17g, total %.17g", what, i, sum, total);
  }
  /* The text table: every part has a column, and the printed parts (2 decimals of GiB) add up to the printed
   * total within their rounding. */
  char *text = cost_estimate_text(d.root);
  assert_non_null(text);
  for (size_t k = 0; k < n; k++)
    if (!strstr(text, mp[k].column)) fail_msg("%s: the table has no column %s", what, mp[k].column);
  const char *row = strstr(text, "\n  0 ");
  assert_non_null(row);
  double v, sum = 0;
  const char *c = row + 4;
  int consumed;
  for (size_t k = 0; k < n && sscanf(c, " %lf%n", &v, &consumed) == 1; k++, c += consumed) sum += v;
  assert_true(sscanf(c, " %lf", &v) == 1);
  if (fabs(sum - v) > 0.005 * (double)n + 1e-9) fail_msg("%s text: parts %.2f, total %.2f", what, sum, v);
  free(text);
  jd_free(&d);
}

/* A model, a cluster and their cost environment. */
typedef struct {
  ap_ctx *ctx;
  ap_model *m;
  ap_cluster *cl;
  cost_env *env;
} setup;

static void setup_load(setup *u, const char *model, const char *cluster) {
  u->ctx = ap_ctx_new();
  u->m = NULL, u->cl = NULL, u->env = NULL;
  if (ap_model_load(u->ctx, model, &u->m) || ap_cluster_load(u->ctx, cluster, &u->cl) ||
      cost_env_new(u->ctx, u->m, u->cl, NULL, &u->env))
    fail_msg("%s on %s: %s", model, cluster, ap_ctx_error(u->ctx));
}

static void setup_free(setup *u) {
  cost_env_free(u->env);
  ap_cluster_free(u->cl);
  ap_model_free(u->m);
  ap_ctx_free(u->ctx);
}

static void test_parts_add_up(void **state) {
  (void)state;
  static const struct {
    const char *model, *cluster;
  } setups[] = {{"llama-3-70b", "dgx-h100:8x8"}, {"llama-3-8b", "a100-80gb:16"}, {"mixtral-8x7b", "h100:32"},
                {"gpt3-175b", "a100-80gb:64"}};
  static const plan_stack stacks[] = {PLAN_STACK_DEFAULT, PLAN_STACK_MEGATRON_DEEPSPEED, PLAN_STACK_TORCHTITAN,
                                      PLAN_STACK_LLM_FOUNDRY, PLAN_STACK_ANY};
  int n_checked = 0;
  cost_result *r = malloc(sizeof *r);
  assert_non_null(r);
  for (size_t si = 0; si < AP_COUNT(setups); si++) {
    setup u;
    setup_load(&u, setups[si].model, setups[si].cluster);
    const cost_env *env = u.env;
    int64_t n_dev = hw_cluster_of(u.cl)->n_devices;
    for (int64_t tp = 1; tp <= 8; tp *= 2)
      for (int64_t pp = 1; pp <= 4; pp *= 2)
        for (int zero = 0; zero <= 3; zero++)
          for (int rc = 0; rc < PLAN_RECOMPUTE_COUNT_; rc++)
            for (size_t k = 0; k < AP_COUNT(stacks); k++) {
              if (n_dev % (tp * pp)) continue;
              plan p;
              plan_defaults(&p);
              p.tp = tp, p.pp = pp, p.dp = n_dev / (tp * pp);
              p.sequence_parallel = tp > 1;
              p.zero_stage = zero;
              p.recompute = (plan_recompute)rc;
              p.stack = stacks[k];
              p.micro_batch_size = 1;
              p.seq_length = 4096;
              p.global_batch_size = p.dp * 8;
              p.n_micro_batches = 8;
              p.offload_optimizer = (tp + zero) % 5 == 0 && zero >= 1 ? PLAN_OFFLOAD_CPU : PLAN_OFFLOAD_NONE;
              ap_ctx *scratch = ap_ctx_new();
              ap_status st = cost_estimate(scratch, env, &p, r);
              ap_ctx_free(scratch);
              if (st) continue; /* a plan the model or the stack cannot run */
              char what[160];
              snprintf(what, sizeof what, "%s tp%lld pp%lld z%d rc%d stack %d", setups[si].model, (long long)tp,
                       (long long)pp, zero, rc, (int)stacks[k]);
              check_result(env, &p, r, what);
              n_checked++;
            }
    setup_free(&u);
  }
  free(r);
  printf("# %d plans: every stage's parts add up to its total\n", n_checked);
  assert_true(n_checked >= 300);
}

/* The NCCL communicators a rank holds (memory.c cost_nccl_comms): one per parallel group of more than one rank,
 * one per pipeline neighbour, and the default group unless the rank's one group is the world. */
static void test_nccl_comms(void **state) {
  (void)state;
  static const struct {
    int64_t tp, pp, dp, cp, ep;
    int rank;
    bool pairs;
    int want;
  } cases[] = {
      {1, 1, 1, 1, 1, 0, true, 0},  /* one device: no communicator */
      {1, 1, 8, 1, 1, 0, false, 1}, /* FSDP or DDP over the default group */
      {8, 1, 1, 1, 1, 0, true, 1},  /* tensor parallel over every rank */
      {8, 1, 4, 1, 1, 0, true, 3},  /* tp, dp and the default group */
      {8, 12, 4, 1, 1, 0, true, 4}, /* BigScience's tp 8 pp 12 dp 4, first stage: tp, dp, the next stage, default */
      {8, 12, 4, 1, 1, 5, true, 5}, /* a middle stage: both neighbours */
      {8, 12, 4, 1, 1, 11, true, 4},
      {8, 12, 4, 1, 1, 5, false, 4}, /* batched sends: the pipeline group's one communicator */
      {8, 12, 4, 1, 1, 0, false, 4},
      {1, 4, 1, 1, 1, 0, true, 2},  /* pp only: the next stage and the default group */
      {1, 4, 1, 1, 1, 0, false, 1}, /* pp only, batched: the pipeline group is every rank */
      {2, 1, 2, 2, 1, 0, true, 4},  /* tp, cp, the dp-cp gradient group, default */
      {1, 2, 1, 1, 1, 0, true, 1},  /* pp 2: the one pair is every rank */
      {1, 1, 8, 1, 4, 0, true, 3},  /* dp 8 (the world) ep 4: ep, the expert-data-parallel group (edp 2), default */
  };
  for (size_t i = 0; i < AP_COUNT(cases); i++) {
    plan p;
    plan_defaults(&p);
    p.tp = cases[i].tp, p.pp = cases[i].pp, p.dp = cases[i].dp, p.cp = cases[i].cp, p.ep = cases[i].ep;
    plan_stack_mem sm = {.p2p_pairs = cases[i].pairs};
    int got = cost_nccl_comms(&p, cases[i].rank, &sm, false);
    if (got != cases[i].want)
      fail_msg("case %zu (tp%lld pp%lld dp%lld cp%lld ep%lld rank %d): %d communicators, expected %d", i,
               (long long)p.tp, (long long)p.pp, (long long)p.dp, (long long)p.cp, (long long)p.ep, cases[i].rank,
               got, cases[i].want);
  }
}

/* The example: Llama-3-70B on 64 H100, tp 4, pp 2, ZeRO 2; the parts add up to the total, the
 * reserve among them. */
static void test_estimate_example(void **state) {
  (void)state;
  setup u;
  setup_load(&u, "llama-3-70b", "dgx-h100:8x8");
  ap_ctx *ctx = u.ctx;
  const cost_env *env = u.env;
  plan p;
  plan_defaults(&p);
  p.tp = 4, p.pp = 2, p.dp = 8, p.zero_stage = 2, p.sequence_parallel = true;
  p.global_batch_size = 1024, p.seq_length = 8192, p.micro_batch_size = 1, p.n_micro_batches = 128;
  cost_result *r = malloc(sizeof *r);
  assert_non_null(r);
  if (cost_estimate(ctx, env, &p, r)) fail_msg("%s", ap_ctx_error(ctx));
  check_result(env, &p, r, "example");
  assert_true(r->mem[r->peak_rank].reserve > 0);
  free(r);
  setup_free(&u);
}

/* The advice on a plan that does not fit: Llama-3-8B on 8 A100-80GB without ZeRO needs 16+ bytes per parameter
 * with 1024-token sequences; ZeRO-1 alone brings it under 80 GiB and must be offered, as must ZeRO 2 and 3, every recompute
 * kind above none and the offloads; each verdict is the cost model's. */
static void test_advice_every_saver(void **state) {
  (void)state;
  setup u;
  setup_load(&u, "llama-3-8b", "dgx-a100-80gb");
  ap_ctx *ctx = u.ctx;
  const cost_env *env = u.env;
  plan p;
  plan_defaults(&p);
  p.dp = 8, p.zero_stage = 0, p.recompute = PLAN_RECOMPUTE_NONE;
  p.global_batch_size = 64, p.seq_length = 1024, p.micro_batch_size = 2, p.n_micro_batches = 4;
  cost_result *r = malloc(sizeof *r);
  assert_non_null(r);
  if (cost_estimate(ctx, env, &p, r)) fail_msg("%s", ap_ctx_error(ctx));
  assert_false(r->fits);
  double limit = r->capacity_bytes;
  advice_fix f[ADVICE_MAX];
  int n = advice_fixes(env, &p, limit, f);
  static const char *const want[] = {"ZeRO 1", "ZeRO 2", "ZeRO 3", "selective recompute", "op recompute",
                                     "full recompute", "micro-batch size 1", "ZeRO-Offload", "ZeRO-Infinity",
                                     "pipeline parallel 2", "tensor parallel 2"};
  for (size_t w = 0; w < AP_COUNT(want); w++) {
    bool found = false;
    for (int i = 0; i < n; i++) found |= strstr(f[i].change, want[w]) != NULL;
    if (!found) fail_msg("the advice lacks %s", want[w]);
  }
  bool zero1_fits = false;
  for (int i = 0; i < n; i++) {
    assert_int_equal(cost_estimate(ctx, env, &f[i].p, r), AP_OK);
    assert_rel_close(f[i].peak_bytes, r->peak_mem_bytes, 1e-12);
    assert_true(f[i].fits == (r->fits && r->peak_mem_bytes <= limit));
    if (strncmp(f[i].change, "ZeRO 1", 6) == 0) zero1_fits = f[i].fits;
    assert_false(plan_equal(&f[i].p, &p));
  }
  assert_true(zero1_fits);
  /* A plan already on ZeRO 3 with full recompute is offered neither again. */
  p.zero_stage = 3, p.recompute = PLAN_RECOMPUTE_FULL;
  n = advice_fixes(env, &p, limit, f);
  for (int i = 0; i < n; i++) {
    assert_null(strstr(f[i].change, "ZeRO 1"));
    assert_null(strstr(f[i].change, "full recompute of"));
  }
  /* Only what the stack runs: torchtitan has no ZeRO-1 (optimizer-only sharding). */
  p.zero_stage = 0, p.recompute = PLAN_RECOMPUTE_NONE, p.stack = PLAN_STACK_TORCHTITAN;
  n = advice_fixes(env, &p, limit, f);
  for (int i = 0; i < n; i++) assert_null(strstr(f[i].change, "ZeRO 1"));
  free(r);
  setup_free(&u);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parts_add_up),
      cmocka_unit_test(test_estimate_example),
      cmocka_unit_test(test_nccl_comms),
      cmocka_unit_test(test_advice_every_saver),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
