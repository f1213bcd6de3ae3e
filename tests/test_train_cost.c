/* Time and cost to train, and compare-clusters: the arithmetic (time = tokens / throughput, device-hours =
 * time × devices / 3600, cost = hours × price), the token-budget parser, and the ranking of ap_compare_clusters
 * (by time and by cost, infeasible clusters last, each row's figures consistent with its throughput). */
#include <jansson.h>
#include <stdlib.h>

#include "report/train_cost.h"
#include "testutil.h"

static void test_arithmetic(void **state) {
  (void)state;
  train_cost c;
  train_cost_compute(1e12, 1e6, 64, 2.5, &c);
  assert_rel_close(c.time_s, 1e6, 1e-12);
  assert_rel_close(c.gpu_hours, 1e6 * 64 / 3600.0, 1e-12);
  assert_rel_close(c.cost, 1e6 * 64 / 3600.0 * 2.5, 1e-12);
  train_cost_compute(1e12, 1e6, 64, 0, &c);
  assert_true(isnan(c.cost));
  train_cost_compute(1e12, 0, 64, 1, &c);
  assert_true(isinf(c.time_s));
}

static void test_parse_amount(void **state) {
  (void)state;
  static const struct {
    const char *s;
    bool ok;
    double want;
  } cases[] = {{"1T", true, 1e12}, {"300B", true, 3e11}, {"2.5e11", true, 2.5e11}, {"15G", true, 1.5e10},
               {"7k", true, 7e3},  {"1M", true, 1e6},    {"0", false, 0},         {"-1T", false, 0},
               {"1X", false, 0},   {"", false, 0},       {"T", false, 0},         {"1e999", false, 0}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    double v = 0;
    bool ok = train_parse_amount(cases[i].s, &v);
    if (ok != cases[i].ok) fail_msg("train_parse_amount(\"%s\") = %d, want %d", cases[i].s, ok, cases[i].ok);
    if (ok) assert_rel_close(v, cases[i].want, 1e-12);
  }
}

static void test_compare_ranking(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  ap_model *m = NULL;
  assert_int_equal(ap_model_load(ctx, "llama-3-8b", &m), AP_OK);
  ap_search_opts o;
  ap_search_opts_init(&o);
  o.global_batch_size = 64;
  o.seq_length = 4096;
  char *out = NULL;
  /* One price for all makes the cost order the device-hours order; h100:1 cannot hold Llama-3-8B training. */
  assert_int_equal(ap_compare_clusters(ctx, m, "a100-80gb:16,h100:1,h100:8,dgx-h100:2x8", &o, "1T", "2", AP_OUT_JSON, &out),
                   AP_OK);
  json_t *j = json_loads(out, 0, NULL);
  assert_non_null(j);
  json_t *cl = json_object_get(j, "clusters");
  assert_int_equal(json_array_size(cl), 4);
  size_t i;
  json_t *e;
  json_array_foreach(cl, i, e) {
    json_t *t = json_object_get(e, "train");
    int rt = (int)json_integer_value(json_object_get(e, "rank_by_time"));
    int rc = (int)json_integer_value(json_object_get(e, "rank_by_cost"));
    if (!json_is_true(json_object_get(e, "feasible"))) {
      assert_string_equal(json_string_value(json_object_get(e, "cluster")), "h100:1");
      assert_int_equal(rt, 4);
      continue;
    }
    double tps = json_number_value(json_object_get(e, "tokens_per_s"));
    double n = (double)json_integer_value(json_object_get(e, "n_devices"));
    double time_s = json_number_value(json_object_get(t, "time_s")), hours = json_number_value(json_object_get(t, "gpu_hours"));
    assert_rel_close(time_s, 1e12 / tps, 1e-9);
    assert_rel_close(hours, time_s * n / 3600, 1e-9);
    assert_rel_close(json_number_value(json_object_get(t, "cost")), hours * 2, 1e-9);
    /* Ranks agree with the figures: every other feasible cluster ranked before is faster (cheaper). */
    size_t k;
    json_t *f;
    json_array_foreach(cl, k, f) {
      if (k == i || !json_is_true(json_object_get(f, "feasible"))) continue;
      json_t *tf = json_object_get(f, "train");
      if (json_integer_value(json_object_get(f, "rank_by_time")) < rt)
        assert_true(json_number_value(json_object_get(tf, "time_s")) <= time_s);
      if (json_integer_value(json_object_get(f, "rank_by_cost")) < rc)
        assert_true(json_number_value(json_object_get(tf, "cost")) <= json_number_value(json_object_get(t, "cost")));
    }
  }
  json_decref(j);
  free(out);
  assert_int_equal(ap_compare_clusters(ctx, m, "h100:8", &o, "1T", "1,2", AP_OUT_JSON, &out), AP_INVALID);
  assert_error_contains(ctx, "one price or one per cluster");
  ap_model_free(m);
  ap_ctx_free(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_arithmetic),
      cmocka_unit_test(test_parse_amount),
      cmocka_unit_test(test_compare_ranking),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
