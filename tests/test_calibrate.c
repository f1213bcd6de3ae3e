/* Tests of calibration: the fit on the reference runs lowers the error, every fitted constant stays in its
 * physical range (the calibration reader rejects anything outside), and leave-one-source-out (each source
 * predicted by constants fitted on the other sources) holds up. A quick fit (one sweep) keeps the suite fast;
 * `make calibrate` runs the full one. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "testutil.h"

#include "cost/calib.h"
#include "hw/hw.h"
#include "report/calibrate.h"
#include "report/calibrate_fit.h"

static void test_calibration_holds_out_of_sample(void **state) {
  (void)state;
  const char *ref = test_reference_dir();
  if (!ref) fail_msg("shared/reference not found beside the repository");
  char csv[512];
  snprintf(csv, sizeof csv, "%s/runs.csv", ref);
  char out_path[] = "/tmp/autopar-calib-XXXXXX";
  int fd = mkstemp(out_path);
  assert_true(fd >= 0);
  ap_ctx *ctx = ap_ctx_new();
  char *report = NULL;
  if (calibrate_file(ctx, csv, NULL, out_path, 1, 1, &report)) fail_msg("%s", ap_ctx_error(ctx));
  json_error_t err;
  json_t *r = json_loads(report, 0, &err);
  if (!r) fail_msg("report is not JSON: %s", err.text);
  double before = json_number_value(json_object_get(r, "mape_before"));
  double after = json_number_value(json_object_get(r, "mape_after"));
  double loo = json_number_value(json_object_get(r, "leave_one_source_out_mape"));
  print_message("# MAPE before %.3f, after %.3f, leave-one-source-out %.3f\n", before, after, loo);
  assert_true(after < before);
  /* The held-out error stays within the range of a calibrated analytical model (vTrain reports 14.7% MAPE on
   * multi-node runs, ANCHORS.md) and well below the uncalibrated defaults. */
  assert_true(loo < 0.30);
  assert_true(loo < before * 1.2);
  /* The written calibration reads back: calib_parse checks every constant against its physical range. */
  cost_calib cal;
  if (calib_load(ctx, out_path, &cal)) fail_msg("%s", ap_ctx_error(ctx));
  assert_int_equal(cal.n_chips, 3); /* GA100, GH100, B200: the six device types of runs.csv on three chips */
  /* The leave-one-source-out and leave-one-chip-out residuals, every row measured ok once per grouping. */
  assert_true(cal.n_points >= 2 * 383);
  int unseen = 0;
  for (int i = 0; i < cal.n_points; i++) unseen += cal.points[i].chip_unseen;
  assert_true(unseen >= 383); /* the leave-one-chip-out half, and the source folds' B200 rows */
  for (int d = 0; d < cal.n_chips; d++) {
    assert_true(cal.chips[d].compute.gemm_eff_max > 0 && cal.chips[d].compute.gemm_eff_max <= 1);
    assert_true(cal.chips[d].compute.attn_fwd_eff > 0 && cal.chips[d].compute.attn_fwd_eff <= 1);
  }
  /* Error bands: one over every row, and each spans the residuals it was made from. */
  const calib_band *all = calib_band_for(cal.bands, cal.n_bands, "any", "any");
  assert_non_null(all);
  assert_true(all->rows >= 300);
  for (int b = 0; b < cal.n_bands; b++) {
    assert_true(cal.bands[b].rows >= 5);
    assert_true(cal.bands[b].error_low <= cal.bands[b].error_high);
    assert_true(cal.bands[b].error_low < 0.05 && cal.bands[b].error_high > -0.05);
  }
  json_decref(r);
  free(report);
  remove(out_path);
  ap_ctx_free(ctx);
}

/* The shipped calibration parses and fits the chip of every device of the reference runs; the two A100 SKUs
 * share their compute constants (issue 10: they once had 0.747 and 0.647 of GEMM peak). */
static void test_builtin_calibration(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  cost_calib cal;
  assert_int_equal(calib_builtin(ctx, &cal), AP_OK);
  static const char *const devices[] = {"a100-80gb", "a100-40gb", "h100-sxm", "h100-96gb", "b200", "gb200"};
  for (size_t i = 0; i < AP_COUNT(devices); i++) {
    ap_ctx *c2 = ap_ctx_new();
    hw_device d;
    assert_int_equal(hw_device_find(c2, devices[i], &d), AP_OK);
    calib_origin o;
    (void)calib_tuning_for_device(&cal, &d, &o);
    if (o.how != CALIB_FITTED) fail_msg("built-in calibration does not fit the chip of %s", devices[i]);
    ap_ctx_free(c2);
  }
  compute_tuning a40 = calib_tuning_for(&cal, "a100-40gb").compute, a80 = calib_tuning_for(&cal, "a100-80gb").compute;
  assert_memory_equal(&a40, &a80, sizeof a40);
  ap_ctx_free(ctx);
}

static const struct {
  const char *json;
  const char *needle;
} bad_cases[] = {
    {"{\"format\":\"autopar-calibration/1\",\"devices\":{\"h100-sxm\":{\"gemm_eff_max\":1.5}}}", "gemm_eff_max: expected a number in [0.15, 1]"},
    {"{\"format\":\"autopar-calibration/1\",\"devices\":{\"h100-sxm\":{\"gemm_eff\":0.5}}}", "did you mean gemm_eff_max"},
    {"{\"format\":\"autopar-calibration/3\"}", "expected \"autopar-calibration/2\" (or /1)"},
    {"{\"format\":\"autopar-calibration/2\",\"residuals\":{}}", "residuals: expected an array of residuals"},
    {"{\"format\":\"autopar-calibration/2\",\"residuals\":[[\"Hopper\",\"nemo\",false,false,false,8,0.1]]}",
     "residuals[0]: expected [family, stack, moe, offload, chip_unseen, num_gpus, error, memory error]"},
    {"{\"format\":\"autopar-calibration/2\",\"residuals\":[[\"Hopper\",\"nemo\",false,false,false,0,0.1,null]]}",
     "residuals[0]: expected num_gpus in [1, 1e9]"},
    {"{\"format\":\"autopar-calibration/2\",\"chips\":{\"GH100\":{\"gemm_eff\":0.5}}}", "chips.GH100.gemm_eff: unknown field (did you mean gemm_eff_max"},
    {"{\"format\":\"autopar-calibration/2\",\"chip\":{}}", "chip: unknown field (did you mean chips"},
    {"{\"format\":\"autopar-calibration/2\",\"devices\":{}}", "devices: not in format autopar-calibration/2"},
    /* Format /1 kept constants per device type: two device types of one chip cannot both be kept. */
    {"{\"format\":\"autopar-calibration/1\",\"devices\":{\"a100-40gb\":{},\"a100-80gb\":{}}}", "a second entry for chip GA100"},
    {"{\"format\":\"autopar-calibration/2\",\"bands\":[{\"family\":\"Hopper\",\"stack\":\"any\",\"rows\":5,\"error_low\":0.1,\"error_high\":0,\"mape\":0.1}]}", "bands[0].error_high: expected a number in [0.1"},
    {"{\"format\":\"autopar-calibration/2\",\"bands\":[{\"family\":\"Hopper\",\"stack\":\"any\",\"rows\":5,\"error_low\":0,\"error_high\":0,\"mape\":0,\"p50\":0}]}", "bands[0].p50: unknown field"},
    {"{\"format\":\"autopar-calibration/1\",\"global\":{\"bus_eff.network\":0}}", "bus_eff.network: expected a number in"},
    {"{\"format\":", "cal.json:1:"},
    /* A device type name longer than HW_NAME_MAX - 1 bytes was cut short silently (found by fuzz_calibration). */
    {"{\"format\":\"autopar-calibration/1\",\"devices\":{\"h100-sxm-0123456789012345678901234567890123456789012345678901234567\":{}}}",
     "expected a name of at most 63 bytes"},
};

/* Every device type on a listed chip takes that chip's constants (an H200 or H800 those of GH100, both A100s
 * those of GA100); a chip not listed takes those of the nearest listed chip of its family (a GB300, chip B300,
 * those of B200) and says so; a family with no listed chip takes the nearest listed chip of its vendor by
 * peak (a GB300 those of GH100, not GA100), and a vendor with none the documented defaults (an MI300X). */
static void test_chip_and_family_fallback(void **state) {
  (void)state;
  cost_calib c;
  calib_defaults(&c);
  calib_chip *gh100 = calib_chip_entry(&c, "GH100");
  calib_chip *ga100 = calib_chip_entry(&c, "GA100");
  assert_non_null(gh100);
  assert_non_null(ga100);
  assert_string_equal(gh100->family, "Hopper");
  assert_string_equal(ga100->family, "Ampere");
  gh100->compute.gemm_eff_max = 0.55;
  ga100->compute.gemm_eff_max = 0.65;
  assert_rel_close(calib_tuning_for(&c, "h200").compute.gemm_eff_max, 0.55, 0);
  assert_rel_close(calib_tuning_for(&c, "h800").compute.gemm_eff_max, 0.55, 0);
  assert_rel_close(calib_tuning_for(&c, "a100-40gb").compute.gemm_eff_max, 0.65, 0);
  assert_rel_close(calib_tuning_for(&c, "a100-80gb").compute.gemm_eff_max, 0.65, 0);
  /* No Blackwell chip listed: the nearest NVIDIA chip in peak, GH100, said so. */
  ap_ctx *ctx = ap_ctx_new();
  hw_device gb300, mi300x;
  assert_int_equal(hw_device_find(ctx, "gb300", &gb300), AP_OK);
  calib_origin o;
  assert_rel_close(calib_tuning_for_device(&c, &gb300, &o).compute.gemm_eff_max, 0.55, 0);
  assert_int_equal(o.how, CALIB_VENDOR);
  assert_string_equal(o.chip, "B300");
  assert_string_equal(o.from, "GH100");
  char text[256];
  calib_origin_text(&o, text, sizeof text);
  assert_non_null(strstr(text, "nor any chip of family Blackwell: those of GH100 (family Hopper)"));
  /* No AMD chip listed: the defaults, said so. */
  assert_int_equal(hw_device_find(ctx, "mi300x", &mi300x), AP_OK);
  assert_rel_close(calib_tuning_for_device(&c, &mi300x, &o).compute.gemm_eff_max, compute_tuning_defaults().gemm_eff_max, 0);
  assert_int_equal(o.how, CALIB_DEFAULTS);
  calib_origin_text(&o, text, sizeof text);
  assert_non_null(strstr(text, "the documented defaults"));
  /* With B200 listed, the GB300 takes B200's constants, and its origin names them. */
  calib_chip *b200 = calib_chip_entry(&c, "B200");
  assert_non_null(b200);
  b200->compute.gemm_eff_max = 0.45;
  assert_rel_close(calib_tuning_for_device(&c, &gb300, &o).compute.gemm_eff_max, 0.45, 0);
  assert_int_equal(o.how, CALIB_SIBLING);
  assert_string_equal(o.from, "B200");
  calib_origin_text(&o, text, sizeof text);
  assert_non_null(strstr(text, "B300 not fitted: those of B200"));
  /* Only chips the caller marks usable are siblings (leave-one-source-out). */
  bool usable[CALIB_MAX_CHIPS] = {false};
  usable[ga100 - c.chips] = true;
  bool cross = false;
  assert_int_equal(calib_nearest(&c, "B300", "Blackwell", "", 2.5e15, usable, &cross), -1);
  assert_int_equal(calib_nearest(&c, "B300", "Blackwell", "nvidia", 2.5e15, usable, &cross), (int)(ga100 - c.chips));
  assert_true(cross);
  usable[b200 - c.chips] = true;
  assert_int_equal(calib_nearest(&c, "B300", "Blackwell", "nvidia", 2.5e15, usable, &cross), (int)(b200 - c.chips));
  assert_false(cross);
  assert_int_equal(calib_nearest(&c, "B300", "", "", 2.5e15, NULL, NULL), -1);
  ap_ctx_free(ctx);
}

/* A prediction's band is its family and stack's, else its family's, else its stack's, else every row's. */
static void test_band_lookup(void **state) {
  (void)state;
  calib_band b[4] = {
      {"any", "any", 100, -0.2, 0.2, 0.1},
      {"Hopper", "any", 50, -0.1, 0.1, 0.05},
      {"any", "torchtitan", 20, -0.3, 0.0, 0.1},
      {"Hopper", "megatron-lm", 10, -0.05, 0.02, 0.03},
  };
  assert_ptr_equal(calib_band_for(b, 4, "Hopper", "megatron-lm"), &b[3]);
  assert_ptr_equal(calib_band_for(b, 4, "Hopper", "torchtitan"), &b[1]);
  assert_ptr_equal(calib_band_for(b, 4, "Ampere", "torchtitan"), &b[2]);
  assert_ptr_equal(calib_band_for(b, 4, "Ampere", "nemo"), &b[0]);
  assert_null(calib_band_for(b, 0, "Ampere", "nemo"));
}

static void test_bad_calibrations(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  for (size_t i = 0; i < AP_COUNT(bad_cases); i++) {
    cost_calib cal;
    assert_int_not_equal(calib_parse(ctx, "cal.json", bad_cases[i].json, strlen(bad_cases[i].json), &cal), AP_OK);
    assert_error_contains(ctx, bad_cases[i].needle);
  }
  ap_ctx_free(ctx);
}

/* A calibration written by calib_to_json reads back even with every constant at an end of its range: six
 * significant digits once rounded the 16 GiB bound of memory.overhead_bytes up to 1.71799e+10, past the bound,
 * and calib_parse refused the file (found by fuzz/fuzz_calibration.c). */
static void test_calibration_at_range_ends_reads_back(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  size_t n_params;
  const calib_param *params = calib_params(&n_params);
  for (int end = 0; end < 2; end++) {
    cost_calib cal, back;
    calib_defaults(&cal);
    assert_non_null(calib_chip_entry(&cal, "GH100"));
    for (size_t k = 0; k < n_params; k++) *calib_param_ref(&cal, &params[k], 0) = end ? params[k].max : params[k].min;
    strbuf sb = {0};
    calib_to_json(&cal, NULL, &sb);
    char *json = sb_take(&sb);
    assert_non_null(json);
    if (calib_parse(ctx, "written.json", json, strlen(json), &back)) fail_msg("%s", ap_ctx_error(ctx));
    for (size_t k = 0; k < n_params; k++)
      assert_rel_close(*calib_param_ref(&back, &params[k], 0), *calib_param_ref(&cal, &params[k], 0), 1e-6);
    free(json);
  }
  ap_ctx_free(ctx);
}

/* A source too long for cost_calib.source is cut to fit; a cut through a UTF-8 character once left half of it
 * in the written file, which is then not JSON and did not read back (found by fuzz/fuzz_calibration.c). */
static void test_long_source_reads_back(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  /* 254 ASCII bytes, then two-, three- and four-byte characters: the 255-byte cut falls inside each. */
  static const char *const tails[] = {"\xc3\xa9", "x\xe2\x82\xac", "\xf0\x9f\x98\x80"};
  for (size_t i = 0; i < AP_COUNT(tails); i++) {
    char text[512];
    snprintf(text, sizeof text, "{\"format\":\"autopar-calibration/1\",\"source\":\"%254.254d%s\"}", 0, tails[i]);
    cost_calib cal, back;
    if (calib_parse(ctx, "cal.json", text, strlen(text), &cal)) fail_msg("%s", ap_ctx_error(ctx));
    strbuf sb = {0};
    calib_to_json(&cal, NULL, &sb);
    char *json = sb_take(&sb);
    assert_non_null(json);
    if (calib_parse(ctx, "written.json", json, strlen(json), &back)) fail_msg("%s", ap_ctx_error(ctx));
    assert_int_equal(strncmp(back.source, cal.source, strlen(back.source)), 0);
    free(json);
  }
  ap_ctx_free(ctx);
}

/* The groupings of validate --cv: a row's group under each, and the names --cv takes. */
static void test_cv_groupings(void **state) {
  (void)state;
  validate_row v;
  memset(&v, 0, sizeof v);
  v.gpu = "gb200";
  v.plan.stack = PLAN_STACK_DEFAULT;
  char key[256];
  v.source = "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md @4ab94dfad, '26.02.01 NeMo Container' Pre-Training";
  cv_key(&v, CV_SOURCE, key, sizeof key);
  assert_string_equal(key, "NVIDIA-NeMo/Megatron-Bridge");
  cv_key(&v, CV_RELEASE, key, sizeof key);
  assert_string_equal(key, "NVIDIA-NeMo/Megatron-Bridge 26.02.01"); /* the container, not the docs commit */
  cv_key(&v, CV_CHIP, key, sizeof key);
  assert_string_equal(key, "B200"); /* a GB200 runs B200 silicon */
  cv_key(&v, CV_STACK, key, sizeof key);
  assert_string_equal(key, "megatron-lm"); /* no stack column: a transformer's default */
  v.source = "mosaicml/llm-foundry scripts/train/benchmarking/README.md @495218376 (table 'H100 80GB BF16')";
  v.gpu = "a100-40gb";
  cv_key(&v, CV_RELEASE, key, sizeof key);
  assert_string_equal(key, "mosaicml/llm-foundry @495218376");
  cv_key(&v, CV_CHIP, key, sizeof key);
  assert_string_equal(key, "GA100");
  v.source = "Narayanan et al. SC21 (arXiv 2104.04473) Table 2 (PTD-P rows), via third-party transcription";
  cv_key(&v, CV_RELEASE, key, sizeof key);
  assert_string_equal(key, "Narayanan"); /* neither a container nor a commit */
  cv_grouping g;
  assert_true(cv_grouping_from_name("release", &g) && g == CV_RELEASE);
  assert_false(cv_grouping_from_name("sources", &g));
  assert_string_equal(cv_grouping_name(CV_CHIP), "chip");
  const char *names[4] = {0};
  int n = 0;
  assert_int_equal(cv_fold_index("a", names, &n, 4), 0);
  assert_int_equal(cv_fold_index("b", names, &n, 4), 1);
  assert_int_equal(cv_fold_index("a", names, &n, 4), 0);
  assert_int_equal(n, 2);
  for (int i = 0; i < n; i++) free((char *)names[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_builtin_calibration),
      cmocka_unit_test(test_chip_and_family_fallback),
      cmocka_unit_test(test_band_lookup),
      cmocka_unit_test(test_bad_calibrations),
      cmocka_unit_test(test_calibration_at_range_ends_reads_back),
      cmocka_unit_test(test_long_source_reads_back),
      cmocka_unit_test(test_calibration_holds_out_of_sample),
      cmocka_unit_test(test_cv_groupings),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
