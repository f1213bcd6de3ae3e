/* libFuzzer target for the op-graph JSON reader (src/model/graph_json.c): bytes go through jx_parse and
 * graph_json_read into a fresh arena; a graph that reads is then evaluated (parameters, FLOP, saved bytes)
 * so that the accounting in graph.c also meets whatever the reader accepts. Seeds: fuzz/seeds/graph/.
 * FUZZ_MAX_LEN: 4096 (fuzz-long: room for the minified seeds; short inputs keep this slow reader at a useful rate) */
#include <stddef.h>
#include <stdint.h>

#include "core/jsonx.h"
#include "model/graph_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ap_ctx *ctx = ap_ctx_new();
  arena *a = arena_new();
  json_t *root = NULL;
  if (ctx && a && jx_parse(ctx, "fuzz.json", (const char *)data, size, &root) == AP_OK) {
    (void)graph_json_detect(root);
    graph g;
    if (graph_json_read(ctx, a, "fuzz.json", root, &g) == AP_OK) {
      volatile double sink = (double)graph_params_total(&g) + (double)graph_params_active(&g);
      sink += graph_train_flop_per_seq(&g, (double)g.default_seq, false);
      sink += graph_train_flop_per_seq(&g, 3, true);
      for (int i = 0; i < g.n_blocks; i++) sink += graph_block_saved_bytes(&g.blocks[i], 2, 5);
      (void)sink;
    }
    json_decref(root);
  }
  arena_free(a);
  ap_ctx_free(ctx);
  return 0;
}
