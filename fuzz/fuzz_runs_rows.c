/* libFuzzer target for the runs-row semantics (validate_read_rows, src/report/validate.c): bytes are a runs
 * table; once the CSV reads, every row's fields are read as validate reads them (ids, outcome, measured
 * figures, the model_config path, the architecture and plan columns, their ranges and enums), without the
 * prediction. A failure says why on one line. Seeds: fuzz/seeds/runs_rows/.
 * FUZZ_MAX_LEN: 2048 (fuzz-long: short inputs keep this slow reader at a useful rate) */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "report/validate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ap_ctx *ctx = ap_ctx_new();
  if (!ctx) return 0;
  int64_t n = 0;
  if (validate_read_rows(ctx, "runs.csv", (const char *)data, size, &n) != AP_OK &&
      (!*ap_ctx_error(ctx) || strchr(ap_ctx_error(ctx), '\n')))
    __builtin_trap();
  ap_ctx_free(ctx);
  return 0;
}
