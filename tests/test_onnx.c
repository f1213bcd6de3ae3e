/* Tests of ONNX import (the optional part "onnx", mk/onnx.mk; src/model/onnx_*.c): the five shipped models
 * (examples/onnx/, made by tools/onnx_models/make.py) count exactly the parameters PyTorch counted
 * (examples/onnx/params.json), their batch and sequence are relabelled so that the FLOP scale with them, and
 * small models built here with protobuf-c check shape inference, external initializers, node naming and the
 * error messages. Runs only where the part is built (PART_TESTS_onnx). */
#include <stdlib.h>

#include <jansson.h>

#include "testutil.h"

#include "core/core.h"
#include "model/graph.h"
#include "model/model.h"
#include "onnx.pb-c.h"

static ap_ctx *onnx_ctx(void) {
  ap_ctx *ctx = ap_ctx_new();
  assert_non_null(ctx);
  assert_int_equal(ap_ctx_add_part(ctx, ap_part_onnx()), AP_OK);
  return ctx;
}

static const char *const shipped[] = {"resnet50", "vit_b_16", "unet", "gpt2_small", "t5_small"};

/* describe's count equals torch's sum of p.numel() over the parameters, recorded by the generating script. */
static void test_shipped_models_param_counts(void **state) {
  (void)state;
  json_error_t err;
  json_t *root = json_load_file("examples/onnx/params.json", 0, &err);
  if (!root) fail_msg("examples/onnx/params.json: %s", err.text);
  json_t *params = json_object_get(root, "params");
  ap_ctx *ctx = onnx_ctx();
  for (size_t i = 0; i < AP_COUNT(shipped); i++) {
    char path[128];
    snprintf(path, sizeof path, "examples/onnx/%s.onnx", shipped[i]);
    ap_model *m = NULL;
    if (ap_model_load(ctx, path, &m)) fail_msg("%s", ap_ctx_error(ctx));
    json_t *want = json_object_get(params, shipped[i]);
    assert_true(json_is_integer(want));
    print_message("# %s: %lld parameters (torch %lld)\n", shipped[i], (long long)ap_model_params_total(m),
                  (long long)json_integer_value(want));
    assert_int_equal(ap_model_params_total(m), json_integer_value(want));
    const graph *g = model_graph(m);
    assert_int_equal(g->n_blocks, 1);
    assert_int_equal(g->blocks[0].role, BLOCK_OTHER);
    assert_true(g->n_edges >= g->blocks[0].n_ops - 1);
    ap_model_free(m);
  }
  ap_ctx_free(ctx);
  json_decref(root);
}

/* The two counts the issue states: ResNet-50 25,557,032 and ViT-B/16 86,567,656 (torchvision's models). */
static void test_resnet_vit_published(void **state) {
  (void)state;
  ap_ctx *ctx = onnx_ctx();
  ap_model *m = NULL;
  assert_int_equal(ap_model_load(ctx, "examples/onnx/resnet50.onnx", &m), AP_OK);
  assert_int_equal(ap_model_params_total(m), 25557032);
  ap_model_free(m);
  assert_int_equal(ap_model_load(ctx, "examples/onnx/vit_b_16.onnx", &m), AP_OK);
  assert_int_equal(ap_model_params_total(m), 86567656);
  ap_model_free(m);
  ap_ctx_free(ctx);
}

/* Batch relabelled: ResNet-50's work is linear in the micro-batch (b = 4 costs twice b = 2), and its input is
 * [B, 3, 224, 224]. GPT-2's input is [B, S]; doubling S more than doubles the work (attention is quadratic)
 * but less than quadruples it. ResNet-50's forward is about 4.1 GMAC per image (He et al. 2016, Table 1:
 * 3.8e9 FLOP counted as multiply-adds, plus the classifier and BatchNorm): 2 × 4.1e9 FLOP within 5%. */
static void test_batch_and_sequence_relabelled(void **state) {
  (void)state;
  ap_ctx *ctx = onnx_ctx();
  ap_model *m = NULL;
  assert_int_equal(ap_model_load(ctx, "examples/onnx/resnet50.onnx", &m), AP_OK);
  const graph_block *blk = &model_graph(m)->blocks[0];
  const graph_tensor *in = &blk->tensors[blk->input];
  assert_int_equal(in->n_dims, 4);
  assert_int_equal(in->dims[0], DIM_B);
  assert_int_equal(in->dims[1], 3);
  op_cost c2 = graph_block_eval(blk, 2, 1), c4 = graph_block_eval(blk, 4, 1);
  assert_rel_close(c4.fwd_gemm_flop, 2 * c2.fwd_gemm_flop, 1e-12);
  assert_rel_close(c4.write_bytes, 2 * c2.write_bytes, 1e-12);
  assert_rel_close(c2.fwd_gemm_flop / 2, 2 * 4.1e9, 0.05);
  ap_model_free(m);

  assert_int_equal(ap_model_load(ctx, "examples/onnx/gpt2_small.onnx", &m), AP_OK);
  blk = &model_graph(m)->blocks[0];
  in = &blk->tensors[blk->input];
  assert_int_equal(in->n_dims, 2);
  assert_int_equal(in->dims[0], DIM_B);
  assert_int_equal(in->dims[1], DIM_S);
  assert_int_equal(model_graph(m)->default_seq, 128);
  op_cost s1 = graph_block_eval(blk, 1, 128), s2 = graph_block_eval(blk, 1, 256);
  double ratio = s2.fwd_gemm_flop / s1.fwd_gemm_flop;
  assert_true(ratio > 2.0 && ratio < 2.2);
  ap_model_free(m);
  ap_ctx_free(ctx);
}

/* Differential: autopar's shape inference against ONNX's own (saved in value_info by the script). Each shipped
 * model loaded again with its value_info removed must give the same graph: tensors of the same shapes, the same
 * parameters and the same FLOP and bytes. */
static void test_inference_matches_value_info(void **state) {
  (void)state;
  ap_ctx *ctx = onnx_ctx();
  for (size_t i = 0; i < AP_COUNT(shipped); i++) {
    char path[128];
    snprintf(path, sizeof path, "examples/onnx/%s.onnx", shipped[i]);
    char *bytes = NULL;
    size_t n = 0;
    assert_int_equal(util_read_file(ctx, path, &bytes, &n), AP_OK);
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, n, (const uint8_t *)bytes);
    assert_non_null(mp);
    assert_true(mp->graph->n_value_info > 0);
    size_t saved_n = mp->graph->n_value_info;
    mp->graph->n_value_info = 0;
    size_t n2 = onnx__model_proto__get_packed_size(mp);
    uint8_t *bare = malloc(n2);
    assert_non_null(bare);
    onnx__model_proto__pack(mp, bare);
    mp->graph->n_value_info = saved_n;
    onnx__model_proto__free_unpacked(mp, NULL);
    ap_model *with = NULL, *without = NULL;
    if (model_parse_onnx(ctx, path, bytes, n, &with)) fail_msg("%s", ap_ctx_error(ctx));
    if (model_parse_onnx(ctx, path, bare, n2, &without)) fail_msg("%s (without value_info)", ap_ctx_error(ctx));
    const graph_block *a = &model_graph(with)->blocks[0], *b = &model_graph(without)->blocks[0];
    assert_int_equal(a->n_tensors, b->n_tensors);
    assert_int_equal(a->n_ops, b->n_ops);
    for (int t = 0; t < a->n_tensors; t++) {
      assert_string_equal(a->tensors[t].name, b->tensors[t].name);
      assert_int_equal(a->tensors[t].n_dims, b->tensors[t].n_dims);
      for (int d = 0; d < a->tensors[t].n_dims; d++) assert_int_equal(a->tensors[t].dims[d], b->tensors[t].dims[d]);
    }
    assert_int_equal(ap_model_params_total(with), ap_model_params_total(without));
    op_cost ca = graph_block_eval(a, 3, 64), cb = graph_block_eval(b, 3, 64);
    assert_rel_close(cb.fwd_gemm_flop, ca.fwd_gemm_flop, 1e-12);
    assert_rel_close(cb.fwd_vector_flop, ca.fwd_vector_flop, 1e-12);
    assert_rel_close(cb.read_bytes + cb.write_bytes, ca.read_bytes + ca.write_bytes, 1e-12);
    print_message("# %s: %d tensors, %d ops, shapes inferred without value_info agree\n", shipped[i], a->n_tensors, a->n_ops);
    ap_model_free(with);
    ap_model_free(without);
    free(bare);
    free(bytes);
  }
  ap_ctx_free(ctx);
}

/* ---- Small models built with protobuf-c ---- */

typedef struct {
  Onnx__ModelProto model;
  Onnx__GraphProto graph;
  Onnx__OperatorSetIdProto opset, *opsets[1];
  Onnx__NodeProto nodes[4], *node_ptrs[4];
  Onnx__ValueInfoProto inputs[2], *input_ptrs[2];
  Onnx__TypeProto types[2];
  Onnx__TypeProto__Tensor tensor_types[2];
  Onnx__TensorShapeProto shapes[2];
  Onnx__TensorShapeProto__Dimension dims[2][4], *dim_ptrs[2][4];
  Onnx__TensorProto inits[2], *init_ptrs[2];
  int64_t init_dims[2][4];
} mb;

static void mb_init(mb *b) {
  memset(b, 0, sizeof *b);
  b->model = (Onnx__ModelProto)ONNX__MODEL_PROTO__INIT;
  b->graph = (Onnx__GraphProto)ONNX__GRAPH_PROTO__INIT;
  b->opset = (Onnx__OperatorSetIdProto)ONNX__OPERATOR_SET_ID_PROTO__INIT;
  b->opset.has_version = true;
  b->opset.version = 14;
  b->opsets[0] = &b->opset;
  b->model.has_ir_version = true;
  b->model.ir_version = 7;
  b->model.n_opset_import = 1;
  b->model.opset_import = b->opsets;
  b->model.graph = &b->graph;
  b->graph.node = b->node_ptrs;
  b->graph.input = b->input_ptrs;
  b->graph.initializer = b->init_ptrs;
}

/* A graph input of elem type et and the given dims. */
static void mb_input(mb *b, char *name, int et, int n, const int64_t *d) {
  size_t i = b->graph.n_input++;
  b->inputs[i] = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
  b->types[i] = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
  b->tensor_types[i] = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
  b->shapes[i] = (Onnx__TensorShapeProto)ONNX__TENSOR_SHAPE_PROTO__INIT;
  for (int k = 0; k < n; k++) {
    b->dims[i][k] = (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
    b->dims[i][k].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    b->dims[i][k].dim_value = d[k];
    b->dim_ptrs[i][k] = &b->dims[i][k];
  }
  b->shapes[i].n_dim = (size_t)n;
  b->shapes[i].dim = b->dim_ptrs[i];
  b->tensor_types[i].has_elem_type = true;
  b->tensor_types[i].elem_type = et;
  b->tensor_types[i].shape = &b->shapes[i];
  b->types[i].value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  b->types[i].tensor_type = &b->tensor_types[i];
  b->inputs[i].name = name;
  b->inputs[i].type = &b->types[i];
  b->input_ptrs[i] = &b->inputs[i];
}

/* A float initializer whose data is external (the data file does not exist: only dims matter). */
static void mb_init_external(mb *b, char *name, int n, const int64_t *d) {
  size_t i = b->graph.n_initializer++;
  b->inits[i] = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
  memcpy(b->init_dims[i], d, sizeof d[0] * (size_t)n);
  b->inits[i].n_dims = (size_t)n;
  b->inits[i].dims = b->init_dims[i];
  b->inits[i].has_data_type = true;
  b->inits[i].data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
  b->inits[i].name = name;
  b->inits[i].has_data_location = true;
  b->inits[i].data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  b->init_ptrs[i] = &b->inits[i];
}

static void mb_node(mb *b, char *name, char *op_type, size_t n_in, char **in, size_t n_out, char **out) {
  size_t i = b->graph.n_node++;
  b->nodes[i] = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
  b->nodes[i].name = name;
  b->nodes[i].op_type = op_type;
  b->nodes[i].n_input = n_in;
  b->nodes[i].input = in;
  b->nodes[i].n_output = n_out;
  b->nodes[i].output = out;
  b->node_ptrs[i] = &b->nodes[i];
}

/* Packs b and loads it as "net.onnx"; returns the status and leaves *m loaded on success. */
static ap_status mb_load(ap_ctx *ctx, mb *b, ap_model **m) {
  size_t n = onnx__model_proto__get_packed_size(&b->model);
  uint8_t *buf = malloc(n ? n : 1);
  assert_non_null(buf);
  onnx__model_proto__pack(&b->model, buf);
  ap_status st = model_parse_onnx(ctx, "net.onnx", buf, n, m);
  free(buf);
  return st;
}

/* x [2, 8] · W [8, 4] (external, no data file) → Relu, with no value_info: shapes inferred, the parameters
 * come from the initializer's dims, the batch is relabelled, an unnamed node is named <op_type>_<index>. */
static void test_inferred_shapes_and_external_weights(void **state) {
  (void)state;
  mb b;
  mb_init(&b);
  int64_t xd[2] = {2, 8}, wd[2] = {8, 4};
  mb_input(&b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, xd);
  mb_init_external(&b, "W", 2, wd);
  char *mm_in[] = {"x", "W"}, *mm_out[] = {"h"}, *r_in[] = {"h"}, *r_out[] = {"y"};
  mb_node(&b, "fc", "MatMul", 2, mm_in, 1, mm_out);
  mb_node(&b, NULL, "Relu", 1, r_in, 1, r_out);
  ap_ctx *ctx = onnx_ctx();
  ap_model *m = NULL;
  if (mb_load(ctx, &b, &m)) fail_msg("%s", ap_ctx_error(ctx));
  const graph *g = model_graph(m);
  const graph_block *blk = &g->blocks[0];
  assert_int_equal(ap_model_params_total(m), 32);
  assert_int_equal(blk->n_ops, 2);
  assert_string_equal(blk->ops[0].name, "fc");
  assert_string_equal(blk->ops[1].name, "Relu_1");
  assert_string_equal(blk->ops[1].op_type, "Relu");
  assert_int_equal(blk->ops[0].kind, OP_MATMUL);
  assert_int_equal(blk->ops[0].weight_k, 8);
  assert_int_equal(blk->ops[0].weight_n, 4);
  const graph_tensor *y = &blk->tensors[blk->ops[1].out];
  assert_int_equal(y->n_dims, 2);
  assert_int_equal(y->dims[0], DIM_B);
  assert_int_equal(y->dims[1], 4);
  /* one edge: fc's output h into Relu_1 */
  assert_int_equal(g->n_edges, 1);
  assert_int_equal(g->edges[0].from_op, 0);
  assert_int_equal(g->edges[0].to_op, 1);
  op_cost c = graph_op_eval(blk, &blk->ops[0], 3, 1);
  assert_rel_close(c.fwd_gemm_flop, 2.0 * 3 * 8 * 4, 1e-12);
  ap_model_free(m);
  ap_ctx_free(ctx);
}

static void expect_error(mb *b, ap_status want, const char *msg) {
  ap_ctx *ctx = onnx_ctx();
  ap_model *m = NULL;
  ap_status st = mb_load(ctx, b, &m);
  if (st != want) fail_msg("status %d, want %d (%s)", (int)st, (int)want, ap_ctx_error(ctx));
  assert_null(m);
  assert_string_equal(ap_ctx_error(ctx), msg);
  ap_ctx_free(ctx);
}

static void test_unsupported_op_named(void **state) {
  (void)state;
  mb b;
  mb_init(&b);
  int64_t xd[2] = {2, 8};
  mb_input(&b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, xd);
  char *in[] = {"x"}, *out[] = {"y"}, *in2[] = {"y"}, *out2[] = {"z"};
  mb_node(&b, NULL, "Relu", 1, in, 1, out);
  mb_node(&b, "Foo_12", "Foo", 1, in2, 1, out2);
  expect_error(&b, AP_UNSUPPORTED, "net.onnx: node 'Foo_12' (op_type Foo): unsupported op type");
  b.nodes[1].name = NULL; /* unnamed: <op_type>_<index> */
  expect_error(&b, AP_UNSUPPORTED, "net.onnx: node 'Foo_1' (op_type Foo): unsupported op type");
}

static void test_bad_files(void **state) {
  (void)state;
  mb b;
  mb_init(&b);
  int64_t xd[2] = {2, 8};
  mb_input(&b, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, xd);
  char *in[] = {"nope"}, *out[] = {"y"};
  mb_node(&b, "r", "Relu", 1, in, 1, out);
  expect_error(&b, AP_INVALID,
               "net.onnx: node 'r' (op_type Relu): input 'nope' is not a graph input, an initializer or an earlier node's output");
  /* a symbolic batch */
  b.dims[0][0].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
  b.dims[0][0].dim_param = "batch";
  in[0] = "x";
  ap_ctx *ctx = onnx_ctx();
  ap_model *m = NULL;
  assert_int_equal(mb_load(ctx, &b, &m), AP_UNSUPPORTED);
  assert_error_contains(ctx, "net.onnx: graph input 'x': its shape is unknown or symbolic");
  /* bytes that are not a protobuf */
  static const char junk[] = "\xff\xff\xff\xff not a model";
  assert_int_equal(model_parse_onnx(ctx, "net.onnx", junk, sizeof junk - 1, &m), AP_INVALID);
  assert_error_contains(ctx, "net.onnx: not an ONNX model");
  assert_null(m);
  ap_ctx_free(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shipped_models_param_counts),
      cmocka_unit_test(test_resnet_vit_published),
      cmocka_unit_test(test_batch_and_sequence_relabelled),
      cmocka_unit_test(test_inference_matches_value_info),
      cmocka_unit_test(test_inferred_shapes_and_external_weights),
      cmocka_unit_test(test_unsupported_op_named),
      cmocka_unit_test(test_bad_files),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
