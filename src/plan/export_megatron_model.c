/* The Megatron-LM architecture flags (plan layer): what pretrain_gpt.py must be told to build the model the
 * plan was costed for, read from the model graph (model/transformer.c's op kinds and names) and its
 * architecture facts (graph.h graph_arch, from config.json). export_megatron.c adds the parallelism,
 * batch and launcher around them.
 *
 * Every flag name and value form was read in Megatron-LM @ d98e8a64ddf34856e74b24714e3bedb2f5a39553 and is
 * in tests/data/framework_args.tsv (extracted by tools/framework_args/extract.py):
 *  - Megatron's defaults differ from most checkpoints: add_bias_linear True, attention_dropout and
 *    hidden_dropout 0.1 (transformer_config.py), rotary_base 10000, normalization LayerNorm, norm_epsilon 1e-5
 *    (arguments.py), so each is stated;
 *  - Llama 3.x rope scaling is --use-rope-scaling --rope-scaling-factor with low/high frequency factors 1 and 4
 *    and an original context of 8192 fixed in code (rotary_pos_embedding.py _apply_scaling); YaRN under MLA
 *    takes --rotary-scaling-factor, --mscale, --mscale-all-dim, and beta_fast 32, beta_slow 1, original
 *    context 4096 from MLATransformerConfig's defaults (transformer_config.py), which no flag sets;
 *  - the router (moe_utils.py topk_routing_with_score_function): softmax without pre-softmax takes the top k
 *    logits and softmaxes them, which equals a softmax renormalised over the top k (norm_topk_prob); with
 *    --moe-router-pre-softmax it keeps the full softmax's top k; sigmoid always renormalises when k > 1;
 *  - add_bias_linear (the default; --disable-bias-linear turns it off) biases every linear layer, the router
 *    (moe/router.py) and the experts included; --add-qkv-bias biases q/k/v alone; shared experts reject
 *    biases ("bias is not supported in the shared experts", moe/shared_experts.py);
 *  - --window-size is a tuple (left, right) (arguments.py tuple_type) and --window-attn-skip-freq a list
 *    pattern with 1 for sliding-window layers; --moe-layer-freq a list pattern with 1 for MoE layers.
 * What Megatron cannot build as the model is (parallel attention/MLP blocks, norms after each sublayer, full
 * width q/k norms, attention sinks, GELU-gated MLPs, biases on some layers only, other rope scalings) is
 * refused with the reason. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plan/export.h"

static bool named(const graph_op *op, const char *name) { return op->name && strcmp(op->name, name) == 0; }

static bool ends_with(const char *s, const char *suffix) {
  size_t n = s ? strlen(s) : 0, m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

bool export_block_is_moe(const graph_block *blk) {
  for (int j = 0; j < blk->n_ops; j++)
    if (blk->ops[j].kind == OP_MATMUL && blk->ops[j].n_experts > 1) return true;
  return false;
}

/* The window of a layer block's attention (0 = full). */
static int64_t block_window(const graph_block *blk) {
  for (int j = 0; j < blk->n_ops; j++)
    if (blk->ops[j].kind == OP_ATTENTION) return blk->ops[j].window;
  return 0;
}

static void layer_op(mshape *s, const graph_block *blk, const graph_op *op) {
  switch (op->kind) {
  case OP_ATTENTION:
    if (!s->has_attention) {
      s->has_attention = true;
      s->heads = op->heads;
      s->kv_heads = op->kv_heads > 0 ? op->kv_heads : op->heads;
      s->head_dim = op->head_dim_qk;
      s->head_dim_v = op->head_dim_v;
    }
    if (op->extra_params > 0) s->attn_sinks = true;
    break;
  case OP_NORM:
    /* The builder's LayerNorm costs 7 FLOP per element, its RMSNorm 4 (transformer.c norm()). */
    if (named(op, "ln_attn")) {
      s->layernorm = op->flop_per_elem > 5.5;
      s->pre_norm = true;
    }
    if (named(op, "ln_mlp")) s->ln_mlp_reads_input = op->n_in > 0 && op->in[0] == blk->input;
    if (named(op, "post_attn_norm") || named(op, "post_mlp_norm")) s->post_norms = true;
    if (named(op, "q_norm")) {
      s->qk_norm = true;
      s->qk_norm_params = op->extra_params; /* head_dim for per-head norms (transformer.c), all q features else */
    }
    break;
  case OP_ELEMENTWISE:
    if (named(op, "rope_q") || named(op, "q_rope")) s->rope = true;
    if (ends_with(op->name, "_act") && op->n_in == 2) s->gated = true; /* act(gate) · up */
    break;
  case OP_MATMUL:
    if (op->n_experts > 1) {
      s->n_experts = op->n_experts;
      s->top_k = op->top_k;
      if (named(op, "expert_up")) s->moe_ffn = op->weight_n;
      if (op->has_bias) s->expert_bias = true;
    } else if (named(op, "mlp_up")) {
      s->ffn = op->weight_n;
      s->mlp_bias = s->mlp_bias || op->has_bias;
    } else if (named(op, "mlp_down")) {
      s->mlp_bias = s->mlp_bias || op->has_bias;
    } else if (named(op, "shared_expert_up")) {
      s->shared_ffn = op->weight_n;
    } else if (named(op, "shared_expert_gate") && op->weight_n == 1) {
      s->shared_gate = true; /* Qwen2-MoE's sigmoid gate h→1, not the gated MLP's own gate projection */
    } else if (named(op, "q_down") || named(op, "kv_down")) {
      s->mla = true;
    } else if (named(op, "q_up")) {
      s->q_lora_rank = op->weight_k;
    } else if (named(op, "kv_up")) {
      s->kv_lora_rank = op->weight_k;
    } else if (named(op, "q_proj") || named(op, "k_proj") || named(op, "v_proj")) {
      s->qkv_bias = s->qkv_bias || op->has_bias;
    } else if (named(op, "o_proj")) {
      s->o_bias = s->o_bias || op->has_bias;
    }
    break;
  case OP_ROUTER:
    s->router_bias = s->router_bias || op->has_bias;
    s->router_score_bias = s->router_score_bias || op->extra_params > 0;
    break;
  default:
    break;
  }
}

bool megatron_shape_of(const graph *g, mshape *s) {
  memset(s, 0, sizeof *s);
  s->hidden = g->hidden_size;
  bool any_dense = false, any_moe = false;
  for (int i = 0; i < g->n_blocks; i++) {
    const graph_block *blk = &g->blocks[i];
    for (int j = 0; j < blk->n_ops; j++) {
      const graph_op *op = &blk->ops[j];
      if (op->kind == OP_EMBEDDING && named(op, "position_embedding") && s->hidden > 0) {
        s->learned_pos = true;
        s->pos_rows = op->extra_params / s->hidden;
      }
      if (named(op, "embed_norm")) s->embed_norm = true;
      if (op->kind == OP_MATMUL && named(op, "lm_head")) {
        s->has_head = true;
        s->tied = op->tied;
      }
      if (blk->role == BLOCK_LAYER) layer_op(s, blk, op);
    }
    if (blk->role != BLOCK_LAYER) continue;
    s->n_layers += blk->repeat;
    int64_t w = block_window(blk);
    if (w > 0) s->window = w;
    else s->any_full = true;
    if (export_block_is_moe(blk)) any_moe = true;
    else any_dense = true;
  }
  s->parallel_block = s->pre_norm && s->ln_mlp_reads_input;
  s->qk_norm_full = s->qk_norm && s->qk_norm_params != s->head_dim;
  s->mixed = any_moe && any_dense;
  if (s->n_experts > 1 && s->moe_ffn == 0) return false;
  if (s->n_experts > 1 && s->ffn == 0) s->ffn = s->moe_ffn; /* every layer MoE (Mixtral) */
  return s->n_layers > 0 && s->has_attention && s->has_head && s->hidden > 0 && s->heads > 0 && s->ffn > 0;
}

bool megatron_all_bias(const mshape *s) {
  bool dense_mlp = s->n_experts <= 1 || s->mixed || s->shared_ffn > 0;
  return s->qkv_bias && s->o_bias && (!dense_mlp || s->mlp_bias) &&
         (s->n_experts <= 1 || (s->expert_bias && s->router_bias));
}

bool megatron_no_bias(const mshape *s) {
  return !s->qkv_bias && !s->o_bias && !s->mlp_bias && !s->expert_bias && !s->router_bias;
}

static ap_status refuse(ap_ctx *ctx, const graph *g, const char *why) {
  return ctx_fail(ctx, AP_UNSUPPORTED, "megatron export: Megatron-LM cannot build %s as it is: %s", g->name, why);
}

ap_status megatron_model_check(ap_ctx *ctx, const mshape *s, const graph *g) {
  const graph_arch *a = &g->arch;
  if (s->parallel_block) return refuse(ctx, g, "its attention and MLP run in parallel on one input (GPT-J/NeoX style)");
  if (!s->pre_norm) return refuse(ctx, g, "it has no norm before each sublayer (Megatron's layers are pre-norm)");
  if (s->post_norms) return refuse(ctx, g, "it normalises each sublayer's output (post-norms), which Megatron's GPT layer has no flag for");
  if (s->embed_norm) return refuse(ctx, g, "it normalises the embedding output (BLOOM), which Megatron's GPT model has no flag for");
  if (s->qk_norm_full) return refuse(ctx, g, "its q/k norms span all heads, and --qk-layernorm normalises each head");
  if (s->attn_sinks) return refuse(ctx, g, "it has learned attention sinks, which this exporter does not map (--softmax-type learnable is untested here)");
  if (s->gated && a->act != ARCH_ACT_SILU && a->act != ARCH_ACT_UNKNOWN)
    return refuse(ctx, g, "its gated MLP is not SiLU-gated, and Megatron's gated MLPs are --swiglu (SiLU) or --quick-geglu (quick GELU)");
  if (!s->gated && a->act != ARCH_ACT_GELU && a->act != ARCH_ACT_GELU_TANH && a->act != ARCH_ACT_UNKNOWN)
    return refuse(ctx, g, "its MLP activation is neither GELU nor SiLU-gated");
  if (s->shared_ffn > 0 && !megatron_no_bias(s))
    return refuse(ctx, g, "it has linear biases and shared experts, and Megatron's shared experts reject biases (moe/shared_experts.py)");
  /* add_bias_linear puts a bias on every linear layer, the router's and the experts' included (moe/router.py,
   * moe/experts.py): a model is all biases, none, or q/k/v only (--add-qkv-bias). */
  if (!megatron_all_bias(s) && !megatron_no_bias(s) && !(s->qkv_bias && !s->o_bias && !s->mlp_bias && !s->expert_bias && !s->router_bias))
    return refuse(ctx, g, "it has biases on some linear layers only, and Megatron has --add-qkv-bias alone or all biases");
  if (s->rope && a->rope_theta > 0 && (a->rope_theta != floor(a->rope_theta) || a->rope_theta > 2e9))
    return refuse(ctx, g, "its rope_theta is not an integer, and --rotary-base takes an int");
  if (s->rope && a->rope_scaling == ARCH_ROPE_LLAMA3 &&
      ((a->rope_low_freq_factor > 0 && a->rope_low_freq_factor != 1) ||
       (a->rope_high_freq_factor > 0 && a->rope_high_freq_factor != 4) ||
       (a->rope_original_max_pos > 0 && a->rope_original_max_pos != 8192)))
    return refuse(ctx, g, "its llama3 rope scaling differs from Megatron's fixed low/high frequency factors 1 and 4 and original context 8192");
  if (s->rope && a->rope_scaling == ARCH_ROPE_YARN && s->mla &&
      ((a->rope_beta_fast > 0 && a->rope_beta_fast != 32) || (a->rope_beta_slow > 0 && a->rope_beta_slow != 1) ||
       (a->rope_original_max_pos > 0 && a->rope_original_max_pos != 4096)))
    return refuse(ctx, g, "its YaRN beta_fast/beta_slow/original context differ from MLATransformerConfig's 32/1/4096, which no flag sets");
  if (s->rope && (a->rope_scaling == ARCH_ROPE_LINEAR || a->rope_scaling == ARCH_ROPE_OTHER))
    return refuse(ctx, g, "its rope scaling type has no Megatron flag (Megatron has llama3 scaling and YaRN)");
  if (s->router_score_bias && a->router != ARCH_ROUTER_SIGMOID)
    return refuse(ctx, g, "its router has a score-correction bias on a softmax router, and Megatron's expert bias needs "
                          "the sigmoid (or sqrtsoftplus) score function (transformer_config.py)");
  if (s->n_experts > 1 && a->router == ARCH_ROUTER_SIGMOID && !a->norm_topk_prob && s->top_k > 1)
    return refuse(ctx, g, "its sigmoid router does not renormalise the top-k weights, and Megatron's always does");
  return AP_OK;
}

/* '([0]*3+[1]*58)': a python-list pattern over the layers in forward order, 1 where is_one holds, quoted for
 * bash. */
static void layer_pattern(const graph *g, bool (*is_one)(const graph_block *), strbuf *sb) {
  sb_puts(sb, "'([");
  int n_terms = 0;
  for (int i = 0; i < g->n_blocks;) {
    if (g->blocks[i].role != BLOCK_LAYER) {
      i++;
      continue;
    }
    bool one = is_one(&g->blocks[i]);
    int64_t run = 0;
    for (; i < g->n_blocks && (g->blocks[i].role != BLOCK_LAYER || is_one(&g->blocks[i]) == one); i++)
      if (g->blocks[i].role == BLOCK_LAYER) run += g->blocks[i].repeat;
    sb_printf(sb, "%s%d]*%lld", n_terms++ ? "+[" : "", one ? 1 : 0, (long long)run);
  }
  sb_puts(sb, ")'");
}

static bool block_windowed(const graph_block *blk) { return block_window(blk) > 0; }

/* A float flag value with up to 10 significant digits, no exponent for usual values ("0", "0.02", "1e-06"). */
static void flag_f(margs *m, const char *name, double v) {
  char buf[48];
  snprintf(buf, sizeof buf, "%.10g", v);
  margs_flag(m, name, buf);
}

static void moe_flags(margs *m, const mshape *s, const graph *g) {
  const graph_arch *a = &g->arch;
  margs_flag_i(m, "--num-experts", s->n_experts);
  margs_flag_i(m, "--moe-router-topk", s->top_k);
  margs_flag_i(m, "--moe-ffn-hidden-size", s->moe_ffn);
  if (s->shared_ffn > 0) margs_flag_i(m, "--moe-shared-expert-intermediate-size", s->shared_ffn);
  if (s->shared_gate) margs_flag(m, "--moe-shared-expert-gate", NULL);
  if (s->mixed) {
    strbuf freq = {0};
    layer_pattern(g, export_block_is_moe, &freq);
    margs_flag(m, "--moe-layer-freq", freq.buf ? freq.buf : "1");
    sb_free(&freq);
  }
  margs_flag(m, "--moe-grouped-gemm", NULL);
  margs_flag(m, "--moe-token-dispatcher-type", "alltoall");
  /* The routing rule. */
  margs_flag(m, "--moe-router-score-function", a->router == ARCH_ROUTER_SIGMOID ? "sigmoid" : "softmax");
  if (a->stated && a->router == ARCH_ROUTER_SOFTMAX && !a->norm_topk_prob && s->top_k > 1)
    margs_flag(m, "--moe-router-pre-softmax", NULL);
  if (a->routed_scaling_factor > 0 && a->routed_scaling_factor != 1)
    flag_f(m, "--moe-router-topk-scaling-factor", a->routed_scaling_factor);
  if (a->n_group > 1 && a->topk_group > 0) {
    margs_flag_i(m, "--moe-router-num-groups", a->n_group);
    margs_flag_i(m, "--moe-router-group-topk", a->topk_group);
  }
  /* Load balancing. DeepSeek-V3's auxiliary-loss-free balancing is a per-expert bias on the routing scores
   * plus a sequence-wise balance loss of weight 0.0001 (DeepSeek-V3 technical report, arXiv 2412.19437,
   * §2.1.2 and §4.2). Otherwise the config's router_aux_loss_coef, or transformers' default 0.001
   * (MixtralConfig, Qwen3MoeConfig: router_aux_loss_coef=0.001); Megatron's own default is 0, no loss. */
  if (s->router_score_bias) {
    margs_flag(m, "--moe-router-enable-expert-bias", NULL);
    margs_flag(m, "--moe-router-load-balancing-type", "seq_aux_loss");
    flag_f(m, "--moe-aux-loss-coeff", a->router_aux_loss_coef >= 0 ? a->router_aux_loss_coef : 0.0001);
  } else {
    margs_flag(m, "--moe-router-load-balancing-type", "aux_loss");
    flag_f(m, "--moe-aux-loss-coeff", a->router_aux_loss_coef >= 0 ? a->router_aux_loss_coef : 0.001);
  }
  margs_flag(m, "--moe-router-dtype", "fp32");
}

static void position_flags(margs *m, const mshape *s, const graph *g, int64_t seq) {
  const graph_arch *a = &g->arch;
  /* Megatron requires max_position_embeddings >= seq_length; rotary models state the config's own. */
  int64_t max_pos = s->learned_pos ? s->pos_rows : a->max_pos > seq ? a->max_pos : seq;
  margs_flag_i(m, "--max-position-embeddings", max_pos);
  bool yarn = s->rope && a->rope_scaling == ARCH_ROPE_YARN;
  /* Outside MLA, YaRN is its own position-embedding type (arguments.py); under MLA it is rope_type. */
  margs_flag(m, "--position-embedding-type",
             s->learned_pos ? "learned_absolute" : !s->rope ? "none" : yarn && !s->mla ? "yarn" : "rope");
  if (!s->rope) return;
  margs_flag_i(m, "--rotary-base", a->rope_theta > 0 ? (int64_t)a->rope_theta : 10000);
  if (a->rope_scaling == ARCH_ROPE_LLAMA3) {
    margs_flag(m, "--use-rope-scaling", NULL);
    flag_f(m, "--rope-scaling-factor", a->rope_factor > 0 ? a->rope_factor : 8);
  } else if (yarn) {
    flag_f(m, "--rotary-scaling-factor", a->rope_factor > 0 ? a->rope_factor : 1);
    flag_f(m, "--mscale", a->rope_mscale > 0 ? a->rope_mscale : 1);
    flag_f(m, "--mscale-all-dim", a->rope_mscale_all_dim);
    if (!s->mla) {
      /* _apply_yarn_config_from_args reads these for non-MLA YaRN. */
      if (a->rope_original_max_pos > 0)
        margs_flag_i(m, "--yarn-original-max-position-embeddings", a->rope_original_max_pos);
      if (a->rope_beta_fast > 0) flag_f(m, "--yarn-beta-fast", a->rope_beta_fast);
      if (a->rope_beta_slow > 0) flag_f(m, "--yarn-beta-slow", a->rope_beta_slow);
    }
  } else if (s->mla) {
    /* MLA's rope_type defaults to yarn (arguments.py --rope-type help); a model without scaling says rope. */
    margs_flag(m, "--rope-type", "rope");
  }
}

void megatron_model_flags(margs *m, const mshape *s, const graph *g, int64_t seq) {
  const graph_arch *a = &g->arch;
  margs_flag_i(m, "--num-layers", s->n_layers);
  margs_flag_i(m, "--hidden-size", s->hidden);
  margs_flag_i(m, "--ffn-hidden-size", s->ffn);
  margs_flag_i(m, "--num-attention-heads", s->heads);
  if (!s->mla) {
    if (s->kv_heads < s->heads) {
      margs_flag(m, "--group-query-attention", NULL);
      margs_flag_i(m, "--num-query-groups", s->kv_heads);
    }
    if (s->hidden % s->heads != 0 || s->head_dim != s->hidden / s->heads) margs_flag_i(m, "--kv-channels", s->head_dim);
  }
  margs_flag_i(m, "--seq-length", seq);
  position_flags(m, s, g, seq);
  if (s->gated) margs_flag(m, "--swiglu", NULL);
  else if (a->act == ARCH_ACT_GELU_TANH) margs_flag(m, "--openai-gelu", NULL); /* tanh-approximated GELU */
  margs_flag(m, "--normalization", s->layernorm ? "LayerNorm" : "RMSNorm");
  if (a->norm_eps > 0) flag_f(m, "--norm-epsilon", a->norm_eps);
  if (megatron_no_bias(s)) margs_flag(m, "--disable-bias-linear", NULL);
  else if (!megatron_all_bias(s)) { /* q/k/v only (megatron_model_check) */
    margs_flag(m, "--disable-bias-linear", NULL);
    margs_flag(m, "--add-qkv-bias", NULL);
  }
  flag_f(m, "--attention-dropout", a->attention_dropout);
  flag_f(m, "--hidden-dropout", a->hidden_dropout);
  if (s->qk_norm) margs_flag(m, "--qk-layernorm", NULL);
  if (s->window > 0) {
    char w[48];
    snprintf(w, sizeof w, "%lld,0", (long long)s->window);
    margs_flag(m, "--window-size", w);
    if (s->any_full) {
      strbuf pat = {0};
      layer_pattern(g, block_windowed, &pat);
      margs_flag(m, "--window-attn-skip-freq", pat.buf ? pat.buf : "1");
      sb_free(&pat);
    }
  }
  if (!s->tied) margs_flag(m, "--untie-embeddings-and-output-weights", NULL);
  if (s->mla) {
    margs_flag(m, "--multi-latent-attention", NULL);
    if (s->q_lora_rank > 0) margs_flag_i(m, "--q-lora-rank", s->q_lora_rank);
    margs_flag_i(m, "--kv-lora-rank", s->kv_lora_rank);
    int64_t rope_dim = a->mla_qk_rope_dim;
    margs_flag_i(m, "--qk-head-dim", s->head_dim - rope_dim);
    margs_flag_i(m, "--qk-pos-emb-head-dim", rope_dim);
    margs_flag_i(m, "--v-head-dim", s->head_dim_v);
  }
  if (s->n_experts > 1) moe_flags(m, s, g);
  if (a->mtp_layers > 0) margs_flag_i(m, "--mtp-num-layers", a->mtp_layers);
  if (g->vocab_size > 0) {
    /* The plan counted the model's own vocabulary; Megatron pads it to a multiple of
     * --make-vocab-size-divisible-by × tp, so 1 keeps it unless tp forces padding. */
    margs_flag_i(m, "--vocab-size", g->vocab_size);
    margs_flag_i(m, "--make-vocab-size-divisible-by", 1);
  }
}
