/* libFuzzer target for the Hugging Face config reader and the transformer builder (src/model/hfconfig.c,
 * src/model/transformer.c): bytes go through jx_parse, hf_config_read and tf_build into a fresh arena; a
 * graph that builds is then evaluated (parameters, FLOP, saved bytes), and the architecture facts the reader
 * fills (graph_arch) go through the exporters' model checks and flags (src/plan/export_megatron_model.c,
 * export_torchtitan.c). Seeds: fuzz/seeds/hfconfig/. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/jsonx.h"
#include "model/hfconfig.h"
#include "model/transformer.h"
#include "plan/export.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ap_ctx *ctx = ap_ctx_new();
  arena *a = arena_new();
  tf_config *c = malloc(sizeof *c); /* about 10 KiB: keep it off the stack */
  json_t *root = NULL;
  if (ctx && a && c && jx_parse(ctx, "config.json", (const char *)data, size, &root) == AP_OK) {
    graph g;
    if (hf_config_read(ctx, "config.json", root, c) == AP_OK && tf_build(ctx, a, c, &g) == AP_OK) {
      volatile double sink = (double)graph_params_total(&g) + (double)graph_params_active(&g);
      sink += graph_train_flop_per_seq(&g, (double)g.default_seq, false);
      for (int i = 0; i < g.n_blocks; i++) sink += graph_block_saved_bytes(&g.blocks[i], 1, 128);
      mshape s;
      if (megatron_shape_of(&g, &s) && megatron_model_check(ctx, &s, &g) == AP_OK) {
        margs m = {{0}, {0}};
        megatron_model_flags(&m, &s, &g, g.default_seq > 0 ? g.default_seq : 128);
        sink += (double)m.body.len;
        sb_free(&m.body);
        sb_free(&m.notes);
      }
      const tt_flavor *t;
      sink += tt_model_of(ctx, "torchtitan", &g, TT_CURRENT, &t) == AP_OK;
      (void)sink;
    }
    json_decref(root);
  }
  free(c);
  arena_free(a);
  ap_ctx_free(ctx);
  return 0;
}
