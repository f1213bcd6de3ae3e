/* The event timeline of a pipelined op-level plan (search/graph_pipe.c): a 2- and a 3-stage 1F1B pipeline
 * against timelines computed by hand (blocking sends on one FIFO stream per link direction, the weight-gradient
 * sync after each stage's last backward), the schedule kinds it refuses, and a single stage, whose timeline is
 * the op-level simulation of the whole graph (graph_sim.c) itself, at one and at several micro-batches. */
#include <math.h>
#include <stdlib.h>

#include "testutil.h"
#include "testmodels.h"

#include "hw/hw.h"
#include "search/graph/graph_pipe.h"
#include "search/graph/graph_sim.h"

static const gpipe_event *find_ev(const gpipe_event *ev, size_t n, gpipe_kind k, int stage, int64_t mb) {
  for (size_t i = 0; i < n; i++)
    if (ev[i].kind == k && ev[i].stage == stage && ev[i].micro_batch == mb) return &ev[i];
  fail_msg("no event kind %d stage %d micro-batch %lld", (int)k, stage, (long long)mb);
  return NULL;
}

static void expect_at(const gpipe_event *ev, size_t n, gpipe_kind k, int stage, int64_t mb, double start, double end) {
  const gpipe_event *e = find_ev(ev, n, k, stage, mb);
  if (fabs(e->start_s - start) > 1e-12 || fabs(e->end_s - end) > 1e-12)
    fail_msg("kind %d stage %d mb %lld: [%g, %g], expected [%g, %g]", (int)k, stage, (long long)mb, e->start_s, e->end_s,
             start, end);
}

/* Two stages, three micro-batches. Stage 0: F 1, B 2, sync 0.7, sends 0.5 each way; stage 1: F 2, B 3, sync
 * 0.2. 1F1B orders: stage 0 F0 F1 B0 F2 B1 B2, stage 1 F0 B0 F1 B1 F2 B2. By hand, a send holding its sender:
 *   s0 F0 [0,1] act0 [1,1.5]; s0 F1 [1.5,2.5] act1 [2.5,3]; s1 F0 [1.5,3.5] B0 [3.5,6.5] grad0 [6.5,7];
 *   s0 B0 [7,9]; s1 F1 [7,9]; s0 F2 [9,10] act2 [10,10.5]; s1 B1 [9,12] grad1 [12,12.5]; s0 B1 [12.5,14.5];
 *   s1 F2 [12.5,14.5] B2 [14.5,17.5] grad2 [17.5,18], sync [17.5,17.7]; s0 B2 [18,20], sync [20,20.7].
 * 12 passes, 6 sends, 2 syncs; the iteration ends at 20.7. */
static void test_two_stages_by_hand(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  gpipe_stage st[2] = {{1, 2, 0.7, 0.5, 0.5}, {2, 3, 0.2, 0, 0}};
  gpipe_event *ev = NULL;
  size_t n = 0;
  double end = 0;
  assert_int_equal(gpipe_simulate(ctx, st, 2, 3, PLAN_SCHED_1F1B, &ev, &n, &end), AP_OK);
  assert_true(fabs(end - 20.7) < 1e-12);
  assert_int_equal(n, 20);
  expect_at(ev, n, GPIPE_F, 0, 1, 1.5, 2.5);
  expect_at(ev, n, GPIPE_SEND_ACT, 0, 1, 2.5, 3);
  expect_at(ev, n, GPIPE_F, 1, 0, 1.5, 3.5);
  expect_at(ev, n, GPIPE_SEND_GRAD, 1, 0, 6.5, 7);
  expect_at(ev, n, GPIPE_B, 0, 0, 7, 9);
  expect_at(ev, n, GPIPE_F, 0, 2, 9, 10);
  expect_at(ev, n, GPIPE_B, 1, 1, 9, 12);
  expect_at(ev, n, GPIPE_B, 0, 1, 12.5, 14.5);
  expect_at(ev, n, GPIPE_F, 1, 2, 12.5, 14.5);
  expect_at(ev, n, GPIPE_W, 1, -1, 17.5, 17.7);
  expect_at(ev, n, GPIPE_B, 0, 2, 18, 20);
  expect_at(ev, n, GPIPE_W, 0, -1, 20, 20.7);
  free(ev);
  /* the same without events asked for */
  double again = 0;
  assert_int_equal(gpipe_simulate(ctx, st, 2, 3, PLAN_SCHED_1F1B, NULL, NULL, &again), AP_OK);
  assert_true(again == end);
  ap_ctx_free(ctx);
}

/* Three stages, two micro-batches. F/B: 1/1, 1/2, 2/2; sends 0.5 on link 0-1, 0.25 on link 1-2; stage 1 syncs
 * 0.5. 1F1B: stage 0 F0 F1 B0 B1 (two in flight), stage 1 F0 F1 B0 B1, stage 2 F0 B0 F1 B1. By hand:
 *   s0 F0 [0,1] act [1,1.5]; s0 F1 [1.5,2.5] act [2.5,3]; s1 F0 [1.5,2.5] act [2.5,2.75]; s2 F0 [2.75,4.75];
 *   s1 F1 [3,4] act [4,4.25]; s2 B0 [4.75,6.75] grad [6.75,7]; s2 F1 [7,9]; s1 B0 [7,9] grad [9,9.5];
 *   s2 B1 [9,11] grad [11,11.25]; s0 B0 [9.5,10.5]; s1 B1 [11.25,13.25] grad [13.25,13.75], sync
 *   [13.25,13.75]; s0 B1 [13.75,14.75]. 12 passes, 8 sends, 1 sync; the iteration ends at 14.75. */
static void test_three_stages_by_hand(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  gpipe_stage st[3] = {{1, 1, 0, 0.5, 0.5}, {1, 2, 0.5, 0.25, 0.25}, {2, 2, 0, 0, 0}};
  gpipe_event *ev = NULL;
  size_t n = 0;
  double end = 0;
  assert_int_equal(gpipe_simulate(ctx, st, 3, 2, PLAN_SCHED_1F1B, &ev, &n, &end), AP_OK);
  assert_true(fabs(end - 14.75) < 1e-12);
  assert_int_equal(n, 21);
  expect_at(ev, n, GPIPE_SEND_ACT, 1, 0, 2.5, 2.75);
  expect_at(ev, n, GPIPE_F, 2, 0, 2.75, 4.75);
  expect_at(ev, n, GPIPE_F, 1, 1, 3, 4);
  expect_at(ev, n, GPIPE_B, 1, 0, 7, 9);
  expect_at(ev, n, GPIPE_SEND_GRAD, 1, 0, 9, 9.5);
  expect_at(ev, n, GPIPE_B, 0, 0, 9.5, 10.5);
  expect_at(ev, n, GPIPE_SEND_GRAD, 2, 1, 11, 11.25);
  expect_at(ev, n, GPIPE_W, 1, -1, 13.25, 13.75);
  expect_at(ev, n, GPIPE_B, 0, 1, 13.75, 14.75);
  free(ev);
  ap_ctx_free(ctx);
}

/* GPipe runs all forwards first: with free sends and no syncs, 2 stages of F 1, B 1 over 2 micro-batches end
 * at (p + m − 1)(F + B) = 6; a zero-bubble kind (which splits B and W) is refused with one line. */
static void test_kinds(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  gpipe_stage st[2] = {{1, 1, 0, 0, 0}, {1, 1, 0, 0, 0}};
  double end = 0;
  assert_int_equal(gpipe_simulate(ctx, st, 2, 2, PLAN_SCHED_GPIPE, NULL, NULL, &end), AP_OK);
  assert_true(fabs(end - 6) < 1e-12);
  assert_int_equal(gpipe_simulate(ctx, st, 2, 2, PLAN_SCHED_ZB_H1, NULL, NULL, &end), AP_INVALID);
  assert_non_null(strstr(ap_ctx_error(ctx), "zb-h1"));
  assert_null(strchr(ap_ctx_error(ctx), '\n'));
  assert_int_equal(gpipe_simulate(ctx, st, 0, 2, PLAN_SCHED_1F1B, NULL, NULL, &end), AP_INVALID);
  ap_ctx_free(ctx);
}

/* One stage: its timeline (F and B per micro-batch, then the exposed sync) is the op-level simulation of the
 * whole graph, the result simulate gave before the timeline, at the plan's micro-batches and at several. */
static void test_one_stage_is_the_simulation(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  ap_model *m = test_small_model(ctx, 3, 1024, 16, 32000, false);
  ap_cluster *c = NULL;
  assert_int_equal(ap_cluster_load(ctx, "dgx-h100:2x8", &c), AP_OK);
  gplan_result r;
  memset(&r, 0, sizeof r);
  r.a = arena_new();
  assert_int_equal(compute_model_init(ctx, r.a, &hw_cluster_of(c)->groups[0].device, NULL, &r.cm), AP_OK);
  gplan_opts o;
  gplan_opts_init(&o);
  o.gbs = 16;
  o.seq = 512;
  assert_int_equal(gplan_problem(ctx, r.a, model_graph(m), hw_cluster_of(c), &r.cm, &o, (int64_t[]){2, 8}, &r.gp), AP_OK);
  r.choice = arena_alloc(r.a, (size_t)r.gp.n_nodes * sizeof *r.choice);
  int32_t *gch = arena_alloc(r.a, (size_t)r.gp.sp.n_groups * sizeof *gch);
  for (int g = 0; g < r.gp.sp.n_groups; g++) gch[g] = (int32_t)(g % r.gp.sp.n_s[g]); /* with collectives to overlap */
  gp_node_choice(&r.gp, gch, r.choice);
  gsim ref;
  assert_int_equal(gsim_init(ctx, r.a, &r.gp, &ref), AP_OK);
  double whole = gsim_full(&ref, r.choice);
  static const double micro[] = {1, 4, 7};
  for (size_t k = 0; k < AP_COUNT(micro); k++) {
    r.n_micro = micro[k];
    gpipe_stage st[GST_MAX_LAYERS];
    int n_st = 0;
    int64_t n_sim = 0;
    assert_int_equal(gpipe_stage_times(ctx, &r, st, &n_st, &n_sim), AP_OK);
    assert_int_equal(n_st, 1);
    assert_true(n_sim == 2 * (int64_t)r.gp.n_nodes);
    double end = 0;
    size_t n_ev = 0;
    gpipe_event *ev = NULL;
    assert_int_equal(gpipe_simulate(ctx, st, 1, (int64_t)r.n_micro, PLAN_SCHED_1F1B, &ev, &n_ev, &end), AP_OK);
    if (fabs(end - whole) > 1e-12 * whole) fail_msg("%g micro-batches: timeline %.17g s, simulation %.17g s", micro[k], end, whole);
    assert_true(st[0].wsync_s > 0 && st[0].fwd_s > 0 && st[0].bwd_s > 0); /* a sync left exposed, so W counts */
    assert_int_equal(n_ev, 2 * (size_t)r.n_micro + (st[0].wsync_s > 0));
    free(ev);
  }
  arena_free(r.a);
  ap_cluster_free(c);
  ap_model_free(m);
  ap_ctx_free(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_stages_by_hand),
      cmocka_unit_test(test_three_stages_by_hand),
      cmocka_unit_test(test_kinds),
      cmocka_unit_test(test_one_stage_is_the_simulation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
