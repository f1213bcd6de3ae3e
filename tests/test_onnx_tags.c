/* The ONNX importer's batch and sequence (src/model/onnx_dims.c ox_dim_tags, onnx_import.c relabel_tags): B and
 * S are tagged at the graph inputs and carried through each node by its operator's semantics, not inferred from
 * sizes, so a graph whose sequence length equals its hidden size imports with the right symbolic dims
 * (GPT-2-medium's and Llama-7B's shapes, seq = hidden = 1024 or 4096, failed with "matmul shapes disagree" when
 * every dim of the sequence's size was taken for S). Here a GPT-shaped attention block at seq = hidden = 16. */
#include "testutil.h"
#include "onnx_build.h"

#include "model/graph.h"

enum { I64 = ONNX__TENSOR_PROTO__DATA_TYPE__INT64 };

static const graph_tensor *tensor(const graph_block *blk, const char *name) {
  for (int i = 0; i < blk->n_tensors; i++)
    if (strcmp(blk->tensors[i].name, name) == 0) return &blk->tensors[i];
  fail_msg("no tensor %s", name);
  return NULL;
}

static void expect_dims(const graph_block *blk, const char *name, int n, const int64_t *want) {
  const graph_tensor *t = tensor(blk, name);
  char got[128] = "", exp[128] = "";
  for (int i = 0; i < t->n_dims; i++) snprintf(got + strlen(got), sizeof got - strlen(got), " %lld", (long long)t->dims[i]);
  for (int i = 0; i < n; i++) snprintf(exp + strlen(exp), sizeof exp - strlen(exp), " %lld", (long long)want[i]);
  if (strcmp(got, exp) != 0) fail_msg("%s: dims%s, want%s (B = %d, S = %d)", name, got, exp, DIM_B, DIM_S);
}

static void test_seq_equal_hidden(void **state) {
  (void)state;
  onnx_b *b = ob_new(13);
  ob_input(b, "ids", I64, OB_D(2, 16));
  ob_init(b, "wte", OB_D(50, 16), NULL, 0);
  ob_init(b, "wqkv", OB_D(16, 48), NULL, 0);
  ob_init(b, "wo", OB_D(16, 16), NULL, 0);
  ob_init(b, "split", 0, NULL, (int64_t[]){16, 16, 16}, 3);
  ob_init(b, "shp4", 0, NULL, (int64_t[]){2, 16, 4, 4}, 4);
  ob_init(b, "shp3", 0, NULL, (int64_t[]){2, 16, 16}, 3);
  ob_node(b, "emb", "Gather", OB_L("wte", "ids"), OB_L("x"));
  ob_node(b, "qkv", "MatMul", OB_L("x", "wqkv"), OB_L("qkv"));
  ob_node(b, "split", "Split", OB_L("qkv", "split"), OB_L("q", "k", "v"));
  ob_attr_ints(b, "axis", -1, (int64_t[]){2});
  ob_node(b, "rq", "Reshape", OB_L("q", "shp4"), OB_L("q4"));
  ob_node(b, "tq", "Transpose", OB_L("q4"), OB_L("qt"));
  ob_attr_ints(b, "perm", OB_D(0, 2, 1, 3));
  ob_node(b, "rk", "Reshape", OB_L("k", "shp4"), OB_L("k4"));
  ob_node(b, "tk", "Transpose", OB_L("k4"), OB_L("kt"));
  ob_attr_ints(b, "perm", OB_D(0, 2, 3, 1));
  ob_node(b, "rv", "Reshape", OB_L("v", "shp4"), OB_L("v4"));
  ob_node(b, "tv", "Transpose", OB_L("v4"), OB_L("vt"));
  ob_attr_ints(b, "perm", OB_D(0, 2, 1, 3));
  ob_node(b, "scores", "MatMul", OB_L("qt", "kt"), OB_L("sc"));
  ob_node(b, "softmax", "Softmax", OB_L("sc"), OB_L("p"));
  ob_attr_ints(b, "axis", -1, (int64_t[]){-1});
  ob_node(b, "pv", "MatMul", OB_L("p", "vt"), OB_L("o"));
  ob_node(b, "to", "Transpose", OB_L("o"), OB_L("o2"));
  ob_attr_ints(b, "perm", OB_D(0, 2, 1, 3));
  ob_node(b, "ro", "Reshape", OB_L("o2", "shp3"), OB_L("o3"));
  ob_node(b, "proj", "MatMul", OB_L("o3", "wo"), OB_L("y"));
  ob_node(b, "residual", "Add", OB_L("y", "x"), OB_L("out"));
  ap_ctx *ctx = ap_ctx_new();
  assert_int_equal(ap_ctx_add_part(ctx, ap_part_onnx()), AP_OK);
  ap_model *m = NULL;
  if (ob_load(ctx, b, &m)) fail_msg("%s", ap_ctx_error(ctx));
  const graph_block *blk = &model_graph(m)->blocks[0];
  expect_dims(blk, "x", OB_D(DIM_B, DIM_S, 16));
  expect_dims(blk, "q", OB_D(DIM_B, DIM_S, 16)); /* the packed qkv read as its parts (onnx_packed.c) */
  expect_dims(blk, "v", OB_D(DIM_B, DIM_S, 16));
  expect_dims(blk, "qt", OB_D(DIM_B, 4, DIM_S, 4));
  expect_dims(blk, "kt", OB_D(DIM_B, 4, 4, DIM_S));
  expect_dims(blk, "sc", OB_D(DIM_B, 4, DIM_S, DIM_S));
  expect_dims(blk, "o3", OB_D(DIM_B, DIM_S, 16));
  expect_dims(blk, "out", OB_D(DIM_B, DIM_S, 16));
  /* the graph scales with the sequence: the scores' FLOP grow as S², the projection's as S */
  const graph_op *sc = NULL, *proj = NULL;
  for (int i = 0; i < blk->n_ops; i++) {
    if (strcmp(blk->ops[i].name, "scores") == 0) sc = &blk->ops[i];
    if (strcmp(blk->ops[i].name, "proj") == 0) proj = &blk->ops[i];
  }
  assert_non_null(sc);
  assert_non_null(proj);
  assert_rel_close(graph_op_eval(blk, sc, 2, 32).fwd_gemm_flop, 4 * graph_op_eval(blk, sc, 2, 16).fwd_gemm_flop, 1e-12);
  assert_rel_close(graph_op_eval(blk, proj, 2, 32).fwd_gemm_flop, 2 * graph_op_eval(blk, proj, 2, 16).fwd_gemm_flop, 1e-12);
  ap_model_free(m);
  ap_ctx_free(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_seq_equal_hidden),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
