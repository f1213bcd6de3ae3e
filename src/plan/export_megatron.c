/* The Megatron-LM exporter (plan layer): a plan as the command-line arguments of Megatron-LM's
 * pretrain_gpt.py, with the flag names of COSTMODEL.md §6.2 and nothing else, one flag per line with ` \`
 * continuations so that the text pastes after a launcher line in bash.
 *
 * The model's shape comes from the graph the transformer builder made (model/transformer.c): op kinds and the
 * builder's op names (mlp_up, expert_up, q_down, kv_up, rope_q …) say which Megatron flags apply. The
 * combinations follow the checks Megatron makes before it trains, read in Megatron-LM @ d98e8a64
 * (megatron/training/arguments.py validate_args, megatron/core/transformer/transformer_config.py
 * __post_init__), so that every argument set written here is one Megatron accepts together:
 *  - v is set by --num-layers-per-virtual-pipeline-stage only for an even split; an uneven one uses
 *    --num-virtual-stages-per-pipeline-rank, never both ("No more than one of the following arguments");
 *  - --decoder-first/last-pipeline-num-layers must be > 0, leave the middle stages an equal share, and with
 *    virtual stages be divisible by v on every rank ("Uneven PP" in transformer_config.py);
 *  - selective recompute takes neither --recompute-method nor --recompute-num-layers; full takes both;
 *  - --overlap-param-gather needs the distributed optimizer or Megatron-FSDP and --overlap-grad-reduce;
 *  - Megatron-FSDP requires --ckpt-format fsdp_dtensor and turns on the distributed optimizer itself;
 *  - --tp-comm-overlap needs --sequence-parallel; --fp16 and --bf16 exclude each other.
 * docs/exports.md has the mapping table and what is not exported. */
#include <stdio.h>
#include <string.h>

#include "plan/export.h"

/* ---- The model's shape, read from its graph ---- */

typedef struct {
  int64_t n_layers, hidden, heads, kv_heads, head_dim;
  int64_t ffn; /* dense MLP width; 0 when every layer is MoE */
  bool gated, layernorm, rope, learned_pos, tied, mla, has_attention, has_head;
  int64_t pos_rows; /* rows of the learned position table */
  int64_t n_experts, top_k, moe_ffn, shared_ffn;
  int64_t q_lora_rank, kv_lora_rank;
  bool mixed; /* some layers dense, some MoE: --moe-layer-freq states which */
} mshape;

static bool named(const graph_op *op, const char *name) { return op->name && strcmp(op->name, name) == 0; }

static bool ends_with(const char *s, const char *suffix) {
  size_t n = s ? strlen(s) : 0, m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Routed experts are the matmuls with several weight copies (graph.h). */
static bool block_is_moe(const graph_block *blk) {
  for (int j = 0; j < blk->n_ops; j++)
    if (blk->ops[j].kind == OP_MATMUL && blk->ops[j].n_experts > 1) return true;
  return false;
}

/* Fills s from g; returns false when g is not a transformer Megatron can build (no layer blocks, or no
 * attention, MLP or LM head). */
static bool shape_of(const graph *g, mshape *s) {
  memset(s, 0, sizeof *s);
  s->hidden = g->hidden_size;
  bool norm_seen = false, any_dense = false, any_moe = false;
  for (int i = 0; i < g->n_blocks; i++) {
    const graph_block *blk = &g->blocks[i];
    for (int j = 0; j < blk->n_ops; j++) {
      const graph_op *op = &blk->ops[j];
      if (op->kind == OP_EMBEDDING && named(op, "position_embedding") && s->hidden > 0) {
        s->learned_pos = true;
        s->pos_rows = op->extra_params / s->hidden;
      }
      if (op->kind == OP_MATMUL && named(op, "lm_head")) {
        s->has_head = true;
        s->tied = op->tied;
      }
      if (blk->role != BLOCK_LAYER) continue;
      switch (op->kind) {
      case OP_ATTENTION:
        if (!s->has_attention) {
          s->has_attention = true;
          s->heads = op->heads;
          s->kv_heads = op->kv_heads > 0 ? op->kv_heads : op->heads;
          s->head_dim = op->head_dim_qk;
        }
        break;
      case OP_NORM:
        /* The builder's LayerNorm costs 7 FLOP per element, its RMSNorm 4 (transformer.c norm()). */
        if (!norm_seen) s->layernorm = op->flop_per_elem > 5.5;
        norm_seen = true;
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
        } else if (named(op, "mlp_up")) {
          s->ffn = op->weight_n;
        } else if (named(op, "shared_expert_up")) {
          s->shared_ffn = op->weight_n;
        } else if (named(op, "q_down") || named(op, "kv_down")) {
          s->mla = true;
        } else if (named(op, "q_up")) {
          s->q_lora_rank = op->weight_k;
        } else if (named(op, "kv_up")) {
          s->kv_lora_rank = op->weight_k;
        }
        break;
      default:
        break;
      }
    }
    if (blk->role != BLOCK_LAYER) continue;
    s->n_layers += blk->repeat;
    if (block_is_moe(blk)) any_moe = true;
    else any_dense = true;
  }
  s->mixed = any_moe && any_dense;
  if (s->n_experts > 1 && s->moe_ffn == 0) return false;
  if (s->n_experts > 1 && s->ffn == 0) s->ffn = s->moe_ffn; /* every layer MoE (Mixtral) */
  return s->n_layers > 0 && s->has_attention && s->has_head && s->hidden > 0 && s->heads > 0 && s->ffn > 0;
}

/* ---- The argument list ---- */

typedef struct {
  strbuf body;  /* "--flag value" lines joined by " \\\n" */
  strbuf notes; /* "# …\n" lines for the header */
} args;

static void flag(args *a, const char *name, const char *value) {
  if (a->body.len) sb_puts(&a->body, " \\\n");
  sb_puts(&a->body, name);
  if (value) sb_printf(&a->body, " %s", value);
}

static void flag_i(args *a, const char *name, int64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%lld", (long long)v);
  flag(a, name, buf);
}

static void note(args *a, const char *fmt, ...) AP_PRINTF(2, 3);
static void note(args *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sb_puts(&a->notes, "# ");
  sb_vprintf(&a->notes, fmt, ap);
  sb_puts(&a->notes, "\n");
  va_end(ap);
}

static void split_text(const int32_t *layers, int64_t n, char *buf, size_t cap) {
  buf[0] = '\0';
  for (int64_t c = 0; c < n && strlen(buf) + 16 < cap; c++)
    snprintf(buf + strlen(buf), cap - strlen(buf), "%s%d", c ? "," : "[", (int)layers[c]);
  snprintf(buf + strlen(buf), cap - strlen(buf), "]");
}

static ap_status no_layout(ap_ctx *ctx, const char *why, const int32_t *layers, int64_t n) {
  char split[512];
  split_text(layers, n, split, sizeof split);
  return ctx_fail(ctx, AP_UNSUPPORTED,
                  "megatron export: the pipeline split %s %s; only --pipeline-model-parallel-layout could state it, "
                  "and COSTMODEL.md §6.2 does not document its syntax (choose a split whose middle stages are equal)",
                  split, why);
}

/* The per-rank layer counts a[0..pp-1] as --decoder-first/last-pipeline-num-layers: the middle ranks must
 * hold equal shares (Megatron divides the rest evenly among them) and the first and the last at least one
 * layer. Writes nothing for an even split. */
static ap_status first_last(ap_ctx *ctx, args *a, const int64_t *per_rank, int64_t pp, const int32_t *layers,
                            int64_t n_chunks) {
  bool even = true;
  for (int64_t r = 1; r < pp; r++) even = even && per_rank[r] == per_rank[0];
  if (even) return AP_OK;
  if (per_rank[0] == 0 || per_rank[pp - 1] == 0)
    return no_layout(ctx, "has an empty first or last stage (Megatron's first/last stage sizes must be > 0)", layers,
                     n_chunks);
  for (int64_t r = 2; r < pp - 1; r++)
    if (per_rank[r] != per_rank[1]) return no_layout(ctx, "has unequal middle stages", layers, n_chunks);
  int64_t middle = pp > 2 ? per_rank[1] : -1;
  if (per_rank[0] != middle) flag_i(a, "--decoder-first-pipeline-num-layers", per_rank[0]);
  if (per_rank[pp - 1] != middle) flag_i(a, "--decoder-last-pipeline-num-layers", per_rank[pp - 1]);
  return AP_OK;
}

/* Pipeline degree, virtual stages and the split. Chunk c runs on rank c mod pp (plan.h), so with v chunks
 * per rank a rank's layers are split[r], split[r+pp], …; Megatron gives each of a rank's chunks the same
 * share of its layers. */
static ap_status pipeline_flags(ap_ctx *ctx, args *a, const plan *p, const graph *g) {
  flag_i(a, "--pipeline-model-parallel-size", p->pp);
  if (p->pp == 1) return AP_OK;
  int32_t layers[PLAN_MAX_CHUNKS];
  if (!export_chunk_layers(p, g, layers)) return ctx_fail(ctx, AP_INTERNAL, "megatron export: no pipeline split");
  int64_t n = plan_n_chunks(p), pp = p->pp, v = p->vpp;
  int64_t per_rank[PLAN_MAX_CHUNKS] = {0};
  for (int64_t c = 0; c < n; c++) {
    if (layers[c] != layers[c % pp])
      return no_layout(ctx, "gives one rank's virtual stages different layer counts", layers, n);
    per_rank[c % pp] += layers[c];
  }
  if (v == 1) return first_last(ctx, a, per_rank, pp, layers, n);
  bool uniform = true;
  for (int64_t c = 1; c < n; c++) uniform = uniform && layers[c] == layers[0];
  if (uniform) {
    flag_i(a, "--num-layers-per-virtual-pipeline-stage", layers[0]);
    return AP_OK;
  }
  flag_i(a, "--num-virtual-stages-per-pipeline-rank", v);
  return first_last(ctx, a, per_rank, pp, layers, n);
}

/* '([0]*3+[1]*58)': the python-list string of --moe-layer-freq (1 = MoE layer), one term per run of layers
 * of one kind in forward order, quoted for bash. */
static void moe_layer_freq(const graph *g, strbuf *sb) {
  sb_puts(sb, "'(");
  int n_terms = 0;
  for (int i = 0; i < g->n_blocks;) {
    if (g->blocks[i].role != BLOCK_LAYER) {
      i++;
      continue;
    }
    bool moe = block_is_moe(&g->blocks[i]);
    int64_t run = 0;
    for (; i < g->n_blocks && (g->blocks[i].role != BLOCK_LAYER || block_is_moe(&g->blocks[i]) == moe); i++)
      if (g->blocks[i].role == BLOCK_LAYER) run += g->blocks[i].repeat;
    sb_printf(sb, "%s[%d]*%lld", n_terms++ ? "+" : "", moe ? 1 : 0, (long long)run);
  }
  sb_puts(sb, ")'");
}

static void model_flags(args *a, const mshape *s, const graph *g, int64_t seq) {
  flag_i(a, "--num-layers", s->n_layers);
  flag_i(a, "--hidden-size", s->hidden);
  flag_i(a, "--ffn-hidden-size", s->ffn);
  flag_i(a, "--num-attention-heads", s->heads);
  if (!s->mla) {
    if (s->kv_heads < s->heads) {
      flag(a, "--group-query-attention", NULL);
      flag_i(a, "--num-query-groups", s->kv_heads);
    }
    if (s->hidden % s->heads != 0 || s->head_dim != s->hidden / s->heads) flag_i(a, "--kv-channels", s->head_dim);
  }
  flag_i(a, "--seq-length", seq);
  /* Megatron requires max_position_embeddings >= seq_length; rotary models take the trained length. */
  flag_i(a, "--max-position-embeddings", s->learned_pos ? s->pos_rows : seq);
  if (s->gated) flag(a, "--swiglu", NULL);
  flag(a, "--normalization", s->layernorm ? "LayerNorm" : "RMSNorm");
  flag(a, "--position-embedding-type", s->learned_pos ? "learned_absolute" : s->rope ? "rope" : "none");
  if (!s->tied) flag(a, "--untie-embeddings-and-output-weights", NULL);
  if (s->mla) {
    flag(a, "--multi-latent-attention", NULL);
    if (s->q_lora_rank > 0) flag_i(a, "--q-lora-rank", s->q_lora_rank);
    flag_i(a, "--kv-lora-rank", s->kv_lora_rank);
    note(a, "note: MLA head dims (--qk-head-dim etc.) are not in COSTMODEL.md §6.2 and are left to Megatron's "
            "defaults (DeepSeek-V2/V3's 128/64/128)");
  }
  if (s->n_experts > 1) {
    flag_i(a, "--num-experts", s->n_experts);
    flag_i(a, "--moe-router-topk", s->top_k);
    flag_i(a, "--moe-ffn-hidden-size", s->moe_ffn);
    if (s->shared_ffn > 0) flag_i(a, "--moe-shared-expert-intermediate-size", s->shared_ffn);
    if (s->mixed) {
      strbuf freq = {0};
      moe_layer_freq(g, &freq);
      flag(a, "--moe-layer-freq", freq.buf ? freq.buf : "1");
      sb_free(&freq);
    }
    flag(a, "--moe-grouped-gemm", NULL);
    flag(a, "--moe-token-dispatcher-type", "alltoall");
  }
}

ap_status export_megatron(ap_ctx *ctx, const plan *p, const graph *g, strbuf *out) {
  mshape s;
  if (!shape_of(g, &s))
    return ctx_fail(ctx, AP_UNSUPPORTED,
                    "megatron export: model %s is not a transformer Megatron-LM builds (it needs layer blocks with "
                    "attention, an MLP and an LM head, as from a preset or a Hugging Face config)",
                    g->name);
  if (p->pp > 1 && (p->schedule == PLAN_SCHED_ZB_H1 || p->schedule == PLAN_SCHED_ZB_V))
    return ctx_fail(ctx, AP_UNSUPPORTED,
                    "megatron export: Megatron-LM has no %s schedule (it runs 1F1B and interleaved 1F1B); "
                    "re-plan with --schedule 1f1b or interleaved-1f1b",
                    plan_schedule_name(p->schedule));
  if (p->recompute == PLAN_RECOMPUTE_OP)
    return ctx_fail(ctx, AP_UNSUPPORTED,
                    "megatron export: Megatron-LM has no per-op selective checkpointing (recompute \"op\", "
                    "torchtitan's selective_ac_option op); re-plan with --recompute selective or full");
  int64_t seq = export_seq_length(p, g);
  if (s.learned_pos && seq > s.pos_rows)
    return ctx_fail(ctx, AP_INVALID,
                    "megatron export: seq_length = %lld exceeds the model's %lld learned positions (Megatron requires "
                    "max_position_embeddings >= seq_length)",
                    (long long)seq, (long long)s.pos_rows);

  args a = {{0}, {0}};
  model_flags(&a, &s, g, seq);

  /* Parallelism. Megatron derives dp = world / (tp·pp·cp); it has no dp flag. */
  flag_i(&a, "--tensor-model-parallel-size", p->tp);
  ap_status st = pipeline_flags(ctx, &a, p, g);
  if (st) {
    sb_free(&a.body);
    sb_free(&a.notes);
    return st;
  }
  flag_i(&a, "--context-parallel-size", p->cp);
  if (s.n_experts > 1) {
    flag_i(&a, "--expert-model-parallel-size", p->ep);
    flag_i(&a, "--expert-tensor-parallel-size", plan_etp(p));
  }
  bool sp = p->sequence_parallel && p->tp > 1; /* Megatron turns sequence parallelism off at tp = 1 */
  if (sp) flag(&a, "--sequence-parallel", NULL);

  flag_i(&a, "--micro-batch-size", p->micro_batch_size);
  flag_i(&a, "--global-batch-size", p->global_batch_size);

  if (p->recompute == PLAN_RECOMPUTE_SELECTIVE) {
    flag(&a, "--recompute-granularity", "selective");
  } else if (p->recompute == PLAN_RECOMPUTE_FULL) {
    flag(&a, "--recompute-granularity", "full");
    flag(&a, "--recompute-method", p->recompute_layers > 0 ? "block" : "uniform");
    flag_i(&a, "--recompute-num-layers", p->recompute_layers > 0 ? p->recompute_layers : 1);
  }

  bool fsdp = p->zero_stage >= 2;
  if (p->zero_stage == 1) flag(&a, "--use-distributed-optimizer", NULL);
  if (fsdp) {
    flag(&a, "--use-megatron-fsdp", NULL);
    flag(&a, "--data-parallel-sharding-strategy", p->zero_stage == 2 ? "optim_grads" : "optim_grads_params");
    flag(&a, "--ckpt-format", "fsdp_dtensor");
  }
  if (p->overlap_grad_reduce) flag(&a, "--overlap-grad-reduce", NULL);
  if (p->overlap_param_gather && p->zero_stage >= 1) {
    if (p->overlap_grad_reduce) flag(&a, "--overlap-param-gather", NULL);
    else note(&a, "note: --overlap-param-gather left out: Megatron accepts it only with --overlap-grad-reduce");
  }
  if (p->tp_comm_overlap && sp) flag(&a, "--tp-comm-overlap", NULL);
  if (p->fused_loss) {
    /* Transformer Engine's cross entropy writes the gradient over the logits (plan.h fused_loss). */
    flag(&a, "--cross-entropy-loss-fusion", NULL);
    flag(&a, "--cross-entropy-fusion-impl", "te");
  }

  flag(&a, p->precision == PLAN_PREC_FP16 ? "--fp16" : "--bf16", NULL);
  if (p->precision == PLAN_PREC_FP8) flag(&a, "--fp8-format", "hybrid");

  /* The header: what the plan is, what the user still adds, and the environment Megatron checks. */
  strbuf h = {0};
  sb_puts(&h, "# autopar plan: ");
  export_summary(p, g, &h);
  sb_puts(&h, "\n# Megatron-LM arguments (pretrain_gpt.py; names from COSTMODEL.md §6.2). Add data, tokenizer, "
              "optimizer and logging flags.\n");
  sb_printf(&h, "# launch %lld ranks: Megatron derives dp = world / (tp x pp x cp) = %lld\n",
            (long long)plan_n_devices(p), (long long)p->dp);
  if (fsdp)
    sb_puts(&h, "# env: leave CUDA_DEVICE_MAX_CONNECTIONS unset or > 1 (Megatron-FSDP asserts it)\n");
  else if (p->tp > 1 || p->cp > 1)
    sb_puts(&h, "# env: export CUDA_DEVICE_MAX_CONNECTIONS=1 (Megatron asserts it for tp or cp > 1 before Blackwell)\n");
  if (p->pp > 1 && p->schedule == PLAN_SCHED_GPIPE)
    sb_puts(&h, "# note: Megatron-LM has no GPipe schedule; it runs this plan as 1F1B (the same bubble, fewer "
                "micro-batches in flight)\n");
  export_order_note(p, "Megatron-LM", &h);
  sb_puts(&h, a.notes.buf ? a.notes.buf : "");
  sb_puts(&h, a.body.buf ? a.body.buf : "");
  sb_puts(&h, "\n");
  sb_free(&a.body);
  sb_free(&a.notes);
  if (h.oom) {
    sb_free(&h);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  sb_puts(out, h.buf);
  sb_free(&h);
  return AP_OK;
}
