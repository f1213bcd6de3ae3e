/* Tests of the pruning bounds (cost/bound.c) against the formulas they bound: on random valid plans of several
 * models and clusters, each bound computed from a plan's own evaluation (or, for the ZeRO bounds, from the
 * same plan at a lower stage) must not exceed the value cost_estimate gives. A bound above its value would
 * let the grid prune a plan better than the ones it keeps (issue 10: the zero-bubble-V bound once subtracted
 * 2·W where the closed form subtracts 3·W). */
#include <math.h>
#include <stdlib.h>

#include "testutil.h"

#include "core/core.h"
#include "cost/bound.h"
#include "cost/cost.h"
#include "plan/plan.h"

/* A relative slack for rounding: the bound and the formula sum the same terms in different orders. */
#define SLACK (1 + 1e-9)

static uint64_t rng_state;
static int64_t rnd(int64_t n) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (int64_t)((rng_state >> 33) % (uint64_t)n);
}

/* A random element of the divisors of n. */
static int64_t rnd_divisor(int64_t n) {
  int64_t d[64];
  int k = 0;
  for (int64_t i = 1; i <= n && k < 64; i++)
    if (n % i == 0) d[k++] = i;
  return d[rnd(k)];
}

/* A random plan on n devices for a model of `layers` layers; often invalid (the caller skips those). */
static void random_plan(plan *p, int64_t n, int64_t layers, int64_t gbs, int64_t experts) {
  plan_defaults(p);
  p->tp = rnd_divisor(n > 8 ? 8 : n);
  p->pp = rnd_divisor(n / p->tp);
  p->dp = n / (p->tp * p->pp);
  p->ep = experts > 0 ? rnd_divisor(p->dp) : 1;
  static const plan_schedule sched[] = {PLAN_SCHED_GPIPE, PLAN_SCHED_1F1B, PLAN_SCHED_INTERLEAVED_1F1B,
                                        PLAN_SCHED_ZB_H1, PLAN_SCHED_ZB_V};
  p->schedule = p->pp > 1 ? sched[rnd(5)] : PLAN_SCHED_1F1B;
  p->vpp = p->schedule == PLAN_SCHED_ZB_V ? 2 : p->schedule == PLAN_SCHED_INTERLEAVED_1F1B ? 2 + rnd(3) : 1;
  p->micro_batch_size = rnd_divisor(gbs / p->dp > 0 ? (gbs / p->dp > 8 ? 8 : gbs / p->dp) : 1);
  p->global_batch_size = gbs;
  p->n_micro_batches = gbs / (p->micro_batch_size * p->dp);
  p->sequence_parallel = p->tp > 1;
  p->recompute = (plan_recompute)rnd(PLAN_RECOMPUTE_COUNT_);
  p->zero_stage = (int32_t)rnd(4);
  /* An uneven split now and then: the bounds hold for every split. */
  int64_t chunks = p->pp * p->vpp;
  if (chunks >= 2 && chunks <= layers && rnd(2)) {
    int64_t left = layers;
    for (int64_t c = 0; c < chunks; c++) {
      int64_t rest = chunks - c - 1;
      int64_t v = c == chunks - 1 ? left : 1 + rnd(left - rest);
      p->stage_layers[c] = (int32_t)v;
      left -= v;
    }
    p->n_stage_layers = (int32_t)chunks;
  }
}

static void check_bounds(const char *model, const char *cluster, int64_t gbs, int n_plans) {
  ap_ctx *ctx = ap_ctx_new();
  ap_model *m = NULL;
  ap_cluster *c = NULL;
  cost_env *env = NULL;
  if (ap_model_load(ctx, model, &m) || ap_cluster_load(ctx, cluster, &c) || cost_env_new(ctx, m, c, NULL, &env))
    fail_msg("%s on %s: %s", model, cluster, ap_ctx_error(ctx));
  const graph *g = cost_env_graph(env);
  plan_model_facts facts;
  plan_model_facts_of(g, &facts);
  cost_param_counts pc;
  cost_param_counts_of(g, &pc);
  int64_t n = cost_env_cluster(env)->n_devices;
  cost_result *r = malloc(sizeof *r), *r2 = malloc(sizeof *r2);
  assert_non_null(r);
  assert_non_null(r2);
  int checked = 0, zb_v = 0;
  for (int it = 0; it < 40 * n_plans && checked < n_plans; it++) {
    plan p;
    random_plan(&p, n, facts.n_layers, gbs, facts.n_experts);
    ap_ctx scratch = ctx_child(ctx);
    if (plan_validate(&scratch, &p, g, n, "plan") || cost_estimate(&scratch, env, &p, r)) continue;
    checked++;
    zb_v += p.schedule == PLAN_SCHED_ZB_V;
    double S = 0, W = 0;
    for (int64_t k = 0; k < plan_n_chunks(&p); k++) {
      S += r->chunk_tf_s[k] + r->chunk_tb_s[k];
      W += r->chunk_tw_s[k];
    }
    double pb = cost_bound_pipeline_s(p.schedule, p.vpp, (double)p.n_micro_batches, (double)p.pp, S, W);
    if (pb > r->pipeline_s * SLACK)
      fail_msg("%s: %s pp %lld vpp %lld m %lld: pipeline bound %.9g s exceeds the closed form %.9g s", model,
               plan_schedule_name(p.schedule), (long long)p.pp, (long long)p.vpp, (long long)p.n_micro_batches, pb,
               r->pipeline_s);
    double sb = cost_bound_states_bytes(env, &pc, p.tp, p.cp, p.dp, p.pp, p.ep, p.etp, p.zero_stage);
    if (sb > r->peak_mem_bytes * SLACK)
      fail_msg("%s: states bound %.6g B exceeds the peak %.6g B (zero %d)", model, sb, r->peak_mem_bytes, p.zero_stage);
    double cb = cost_bound_compute_s(env, p.precision, p.global_batch_size, g->default_seq);
    if (cb > r->iter_s * SLACK) fail_msg("%s: compute bound %.6g s exceeds the iteration %.6g s", model, cb, r->iter_s);
    /* The ZeRO bounds: from this plan (at stage 1 or 2) to the same plan at each higher stage. */
    double z2, z3;
    cost_bound_mem_at_zero(&p, r, &z2, &z3);
    for (int32_t z = p.zero_stage + 1; p.zero_stage >= 1 && z <= 3; z++) {
      plan q = p;
      q.zero_stage = z;
      if (cost_estimate(&scratch, env, &q, r2)) continue;
      double b = z == 2 ? z2 : z3;
      if (b > r2->peak_mem_bytes * SLACK)
        fail_msg("%s: the ZeRO %d bound %.6g B from stage %d exceeds the peak %.6g B", model, z, b, p.zero_stage,
                 r2->peak_mem_bytes);
    }
  }
  if (checked < n_plans / 2) fail_msg("%s on %s: only %d valid random plans", model, cluster, checked);
  (void)zb_v;
  free(r);
  free(r2);
  cost_env_free(env);
  ap_cluster_free(c);
  ap_model_free(m);
  ap_ctx_free(ctx);
}

static void test_bounds_dense(void **state) {
  (void)state;
  rng_state = 0x1234567u;
  check_bounds("llama-3-8b", "dgx-h100:2x8", 64, 300);
  check_bounds("gpt2", "a100:8", 32, 200);
}

static void test_bounds_moe(void **state) {
  (void)state;
  rng_state = 0x7654321u;
  check_bounds("mixtral-8x7b", "dgx-h100:4x8", 128, 200);
}

/* The closed form's zero-bubble rules are the bound's: a plan of equal ranks with t = 3·w makes ZB-V
 * bubble-free, and the bound then equals m·S/pp exactly (the old 2·W bound exceeded it). */
static void test_zb_v_bound_exact(void **state) {
  (void)state;
  double pp = 4, m = 8, t = 3, w = 1, S = pp * t, W = pp * w;
  double b = cost_bound_pipeline_s(PLAN_SCHED_ZB_V, 2, m, pp, S, W);
  assert_true(fabs(b - m * t) < 1e-12);
  double old = fmax(m * S / pp, (m - 0.5) * S / pp + (S - 2 * W) / 2);
  assert_true(old > m * t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bounds_dense),
      cmocka_unit_test(test_bounds_moe),
      cmocka_unit_test(test_zb_v_bound_exact),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
