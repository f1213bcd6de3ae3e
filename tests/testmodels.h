/* Small models built in code for the search tests (internals: include after testutil.h). */
#ifndef AP_TESTMODELS_H
#define AP_TESTMODELS_H

#include "model/model.h"
#include "model/transformer.h"

/* A small Llama-style decoder: L layers of width h with `heads` heads and vocabulary `vocab`; when windowed,
 * every third layer has sliding-window attention (a second, cheaper block). Fails the test on error. */
static inline ap_model *test_small_model(ap_ctx *ctx, int64_t L, int64_t h, int64_t heads, int64_t vocab,
                                         bool windowed) {
  tf_config c;
  tf_config_defaults(&c);
  c.name = "small";
  c.model_type = "llama";
  c.n_layers = L;
  c.hidden = h;
  c.ffn = 4 * h;
  c.heads = c.kv_heads = heads;
  c.head_dim = c.head_dim_v = h / heads;
  c.vocab = vocab;
  c.max_pos = 8192;
  c.rope = true;
  for (int64_t i = 0; windowed && i < L; i += 3) c.window_of_layer[i] = 512;
  ap_model *m = NULL;
  if (model_from_tf_config(ctx, &c, &m)) fail_msg("%s", ap_ctx_error(ctx));
  return m;
}

#endif
