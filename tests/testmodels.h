/* Small models built in code for the search tests (internals: include after testutil.h). */
#ifndef AP_TESTMODELS_H
#define AP_TESTMODELS_H

#include "model/model.h"
#include "model/transformer.h"

/* A small Llama-style decoder: L layers of width h with `heads` heads and vocabulary `vocab`; when windowed,
 * every third layer has sliding-window attention (a second, cheaper block). Fails the test on error. */
/* The shape both builders below share: L layers of width h, FFN 4h, `heads` heads (as many KV heads). */
static inline void test_shape(tf_config *c, const char *name, const char *type, int64_t L, int64_t h, int64_t heads,
                              int64_t vocab, int64_t max_pos) {
  tf_config_defaults(c);
  c->name = name;
  c->model_type = type;
  c->n_layers = L;
  c->hidden = h;
  c->ffn = 4 * h;
  c->heads = c->kv_heads = heads;
  c->head_dim = c->head_dim_v = h / heads;
  c->vocab = vocab;
  c->max_pos = max_pos;
}

static inline ap_model *test_small_model(ap_ctx *ctx, int64_t L, int64_t h, int64_t heads, int64_t vocab,
                                         bool windowed) {
  tf_config c;
  test_shape(&c, "small", "llama", L, h, heads, vocab, 8192);
  c.rope = true;
  for (int64_t i = 0; windowed && i < L; i += 3) c.window_of_layer[i] = 512;
  ap_model *m = NULL;
  if (model_from_tf_config(ctx, &c, &m)) fail_msg("%s", ap_ctx_error(ctx));
  return m;
}

/* A GPT: LayerNorm with biases, learned positions, tied embeddings, GeLU MLP f = 4h, as validate builds one from
 * runs.csv's columns (report/validate_model.c). korthikanti: as Korthikanti et al. 2022 assume it, 1-byte
 * dropout masks and no flash attention; else flash attention and no dropout (what an HF config gives). */
static inline ap_model *test_gpt_model(ap_ctx *ctx, int64_t L, int64_t h, int64_t heads, int64_t vocab,
                                       bool korthikanti) {
  tf_config c;
  test_shape(&c, "gpt", "gpt2", L, h, heads, vocab, 2048);
  c.norm = NORM_LAYERNORM;
  c.norm_bias = true;
  c.mlp = MLP_PLAIN;
  c.learned_pos = true;
  c.tied = true;
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  c.flash_attention = !korthikanti;
  c.dropout = korthikanti;
  ap_model *m = NULL;
  if (model_from_tf_config(ctx, &c, &m)) fail_msg("%s", ap_ctx_error(ctx));
  return m;
}

#endif
