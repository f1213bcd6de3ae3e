/* Tests of the op-graph JSON reader (src/model/graph_json.c, docs/graph-format.md): the example models load
 * with their hand-computed parameter counts and FLOP, every op kind reads, and a table of bad inputs each
 * fails with the expected status and a one-line message naming the file and the field. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonx.h"
#include "model/graph_json.h"

/* 65 input names: one more than an op takes (graph.h OP_MAX_IN). */
#define X5_ "'x','x','x','x','x'"
#define X65 X5_ "," X5_ "," X5_ "," X5_ "," X5_ "," X5_ "," X5_ "," X5_ "," X5_ "," X5_ "," X5_ "," X5_ "," X5_

/* Asserts that two doubles agree to a relative 1e-12, printing both. */
#define assert_close(a, b)                                                                              \
  do {                                                                                                  \
    double a_ = (a), b_ = (b);                                                                          \
    if (!(fabs(a_ - b_) <= 1e-12 * fmax(fabs(a_), fabs(b_)))) {                                         \
      print_error("%s = %.17g, expected %s = %.17g\n", #a, a_, #b, b_);                                 \
      fail();                                                                                           \
    }                                                                                                   \
  } while (0)

/* Parses text and reads it as an op graph named "net.json" into a fresh arena. Returns the status; on
 * success *a_out holds the arena (the caller frees it), else it is freed here. The JSON tree is freed
 * before returning, so every test also checks that the graph does not point into it. */
static ap_status load(ap_ctx *ctx, const char *text, arena **a_out, graph *g) {
  *a_out = NULL;
  json_t *root = NULL;
  ap_status st = jx_parse(ctx, "net.json", text, strlen(text), &root);
  if (st) return st;
  arena *a = arena_new();
  assert_non_null(a);
  st = graph_json_read(ctx, a, "net.json", root, g);
  json_decref(root);
  if (st) arena_free(a);
  else *a_out = a;
  return st;
}

/* The example's text: from the data embedded in the library, else from disk (tests run in the repo root). */
static char *example_text(const char *path) {
  const embedded_file *f = embedded_find(path);
  if (f) {
    char *copy = malloc(f->n_bytes + 1);
    assert_non_null(copy);
    memcpy(copy, f->text, f->n_bytes + 1);
    return copy;
  }
  char *text = NULL;
  ap_ctx *ctx = ap_ctx_new();
  ap_status st = util_read_file(ctx, path, &text, NULL);
  if (st) print_error("%s\n", ap_ctx_error(ctx));
  ap_ctx_free(ctx);
  assert_int_equal(st, AP_OK);
  return text;
}

static const graph_block *find_block(const graph *g, const char *name) {
  for (int i = 0; i < g->n_blocks; i++)
    if (strcmp(g->blocks[i].name, name) == 0) return &g->blocks[i];
  print_error("no block %s\n", name);
  fail();
  return NULL;
}

static const graph_op *find_op(const graph_block *blk, const char *name) {
  for (int i = 0; i < blk->n_ops; i++)
    if (strcmp(blk->ops[i].name, name) == 0) return &blk->ops[i];
  print_error("no op %s in block %s\n", name, blk->name);
  fail();
  return NULL;
}

/* ---- The examples ---- */

typedef struct {
  const char *path;
  const char *name;
  int n_blocks;
  int64_t n_layers;
  int64_t params; /* computed by hand, see the example's "_params" note */
  double train_flop; /* per sample at b = 1, forward + backward, all ops */
  double train_gemm_flop;
} example_case;

/* Hand counts. Per op (graph.c): a matmul/conv is 3 × 2·M·K·N (forward, dgrad, wgrad) plus 2·M·N for a bias;
 * a norm with parameters 7 + 14 + 2 FLOP per element; a ReLU or add 1 + 2; a global pool 2·out·kh·kw; the
 * loss 5 + 2 per logit. */
#define MM(k, n) (3.0 * 2 * (k) * (n))
#define MMB(k, n) (MM(k, n) + 2.0 * (n))
#define CONV(out_n, wk) (3.0 * 2 * (out_n) * (wk))
#define BN(n) (23.0 * (n))
#define ELT(n) (3.0 * (n))
static const example_case examples[] = {
    {"data/models/examples/mlp-3.json", "mlp-3", 3, 3,
     (784 * 1024 + 1024) + 3 * (1024 * 1024 + 1024) + (1024 * 10 + 10),
     (MMB(784, 1024) + ELT(1024)) + 3 * (MMB(1024, 1024) + ELT(1024)) + (MMB(1024, 10) + 7.0 * 10),
     MM(784, 1024) + 3 * MM(1024, 1024) + MM(1024, 10)},
    {"data/models/examples/resnet-tiny.json", "resnet-tiny", 4, 3,
     (3 * 9 * 16 + 32) + 2 * (2 * (16 * 9 * 16) + 2 * 32) + (16 * 9 * 32 + 32 * 9 * 32 + 16 * 32 + 3 * 64) +
         (32 * 10 + 10),
     /* stem: conv 3->16 3x3 at 32x32, bn, relu */
     (CONV(16 * 1024, 27) + BN(16 * 1024) + ELT(16 * 1024)) +
         /* stage1 x2: two convs 16->16, two bns, two relus, one add */
         2 * (2 * CONV(16 * 1024, 144) + 2 * BN(16 * 1024) + 3 * ELT(16 * 1024)) +
         /* down2 at 16x16: conv 16->32 s2, conv 32->32, 1x1 shortcut, three bns, two relus, one add */
         (CONV(32 * 256, 144) + CONV(32 * 256, 288) + CONV(32 * 256, 16) + 3 * BN(32 * 256) + 3 * ELT(32 * 256)) +
         /* head: global average pool 16x16, fc 32->10, loss */
         (2.0 * 32 * 256 + MMB(32, 10) + 7.0 * 10),
     CONV(16 * 1024, 27) + 2 * 2 * CONV(16 * 1024, 144) + CONV(32 * 256, 144) + CONV(32 * 256, 288) +
         CONV(32 * 256, 16) + MM(32, 10)},
};

static void test_examples_load(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof examples / sizeof examples[0]; i++) {
    const example_case *c = &examples[i];
    char *text = example_text(c->path);
    ap_ctx *ctx = ap_ctx_new();
    arena *a;
    graph g;
    ap_status st = load(ctx, text, &a, &g);
    if (st) print_error("%s: %s\n", c->path, ap_ctx_error(ctx));
    assert_int_equal(st, AP_OK);
    assert_string_equal(g.name, c->name);
    assert_string_equal(g.model_type, i == 0 ? "mlp" : "cnn");
    assert_int_equal(g.n_blocks, c->n_blocks);
    assert_int_equal(g.n_layers, c->n_layers);
    assert_int_equal(g.default_seq, 1);
    assert_int_equal(graph_params_total(&g), c->params);
    assert_int_equal(graph_params_active(&g), c->params);
    assert_close(graph_train_flop_per_seq(&g, 1, false), c->train_flop);
    assert_close(graph_train_flop_per_seq(&g, 1, true), c->train_gemm_flop);
    /* Nothing here depends on S, and everything scales linearly with B. */
    assert_close(graph_train_flop_per_seq(&g, 4096, false), c->train_flop);
    for (int b = 0; b < g.n_blocks; b++) {
      op_cost c1 = graph_block_eval(&g.blocks[b], 1, 1), c8 = graph_block_eval(&g.blocks[b], 8, 1);
      assert_close(c8.fwd_gemm_flop, 8 * c1.fwd_gemm_flop);
      assert_false(g.blocks[b].is_moe);
    }
    json_t *root = json_loads(text, 0, NULL);
    assert_true(graph_json_detect(root));
    json_decref(root);
    arena_free(a);
    ap_ctx_free(ctx);
    free(text);
  }
}

/* The gemm FLOP of an MLP are 6 × its weights (Kaplan et al. 2020's 6N per token, biases aside): a second,
 * independent count of the same number. */
static void test_mlp_gemm_flop_is_six_n(void **state) {
  (void)state;
  char *text = example_text("data/models/examples/mlp-3.json");
  ap_ctx *ctx = ap_ctx_new();
  arena *a;
  graph g;
  assert_int_equal(load(ctx, text, &a, &g), AP_OK);
  double weights = 0;
  for (int b = 0; b < g.n_blocks; b++)
    for (int i = 0; i < g.blocks[b].n_ops; i++)
      weights += (double)(g.blocks[b].ops[i].weight_k * g.blocks[b].ops[i].weight_n) * (double)g.blocks[b].repeat;
  assert_close(graph_train_flop_per_seq(&g, 1, true), 6 * weights);
  /* The stem keeps x [B,784] and h [B,1024] in bf16 for its backward pass. */
  const graph_block *stem = find_block(&g, "stem");
  assert_close(graph_block_saved_bytes(stem, 1, 1), (784 + 1024) * 2.0);
  assert_close(graph_block_saved_bytes(stem, 32, 1), 32 * (784 + 1024) * 2.0);
  assert_int_equal(stem->role, BLOCK_EMBED);
  assert_int_equal(find_block(&g, "hidden")->repeat, 3);
  assert_int_equal(find_block(&g, "head")->role, BLOCK_HEAD);
  arena_free(a);
  ap_ctx_free(ctx);
  free(text);
}

static void test_resnet_shapes(void **state) {
  (void)state;
  char *text = example_text("data/models/examples/resnet-tiny.json");
  ap_ctx *ctx = ap_ctx_new();
  arena *a;
  graph g;
  assert_int_equal(load(ctx, text, &a, &g), AP_OK);
  const graph_block *down = find_block(&g, "down2");
  const graph_op *conv = find_op(down, "conv_a");
  assert_int_equal(conv->kind, OP_CONV2D);
  assert_int_equal(conv->weight_k, 16 * 3 * 3);
  assert_int_equal(conv->weight_n, 32);
  assert_int_equal(conv->kernel_h, 3);
  assert_int_equal(find_op(down, "shortcut")->weight_k, 16);
  const graph_op *pool = find_op(find_block(&g, "head"), "avgpool");
  assert_int_equal(pool->kernel_h, 16);
  assert_int_equal(pool->kernel_w, 16);
  assert_string_equal(down->tensors[down->input].name, "x");
  assert_string_equal(down->tensors[down->output].name, "y");
  arena_free(a);
  ap_ctx_free(ctx);
  free(text);
}

/* ---- Every op kind: a tiny MoE transformer described op by op ---- */

/* Test JSON is written with single quotes for readability; q() turns them into double quotes. */
static char *q(const char *s) {
  char *out = strdup(s);
  assert_non_null(out);
  for (char *p = out; *p; p++)
    if (*p == '\'') *p = '"';
  return out;
}

static const char moe_tiny[] =
    "{'format':'autopar-graph/1','name':'moe-tiny','model_type':'toy','default_seq':128,'causal_lm':true,"
    "'vocab_size':1000,'hidden_size':64,"
    "'blocks':["
    "{'name':'embed','role':'embed','tensors':[{'name':'ids','shape':['B','S'],'dtype':'int64'},"
    "  {'name':'e','shape':['B','S',64],'seq_parallel':true}],"
    " 'ops':[{'name':'tok','kind':'embedding','in':['ids'],'out':'e','rows':1000,'tp_split':true}]},"
    "{'name':'layer','role':'layer','repeat':2,'tensors':["
    "  {'name':'x','shape':['B','S',64]},{'name':'n','shape':['B','S',64]},"
    "  {'name':'q','shape':['B','S',64],'tp_dim':2},{'name':'k','shape':['B','S',32],'tp_dim':2},"
    "  {'name':'v','shape':['B','S',32],'tp_dim':2},{'name':'att','shape':['B','S',64],'tp_dim':2},"
    "  {'name':'lse','shape':['B',4,'S'],'dtype':'fp32','tp_dim':1},"
    "  {'name':'o','shape':['B','S',64]},{'name':'r1','shape':['B','S',64]},{'name':'n2','shape':['B','S',64]},"
    "  {'name':'logits','shape':['B','S',4]},{'name':'disp','shape':['B','S',2,64]},"
    "  {'name':'up','shape':['B','S',2,128],'tp_dim':3},{'name':'act','shape':['B','S',2,128],'tp_dim':3},"
    "  {'name':'down','shape':['B','S',2,64]},{'name':'comb','shape':['B','S',64]},{'name':'y','shape':['B','S',64]}],"
    " 'ops':["
    "  {'name':'ln','kind':'norm','in':['x'],'out':'n','params':64,'flop_per_elem':4,'save':['x']},"
    "  {'name':'q_proj','kind':'matmul','in':['n'],'out':'q','weight':[64,64],'tp_split':true,'save':['n']},"
    "  {'name':'k_proj','kind':'matmul','in':['n'],'out':'k','weight':[64,32],'tp_split':true,'save':['n']},"
    "  {'name':'v_proj','kind':'matmul','in':['n'],'out':'v','weight':[64,32],'tp_split':true,'save':['n']},"
    "  {'name':'attn','kind':'attention','in':['q','k','v'],'out':'att','heads':4,'kv_heads':2,'head_dim':16,"
    "   'causal':true,'save':['q','k','v','att','lse']},"
    "  {'name':'o_proj','kind':'matmul','in':['att'],'out':'o','weight':[64,64],'tp_split':true,'save':['att']},"
    "  {'name':'res1','kind':'elementwise','in':['x','o'],'out':'r1','flop_per_elem':1},"
    "  {'name':'ln2','kind':'norm','in':['r1'],'out':'n2','params':64,'flop_per_elem':4,'save':['r1']},"
    "  {'name':'router','kind':'router','in':['n2'],'out':'logits','weight':[64,4],'save':['n2','logits']},"
    "  {'name':'dispatch','kind':'dispatch','in':['n2','logits'],'out':'disp'},"
    "  {'name':'expert_up','kind':'matmul','in':['disp'],'out':'up','weight':[64,128],'experts':4,'top_k':2,"
    "   'tp_split':true,'save':['disp']},"
    "  {'name':'expert_act','kind':'elementwise','in':['up'],'out':'act','flop_per_elem':8,'save':['up']},"
    "  {'name':'expert_down','kind':'matmul','in':['act'],'out':'down','weight':[128,64],'experts':4,'top_k':2,"
    "   'tp_split':true,'save':['act']},"
    "  {'name':'combine','kind':'combine','in':['down','logits'],'out':'comb','save':['down']},"
    "  {'name':'res2','kind':'elementwise','in':['r1','comb'],'out':'y','flop_per_elem':1,'_note':'a comment'}]},"
    "{'name':'head','role':'head','tensors':[{'name':'x','shape':['B','S',64]},{'name':'n','shape':['B','S',64]},"
    "  {'name':'logits','shape':['B','S',1000],'tp_dim':2},{'name':'loss','shape':[1],'dtype':'fp32'}],"
    " 'ops':[{'name':'final_norm','kind':'norm','in':['x'],'out':'n','params':64,'flop_per_elem':4,'save':['x']},"
    "  {'name':'lm_head','kind':'matmul','in':['n'],'out':'logits','weight':[64,1000],'tied':true,'save':['n']},"
    "  {'name':'ce','kind':'loss','in':['logits'],'out':'loss','save':['logits']}]}]}";

static void test_every_kind(void **state) {
  (void)state;
  char *text = q(moe_tiny);
  ap_ctx *ctx = ap_ctx_new();
  arena *a;
  graph g;
  ap_status st = load(ctx, text, &a, &g);
  if (st) print_error("%s\n", ap_ctx_error(ctx));
  assert_int_equal(st, AP_OK);
  /* Embedding 1000·64; per layer: norms 2·64, q/o 2·64·64, k/v 2·64·32, router 64·4, experts 2·4·64·128;
   * head norm 64 and a tied LM head (counted once, in the embedding). Active: 2 of the 4 experts. */
  int64_t per_layer = 2 * 64 + 2 * 64 * 64 + 2 * 64 * 32 + 64 * 4;
  assert_int_equal(graph_params_total(&g), 1000 * 64 + 2 * (per_layer + 2 * 4 * 64 * 128) + 64);
  assert_int_equal(graph_params_active(&g), 1000 * 64 + 2 * (per_layer + 2 * 2 * 64 * 128) + 64);
  assert_int_equal(g.n_layers, 2);
  assert_int_equal(g.default_seq, 128);
  assert_int_equal(g.vocab_size, 1000);
  assert_true(g.causal_lm);
  const graph_block *layer = find_block(&g, "layer");
  assert_true(layer->is_moe);
  assert_false(find_block(&g, "embed")->is_moe);
  /* Defaults: the input is the first tensor read and never written, the output the last op's. */
  assert_string_equal(layer->tensors[layer->input].name, "x");
  assert_string_equal(layer->tensors[layer->output].name, "y");
  const graph_op *att = find_op(layer, "attn");
  assert_int_equal(att->kind, OP_ATTENTION);
  assert_int_equal(att->head_dim_v, 16);
  assert_int_equal(att->n_saved, 5);
  /* Core attention at s = 128: 2 · tokens · keys · heads · (d_qk + d_v) (graph.c, Narayanan et al. 2021). */
  op_cost c = graph_op_eval(layer, att, 1, 128);
  assert_close(c.fwd_gemm_flop, 2.0 * 128 * 128 * 4 * (16 + 16));
  const graph_op *up = find_op(layer, "expert_up");
  assert_int_equal(up->n_experts, 4);
  assert_int_equal(up->top_k, 2);
  /* An expert matmul's rows count each token top_k times: the input carries the literal top_k dimension. */
  c = graph_op_eval(layer, up, 1, 128);
  assert_close(c.fwd_gemm_flop, 2.0 * 128 * 2 * 64 * 128);
  assert_int_equal(layer->tensors[find_op(layer, "q_proj")->out].tp_dim, 2);
  assert_true(find_block(&g, "embed")->tensors[1].seq_parallel);
  assert_int_equal(find_block(&g, "embed")->tensors[0].dt, DT_INT64);
  assert_true(find_op(find_block(&g, "head"), "lm_head")->tied);
  arena_free(a);
  ap_ctx_free(ctx);
  free(text);
}

/* "input"/"output" may name any tensor or be null; an explicit null means none. */
static void test_boundaries(void **state) {
  (void)state;
  char *text = q("{'format':'autopar-graph/1','name':'t','blocks':[{'name':'b','input':null,'output':'h',"
                 "'tensors':[{'name':'x','shape':['B',8]},{'name':'h','shape':['B',8]},{'name':'y','shape':['B',8]}],"
                 "'ops':[{'name':'a','kind':'elementwise','in':['x'],'out':'h','flop_per_elem':1},"
                 "{'name':'b','kind':'elementwise','in':['h'],'out':'y','flop_per_elem':1}]}]}");
  ap_ctx *ctx = ap_ctx_new();
  arena *a;
  graph g;
  assert_int_equal(load(ctx, text, &a, &g), AP_OK);
  assert_int_equal(g.blocks[0].input, -1);
  assert_int_equal(g.blocks[0].output, 1);
  assert_int_equal(g.blocks[0].repeat, 1);
  assert_int_equal(g.blocks[0].role, BLOCK_OTHER);
  assert_string_equal(g.model_type, "graph");
  assert_int_equal(g.blocks[0].tensors[0].dt, DT_BF16);
  assert_int_equal(g.blocks[0].tensors[0].tp_dim, -1);
  arena_free(a);
  ap_ctx_free(ctx);
  free(text);
}

/* Integral reals count as integers; a tied weight may share an earlier matmul's weight; "_" keys are comments. */
static void test_numbers_and_ties(void **state) {
  (void)state;
  char *text = q("{'format':'autopar-graph/1','name':'t','_why':'a test','blocks':[{'name':'b','repeat':2.0,"
                 "'tensors':[{'name':'x','shape':['B',8.0]},{'name':'h','shape':['B',16]},{'name':'y','shape':['B',8]},"
                 "{'name':'z','shape':['B',16]}],"
                 "'ops':[{'name':'up','kind':'matmul','in':['x'],'out':'h','weight':[8,16]},"
                 "{'name':'down','kind':'matmul','in':['h'],'out':'y','weight':[16,8]},"
                 "{'name':'up_again','kind':'matmul','in':['y'],'out':'z','weight':[8,16],'tied':true}]}]}");
  ap_ctx *ctx = ap_ctx_new();
  arena *a;
  graph g;
  ap_status st = load(ctx, text, &a, &g);
  if (st) print_error("%s\n", ap_ctx_error(ctx));
  assert_int_equal(st, AP_OK);
  assert_int_equal(g.blocks[0].repeat, 2);
  assert_int_equal(g.blocks[0].tensors[0].dims[1], 8);
  assert_int_equal(graph_params_total(&g), 2 * (8 * 16 + 16 * 8));
  arena_free(a);
  ap_ctx_free(ctx);
  free(text);
}

static void test_detect(void **state) {
  (void)state;
  static const struct {
    const char *json;
    bool want;
  } cases[] = {
      {"{'format':'autopar-graph/1'}", true},
      {"{'format':'autopar-graph/7','blocks':3}", true},
      {"{'blocks':[]}", true},
      {"{'model_type':'llama','hidden_size':4096}", false},
      {"{'format':'onnx'}", false},
      {"{'blocks':{}}", false},
      {"[1,2]", false},
      {"'autopar-graph/1'", false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *text = q(cases[i].json);
    json_t *root = json_loads(text, JSON_DECODE_ANY, NULL);
    assert_non_null(root);
    if (graph_json_detect(root) != cases[i].want) {
      print_error("detect(%s) = %d\n", text, !cases[i].want);
      fail();
    }
    json_decref(root);
    free(text);
  }
  assert_false(graph_json_detect(NULL));
}

/* ---- Bad inputs ---- */

#define FMT "'format':'autopar-graph/1','name':'t'"
#define X8 "{'name':'x','shape':['B',8]}"
#define Y8 "{'name':'y','shape':['B',8]}"
#define RELU "{'name':'relu','kind':'elementwise','in':['x'],'out':'y','flop_per_elem':1}"
/* One block "b" with the given tensors and ops. */
#define BLOCK(tensors, ops) "{" FMT ",'blocks':[{'name':'b','tensors':[" tensors "],'ops':[" ops "]}]}"
#define IMG(name, c, h) "{'name':'" name "','shape':['B'," #c "," #h "," #h "]}"

typedef struct {
  const char *name;
  const char *json;
  ap_status status;
  const char *expect; /* a substring of the message */
} bad_case;

static const bad_case bad_cases[] = {
    {"malformed", "{'format': 'autopar-graph/1',\n 'name': }", AP_PARSE, "net.json:2:"},
    {"truncated", "{'format': 'autopar-graph/1', 'blocks': [", AP_PARSE, "net.json:1:"},
    {"duplicate key", "{'format':'autopar-graph/1','format':'x'}", AP_PARSE, "net.json:1:"},
    {"not an object", "[1]", AP_INVALID, "net.json: expected a JSON object at the top level"},
    {"missing format", "{'name':'t','blocks':[]}", AP_INVALID, "net.json: format: required field missing"},
    {"format not a string", "{'format':1}", AP_INVALID, "net.json: format: expected a string"},
    {"other format", "{'format':'onnx','name':'t'}", AP_INVALID, "format: expected \"autopar-graph/1\", got \"onnx\""},
    {"future version", "{'format':'autopar-graph/2','name':'t'}", AP_UNSUPPORTED, "a version this autopar does not read"},
    {"missing name", "{'format':'autopar-graph/1','blocks':[]}", AP_INVALID, "net.json: name: required field missing"},
    {"empty name", "{'format':'autopar-graph/1','name':'','blocks':[]}", AP_INVALID, "name: expected a non-empty name"},
    {"missing blocks", "{" FMT "}", AP_INVALID, "net.json: blocks: required field missing"},
    {"null blocks", "{" FMT ",'blocks':null}", AP_INVALID, "net.json: blocks: required field missing"},
    {"empty blocks", "{" FMT ",'blocks':[]}", AP_INVALID, "net.json: blocks: expected an array of 1 to 1024 blocks"},
    {"blocks not array", "{" FMT ",'blocks':{}}", AP_INVALID, "blocks: expected an array"},
    {"misspelt top key", "{" FMT ",'blokcs':[]}", AP_INVALID, "net.json: blokcs: unknown field (did you mean blocks"},
    {"bad default dtype", "{" FMT ",'dtype':'bf61','blocks':[]}", AP_INVALID, "net.json: dtype: unknown dtype \"bf61\"; did you mean bf16"},
    {"default_seq 0", "{" FMT ",'default_seq':0,'blocks':[]}", AP_INVALID, "default_seq: expected an integer in [1, 100000000], got 0"},
    {"block not object", "{" FMT ",'blocks':[3]}", AP_INVALID, "net.json: blocks[0]: expected a block object"},
    {"block missing name", "{" FMT ",'blocks':[{'tensors':[" X8 "],'ops':[]}]}", AP_INVALID, "blocks[0].name: required field missing"},
    {"unknown role", "{" FMT ",'blocks':[{'name':'b','role':'layers','tensors':[" X8 "," Y8 "],'ops':[" RELU "]}]}",
     AP_INVALID, "blocks[0].role: unknown role \"layers\"; did you mean layer"},
    {"repeat 0", "{" FMT ",'blocks':[{'name':'b','repeat':0,'tensors':[" X8 "," Y8 "],'ops':[" RELU "]}]}",
     AP_INVALID, "blocks[0].repeat: expected an integer in [1, 1000000], got 0"},
    {"repeat string", "{" FMT ",'blocks':[{'name':'b','repeat':'2','tensors':[" X8 "," Y8 "],'ops':[" RELU "]}]}",
     AP_INVALID, "blocks[0].repeat: expected an integer, got a string"},
    {"repeat fraction", "{" FMT ",'blocks':[{'name':'b','repeat':1.5,'tensors':[" X8 "," Y8 "],'ops':[" RELU "]}]}",
     AP_INVALID, "blocks[0].repeat: expected an integer, got a fraction"},
    {"duplicate block", "{" FMT ",'blocks':[{'name':'b','tensors':[" X8 "," Y8 "],'ops':[" RELU "]},"
     "{'name':'b','tensors':[" X8 "," Y8 "],'ops':[" RELU "]}]}", AP_INVALID, "blocks[1].name: duplicate block name \"b\""},
    {"missing tensors", "{" FMT ",'blocks':[{'name':'b','ops':[" RELU "]}]}", AP_INVALID, "blocks[0].tensors: required field missing"},
    {"empty tensors", BLOCK("", RELU), AP_INVALID, "blocks[0].tensors: expected an array of 1 to 4096 tensors"},
    {"empty ops", BLOCK(X8, ""), AP_INVALID, "blocks[0].ops: expected an array of 1 to 4096 ops"},
    {"unknown block key", "{" FMT ",'blocks':[{'name':'b','inputs':'x','tensors':[" X8 "," Y8 "],'ops':[" RELU "]}]}",
     AP_INVALID, "blocks[0].inputs: unknown field (did you mean input"},
    /* Tensors. */
    {"tensor not object", BLOCK("'x'", RELU), AP_INVALID, "blocks[0].tensors[0]: expected a tensor object"},
    {"missing shape", BLOCK("{'name':'x'}", RELU), AP_INVALID, "blocks[0].tensors[0].shape: required field missing"},
    {"negative dim", BLOCK("{'name':'x','shape':['B',-8]}", RELU), AP_INVALID,
     "blocks[0].tensors[0].shape[1]: expected a dimension in [1, 1000000000000], got -8"},
    {"zero dim", BLOCK("{'name':'x','shape':[0]}", RELU), AP_INVALID, "tensors[0].shape[0]: expected a dimension in [1,"},
    {"huge dim", BLOCK("{'name':'x','shape':[10000000000000]}", RELU), AP_INVALID, "got 10000000000000"},
    {"fraction dim", BLOCK("{'name':'x','shape':[2.5]}", RELU), AP_INVALID,
     "shape[0]: expected an integer > 0 or \"B\" (micro-batch) or \"S\" (sequence)"},
    {"unknown symbol", BLOCK("{'name':'x','shape':['T',8]}", RELU), AP_INVALID, "shape[0]: expected an integer > 0 or \"B\""},
    {"seven dims", BLOCK("{'name':'x','shape':[1,1,1,1,1,1,1]}", RELU), AP_INVALID, "shape: expected an array of 1 to 6 dimensions"},
    {"no dims", BLOCK("{'name':'x','shape':[]}", RELU), AP_INVALID, "shape: expected an array of 1 to 6 dimensions"},
    {"too many elements", BLOCK("{'name':'x','shape':[1000000000000,1000000]}", RELU), AP_INVALID,
     "tensors[0].shape: more than 1e+15 elements besides B and S"},
    {"duplicate tensor", BLOCK(X8 "," X8, RELU), AP_INVALID, "blocks[0].tensors[1].name: duplicate tensor name \"x\""},
    {"unknown dtype", BLOCK("{'name':'x','shape':[8],'dtype':'float32'}", RELU), AP_INVALID,
     "tensors[0].dtype: unknown dtype \"float32\""},
    {"tp_dim range", BLOCK("{'name':'x','shape':['B',8],'tp_dim':2}", RELU), AP_INVALID,
     "tensors[0].tp_dim: expected an integer in [0, 1], got 2"},
    {"seq_parallel without S", BLOCK("{'name':'x','shape':['B',8],'seq_parallel':true}", RELU), AP_INVALID,
     "tensors[0].seq_parallel: sequence parallelism splits"},
    {"misspelt tensor key", BLOCK("{'name':'x','shap':['B',8]}", RELU), AP_INVALID, "tensors[0].shap: unknown field (did you mean shape"},
    /* Ops: kinds, names, references, order. */
    {"op not object", BLOCK(X8, "[]"), AP_INVALID, "blocks[0].ops[0]: expected an op object"},
    {"missing kind", BLOCK(X8 "," Y8, "{'name':'a','in':['x'],'out':'y'}"), AP_INVALID, "blocks[0].ops[0].kind: required field missing"},
    {"unknown kind", BLOCK(X8 "," Y8, "{'name':'a','kind':'matmull','in':['x'],'out':'y'}"), AP_INVALID,
     "blocks[0].ops[0].kind: unknown op kind \"matmull\"; did you mean matmul"},
    {"unknown kind conv", BLOCK(X8 "," Y8, "{'name':'a','kind':'conv','in':['x'],'out':'y'}"), AP_INVALID,
     "unknown op kind \"conv\"; did you mean conv2d"},
    {"missing op name", BLOCK(X8 "," Y8, "{'kind':'loss','in':['x'],'out':'y'}"), AP_INVALID, "blocks[0].ops[0].name: required field missing"},
    {"duplicate op", BLOCK(X8 "," Y8 ",{'name':'z','shape':['B',8]}", RELU ",{'name':'relu','kind':'loss','in':['y'],'out':'z'}"),
     AP_INVALID, "blocks[0].ops[1].name: duplicate op name \"relu\""},
    {"unknown tensor", BLOCK(X8, "{'name':'a','kind':'elementwise','in':['y'],'out':'x','flop_per_elem':1}"), AP_INVALID,
     "net.json: blocks[0].ops[0].in[0]: unknown tensor \"y\""},
    {"unknown tensor suggests", BLOCK("{'name':'hidden','shape':[8]}," Y8, "{'name':'a','kind':'loss','in':['hiden'],'out':'y'}"),
     AP_INVALID, "in[0]: unknown tensor \"hiden\"; did you mean hidden?"},
    {"unknown out", BLOCK(X8, "{'name':'a','kind':'loss','in':['x'],'out':'z'}"), AP_INVALID, "ops[0].out: unknown tensor \"z\""},
    {"missing out", BLOCK(X8, "{'name':'a','kind':'loss','in':['x']}"), AP_INVALID, "ops[0].out: required field missing"},
    {"missing in", BLOCK(X8 "," Y8, "{'name':'a','kind':'loss','out':'y'}"), AP_INVALID, "ops[0].in: required field missing"},
    {"in not array", BLOCK(X8 "," Y8, "{'name':'a','kind':'loss','in':'x','out':'y'}"), AP_INVALID,
     "ops[0].in: expected an array of 1 to 2 tensor names for a loss op"},
    {"in number", BLOCK(X8 "," Y8, "{'name':'a','kind':'loss','in':[3],'out':'y'}"), AP_INVALID,
     "ops[0].in[0]: expected a tensor name (a string)"},
    {"too many inputs", BLOCK(X8 "," Y8, "{'name':'a','kind':'elementwise','in':[" X65 "],'out':'y','flop_per_elem':1}"),
     AP_INVALID, "ops[0].in: expected an array of 1 to 64 tensor names for a elementwise op"},
    {"matmul two inputs", BLOCK(X8 "," Y8, "{'name':'a','kind':'matmul','in':['x','x'],'out':'y','weight':[8,8]}"), AP_INVALID,
     "ops[0].in: expected an array of 1 tensor name for a matmul op"},
    {"too many saved", BLOCK(X8 "," Y8, "{'name':'a','kind':'elementwise','in':['x'],'out':'y','flop_per_elem':1,"
     "'save':['x','y','x','y','x','y','x']}"), AP_INVALID, "ops[0].save: expected an array of at most 6 tensor names"},
    {"saved twice", BLOCK(X8 "," Y8, "{'name':'a','kind':'elementwise','in':['x'],'out':'y','flop_per_elem':1,'save':['x','x']}"),
     AP_INVALID, "ops[0].save[1]: \"x\" is listed twice"},
    {"unknown saved", BLOCK(X8 "," Y8, "{'name':'a','kind':'elementwise','in':['x'],'out':'y','flop_per_elem':1,'save':['q']}"),
     AP_INVALID, "ops[0].save[0]: unknown tensor \"q\""},
    {"unknown mask", BLOCK(X8 "," Y8, "{'name':'a','kind':'elementwise','in':['x'],'out':'y','flop_per_elem':1,'mask':'m'}"),
     AP_INVALID, "ops[0].mask: unknown tensor \"m\""},
    {"out is input", BLOCK(X8, "{'name':'a','kind':'elementwise','in':['x'],'out':'x','flop_per_elem':1}"), AP_INVALID,
     "ops[0].out: \"x\" is also an input of this op"},
    {"two producers", BLOCK(X8 "," Y8, RELU ",{'name':'b','kind':'elementwise','in':['x'],'out':'y','flop_per_elem':1}"),
     AP_INVALID, "ops[1].out: tensor \"y\" is already the output of op \"relu\""},
    {"out of order", BLOCK(X8 "," Y8 ",{'name':'z','shape':['B',8]}",
     "{'name':'b','kind':'elementwise','in':['y'],'out':'z','flop_per_elem':1}," RELU), AP_INVALID,
     "ops[1].out: tensor \"y\" is read by the earlier op \"b\" (list ops in execution order)"},
    {"misspelt op key", BLOCK(X8 "," Y8, "{'name':'a','kind':'matmul','in':['x'],'out':'y','wieght':[8,8]}"), AP_INVALID,
     "blocks[0].ops[0].wieght: unknown field (did you mean weight"},
    {"field of another kind", BLOCK(X8 "," Y8, "{'name':'a','kind':'elementwise','in':['x'],'out':'y','flop_per_elem':1,'heads':2}"),
     AP_INVALID, "ops[0].heads: unknown field"},
    {"unknown input", "{" FMT ",'blocks':[{'name':'b','input':'q','tensors':[" X8 "," Y8 "],'ops':[" RELU "]}]}", AP_INVALID,
     "blocks[0].input: unknown tensor \"q\""},
    {"output not a name", "{" FMT ",'blocks':[{'name':'b','output':7,'tensors':[" X8 "," Y8 "],'ops':[" RELU "]}]}", AP_INVALID,
     "blocks[0].output: expected a tensor name"},
    {"params negative", BLOCK(X8 "," Y8, "{'name':'a','kind':'norm','in':['x'],'out':'y','flop_per_elem':4,'params':-1}"), AP_INVALID,
     "ops[0].params: expected an integer in [0,"},
    /* Per-kind fields. */
    {"flop_per_elem missing", BLOCK(X8 "," Y8, "{'name':'a','kind':'elementwise','in':['x'],'out':'y'}"), AP_INVALID,
     "ops[0].flop_per_elem: required field missing"},
    {"flop_per_elem negative", BLOCK(X8 "," Y8, "{'name':'a','kind':'elementwise','in':['x'],'out':'y','flop_per_elem':-1}"),
     AP_INVALID, "ops[0].flop_per_elem: expected a number in [0, 1e+06], got -1"},
    {"norm reshapes", BLOCK(X8 ",{'name':'y','shape':['B',4]}", "{'name':'a','kind':'norm','in':['x'],'out':'y','flop_per_elem':4}"),
     AP_INVALID, "ops[0].out: a norm's output \"y\" must have the shape of its input \"x\""},
    {"matmul missing weight", BLOCK(X8 "," Y8, "{'name':'a','kind':'matmul','in':['x'],'out':'y'}"), AP_INVALID,
     "ops[0].weight: required field missing"},
    {"matmul weight not pair", BLOCK(X8 "," Y8, "{'name':'a','kind':'matmul','in':['x'],'out':'y','weight':[8]}"), AP_INVALID,
     "ops[0].weight: expected [a, b] of integers in [1, 1000000000000]"},
    {"matmul wrong k", BLOCK(X8 "," Y8, "{'name':'a','kind':'matmul','in':['x'],'out':'y','weight':[16,8]}"), AP_INVALID,
     "net.json: blocks[0].ops[0].weight[0]: expected 8 (the last dimension of input \"x\"), got 16"},
    {"matmul wrong n", BLOCK(X8 "," Y8, "{'name':'a','kind':'matmul','in':['x'],'out':'y','weight':[8,4]}"), AP_INVALID,
     "ops[0].weight[1]: expected 8 (the last dimension of output \"y\"), got 4"},
    {"matmul symbolic k", BLOCK("{'name':'x','shape':[8,'S']}," Y8, "{'name':'a','kind':'matmul','in':['x'],'out':'y','weight':[8,8]}"),
     AP_INVALID, "ops[0].in[0]: the last dimension of \"x\" is \"S\"; a matmul needs a number there"},
    {"top_k above experts", BLOCK(X8 "," Y8, "{'name':'a','kind':'matmul','in':['x'],'out':'y','weight':[8,8],'experts':4,'top_k':5}"),
     AP_INVALID, "ops[0].top_k: expected an integer in [1, 4], got 5"},
    {"router experts field", BLOCK(X8 "," Y8, "{'name':'a','kind':'router','in':['x'],'out':'y','weight':[8,8],'experts':4}"),
     AP_INVALID, "ops[0].experts: unknown field"},
    {"tied without target", BLOCK(X8 "," Y8, "{'name':'a','kind':'matmul','in':['x'],'out':'y','weight':[8,8],'tied':true}"),
     AP_INVALID, "ops[0].tied: no earlier op has a 8 × 8 weight"},
    {"too many parameters", BLOCK("{'name':'x','shape':['B',1000000000000]},{'name':'y','shape':['B',1000000000000]}",
     "{'name':'a','kind':'matmul','in':['x'],'out':'y','weight':[1000000000000,1000000000000]}"), AP_INVALID,
     "blocks[0].ops[0]: more than 1e+17 parameters"},
    {"repeat overflows params", "{" FMT ",'blocks':[{'name':'b','repeat':1000000,'tensors':[{'name':'x','shape':[1000000]},"
     "{'name':'y','shape':[1000000]}],'ops':[{'name':'a','kind':'matmul','in':['x'],'out':'y','weight':[1000000,1000000]}]}]}",
     AP_INVALID, "blocks[0]: the model exceeds 1e+17 parameters"},
    {"attention two inputs", BLOCK("{'name':'q','shape':['B','S',64]},{'name':'o','shape':['B','S',64]}",
     "{'name':'a','kind':'attention','in':['q','q'],'out':'o','heads':4,'head_dim':16}"), AP_INVALID,
     "ops[0].in: expected an array of 3 tensor names for a attention op"},
    {"attention no heads", BLOCK("{'name':'q','shape':['B','S',64]},{'name':'o','shape':['B','S',64]}",
     "{'name':'a','kind':'attention','in':['q','q','q'],'out':'o','head_dim':16}"), AP_INVALID, "ops[0].heads: required field missing"},
    {"attention kv_heads", BLOCK("{'name':'q','shape':['B','S',96]},{'name':'o','shape':['B','S',96]}",
     "{'name':'a','kind':'attention','in':['q','q','q'],'out':'o','heads':6,'kv_heads':4,'head_dim':16}"), AP_INVALID,
     "ops[0].kv_heads: must divide heads (6), got 4"},
    {"attention head size", BLOCK("{'name':'q','shape':['B','S',60]},{'name':'o','shape':['B','S',64]}",
     "{'name':'a','kind':'attention','in':['q','q','q'],'out':'o','heads':4,'head_dim':16}"), AP_INVALID,
     "ops[0].in[0]: tensor \"q\": its dimensions besides B and S must hold heads × head_dim = 64 per token"},
    {"attention without S", BLOCK("{'name':'q','shape':['B',64]},{'name':'o','shape':['B',64]}",
     "{'name':'a','kind':'attention','in':['q','q','q'],'out':'o','heads':4,'head_dim':16}"), AP_INVALID,
     "ops[0].in[0]: the query \"q\" needs an \"S\" dimension"},
    {"embedding no rows", BLOCK("{'name':'ids','shape':['B','S'],'dtype':'int64'},{'name':'e','shape':['B','S',8]}",
     "{'name':'a','kind':'embedding','in':['ids'],'out':'e'}"), AP_INVALID, "ops[0].rows: required field missing"},
    {"embedding rows and params", BLOCK("{'name':'ids','shape':['B','S'],'dtype':'int64'},{'name':'e','shape':['B','S',8]}",
     "{'name':'a','kind':'embedding','in':['ids'],'out':'e','rows':10,'params':80}"), AP_INVALID,
     "ops[0].rows: give rows or params, not both"},
    {"embedding width symbolic", BLOCK("{'name':'ids','shape':['B','S'],'dtype':'int64'},{'name':'e','shape':['B','S']}",
     "{'name':'a','kind':'embedding','in':['ids'],'out':'e','rows':10}"), AP_INVALID,
     "ops[0].out: the last dimension of \"e\" (the embedding width) must be a number"},
    {"embedding too large", BLOCK("{'name':'ids','shape':['B','S'],'dtype':'int64'},{'name':'e','shape':['B','S',1000000]}",
     "{'name':'a','kind':'embedding','in':['ids'],'out':'e','rows':1000000000000}"), AP_INVALID,
     "ops[0].rows: the table rows × 1000000 exceeds 1e+15 parameters"},
    {"conv channels symbolic", BLOCK("{'name':'x','shape':['B','S',8,8]}," IMG("y", 8, 8),
     "{'name':'a','kind':'conv2d','in':['x'],'out':'y','kernel':1}"), AP_INVALID,
     "ops[0].in[0]: the channel dimension (index 1) must be a number"},
    {"pool 3-D output", BLOCK(IMG("x", 8, 16) ",{'name':'y','shape':['B',8,4]}", "{'name':'a','kind':'pool','in':['x'],'out':'y','kernel':2}"),
     AP_INVALID, "ops[0].out: tensor \"y\" must be [N, C, H, W] or, for a global pool, [N, C]"},
    {"conv not 4-D", BLOCK(X8 "," Y8, "{'name':'a','kind':'conv2d','in':['x'],'out':'y','kernel':3}"), AP_INVALID,
     "ops[0].in[0]: tensor \"x\" must be 4-D [N, C, H, W], got 2 dimensions"},
    {"conv no kernel", BLOCK(IMG("x", 3, 8) "," IMG("y", 8, 8), "{'name':'a','kind':'conv2d','in':['x'],'out':'y'}"), AP_INVALID,
     "ops[0].kernel: required field missing"},
    {"conv spatial", BLOCK(IMG("x", 3, 32) "," IMG("y", 16, 32), "{'name':'a','kind':'conv2d','in':['x'],'out':'y','kernel':3,'stride':2,'padding':1}"),
     AP_INVALID, "ops[0].out: output \"y\" is 32x32 but input 32x32 with kernel 3x3, stride 2x2, padding 1x1 gives 16x16"},
    {"conv groups", BLOCK(IMG("x", 6, 8) "," IMG("y", 8, 8), "{'name':'a','kind':'conv2d','in':['x'],'out':'y','kernel':1,'groups':4}"),
     AP_INVALID, "ops[0].groups: must divide the input channels (6) and output channels (8)"},
    {"conv kernel zero", BLOCK(IMG("x", 3, 8) "," IMG("y", 8, 8), "{'name':'a','kind':'conv2d','in':['x'],'out':'y','kernel':[0,3]}"),
     AP_INVALID, "ops[0].kernel: expected an integer or [a, b] of integers in [1, 1000000]"},
    {"conv batch", BLOCK(IMG("x", 3, 8) ",{'name':'y','shape':[2,8,8,8]}", "{'name':'a','kind':'conv2d','in':['x'],'out':'y','kernel':1}"),
     AP_INVALID, "ops[0].out: the batch dimension of \"y\" differs from the input's"},
    {"pool global kernel", BLOCK(IMG("x", 8, 16) ",{'name':'y','shape':['B',8]}", "{'name':'a','kind':'pool','in':['x'],'out':'y','kernel':8}"),
     AP_INVALID, "ops[0].kernel: a global pool to [N, C] needs kernel [16, 16]"},
    {"pool channels", BLOCK(IMG("x", 8, 16) "," IMG("y", 4, 8), "{'name':'a','kind':'pool','in':['x'],'out':'y','kernel':2}"),
     AP_INVALID, "ops[0].out: \"y\" must keep the input's batch and channel dimensions"},
    {"pool spatial", BLOCK(IMG("x", 8, 16) "," IMG("y", 8, 4), "{'name':'a','kind':'pool','in':['x'],'out':'y','kernel':2}"),
     AP_INVALID, "output \"y\" is 4x4 but input 16x16 with kernel 2x2, stride 2x2, padding 0x0 gives 8x8"},
    {"outputs empty", BLOCK(X8 "," Y8, "{'name':'s','kind':'elementwise','in':['x'],'out':[],'flop_per_elem':0}"),
     AP_INVALID, "ops[0].out: expected a tensor name or an array of 1 to 8 tensor names"},
    {"output twice", BLOCK(X8 "," Y8, "{'name':'s','kind':'elementwise','in':['x'],'out':['y','y'],'flop_per_elem':0}"),
     AP_INVALID, "ops[0].out[1]: tensor \"y\" is already the output of op \"(this op)\""},
    {"output is input", BLOCK(X8 "," Y8, "{'name':'s','kind':'elementwise','in':['x'],'out':['y','x'],'flop_per_elem':0}"),
     AP_INVALID, "ops[0].out[1]: \"x\" is also an input of this op"},
};

static void test_bad_inputs(void **state) {
  (void)state;
  int failures = 0;
  for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
    const bad_case *c = &bad_cases[i];
    char *text = q(c->json);
    ap_ctx *ctx = ap_ctx_new();
    arena *a = NULL;
    graph g;
    ap_status st = load(ctx, text, &a, &g);
    const char *msg = ap_ctx_error(ctx);
    bool ok = st == c->status && strstr(msg, c->expect) && strchr(msg, '\n') == NULL &&
              strncmp(msg, "net.json", 8) == 0;
    if (!ok) {
      print_error("case \"%s\": status %s (want %s), message \"%s\" (want it to contain \"%s\")\n", c->name,
                  ap_status_str(st), ap_status_str(c->status), msg, c->expect);
      failures++;
    }
    if (!st) arena_free(a);
    ap_ctx_free(ctx);
    free(text);
  }
  assert_int_equal(failures, 0);
}

/* Each valid example with one field broken in turn must fail cleanly, never crash: a cheap mutation sweep
 * that runs under the sanitizers in `make asan`. */
static void test_mutations(void **state) {
  (void)state;
  char *text = example_text("data/models/examples/resnet-tiny.json");
  size_t n = strlen(text);
  int ok = 0, failed = 0;
  for (size_t i = 0; i < n; i += 7) {
    char saved = text[i];
    static const char subs[] = {'0', '-', '"', '}', 'x'};
    for (size_t k = 0; k < sizeof subs; k++) {
      text[i] = subs[k];
      ap_ctx *ctx = ap_ctx_new();
      arena *a;
      graph g;
      ap_status st = load(ctx, text, &a, &g);
      if (st == AP_OK) {
        ok++;
        (void)graph_train_flop_per_seq(&g, 7, false);
        arena_free(a);
      } else {
        failed++;
        assert_true(strncmp(ap_ctx_error(ctx), "net.json", 8) == 0);
        assert_null(strchr(ap_ctx_error(ctx), '\n'));
      }
      ap_ctx_free(ctx);
    }
    text[i] = saved;
  }
  assert_true(failed > 0);
  assert_true(ok > 0); /* some mutations only touch names or comments */
  free(text);
}

/* An op with several outputs ("out" as an array) and the graph's edges: a split into two halves read by two
 * ops, then joined. Each output is a graph tensor written by the op (its bytes count), and every read of a
 * produced tensor is one edge from its producer, naming which output. */
static void test_multi_output_and_edges(void **state) {
  (void)state;
  char *text = q("{" FMT ",'blocks':["
                 "{'name':'b','tensors':[{'name':'x','shape':['B',8]},{'name':'lo','shape':['B',4]},"
                 "{'name':'hi','shape':['B',4]},{'name':'a','shape':['B',4]},{'name':'y','shape':['B',4]}],"
                 "'ops':[{'name':'split','kind':'elementwise','in':['x'],'out':['lo','hi'],'flop_per_elem':0},"
                 "{'name':'relu','kind':'elementwise','in':['hi'],'out':'a','flop_per_elem':1},"
                 "{'name':'mul','kind':'elementwise','in':['lo','a'],'out':'y','flop_per_elem':1}]},"
                 "{'name':'c','repeat':2,'tensors':[{'name':'x','shape':['B',4]},{'name':'y','shape':['B',4]}],"
                 "'ops':[{'name':'relu','kind':'elementwise','in':['x'],'out':'y','flop_per_elem':1}]}]}");
  ap_ctx *ctx = ap_ctx_new();
  arena *a;
  graph g;
  ap_status st = load(ctx, text, &a, &g);
  if (st) fail_msg("%s", ap_ctx_error(ctx));
  const graph_block *b = &g.blocks[0];
  assert_int_equal(b->ops[0].n_out, 2);
  assert_int_equal(b->ops[0].out, 1);
  assert_int_equal(b->ops[0].outs[1], 2);
  assert_int_equal(b->ops[1].n_out, 1);
  op_cost c = graph_op_eval(b, &b->ops[0], 3, 1);
  assert_close(c.write_bytes, 3.0 * 8 * 2); /* both halves, bf16 */
  assert_int_equal(graph_producer(b, 2, NULL), 0);
  /* edges: split.hi -> relu, split.lo -> mul, relu -> mul; block b's output -> block c; c's carried edge */
  assert_int_equal(g.n_edges, 5);
  const graph_edge *e = g.edges;
  assert_true(e[0].from_op == 0 && e[0].from_out == 1 && e[0].to_op == 1 && e[0].to_in == 0 && e[0].from_tensor == 2);
  assert_true(e[1].from_op == 0 && e[1].from_out == 0 && e[1].to_op == 2 && e[1].to_in == 0 && e[1].from_tensor == 1);
  assert_true(e[2].from_op == 1 && e[2].to_op == 2 && e[2].to_in == 1);
  int carried = 0, across = 0;
  for (int i = 3; i < 5; i++) {
    assert_int_equal(g.edges[i].to_block, 1);
    if (g.edges[i].carried) carried++, assert_int_equal(g.edges[i].from_block, 1);
    else across++, assert_true(g.edges[i].from_block == 0 && g.edges[i].from_op == 2 && g.edges[i].from_tensor == 4);
  }
  assert_int_equal(carried, 1);
  assert_int_equal(across, 1);
  arena_free(a);
  ap_ctx_free(ctx);
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_examples_load), cmocka_unit_test(test_mlp_gemm_flop_is_six_n),
      cmocka_unit_test(test_resnet_shapes), cmocka_unit_test(test_every_kind),
      cmocka_unit_test(test_boundaries),    cmocka_unit_test(test_numbers_and_ties),
      cmocka_unit_test(test_detect),
      cmocka_unit_test(test_bad_inputs),    cmocka_unit_test(test_mutations),
      cmocka_unit_test(test_multi_output_and_edges),
  };
  return cmocka_run_group_tests_name("graph_json", tests, NULL, NULL);
}
