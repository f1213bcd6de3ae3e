/* Tests of the model layer: parameter counts against exact and published counts, FLOP against the closed form
 * of Narayanan et al. 2021, activation bytes against Korthikanti et al. 2022, and bad-input messages. */
#include <stdlib.h>

#include "testutil.h"

#include "core/core.h"
#include "model/graph.h"
#include "model/model.h"
#include "model/transformer.h"

/* Every config in shared/reference/models/INDEX.csv counts exactly as the checkpoint (within 0.5%, the
 * issue's bound; in practice exactly). */
static void test_reference_configs_param_counts(void **state) {
  (void)state;
  const char *ref = test_reference_dir();
  if (!ref) fail_msg("shared/reference not found beside the repository (../shared/reference)");
  char path[512];
  snprintf(path, sizeof path, "%s/models/INDEX.csv", ref);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char line[4096];
  int n = 0;
  ap_ctx *ctx = ap_ctx_new();
  assert_non_null(fgets(line, sizeof line, f)); /* header */
  while (fgets(line, sizeof line, f)) {
    /* file,model_id,model_type,published_total,published_active,params_total,params_active,source: the first
     * seven fields have no quoted commas. */
    char *fields[8] = {0};
    char *p = line;
    for (int k = 0; k < 7 && p; k++) {
      fields[k] = p;
      p = strchr(p, ',');
      if (p) *p++ = '\0';
    }
    if (!fields[6]) continue;
    long long want_total = atoll(fields[5]), want_active = atoll(fields[6]);
    snprintf(path, sizeof path, "%s/models/%s", ref, fields[0]);
    ap_model *m = NULL;
    ap_status st = ap_model_load(ctx, path, &m);
    if (st) fail_msg("%s: %s", path, ap_ctx_error(ctx));
    print_message("# %s total %lld (want %lld) active %lld (want %lld)\n", fields[0], (long long)ap_model_params_total(m),
                  want_total, (long long)ap_model_params_active(m), want_active);
    assert_rel_close(ap_model_params_total(m), want_total, 0.005);
    assert_rel_close(ap_model_params_active(m), want_active, 0.005);
    ap_model_free(m);
    n++;
  }
  fclose(f);
  ap_ctx_free(ctx);
  assert_true(n >= 13);
}

/* Model types beyond the reference folder, against counts their authors publish. */
static const struct {
  const char *file;
  double published_total;
  const char *source;
} published_cases[] = {
    {"tests/data/hf/gpt-neox-20b.json", 20554567680.0, "Black et al. 2022, GPT-NeoX-20B paper §2: 20,554,567,680"},
    {"tests/data/hf/falcon-7b.json", 6.92e9, "tiiuae/falcon-7b model card: 7B (checkpoint 6.92B)"},
    {"tests/data/hf/gemma-2-9b.json", 9.24e9, "google/gemma-2-9b model card: 9.24B"},
    {"tests/data/hf/phi-3-mini-4k.json", 3.82e9, "microsoft/Phi-3-mini-4k-instruct model card: 3.82B"},
    {"tests/data/hf/qwen2-57b-a14b.json", 57.41e9, "Qwen2 technical report Table 1: 57B total (57.41B checkpoint)"},
    {"tests/data/hf/deepseek-v2-lite.json", 15.7e9, "DeepSeek-V2 paper App. B: DeepSeek-V2-Lite 15.7B total"},
    {"tests/data/hf/deepseek-v2.json", 236e9, "DeepSeek-V2 paper §1: 236B total"},
    {"tests/data/hf/olmo-2-7b.json", 7.30e9, "OLMo 2 release (allenai/OLMo-2-1124-7B): 7.30B"},
    {"tests/data/hf/qwen3-8b.json", 8.2e9, "Qwen3 technical report Table 1: Qwen3-8B 8.2B"},
};

static void test_other_model_types_published(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  for (size_t i = 0; i < AP_COUNT(published_cases); i++) {
    ap_model *m = NULL;
    if (ap_model_load(ctx, published_cases[i].file, &m)) fail_msg("%s: %s", published_cases[i].file, ap_ctx_error(ctx));
    print_message("# %s: %lld vs %.4g (%s)\n", published_cases[i].file, (long long)ap_model_params_total(m),
                  published_cases[i].published_total, published_cases[i].source);
    assert_rel_close(ap_model_params_total(m), published_cases[i].published_total, 0.005);
    ap_model_free(m);
  }
  ap_ctx_free(ctx);
}

/* Every shipped preset loads and matches the published totals recorded (with their source) in its file. */
static void test_presets_match_published(void **state) {
  (void)state;
  size_t n_files;
  const embedded_file *files = embedded_files(&n_files);
  ap_ctx *ctx = ap_ctx_new();
  int n = 0;
  for (size_t i = 0; i < n_files; i++) {
    const char *p = files[i].path;
    if (strncmp(p, "data/models/", 12) != 0 || strchr(p + 12, '/')) continue; /* examples have no published count */
    char name[128];
    snprintf(name, sizeof name, "%s", util_basename(p));
    name[strlen(name) - 5] = '\0';
    ap_model *m = NULL;
    if (ap_model_load(ctx, name, &m)) fail_msg("%s: %s", name, ap_ctx_error(ctx));
    if (m->published_params_total <= 0) fail_msg("preset %s has no published_params_total", name);
    assert_rel_close(ap_model_params_total(m), m->published_params_total, 0.005);
    if (m->published_params_active > 0) {
      /* Some authors (OpenAI's gpt-oss card) count active parameters without the input embedding table; the
       * preset says so and the comparison follows it. */
      double active = (double)ap_model_params_active(m);
      if (strstr(files[i].text, "\"published_active_excludes_embedding\": true"))
        active -= (double)(m->g.vocab_size * m->g.hidden_size);
      assert_rel_close(active, m->published_params_active, 0.005);
    }
    ap_model_free(m);
    n++;
  }
  ap_ctx_free(ctx);
  assert_true(n >= 15);
}

/* A GPT-3-style config (LayerNorm, GeLU MLP with f = 4h, learned positions, MHA, tied embeddings). */
static void gpt_config(tf_config *c, int64_t l, int64_t h, int64_t a, int64_t v, int64_t max_pos) {
  tf_config_defaults(c);
  c->name = "gpt";
  c->model_type = "gpt2";
  c->n_layers = l;
  c->hidden = h;
  c->ffn = 4 * h;
  c->heads = c->kv_heads = a;
  c->head_dim = c->head_dim_v = h / a;
  c->vocab = v;
  c->max_pos = max_pos;
  c->norm = NORM_LAYERNORM;
  c->norm_bias = true;
  c->mlp = MLP_PLAIN;
  c->learned_pos = true;
  c->tied = true;
  c->qkv_bias = c->o_bias = c->mlp_bias = true;
}

/* Narayanan et al. 2021 §5.1: F = 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)) training FLOP per iteration, counting
 * GEMMs only, forward + two backward GEMMs, no causal discount. The graph must equal it to 1e-9. */
static void test_narayanan_flop_closed_form(void **state) {
  (void)state;
  static const struct {
    int64_t l, h, a, v, s, batch;
  } cases[] = {
      {96, 12288, 96, 51200, 2048, 1536}, /* GPT-3 175B as in Narayanan Table 1 */
      {24, 2048, 16, 51200, 2048, 512},   /* 1.7B */
      {128, 25600, 160, 51200, 2048, 3072}, /* 1T */
      {12, 768, 12, 50257, 1024, 8},      /* GPT-2 small */
      {40, 5120, 40, 51200, 8192, 64},    /* long sequence: the s/(6h) term matters */
  };
  ap_ctx *ctx = ap_ctx_new();
  for (size_t i = 0; i < AP_COUNT(cases); i++) {
    tf_config c;
    gpt_config(&c, cases[i].l, cases[i].h, cases[i].a, cases[i].v, cases[i].s);
    ap_model *m = NULL;
    if (model_from_tf_config(ctx, &c, &m)) fail_msg("%s", ap_ctx_error(ctx));
    double B = (double)cases[i].batch, s = (double)cases[i].s, l = (double)cases[i].l, h = (double)cases[i].h,
           V = (double)cases[i].v;
    double want = 72.0 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
    double got = B * graph_train_flop_per_seq(model_graph(m), s, true);
    assert_rel_close(got, want, 1e-9);
    ap_model_free(m);
  }
  ap_ctx_free(ctx);
}

/* Korthikanti et al. 2022 Table 2 (no parallelism): s·b·h·(34 + 5·a·s/h) bytes per layer with 16-bit
 * activations, 1-byte dropout masks, GeLU MLP f = 4h and no flash attention. The graph's saved-tensor set of
 * one layer block must reproduce it (within 1%; exactly, since every term is modelled). */
static void test_korthikanti_activation_bytes(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  static const int64_t shapes[][4] = {{96, 12288, 96, 2048}, {24, 2048, 16, 2048}, {105, 20480, 128, 2048}};
  for (size_t i = 0; i < AP_COUNT(shapes); i++) {
    tf_config c;
    gpt_config(&c, shapes[i][0], shapes[i][1], shapes[i][2], 51200, shapes[i][3]);
    c.flash_attention = false;
    c.dropout = true;
    ap_model *m = NULL;
    if (model_from_tf_config(ctx, &c, &m)) fail_msg("%s", ap_ctx_error(ctx));
    const graph *g = model_graph(m);
    const graph_block *layer = NULL;
    for (int k = 0; k < g->n_blocks; k++)
      if (g->blocks[k].role == BLOCK_LAYER) layer = &g->blocks[k];
    assert_non_null(layer);
    double b = 4, s = (double)shapes[i][3], h = (double)shapes[i][1], a = (double)shapes[i][2];
    double want = s * b * h * (34 + 5 * a * s / h);
    assert_rel_close(graph_block_saved_bytes(layer, b, s), want, 1e-9);
    ap_model_free(m);
  }
  ap_ctx_free(ctx);
}

/* Aliases map to the same model: GPT-2 field names and the generic ones. */
static void test_aliases(void **state) {
  (void)state;
  const char *a = "{\"model_type\":\"gpt2\",\"n_embd\":768,\"n_layer\":12,\"n_head\":12,\"n_positions\":1024,\"vocab_size\":50257}";
  const char *b = "{\"model_type\":\"gpt2\",\"hidden_size\":768,\"num_hidden_layers\":12,\"num_attention_heads\":12,"
                  "\"max_position_embeddings\":1024,\"vocab_size\":50257}";
  const char *mx = "{\"model_type\":\"mixtral\",\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
                   "\"num_key_value_heads\":2,\"intermediate_size\":128,\"num_experts\":4,\"num_experts_per_tok\":2,\"vocab_size\":100}";
  const char *mx2 = "{\"model_type\":\"mixtral\",\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
                    "\"num_key_value_heads\":2,\"intermediate_size\":128,\"num_local_experts\":4,\"num_experts_per_tok\":2,\"vocab_size\":100}";
  ap_ctx *ctx = ap_ctx_new();
  ap_model *m1 = NULL, *m2 = NULL, *m3 = NULL, *m4 = NULL;
  assert_int_equal(model_parse(ctx, "a.json", a, strlen(a), &m1), AP_OK);
  assert_int_equal(model_parse(ctx, "b.json", b, strlen(b), &m2), AP_OK);
  assert_int_equal(model_parse(ctx, "c.json", mx, strlen(mx), &m3), AP_OK);
  assert_int_equal(model_parse(ctx, "d.json", mx2, strlen(mx2), &m4), AP_OK);
  assert_int_equal(ap_model_params_total(m1), 124439808);
  assert_int_equal(ap_model_params_total(m1), ap_model_params_total(m2));
  assert_int_equal(ap_model_params_total(m3), ap_model_params_total(m4));
  assert_true(ap_model_params_active(m3) < ap_model_params_total(m3));
  ap_model_free(m1);
  ap_model_free(m2);
  ap_model_free(m3);
  ap_model_free(m4);
  ap_ctx_free(ctx);
}

/* Bad input: status and a message naming the file, the field and what was expected. */
static const struct {
  const char *json;
  ap_status status;
  const char *needle;
} bad_cases[] = {
    {"{\"model_type\": \"llama\",", AP_PARSE, "bad.json:1:"},
    {"{\"model_type\":\"llama\",\"hidden_size\":0,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":10}",
     AP_INVALID, "bad.json: hidden_size: expected an integer >= 1, got 0"},
    {"{\"model_type\":\"llama\",\"hidden_size\":-64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":10}",
     AP_INVALID, "hidden_size: expected an integer >= 1, got -64"},
    {"{\"model_type\":\"llama\",\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":3,\"vocab_size\":10}",
     AP_INVALID, "num_key_value_heads: must divide num_attention_heads (4), got 3"},
    {"{\"model_type\":\"lama\",\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":10}",
     AP_UNSUPPORTED, "did you mean llama"},
    {"{\"model_type\":\"llama\",\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":10}", AP_INVALID,
     "bad.json: hidden_size: required field missing"},
    {"{\"model_type\":\"llama\",\"hidden_size\":\"64\",\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":10}",
     AP_INVALID, "hidden_size: expected an integer, got a string"},
    {"{\"model_type\":\"llama\",\"hidden_size\":64.5,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":10}",
     AP_INVALID, "hidden_size: expected an integer, got a fraction"},
    {"[1,2]", AP_INVALID, "expected a JSON object"},
    {"{\"hidden_size\":64}", AP_INVALID, "model_type: required field missing"},
    {"{\"model_type\":\"mixtral\",\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"intermediate_size\":128,"
     "\"num_local_experts\":4,\"num_experts_per_tok\":5,\"vocab_size\":100}",
     AP_INVALID, "num_experts_per_tok"},
    {"{\"model_type\":\"llama\",\"hidden_size\":64,\"num_hidden_layers\":100000,\"num_attention_heads\":4,\"vocab_size\":10}",
     AP_INVALID, "num_hidden_layers: expected at most"},
    /* Range checks come before the defaults computed from read values (ffn = 4·hidden overflowed, and the message
     * then named intermediate_size with a wrapped product). */
    {"{\"model_type\":\"llama\",\"hidden_size\":9223372036854775807,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":10}",
     AP_INVALID, "bad.json: hidden_size: expected at most 16777216, got 9223372036854775807"},
    {"{\"model_type\":\"falcon\",\"hidden_size\":4611686018427387904,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":10}",
     AP_INVALID, "bad.json: hidden_size: expected at most 16777216"},
    {"{\"model_type\":\"deepseek_v3\",\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":10,"
     "\"kv_lora_rank\":8,\"qk_nope_head_dim\":9223372036854775807,\"qk_rope_head_dim\":9223372036854775807,\"v_head_dim\":8,"
     "\"n_routed_experts\":4,\"num_experts_per_tok\":2,\"moe_intermediate_size\":16}",
     AP_INVALID, "qk_nope_head_dim: expected at most 16777216"},
    {"{\"model_type\":\"llama\",\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":10,\"tie_word_embeddings\":1}",
     AP_INVALID, "tie_word_embeddings: expected true or false"},
    {"{\"model_type\":\"llama\",\"hidden_size\":64,\"hidden_size\":65,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":10}",
     AP_PARSE, "duplicate"},
};

static void test_bad_configs(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  for (size_t i = 0; i < AP_COUNT(bad_cases); i++) {
    ap_model *m = NULL;
    ap_status st = model_parse(ctx, "bad.json", bad_cases[i].json, strlen(bad_cases[i].json), &m);
    if (st != bad_cases[i].status)
      fail_msg("case %zu: status %s, want %s (%s)", i, ap_status_str(st), ap_status_str(bad_cases[i].status),
               ap_ctx_error(ctx));
    assert_null(m);
    assert_error_contains(ctx, bad_cases[i].needle);
    assert_null(strchr(ap_ctx_error(ctx), '\n'));
  }
  ap_ctx_free(ctx);
}

static void test_unknown_preset_suggests(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  ap_model *m = NULL;
  assert_int_equal(ap_model_load(ctx, "llama-3-7b", &m), AP_NOTFOUND);
  assert_error_contains(ctx, "did you mean");
  assert_error_contains(ctx, "llama-3-70b");
  assert_int_equal(ap_model_load(ctx, "/nonexistent/config.json", &m), AP_IO);
  assert_error_contains(ctx, "/nonexistent/config.json: cannot open");
  ap_ctx_free(ctx);
}

/* MoE layering: DeepSeek-V3 has 3 dense then 58 MoE layers; Qwen3-MoE is MoE throughout. */
static void test_moe_layout(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  ap_model *m = NULL;
  assert_int_equal(ap_model_load(ctx, "deepseek-v3", &m), AP_OK);
  const graph *g = model_graph(m);
  int64_t dense = 0, moe = 0;
  for (int i = 0; i < g->n_blocks; i++)
    if (g->blocks[i].role == BLOCK_LAYER) *(g->blocks[i].is_moe ? &moe : &dense) += g->blocks[i].repeat;
  assert_int_equal(dense, 3);
  assert_int_equal(moe, 58);
  ap_model_free(m);
  ap_ctx_free(ctx);
}

/* The describe JSON carries the integer keys the issue names. */
static void test_describe_json_keys(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  ap_model *m = NULL;
  assert_int_equal(ap_model_load(ctx, "mixtral-8x7b", &m), AP_OK);
  char *js = NULL;
  assert_int_equal(ap_model_describe_json(ctx, m, 4096, &js), AP_OK);
  assert_non_null(strstr(js, "\"params_total\":46702792704"));
  assert_non_null(strstr(js, "\"params_active\":12879925248"));
  assert_non_null(strstr(js, "\"seq\":4096"));
  ap_free(js);
  ap_model_free(m);
  ap_ctx_free(ctx);
}

/* The edges of a graph, recounted independently of graph_edges.c: every (op, input) pair whose tensor another
 * op of the block produces has one edge from that producer; a pair reading the block's input that no op of
 * the block produces has one edge from the previous block's output producer, and one more (carried) from the
 * block's own output producer when the block repeats. Each edge names the tensors its ops really write and
 * read. Returns the number of carried edges. */
static int check_edges(const graph *g) {
  int want = 0, carried = 0;
  for (int bi = 0; bi < g->n_blocks; bi++) {
    const graph_block *blk = &g->blocks[bi];
    for (int oi = 0; oi < blk->n_ops; oi++)
      for (int k = 0; k < blk->ops[oi].n_in; k++) {
        int t = blk->ops[oi].in[k], producer = -1;
        for (int p = 0; p < blk->n_ops; p++)
          for (int q = 0; q < blk->ops[p].n_out; q++)
            if (blk->ops[p].outs[q] == t) producer = p;
        if (producer >= 0 && producer != oi) want++;
        if (producer < 0 && t == blk->input) want += (bi > 0) + (blk->repeat > 1);
      }
  }
  assert_int_equal(g->n_edges, want);
  for (int i = 0; i < g->n_edges; i++) {
    const graph_edge *e = &g->edges[i];
    const graph_op *from = &g->blocks[e->from_block].ops[e->from_op], *to = &g->blocks[e->to_block].ops[e->to_op];
    assert_int_equal(from->outs[e->from_out], e->from_tensor);
    assert_int_equal(to->in[e->to_in], e->to_tensor);
    if (e->from_block == e->to_block && !e->carried) assert_int_equal(e->from_tensor, e->to_tensor);
    if (e->carried) {
      carried++;
      assert_int_equal(e->from_block, e->to_block);
      assert_true(g->blocks[e->to_block].repeat > 1);
    } else if (e->from_block != e->to_block) {
      assert_int_equal(e->from_block + 1, e->to_block);
      assert_int_equal(e->from_tensor, g->blocks[e->from_block].output);
      assert_int_equal(e->to_tensor, g->blocks[e->to_block].input);
    }
  }
  return carried;
}

/* The transformer builder fills the graph's edges: within each block and from block to block, with the
 * repeated layer handing its output to its next repeat (carried). */
static void test_transformer_edges(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  const char *names[] = {"llama-3-8b", "deepseek-v3", "gpt-oss-120b"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    ap_model *m = NULL;
    if (ap_model_load(ctx, names[i], &m)) fail_msg("%s", ap_ctx_error(ctx));
    const graph *g = model_graph(m);
    int carried = check_edges(g);
    /* llama and deepseek repeat their layer blocks; gpt-oss alternates window sizes, one layer per block */
    if (i < 2) assert_true(carried > 0);
    else assert_int_equal(carried, 0);
    /* every op of the builder has exactly one output */
    for (int b = 0; b < g->n_blocks; b++)
      for (int o = 0; o < g->blocks[b].n_ops; o++) {
        assert_int_equal(g->blocks[b].ops[o].n_out, 1);
        assert_int_equal(g->blocks[b].ops[o].outs[0], g->blocks[b].ops[o].out);
      }
    ap_model_free(m);
  }
  ap_ctx_free(ctx);
}

/* Without the "onnx" part in the context (a core-only build, or a host that did not add it), an .onnx model
 * fails with AP_UNSUPPORTED naming the part. */
static void test_onnx_needs_part(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  ap_model *m = NULL;
  static const char bytes[] = "\x08\x07";
  assert_int_equal(model_parse_onnx(ctx, "net.onnx", bytes, 2, &m), AP_UNSUPPORTED);
  assert_null(m);
  assert_error_contains(ctx, "net.onnx: ONNX import is not built into this autopar (the optional part \"onnx\"");
  ap_ctx_free(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reference_configs_param_counts),
      cmocka_unit_test(test_other_model_types_published),
      cmocka_unit_test(test_presets_match_published),
      cmocka_unit_test(test_narayanan_flop_closed_form),
      cmocka_unit_test(test_korthikanti_activation_bytes),
      cmocka_unit_test(test_aliases),
      cmocka_unit_test(test_bad_configs),
      cmocka_unit_test(test_unknown_preset_suggests),
      cmocka_unit_test(test_moe_layout),
      cmocka_unit_test(test_describe_json_keys),
      cmocka_unit_test(test_transformer_edges),
      cmocka_unit_test(test_onnx_needs_part),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
