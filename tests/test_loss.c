/* The loss as part of the plan space (issue 10): each stack's fused and unfused cross entropy (plan/stack.c
 * [MLM-ce] … [FA-ce]), their memory (cost/memory.c) and traffic (cost/compute.c), the stack's default where a
 * plan does not state the loss (completion, plan files, flags), and the search's choice: the fused loss where
 * the stack has one that cannot lose, the unfused one where the stack has none or --fix says so. */
#include <stdlib.h>
#include <unistd.h>

#include "testutil.h"
#include "core/core.h"
#include "cost/cost.h"
#include "cost/internal.h"
#include "plan/plan_api.h"
#include "plan/stack.h"
#include "search/recipe/complete.h"
#include "search/recipe/search.h"

typedef struct {
  ap_ctx *ctx;
  ap_model *model;
  ap_cluster *cluster;
  cost_env *env;
} fixture;

static void fixture_load(fixture *f, const char *model, const char *cluster) {
  f->ctx = ap_ctx_new();
  if (ap_model_load(f->ctx, model, &f->model) || ap_cluster_load(f->ctx, cluster, &f->cluster) ||
      cost_env_new(f->ctx, f->model, f->cluster, NULL, &f->env))
    fail_msg("%s on %s: %s", model, cluster, ap_ctx_error(f->ctx));
}

static void fixture_free(fixture *f) {
  cost_env_free(f->env);
  ap_cluster_free(f->cluster);
  ap_model_free(f->model);
  ap_ctx_free(f->ctx);
}

/* A llama-3.1-8b plan on 8 devices: tp 2 for the Megatron stacks (and torchtitan, with ZeRO-3), FSDP (ZeRO-3, tp
 * 1) for llm-foundry. */
static plan plan_on(plan_stack st, bool fused) {
  plan p;
  plan_defaults(&p);
  p.stack = st;
  p.seq_length = 8192, p.micro_batch_size = 2, p.n_micro_batches = 1;
  if (st == PLAN_STACK_LLM_FOUNDRY) p.dp = 8, p.zero_stage = 3;
  else p.tp = 2, p.dp = 4, p.sequence_parallel = true;
  if (st == PLAN_STACK_TORCHTITAN) p.zero_stage = 3; /* torchtitan has no ZeRO-1 */
  p.global_batch_size = p.micro_batch_size * p.dp;
  p.fused_loss = fused;
  return p;
}

/* The table's facts: which stacks default to the fused loss, which have none, and that every fused loss there is
 * can never lose to its unfused one, which is what lets the search take it without costing both (search.c). */
static void test_stack_loss_facts(void **state) {
  (void)state;
  assert_false(plan_stack_fused_default(PLAN_STACK_MEGATRON_LM)); /* ModelParallelConfig: False [MLM-fce] */
  assert_true(plan_stack_fused_default(PLAN_STACK_MEGATRON_BRIDGE)); /* gpt_provider.py [MB-fce] */
  assert_true(plan_stack_fused_default(PLAN_STACK_NEMO));            /* GPTConfig [NeMo-fce] */
  assert_true(plan_stack_fused_default(PLAN_STACK_LLM_FOUNDRY));     /* loss_fn fused_crossentropy [LF-ce] */
  assert_false(plan_stack_fused_default(PLAN_STACK_DEFAULT));
  assert_true(plan_stack_get(PLAN_STACK_TORCHTITAN)->fused_loss);    /* ChunkedLossWrapper [TT-chunk] */
  assert_false(plan_stack_fused_default(PLAN_STACK_TORCHTITAN));      /* validate's rows ran the unchunked one */
  assert_int_equal(plan_stack_get(PLAN_STACK_TORCHTITAN)->loss.fused_chunks, PLAN_STACK_TT_LOSS_CHUNKS);
  assert_false(plan_stack_get(PLAN_STACK_DEEPSPEED)->fused_loss);    /* [DS-loss] */
  assert_false(plan_stack_get(PLAN_STACK_MEGATRON_DEEPSPEED)->fused_loss);
  for (int s = 0; s < PLAN_STACK_DEFAULT; s++) {
    const plan_stack_info *si = plan_stack_get((plan_stack)s);
    if (si->fused_loss && !plan_stack_fused_dominates((plan_stack)s))
      fail_msg("%s: its fused loss can lose to its unfused one; the search would have to cost both", si->name);
    assert_true(plan_stack_search_fused((plan_stack)s) == si->fused_loss);
    char why[128];
    plan p = plan_on((plan_stack)s, true);
    assert_true(plan_stack_runs((plan_stack)s, &p, why, sizeof why) == si->fused_loss);
  }
}

/* Memory of the loss, per stack: (bytes per logit − 2) per logit element of the last rank's vocabulary shard,
 * plus an fp32 log-sum-exp per token with a fused loss. Megatron's native fusion keeps its fp32 copy (6 bytes,
 * the cost model's loss_bytes_per_logit); llm-foundry's flash-attn loss 4 bytes, its torch_crossentropy 12; an
 * in-place kernel (any) the logits alone. */
static void test_loss_memory_by_stack(void **state) {
  (void)state;
  fixture f;
  fixture_load(&f, "llama-3.1-8b", "dgx-h100:8");
  const double vocab = 128256, tokens = 2.0 * 8192, six = cost_env_tuning(f.env)->memory.loss_bytes_per_logit;
  static const struct {
    plan_stack st;
    double unfused, fused;
  } cases[] = {{PLAN_STACK_MEGATRON_LM, 0, 0}, {PLAN_STACK_MEGATRON_BRIDGE, 0, 0}, {PLAN_STACK_LLM_FOUNDRY, 12, 4},
               {PLAN_STACK_ANY, 0, 2}};
  for (size_t i = 0; i < AP_COUNT(cases); i++) {
    cost_result r;
    plan p = plan_on(cases[i].st, false);
    double elems = tokens * vocab / (double)p.tp;
    assert_int_equal(cost_estimate(f.ctx, f.env, &p, &r), AP_OK);
    assert_rel_close(r.mem[0].logits, elems * ((cases[i].unfused > 0 ? cases[i].unfused : six) - 2), 1e-12);
    double unfused_total = r.peak_mem_bytes;
    p.fused_loss = true;
    assert_int_equal(cost_estimate(f.ctx, f.env, &p, &r), AP_OK);
    assert_rel_close(r.mem[0].logits, elems * ((cases[i].fused > 0 ? cases[i].fused : six) - 2) + tokens * 4, 1e-12);
    assert_true(r.peak_mem_bytes <= unfused_total + tokens * 4 * 1.5);
  }
  fixture_free(&f);
}

/* torchtitan's chunked loss (stack.c [TT-chunk]): one slice of 8 of the unfused loss's 12 bytes per logit at a
 * time, no 16-bit logits saved in the activations, and an fp32 gradient of the head's input (hidden 4096, not
 * split by tp); its traffic the unfused loss's. Without the slicing the torchtitan plan keeps 12 bytes per
 * logit element, with it less than a fifth of that. */
static void test_chunked_loss(void **state) {
  (void)state;
  fixture f;
  fixture_load(&f, "llama-3.1-8b", "dgx-h100:8");
  const double vocab = 128256, tokens = 2.0 * 8192, hidden = 4096;
  plan p = plan_on(PLAN_STACK_TORCHTITAN, false);
  double elems = tokens * vocab / (double)p.tp;
  cost_result ru, rf;
  assert_int_equal(cost_estimate(f.ctx, f.env, &p, &ru), AP_OK);
  assert_rel_close(ru.mem[0].logits, elems * (12 - 2), 1e-12);
  p.fused_loss = true;
  assert_int_equal(cost_estimate(f.ctx, f.env, &p, &rf), AP_OK);
  assert_rel_close(rf.mem[0].logits, elems * 12 / 8 + 4 * tokens * hidden, 1e-12);
  /* the saved 16-bit logits leave the activations (one micro-batch in flight at pp = 1) */
  assert_rel_close(ru.mem[0].activations - rf.mem[0].activations, 2 * elems, 1e-9);
  assert_true(rf.peak_mem_bytes < ru.peak_mem_bytes - 9 * elems);
  /* the same traffic, so no slower */
  assert_rel_close(rf.iter_s, ru.iter_s, 1e-12);
  fixture_free(&f);
}

/* Traffic of the loss op: Megatron's unfused loss moves 38 bytes per logit element forward and 14 backward, its
 * native fusion 22 and 6 (stack.c [MLM-ce] [MLM-fce]); torchtitan's ATen path 18 and 26; llm-foundry's
 * flash-attn loss the op's own 2 and 4 (one read of the 16-bit logits, twice that backward). */
static void test_loss_traffic(void **state) {
  (void)state;
  fixture f;
  fixture_load(&f, "llama-3.1-8b", "dgx-h100:8");
  const graph *g = cost_env_graph(f.env);
  const graph_block *blk = NULL;
  const graph_op *loss = NULL;
  for (int bi = 0; bi < g->n_blocks; bi++)
    for (int k = 0; k < g->blocks[bi].n_ops; k++)
      if (g->blocks[bi].ops[k].kind == OP_LOSS) blk = &g->blocks[bi], loss = &g->blocks[bi].ops[k];
  assert_non_null(loss);
  static const struct {
    plan_stack st;
    bool fused;
    double fwd, bwd;
  } cases[] = {{PLAN_STACK_MEGATRON_LM, false, 38, 14}, {PLAN_STACK_MEGATRON_LM, true, 22, 6},
               {PLAN_STACK_NEMO, true, 22, 6},          {PLAN_STACK_TORCHTITAN, false, 18, 26},
               {PLAN_STACK_LLM_FOUNDRY, true, 2, 4},    {PLAN_STACK_LLM_FOUNDRY, false, 18, 26}};
  for (size_t i = 0; i < AP_COUNT(cases); i++) {
    plan p = plan_on(cases[i].st, cases[i].fused);
    compute_shard sh = cost_shard_of(&p);
    compute_op_time t = compute_op(cost_group_model(f.env, 0), blk, loss, 2, 8192, &sh);
    double elems = 2.0 * 8192 * 128256 / (cases[i].st == PLAN_STACK_LLM_FOUNDRY ? 1.0 : 2.0);
    /* the op's own figure is per the op's divisor (cp), and its 4-byte loss output */
    double tol = cases[i].st == PLAN_STACK_LLM_FOUNDRY ? 1e-6 : 1e-12;
    assert_rel_close(t.fwd_bytes, elems * cases[i].fwd, tol);
    assert_rel_close(t.bwd_bytes, elems * cases[i].bwd, tol);
  }
  /* The fused loss is faster where it moves less: the same Megatron plan, an iteration shorter with it. */
  cost_result ru, rf;
  plan p = plan_on(PLAN_STACK_MEGATRON_LM, false);
  assert_int_equal(cost_estimate(f.ctx, f.env, &p, &ru), AP_OK);
  p.fused_loss = true;
  assert_int_equal(cost_estimate(f.ctx, f.env, &p, &rf), AP_OK);
  assert_true(rf.iter_s < ru.iter_s);
  fixture_free(&f);
}

static search_opts opts_on(plan_stack st) {
  search_opts o = search_opts_defaults();
  o.global_batch_size = 64;
  o.seq_length = 4096;
  o.top_k = 1;
  o.strategies = 1u << search_strategy_find("grid");
  o.fixed.stack = st;
  return o;
}

/* The search: fused where the stack has it (faster on Megatron-LM, although its default is unfused; torchtitan's
 * chunked loss, which keeps less and moves the same), unfused where it has none (DeepSpeed), and the fixed value
 * with --fix fused_loss=false. */
static void test_search_picks_loss(void **state) {
  (void)state;
  fixture f;
  fixture_load(&f, "llama-3-8b", "dgx-h100:8");
  static const struct {
    plan_stack st;
    int fix; /* -1 none, else the fixed value */
    bool want;
  } cases[] = {{PLAN_STACK_MEGATRON_LM, -1, true}, {PLAN_STACK_MEGATRON_LM, 0, false},
               {PLAN_STACK_TORCHTITAN, -1, true},  {PLAN_STACK_TORCHTITAN, 0, false},
               {PLAN_STACK_DEEPSPEED, -1, false},  {PLAN_STACK_LLM_FOUNDRY, -1, true},
               {PLAN_STACK_LLM_FOUNDRY, 0, false}};
  double t_free = 0;
  for (size_t i = 0; i < AP_COUNT(cases); i++) {
    search_opts o = opts_on(cases[i].st);
    if (cases[i].fix >= 0) o.fixed.fused_loss = cases[i].fix != 0, o.fixed_mask |= PLAN_F(FUSED_LOSS);
    search_result *res = NULL;
    int n = 0;
    if (search_run_all(f.ctx, f.env, &o, &res, &n, NULL)) fail_msg("case %zu: %s", i, ap_ctx_error(f.ctx));
    if (res[0].p.fused_loss != cases[i].want) fail_msg("case %zu: fused_loss %d, want %d", i, res[0].p.fused_loss, cases[i].want);
    /* the stack's choice is never slower than the fixed unfused loss */
    if (cases[i].st == PLAN_STACK_MEGATRON_LM && cases[i].fix < 0) t_free = res[0].r.iter_s;
    if (cases[i].st == PLAN_STACK_MEGATRON_LM && cases[i].fix == 0) assert_true(t_free < res[0].r.iter_s);
    search_results_free(res, n);
  }
  fixture_free(&f);
}

/* Fused where it makes the plan fit: llm-foundry's unfused loss (12 bytes per logit) against its fused one (4),
 * with the memory limit between the two peaks and every searched field fixed to the plan's. */
static void test_search_fused_makes_it_fit(void **state) {
  (void)state;
  fixture f;
  fixture_load(&f, "llama-3.1-8b", "dgx-h100:8");
  plan p = plan_on(PLAN_STACK_LLM_FOUNDRY, false);
  p.micro_batch_size = 1, p.global_batch_size = 8, p.recompute = PLAN_RECOMPUTE_FULL;
  cost_result ru, rf;
  assert_int_equal(cost_estimate(f.ctx, f.env, &p, &ru), AP_OK);
  p.fused_loss = true;
  assert_int_equal(cost_estimate(f.ctx, f.env, &p, &rf), AP_OK);
  assert_true(rf.peak_mem_bytes < ru.peak_mem_bytes);
  search_opts o = opts_on(PLAN_STACK_LLM_FOUNDRY);
  o.global_batch_size = 8, o.seq_length = 8192;
  o.max_mem_fraction = 0.5 * (rf.peak_mem_bytes + ru.peak_mem_bytes) / rf.capacity_bytes;
  assert_true(o.max_mem_fraction < 1);
  o.fixed.tp = 1, o.fixed.pp = 1, o.fixed.dp = 8, o.fixed.cp = 1, o.fixed.micro_batch_size = 1, o.fixed.zero_stage = 3;
  o.fixed.recompute = PLAN_RECOMPUTE_FULL;
  o.fixed_mask = PLAN_F(TP) | PLAN_F(PP) | PLAN_F(DP) | PLAN_F(CP) | PLAN_F(MICRO_BATCH_SIZE) | PLAN_F(ZERO_STAGE) |
                 PLAN_F(RECOMPUTE);
  search_result *res = NULL;
  int n = 0;
  assert_int_equal(search_run_all(f.ctx, f.env, &o, &res, &n, NULL), AP_OK);
  assert_true(res[0].p.fused_loss);
  search_results_free(res, n);
  o.fixed.fused_loss = false, o.fixed_mask |= PLAN_F(FUSED_LOSS);
  assert_int_equal(search_run_all(f.ctx, f.env, &o, &res, &n, NULL), AP_INFEASIBLE);
  search_results_free(res, n);
  fixture_free(&f);
}

/* The completion (validate's rows, which never state the loss): the stack's default, unless stated. */
static void test_complete_takes_stack_default(void **state) {
  (void)state;
  fixture f;
  fixture_load(&f, "llama-3.1-8b", "dgx-h100:8");
  static const struct {
    plan_stack st;
    bool stated, value, want;
  } cases[] = {{PLAN_STACK_MEGATRON_LM, false, false, false}, {PLAN_STACK_MEGATRON_BRIDGE, false, false, true},
               {PLAN_STACK_LLM_FOUNDRY, false, false, true},  {PLAN_STACK_LLM_FOUNDRY, true, false, false},
               {PLAN_STACK_MEGATRON_LM, true, true, true}};
  for (size_t i = 0; i < AP_COUNT(cases); i++) {
    plan p = plan_on(cases[i].st, cases[i].value);
    unsigned stated = COMPLETE_FIELDS & ~(PLAN_F(SCHEDULE) | PLAN_F(VPP));
    if (cases[i].stated) stated |= PLAN_F(FUSED_LOSS);
    plan best;
    cost_result r;
    if (complete_plan(f.ctx, f.env, &p, stated, NULL, &best, &r, NULL)) fail_msg("case %zu: %s", i, ap_ctx_error(f.ctx));
    if (best.fused_loss != cases[i].want) fail_msg("case %zu: fused_loss %d, want %d", i, best.fused_loss, cases[i].want);
  }
  fixture_free(&f);
}

/* Plan files and flags: a plan that leaves the loss out takes its stack's default; the writer states false where
 * that default is fused, so every plan reads back as it was written. */
static void test_plan_file_loss_default(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  static const struct {
    plan_stack st;
    bool fused;
    const char *written; /* what the JSON says of the loss; NULL: nothing */
  } cases[] = {{PLAN_STACK_LLM_FOUNDRY, false, "\"fused_loss\":false"}, {PLAN_STACK_LLM_FOUNDRY, true, "\"fused_loss\":true"},
               {PLAN_STACK_MEGATRON_LM, false, NULL},                   {PLAN_STACK_MEGATRON_LM, true, "\"fused_loss\":true"}};
  char path[] = "/tmp/autopar-test-loss-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  for (size_t i = 0; i < AP_COUNT(cases); i++) {
    plan p = plan_on(cases[i].st, cases[i].fused);
    strbuf sb = {0};
    plan_to_json(&p, &sb);
    char *text = sb_take(&sb);
    assert_non_null(text);
    if (cases[i].written ? !strstr(text, cases[i].written) : strstr(text, "fused_loss") != NULL)
      fail_msg("case %zu: %s", i, text);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
    free(text);
    ap_plan *ap = NULL;
    assert_int_equal(ap_plan_load(ctx, path, &ap), AP_OK);
    plan_resolve(ap, 8);
    assert_true(ap->p.fused_loss == cases[i].fused);
    ap_plan_free(ap);
  }
  /* A plan file for llm-foundry without the key: the stack's default, fused. */
  FILE *fp = fopen(path, "w");
  assert_non_null(fp);
  fputs("{\"format\":\"autopar-plan/1\",\"stack\":\"llm-foundry\",\"parallel\":{\"dp\":8},\"optimizer\":{\"zero_stage\":3}}", fp);
  fclose(fp);
  ap_plan *ap = NULL;
  assert_int_equal(ap_plan_load(ctx, path, &ap), AP_OK);
  plan_resolve(ap, 8);
  assert_true(ap->p.fused_loss);
  ap_plan_free(ap);
  /* Flags: set the stack only, then the loss too. */
  assert_int_equal(ap_plan_new(ctx, &ap), AP_OK);
  assert_int_equal(ap_plan_set(ctx, ap, "stack", "megatron-bridge"), AP_OK);
  plan_resolve(ap, 8);
  assert_true(ap->p.fused_loss);
  assert_int_equal(ap_plan_set(ctx, ap, "fused_loss", "0"), AP_OK);
  plan_resolve(ap, 8);
  assert_false(ap->p.fused_loss);
  ap_plan_free(ap);
  unlink(path);
  ap_ctx_free(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stack_loss_facts), cmocka_unit_test(test_chunked_loss),       cmocka_unit_test(test_loss_memory_by_stack),
      cmocka_unit_test(test_loss_traffic),           cmocka_unit_test(test_search_picks_loss),
      cmocka_unit_test(test_search_fused_makes_it_fit), cmocka_unit_test(test_complete_takes_stack_default),
      cmocka_unit_test(test_plan_file_loss_default),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
