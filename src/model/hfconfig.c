/* The Hugging Face config.json reader (model layer): maps a config's fields, under their canonical names and
 * their aliases (transformers' attribute_map: n_embd/hidden_size, num_local_experts/num_experts/
 * n_routed_experts …), onto a tf_config. Each supported model_type is one row of the family table below;
 * what differs between families (norm, MLP, biases, MoE layout, attention variant) is data, not code paths.
 * Field names follow the transformers configuration classes (COSTMODEL.md §6.1). */
#include <stdio.h>
#include <string.h>

#include "core/jsonx.h"
#include "model/hfconfig.h"
#include "model/transformer.h"

typedef enum { MOE_NONE, MOE_MIXTRAL, MOE_QWEN, MOE_DEEPSEEK, MOE_GPT_OSS } moe_family;

/* One row per model_type: the architecture facts that its config.json does not spell out. */
typedef struct {
  const char *model_type;
  tf_norm norm;
  bool norm_bias;
  tf_mlp mlp;
  tf_block_style style;
  bool learned_pos, rope, tied_default, qkv_bias, o_bias, mlp_bias;
  bool qk_norm_per_head, qk_norm_full, pre_norms, post_norms, attn_sinks, embed_norm, mla;
  moe_family moe;
} family;

/* clang-format off */
static const family families[] = {
  /* type         norm            nbias mlp         style             lpos  rope  tied  qkvb  ob    mlpb  qkh   qkf   pre   post  sink  enorm mla    moe */
  {"llama",       NORM_RMSNORM,   false, MLP_GATED, BLOCK_SEQUENTIAL, false, true, false, false, false, false, false, false, true, false, false, false, false, MOE_NONE},
  {"mistral",     NORM_RMSNORM,   false, MLP_GATED, BLOCK_SEQUENTIAL, false, true, false, false, false, false, false, false, true, false, false, false, false, MOE_NONE},
  {"mixtral",     NORM_RMSNORM,   false, MLP_GATED, BLOCK_SEQUENTIAL, false, true, false, false, false, false, false, false, true, false, false, false, false, MOE_MIXTRAL},
  {"qwen2",       NORM_RMSNORM,   false, MLP_GATED, BLOCK_SEQUENTIAL, false, true, false, true,  false, false, false, false, true, false, false, false, false, MOE_NONE},
  {"qwen2_moe",   NORM_RMSNORM,   false, MLP_GATED, BLOCK_SEQUENTIAL, false, true, false, true,  false, false, false, false, true, false, false, false, false, MOE_QWEN},
  {"qwen3",       NORM_RMSNORM,   false, MLP_GATED, BLOCK_SEQUENTIAL, false, true, false, false, false, false, true,  false, true, false, false, false, false, MOE_NONE},
  {"qwen3_moe",   NORM_RMSNORM,   false, MLP_GATED, BLOCK_SEQUENTIAL, false, true, false, false, false, false, true,  false, true, false, false, false, false, MOE_QWEN},
  {"deepseek_v2", NORM_RMSNORM,   false, MLP_GATED, BLOCK_SEQUENTIAL, false, true, false, false, false, false, false, false, true, false, false, false, true,  MOE_DEEPSEEK},
  {"deepseek_v3", NORM_RMSNORM,   false, MLP_GATED, BLOCK_SEQUENTIAL, false, true, false, false, false, false, false, false, true, false, false, false, true,  MOE_DEEPSEEK},
  {"gpt2",        NORM_LAYERNORM, true,  MLP_PLAIN, BLOCK_SEQUENTIAL, true,  false, true, true,  true,  true,  false, false, true, false, false, false, false, MOE_NONE},
  {"gpt_neox",    NORM_LAYERNORM, true,  MLP_PLAIN, BLOCK_PARALLEL,   false, true, false, true,  true,  true,  false, false, true, false, false, false, false, MOE_NONE},
  {"falcon",      NORM_LAYERNORM, true,  MLP_PLAIN, BLOCK_PARALLEL,   false, true, true,  false, false, false, false, false, true, false, false, false, false, MOE_NONE},
  {"phi3",        NORM_RMSNORM,   false, MLP_GATED, BLOCK_SEQUENTIAL, false, true, false, false, false, false, false, false, true, false, false, false, false, MOE_NONE},
  {"gemma",       NORM_RMSNORM,   false, MLP_GATED, BLOCK_SEQUENTIAL, false, true, true,  false, false, false, false, false, true, false, false, false, false, MOE_NONE},
  {"gemma2",      NORM_RMSNORM,   false, MLP_GATED, BLOCK_SEQUENTIAL, false, true, true,  false, false, false, false, false, true, true,  false, false, false, MOE_NONE},
  {"olmo2",       NORM_RMSNORM,   false, MLP_GATED, BLOCK_SEQUENTIAL, false, true, false, false, false, false, false, true,  false, true, false, false, false, MOE_NONE},
  {"gpt_oss",     NORM_RMSNORM,   false, MLP_GATED, BLOCK_SEQUENTIAL, false, true, false, true,  true,  false, false, false, true, false, true,  false, false, MOE_GPT_OSS},
  {"starcoder2",  NORM_LAYERNORM, true,  MLP_PLAIN, BLOCK_SEQUENTIAL, false, true, true,  true,  true,  true,  false, false, true, false, false, false, false, MOE_NONE},
  {"bloom",       NORM_LAYERNORM, true,  MLP_PLAIN, BLOCK_SEQUENTIAL, false, false, true, true,  true,  true,  false, false, true, false, false, true,  false, MOE_NONE},
};
/* clang-format on */

static const family *family_find(const char *type) {
  for (size_t i = 0; i < AP_COUNT(families); i++)
    if (strcmp(families[i].model_type, type) == 0) return &families[i];
  return NULL;
}

size_t hf_model_types(const char **out, size_t cap) {
  size_t n = 0;
  for (; n < AP_COUNT(families) && n < cap; n++) out[n] = families[n].model_type;
  return n;
}

/* The architecture facts only the exporters read (graph.h graph_arch), under transformers' field names:
 * rope_theta, rope_scaling {rope_type|type, factor, low/high_freq_factor, beta_fast/slow, mscale,
 * mscale_all_dim, original_max_position_embeddings}, rms_norm_eps|layer_norm_eps|layer_norm_epsilon,
 * attention_dropout|attn_pdrop, hidden_dropout|resid_pdrop, hidden_act, num_nextn_predict_layers,
 * scoring_func, norm_topk_prob, routed_scaling_factor, n_group, topk_group, router_aux_loss_coef. */
static ap_status read_arch(jx_src *src, json_t *root, const char *model_type, const char *act, graph_arch *a) {
  ap_status st;
  a->stated = true;
  a->router_aux_loss_coef = -1;
  /* Mixtral and GPT-OSS always renormalise the top-k weights (transformers modeling_mixtral.py
   * MixtralSparseMoeBlock: routing_weights /= routing_weights.sum; GPT-OSS softmaxes the top-k logits);
   * their configs have no norm_topk_prob. */
  a->norm_topk_prob = strcmp(model_type, "mixtral") == 0 || strcmp(model_type, "gpt_oss") == 0;
  if ((st = jx_f64(src, root, "rope_theta|rotary_emb_base", false, 0, 1e12, &a->rope_theta, NULL))) return st;
  if ((st = jx_f64(src, root, "rms_norm_eps|layer_norm_eps|layer_norm_epsilon|norm_epsilon", false, 0, 1, &a->norm_eps, NULL)))
    return st;
  if ((st = jx_f64(src, root, "attention_dropout|attn_pdrop", false, 0, 1, &a->attention_dropout, NULL))) return st;
  if ((st = jx_f64(src, root, "hidden_dropout|resid_pdrop", false, 0, 1, &a->hidden_dropout, NULL))) return st;
  if ((st = jx_i64(src, root, "num_nextn_predict_layers", false, 0, 64, &a->mtp_layers, NULL))) return st;
  if ((st = jx_bool(src, root, "norm_topk_prob", false, &a->norm_topk_prob, NULL))) return st;
  if ((st = jx_f64(src, root, "routed_scaling_factor", false, 0, 1e6, &a->routed_scaling_factor, NULL))) return st;
  if ((st = jx_i64(src, root, "n_group", false, 0, 1 << 20, &a->n_group, NULL))) return st;
  if ((st = jx_i64(src, root, "topk_group", false, 0, 1 << 20, &a->topk_group, NULL))) return st;
  if ((st = jx_f64(src, root, "router_aux_loss_coef|aux_loss_alpha", false, 0, 1e6, &a->router_aux_loss_coef, NULL)))
    return st;
  const char *score = NULL;
  if ((st = jx_str(src, root, "scoring_func", false, &score, NULL))) return st;
  a->router = score && strcmp(score, "sigmoid") == 0 ? ARCH_ROUTER_SIGMOID : ARCH_ROUTER_SOFTMAX;
  static const struct {
    const char *name;
    arch_act act;
  } acts[] = {{"silu", ARCH_ACT_SILU},         {"swish", ARCH_ACT_SILU},     {"gelu", ARCH_ACT_GELU},
              {"gelu_new", ARCH_ACT_GELU_TANH}, {"gelu_pytorch_tanh", ARCH_ACT_GELU_TANH},
              {"gelu_fast", ARCH_ACT_GELU_TANH}, {"relu", ARCH_ACT_RELU}};
  a->act = act ? ARCH_ACT_OTHER : ARCH_ACT_UNKNOWN;
  for (size_t i = 0; act && i < AP_COUNT(acts); i++)
    if (strcmp(acts[i].name, act) == 0) a->act = acts[i].act;
  json_t *rs = json_object_get(root, "rope_scaling");
  if (json_is_object(rs)) {
    jx_src rsrc = {src->ctx, src->file, "rope_scaling"};
    const char *type = NULL;
    if ((st = jx_str(&rsrc, rs, "rope_type|type", false, &type, NULL))) return st;
    a->rope_scaling = !type                         ? ARCH_ROPE_OTHER
                      : strcmp(type, "llama3") == 0 ? ARCH_ROPE_LLAMA3
                      : strcmp(type, "yarn") == 0   ? ARCH_ROPE_YARN
                      : strcmp(type, "linear") == 0 ? ARCH_ROPE_LINEAR
                      : strcmp(type, "default") == 0 ? ARCH_ROPE_NONE
                                                      : ARCH_ROPE_OTHER;
    if ((st = jx_f64(&rsrc, rs, "factor", false, 0, 1e6, &a->rope_factor, NULL))) return st;
    if ((st = jx_f64(&rsrc, rs, "low_freq_factor", false, 0, 1e6, &a->rope_low_freq_factor, NULL))) return st;
    if ((st = jx_f64(&rsrc, rs, "high_freq_factor", false, 0, 1e6, &a->rope_high_freq_factor, NULL))) return st;
    if ((st = jx_f64(&rsrc, rs, "beta_fast", false, 0, 1e6, &a->rope_beta_fast, NULL))) return st;
    if ((st = jx_f64(&rsrc, rs, "beta_slow", false, 0, 1e6, &a->rope_beta_slow, NULL))) return st;
    if ((st = jx_f64(&rsrc, rs, "mscale", false, 0, 1e6, &a->rope_mscale, NULL))) return st;
    if ((st = jx_f64(&rsrc, rs, "mscale_all_dim", false, 0, 1e6, &a->rope_mscale_all_dim, NULL))) return st;
    if ((st = jx_i64(&rsrc, rs, "original_max_position_embeddings", false, 1, INT64_MAX, &a->rope_original_max_pos, NULL)))
      return st;
  }
  return AP_OK;
}

/* Reads an optional boolean field into *out when present. */
#define OPT_BOOL(keys, out) \
  do { if ((st = jx_bool(&src, root, keys, false, out, NULL))) return st; } while (0)
/* Every size is range-checked as it is read (at most HF_SIZE_MAX, tf_config_check's bound), so that the
 * defaults and sums computed from read values below (ffn = 4·hidden, head_dim = nope + rope …) cannot
 * overflow and no message shows an overflowed product. */
#define HF_SIZE_MAX ((int64_t)1 << 24)
static ap_status hf_size(const jx_src *s, json_t *root, const char *keys, bool required, int64_t min, int64_t *out) {
  int64_t v = 0;
  bool found = false;
  ap_status st = jx_i64(s, root, keys, required, min, INT64_MAX, &v, &found);
  if (st || !found) return st;
  if (v > HF_SIZE_MAX) return jx_fail(s, keys, "expected at most %lld, got %lld", (long long)HF_SIZE_MAX, (long long)v);
  *out = v;
  return AP_OK;
}
#define OPT_I64(keys, min, out) \
  do { if ((st = hf_size(&src, root, keys, false, min, out))) return st; } while (0)
#define REQ_I64(keys, out) \
  do { if ((st = hf_size(&src, root, keys, true, 1, out))) return st; } while (0)

ap_status hf_config_read(ap_ctx *ctx, const char *file, json_t *root, tf_config *c) {
  jx_src src = {ctx, file, ""};
  ap_status st;
  if (!json_is_object(root)) return ctx_fail(ctx, AP_INVALID, "%s: expected a JSON object at the top level", file);
  tf_config_defaults(c);
  const char *type = NULL;
  if ((st = jx_str(&src, root, "model_type", true, &type, NULL))) return st;
  const family *fam = family_find(type);
  if (!fam) {
    const char *names[AP_COUNT(families)];
    size_t n = hf_model_types(names, AP_COUNT(names));
    char sugg[256];
    util_suggest(type, names, n, sugg, sizeof sugg);
    char list[512] = "";
    for (size_t i = 0; i < n; i++) snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
    return ctx_fail(ctx, AP_UNSUPPORTED, "%s: model_type: unknown model type \"%s\"%s%s (supported: %s)", file, type,
                    *sugg ? "; did you mean " : "", sugg, list);
  }
  c->model_type = type;
  c->norm = fam->norm;
  c->norm_bias = fam->norm_bias;
  c->mlp = fam->mlp;
  c->style = fam->style;
  c->learned_pos = fam->learned_pos;
  c->rope = fam->rope;
  c->tied = fam->tied_default;
  c->qkv_bias = fam->qkv_bias;
  c->o_bias = fam->o_bias;
  c->mlp_bias = fam->mlp_bias;
  c->qk_norm_per_head = fam->qk_norm_per_head;
  c->qk_norm_full = fam->qk_norm_full;
  c->pre_norms = fam->pre_norms;
  c->post_norms = fam->post_norms;
  c->attn_sinks = fam->attn_sinks;
  c->embed_norm = fam->embed_norm;
  c->mla = fam->mla;
  c->n_parallel_norms = 2;

  if ((st = jx_i64(&src, root, "num_hidden_layers|n_layer|num_layers|n_layers", true, 1, INT64_MAX, &c->n_layers, NULL)))
    return st;
  REQ_I64("hidden_size|n_embd|d_model", &c->hidden);
  REQ_I64("num_attention_heads|n_head|num_heads|n_heads", &c->heads);
  REQ_I64("vocab_size|padded_vocab_size|n_vocab", &c->vocab);
  if (c->n_layers > TF_MAX_LAYERS)
    return ctx_fail(ctx, AP_INVALID, "%s: num_hidden_layers: expected at most %d, got %lld", file, TF_MAX_LAYERS,
                    (long long)c->n_layers);
  c->kv_heads = c->heads;
  OPT_I64("num_key_value_heads|num_kv_heads|n_head_kv|num_query_groups|n_kv_heads", 1, &c->kv_heads);
  c->ffn = 4 * c->hidden;
  OPT_I64("intermediate_size|n_inner|ffn_hidden_size|ffn_dim", 1, &c->ffn);
  c->max_pos = 0;
  OPT_I64("max_position_embeddings|n_positions|n_ctx|max_seq_len|seq_length", 1, &c->max_pos);
  c->max_pos_stated = c->max_pos > 0;
  if (!c->max_pos_stated) c->max_pos = 2048; /* GPT-3's context (Brown et al. 2020 §2.1), for a learned table */
  if (c->heads <= 0) return ctx_fail(ctx, AP_INVALID, "%s: num_attention_heads: expected > 0", file);
  c->head_dim = c->hidden / c->heads;
  OPT_I64("head_dim|kv_channels", 1, &c->head_dim);
  c->head_dim_v = c->head_dim;
  OPT_BOOL("tie_word_embeddings", &c->tied);

  /* "attention_bias" (Llama family) covers the attention projections only; "bias"/"use_bias" (Falcon,
   * StarCoder2) covers every linear layer. */
  bool b, found;
  if ((st = jx_bool(&src, root, "attention_bias", false, &b, &found))) return st;
  if (found) c->qkv_bias = c->o_bias = b;
  if ((st = jx_bool(&src, root, "bias|use_bias", false, &b, &found))) return st;
  if (found) c->qkv_bias = c->o_bias = c->mlp_bias = b;
  if ((st = jx_bool(&src, root, "mlp_bias", false, &b, &found))) return st;
  if (found) c->mlp_bias = b;
  if (strcmp(type, "qwen2") == 0 || strcmp(type, "qwen2_moe") == 0) c->o_bias = false;

  /* Family-specific fields. */
  if (strcmp(type, "gpt_neox") == 0) {
    bool par = true;
    OPT_BOOL("use_parallel_residual", &par);
    c->style = par ? BLOCK_PARALLEL : BLOCK_SEQUENTIAL;
  } else if (strcmp(type, "falcon") == 0) {
    /* Falcon-7B: multi-query, one shared norm; Falcon-40B/180B (new_decoder_architecture): grouped KV heads and
     * two norms (transformers FalconConfig). */
    bool new_arch = false, mq = true, par = true;
    OPT_BOOL("new_decoder_architecture", &new_arch);
    OPT_BOOL("multi_query", &mq);
    OPT_BOOL("parallel_attn", &par);
    c->style = par ? BLOCK_PARALLEL : BLOCK_SEQUENTIAL;
    c->n_parallel_norms = new_arch ? 2 : 1;
    int64_t nkv = new_arch ? c->heads : (mq ? 1 : c->heads);
    OPT_I64("num_kv_heads|n_head_kv", 1, &nkv);
    if (!new_arch && mq) nkv = 1;
    c->kv_heads = nkv;
    bool alibi = false;
    OPT_BOOL("alibi", &alibi);
    c->rope = !alibi;
  } else if (strcmp(type, "gpt2") == 0 || strcmp(type, "bloom") == 0) {
    c->kv_heads = c->heads;
    c->ffn = 4 * c->hidden;
    OPT_I64("n_inner|intermediate_size", 1, &c->ffn);
  }
  const char *act = NULL;
  if ((st = jx_str(&src, root, "hidden_act|activation_function|hidden_activation", false, &act, NULL))) return st;

  /* Attention windows: Mistral-style sliding_window on every layer; Gemma 2 and GPT-OSS alternate sliding
   * and full layers (layer_types where given, else sliding on even layers). */
  int64_t window = 0;
  bool use_sw = true;
  OPT_BOOL("use_sliding_window", &use_sw);
  if (use_sw) OPT_I64("sliding_window", 1, &window);
  json_t *types = json_object_get(root, "layer_types");
  for (int64_t i = 0; i < c->n_layers; i++) {
    int64_t w = 0;
    if (strcmp(type, "mistral") == 0 || strcmp(type, "mixtral") == 0 || strcmp(type, "qwen2") == 0 ||
        strcmp(type, "starcoder2") == 0)
      w = window;
    else if (strcmp(type, "gemma2") == 0 || strcmp(type, "gpt_oss") == 0) {
      json_t *lt = json_is_array(types) ? json_array_get(types, (size_t)i) : NULL;
      bool sliding = lt && json_is_string(lt) ? strstr(json_string_value(lt), "sliding") != NULL : (i % 2 == 0);
      w = sliding ? window : 0;
    }
    c->window_of_layer[i] = w;
  }

  if (c->mla) {
    c->q_lora_rank = 0;
    OPT_I64("q_lora_rank", 0, &c->q_lora_rank);
    if ((st = hf_size(&src, root, "kv_lora_rank", true, 1, &c->kv_lora_rank))) return st;
    if ((st = hf_size(&src, root, "qk_nope_head_dim", true, 0, &c->qk_nope_dim))) return st;
    if ((st = hf_size(&src, root, "qk_rope_head_dim", true, 0, &c->qk_rope_dim))) return st;
    if ((st = hf_size(&src, root, "v_head_dim", true, 1, &c->v_head_dim))) return st;
    c->head_dim = c->qk_nope_dim + c->qk_rope_dim;
    c->head_dim_v = c->v_head_dim;
    c->kv_heads = c->heads;
  }

  switch (fam->moe) {
  case MOE_NONE:
    break;
  case MOE_MIXTRAL:
    REQ_I64("num_local_experts|num_experts|n_routed_experts", &c->n_experts);
    REQ_I64("num_experts_per_tok|top_k|experts_per_token", &c->top_k);
    c->moe_ffn = c->ffn;
    for (int64_t i = 0; i < c->n_layers; i++) c->is_moe_layer[i] = true;
    break;
  case MOE_GPT_OSS:
    REQ_I64("num_local_experts|num_experts", &c->n_experts);
    REQ_I64("num_experts_per_tok|experts_per_token|top_k", &c->top_k);
    c->moe_ffn = c->ffn;
    c->expert_bias = c->router_bias = true;
    for (int64_t i = 0; i < c->n_layers; i++) c->is_moe_layer[i] = true;
    break;
  case MOE_QWEN: {
    /* Qwen2-MoE / Qwen3-MoE: every decoder_sparse_step-th layer is MoE unless listed in mlp_only_layers. */
    REQ_I64("num_experts|num_local_experts", &c->n_experts);
    REQ_I64("num_experts_per_tok|top_k", &c->top_k);
    REQ_I64("moe_intermediate_size", &c->moe_ffn);
    OPT_I64("shared_expert_intermediate_size", 0, &c->shared_ffn);
    c->shared_expert_gate = c->shared_ffn > 0;
    int64_t step = 1;
    OPT_I64("decoder_sparse_step", 1, &step);
    json_t *only = json_object_get(root, "mlp_only_layers");
    for (int64_t i = 0; i < c->n_layers; i++) {
      bool dense_only = false;
      size_t k;
      json_t *v;
      if (json_is_array(only)) json_array_foreach(only, k, v) if (json_is_integer(v) && json_integer_value(v) == i) dense_only = true;
      c->is_moe_layer[i] = !dense_only && (i + 1) % step == 0;
    }
    break;
  }
  case MOE_DEEPSEEK: {
    /* DeepSeek-V2/V3: the first first_k_dense_replace layers are dense, then every moe_layer_freq-th layer is
     * MoE; n_shared_experts shared experts of moe_intermediate_size each (transformers DeepseekV3Config). */
    REQ_I64("n_routed_experts|num_local_experts|num_experts", &c->n_experts);
    REQ_I64("num_experts_per_tok", &c->top_k);
    REQ_I64("moe_intermediate_size", &c->moe_ffn);
    int64_t n_shared = 0, first_dense = 0, freq = 1;
    OPT_I64("n_shared_experts", 0, &n_shared);
    OPT_I64("first_k_dense_replace", 0, &first_dense);
    OPT_I64("moe_layer_freq", 1, &freq);
    if (n_shared > 64) return ctx_fail(ctx, AP_INVALID, "%s: n_shared_experts: expected at most 64, got %lld", file, (long long)n_shared);
    if (c->moe_ffn > ((int64_t)1 << 24))
      return ctx_fail(ctx, AP_INVALID, "%s: moe_intermediate_size: expected at most %lld", file, (long long)1 << 24);
    c->shared_ffn = n_shared * c->moe_ffn;
    const char *method = NULL;
    if ((st = jx_str(&src, root, "topk_method", false, &method, NULL))) return st;
    c->router_score_bias = method && strcmp(method, "noaux_tc") == 0;
    for (int64_t i = 0; i < c->n_layers; i++) c->is_moe_layer[i] = i >= first_dense && i % freq == 0;
    break;
  }
  }
  if (c->n_experts > 0 && c->shared_ffn == 0 && fam->moe == MOE_QWEN) c->shared_expert_gate = false;
  c->arch.max_pos = c->max_pos;
  c->arch.mla_qk_rope_dim = c->mla ? c->qk_rope_dim : 0;
  if ((st = read_arch(&src, root, type, act, &c->arch))) return st;
  return tf_config_check(ctx, c, file);
}
