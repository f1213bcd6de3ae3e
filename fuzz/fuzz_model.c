/* libFuzzer target for the model-file dispatch (model_parse, src/model/model.c): bytes are a model file, which
 * the loader recognises as an op graph (docs/graph-format.md) or a Hugging Face config.json and hands to that
 * reader. A model that loads must describe itself as JSON and text at its default sequence length and at a
 * short one, and count no more active than total parameters. Seeds: fuzz/seeds/model/ (both kinds). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ap_ctx *ctx = ap_ctx_new();
  if (!ctx) return 0;
  ap_model *m = NULL;
  if (model_parse(ctx, "model.json", (const char *)data, size, &m) == AP_OK) {
    if (ap_model_params_active(m) > ap_model_params_total(m) || ap_model_params_total(m) < 0) __builtin_trap();
    static const int64_t seqs[] = {0, 128};
    for (size_t i = 0; i < sizeof seqs / sizeof *seqs; i++) {
      char *out = NULL;
      if (ap_model_describe_json(ctx, m, seqs[i], &out) != AP_OK) __builtin_trap();
      ap_free(out);
      if (ap_model_describe_text(ctx, m, seqs[i], &out) != AP_OK) __builtin_trap();
      ap_free(out);
    }
    ap_model_free(m);
  } else if (m || !*ap_ctx_error(ctx) || strchr(ap_ctx_error(ctx), '\n')) {
    __builtin_trap();
  }
  ap_ctx_free(ctx);
  return 0;
}
