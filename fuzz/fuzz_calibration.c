/* libFuzzer target for the calibration reader (src/cost/calib.c): bytes go to calib_parse. A failure must
 * leave a message in the context; a calibration that reads is written with calib_to_json, which must read
 * back (the file `autopar calibrate` writes is one that --calibration accepts) with the same device types and
 * every constant within the writer's six significant digits, and the tuning of each device type is looked up.
 * Seeds: fuzz/seeds/calibration/.
 * FUZZ_MAX_LEN: 2048 (fuzz-long: short inputs keep this slow reader at a useful rate) */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cost/calib.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The writer prints %.6g: a constant read back may differ by half a unit in the sixth digit. */
static bool close_enough(double a, double b) { return fabs(a - b) <= 1e-5 * fmax(fabs(a), fabs(b)); }

/* Every fitted constant of b agrees with a's. */
static bool same_calib(cost_calib *a, cost_calib *b) {
  if (a->n_devices != b->n_devices) return false;
  size_t n_params;
  const calib_param *params = calib_params(&n_params);
  for (size_t k = 0; k < n_params; k++) {
    if (params[k].scope == COST_SCOPE_GLOBAL) {
      if (!close_enough(*calib_param_ref(a, &params[k], 0), *calib_param_ref(b, &params[k], 0))) return false;
      continue;
    }
    for (int d = 0; d < a->n_devices; d++)
      if (strcmp(a->devices[d].name, b->devices[d].name) != 0 ||
          !close_enough(*calib_param_ref(a, &params[k], d), *calib_param_ref(b, &params[k], d)))
        return false;
  }
  return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ap_ctx *ctx = ap_ctx_new();
  cost_calib *c = malloc(sizeof *c), *back = malloc(sizeof *back); /* about 5 KiB each: off the stack */
  if (ctx && c && back) {
    ap_status st = calib_parse(ctx, "calibration.json", (const char *)data, size, c);
    if (st != AP_OK && !*ap_ctx_error(ctx)) __builtin_trap(); /* every failure says why */
    if (st == AP_OK) {
      volatile double sink = 0;
      for (int d = 0; d < c->n_devices; d++) sink += calib_tuning_for(c, c->devices[d].name).compute.gemm_eff_max;
      sink += calib_tuning_for(c, "no-such-device").compute.gemm_eff_max;
      (void)sink;
      strbuf sb = {0};
      calib_to_json(c, NULL, &sb);
      char *json = sb_take(&sb);
      if (json) {
        if (calib_parse(ctx, "written.json", json, strlen(json), back) != AP_OK) __builtin_trap();
        if (!same_calib(c, back)) __builtin_trap();
      }
      free(json);
    }
  }
  free(back);
  free(c);
  ap_ctx_free(ctx);
  return 0;
}
