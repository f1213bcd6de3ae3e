/* Megatron's layout found, not annotated, on a BERT-shaped ONNX graph (built here with tests/onnx_build.h, as
 * torch.onnx exports a pre-LN encoder with separate query/key/value projections: Gather embedding, per layer
 * LayerNormalization, Q/K/V MatMul, Reshape to [B, S, heads, d], Transpose, Q·Kᵀ, Softmax, ·V, Transpose back,
 * Reshape, output projection, residual Add, LayerNormalization, fc1, Relu, fc2, residual Add; a LM head MatMul
 * and SoftmaxCrossEntropyLoss). At a small batch on 8 devices the ILP splits the attention by heads (Q/K/V
 * column-parallel, the output projection row-parallel), the MLP column-then-row, and the embedding and the LM
 * head on the vocabulary (Shoeybi et al. 2019 §3, Fig. 3; VocabParallelEmbedding, the vocab-parallel
 * cross-entropy), with Megatron's two all-reduces per layer in the forward pass; at a large batch it is data
 * parallel. */
#include "testutil.h"
#include "onnx_build.h"

#include "hw/hw.h"
#include "model/graph.h"
#include "search/graph/graph_plan.h"

enum { I64 = ONNX__TENSOR_PROTO__DATA_TYPE__INT64, LAYERS = 2, H = 4096, HEADS = 32, D = 128, F = 16384, V = 32000, S = 1024 };

static char *nm(char *buf, int l, const char *what) {
  snprintf(buf, 64, "/layers.%d/%s", l, what);
  return buf;
}

/* Each name lives in names[] so that the builder can keep pointers to it. */
static char names[512][64];
static int n_names;
static char *N(int l, const char *what) { return nm(names[n_names++], l, what); }

static ap_model *bert(ap_ctx *ctx, int64_t batch) {
  n_names = 0;
  onnx_b *b = ob_new(17);
  ob_input(b, "ids", I64, OB_D(batch, S));
  ob_input(b, "labels", I64, OB_D(batch, S));
  ob_init(b, "wte", OB_D(V, H), NULL, 0);
  ob_init(b, "head", OB_D(H, V), NULL, 0);
  ob_init(b, "shp4", 0, NULL, (int64_t[]){batch, S, HEADS, D}, 4);
  ob_init(b, "shp3", 0, NULL, (int64_t[]){batch, S, H}, 3);
  ob_init(b, "shp2", 0, NULL, (int64_t[]){batch * S, V}, 2);
  ob_init(b, "lab1", 0, NULL, (int64_t[]){batch * S}, 1);
  ob_node(b, "/emb/Gather", "Gather", OB_L("wte", "ids"), OB_L("x0"));
  char *x = "x0";
  for (int l = 0; l < LAYERS; l++) {
    static const char *const w[] = {"ln1.w", "ln1.b", "q.w", "k.w", "v.w", "o.w", "ln2.w", "ln2.b", "fc1.w", "fc2.w"};
    static const int64_t wd[][2] = {{H, 0}, {H, 0}, {H, H}, {H, H}, {H, H}, {H, H}, {H, 0}, {H, 0}, {H, F}, {F, H}};
    char *wn[10];
    for (int k = 0; k < 10; k++) {
      wn[k] = N(l, w[k]);
      ob_init(b, wn[k], wd[k][1] ? 2 : 1, wd[k], NULL, 0);
    }
    char *ln1 = N(l, "ln1"), *q = N(l, "q"), *k = N(l, "k"), *v = N(l, "v"), *q4 = N(l, "q4"), *k4 = N(l, "k4"),
         *v4 = N(l, "v4"), *qt = N(l, "qt"), *kt = N(l, "kt"), *vt = N(l, "vt"), *sc = N(l, "sc"), *p = N(l, "p"),
         *o = N(l, "o"), *ot = N(l, "ot"), *o3 = N(l, "o3"), *y = N(l, "y"), *r1 = N(l, "r1"), *ln2 = N(l, "ln2"),
         *h1 = N(l, "h1"), *a1 = N(l, "a1"), *h2 = N(l, "h2"), *r2 = N(l, "r2");
    ob_node(b, N(l, "ln_1/LayerNormalization"), "LayerNormalization", OB_L(x, wn[0], wn[1]), OB_L(ln1));
    ob_attr_ints(b, "axis", -1, (int64_t[]){-1});
    ob_node(b, N(l, "attn/q/MatMul"), "MatMul", OB_L(ln1, wn[2]), OB_L(q));
    ob_node(b, N(l, "attn/k/MatMul"), "MatMul", OB_L(ln1, wn[3]), OB_L(k));
    ob_node(b, N(l, "attn/v/MatMul"), "MatMul", OB_L(ln1, wn[4]), OB_L(v));
    ob_node(b, N(l, "attn/Reshape"), "Reshape", OB_L(q, "shp4"), OB_L(q4));
    ob_node(b, N(l, "attn/Reshape_1"), "Reshape", OB_L(k, "shp4"), OB_L(k4));
    ob_node(b, N(l, "attn/Reshape_2"), "Reshape", OB_L(v, "shp4"), OB_L(v4));
    ob_node(b, N(l, "attn/Transpose"), "Transpose", OB_L(q4), OB_L(qt));
    ob_attr_ints(b, "perm", OB_D(0, 2, 1, 3));
    ob_node(b, N(l, "attn/Transpose_1"), "Transpose", OB_L(k4), OB_L(kt));
    ob_attr_ints(b, "perm", OB_D(0, 2, 3, 1));
    ob_node(b, N(l, "attn/Transpose_2"), "Transpose", OB_L(v4), OB_L(vt));
    ob_attr_ints(b, "perm", OB_D(0, 2, 1, 3));
    ob_node(b, N(l, "attn/MatMul"), "MatMul", OB_L(qt, kt), OB_L(sc));
    ob_node(b, N(l, "attn/Softmax"), "Softmax", OB_L(sc), OB_L(p));
    ob_attr_ints(b, "axis", -1, (int64_t[]){-1});
    ob_node(b, N(l, "attn/MatMul_1"), "MatMul", OB_L(p, vt), OB_L(o));
    ob_node(b, N(l, "attn/Transpose_3"), "Transpose", OB_L(o), OB_L(ot));
    ob_attr_ints(b, "perm", OB_D(0, 2, 1, 3));
    ob_node(b, N(l, "attn/Reshape_3"), "Reshape", OB_L(ot, "shp3"), OB_L(o3));
    ob_node(b, N(l, "attn/o/MatMul"), "MatMul", OB_L(o3, wn[5]), OB_L(y));
    ob_node(b, N(l, "Add"), "Add", OB_L(x, y), OB_L(r1));
    ob_node(b, N(l, "ln_2/LayerNormalization"), "LayerNormalization", OB_L(r1, wn[6], wn[7]), OB_L(ln2));
    ob_attr_ints(b, "axis", -1, (int64_t[]){-1});
    ob_node(b, N(l, "mlp/fc1/MatMul"), "MatMul", OB_L(ln2, wn[8]), OB_L(h1));
    ob_node(b, N(l, "mlp/Relu"), "Relu", OB_L(h1), OB_L(a1));
    ob_node(b, N(l, "mlp/fc2/MatMul"), "MatMul", OB_L(a1, wn[9]), OB_L(h2));
    ob_node(b, N(l, "Add_1"), "Add", OB_L(r1, h2), OB_L(r2));
    x = r2;
  }
  ob_node(b, "/head/MatMul", "MatMul", OB_L(x, "head"), OB_L("logits"));
  ob_node(b, "/Reshape", "Reshape", OB_L("logits", "shp2"), OB_L("logits2"));
  ob_node(b, "/Reshape_1", "Reshape", OB_L("labels", "lab1"), OB_L("labels1"));
  ob_node(b, "/loss", "SoftmaxCrossEntropyLoss", OB_L("logits2", "labels1"), OB_L("loss"));
  ap_model *m = NULL;
  if (ob_load(ctx, b, &m)) fail_msg("%s", ap_ctx_error(ctx));
  return m;
}

static const shard_strategy *op_strategy(const gplan_result *r, const char *name, const char **spec_out) {
  const graph_problem *gp = &r->gp;
  for (int i = 0; i < gp->n_nodes; i++) {
    const gp_node *nd = &gp->nodes[i];
    if (strcmp(r->g->blocks[nd->block].ops[nd->op].name, name) == 0) {
      const shard_strategy *s = &nd->s[r->choice[i]];
      static char buf[8][48];
      static int k;
      char *o = buf[k++ & 7];
      o[0] = '\0';
      for (int d = 0; d < s->weight.n_dims; d++) strcat(o, d ? "," : ""), strcat(o, shard_dim_name(s->weight.dim[d]));
      *spec_out = o;
      return s;
    }
  }
  fail_msg("no op %s", name);
  return NULL;
}

static void plan(ap_ctx *ctx, const ap_model *m, int64_t gbs, gplan_result *r) {
  ap_cluster *cl = NULL;
  assert_int_equal(ap_cluster_load(ctx, "h100-sxm:8", &cl), AP_OK);
  gplan_opts o;
  gplan_opts_init(&o);
  o.gbs = gbs;
  o.strategies = "ilp";
  o.n_mesh_shapes = 1;
  o.mesh_shapes[0][0] = 1, o.mesh_shapes[0][1] = 8;
  if (gplan_run(ctx, model_graph(m), hw_cluster_of(cl), &o, r)) fail_msg("%s", ap_ctx_error(ctx));
  assert_true(r->found);
  ap_cluster_free(cl);
}

static void test_megatron_small_batch(void **state) {
  (void)state;
#ifndef AP_PART_ILP
  skip();
#else
  ap_ctx *ctx = ap_ctx_new();
  assert_int_equal(ap_ctx_add_part(ctx, ap_part_onnx()), AP_OK);
  assert_int_equal(ap_ctx_add_part(ctx, ap_part_ilp()), AP_OK);
  ap_model *m = bert(ctx, 2);
  gplan_result r;
  plan(ctx, m, 2, &r);
  static const struct {
    const char *op, *weight;
  } want[] = {
      {"/layers.0/attn/q/MatMul", "R,S0"}, {"/layers.0/attn/k/MatMul", "R,S0"},  {"/layers.0/attn/v/MatMul", "R,S0"},
      {"/layers.0/attn/o/MatMul", "S0,R"}, {"/layers.0/mlp/fc1/MatMul", "R,S0"}, {"/layers.0/mlp/fc2/MatMul", "S0,R"},
      {"/head/MatMul", "R,S0"},
  };
  int bad = 0;
  for (size_t i = 0; i < AP_COUNT(want); i++) {
    const char *w = NULL;
    op_strategy(&r, want[i].op, &w);
    print_message("# %-28s weight %s (Megatron: %s)\n", want[i].op, w, want[i].weight);
    bad += strcmp(w, want[i].weight) != 0;
  }
  /* forward all-reduces of pending sums per layer: the attention's output projection and fc2 */
  int n_layer_ar = 0;
  for (int i = 0; i < r.gp.n_nodes; i++) {
    const gp_node *nd = &r.gp.nodes[i];
    const graph_op *op = &r.g->blocks[nd->block].ops[nd->op];
    if (nd->s[r.choice[i]].partial && strncmp(op->name, "/layers.0/", 10) == 0) n_layer_ar++;
  }
  print_message("# %d forward all-reduces in layer 0, %.6g s per iteration\n", n_layer_ar, r.br.total_s);
  assert_int_equal(bad, 0);
  assert_int_equal(n_layer_ar, 2);
  /* The embedding: vocab-parallel (rows split, a pending sum all-reduced), or a replicated lookup where that is
   * faster (here: the [B, S, H] all-reduce costs more than a lookup, and the table fits); the strategy chosen
   * costs no more than the vocab-parallel one, which has the same output and input specs. */
  const char *ew = NULL;
  const shard_strategy *emb = op_strategy(&r, "/emb/Gather", &ew);
  const gp_node *en = NULL;
  for (int i = 0; i < r.gp.n_nodes; i++)
    if (strcmp(r.g->blocks[r.gp.nodes[i].block].ops[r.gp.nodes[i].op].name, "/emb/Gather") == 0) en = &r.gp.nodes[i];
  const shard_strategy *vp = NULL;
  for (int k = 0; k < en->n_s; k++)
    if (en->s[k].weight.dim[0] == 1 && en->s[k].weight.dim[1] == 0) vp = &en->s[k];
  assert_non_null(vp);
  assert_int_equal(vp->partial, 1); /* the vocab-parallel lookup leaves a pending sum */
  print_message("# /emb/Gather weight %s: %.3g s; vocab-parallel S0,R: %.3g s (its all-reduce %.3g s)\n", ew,
                emb->compute_s + emb->comm_s, vp->compute_s + vp->comm_s, vp->fwd_comm_s);
  assert_true(strcmp(ew, "S0,R") == 0 || emb->compute_s + emb->comm_s <= vp->compute_s + vp->comm_s);
  /* the loss over the LM head's vocab-split logits: the vocab-parallel cross-entropy's all-reduces */
  const char *lw = NULL;
  const shard_strategy *loss = op_strategy(&r, "/loss", &lw);
  assert_string_equal(shard_dim_name(loss->in[0].dim[loss->in[0].n_dims - 1]), "S0"); /* [B·S → B, S, V] */
  bool ar = false;
  for (int c = 0; c < loss->n_comm; c++) ar = ar || loss->comm[c].coll == COMM_ALLREDUCE;
  assert_true(ar);
  gplan_result_free(&r);
  ap_model_free(m);
  ap_ctx_free(ctx);
#endif
}

static void test_data_parallel_large_batch(void **state) {
  (void)state;
#ifndef AP_PART_ILP
  skip();
#else
  ap_ctx *ctx = ap_ctx_new();
  assert_int_equal(ap_ctx_add_part(ctx, ap_part_onnx()), AP_OK);
  assert_int_equal(ap_ctx_add_part(ctx, ap_part_ilp()), AP_OK);
  ap_model *m = bert(ctx, 2);
  gplan_result r;
  plan(ctx, m, 256, &r);
  static const char *const ops[] = {"/layers.0/attn/q/MatMul", "/layers.0/attn/o/MatMul", "/layers.0/mlp/fc1/MatMul",
                                    "/layers.0/mlp/fc2/MatMul", "/head/MatMul"};
  for (size_t i = 0; i < AP_COUNT(ops); i++) {
    const char *w = NULL;
    const shard_strategy *s = op_strategy(&r, ops[i], &w);
    print_message("# %-28s weight %s, batch on axis 0: %s\n", ops[i], w, s->axis_loop[0] == 0 ? "yes" : "no");
    assert_string_equal(w, "R,R");
    assert_int_equal(s->axis_loop[0], 0);
  }
  gplan_result_free(&r);
  ap_model_free(m);
  ap_ctx_free(ctx);
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_megatron_small_batch),
      cmocka_unit_test(test_data_parallel_large_batch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
