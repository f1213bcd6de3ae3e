/* libFuzzer target for the ONNX reader: the "onnx" part's protobuf decoding (src/model/onnx_pb.c) and the core
 * importer behind it (src/model/onnx_import.c, onnx_shape.c, onnx_ops.c). Bytes are decoded as an ONNX model
 * through a context holding the part; a model that imports is then evaluated (parameters, FLOP, saved bytes,
 * edges) so that graph.c's accounting also meets whatever the importer accepts. Seeds: fuzz/seeds/onnx/, a few
 * small files of Debian's libonnx-testdata (node tests of supported and unsupported ops) and a structure-only
 * U-Net export. The same bytes then go through the part's `decode`, which keeps every tensor's values for the
 * graph executor (src/exec/graph/), and every kept array is read to its stated length. Links
 * libautopar-onnx.a (the Makefile's fuzz rule links every built part). Inputs up to 1.2 MB (FUZZ_MAX_LEN:
 * 1200000), so that nesting and size bounds (src/model/onnx_wire.c, issue 19 class 2) are reached. */
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "model/model.h"
#include "model/onnx.h"

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
  const onnx_part_ops *ops = ctx_part_ops(ctx, "onnx");
  arena *a = arena_new();
  onnx_model om;
  if (ops && ops->decode && a && ops->decode(ctx, a, "fuzz.onnx", data, size, &om) == AP_OK) {
    volatile double sink = 0;
    for (int i = 0; i < om.n_inits; i++) {
      const onnx_tensor *t = &om.inits[i];
      double n = 1;
      for (int d = 0; d < t->n_dims; d++) n *= (double)t->dims[d];
      for (int64_t e = 0; t->f32 && e < (int64_t)n; e++) sink += t->f32[e];
      for (int64_t e = 0; e < t->n_vals; e++) sink += (double)t->vals[e];
    }
    for (int k = 0; k < om.n_nodes; k++) {
      const onnx_node *nd = &om.nodes[k];
      for (int i = 0; i < nd->n_in; i++) sink += (double)nd->in[i][0];
      for (int i = 0; i < nd->n_attrs; i++) {
        for (int j = 0; nd->attrs[i].floats && j < nd->attrs[i].n_floats; j++) sink += nd->attrs[i].floats[j];
        for (int j = 0; j < nd->attrs[i].n_ints; j++) sink += (double)nd->attrs[i].ints[j];
      }
    }
    (void)sink;
  }
  arena_free(a);
  ap_ctx_free(ctx);
  return 0;
}
