/* libFuzzer target for the device-profile reader (src/cost/compute.c, docs/profile-format.md): bytes go to
 * compute_profile_parse with a fresh arena and a zeroed compute model. A failure must leave a message in the
 * context; a profile that reads is then queried through compute_gemm_eff for every dtype and a few shapes,
 * whose answer must be a fraction of the peak in [0, 1]; an executor profile (its "executor" object, read by
 * cost/exec_cpu.c) must come back complete. Seeds: fuzz/seeds/profile/ (cpu-executor.json and cpu-executor-instep.json, with the collectives' in-step
 * points, from autopar profile; the latter's GEMM table trimmed). */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cost/compute.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* GEMM dimensions to ask about: tiny, typical and beyond any table. */
static const double dims[] = {1, 128, 4096, 65536, 1e9};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ap_ctx *ctx = ap_ctx_new();
  arena *a = arena_new();
  if (ctx && a) {
    compute_model cm;
    memset(&cm, 0, sizeof cm);
    cm.tuning = compute_tuning_defaults();
    ap_status st = compute_profile_parse(ctx, a, "profile.json", (const char *)data, size, &cm);
    if (st != AP_OK && !*ap_ctx_error(ctx)) __builtin_trap(); /* every failure says why */
    if (st == AP_OK) {
      if (!cm.profile_source) __builtin_trap();
      /* the executor's part (exec_cpu.c): at least one GEMM, every figure finite and non-negative */
      if (cm.exec && (!cm.exec->present || cm.exec->n_gemm < 1 || !(cm.exec->attn_fwd_s >= 0) || !(cm.exec->base_rss_bytes >= 0)))
        __builtin_trap();
      /* the collectives' measured points (isolated and in step): ascending sizes, positive times */
      for (int q = 0; cm.exec && q < cm.exec->n_comm; q++)
        for (int w = 0; w < 2; w++) {
          int np = w ? cm.exec->comm[q].n_in_step : cm.exec->comm[q].n_points;
          const double *b = w ? cm.exec->comm[q].in_bytes : cm.exec->comm[q].bytes;
          const double *t = w ? cm.exec->comm[q].in_time_s : cm.exec->comm[q].time_s;
          if (np < 0 || np > EXEC_CPU_MAX_POINTS) __builtin_trap();
          for (int i = 0; i < np; i++)
            if (!(t[i] > 0) || (i > 0 && !(b[i] > b[i - 1]))) __builtin_trap();
        }
      for (int dt = 0; dt < HW_DTYPE_COUNT; dt++)
        for (size_t i = 0; i < sizeof dims / sizeof *dims; i++) {
          double m = dims[i], n = dims[(i + 1) % (sizeof dims / sizeof *dims)], k = dims[(i + 2) % (sizeof dims / sizeof *dims)];
          double eff = compute_gemm_eff(&cm, (hw_dtype)dt, m, n, k);
          if (!(eff >= 0 && eff <= 1)) __builtin_trap();
        }
    }
  }
  arena_free(a);
  ap_ctx_free(ctx);
  return 0;
}
