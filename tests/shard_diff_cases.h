/* The cases of tests/test_shard_diff.c, one test per op kind: a one-node model each (inputs, weights and
 * constants in node order, attributes, the reference kernel's parameters). Shapes keep every dim distinct from
 * the batch 4 except where the case is about a coincidence (a transpose or a reduction of two equal dims, which
 * matching sizes would confuse), and divisible by the meshes' 2 and 4 where a split is meant to be legal. */
#ifndef AP_TESTS_SHARD_DIFF_CASES_H
#define AP_TESTS_SHARD_DIFF_CASES_H

#define IDS(nm, max, ...) {.name = nm, .et = INT64, .n = (int)AP_COUNT(((int64_t[]){__VA_ARGS__})), .d = {__VA_ARGS__}, .max_id = max}
#define CONST1(nm, ...) {.name = nm, .et = INT64, .init = true, .n = 1, .d = {(int64_t)AP_COUNT(((int64_t[]){__VA_ARGS__}))}, \
                         .n_vals = (int)AP_COUNT(((int64_t[]){__VA_ARGS__})), .vals = {__VA_ARGS__}}

static void test_transpose(void **state) {
  (void)state;
  /* two equal dims swapped: a split of output dim 1 is a split of input dim 2, not of input dim 1 */
  dcase a = {"Transpose perm 0,2,1,3 of [4,8,8,2]", 13, {.op = "Transpose", .perm = {0, 2, 1, 3}}, 1, {F("x", 4, 8, 8, 2)},
             1, 1, {INTS("perm", 0, 2, 1, 3)}, .min_strategies = 9};
  run_case(&a);
  dcase b = {"Transpose perm 2,0,1 of [4,6,8]", 13, {.op = "Transpose", .perm = {2, 0, 1}}, 1, {F("x", 4, 6, 8)}, 1, 1,
             {INTS("perm", 2, 0, 1)}, .min_strategies = 6};
  run_case(&b);
  dcase c = {"Transpose default perm of [4,6,8]", 13, {.op = "Transpose", .perm = {2, 1, 0}}, 1, {F("x", 4, 6, 8)}, 1, 0, {{0}},
             .min_strategies = 6};
  run_case(&c);
}

static void test_reshape(void **state) {
  (void)state;
  dcase a = {"Reshape [4,8,6] -> [4,8,2,3] (split)", 13, {.op = "Reshape"}, 2, {F("x", 4, 8, 6), CONST1("shape", 4, 8, 2, 3)},
             1, 0, {{0}}, .min_strategies = 6};
  run_case(&a);
  dcase b = {"Reshape [4,8,2,3] -> [4,8,6] (merge)", 13, {.op = "Reshape"}, 2, {F("x", 4, 8, 2, 3), CONST1("shape", 4, 8, 6)},
             1, 0, {{0}}, .min_strategies = 6};
  run_case(&b);
  dcase c = {"Reshape [4,8,6] -> [4,4,12] (leading factor)", 13, {.op = "Reshape"}, 2,
             {F("x", 4, 8, 6), CONST1("shape", 4, 4, 12)}, 1, 0, {{0}}, .min_strategies = 6};
  run_case(&c);
  dcase d = {"Reshape [4,6,8] -> [4,8,6] (no dim carries)", 13, {.op = "Reshape"}, 2, {F("x", 4, 6, 8), CONST1("shape", 4, 8, 6)},
             1, 0, {{0}}, .min_strategies = 4};
  run_case(&d);
}

static void test_concat_split_slice(void **state) {
  (void)state;
  dcase a = {"Concat of 5 inputs on axis 1", 13, {.op = "Concat", .axis = 1}, 5,
             {F("x0", 4, 2, 6), F("x1", 4, 2, 6), F("x2", 4, 2, 6), F("x3", 4, 2, 6), F("x4", 4, 2, 6)}, 1, 1,
             {INT("axis", 1)}, .min_strategies = 6};
  run_case(&a);
  dcase b = {"Split [4,6,12] into 3 on axis 2", 13, {.op = "Split", .axis = 2, .n_out = 3, .split = {4, 4, 4}}, 2,
             {F("x", 4, 6, 12), CONST1("split", 4, 4, 4)}, 3, 1, {INT("axis", 2)}, .min_strategies = 6};
  run_case(&b);
  dcase c = {"Slice [4,8,6] axis 1 from 1 to 5", 13, {.op = "Slice", .axis = 1, .start = 1, .end = 5}, 4,
             {F("x", 4, 8, 6), CONST1("starts", 1), CONST1("ends", 5), CONST1("axes", 1)}, 1, 0, {{0}}, .min_strategies = 6};
  run_case(&c);
}

static void test_softmax_layernorm(void **state) {
  (void)state;
  dcase a = {"Softmax on the last axis of [4,8,8]", 13, {.op = "Softmax", .axis = 2}, 1, {F("x", 4, 8, 8)}, 1, 1,
             {INT("axis", -1)}, .min_strategies = 4};
  run_case(&a);
  dcase b = {"Softmax on axis 1 of [4,8,8]", 13, {.op = "Softmax", .axis = 1}, 1, {F("x", 4, 8, 8)}, 1, 1, {INT("axis", 1)},
             .min_strategies = 4};
  run_case(&b);
  dcase c = {"LayerNormalization of [4,6,8]", 17, {.op = "LayerNormalization", .axis = 2, .eps = 1e-5}, 3,
             {F("x", 4, 6, 8), W("gamma", 8), W("beta", 8)}, 1, 2, {INT("axis", -1), {.name = "epsilon", .kind = 'f', .f = 1e-5f}},
             .min_strategies = 4};
  run_case(&c);
}

static void test_batchnorm(void **state) {
  (void)state;
  dcase a = {"BatchNormalization (training) of [4,4,3,3]", 15, {.op = "BatchNormalization", .eps = 1e-5}, 5,
             {F("x", 4, 4, 3, 3), W("scale", 4), W("bias", 4), W("mean", 4), W("var", 4)}, 1, 2,
             {INT("training_mode", 1), {.name = "epsilon", .kind = 'f', .f = 1e-5f}}, .min_strategies = 4};
  run_case(&a);
}

static void test_gather(void **state) {
  (void)state;
  dcase a = {"Gather embedding [16,8] by ids [4,6] (vocab parallel)", 13, {.op = "Gather", .axis = 0}, 2,
             {W("table", 16, 8), IDS("ids", 16, 4, 6)}, 1, 0, {{0}}, .min_strategies = 9};
  run_case(&a);
  dcase b = {"Gather of an activation [4,6,8] axis 1 by {0,3}", 13, {.op = "Gather", .axis = 1}, 2,
             {F("x", 4, 6, 8), CONST1("idx", 0, 3)}, 1, 1, {INT("axis", 1)}, .min_strategies = 4};
  run_case(&b);
}

static void test_matmul_gemm(void **state) {
  (void)state;
  dcase a = {"MatMul [4,6,8] x weight [8,12]", 13, {.op = "MatMul"}, 2, {F("x", 4, 6, 8), W("w", 8, 12)}, 1, 0, {{0}},
             .min_strategies = 9};
  run_case(&a);
  dcase b = {"MatMul of activations [4,2,6,8] x [4,2,8,6]", 13, {.op = "MatMul"}, 2, {F("a", 4, 2, 6, 8), F("b", 4, 2, 8, 6)},
             1, 0, {{0}}, .min_strategies = 9};
  run_case(&b);
  dcase c = {"Gemm [4,8] x W[12,8]^T + C[12]", 13, {.op = "Gemm", .trans_b = true}, 3, {F("x", 4, 8), W("w", 12, 8), W("c", 12)},
             1, 1, {INT("transB", 1)}, .min_strategies = 9};
  run_case(&c);
}

static void test_conv_pool(void **state) {
  (void)state;
  dcase a = {"Conv [4,4,6,6] * W[8,4,3,3] + B, pad 1", 13, {.op = "Conv", .kernel = 3, .pad = 1}, 3,
             {F("x", 4, 4, 6, 6), W("w", 8, 4, 3, 3), W("b", 8)}, 1, 2, {INTS("kernel_shape", 3, 3), INTS("pads", 1, 1, 1, 1)},
             .min_strategies = 9};
  run_case(&a);
  dcase b = {"MaxPool 2x2 stride 2 of [4,4,4,4]", 13, {.op = "MaxPool", .kernel = 2}, 1, {F("x", 4, 4, 4, 4)}, 1, 2,
             {INTS("kernel_shape", 2, 2), INTS("strides", 2, 2)}, .min_strategies = 4};
  run_case(&b);
}

static void test_broadcast_nary(void **state) {
  (void)state;
  dcase a = {"Add [4,6,8] + [6,1]", 13, {.op = "Add"}, 2, {F("x", 4, 6, 8), F("y", 6, 1)}, 1, 0, {{0}}, .min_strategies = 9};
  run_case(&a);
  dcase b = {"Sum of 5 broadcast inputs", 13, {.op = "Sum"}, 5,
             {F("x0", 4, 6, 8), F("x1", 6, 8), F("x2", 1, 6, 1), F("x3", 4, 6, 8), F("x4", 8)}, 1, 0, {{0}}, .min_strategies = 9};
  run_case(&b);
  dcase c = {"Max of 3 inputs", 13, {.op = "Max"}, 3, {F("x0", 4, 6, 8), F("x1", 4, 6, 8), F("x2", 4, 1, 8)}, 1, 0, {{0}},
             .min_strategies = 9};
  run_case(&c);
  dcase d = {"Relu of [4,6,8]", 13, {.op = "Relu"}, 1, {F("x", 4, 6, 8)}, 1, 0, {{0}}, .min_strategies = 9};
  run_case(&d);
}

static void test_reduce(void **state) {
  (void)state;
  /* the reduced dim equals a kept one: matching sizes would carry a split of the reduced dim */
  dcase a = {"ReduceMean [4,8,8] over axis 2, keepdims 0", 13, {.op = "ReduceMean", .axes = 4u, .keepdims = false}, 1,
             {F("x", 4, 8, 8)}, 1, 2, {INTS("axes", 2), INT("keepdims", 0)}, .min_strategies = 4};
  run_case(&a);
  dcase b = {"ReduceMean [4,6,8] over axis 1, keepdims 1", 13, {.op = "ReduceMean", .axes = 2u, .keepdims = true}, 1,
             {F("x", 4, 6, 8)}, 1, 2, {INTS("axes", 1), INT("keepdims", 1)}, .min_strategies = 4};
  run_case(&b);
}

#define SHARD_DIFF_TESTS(X) \
  X(test_transpose) X(test_reshape) X(test_concat_split_slice) X(test_softmax_layernorm) X(test_batchnorm) \
  X(test_gather) X(test_matmul_gemm) X(test_conv_pool) X(test_broadcast_nary) X(test_reduce)

#endif
