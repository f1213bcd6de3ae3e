/* libFuzzer target for the plan reader (src/plan/plan_json.c) and plan_validate (src/plan/plan.c): bytes go
 * through jx_parse and plan_from_json; a plan that reads is checked by plan_validate against three built-in
 * models (a dense transformer, a mixture of experts and an op graph without layer blocks, each loaded once)
 * with and without a device count, so that the constraints meet whatever the reader accepts. An accepted plan
 * is then written with plan_to_json, which must read back to the same plan (plan_equal) and write the same
 * bytes again, as plan_json.c promises. Seeds: fuzz/seeds/plan/. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonx.h"
#include "model/model.h"
#include "plan/plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The models plans are validated against: loaded on the first input and kept (reachable, so not leaks). */
static const char *const model_names[] = {"llama-2-7b", "mixtral-8x7b", "mlp-3"};
enum { N_MODELS = sizeof model_names / sizeof *model_names };
static ap_model *models[N_MODELS];

static void load_models(void) {
  static int loaded;
  if (loaded) return;
  loaded = 1;
  ap_ctx *ctx = ap_ctx_new();
  /* A preset that does not load would leave the target fuzzing less than it claims: stop at once. */
  for (int i = 0; i < N_MODELS; i++)
    if (!ctx || ap_model_load(ctx, model_names[i], &models[i]) != AP_OK) __builtin_trap();
  ap_ctx_free(ctx);
}

/* Writes p as JSON into a heap string (NULL when out of memory); the caller frees it with free(). */
static char *to_json(const plan *p) {
  strbuf sb = {0};
  plan_to_json(p, &sb);
  return sb_take(&sb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  load_models();
  ap_ctx *ctx = ap_ctx_new();
  plan *p = malloc(sizeof *p), *back = malloc(sizeof *back); /* about 2 KiB each: keep them off the stack */
  json_t *root = NULL;
  if (ctx && p && back && jx_parse(ctx, "plan.json", (const char *)data, size, &root) == AP_OK) {
    if (plan_from_json(ctx, "plan.json", root, p) == AP_OK) {
      for (int i = 0; i < N_MODELS; i++) {
        const graph *g = model_graph(models[i]);
        (void)plan_validate(ctx, p, g, plan_n_devices(p), "plan.json");
        (void)plan_validate(ctx, p, g, 0, NULL);
      }
      /* The writer and the reader must agree: write, read back, compare, and write again. */
      char *json = to_json(p);
      if (json) {
        json_t *again = NULL;
        if (jx_parse(ctx, "written.json", json, strlen(json), &again) != AP_OK) __builtin_trap();
        if (plan_from_json(ctx, "written.json", again, back) != AP_OK) __builtin_trap();
        if (!plan_equal(p, back)) __builtin_trap();
        char *json2 = to_json(back);
        if (json2 && strcmp(json, json2) != 0) __builtin_trap();
        free(json2);
        json_decref(again);
      }
      free(json);
    }
    json_decref(root);
  }
  /* ap_plan_parse (plan_api.c) reads the same text as a handle: it accepts exactly what the reader above does
   * for an autopar-plan/1 object, and never crashes on the rest. */
  char *text = ctx ? malloc(size + 1) : NULL;
  if (text) {
    memcpy(text, data, size);
    text[size] = '\0';
    ap_plan *ap = NULL;
    (void)ap_plan_parse(ctx, text, &ap);
    ap_plan_free(ap);
    free(text);
  }
  free(back);
  free(p);
  ap_ctx_free(ctx);
  return 0;
}
