/* libFuzzer target for the exporters (src/plan/export_*.c): bytes go through jx_parse and plan_from_json; a plan
 * that plan_validate accepts for one of four built-in models (a dense Llama 3, Qwen3-MoE, DeepSeek-V3 with MLA,
 * MTP and mixed dense/MoE layers, and GPT-2 with biases and learned positions, each loaded once) is checked and
 * written by every format's can-express function and writer, which must agree: a plan a check accepts must be
 * written, one it refuses must not. Seeds: fuzz/seeds/export/. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/jsonx.h"
#include "model/model.h"
#include "plan/export.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const model_names[] = {"llama-3-8b", "qwen3-30b-a3b", "deepseek-v3", "gpt2"};
enum { N_MODELS = sizeof model_names / sizeof *model_names };
static ap_model *models[N_MODELS];

static void load_models(void) {
  static int loaded;
  if (loaded) return;
  loaded = 1;
  ap_ctx *ctx = ap_ctx_new();
  for (int i = 0; i < N_MODELS; i++)
    if (!ctx || ap_model_load(ctx, model_names[i], &models[i]) != AP_OK) __builtin_trap();
  ap_ctx_free(ctx);
}

static const struct {
  export_check_fn check;
  export_write_fn write;
} formats[] = {
    {megatron_can_express, export_megatron},
    {deepspeed_can_express, export_deepspeed},
    {torchtitan_can_express, export_torchtitan},
    {torchtitan_toml_can_express, export_torchtitan_toml},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  load_models();
  ap_ctx *ctx = ap_ctx_new();
  plan *p = malloc(sizeof *p);
  json_t *root = NULL;
  if (ctx && p && jx_parse(ctx, "plan.json", (const char *)data, size, &root) == AP_OK &&
      plan_from_json(ctx, "plan.json", root, p) == AP_OK) {
    p->n_chunk_recompute = 0; /* collapsed by ap_export before any writer sees a plan */
    export_launch l = {1, plan_n_devices(p), true};
    for (int i = 0; i < N_MODELS; i++) {
      const graph *g = model_graph(models[i]);
      if (plan_validate(ctx, p, g, plan_n_devices(p), NULL) != AP_OK) continue;
      for (size_t f = 0; f < sizeof formats / sizeof *formats; f++) {
        strbuf sb = {0};
        ap_status ok = formats[f].check(ctx, p, g);
        ap_status wrote = formats[f].write(ctx, p, g, &l, &sb);
        if ((ok == AP_OK) != (wrote == AP_OK && sb.len > 0)) __builtin_trap();
        sb_free(&sb);
      }
    }
  }
  json_decref(root);
  free(p);
  ap_ctx_free(ctx);
  return 0;
}
