/* Differential test of the closed-form pipeline time (cost/schedule.c) against the event-driven simulator
 * (cost/sim.c, which replays plan/schedule.h's per-stage orders) on uneven splits, m = 1 … 2·pp, every schedule
 * kind; and the facts of the ZB-V order that the closed form's two paths (schedule_zbv_paths_s) rest on. Issue 10: a ZB-V plan of gpt3-175b (pp 32, 16 micro-batches, uneven split) was priced 5.5% under its
 * simulation; the reproduction, pp 32 with 2 + 1 layers per rank and 2 + 2 on one to eight bottom ranks, took
 * 6 units per micro-batch in the simulator where the closed form's step said 5. tests/test_closed_form.c holds
 * the planner's top plans and uniform stages; this file the synthetic uneven splits. */
#include <math.h>
#include <stdlib.h>

#include "testutil.h"

#include "cost/internal.h"
#include "plan/schedule.h"

static cost_result r;

static void zb_v_plan(plan *p, int64_t pp, int64_t m) {
  plan_defaults(p);
  p->pp = pp;
  p->schedule = PLAN_SCHED_ZB_V;
  p->vpp = 2;
  p->n_micro_batches = m;
}

/* The order's facts (schedule.c, above schedule_zbv_paths_s): on rank r the input-gradient pass of
 * micro-batch 0's up chunk comes after a_r + 1 forwards of that chunk, a_r = min(r, m − 1); the bottom rank's
 * forwards alternate its down and up chunk micro-batch by micro-batch, and for m <= pp all of them come before
 * its first input-gradient pass. */
static void test_zb_v_order_facts(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  int n = 0, n_bad = 0;
  for (int64_t pp = 2; pp <= 32; pp *= 2)
    for (int64_t m = 1; m <= 8 * pp; m += m < 2 * pp ? 1 : pp) {
      plan p;
      zb_v_plan(&p, pp, m);
      plan_schedule_order o;
      assert_int_equal(plan_schedule_build(ctx, &p, &o), AP_OK);
      for (int64_t rk = 0; rk < pp; rk++) {
        int64_t up = 2 * pp - 1 - rk, ahead = -1;
        for (size_t i = o.first[rk]; i < o.first[rk + 1]; i++) {
          if (o.items[i].chunk != up) continue;
          if (o.items[i].pass == SCHED_B) break;
          if (o.items[i].pass == SCHED_F) ahead++;
        }
        if (ahead != (rk < m - 1 ? rk : m - 1) && ++n_bad)
          print_message("pp %lld m %lld rank %lld: %lld forwards ahead\n", (long long)pp, (long long)m, (long long)rk,
                        (long long)ahead);
        n++;
      }
      int64_t want = 0; /* the bottom rank's forwards: chunk pp−1 then pp of micro-batch 0, then of 1, … */
      bool seen_b = false;
      for (size_t i = o.first[pp - 1]; i < o.first[pp]; i++) {
        seen_b |= o.items[i].pass == SCHED_B;
        if (o.items[i].pass != SCHED_F) continue;
        if (seen_b && m <= pp && ++n_bad) print_message("pp %lld m %lld: bottom forward after a backward\n", (long long)pp, (long long)m);
        int64_t c = o.items[i].chunk, mb = o.items[i].micro_batch;
        if ((c != (want % 2 ? pp : pp - 1) || mb != want / 2) && ++n_bad)
          print_message("pp %lld m %lld: bottom forward %lld is chunk %lld mb %lld\n", (long long)pp, (long long)m,
                        (long long)want, (long long)c, (long long)mb);
        want++;
      }
      plan_schedule_free(&o);
    }
  assert_true(n > 500);
  assert_int_equal(n_bad, 0);
  ap_ctx_free(ctx);
}

/* Layers of chunk c of rank rk: family 0 the reproduction (2 + 1 per rank, 2 + 2 on the nbot bottom
 * ranks; 2 or 3 layers per rank for one chunk per rank), family 1 a pseudo-random 1 … 3 per chunk. */
static double layers(int family, const plan *p, int64_t c, int64_t rk, int64_t nbot, unsigned *seed) {
  if (family == 1) {
    *seed = *seed * 1103515245u + 12345u;
    return 1 + (double)((*seed >> 16) % 3);
  }
  bool bottom = rk >= p->pp - nbot;
  if (p->vpp == 1) return bottom ? 3 : 2;
  return c < p->pp ? 2 : bottom ? 2 : 1;
}

/* Fills r's chunk times and rc's per-rank sums as cost_estimate does (exposed sends on the rank's forward except
 * the first, backward except the last), per layer F : B : W = ratio; returns the closed form. */
static double setup(const plan *p, int family, int64_t nbot, unsigned seed, const double ratio[3], double p2p_s,
                    rank_cost *rc) {
  memset(&r, 0, sizeof r);
  int64_t pp = p->pp;
  for (int64_t i = 0; i < pp; i++) rc[i] = (rank_cost){0};
  for (int64_t c = 0; c < pp * p->vpp; c++) {
    int64_t rk = plan_chunk_rank(p, c);
    double n_layers = layers(family, p, c, rk, nbot, &seed);
    r.chunk_tf_s[c] = n_layers * ratio[0];
    r.chunk_tb_s[c] = n_layers * (ratio[1] + ratio[2]);
    r.chunk_tw_s[c] = n_layers * ratio[2];
    rc[rk].tf += r.chunk_tf_s[c];
    rc[rk].tb += r.chunk_tb_s[c];
    rc[rk].tw += r.chunk_tw_s[c];
    rc[rk].chunk_t_max_s = fmax(rc[rk].chunk_t_max_s, r.chunk_tf_s[c] + r.chunk_tb_s[c]);
  }
  r.p2p_s = p2p_s;
  for (int64_t i = 0; i < pp; i++) {
    rc[i].p2p_s = p2p_s;
    rc[i].tf += i > 0 ? p2p_s : 0;
    rc[i].tb += i < pp - 1 ? p2p_s : 0;
  }
  cost_time t = {0};
  return fmax(schedule_time_s(p, rc, (int)pp, &t),
              schedule_lockstep_s(p, rc, (int)pp, r.chunk_tf_s, r.chunk_tb_s, r.chunk_tw_s));
}

static double simulate(ap_ctx *ctx, const plan *p) {
  double t = NAN;
  if (sim_pipeline(ctx, p, &r, 0, NULL, NULL, &t)) fail_msg("%s", ap_ctx_error(ctx));
  return t;
}

static const double ratios[][3] = {{1, 1, 1}, {1, 1.5, 1.5}, {1, 1.2, 1}};

/* The two paths are lengths of paths of the order, so never above the simulated time (sends included).
 * On the reproduction the closed form is within 5% of the simulator for m < pp (before them: 5.4% under
 * at m <= pp/2, 12.6% under for pp/2 < m < pp; exact for m <= pp/2 without sends, where the switch path is the
 * critical path). What is left, held at its measured ceiling: m >= pp with F:B:W 1:1.5:1.5, up to 6% over
 * (schedule_lockstep_s's steady-state skew term, older than this test). */
static void test_zb_v_switch_path(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  rank_cost rc[32];
  int n = 0, n_above = 0, n_far = 0;
  double worst[3] = {0};
  for (int64_t pp = 4; pp <= 32; pp *= 2)
    for (int family = 0; family < 2; family++)
      for (int64_t nbot = family ? 0 : 1; nbot <= (family ? 3 : 8); nbot *= 2, nbot += family)
        for (size_t q = 0; q < AP_COUNT(ratios); q++)
          for (int64_t m = 1; m <= 2 * pp; m++) {
            plan p;
            zb_v_plan(&p, pp, m);
            double p2p = q == 2 ? 0.05 : 0;
            double closed = setup(&p, family, nbot, (unsigned)(nbot * 1000 + pp), ratios[q], p2p, rc);
            double path = 0;
            for (int64_t i = 0; i < pp; i++) path += rc[i].tf + rc[i].tb - rc[i].tw;
            double sw = schedule_zbv_paths_s(&p, path, r.chunk_tf_s, r.chunk_tb_s, r.chunk_tw_s);
            double sim = simulate(ctx, &p);
            if (sw > sim * (1 + 1e-12) && ++n_above)
              print_message("switch path above the simulation: pp %lld m %lld family %d: %.6g > %.6g\n", (long long)pp,
                            (long long)m, family, sw, sim);
            if (family == 0) {
              double e = fabs(closed - sim) / sim;
              int regime = 2 * m <= pp ? 0 : m < pp ? 1 : 2; /* 2: docs/cost-model.md, not met there yet */
              worst[regime] = fmax(worst[regime], e);
              if (e > (regime == 2 ? 0.06 : 0.05) && ++n_far)
                print_message("pp %lld nbot %lld m %lld F:B:W %g:%g:%g: closed form %.4g, simulated %.4g\n", (long long)pp,
                              (long long)nbot, (long long)m, ratios[q][0], ratios[q][1], ratios[q][2], closed, sim);
              if (2 * m <= pp && q < 2) assert_true(fabs(closed - sim) <= 1e-9 * sim);
            }
            n++;
          }
  print_message("# %d cases; the reproduction's worst |closed - simulated| / simulated: m <= pp/2 %.2f%%, pp/2 < m < pp "
                "%.2f%%, m >= pp %.2f%%\n", n, 100 * worst[0], 100 * worst[1], 100 * worst[2]);
  assert_true(n > 1000);
  assert_int_equal(n_above, 0);
  assert_int_equal(n_far, 0);
  ap_ctx_free(ctx);
}

/* Every schedule over uneven splits (both families, 12 splits per pp), pp 2 … 32, m = 1 … 2·pp (interleaved:
 * multiples of pp, Megatron's condition), three pass ratios: the worst |closed − simulated| / simulated per kind,
 * printed, against the ceiling measured when this test was written. Issue 10 asks for 5% on every kind; the
 * ceilings above 5% are what is not met yet (docs/cost-model.md says where), kept so that no change makes it
 * worse unseen. */
static void test_uneven_all_schedules(void **state) {
  (void)state;
  static const plan_schedule kinds[] = {PLAN_SCHED_GPIPE, PLAN_SCHED_1F1B, PLAN_SCHED_INTERLEAVED_1F1B,
                                        PLAN_SCHED_ZB_H1, PLAN_SCHED_ZB_V};
  static const double ceiling[] = {1e-9, 0.201, 0.364, 0.105, 0.256};
  ap_ctx *ctx = ap_ctx_new();
  rank_cost rc[32];
  for (size_t k = 0; k < AP_COUNT(kinds); k++) {
    double worst = 0, sum = 0;
    int n = 0, n_over = 0;
    for (int64_t pp = 2; pp <= 32; pp *= 2)
      for (int split = 0; split < 12; split++)
        for (size_t q = 0; q < AP_COUNT(ratios); q++)
          for (int64_t m = 1; m <= 2 * pp; m += pp >= 16 && m > 4 ? pp / 8 : 1) {
            if (kinds[k] == PLAN_SCHED_INTERLEAVED_1F1B && m % pp) continue;
            plan p;
            zb_v_plan(&p, pp, m);
            p.schedule = kinds[k];
            p.vpp = kinds[k] == PLAN_SCHED_ZB_V || kinds[k] == PLAN_SCHED_INTERLEAVED_1F1B ? 2 : 1;
            int family = split < 6 ? 0 : 1;
            int64_t nbot = split == 0 || split >= 6 ? 0 : (int64_t)1 << (split - 1);
            double closed = setup(&p, family, nbot, (unsigned)(split * 1000 + pp), ratios[q], 0, rc);
            double sim = simulate(ctx, &p), e = fabs(closed - sim) / sim;
            worst = fmax(worst, e);
            sum += e;
            n_over += e > 0.05;
            n++;
          }
    print_message("# %s: %d cases, %d over 5%%, worst %.2f%%, mean %.2f%%\n", plan_schedule_name(kinds[k]), n, n_over,
                  100 * worst, 100 * sum / n);
    assert_true(n >= 200);
    assert_true(worst <= ceiling[k]);
  }
  ap_ctx_free(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_zb_v_order_facts),
      cmocka_unit_test(test_zb_v_switch_path),
      cmocka_unit_test(test_uneven_all_schedules),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
