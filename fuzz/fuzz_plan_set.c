/* libFuzzer target for ap_plan_set's values (src/plan/plan_api.c): the input is lines "key=value", each handed
 * to ap_plan_set on a default plan as the CLI's plan flags are (any key, known or not; any value). The plan
 * that results is resolved for 8 devices and judged by plan_validate against a built-in model, and written
 * with ap_plan_json, which must read back (plan_from_json) to the same plan. Seeds: fuzz/seeds/plan_set/.
 * FUZZ_MAX_LEN: 1024 (fuzz-long: each line costs a key lookup and often a message; 1024 bytes hold some 50
 * lines, more than a plan has keys, and run at twice the rate of 4096) */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonx.h"
#include "model/model.h"
#include "plan/plan_api.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static ap_model *model; /* loaded on the first input and kept (reachable, so not a leak) */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 4096) return 0;
  char *text = malloc(size + 1);
  ap_ctx *ctx = ap_ctx_new();
  ap_plan *ap = NULL;
  if (!text || !ctx || ap_plan_new(ctx, &ap) != AP_OK) goto done;
  if (!model && ap_model_load(ctx, "llama-2-7b", &model) != AP_OK) __builtin_trap();
  memcpy(text, data, size);
  text[size] = '\0';
  for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char *eq = strchr(line, '=');
    if (!eq) continue;
    *eq = '\0';
    if (ap_plan_set(ctx, ap, line, eq + 1) != AP_OK && (!*ap_ctx_error(ctx) || strchr(ap_ctx_error(ctx), '\n')))
      __builtin_trap();
  }
  plan_resolve(ap, 8);
  (void)plan_validate(ctx, &ap->p, model_graph(model), 8, NULL);
  char *json = NULL;
  if (ap_plan_json(ctx, ap, &json) == AP_OK) {
    json_t *root = NULL;
    plan *back = malloc(sizeof *back);
    if (jx_parse(ctx, "written.json", json, strlen(json), &root) != AP_OK) __builtin_trap();
    if (back && plan_from_json(ctx, "written.json", root, back) == AP_OK && !plan_equal(&ap->p, back))
      __builtin_trap();
    free(back);
    json_decref(root);
    ap_free(json);
  }
done:
  ap_plan_free(ap);
  ap_ctx_free(ctx);
  free(text);
  return 0;
}
