/* Tests of calibration: the fit on the reference runs lowers the error, every fitted constant stays in its
 * physical range (the calibration reader rejects anything outside), and leave-one-source-out (each source
 * predicted by constants fitted on the other sources) holds up. A quick fit (one sweep) keeps the suite fast;
 * `make calibrate` runs the full one. */
#include <stdlib.h>

#include <jansson.h>

#include "testutil.h"

#include "cost/calib.h"
#include "report/calibrate.h"

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
  assert_true(cal.n_devices >= 5);
  for (int d = 0; d < cal.n_devices; d++) {
    assert_true(cal.devices[d].compute.gemm_eff_max > 0 && cal.devices[d].compute.gemm_eff_max <= 1);
    assert_true(cal.devices[d].compute.attn_fwd_eff > 0 && cal.devices[d].compute.attn_fwd_eff <= 1);
  }
  json_decref(r);
  free(report);
  remove(out_path);
  ap_ctx_free(ctx);
}

/* The shipped calibration parses and names the devices of the reference runs. */
static void test_builtin_calibration(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  cost_calib cal;
  assert_int_equal(calib_builtin(ctx, &cal), AP_OK);
  static const char *const devices[] = {"a100-80gb", "a100-40gb", "h100-sxm", "h100-96gb", "b200", "gb200"};
  for (size_t i = 0; i < AP_COUNT(devices); i++) {
    bool found = false;
    for (int d = 0; d < cal.n_devices; d++) found |= strcmp(cal.devices[d].name, devices[i]) == 0;
    if (!found) fail_msg("built-in calibration lacks %s", devices[i]);
  }
  ap_ctx_free(ctx);
}

static const struct {
  const char *json;
  const char *needle;
} bad_cases[] = {
    {"{\"format\":\"autopar-calibration/1\",\"devices\":{\"h100-sxm\":{\"gemm_eff_max\":1.5}}}", "gemm_eff_max: expected a number in [0.15, 1]"},
    {"{\"format\":\"autopar-calibration/1\",\"devices\":{\"h100-sxm\":{\"gemm_eff\":0.5}}}", "did you mean gemm_eff_max"},
    {"{\"format\":\"autopar-calibration/2\"}", "expected \"autopar-calibration/1\""},
    {"{\"format\":\"autopar-calibration/1\",\"global\":{\"bus_eff.network\":0}}", "bus_eff.network: expected a number in"},
    {"{\"format\":", "cal.json:1:"},
    /* A device type name longer than HW_NAME_MAX - 1 bytes was cut short silently (found by fuzz_calibration). */
    {"{\"format\":\"autopar-calibration/1\",\"devices\":{\"h100-sxm-0123456789012345678901234567890123456789012345678901234567\":{}}}",
     "expected a device type name of at most 63 bytes"},
};

/* A device type the calibration does not list takes a listed one's constants when both are the same chip (an
 * H200 or an H800 those of an H100), and the documented defaults otherwise. */
static void test_same_chip_fallback(void **state) {
  (void)state;
  cost_calib c;
  calib_defaults(&c);
  calib_device *h100 = calib_device_entry(&c, "h100-sxm");
  calib_device *a100 = calib_device_entry(&c, "a100-80gb");
  assert_non_null(h100);
  assert_non_null(a100);
  h100->compute.gemm_eff_max = 0.55;
  a100->compute.gemm_eff_max = 0.65;
  assert_rel_close(calib_tuning_for(&c, "h200").compute.gemm_eff_max, 0.55, 0);
  assert_rel_close(calib_tuning_for(&c, "h800").compute.gemm_eff_max, 0.55, 0);
  assert_rel_close(calib_tuning_for(&c, "a100-40gb").compute.gemm_eff_max, 0.65, 0);
  assert_rel_close(calib_tuning_for(&c, "gb200").compute.gemm_eff_max, compute_tuning_defaults().gemm_eff_max, 0);
  assert_int_equal(calib_sibling(&c, "h200", NULL), (int)(h100 - c.devices));
  bool usable[CALIB_MAX_DEVICES] = {false};
  usable[a100 - c.devices] = true;
  assert_int_equal(calib_sibling(&c, "h200", usable), -1); /* the only H100 entry is not usable */
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
    assert_non_null(calib_device_entry(&cal, "h100-sxm"));
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_builtin_calibration),
      cmocka_unit_test(test_same_chip_fallback),
      cmocka_unit_test(test_bad_calibrations),
      cmocka_unit_test(test_calibration_at_range_ends_reads_back),
      cmocka_unit_test(test_long_source_reads_back),
      cmocka_unit_test(test_calibration_holds_out_of_sample),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
