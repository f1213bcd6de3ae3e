/* The data floor of a runs table (src/report/data_floor.c): the least MAPE and the least number of rows above
 * an APE bar that any prediction from the rows' inputs can reach, worked out by hand on small tables, and
 * checked against a fine scan of single predictions. */
#include <stdlib.h>

#include "testutil.h"
#include "core/core.h"
#include "report/data_floor.h"

/* Groups: "a" {100, 200} (no prediction keeps both within 25%: [75, 125] and [150, 250] are apart), "b" {100,
 * 160} ([75, 125] and [120, 200] overlap), "c" {50} alone, "d" {10, 10, 10} (equal). Members interleaved. */
static const floor_row rows[] = {
    {"a", "a1", 100}, {"b", "b1", 100}, {"c", "c1", 50}, {"a", "a2", 200},
    {"d", "d1", 10},  {"b", "b2", 160}, {"d", "d2", 10}, {"d", "d3", 10},
};

static void test_hand_worked(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  arena *a = arena_new();
  data_floor f;
  assert_int_equal(data_floor_compute(ctx, a, rows, 8, 0.25, &f), AP_OK);
  assert_int_equal(f.n_rows, 8);
  assert_int_equal(f.n_groups, 3);
  assert_int_equal(f.n_rows_grouped, 7);
  /* a: p = 100 gives 0 + 0.5; b: p = 100 gives 0 + 0.375; c and d: 0. Over 8 rows. */
  assert_rel_close(f.mape_floor, (0.5 + 0.375) / 8, 1e-12);
  assert_int_equal(f.min_rows_over, 1);
  assert_int_equal(f.n_listed, 1);
  assert_int_equal(f.listed[0].n, 2);
  assert_int_equal(f.listed[0].n_over, 1);
  assert_string_equal(f.listed[0].ids[0], "a1");
  assert_string_equal(f.listed[0].ids[1], "a2");
  assert_rel_close(f.listed[0].measured[1], 200, 0);
  arena_free(a);
  ap_ctx_free(ctx);
}

/* Random groups: the floor equals the best of a fine scan of predictions (the scan can only do worse). */
static void test_against_scan(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  arena *a = arena_new();
  unsigned seed = 12345;
  for (int trial = 0; trial < 50; trial++) {
    int n = 2 + trial % 6;
    floor_row g[8];
    for (int i = 0; i < n; i++) {
      seed = seed * 1103515245u + 12345u;
      g[i] = (floor_row){"k", "r", 100.0 + (double)(seed >> 16 & 0xff)};
    }
    data_floor f;
    assert_int_equal(data_floor_compute(ctx, a, g, n, 0.25, &f), AP_OK);
    double best_sum = INFINITY;
    int most_in = 0;
    for (double p = 50; p <= 500; p += 0.01) {
      double sum = 0;
      int in = 0;
      for (int i = 0; i < n; i++) {
        double e = fabs(p / g[i].measured - 1);
        sum += e;
        in += e <= 0.25 + 1e-12;
      }
      if (sum < best_sum) best_sum = sum;
      if (in > most_in) most_in = in;
    }
    assert_true(f.mape_floor * n <= best_sum + 1e-9);
    assert_true(f.mape_floor * n >= best_sum - 1e-3);
    assert_int_equal(f.min_rows_over, n - most_in);
  }
  arena_free(a);
  ap_ctx_free(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_hand_worked), cmocka_unit_test(test_against_scan)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
