/* The transformer builder's input: one normalised description of a decoder-only transformer (model layer).
 * The Hugging Face config reader (hfconfig.c) fills it from any supported model_type; the builder
 * (transformer.c) turns it into a graph. Keeping the two apart means a new model_type is only a new mapping
 * of field names, never a new graph. */
#ifndef AP_MODEL_TRANSFORMER_H
#define AP_MODEL_TRANSFORMER_H

#include "model/graph.h"

enum { TF_MAX_LAYERS = 1024 };

typedef enum { NORM_LAYERNORM, NORM_RMSNORM } tf_norm;
typedef enum { MLP_PLAIN, MLP_GATED } tf_mlp; /* plain: up, act, down (GeLU); gated: gate·act(up), down */
typedef enum { BLOCK_SEQUENTIAL, BLOCK_PARALLEL } tf_block_style;

typedef struct {
  const char *name, *model_type, *source;
  int64_t n_layers, hidden, ffn, heads, kv_heads, head_dim, head_dim_v, vocab, max_pos;
  bool max_pos_stated; /* the config names its context length (else max_pos is the reader's fallback) */
  tf_norm norm;
  bool norm_bias;   /* LayerNorm with a bias (2·h parameters) */
  tf_mlp mlp;
  tf_block_style style;
  int n_parallel_norms; /* parallel blocks: 1 shared input norm (GPT-J, Falcon-7B) or 2 (NeoX, Falcon-40B) */
  bool post_norms;      /* a norm on each sublayer's output (OLMo 2; Gemma 2 has pre and post) */
  bool pre_norms;       /* a norm on each sublayer's input (the usual pre-LN) */
  bool learned_pos;     /* learned absolute position table of max_pos rows (GPT-2) */
  bool rope;            /* rotary position embedding on q and k (Su et al. 2021) */
  bool tied;            /* LM head shares the token embedding */
  bool qkv_bias, o_bias, mlp_bias;
  bool qk_norm_per_head; /* RMSNorm of head_dim on q and k (Qwen3) */
  bool qk_norm_full;     /* RMSNorm over all q and all k features (OLMo 2) */
  bool attn_sinks;       /* one learned logit per head (GPT-OSS) */
  bool embed_norm;       /* a norm right after the embedding (BLOOM) */
  /* Multi-head latent attention (DeepSeek-V2/V3); q_lora_rank 0 means a direct q projection. */
  bool mla;
  int64_t q_lora_rank, kv_lora_rank, qk_nope_dim, qk_rope_dim, v_head_dim;
  /* Mixture of experts. n_experts 0 means dense everywhere. */
  int64_t n_experts, top_k, moe_ffn, shared_ffn;
  bool shared_expert_gate; /* Qwen2-MoE: sigmoid gate h→1 on the shared expert */
  bool router_bias;        /* GPT-OSS */
  bool expert_bias;        /* biases on expert matmuls (GPT-OSS) */
  bool router_score_bias;  /* DeepSeek-V3 noaux_tc: per-expert score correction bias (E parameters) */
  bool is_moe_layer[TF_MAX_LAYERS];
  int64_t window_of_layer[TF_MAX_LAYERS]; /* 0 = full attention */
  /* Activation accounting switches. Modern training uses flash attention without dropout; Korthikanti et
   * al. 2022's Table 2 assumes neither, and their test sets flash_attention false and dropout true. */
  bool flash_attention, dropout;
  dtype act_dtype;
  graph_arch arch; /* copied to the graph as it is (graph.h) */
} tf_config;

/* Fills c with neutral defaults (pre-norm RMSNorm, gated MLP, bf16, flash attention, no dropout). */
AP_HIDDEN void tf_config_defaults(tf_config *c);
/* Checks sizes and divisibility; returns AP_INVALID naming file and field. */
AP_HIDDEN ap_status tf_config_check(ap_ctx *ctx, const tf_config *c, const char *file);
/* Builds the graph into arena a. Returns AP_NOMEM on allocation failure. */
AP_HIDDEN ap_status tf_build(ap_ctx *ctx, arena *a, const tf_config *c, graph *out);

#endif
