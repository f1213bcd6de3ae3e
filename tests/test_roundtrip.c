/* What the planner picks, estimate accepts (issue 22): for a set of scenarios over the stacks and the planner's
 * strategies (Llama-3.1-405B's 128-chunk interleaved split with an embedding-only and a head-only chunk,
 * stage-dp's uneven splits, MoE with expert parallelism, offload, torchtitan's chunked loss, DeepSpeed, the
 * executor's per-chunk recompute), the winner of ap_plan_search, exported as json, reloaded and estimated
 * (estimate --plan) gives the planner's iteration time and peak memory; so does the same plan given field by
 * field through ap_plan_set, which is what estimate's flags call (--tp 8 --pp 16 --vpp 8 …), and, where the
 * planner's split is the default one (plan_split_default), without --stage-layers too. Per-chunk recompute
 * counts have no flag: they round-trip through the plan file, and only the stacks that run them (autopar, any)
 * get them. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#include "model/model.h"
#include "plan/plan.h"
#include "plan/plan_api.h"
#include "plan/stack.h"

static const struct {
  const char *model, *cluster, *stack;
  int64_t gbs, seq;
} scenarios[] = {
    {"llama-3.1-405b", "dgx-h100:2048x8", NULL, 2048, 8192},
    {"llama-3-70b", "dgx-h100:8x8", NULL, 1024, 8192},
    {"llama-3-70b", "dgx-h100:8x8", "torchtitan", 1024, 8192},
    {"llama-3-70b", "h100:8", NULL, 64, 4096}, /* nothing fits without offload */
    {"mixtral-8x7b", "dgx-h100:4x8", NULL, 256, 4096},
    {"llama-3-8b", "h100:8", "deepspeed", 64, 4096},
    {"llama-3-8b", "dgx-h100:2x8", "autopar", 64, 4096},
    {"gpt3-175b", "dgx-a100:16x8", "megatron-deepspeed", 1536, 2048},
};

static double num(const json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }

/* Iteration time and peak memory of ap's estimate on (m, c). */
static void estimate(ap_ctx *ctx, ap_model *m, ap_cluster *c, ap_plan *ap, const char *what, double *t, double *mem) {
  char *out = NULL;
  if (ap_estimate(ctx, m, c, ap, AP_OUT_JSON, &out)) fail_msg("%s: %s", what, ap_ctx_error(ctx));
  json_error_t e;
  json_t *d = json_loads(out, 0, &e);
  assert_non_null(d);
  *t = num(d, "iteration_time_s");
  *mem = num(json_object_get(d, "memory"), "peak_bytes");
  json_decref(d);
  ap_free(out);
}

static void same(const char *what, size_t i, double got, double want) {
  if (!(fabs(got - want) <= 1e-12 * fabs(want)))
    fail_msg("scenario %zu, %s: %.17g, the planner's %.17g", i, what, got, want);
}

static void test_plan_estimate_round_trip(void **state) {
  (void)state;
  char dir[] = "/tmp/ap_roundtrip.XXXXXX";
  assert_non_null(mkdtemp(dir));
  int n_default_split = 0, n_per_chunk = 0;
  for (size_t i = 0; i < AP_COUNT(scenarios); i++) {
    ap_ctx *ctx = ap_ctx_new();
    ap_model *m = NULL;
    ap_cluster *c = NULL;
    if (ap_model_load(ctx, scenarios[i].model, &m) || ap_cluster_load(ctx, scenarios[i].cluster, &c))
      fail_msg("%s", ap_ctx_error(ctx));
    ap_search_opts o;
    ap_search_opts_init(&o);
    o.global_batch_size = scenarios[i].gbs;
    o.seq_length = scenarios[i].seq;
    o.top_k = 1;
    o.stack = scenarios[i].stack;
    char *out = NULL;
    ap_plan *best = NULL;
    if (ap_plan_search(ctx, m, c, &o, AP_OUT_JSON, &out, &best)) fail_msg("scenario %zu: %s", i, ap_ctx_error(ctx));
    json_error_t e;
    json_t *doc = json_loads(out, 0, &e);
    assert_non_null(doc);
    json_t *pl = json_array_get(json_object_get(doc, "plans"), 0);
    double t_plan = num(pl, "iteration_time_s"), m_plan = num(json_object_get(pl, "memory"), "peak_bytes");
    json_decref(doc);
    ap_free(out);

    /* plan -> export json -> estimate --plan */
    char *js = NULL, path[96];
    if (ap_export(ctx, m, best, "json", &js)) fail_msg("scenario %zu: %s", i, ap_ctx_error(ctx));
    snprintf(path, sizeof path, "%s/p%zu.json", dir, i);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(js, f);
    fclose(f);
    ap_free(js);
    ap_plan *back = NULL;
    assert_int_equal(ap_plan_load(ctx, path, &back), AP_OK);
    double t, mem;
    estimate(ctx, m, c, back, "estimate --plan", &t, &mem);
    same("estimate --plan, time", i, t, t_plan);
    same("estimate --plan, peak memory", i, mem, m_plan);
    ap_plan_free(back);

    /* The same plan through the flags (ap_plan_set of every field that has one). Per-chunk counts have none. */
    const plan *p = &best->p;
    if (p->n_chunk_recompute > 0) {
      n_per_chunk++;
      const plan_stack_info *si = plan_stack_get(p->stack);
      assert_true(si && si->chunk_recompute);
    } else {
      int32_t dflt[PLAN_MAX_CHUNKS];
      plan_model_facts facts;
      plan_model_facts_of(model_graph(m), &facts);
      bool default_split = p->n_stage_layers == 0 ||
                           (plan_split_default(facts.n_layers, plan_n_chunks(p), dflt) &&
                            memcmp(dflt, p->stage_layers, sizeof dflt[0] * (size_t)plan_n_chunks(p)) == 0);
      for (int with_split = 1; with_split >= (default_split ? 0 : 1); with_split--) {
        ap_plan *fl = NULL;
        assert_int_equal(ap_plan_new(ctx, &fl), AP_OK);
        const char *key;
        for (size_t k = 0; (key = ap_plan_key(k, NULL)); k++) {
          const plan_field *fd = plan_field_find(key);
          if (!with_split && fd->id == PLAN_F_STAGE_LAYERS) continue;
          /* the stack as plan was asked: not given where plan took the default (so estimate must take it too) */
          if (fd->id == PLAN_F_STACK && !scenarios[i].stack) continue;
          char v[2048];
          plan_field_format(p, fd, v, sizeof v);
          if (fd->kind == PLAN_FK_LIST && !v[0]) continue; /* an empty list: the flag not given */
          if (ap_plan_set(ctx, fl, key, v)) fail_msg("scenario %zu: --%s %s: %s", i, key, v, ap_ctx_error(ctx));
        }
        estimate(ctx, m, c, fl, with_split ? "flags" : "flags without --stage-layers", &t, &mem);
        same(with_split ? "flags, time" : "flags without --stage-layers, time", i, t, t_plan);
        same(with_split ? "flags, peak memory" : "flags without --stage-layers, peak memory", i, mem, m_plan);
        if (!with_split && p->n_stage_layers > 0) n_default_split++;
        ap_plan_free(fl);
      }
    }
    ap_plan_free(best);
    ap_cluster_free(c);
    ap_model_free(m);
    ap_ctx_free(ctx);
  }
  /* 405B's [0, 1, …, 1, 0] is reproduced by --vpp alone (plan_split_default), which it was not before. */
  assert_true(n_default_split >= 1);
  print_message("# %d scenarios, %d with a split stated that --vpp alone reproduces, %d with per-chunk recompute\n",
                (int)AP_COUNT(scenarios), n_default_split, n_per_chunk);
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_plan_estimate_round_trip)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
