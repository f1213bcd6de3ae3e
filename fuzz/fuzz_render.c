/* libFuzzer target for ap_render (src/report/doc_render.c), which reads answer documents back (estimate,
 * search, validate, compare-search; docs/json.md) and renders them as text or JSON with the time to train added: any bytes must
 * give AP_OK or a one-line error, never a crash, and a document it accepts must render both ways.
 * Seeds: fuzz/seeds/render/. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "autopar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *doc = malloc(size + 1);
  if (!doc) return 0;
  memcpy(doc, data, size);
  doc[size] = '\0';
  ap_ctx *ctx = ap_ctx_new();
  if (!ctx) __builtin_trap();
  char *text = NULL, *json = NULL;
  ap_status st = ap_render(ctx, doc, NULL, NULL, AP_OUT_TEXT, &text);
  if (!st && ap_render(ctx, doc, NULL, NULL, AP_OUT_JSON, &json) != AP_OK) __builtin_trap();
  ap_free(text);
  ap_free(json);
  text = NULL;
  if (ap_render(ctx, doc, "1T", "2.5", AP_OUT_TEXT, &text) != AP_OK && !*ap_ctx_error(ctx)) __builtin_trap();
  ap_free(text);
  ap_ctx_free(ctx);
  free(doc);
  return 0;
}
