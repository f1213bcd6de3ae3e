/* libFuzzer target for the ONNX reader: the "onnx" part's protobuf decoding (src/model/onnx_pb.c) and the core
 * importer behind it (src/model/onnx_import.c, onnx_shape.c, onnx_ops.c). Bytes are decoded as an ONNX model
 * through a context holding the part; a model that imports is then evaluated (parameters, FLOP, saved bytes,
 * edges) so that graph.c's accounting also meets whatever the importer accepts. Seeds: fuzz/seeds/onnx/, a few
 * small files of Debian's libonnx-testdata (node tests of supported and unsupported ops) and a structure-only
 * U-Net export. Links libautopar-onnx.a (the Makefile's fuzz rule links every built part). Inputs up to 1.2 MB
 * (FUZZ_MAX_LEN: 1200000), so that nesting and size bounds (src/model/onnx_wire.c, issue 19 class 2) are reached. */
#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ap_ctx *ctx = ap_ctx_new();
  if (!ctx || ap_ctx_add_part(ctx, ap_part_onnx()) != AP_OK) {
    ap_ctx_free(ctx);
    return 0;
  }
  ap_model *m = NULL;
  if (model_parse_onnx(ctx, "fuzz.onnx", data, size, &m) == AP_OK) {
    const graph *g = model_graph(m);
    volatile double sink = (double)graph_params_total(g) + (double)graph_params_active(g);
    sink += graph_train_flop_per_seq(g, (double)g->default_seq, false);
    sink += graph_train_flop_per_seq(g, 3, true);
    for (int i = 0; i < g->n_blocks; i++) sink += graph_block_saved_bytes(&g->blocks[i], 2, 5);
    for (int i = 0; i < g->n_edges; i++) sink += g->edges[i].from_op + g->edges[i].to_op;
    (void)sink;
    ap_model_free(m);
  }
  ap_ctx_free(ctx);
  return 0;
}
