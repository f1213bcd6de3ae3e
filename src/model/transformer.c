/* The transformer builder (model layer): turns a normalised tf_config into a model graph of blocks.
 *
 * Layers with the same structure (dense or MoE, the same attention window) that follow each other become
 * one block with a repeat count. Each layer records the tensors it saves for backward following Korthikanti
 * et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models", arXiv 2205.05198) §4.1: the
 * input of each norm, the input of each matmul, the attention internals, the activation-function input, and
 * 1-byte dropout masks when dropout is on. With flash attention the s×s score tensors are not kept; the
 * kernel keeps Q, K, V, its output and one fp32 log-sum-exp per row and head (Dao 2022, FlashAttention-2 §3).
 */
#include <stdio.h>
#include <string.h>

#include "model/transformer.h"

void tf_config_defaults(tf_config *c) {
  memset(c, 0, sizeof *c);
  c->norm = NORM_RMSNORM;
  c->mlp = MLP_GATED;
  c->style = BLOCK_SEQUENTIAL;
  c->pre_norms = true;
  c->n_parallel_norms = 1;
  c->flash_attention = true;
  c->act_dtype = DT_BF16;
  c->top_k = 1;
}

ap_status tf_config_check(ap_ctx *ctx, const tf_config *c, const char *file) {
  struct {
    const char *field;
    int64_t v;
  } positive[] = {
      {"num_hidden_layers", c->n_layers}, {"hidden_size", c->hidden},        {"num_attention_heads", c->heads},
      {"num_key_value_heads", c->kv_heads}, {"vocab_size", c->vocab},        {"head_dim", c->head_dim},
      {"intermediate_size", c->ffn},
  };
  for (size_t i = 0; i < AP_COUNT(positive); i++)
    if (positive[i].v <= 0)
      return ctx_fail(ctx, AP_INVALID, "%s: %s: expected an integer > 0, got %lld", file, positive[i].field,
                      (long long)positive[i].v);
  if (c->n_layers > TF_MAX_LAYERS)
    return ctx_fail(ctx, AP_INVALID, "%s: num_hidden_layers: expected at most %d, got %lld", file, TF_MAX_LAYERS,
                    (long long)c->n_layers);
  if (c->heads % c->kv_heads != 0)
    return ctx_fail(ctx, AP_INVALID,
                    "%s: num_key_value_heads: must divide num_attention_heads (%lld), got %lld", file,
                    (long long)c->heads, (long long)c->kv_heads);
  if (c->n_experts > 0) {
    if (c->top_k < 1 || c->top_k > c->n_experts)
      return ctx_fail(ctx, AP_INVALID, "%s: num_experts_per_tok: expected 1..%lld (the expert count), got %lld", file,
                      (long long)c->n_experts, (long long)c->top_k);
    if (c->moe_ffn <= 0)
      return ctx_fail(ctx, AP_INVALID, "%s: moe_intermediate_size: expected an integer > 0", file);
  }
  if (c->mla && (c->kv_lora_rank <= 0 || c->qk_nope_dim < 0 || c->qk_rope_dim < 0 || c->v_head_dim <= 0 ||
                 c->qk_nope_dim + c->qk_rope_dim <= 0))
    return ctx_fail(ctx, AP_INVALID, "%s: kv_lora_rank/qk_nope_head_dim/qk_rope_head_dim/v_head_dim: expected sizes > 0",
                    file);
  /* Every size stays below 2^24 so that the builder's products (heads·head_dim, max_pos·hidden …) fit in
   * int64 with room; graph_validate then bounds each op's parameters. */
  struct {
    const char *field;
    int64_t v;
  } sizes[] = {
      {"hidden_size", c->hidden}, {"intermediate_size", c->ffn}, {"num_attention_heads", c->heads},
      {"num_key_value_heads", c->kv_heads}, {"head_dim", c->head_dim}, {"v_head_dim", c->head_dim_v},
      {"vocab_size", c->vocab}, {"max_position_embeddings", c->max_pos}, {"moe_intermediate_size", c->moe_ffn},
      {"shared_expert_intermediate_size", c->shared_ffn}, {"q_lora_rank", c->q_lora_rank},
      {"kv_lora_rank", c->kv_lora_rank}, {"qk_nope_head_dim", c->qk_nope_dim}, {"qk_rope_head_dim", c->qk_rope_dim},
      {"num_experts", c->n_experts}, {"num_experts_per_tok", c->top_k},
  };
  for (size_t i = 0; i < AP_COUNT(sizes); i++)
    if (sizes[i].v < 0 || sizes[i].v > ((int64_t)1 << 24))
      return ctx_fail(ctx, AP_INVALID, "%s: %s: expected at most %lld, got %lld", file, sizes[i].field,
                      (long long)1 << 24, (long long)sizes[i].v);
  /* Large products must stay far from int64 overflow: parameter counts are summed in int64. */
  double p = (double)c->hidden * (double)(c->ffn > c->moe_ffn ? c->ffn : c->moe_ffn) *
             (double)(c->n_experts > 1 ? c->n_experts : 1) * (double)c->n_layers;
  if (p > 1e17 || (double)c->vocab * (double)c->hidden > 1e17 || (double)c->heads * (double)c->head_dim > 1e9)
    return ctx_fail(ctx, AP_INVALID, "%s: sizes too large (more than 1e17 parameters)", file);
  return AP_OK;
}

/* A builder session: shorthands for adding tensors and ops to the current block. */
typedef struct {
  graph_builder gb;
  const tf_config *c;
} tb;

static int tensor(tb *b, const char *name, int tp_dim, bool seq_parallel, int64_t d0, int64_t d1, int64_t d2,
                  int64_t d3) {
  int64_t dims[4] = {d0, d1, d2, d3};
  return graph_tensor_add(&b->gb, name, b->c->act_dtype, tp_dim, seq_parallel, dims, 4);
}

/* [B, S, n]: a per-token activation, whole under TP (sequence parallelism may split S). */
static int act_h(tb *b, const char *name, int64_t n) { return tensor(b, name, -1, true, DIM_B, DIM_S, n, 0); }
/* [B, S, n]: a per-token activation split along its features by TP. */
static int act_tp(tb *b, const char *name, int64_t n) { return tensor(b, name, 2, false, DIM_B, DIM_S, n, 0); }

static void add(tb *b, graph_op *op) { (void)graph_op_add(&b->gb, op); }

static int matmul(tb *b, const char *name, int x, int64_t k, int64_t n, bool bias, bool tp_split, bool out_tp,
                  bool save_input) {
  int y = out_tp ? act_tp(b, name, n) : act_h(b, name, n);
  graph_op op = graph_op_init(OP_MATMUL, name);
  op.n_in = 1;
  op.in[0] = x;
  op.out = y;
  op.weight_k = k;
  op.weight_n = n;
  op.has_bias = bias;
  op.tp_split = tp_split;
  if (save_input) op.saved[op.n_saved++] = x;
  add(b, &op);
  return y;
}

/* A norm over the last dimension of x (n features). It saves its input (Korthikanti §4.1: "LayerNorm input,
 * 2sbh"); RMSNorm also keeps the input. FLOP per element: mean, variance, normalise, scale (+ shift). */
static int norm(tb *b, const char *name, int x, int64_t n, bool tp) {
  const tf_config *c = b->c;
  int y = tp ? act_tp(b, name, n) : act_h(b, name, n);
  graph_op op = graph_op_init(OP_NORM, name);
  op.n_in = 1;
  op.in[0] = x;
  op.out = y;
  op.extra_params = n * ((c->norm == NORM_LAYERNORM && c->norm_bias) ? 2 : 1);
  op.flop_per_elem = c->norm == NORM_LAYERNORM ? 7.0 : 4.0;
  op.tp_split = tp;
  op.saved[op.n_saved++] = x;
  add(b, &op);
  return y;
}

/* An elementwise op over inputs; saves the listed inputs. */
static int eltwise(tb *b, const char *name, int out, int x0, int x1, double flop_per_elem, bool save0, bool save1) {
  graph_op op = graph_op_init(OP_ELEMENTWISE, name);
  op.in[op.n_in++] = x0;
  if (x1 >= 0) op.in[op.n_in++] = x1;
  op.out = out;
  op.flop_per_elem = flop_per_elem;
  if (save0) op.saved[op.n_saved++] = x0;
  if (save1 && x1 >= 0) op.saved[op.n_saved++] = x1;
  add(b, &op);
  return out;
}

/* Dropout on x producing a same-shape tensor, keeping a 1-byte mask per element (Korthikanti §4.1). */
static int dropout(tb *b, const char *name, int x, int64_t n, bool tp) {
  if (!b->c->dropout) return x;
  int y = tp ? act_tp(b, name, n) : act_h(b, name, n);
  graph_op op = graph_op_init(OP_ELEMENTWISE, name);
  op.n_in = 1;
  op.in[0] = x;
  op.out = y;
  op.flop_per_elem = 2;
  op.mask_of = y;
  add(b, &op);
  return y;
}

/* The attention sublayer from its (normed) input x to its output projection; returns the output [B,S,h]. */
static int attention(tb *b, int x, int64_t window) {
  const tf_config *c = b->c;
  int64_t h = c->hidden, a = c->heads, g = c->kv_heads;
  int64_t dqk = c->head_dim, dv = c->head_dim_v;
  int q, k, v;
  if (c->mla) {
    /* Multi-head latent attention (DeepSeek-V2 §2.1): low-rank q and joint kv compressions, the latter shared
     * by all heads and not split by TP; the decompressions are split by head. */
    dqk = c->qk_nope_dim + c->qk_rope_dim;
    dv = c->v_head_dim;
    g = a;
    if (c->q_lora_rank > 0) {
      int qa = matmul(b, "q_down", x, h, c->q_lora_rank, c->qkv_bias, false, false, true);
      int qan = norm(b, "q_down_norm", qa, c->q_lora_rank, false);
      q = matmul(b, "q_up", qan, c->q_lora_rank, a * dqk, false, true, true, true);
    } else {
      q = matmul(b, "q_proj", x, h, a * dqk, false, true, true, true);
    }
    int kva = matmul(b, "kv_down", x, h, c->kv_lora_rank + c->qk_rope_dim, c->qkv_bias, false, false, true);
    /* The norm covers the compressed kv part only (kv_lora_rank features); the rope key part bypasses it. */
    int kvan = norm(b, "kv_down_norm", kva, c->kv_lora_rank, false);
    int kvb = matmul(b, "kv_up", kvan, c->kv_lora_rank, a * (c->qk_nope_dim + dv), false, true, true, true);
    k = act_tp(b, "k", a * dqk);
    v = act_tp(b, "v", a * dv);
    eltwise(b, "kv_split_rope", k, kvb, kva, 3, false, false);
    eltwise(b, "v_split", v, kvb, -1, 0, false, false);
    int qr = act_tp(b, "q_rope", a * dqk);
    q = eltwise(b, "q_rope", qr, q, -1, 3, false, false);
  } else {
    q = matmul(b, "q_proj", x, h, a * dqk, c->qkv_bias, true, true, true);
    k = matmul(b, "k_proj", x, h, g * dqk, c->qkv_bias, true, true, true);
    v = matmul(b, "v_proj", x, h, g * dv, c->qkv_bias, true, true, true);
    if (c->qk_norm_per_head || c->qk_norm_full) {
      q = norm(b, "q_norm", q, a * dqk, true);
      k = norm(b, "k_norm", k, g * dqk, true);
      graph_op *qn = &b->gb.blk->ops[b->gb.blk->n_ops - 2], *kn = &b->gb.blk->ops[b->gb.blk->n_ops - 1];
      if (c->qk_norm_per_head) qn->extra_params = kn->extra_params = dqk;
    }
    if (c->rope) {
      /* Rotary position embedding (Su et al. 2021) on q and k: no saved tensors (cos/sin are recomputed). */
      int qr = act_tp(b, "q_rot", a * dqk), kr = act_tp(b, "k_rot", g * dqk);
      q = eltwise(b, "rope_q", qr, q, -1, 3, false, false);
      k = eltwise(b, "rope_k", kr, k, -1, 3, false, false);
    }
  }
  int o = act_tp(b, "attn_out", a * dv);
  graph_op op = graph_op_init(OP_ATTENTION, "core_attention");
  op.n_in = 3;
  op.in[0] = q;
  op.in[1] = k;
  op.in[2] = v;
  op.out = o;
  op.heads = a;
  op.kv_heads = g;
  op.head_dim_qk = dqk;
  op.head_dim_v = dv;
  op.causal = true;
  op.window = window;
  op.tp_split = true;
  op.extra_params = c->attn_sinks ? a : 0;
  op.saved[op.n_saved++] = q;
  op.saved[op.n_saved++] = k;
  op.saved[op.n_saved++] = v;
  if (c->flash_attention) {
    op.saved[op.n_saved++] = o;
    op.saved[op.n_saved++] = tensor(b, "softmax_lse", 2, false, DIM_B, a, DIM_S, 0);
    b->gb.blk->tensors[b->gb.blk->n_tensors - 1].dt = DT_FP32;
    b->gb.blk->tensors[b->gb.blk->n_tensors - 1].tp_dim = 1;
  } else {
    /* Korthikanti §4.1: softmax output (2as²b), its dropout mask (as²b), the dropout output (2as²b). */
    int probs = tensor(b, "softmax_probs", 1, false, DIM_B, a, DIM_S, DIM_S);
    op.saved[op.n_saved++] = probs;
    if (c->dropout) {
      int dropped = tensor(b, "probs_dropout", 1, false, DIM_B, a, DIM_S, DIM_S);
      op.saved[op.n_saved++] = dropped;
      op.mask_of = dropped;
    }
  }
  add(b, &op);
  return matmul(b, "o_proj", o, a * dv, h, c->o_bias, true, false, true);
}

/* A dense MLP of width f on x; returns its output [B,S,h]. Plain: up, GeLU, down (saves the GeLU input,
 * Korthikanti §4.1). Gated: gate and up, act(gate)·up, down (saves gate and up, then the product). */
static int mlp(tb *b, const char *prefix, int x, int64_t f, bool bias) {
  const tf_config *c = b->c;
  char n1[64], n2[64], n3[64], n4[64];
  snprintf(n1, sizeof n1, "%s_up", prefix);
  snprintf(n2, sizeof n2, "%s_gate", prefix);
  snprintf(n3, sizeof n3, "%s_act", prefix);
  snprintf(n4, sizeof n4, "%s_down", prefix);
  int act;
  if (c->mlp == MLP_PLAIN) {
    int up = matmul(b, n1, x, c->hidden, f, bias, true, true, true);
    act = eltwise(b, n3, act_tp(b, n3, f), up, -1, 8, true, false);
  } else {
    int gate = matmul(b, n2, x, c->hidden, f, bias, true, true, true);
    int up = matmul(b, n1, x, c->hidden, f, bias, true, true, true);
    act = eltwise(b, n3, act_tp(b, n3, f), gate, up, 6, true, true);
  }
  return matmul(b, n4, act, f, c->hidden, bias, true, false, true);
}

/* The routed experts of an MoE layer (Shazeer et al. 2017; Fedus et al. 2021): router, dispatch of each
 * token to top_k experts, the expert MLPs as grouped matmuls over n_experts weight copies, and the weighted
 * combine. Under expert parallelism dispatch and combine are the all-to-alls. */
static int moe(tb *b, int x) {
  const tf_config *c = b->c;
  int64_t h = c->hidden, E = c->n_experts, k = c->top_k, f = c->moe_ffn;
  int logits = tensor(b, "router_logits", -1, true, DIM_B, DIM_S, E, 0);
  graph_op r = graph_op_init(OP_ROUTER, "router");
  r.n_in = 1;
  r.in[0] = x;
  r.out = logits;
  r.weight_k = h;
  r.weight_n = E;
  r.has_bias = c->router_bias;
  r.extra_params = c->router_score_bias ? E : 0;
  r.saved[r.n_saved++] = x;
  r.saved[r.n_saved++] = logits;
  add(b, &r);
  int disp = tensor(b, "dispatched", -1, false, DIM_B, DIM_S, k, h);
  graph_op d = graph_op_init(OP_DISPATCH, "dispatch");
  d.n_in = 2;
  d.in[0] = x;
  d.in[1] = logits;
  d.out = disp;
  add(b, &d);
  int act;
  int gate = -1, up;
  graph_op m = graph_op_init(OP_MATMUL, "expert_up");
  m.n_in = 1;
  m.in[0] = disp;
  m.weight_k = h;
  m.weight_n = f;
  m.n_experts = E;
  m.top_k = k;
  m.has_bias = c->expert_bias;
  m.tp_split = true;
  m.saved[m.n_saved++] = disp;
  up = tensor(b, "expert_up", 3, false, DIM_B, DIM_S, k, f);
  m.out = up;
  add(b, &m);
  if (c->mlp == MLP_GATED) {
    gate = tensor(b, "expert_gate", 3, false, DIM_B, DIM_S, k, f);
    m.name = "expert_gate";
    m.out = gate;
    add(b, &m);
  }
  act = tensor(b, "expert_act", 3, false, DIM_B, DIM_S, k, f);
  eltwise(b, "expert_act", act, gate >= 0 ? gate : up, gate >= 0 ? up : -1, c->mlp == MLP_GATED ? 6 : 8, true, true);
  int down = tensor(b, "expert_down", -1, false, DIM_B, DIM_S, k, h);
  graph_op dn = m;
  dn.name = "expert_down";
  dn.in[0] = act;
  dn.out = down;
  dn.weight_k = f;
  dn.weight_n = h;
  dn.n_saved = 1;
  dn.saved[0] = act;
  add(b, &dn);
  int y = act_h(b, "moe_out", h);
  graph_op cb = graph_op_init(OP_COMBINE, "combine");
  cb.n_in = 2;
  cb.in[0] = down;
  cb.in[1] = logits;
  cb.out = y;
  cb.saved[cb.n_saved++] = down;
  add(b, &cb);
  if (c->shared_ffn > 0) {
    int sh = mlp(b, "shared_expert", x, c->shared_ffn, false);
    if (c->shared_expert_gate) {
      int gl = matmul(b, "shared_expert_gate", x, h, 1, false, false, false, true);
      int gated = act_h(b, "shared_gated", h);
      eltwise(b, "shared_gate_mul", gated, sh, gl, 2, true, true);
      sh = gated;
    }
    int sum = act_h(b, "moe_plus_shared", h);
    y = eltwise(b, "add_shared", sum, y, sh, 1, false, false);
  }
  return y;
}

/* One decoder layer as a block body. */
static void layer(tb *b, bool is_moe, int64_t window) {
  const tf_config *c = b->c;
  int64_t h = c->hidden;
  int x = act_h(b, "x", h);
  b->gb.blk->input = x;
  int out;
  if (c->style == BLOCK_PARALLEL) {
    /* GPT-J / GPT-NeoX / Falcon: attention and MLP read the same input, x + attn(ln1 x) + mlp(ln2 x). */
    int n1 = norm(b, "ln_attn", x, h, false);
    int n2 = c->n_parallel_norms >= 2 ? norm(b, "ln_mlp", x, h, false) : n1;
    int att = dropout(b, "attn_dropout", attention(b, n1, window), h, false);
    int ml = is_moe ? moe(b, n2) : mlp(b, "mlp", n2, c->ffn, c->mlp_bias);
    ml = dropout(b, "mlp_dropout", ml, h, false);
    int s1 = eltwise(b, "residual", act_h(b, "residual", h), x, att, 1, false, false);
    out = eltwise(b, "residual2", act_h(b, "out", h), s1, ml, 1, false, false);
  } else {
    int n1 = c->pre_norms ? norm(b, "ln_attn", x, h, false) : x;
    int att = attention(b, n1, window);
    if (c->post_norms) att = norm(b, "post_attn_norm", att, h, false);
    att = dropout(b, "attn_dropout", att, h, false);
    int x2 = eltwise(b, "residual", act_h(b, "residual", h), x, att, 1, false, false);
    int n2 = c->pre_norms ? norm(b, "ln_mlp", x2, h, false) : x2;
    int ml = is_moe ? moe(b, n2) : mlp(b, "mlp", n2, c->ffn, c->mlp_bias);
    if (c->post_norms) ml = norm(b, "post_mlp_norm", ml, h, false);
    ml = dropout(b, "mlp_dropout", ml, h, false);
    out = eltwise(b, "residual2", act_h(b, "out", h), x2, ml, 1, false, false);
  }
  b->gb.blk->output = out;
  b->gb.blk->is_moe = is_moe;
}

static void embedding(tb *b) {
  const tf_config *c = b->c;
  int ids = graph_tensor_add(&b->gb, "token_ids", DT_INT64, -1, true, (int64_t[]){DIM_B, DIM_S}, 2);
  b->gb.blk->input = ids;
  int e = act_h(b, "embedded", c->hidden);
  graph_op op = graph_op_init(OP_EMBEDDING, "token_embedding");
  op.n_in = 1;
  op.in[0] = ids;
  op.out = e;
  op.extra_params = c->vocab * c->hidden;
  op.tp_split = true; /* Megatron's VocabParallelEmbedding splits the table by rows */
  add(b, &op);
  if (c->learned_pos) {
    int p = act_h(b, "positions", c->hidden);
    graph_op pe = graph_op_init(OP_EMBEDDING, "position_embedding");
    pe.n_in = 1;
    pe.in[0] = ids;
    pe.out = p;
    pe.extra_params = c->max_pos * c->hidden;
    add(b, &pe);
    e = eltwise(b, "add_positions", act_h(b, "embedded_pos", c->hidden), e, p, 1, false, false);
  }
  if (c->embed_norm) e = norm(b, "embed_norm", e, c->hidden, false);
  e = dropout(b, "embed_dropout", e, c->hidden, false);
  b->gb.blk->output = e;
}

static void head(tb *b) {
  const tf_config *c = b->c;
  int x = act_h(b, "x", c->hidden);
  b->gb.blk->input = x;
  int n = norm(b, "final_norm", x, c->hidden, false);
  int logits = tensor(b, "logits", 2, false, DIM_B, DIM_S, c->vocab, 0);
  graph_op op = graph_op_init(OP_MATMUL, "lm_head");
  op.n_in = 1;
  op.in[0] = n;
  op.out = logits;
  op.weight_k = c->hidden;
  op.weight_n = c->vocab;
  op.tp_split = true;
  op.tied = c->tied;
  op.saved[op.n_saved++] = n;
  add(b, &op);
  int loss = graph_tensor_add(&b->gb, "loss", DT_FP32, -1, false, (int64_t[]){1}, 1);
  graph_op l = graph_op_init(OP_LOSS, "cross_entropy");
  l.n_in = 1;
  l.in[0] = logits;
  l.out = loss;
  l.saved[l.n_saved++] = logits; /* the softmax of the logits is kept for the backward pass */
  add(b, &l);
  b->gb.blk->output = loss;
}

ap_status tf_build(ap_ctx *ctx, arena *a, const tf_config *c, graph *g) {
  memset(g, 0, sizeof *g);
  tb b = {.gb = {.a = a, .ctx = ctx}, .c = c};
  g->name = arena_strdup(a, c->name ? c->name : "model");
  g->model_type = arena_strdup(a, c->model_type ? c->model_type : "transformer");
  g->source = arena_strdup(a, c->source ? c->source : "");
  g->arch = c->arch;
  g->vocab_size = c->vocab;
  g->hidden_size = c->hidden;
  g->n_layers = c->n_layers;
  g->causal_lm = true;
  /* The sequence a plan that states none trains at: the context the model was pretrained at, as its config
   * says. A config whose rope_scaling names original_max_position_embeddings was pretrained at that length and
   * extended afterwards (Llama 3.1: 8192 then 131072, Meta's model card and "The Llama 3 Herd of Models" §3.4;
   * DeepSeek-V3's YaRN: 4096 then 128K, its report §4.3), so that is it; else max_position_embeddings. */
  if (c->arch.rope_original_max_pos > 0 && c->arch.rope_original_max_pos < c->max_pos) {
    g->default_seq = c->arch.rope_original_max_pos;
    g->default_seq_from = arena_printf(a, "%s's pretraining context: rope_scaling.original_max_position_embeddings of its "
                                          "config (extended to %lld after pretraining)", g->name, (long long)c->max_pos);
  } else if (c->max_pos_stated) {
    g->default_seq = c->max_pos;
    g->default_seq_from = arena_printf(a, "%s's context: max_position_embeddings of its config", g->name);
  } else {
    g->default_seq = c->max_pos;
    g->default_seq_from = arena_printf(a, "%s's config states no context length (max_position_embeddings); GPT-3's "
                                          "2048 assumed", g->name);
  }
  if (graph_block_begin(&b.gb, g, "embedding", BLOCK_EMBED, 1)) embedding(&b);
  for (int64_t i = 0; i < c->n_layers && !b.gb.oom;) {
    int64_t j = i + 1;
    while (j < c->n_layers && c->is_moe_layer[j] == c->is_moe_layer[i] && c->window_of_layer[j] == c->window_of_layer[i])
      j++;
    char name[64];
    if (c->window_of_layer[i] > 0)
      snprintf(name, sizeof name, "%s_layer_w%lld", c->is_moe_layer[i] ? "moe" : "dense", (long long)c->window_of_layer[i]);
    else
      snprintf(name, sizeof name, "%s_layer", c->is_moe_layer[i] ? "moe" : "dense");
    if (graph_block_begin(&b.gb, g, name, BLOCK_LAYER, j - i)) layer(&b, c->is_moe_layer[i], c->window_of_layer[i]);
    i = j;
  }
  if (!b.gb.oom && graph_block_begin(&b.gb, g, "head", BLOCK_HEAD, 1)) head(&b);
  if (b.gb.oom || !g->name || !g->model_type || !g->source || !g->default_seq_from) return ctx_fail(ctx, AP_NOMEM, "out of memory building the graph");
  ap_status st = graph_validate(ctx, g, c->name ? c->name : "model");
  return st ? st : graph_build_edges(ctx, a, g);
}
