/* libFuzzer target for the calibration reader (src/cost/calib_json.c): bytes go to calib_parse. A failure must
 * leave a message in the context; a calibration that reads is written with calib_to_json, which must read
 * back (the file `autopar calibrate` writes is one that --calibration accepts) with the same chips, every
 * constant within the writer's six significant digits and the same error bands, and the tuning of each chip
 * and the band of each entry's family are looked up.
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
  if (a->n_chips != b->n_chips || a->n_bands != b->n_bands) return false;
  for (int i = 0; i < a->n_bands; i++) {
    const calib_band *x = &a->bands[i], *y = &b->bands[i];
    if (strcmp(x->family, y->family) != 0 || strcmp(x->stack, y->stack) != 0 || x->rows != y->rows ||
        x->error_low != y->error_low || x->error_high != y->error_high || x->mape != y->mape)
      return false;
  }
  size_t n_params;
  const calib_param *params = calib_params(&n_params);
  for (size_t k = 0; k < n_params; k++) {
    if (params[k].scope == COST_SCOPE_GLOBAL) {
      if (!close_enough(*calib_param_ref(a, &params[k], 0), *calib_param_ref(b, &params[k], 0))) return false;
      continue;
    }
    for (int d = 0; d < a->n_chips; d++)
      if (strcmp(a->chips[d].name, b->chips[d].name) != 0 ||
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
      for (int d = 0; d < c->n_chips; d++) {
        sink += calib_tuning_for_chip(c, &c->chips[d], NULL).compute.gemm_eff_max;
        const calib_band *b = calib_band_for(c->bands, c->n_bands, c->chips[d].family, "megatron-lm");
        if (b) sink += b->error_high;
      }
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
