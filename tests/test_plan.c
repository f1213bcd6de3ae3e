/* Tests of the plan layer: validation against real models (one line per invalid plan, with the message it
 * must give), the JSON round trip, the default even split of uneven layer counts, the rank strides of the
 * mesh axes for several orders, and the model facts the constraints read. */
#include <stdlib.h>

#include "testutil.h"

#include "core/core.h"
#include "core/jsonx.h"
#include "model/graph.h"
#include "model/model.h"
#include "plan/plan.h"

/* The models the cases use, loaded once for the whole group. */
enum { M_LLAMA70, M_GPT2, M_MIXTRAL, M_DSV3, M_MLP3, M_NOLAYER, M_COUNT };
static const char *const model_names[M_COUNT] = {"llama-3-70b", "gpt2", "mixtral-8x7b", "deepseek-v3",
                                                 "data/models/examples/mlp-3.json", NULL};
static ap_model *models[M_COUNT];

/* A general graph without layer blocks: three blocks of repeats 1, 2 and 1, so four pipeline units. */
static graph_block nolayer_blocks[] = {
    {.name = "a", .role = BLOCK_OTHER, .repeat = 1, .input = -1, .output = -1},
    {.name = "b", .role = BLOCK_OTHER, .repeat = 2, .input = -1, .output = -1},
    {.name = "c", .role = BLOCK_OTHER, .repeat = 1, .input = -1, .output = -1},
};
static graph nolayer_graph = {.name = "nolayer", .n_blocks = 3, .blocks = nolayer_blocks};

static const graph *graph_of(int m) { return m == M_NOLAYER ? &nolayer_graph : model_graph(models[m]); }

static int setup(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  for (int i = 0; i < M_COUNT; i++) {
    if (!model_names[i]) continue;
    if (ap_model_load(ctx, model_names[i], &models[i])) {
      fprintf(stderr, "%s: %s\n", model_names[i], ap_ctx_error(ctx));
      ap_ctx_free(ctx);
      return -1;
    }
  }
  ap_ctx_free(ctx);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  for (int i = 0; i < M_COUNT; i++) ap_model_free(models[i]);
  return 0;
}

/* Parses a plan written with single quotes for readability (each ' becomes "). */
static ap_status parse_plan(ap_ctx *ctx, const char *text_sq, plan *out) {
  char text[2048];
  snprintf(text, sizeof text, "%s", text_sq);
  for (char *c = text; *c; c++)
    if (*c == '\'') *c = '"';
  json_t *root = NULL;
  ap_status st = jx_parse(ctx, "plan.json", text, strlen(text), &root);
  if (!st) st = plan_from_json(ctx, "plan.json", root, out);
  json_decref(root);
  return st;
}

/* One plan per line: the model, the cluster's device count (0: not checked), the plan, and the substring the
 * error must contain (NULL: the plan is valid). Errors come from the reader or from plan_validate alike. */
static const struct {
  int model;
  int64_t n_devices;
  const char *plan_json;
  const char *error;
} validate_cases[] = {
    /* Valid plans. */
    {M_LLAMA70, 64, "{'parallel':{'dp':2,'tp':8,'pp':4},'global_batch_size':512,'sequence_parallel':true}", NULL},
    {M_LLAMA70, 64, "{'parallel':{'dp':4,'tp':8,'pp':2},'pipeline':{'stage_layers':[40,40]}}", NULL},
    {M_LLAMA70, 32, "{'parallel':{'tp':8,'pp':4},'pipeline':{'stage_layers':[0,40,40,0]}}", NULL},
    {M_LLAMA70, 64, "{'parallel':{'dp':2,'tp':4,'pp':8,'vpp':2},'pipeline':{'schedule':'interleaved-1f1b','n_micro_batches':16}}", NULL},
    {M_LLAMA70, 16, "{'parallel':{'dp':2,'pp':8,'vpp':2},'pipeline':{'schedule':'zb-v','n_micro_batches':16}}", NULL},
    {M_LLAMA70, 8, "{'parallel':{'tp':4,'cp':2},'seq_length':131072,'sequence_parallel':true,'overlap':{'tp_comm':true}}", NULL},
    {M_LLAMA70, 8, "{'parallel':{'dp':8},'recompute':{'granularity':'full','num_layers':80}}", NULL},
    {M_LLAMA70, 1, "{'sequence_parallel':true,'overlap':{'tp_comm':true}}", NULL},
    {M_MIXTRAL, 64, "{'parallel':{'dp':8,'tp':2,'pp':4,'ep':8,'etp':1},'sequence_parallel':true}", NULL},
    {M_DSV3, 256, "{'parallel':{'dp':16,'pp':16,'ep':16,'etp':1},'seq_length':4096}", NULL},
    {M_MLP3, 6, "{'parallel':{'dp':2,'pp':3}}", NULL},
    {M_NOLAYER, 4, "{'parallel':{'pp':4}}", NULL},
    /* The device count. */
    {M_LLAMA70, 128, "{'parallel':{'dp':2,'tp':8,'pp':4}}", "plan.json: dp·tp·pp·cp = 2·8·4·1 = 64 must equal the cluster's 128 devices"},
    /* Heads, KV heads, experts. */
    {M_GPT2, 8, "{'parallel':{'tp':8}}", "tp = 8 must divide num_attention_heads = 12"},
    {M_LLAMA70, 16, "{'parallel':{'tp':16}}", "tp = 16 must divide num_query_groups (KV heads) = 8"},
    {M_LLAMA70, 2, "{'parallel':{'dp':2,'ep':2}}", "ep = 2 needs routed experts, and the model is dense"},
    {M_MIXTRAL, 3, "{'parallel':{'dp':3,'ep':3}}", "ep = 3 must divide num_experts = 8"},
    {M_MIXTRAL, 2, "{'parallel':{'tp':2}}", "tp = 2 with experts needs sequence_parallel"},
    {M_DSV3, 8, "{'parallel':{'dp':8,'ep':16,'etp':1}}", "etp·ep = 1·16 = 16 must divide tp·cp·dp = 1·1·8 = 8"},
    {M_MIXTRAL, 8, "{'parallel':{'dp':4,'tp':2,'ep':8},'sequence_parallel':true}", "etp·ep = 2·8 = 16 must divide tp·cp·dp = 2·1·4 = 8"},
    {M_DSV3, 16, "{'parallel':{'dp':8,'pp':2,'ep':8,'order':['tp','cp','ep','pp','dp']}}", "with pp not outermost in the order, edp = 1 must equal dp = 8"},
    {M_DSV3, 8, "{'parallel':{'dp':2,'cp':2,'pp':2,'ep':2,'order':['tp','cp','pp','ep','dp']},'seq_length':4096}", "pipeline groups differ between the dense mesh (stride 2) and the expert mesh (stride 1)"},
    {M_MLP3, 2, "{'parallel':{'tp':2}}", "tp = 2 needs tensor-parallel ops, and the model has none"},
    {M_MLP3, 2, "{'parallel':{'cp':2}}", "cp = 2 needs attention to split, and the model has none"},
    {M_NOLAYER, 2, "{'parallel':{'tp':2}}", "the model has no layer blocks, so only dp and pp apply"},
    /* The pipeline. */
    {M_GPT2, 16, "{'parallel':{'pp':16}}", "pp·vpp = 16·1 = 16 pipeline chunks exceed the model's 12 layers"},
    {M_NOLAYER, 5, "{'parallel':{'pp':5}}", "pp·vpp = 5·1 = 5 pipeline chunks exceed the model's 4 blocks"},
    {M_GPT2, 4, "{'parallel':{'pp':4,'vpp':4},'pipeline':{'schedule':'interleaved-1f1b','n_micro_batches':4}}", "pp·vpp = 4·4 = 16 pipeline chunks exceed the model's 12 layers"},
    {M_LLAMA70, 4, "{'parallel':{'pp':4,'vpp':2},'pipeline':{'n_micro_batches':8}}", "vpp = 2 needs schedule interleaved-1f1b or zb-v, got 1f1b"},
    {M_LLAMA70, 4, "{'parallel':{'pp':4},'pipeline':{'schedule':'interleaved-1f1b'}}", "interleaved-1f1b needs vpp >= 2, got vpp = 1"},
    {M_LLAMA70, 1, "{'parallel':{'vpp':2},'pipeline':{'schedule':'interleaved-1f1b'}}", "interleaved-1f1b needs pp >= 2, got pp = 1"},
    {M_LLAMA70, 4, "{'parallel':{'pp':4,'vpp':2},'pipeline':{'schedule':'interleaved-1f1b','n_micro_batches':6}}", "n_micro_batches = 6 must be a multiple of pp = 4 for interleaved-1f1b"},
    {M_LLAMA70, 4, "{'parallel':{'pp':4,'vpp':4},'pipeline':{'schedule':'zb-v'}}", "zb-v needs vpp = 2, got vpp = 4"},
    {M_LLAMA70, 2, "{'parallel':{'pp':2},'pipeline':{'stage_layers':[40,20,20]}}", "stage_layers lists 3 chunks, but pp·vpp = 2·1 = 2"},
    {M_LLAMA70, 2, "{'parallel':{'pp':2},'pipeline':{'stage_layers':[40,39]}}", "stage_layers sum to 79, but the model has 80 layers"},
    {M_LLAMA70, 3, "{'parallel':{'pp':3},'pipeline':{'stage_layers':[40,0,40]}}", "stage_layers[1] = 0 must be >= 1 (only the first and the last chunk may be empty)"},
    {M_NOLAYER, 2, "{'parallel':{'pp':2},'pipeline':{'stage_layers':[0,4]}}", "stage_layers[0] = 0 must be >= 1"},
    /* The batch and the sequence. */
    {M_LLAMA70, 8, "{'parallel':{'dp':8},'global_batch_size':1000,'pipeline':{'micro_batch_size':3}}", "global_batch_size = 1000 must equal micro_batch_size·n_micro_batches·dp = 3·1·8 = 24"},
    {M_LLAMA70, 8, "{'parallel':{'dp':8},'global_batch_size':64,'pipeline':{'n_micro_batches':4}}", "global_batch_size = 64 must equal micro_batch_size·n_micro_batches·dp = 1·4·8 = 32"},
    {M_LLAMA70, 2, "{'parallel':{'cp':2},'seq_length':4098}", "seq_length = 4098 must be a multiple of 2·cp = 4"},
    {M_LLAMA70, 8, "{'parallel':{'tp':8},'seq_length':4100,'sequence_parallel':true}", "seq_length = 4100 must be a multiple of tp·cp = 8·1 = 8 with sequence_parallel"},
    /* Recompute and overlap. */
    {M_LLAMA70, 1, "{'recompute':{'granularity':'selective','num_layers':2}}", "recompute_layers = 2 applies only to full recompute, got selective"},
    {M_LLAMA70, 2, "{'parallel':{'pp':2},'recompute':{'granularity':'full','num_layers':41}}", "recompute_layers = 41 exceeds the 40 layers of the largest pipeline chunk"},
    {M_LLAMA70, 8, "{'parallel':{'tp':8},'overlap':{'tp_comm':true}}", "tp_comm overlap with tp = 8 needs sequence_parallel"},
    /* Per-chunk recompute counts. */
    {M_LLAMA70, 4, "{'parallel':{'pp':4},'recompute':{'granularity':'full','num_layers':0,'per_chunk':[20,10,0,0]}}", NULL},
    {M_LLAMA70, 4, "{'parallel':{'pp':4,'vpp':2},'pipeline':{'schedule':'interleaved-1f1b','n_micro_batches':8},'recompute':{'granularity':'full','per_chunk':[10,0,0,0,0,0,0,10]}}", NULL},
    {M_LLAMA70, 4, "{'parallel':{'pp':4},'recompute':{'granularity':'full','per_chunk':[]}}", NULL},
    {M_LLAMA70, 4, "{'parallel':{'pp':4},'recompute':{'granularity':'selective','per_chunk':[1,1,1,1]}}", "recompute per_chunk applies only to full recompute, got selective"},
    {M_LLAMA70, 4, "{'parallel':{'pp':4},'recompute':{'granularity':'full','num_layers':2,'per_chunk':[1,1,1,1]}}", "recompute per_chunk and recompute_layers = 2 exclude each other"},
    {M_LLAMA70, 4, "{'parallel':{'pp':4},'recompute':{'granularity':'full','per_chunk':[1,1,1]}}", "recompute per_chunk lists 3 chunks, but pp·vpp = 4·1 = 4"},
    {M_LLAMA70, 4, "{'parallel':{'pp':4},'pipeline':{'stage_layers':[18,22,20,20]},'recompute':{'granularity':'full','per_chunk':[18,21,20,0]}}", NULL},
    {M_LLAMA70, 4, "{'parallel':{'pp':4},'pipeline':{'stage_layers':[22,18,20,20]},'recompute':{'granularity':'full','per_chunk':[18,21,20,0]}}", "recompute per_chunk[1] = 21 must be in [0, 18], the layers of chunk 1"},
    {M_LLAMA70, 1, "{'recompute':{'granularity':'full','per_chunk':[-1]}}", "plan.json: recompute.per_chunk: [0]: expected an integer in [0, 1000000]"},
    {M_LLAMA70, 1, "{'recompute':{'granularity':'full','per_chunk':3}}", "recompute.per_chunk: expected an array of layer counts"},
    /* What the reader rejects. */
    {M_LLAMA70, 1, "{'optimizer':{'zero_stage':4}}", "plan.json: optimizer.zero_stage: expected an integer in [0, 3], got 4"},
    {M_LLAMA70, 1, "{'paralel':{'tp':2}}", "plan.json: paralel: unknown field"},
    {M_LLAMA70, 1, "{'parallel':{'tp':0}}", "plan.json: parallel.tp: expected an integer in [1, 4194304], got 0"},
    {M_LLAMA70, 1, "{'parallel':{'order':['tp','cp','tp','dp','pp']}}", "parallel.order: \"tp\" appears twice"},
    {M_LLAMA70, 1, "{'parallel':{'order':['tp','cp','dp','pp']}}", "parallel.order: expected an array of the 5 axes"},
    {M_LLAMA70, 1, "{'pipeline':{'schedule':'1f1b-interleaved'}}", "pipeline.schedule: expected one of gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-v"},
    {M_LLAMA70, 1, "{'precision':'fp4'}", "precision: expected one of bf16, fp16, fp8, fp32, got \"fp4\""},
    {M_LLAMA70, 1, "{'format':'autopar-plan/2'}", "format: expected \"autopar-plan/1\""},
    {M_LLAMA70, 1, "{'pipeline':{'stage_layers':[40,-1]}}", "pipeline.stage_layers: [1]: expected an integer in [0, 1000000]"},
    {M_LLAMA70, 1, "[1,2]", "plan.json: a plan must be a JSON object"},
};

static void test_validate_cases(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  for (size_t i = 0; i < AP_COUNT(validate_cases); i++) {
    plan p;
    ctx_clear(ctx);
    ap_status st = parse_plan(ctx, validate_cases[i].plan_json, &p);
    if (!st) st = plan_validate(ctx, &p, graph_of(validate_cases[i].model), validate_cases[i].n_devices, "plan.json");
    const char *want = validate_cases[i].error;
    if (!want && st) fail_msg("case %zu (%s): unexpected error \"%s\"", i, validate_cases[i].plan_json, ap_ctx_error(ctx));
    if (want && !st) fail_msg("case %zu (%s): valid, want an error containing \"%s\"", i, validate_cases[i].plan_json, want);
    if (want) {
      print_message("# %s\n", ap_ctx_error(ctx));
      assert_int_equal(st, AP_INVALID);
      if (!strstr(ap_ctx_error(ctx), want))
        fail_msg("case %zu (%s): error \"%s\" does not contain \"%s\"", i, validate_cases[i].plan_json, ap_ctx_error(ctx), want);
      assert_null(strchr(ap_ctx_error(ctx), '\n'));
    }
  }
  ap_ctx_free(ctx);
}

/* Plans built in code (as a search builds them) are checked for ranges the JSON reader never lets through. */
static void test_validate_struct_ranges(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  const graph *g = graph_of(M_LLAMA70);
  plan p;
  plan_defaults(&p);
  assert_int_equal(plan_validate(ctx, &p, g, 1, NULL), AP_OK);
  p.dp = 0;
  assert_int_equal(plan_validate(ctx, &p, g, 0, NULL), AP_INVALID);
  assert_error_contains(ctx, "plan: dp = 0 must be in [1, 4194304]");
  plan_defaults(&p);
  p.zero_stage = 5;
  assert_int_equal(plan_validate(ctx, &p, g, 0, NULL), AP_INVALID);
  assert_error_contains(ctx, "zero_stage = 5 must be in [0, 3]");
  plan_defaults(&p);
  p.order[1] = PLAN_AXIS_TP;
  assert_int_equal(plan_validate(ctx, &p, g, 0, NULL), AP_INVALID);
  assert_error_contains(ctx, "order tp-tp-ep-dp-pp must list each of tp, cp, ep, dp, pp once");
  plan_defaults(&p);
  p.schedule = PLAN_SCHED_COUNT_;
  assert_int_equal(plan_validate(ctx, &p, g, 0, NULL), AP_INVALID);
  /* Degrees whose product overflows int64 saturate instead of wrapping to a plausible device count. */
  plan_defaults(&p);
  p.dp = p.tp = p.pp = p.cp = PLAN_MAX_DEGREE;
  assert_int_equal(plan_n_devices(&p), INT64_MAX);
  assert_int_equal(plan_validate(ctx, &p, g, 64, NULL), AP_INVALID);
  assert_error_contains(ctx, "must equal the cluster's 64 devices");
  ap_ctx_free(ctx);
}

/* The example of the issue reads, validates and writes back byte for byte. */
static const char sample_json[] =
    "{\"format\":\"autopar-plan/1\",\"model\":\"llama-3-70b\",\"cluster\":\"dgx-h100:8x8\",\"global_batch_size\":1024,"
    "\"seq_length\":8192,\"parallel\":{\"dp\":4,\"tp\":8,\"pp\":2,\"cp\":1,\"ep\":1,\"etp\":8,\"vpp\":1,"
    "\"order\":[\"tp\",\"cp\",\"ep\",\"dp\",\"pp\"]},\"pipeline\":{\"schedule\":\"1f1b\",\"micro_batch_size\":1,"
    "\"n_micro_batches\":256,\"stage_layers\":[40,40]},\"sequence_parallel\":true,"
    "\"recompute\":{\"granularity\":\"selective\",\"num_layers\":0},\"optimizer\":{\"zero_stage\":1},"
    "\"precision\":\"bf16\",\"overlap\":{\"grad_reduce\":true,\"param_gather\":true,\"tp_comm\":false}}";

static char *to_json(const plan *p) {
  strbuf sb = {0};
  plan_to_json(p, &sb);
  char *s = sb_take(&sb);
  assert_non_null(s);
  return s;
}

static void from_json_text(const char *text, plan *out) {
  ap_ctx *ctx = ap_ctx_new();
  json_t *root = NULL;
  if (jx_parse(ctx, "rt.json", text, strlen(text), &root) || plan_from_json(ctx, "rt.json", root, out))
    fail_msg("%s: %s", text, ap_ctx_error(ctx));
  json_decref(root);
  ap_ctx_free(ctx);
}

static void test_json_sample_round_trip(void **state) {
  (void)state;
  plan p;
  from_json_text(sample_json, &p);
  assert_int_equal(p.dp, 4);
  assert_int_equal(p.etp, 8);
  assert_int_equal(p.n_stage_layers, 2);
  assert_int_equal(p.recompute, PLAN_RECOMPUTE_SELECTIVE);
  assert_string_equal(p.cluster, "dgx-h100:8x8");
  ap_ctx *ctx = ap_ctx_new();
  if (plan_validate(ctx, &p, graph_of(M_LLAMA70), 64, "sample")) fail_msg("%s", ap_ctx_error(ctx));
  ap_ctx_free(ctx);
  char *s = to_json(&p);
  assert_string_equal(s, sample_json);
  free(s);
  /* The defaults write and read back as themselves too (etp 0, seq_length 0 and the even split included). */
  plan d, d2;
  plan_defaults(&d);
  s = to_json(&d);
  from_json_text(s, &d2);
  assert_true(plan_equal(&d, &d2));
  assert_memory_equal(&d, &d2, sizeof d);
  free(s);
}

/* A plan with per-chunk recompute counts writes them after num_layers and reads back byte for byte; the same
 * plan without them is a different plan. */
static const char per_chunk_json[] =
    "{\"format\":\"autopar-plan/1\",\"model\":\"llama-3-70b\",\"cluster\":\"\",\"global_batch_size\":4,"
    "\"seq_length\":0,\"parallel\":{\"dp\":1,\"tp\":1,\"pp\":4,\"cp\":1,\"ep\":1,\"etp\":0,\"vpp\":1,"
    "\"order\":[\"tp\",\"cp\",\"ep\",\"dp\",\"pp\"]},\"pipeline\":{\"schedule\":\"1f1b\",\"micro_batch_size\":1,"
    "\"n_micro_batches\":4,\"stage_layers\":[]},\"sequence_parallel\":false,"
    "\"recompute\":{\"granularity\":\"full\",\"num_layers\":0,\"per_chunk\":[20,10,3,0]},\"optimizer\":{\"zero_stage\":1},"
    "\"precision\":\"bf16\",\"overlap\":{\"grad_reduce\":true,\"param_gather\":true,\"tp_comm\":false}}";

static void test_json_per_chunk_recompute(void **state) {
  (void)state;
  plan p;
  from_json_text(per_chunk_json, &p);
  assert_int_equal(p.n_chunk_recompute, 4);
  assert_int_equal(p.chunk_recompute_layers[1], 10);
  ap_ctx *ctx = ap_ctx_new();
  if (plan_validate(ctx, &p, graph_of(M_LLAMA70), 4, "per_chunk")) fail_msg("%s", ap_ctx_error(ctx));
  ap_ctx_free(ctx);
  char *s = to_json(&p);
  assert_string_equal(s, per_chunk_json);
  free(s);
  plan q = p;
  q.chunk_recompute_layers[3] = 1;
  assert_false(plan_equal(&p, &q));
  q = p;
  q.n_chunk_recompute = 0;
  assert_false(plan_equal(&p, &q));
  q.chunk_recompute_layers[7] = 99; /* entries past the list do not count */
  plan r = q;
  r.chunk_recompute_layers[7] = 0;
  assert_true(plan_equal(&q, &r));
}

/* Which layers recompute: one line per rule. */
static void test_layer_recomputes(void **state) {
  (void)state;
  static const struct {
    plan_recompute rc;
    int32_t num_layers, n_per_chunk, per_chunk[4];
    int64_t chunk, index;
    bool want;
  } cases[] = {
      {PLAN_RECOMPUTE_NONE, 0, 0, {0}, 0, 0, false},
      {PLAN_RECOMPUTE_SELECTIVE, 0, 0, {0}, 1, 3, false},
      {PLAN_RECOMPUTE_FULL, 0, 0, {0}, 2, 17, true},       /* num_layers 0: every layer */
      {PLAN_RECOMPUTE_FULL, 3, 0, {0}, 2, 2, true},        /* the first three of each chunk */
      {PLAN_RECOMPUTE_FULL, 3, 0, {0}, 2, 3, false},
      {PLAN_RECOMPUTE_FULL, 0, 4, {5, 2, 0, 1}, 0, 4, true}, /* per chunk */
      {PLAN_RECOMPUTE_FULL, 0, 4, {5, 2, 0, 1}, 1, 2, false},
      {PLAN_RECOMPUTE_FULL, 0, 4, {5, 2, 0, 1}, 2, 0, false}, /* 0 in the list: none of that chunk */
      {PLAN_RECOMPUTE_FULL, 0, 4, {5, 2, 0, 1}, 3, 0, true},
  };
  for (size_t i = 0; i < AP_COUNT(cases); i++) {
    plan p;
    plan_defaults(&p);
    p.recompute = cases[i].rc;
    p.recompute_layers = cases[i].num_layers;
    p.n_chunk_recompute = cases[i].n_per_chunk;
    memcpy(p.chunk_recompute_layers, cases[i].per_chunk, sizeof cases[i].per_chunk);
    bool got = plan_layer_recomputes(&p, cases[i].chunk, cases[i].index);
    if (got != cases[i].want) fail_msg("case %zu: chunk %lld layer %lld recomputes = %d, want %d", i,
                                       (long long)cases[i].chunk, (long long)cases[i].index, got, cases[i].want);
  }
}

/* Random plans with every field varied: from_json(to_json(x)) equals x and writes the same text again. */
static void test_json_random_round_trip(void **state) {
  (void)state;
  uint64_t rng = 0x9e3779b97f4a7c15ull;
#define RND(n) ((int64_t)((rng = rng * 6364136223846793005ull + 1442695040888963407ull) >> 33) % (n))
  for (int iter = 0; iter < 500; iter++) {
    plan p;
    plan_defaults(&p);
    p.dp = 1 + RND(64);
    p.tp = 1 + RND(16);
    p.pp = 1 + RND(32);
    p.cp = 1 + RND(8);
    p.ep = 1 + RND(64);
    p.etp = RND(8);
    p.vpp = 1 + RND(4);
    for (int i = PLAN_N_ORDER - 1; i > 0; i--) { /* a random permutation of the order */
      int j = (int)RND(i + 1);
      plan_axis t = p.order[i];
      p.order[i] = p.order[j];
      p.order[j] = t;
    }
    p.schedule = (plan_schedule)RND(PLAN_SCHED_COUNT_);
    p.n_stage_layers = (int32_t)RND(8);
    for (int32_t c = 0; c < p.n_stage_layers; c++) p.stage_layers[c] = (int32_t)RND(100);
    p.micro_batch_size = 1 + RND(8);
    p.n_micro_batches = 1 + RND(1000);
    p.global_batch_size = 1 + RND(100000);
    p.seq_length = RND(1 << 20);
    p.sequence_parallel = RND(2);
    p.recompute = (plan_recompute)RND(PLAN_RECOMPUTE_COUNT_);
    p.recompute_layers = (int32_t)RND(10);
    p.n_chunk_recompute = RND(3) == 0 ? (int32_t)RND(9) : 0;
    for (int32_t c = 0; c < p.n_chunk_recompute; c++) p.chunk_recompute_layers[c] = (int32_t)RND(40);
    p.zero_stage = (int32_t)RND(4);
    p.precision = (plan_precision)RND(PLAN_PREC_COUNT_);
    p.fused_loss = RND(2);
    p.overlap_grad_reduce = RND(2);
    p.overlap_param_gather = RND(2);
    p.tp_comm_overlap = RND(2);
    snprintf(p.model, sizeof p.model, "%s", RND(2) ? "" : "data/models/a \"quoted\"\\name.json");
    snprintf(p.cluster, sizeof p.cluster, "h100:%lld", (long long)(1 + RND(4096)));
    char *s = to_json(&p);
    plan q;
    from_json_text(s, &q);
    if (!plan_equal(&p, &q)) fail_msg("iteration %d: %s did not read back as the same plan", iter, s);
    char *s2 = to_json(&q);
    assert_string_equal(s, s2);
    free(s);
    free(s2);
  }
#undef RND
}

/* A missing batch field is derived as Megatron derives it; a present one is kept. */
static void test_json_batch_derivation(void **state) {
  (void)state;
  plan p;
  from_json_text("{\"global_batch_size\":1024,\"parallel\":{\"dp\":8},\"pipeline\":{\"micro_batch_size\":2}}", &p);
  assert_int_equal(p.n_micro_batches, 64);
  from_json_text("{\"parallel\":{\"dp\":8},\"pipeline\":{\"micro_batch_size\":2,\"n_micro_batches\":3}}", &p);
  assert_int_equal(p.global_batch_size, 48);
  from_json_text("{\"parallel\":{\"dp\":4}}", &p);
  assert_int_equal(p.n_micro_batches, 1);
  assert_int_equal(p.global_batch_size, 4);
}

/* The default split: equal shares, the remainder to the middle chunks first, then the first, never the last. */
static const struct {
  int64_t n_layers, n_chunks;
  bool ok;
  int32_t want[16];
} split_cases[] = {
    {80, 2, true, {40, 40}},
    {80, 3, true, {27, 27, 26}},
    {61, 4, true, {15, 16, 15, 15}},
    {62, 4, true, {15, 16, 16, 15}},
    {63, 4, true, {16, 16, 16, 15}},
    {126, 16, true, {7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7}},
    {127, 16, true, {8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7}},
    {3, 2, true, {2, 1}},
    {7, 1, true, {7}},
    {5, 5, true, {1, 1, 1, 1, 1}},
    {4, 5, false, {0}},
    {4, 0, false, {0}},
};

static void test_split_even(void **state) {
  (void)state;
  for (size_t i = 0; i < AP_COUNT(split_cases); i++) {
    int32_t got[PLAN_MAX_CHUNKS] = {0};
    bool ok = plan_split_even(split_cases[i].n_layers, split_cases[i].n_chunks, got);
    if (ok != split_cases[i].ok)
      fail_msg("%lld layers over %lld chunks: ok = %d, want %d", (long long)split_cases[i].n_layers,
               (long long)split_cases[i].n_chunks, ok, split_cases[i].ok);
    int64_t sum = 0;
    for (int64_t c = 0; ok && c < split_cases[i].n_chunks; c++) {
      if (got[c] != split_cases[i].want[c])
        fail_msg("%lld layers over %lld chunks: chunk %lld has %d, want %d", (long long)split_cases[i].n_layers,
                 (long long)split_cases[i].n_chunks, (long long)c, got[c], split_cases[i].want[c]);
      sum += got[c];
    }
    if (ok) assert_int_equal(sum, split_cases[i].n_layers);
  }
  /* Through a plan: Llama 3 70B's 80 layers over pp 3 and over 12 interleaved chunks. */
  plan p;
  plan_defaults(&p);
  p.pp = 3;
  int32_t layers[PLAN_MAX_CHUNKS];
  assert_true(plan_chunk_layers(&p, 80, layers));
  assert_int_equal(layers[0], 27);
  assert_int_equal(layers[2], 26);
  p.pp = 4;
  p.vpp = 3;
  p.schedule = PLAN_SCHED_INTERLEAVED_1F1B;
  assert_true(plan_chunk_layers(&p, 80, layers)); /* 6 each and 8 more: 6 7 7 7 7 7 7 7 7 6 6 6 */
  assert_int_equal(layers[0], 6);
  assert_int_equal(layers[1], 7);
  assert_int_equal(layers[8], 7);
  assert_int_equal(layers[9], 6);
  assert_int_equal(layers[11], 6);
  int64_t per_rank[4] = {0};
  for (int64_t c = 0; c < 12; c++) per_rank[plan_chunk_rank(&p, c)] += layers[c];
  for (int r = 0; r < 4; r++) assert_int_equal(per_rank[r], 20); /* each rank runs 20 layers */
  p.n_stage_layers = 2; /* a given split must list pp·vpp chunks */
  assert_false(plan_chunk_layers(&p, 80, layers));
}

/* Rank strides: Megatron's order and two others, dense and expert axes, groups of several axes. */
static void test_axis_strides(void **state) {
  (void)state;
  plan p;
  plan_defaults(&p);
  p.tp = 8;
  p.cp = 2;
  p.dp = 4;
  p.pp = 2;
  /* tp-cp-ep-dp-pp: ep has degree 1 in the dense mesh. */
  assert_int_equal(plan_axis_stride(&p, PLAN_AXIS_TP), 1);
  assert_int_equal(plan_axis_stride(&p, PLAN_AXIS_CP), 8);
  assert_int_equal(plan_axis_stride(&p, PLAN_AXIS_DP), 16);
  assert_int_equal(plan_axis_stride(&p, PLAN_AXIS_PP), 64);
  int64_t stride = 0, size = 0;
  assert_true(plan_axes_group(&p, 1u << PLAN_AXIS_DP | 1u << PLAN_AXIS_CP, &stride, &size));
  assert_int_equal(stride, 8);
  assert_int_equal(size, 8);
  assert_true(plan_axes_group(&p, 1u << PLAN_AXIS_TP | 1u << PLAN_AXIS_CP, &stride, &size));
  assert_int_equal(stride, 1);
  assert_int_equal(size, 16);
  assert_false(plan_axes_group(&p, 1u << PLAN_AXIS_TP | 1u << PLAN_AXIS_DP, &stride, &size)); /* cp between */
  assert_false(plan_axes_group(&p, 1u << PLAN_AXIS_TP | 1u << PLAN_AXIS_EP, &stride, &size)); /* two meshes */

  /* pp-dp-cp-tp-ep reversed: pp innermost. */
  const plan_axis rev[PLAN_N_ORDER] = {PLAN_AXIS_PP, PLAN_AXIS_DP, PLAN_AXIS_CP, PLAN_AXIS_TP, PLAN_AXIS_EP};
  memcpy(p.order, rev, sizeof rev);
  assert_int_equal(plan_axis_stride(&p, PLAN_AXIS_PP), 1);
  assert_int_equal(plan_axis_stride(&p, PLAN_AXIS_DP), 2);
  assert_int_equal(plan_axis_stride(&p, PLAN_AXIS_CP), 8);
  assert_int_equal(plan_axis_stride(&p, PLAN_AXIS_TP), 16);

  /* tp-pp-dp-cp-ep (Megatron's older tp-pp-dp choice): dp and cp adjacent again. */
  const plan_axis tpd[PLAN_N_ORDER] = {PLAN_AXIS_TP, PLAN_AXIS_PP, PLAN_AXIS_DP, PLAN_AXIS_CP, PLAN_AXIS_EP};
  memcpy(p.order, tpd, sizeof tpd);
  assert_int_equal(plan_axis_stride(&p, PLAN_AXIS_PP), 8);
  assert_int_equal(plan_axis_stride(&p, PLAN_AXIS_DP), 16);
  assert_int_equal(plan_axis_stride(&p, PLAN_AXIS_CP), 64);
  assert_true(plan_axes_group(&p, 1u << PLAN_AXIS_DP | 1u << PLAN_AXIS_CP, &stride, &size));
  assert_int_equal(stride, 16);
  assert_int_equal(size, 8);

  /* Expert folding, DeepSeek-style: tp 2, dp 32, pp 2, ep 8, etp 1, so edp = 2·32/8 = 8. */
  plan_defaults(&p);
  p.tp = 2;
  p.dp = 32;
  p.pp = 2;
  p.ep = 8;
  p.etp = 1;
  assert_int_equal(plan_edp(&p), 8);
  assert_int_equal(plan_axis_size(&p, PLAN_AXIS_EDP), 8);
  assert_int_equal(plan_axis_stride(&p, PLAN_AXIS_ETP), 1);
  assert_int_equal(plan_axis_stride(&p, PLAN_AXIS_EP), 1);
  assert_int_equal(plan_axis_stride(&p, PLAN_AXIS_EDP), 8);
  assert_int_equal(plan_axis_stride(&p, PLAN_AXIS_PP), 64);
  assert_int_equal(plan_axis_stride(&p, PLAN_AXIS_DP), 2);
  assert_true(plan_axes_group(&p, 1u << PLAN_AXIS_ETP | 1u << PLAN_AXIS_EP, &stride, &size));
  assert_int_equal(stride, 1);
  assert_int_equal(size, 8);
  /* etp 0 follows tp: ep 8 then spans ranks 2 apart. */
  p.etp = 0;
  assert_int_equal(plan_etp(&p), 2);
  assert_int_equal(plan_edp(&p), 4);
  assert_int_equal(plan_axis_stride(&p, PLAN_AXIS_EP), 2);
  assert_int_equal(plan_axis_stride(&p, PLAN_AXIS_EDP), 16);
}

/* Which pipeline rank runs each chunk, for each schedule family. */
static void test_chunk_ranks(void **state) {
  (void)state;
  plan p;
  plan_defaults(&p);
  p.pp = 4;
  for (int64_t c = 0; c < 4; c++) assert_int_equal(plan_chunk_rank(&p, c), c);
  p.vpp = 2;
  p.schedule = PLAN_SCHED_INTERLEAVED_1F1B;
  static const int64_t interleaved[8] = {0, 1, 2, 3, 0, 1, 2, 3};
  for (int64_t c = 0; c < 8; c++) assert_int_equal(plan_chunk_rank(&p, c), interleaved[c]);
  p.schedule = PLAN_SCHED_ZB_V;
  static const int64_t v_shape[8] = {0, 1, 2, 3, 3, 2, 1, 0};
  for (int64_t c = 0; c < 8; c++) assert_int_equal(plan_chunk_rank(&p, c), v_shape[c]);
}

/* The facts read from the graphs that the constraints use. */
static void test_model_facts(void **state) {
  (void)state;
  static const struct {
    int model;
    int64_t n_layers, heads, kv_heads, n_experts;
    bool has_tp_ops;
  } cases[] = {
      {M_LLAMA70, 80, 64, 8, 0, true},  {M_GPT2, 12, 12, 12, 0, true},     {M_MIXTRAL, 32, 32, 8, 8, true},
      {M_DSV3, 61, 128, 128, 256, true}, {M_MLP3, 3, 0, 0, 0, false},      {M_NOLAYER, 4, 0, 0, 0, false},
  };
  for (size_t i = 0; i < AP_COUNT(cases); i++) {
    plan_model_facts f;
    plan_model_facts_of(graph_of(cases[i].model), &f);
    print_message("# %s: layers %lld heads %lld kv %lld experts %lld\n", graph_of(cases[i].model)->name,
                  (long long)f.n_layers, (long long)f.heads, (long long)f.kv_heads, (long long)f.n_experts);
    assert_int_equal(f.n_layers, cases[i].n_layers);
    assert_int_equal(f.heads, cases[i].heads);
    assert_int_equal(f.kv_heads, cases[i].kv_heads);
    assert_int_equal(f.n_experts, cases[i].n_experts);
    assert_int_equal(f.has_tp_ops, cases[i].has_tp_ops);
  }
}

/* Every name table parses back what it prints. */
static void test_names(void **state) {
  (void)state;
  for (int i = 0; i < PLAN_AXIS_COUNT_; i++) {
    plan_axis a;
    assert_true(plan_axis_from_name(plan_axis_name((plan_axis)i), &a));
    assert_int_equal(a, i);
  }
  for (int i = 0; i < PLAN_SCHED_COUNT_; i++) {
    plan_schedule s;
    assert_true(plan_schedule_from_name(plan_schedule_name((plan_schedule)i), &s));
    assert_int_equal(s, i);
  }
  for (int i = 0; i < PLAN_RECOMPUTE_COUNT_; i++) {
    plan_recompute r;
    assert_true(plan_recompute_from_name(plan_recompute_name((plan_recompute)i), &r));
    assert_int_equal(r, i);
  }
  for (int i = 0; i < PLAN_PREC_COUNT_; i++) {
    plan_precision pr;
    assert_true(plan_precision_from_name(plan_precision_name((plan_precision)i), &pr));
    assert_int_equal(pr, i);
  }
  assert_string_equal(plan_schedule_name(PLAN_SCHED_COUNT_), "?");
  plan_schedule s;
  assert_false(plan_schedule_from_name("1F1B", &s));
}

/* The field table: one row per field, every spelling of a key finds its row, each field set by text reads back
 * through the JSON form, and the enum-name and key-checker helpers behave as documented. */
static void test_field_table(void **state) {
  (void)state;
  size_t n;
  const plan_field *fields = plan_fields(&n);
  assert_int_equal(n, PLAN_F_COUNT_);
  unsigned seen = 0;
  for (size_t i = 0; i < n; i++) {
    assert_false(seen & (1u << fields[i].id));
    seen |= 1u << fields[i].id;
    assert_ptr_equal(plan_field_get(fields[i].id), &fields[i]);
    assert_ptr_equal(plan_field_find(plan_field_name(fields[i].id)), &fields[i]);
    char flag[64];
    plan_field_flag(fields[i].id, flag, sizeof flag);
    assert_ptr_equal(plan_field_find(flag), &fields[i]);
    /* Every alias finds its own row, and no other row claims it. */
    char list[256];
    snprintf(list, sizeof list, "%s", fields[i].aliases);
    char *save = NULL;
    for (char *a = strtok_r(list, "|", &save); a; a = strtok_r(NULL, "|", &save))
      assert_ptr_equal(plan_field_find(a), &fields[i]);
  }
  /* One field, many spellings: canonical, the CLI habit, hyphenated, Megatron-LM's. */
  static const char *const mbs_keys[] = {"micro_batch_size", "mbs", "micro-batch-size"};
  for (size_t i = 0; i < AP_COUNT(mbs_keys); i++)
    assert_int_equal(plan_field_find(mbs_keys[i])->id, PLAN_F_MICRO_BATCH_SIZE);
  assert_int_equal(plan_field_find("zero")->id, PLAN_F_ZERO_STAGE);
  assert_int_equal(plan_field_find("tensor-model-parallel-size")->id, PLAN_F_TP);
  assert_int_equal(plan_field_find("recompute_num_layers")->id, PLAN_F_RECOMPUTE_LAYERS);
  assert_null(plan_field_find("micro_batches_size"));
  /* Set by text, written, read back: the same value (and the JSON form keeps it). */
  static const struct {
    const char *key, *value;
  } sets[] = {{"tp", "4"},           {"pp", "2"},          {"etp", "0"},          {"vpp", "3"},
              {"order", "tp-dp-cp-ep-pp"}, {"schedule", "zb-v"}, {"mbs", "2"},         {"micro-batches", "16"},
              {"stage-layers", "9,0,7"}, {"sp", "true"},    {"recompute", "full"}, {"recompute-layers", "3"},
              {"zero", "0"},         {"precision", "mxfp8"}, {"fused-loss", "1"},  {"tp_comm_overlap", "1"},
              {"gbs", "4k"},         {"seq", "0"}};
  ap_ctx *ctx = ap_ctx_new();
  for (size_t i = 0; i < AP_COUNT(sets); i++) {
    plan p, q;
    plan_defaults(&p);
    const plan_field *f = plan_field_find(sets[i].key);
    assert_non_null(f);
    assert_int_equal(plan_field_parse(ctx, f, sets[i].key, sets[i].value, &p), AP_OK);
    char *s = to_json(&p);
    from_json_text(s, &q);
    if (!plan_field_equal(&p, &q, f) || !plan_equal(&p, &q)) fail_msg("%s=%s: %s", sets[i].key, sets[i].value, s);
    free(s);
  }
  plan p;
  plan_defaults(&p);
  assert_int_equal(plan_field_parse(ctx, plan_field_find("zero"), "zero", "4", &p), AP_INVALID);
  assert_error_contains(ctx, "--zero: expected an integer in [0, 3]");
  assert_int_equal(plan_field_parse(ctx, plan_field_find("order"), "order", "tp,tp,ep,dp,pp", &p), AP_INVALID);
  char buf[64];
  plan_field_format(&p, plan_field_get(PLAN_F_ORDER), buf, sizeof buf);
  assert_string_equal(buf, "tp,cp,ep,dp,pp");
  /* The one key checker: its wording, with a suggestion and the list. */
  json_t *obj = json_pack("{s:i}", "micro_batch_sise", 1);
  const char *allowed[] = {"micro_batch_size", "tp"};
  char shown[64], msg[256];
  assert_true(jx_unknown_key(obj, allowed, 2, 0, shown, sizeof shown, msg, sizeof msg));
  assert_string_equal(shown, "micro_batch_sise");
  assert_string_equal(msg, "unknown field (did you mean micro_batch_size?); fields here: micro_batch_size, tp");
  json_decref(obj);
  ap_ctx_free(ctx);
}

/* The per-op specs: owned by the plan, deep-copied by plan_copy, compared by plan_equal; the JSON reader
 * accepts the reserved empty list and refuses a non-empty one. */
static void test_plan_ops(void **state) {
  (void)state;
  plan a, b;
  plan_defaults(&a);
  plan_op_spec ops[2] = {{.op = 3, .n_output_dims = 2, .output_spec = {PLAN_DIM_S0, PLAN_DIM_R}},
                         {.op = 4, .n_output_dims = 1, .output_spec = {PLAN_DIM_S01}, .partial_axes = 2u}};
  assert_int_equal(plan_set_ops(&a, ops, 2), AP_OK);
  assert_int_equal(plan_copy(&b, &a), AP_OK);
  assert_true(b.ops != a.ops);
  assert_true(plan_equal(&a, &b));
  b.ops[1].partial_axes = 1u;
  assert_false(plan_equal(&a, &b));
  plan_free(&a);
  plan_free(&b);
  plan_free(&b);
  plan_free(NULL);
  assert_null(a.ops);
  assert_int_equal(a.n_ops, 0);
  plan q;
  from_json_text("{\"ops\":[]}", &q);
  ap_ctx *ctx = ap_ctx_new();
  json_t *root = json_loads("{\"ops\":[{\"name\":\"mm\"}]}", 0, NULL);
  assert_int_equal(plan_from_json(ctx, "plan.json", root, &q), AP_INVALID);
  assert_error_contains(ctx, "plan.json: ops: per-op sharding specs are reserved");
  json_decref(root);
  ap_ctx_free(ctx);
  plan_dim_spec d;
  assert_true(plan_dim_spec_from_name("S01", &d));
  assert_int_equal(d, PLAN_DIM_S01);
  assert_string_equal(plan_dim_spec_name(PLAN_DIM_S1), "S1");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_validate_cases),     cmocka_unit_test(test_validate_struct_ranges),
      cmocka_unit_test(test_json_sample_round_trip), cmocka_unit_test(test_json_random_round_trip),
      cmocka_unit_test(test_json_batch_derivation), cmocka_unit_test(test_split_even),
      cmocka_unit_test(test_json_per_chunk_recompute), cmocka_unit_test(test_layer_recomputes),
      cmocka_unit_test(test_axis_strides),       cmocka_unit_test(test_chunk_ranks),
      cmocka_unit_test(test_model_facts),        cmocka_unit_test(test_names),
      cmocka_unit_test(test_field_table),        cmocka_unit_test(test_plan_ops),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
