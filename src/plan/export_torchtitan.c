/* The torchtitan exporter, current form (plan layer): a plan as a Python config module for torchtitan's
 * dataclass registry, which replaced the TOML job config in commit 9810191b (February 2026). Target:
 * pytorch/torchtitan @ b5bcd76c66d0acb1a08b176d9639425bc55e0b2a (August 2026); every field, class, model
 * flavor and config function written is in tests/data/framework_args.tsv. export_torchtitan_toml.c writes
 * the TOML form for v0.2.x; the model lookup, the split and the schedule names here serve both.
 *
 * The module defines autopar_plan() -> Trainer.Config: it starts from the model's size baseline in
 * torchtitan/models/MODEL/config_registry.py (data, tokenizer, optimizer, checkpointing) and sets what the
 * plan decides, one `config.section.field = value` line each. Conventions read in torchtitan @ b5bcd76c:
 *  - batches are token counts (torchtitan/config/configs.py TrainingConfig, trainer.py): one forward per
 *    data-parallel rank takes num_tokens_per_microbatch_per_dp_rank = mbs × seq tokens, pipelining runs
 *    num_pp_microbatches of them, and gradient accumulation is num_tokens_per_train_step / (that × pp
 *    micro-batches × dp), so num_tokens_per_train_step = gbs × seq;
 *  - data parallelism is FSDP2 over data_parallel_shard_degree; ZeRO-3 reshards after forward ("always"),
 *    ZeRO 0-2 keep parameters gathered from forward to backward ("never"), and a comment says so;
 *  - expert parallelism borrows its ranks from dp_shard·cp·tp and experts are not tensor-parallel ("EP
 *    borrows ranks from FSDP and TP: efsdp = dp_shard * cp * tp / ep", ParallelismConfig), so etp = 1;
 *  - activation checkpointing is a policy object: FullAC.Config() recomputes every layer, SelectiveAC.Config()
 *    is per-op (the plan's recompute "op"), None turns it off; the default is SelectiveAC
 *    (distributed/activation_checkpoint.py, trainer.py);
 *  - the split is module_fqns_per_model_part, one list per chunk in forward order: tok_embeddings first,
 *    layers.N, and the last chunk ends with norm and lm_head, the modules models/common/decoder.py builds and
 *    _generate_llm_fqn_per_model_part puts last (at v0.2.2 the head was `output`); _split_module sets every
 *    module a chunk does not list to None, and trainer.py asserts "Last PP stage must have lm_head for
 *    ChunkedLossWrapper". Looped schedules place chunk c on rank c mod pp, ZBVZeroBubble in a V
 *    (distributed/pipeline_parallel.py), as plan.h does;
 *  - Trainer.Config._validate_cuda_graphs (trainer.py) raises "CUDA graphs do not support pipeline parallelism
 *    yet" with pp > 1, and with ep > 1 unless the token dispatcher is MinimalAsyncEP or a non-blocking HybridEP
 *    (the registries' default moe_comm_backend "standard" builds AllToAllTokenDispatcher, which synchronises
 *    with the host): the export sets training.disable_cuda_graphs = True there;
 *  - CompileConfig.__post_init__ (config/configs.py) raises "Async TP requires 'model' in
 *    --compile.components and --compile.enable", and DeepSeek-V3's base configs compile only the loss
 *    (CompileConfig(enable=True, components=["loss"])): with async TP the export compiles model and loss;
 *  - the loss: every base config's ChunkedLossWrapper around CrossEntropyLoss is the plan's fused loss
 *    (plan/stack.c [TT-chunk]); an unfused plan unwraps it (config.loss = config.loss.loss_fn);
 *  - float8 is a model converter, model_registry(flavor, converters=[Float8LinearConverter.Config()]).
 * tests/test_export.c applies each of these checks, as tools/framework_args/extract.py reads them from the
 * sources, to every export. 
 * torchtitan trains its own model definitions only (torchtitan/models/: llama3, qwen3, deepseek_v3,
 * gpt_oss …); a model is exported when its shape is one of a registry's flavors, otherwise refused. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "plan/export.h"
#include "plan/stack.h"

/* ---- Shared with the TOML form ---- */

/* torch.distributed.pipelining schedule names, indexed by plan_schedule. zb-h1 is ZB1P (Qi et al. 2024),
 * which ScheduleInterleavedZeroBubble implements; with one stage per rank it is the plan's zb-h1. */
static const char *const schedule_names[] = {
    [PLAN_SCHED_GPIPE] = "GPipe",
    [PLAN_SCHED_1F1B] = "1F1B",
    [PLAN_SCHED_INTERLEAVED_1F1B] = "Interleaved1F1B",
    [PLAN_SCHED_ZB_H1] = "InterleavedZeroBubble",
    [PLAN_SCHED_ZB_V] = "ZBVZeroBubble",
};
_Static_assert(AP_COUNT(schedule_names) == PLAN_SCHED_COUNT_, "schedule_names and plan_schedule disagree");

const char *tt_schedule_name(plan_schedule s) { return schedule_names[s]; }

/* The flavors of torchtitan's model registries (torchtitan/models/MODEL/__init__.py, `*_configs` at b5bcd76c,
 * `*_args` at v0.2.2), with the sizes they set; 0 where the flavor's source states none. The export test
 * checks every row against tests/data/framework_args.tsv. */
const tt_flavor tt_flavors[] = {
    /* family    model         flavor       dim    layers heads kv  experts versions             base config (current) */
    {"llama", "llama3", "1B", 2048, 16, 32, 8, 0, TT_CURRENT, "llama3_debugmodel"},
    {"llama", "llama3", "3B", 3072, 28, 24, 8, 0, TT_CURRENT, "llama3_debugmodel"},
    {"llama", "llama3", "8B", 4096, 32, 32, 8, 0, TT_CURRENT | TT_TOML, "llama3_8b"},
    {"llama", "llama3", "70B", 8192, 80, 64, 8, 0, TT_CURRENT | TT_TOML, "llama3_70b"},
    {"llama", "llama3", "405B", 16384, 126, 128, 8, 0, TT_CURRENT | TT_TOML, "llama3_405b"},
    {"qwen3", "qwen3", "0.6B", 1024, 28, 16, 8, 0, TT_CURRENT | TT_TOML, "qwen3_0_6b"},
    {"qwen3", "qwen3", "1.7B", 2048, 28, 16, 8, 0, TT_CURRENT | TT_TOML, "qwen3_1_7b"},
    {"qwen3", "qwen3", "4B", 2560, 36, 32, 8, 0, TT_CURRENT | TT_TOML, "qwen3_debugmodel"},
    {"qwen3", "qwen3", "8B", 4096, 36, 32, 8, 0, TT_CURRENT | TT_TOML, "qwen3_debugmodel"},
    {"qwen3", "qwen3", "14B", 5120, 40, 40, 8, 0, TT_CURRENT | TT_TOML, "qwen3_14b"},
    {"qwen3", "qwen3", "32B", 5120, 64, 64, 8, 0, TT_CURRENT | TT_TOML, "qwen3_32b"},
    {"qwen3_moe", "qwen3", "30B-A3B", 2048, 48, 32, 4, 128, TT_CURRENT | TT_TOML, "qwen3_30b_a3b"},
    {"qwen3_moe", "qwen3", "235B-A22B", 4096, 94, 64, 4, 128, TT_CURRENT | TT_TOML, "qwen3_debugmodel"},
    {"deepseek_v3", "deepseek_v3", "16B", 2048, 27, 16, 0, 64, TT_CURRENT | TT_TOML, "deepseek_v3_16b"},
    {"deepseek_v2", "deepseek_v3", "16B", 2048, 27, 16, 0, 64, TT_CURRENT | TT_TOML, "deepseek_v3_16b"},
    {"deepseek_v2", "deepseek_v3", "236B", 5120, 60, 128, 0, 160, TT_CURRENT | TT_TOML, "deepseek_v3_debugmodel"},
    {"deepseek_v3", "deepseek_v3", "671B", 7168, 61, 128, 0, 256, TT_CURRENT | TT_TOML, "deepseek_v3_671b"},
    {"gpt_oss", "gpt_oss", "20b", 2880, 24, 0, 0, 32, TT_CURRENT | TT_TOML, "gpt_oss_20b"},
    {"gpt_oss", "gpt_oss", "120b", 2880, 36, 0, 0, 128, TT_CURRENT | TT_TOML, "gpt_oss_120b"},
};
const size_t tt_n_flavors = AP_COUNT(tt_flavors);

bool tt_trains_family(const graph *g) {
  for (size_t i = 0; i < tt_n_flavors; i++)
    if (g->model_type && strcmp(tt_flavors[i].family, g->model_type) == 0) return true;
  return false;
}

ap_status tt_model_of(ap_ctx *ctx, const char *format, const graph *g, unsigned version, const tt_flavor **out) {
  *out = NULL;
  plan_model_facts f;
  plan_model_facts_of(g, &f);
  if (!f.has_layers || f.n_attention_ops == 0)
    return ctx_fail(ctx, AP_UNSUPPORTED,
                    "%s export: torchtitan trains its own transformer models, and model %s has no attention layers",
                    format, g->name);
  bool family = false;
  int64_t heads = 0, kv = 0;
  for (int i = 0; i < g->n_blocks && !heads; i++)
    for (int j = 0; j < g->blocks[i].n_ops; j++)
      if (g->blocks[i].ops[j].kind == OP_ATTENTION) {
        heads = g->blocks[i].ops[j].heads;
        kv = g->blocks[i].ops[j].kv_heads > 0 ? g->blocks[i].ops[j].kv_heads : heads;
        break;
      }
  char names[256] = "";
  for (size_t i = 0; i < tt_n_flavors; i++) {
    const tt_flavor *t = &tt_flavors[i];
    if (!(t->versions & version) || strcmp(t->family, g->model_type) != 0) continue;
    family = true;
    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? ", " : "", t->flavor);
    bool fits = t->dim == g->hidden_size && t->n_layers == f.n_layers && (!t->n_heads || t->n_heads == heads) &&
                (!t->n_kv_heads || t->n_kv_heads == kv) && (!t->n_experts || t->n_experts == f.n_experts) &&
                (t->n_experts > 0) == (f.n_experts > 1);
    if (fits) {
      *out = t;
      return AP_OK;
    }
  }
  if (!family)
    return ctx_fail(ctx, AP_UNSUPPORTED,
                    "%s export: torchtitan has no %s model (model_type \"%s\"); it trains llama3, qwen3, deepseek_v3 "
                    "and gpt_oss (torchtitan/models/)",
                    format, g->name, g->model_type);
  return ctx_fail(ctx, AP_UNSUPPORTED,
                  "%s export: %s (hidden %lld, %lld layers, %lld heads, %lld KV heads) is none of torchtitan's %s "
                  "flavors (%s); add a flavor to its model registry",
                  format, g->name, (long long)g->hidden_size, (long long)f.n_layers, (long long)heads, (long long)kv,
                  g->model_type, names);
}

ap_status tt_common_check(ap_ctx *ctx, const char *format, const plan *p, const graph *g) {
  if (p->precision == PLAN_PREC_FP16)
    return ctx_fail(ctx, AP_UNSUPPORTED, "%s export: torchtitan's mixed precision is bfloat16 or float32, not fp16",
                    format);
  int32_t layers[PLAN_MAX_CHUNKS];
  if (!export_chunk_layers(p, g, layers)) return ctx_fail(ctx, AP_INTERNAL, "%s export: no pipeline split", format);
  int32_t most = 0;
  for (int64_t c = 0; c < plan_n_chunks(p); c++) most = layers[c] > most ? layers[c] : most;
  if (p->recompute == PLAN_RECOMPUTE_FULL && p->recompute_layers > 0 && p->recompute_layers < most)
    return ctx_fail(ctx, AP_UNSUPPORTED,
                    "%s export: torchtitan cannot recompute only the first %d layers of each chunk (FullAC recomputes "
                    "every layer, distributed/activation_checkpoint.py)",
                    format, (int)p->recompute_layers);
  if (!export_order_is(p, "tp-cp-ep-dp-pp")) {
    char mine[64];
    export_order_text(p, p->order, mine, sizeof mine);
    return ctx_fail(ctx, AP_UNSUPPORTED,
                    "%s export: torchtitan builds its device mesh pp, dp, cp, tp from outermost to innermost "
                    "(distributed/parallel_dims.py), which the plan's order %s is not",
                    format, mine);
  }
  return AP_OK;
}

void tt_fqns(strbuf *sb, const char *indent, const int32_t *layers, int64_t n_chunks, const char *last) {
  int64_t next = 0;
  for (int64_t c = 0; c < n_chunks; c++) {
    bool first = true;
    sb_printf(sb, "%s[", indent);
    if (c == 0) {
      sb_puts(sb, "\"tok_embeddings\"");
      first = false;
    }
    for (int32_t i = 0; i < layers[c]; i++, next++) {
      sb_printf(sb, "%s\"layers.%lld\"", first ? "" : ", ", (long long)next);
      first = false;
    }
    if (c == n_chunks - 1) sb_printf(sb, "%s%s", first ? "" : ", ", last);
    sb_puts(sb, c == n_chunks - 1 ? "]\n" : "],\n");
  }
}

/* ---- The current form ---- */

ap_status torchtitan_can_express(ap_ctx *ctx, const plan *p, const graph *g) {
  if (p->offload_optimizer != PLAN_OFFLOAD_NONE || p->offload_param != PLAN_OFFLOAD_NONE)
    return ctx_fail(ctx, AP_UNSUPPORTED,
                    "torchtitan export: torchtitan offloads parameters, gradients and optimizer states together and "
                    "only to CPU (FSDP2's CPUOffloadPolicy), which autopar does not cost (export offload plans to "
                    "deepspeed)");
  const tt_flavor *t;
  ap_status st = tt_model_of(ctx, "torchtitan", g, TT_CURRENT, &t);
  if (!st) st = tt_common_check(ctx, "torchtitan", p, g);
  if (st) return st;
  if (p->ep > 1 && plan_etp(p) != 1)
    return ctx_fail(ctx, AP_UNSUPPORTED,
                    "torchtitan export: torchtitan @ b5bcd76c takes expert-parallel ranks from dp_shard x cp x tp "
                    "and does not split experts by tensor parallelism (ParallelismConfig.expert_parallel_degree), "
                    "so etp must be 1, got %lld",
                    (long long)plan_etp(p));
  if (p->recompute == PLAN_RECOMPUTE_SELECTIVE)
    return ctx_fail(ctx, AP_UNSUPPORTED,
                    "torchtitan export: torchtitan @ b5bcd76c has no core-attention recompute (its SelectiveAC is per "
                    "op, FullAC every layer)");
  /* trainer.py: the tokens of a micro-batch must divide by tp (with sequence parallelism) times 2·cp; the
   * chunked loss splits a rank's tokens into num_chunks equal slices (components/loss.py torch._check). */
  int64_t tokens = p->micro_batch_size * export_seq_length(p, g);
  int64_t div = (p->sequence_parallel || p->tp == 1 ? p->tp : 1) * (p->cp > 1 ? 2 * p->cp : 1);
  if (tokens % div != 0)
    return ctx_fail(ctx, AP_UNSUPPORTED,
                    "torchtitan export: a micro-batch's %lld tokens must divide by %lld (tp x 2·cp, trainer.py)",
                    (long long)tokens, (long long)div);
  if (p->fused_loss && (tokens / p->cp) % PLAN_STACK_TT_LOSS_CHUNKS != 0)
    return ctx_fail(ctx, AP_UNSUPPORTED,
                    "torchtitan export: ChunkedLossWrapper splits a rank's %lld tokens into %d equal slices "
                    "(components/loss.py), which %lld is not a multiple of",
                    (long long)(tokens / p->cp), PLAN_STACK_TT_LOSS_CHUNKS, (long long)(tokens / p->cp));
  return AP_OK;
}

static void line(strbuf *sb, const char *field, const char *fmt, ...) AP_PRINTF(3, 4);
static void line(strbuf *sb, const char *field, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sb_printf(sb, "    config.%s = ", field);
  sb_vprintf(sb, fmt, ap);
  sb_puts(sb, "\n");
  va_end(ap);
}

ap_status export_torchtitan(ap_ctx *ctx, const plan *p, const graph *g, const export_launch *l, strbuf *out) {
  ap_status st = torchtitan_can_express(ctx, p, g);
  if (st) return st;
  const tt_flavor *t;
  tt_model_of(ctx, "torchtitan", g, TT_CURRENT, &t);
  int32_t layers[PLAN_MAX_CHUNKS];
  export_chunk_layers(p, g, layers);
  int64_t seq = export_seq_length(p, g);
  bool pipe = p->pp > 1, fp8 = p->precision == PLAN_PREC_FP8, async_tp = p->tp_comm_overlap && p->tp > 1;
  const char *ac = p->recompute == PLAN_RECOMPUTE_FULL ? "FullAC" : p->recompute == PLAN_RECOMPUTE_OP ? "SelectiveAC" : NULL;
  export_sched sc; /* the schedule's kind and micro-batches, from the schedule data */
  if ((st = export_schedule_facts(ctx, p, &sc))) return st;

  /* CUDA graphs (on by default) refuse pipeline parallelism and a blocking token dispatcher (trainer.py). */
  bool no_graphs = pipe || p->ep > 1;
  strbuf sb = {0};
  sb_puts(&sb, "# autopar plan: ");
  export_summary(p, g, &sb);
  sb_puts(&sb, "\n# torchtitan @ b5bcd76c (August 2026) config module, the Python dataclass registry that replaced "
               "TOML in commit 9810191b;\n# for v0.2.x use --format torchtitan-toml. Save as autopar_plan.py on the "
               "PYTHONPATH of every node.\n");
  export_launch_comment(l, " -m torchtitan.train --module autopar_plan --config autopar_plan", NULL, &sb);
  sb_printf(&sb, "# %lld ranks; model %s flavor %s (matched by its sizes; rope, norm and init are the flavor's); "
                 "data, tokenizer and optimizer come from %s()\n",
            (long long)plan_n_devices(p), t->model, t->flavor, t->base);
  export_launch_note(p, l, &sb);
  sb_printf(&sb, "# loss: %s\n",
            p->fused_loss ? "the base config's ChunkedLossWrapper (8 slices of the tokens, lm_head and loss per slice), the "
                            "plan's fused loss"
                          : "the unchunked CrossEntropyLoss inside the base config's ChunkedLossWrapper, as the plan is "
                            "costed");
  if (no_graphs)
    sb_printf(&sb, "# note: CUDA graphs are off: torchtitan does not capture them with %s (trainer.py "
                   "_validate_cuda_graphs)\n",
              pipe ? "pipeline parallelism" : "expert parallelism over the default all-to-all token dispatcher");
  if (p->dp > 1 && p->zero_stage < 3)
    sb_printf(&sb, "# note: torchtitan has no ZeRO-%d; it shards with FSDP2 and keeps parameters gathered from forward "
                   "to backward (fsdp_reshard_after_forward \"never\"), so parameters at rest take less memory than "
                   "planned\n",
              (int)p->zero_stage);
  if (p->tp > 1 && !p->sequence_parallel)
    sb_puts(&sb, "# note: enable_sequence_parallel = False: norms and dropout are not split along the sequence\n");
  if (pipe && p->schedule == PLAN_SCHED_ZB_H1)
    sb_puts(&sb, "# note: zb-h1 is InterleavedZeroBubble (ZB1P) run with one stage per rank\n");
  export_schedule_note(&sc, &sb);
  sb_puts(&sb, "\n");
  if (ac) sb_printf(&sb, "from torchtitan.distributed.activation_checkpoint import %s\n", ac);
  if (fp8) sb_puts(&sb, "from torchtitan.components.quantization import Float8LinearConverter\n");
  sb_printf(&sb, "from torchtitan.models.%s import model_registry\n", t->model);
  sb_printf(&sb, "from torchtitan.models.%s.config_registry import %s\n", t->model, t->base);
  sb_puts(&sb, "from torchtitan.trainer import Trainer\n\n\ndef autopar_plan() -> Trainer.Config:\n");
  sb_printf(&sb, "    config = %s()\n", t->base);
  if (fp8) line(&sb, "model_spec", "model_registry(\"%s\", converters=[Float8LinearConverter.Config()])", t->flavor);
  else line(&sb, "model_spec", "model_registry(\"%s\")", t->flavor);
  line(&sb, "training.num_tokens_per_microbatch_per_dp_rank", "%lld", (long long)(p->micro_batch_size * seq));
  line(&sb, "training.num_tokens_per_train_step", "%lld", (long long)(p->global_batch_size * seq));
  line(&sb, "training.max_context_length", "%lld", (long long)seq);
  line(&sb, "training.mixed_precision_param", "\"bfloat16\"");
  if (no_graphs) line(&sb, "training.disable_cuda_graphs", "True");
  if (!p->fused_loss) line(&sb, "loss", "config.loss.loss_fn");
  line(&sb, "parallelism.data_parallel_replicate_degree", "1");
  line(&sb, "parallelism.data_parallel_shard_degree", "%lld", (long long)p->dp);
  line(&sb, "parallelism.fsdp_reshard_after_forward", "\"%s\"", p->zero_stage == 3 ? "always" : "never");
  line(&sb, "parallelism.tensor_parallel_degree", "%lld", (long long)p->tp);
  line(&sb, "parallelism.enable_sequence_parallel", "%s", p->sequence_parallel || p->tp == 1 ? "True" : "False");
  line(&sb, "parallelism.pipeline_parallel_degree", "%lld", (long long)p->pp);
  if (pipe) {
    line(&sb, "parallelism.pipeline_parallel_schedule", "\"%s\"", schedule_names[sc.kind]);
    line(&sb, "parallelism.num_pp_microbatches", "%lld", (long long)sc.micro_batches);
    sb_puts(&sb, "    config.parallelism.module_fqns_per_model_part = [\n");
    tt_fqns(&sb, "        ", layers, plan_n_chunks(p), "\"norm\", \"lm_head\"");
    sb_puts(&sb, "    ]\n");
  }
  line(&sb, "parallelism.context_parallel_degree", "%lld", (long long)p->cp);
  line(&sb, "parallelism.expert_parallel_degree", "%lld", (long long)p->ep);
  if (ac) line(&sb, "activation_checkpoint", "%s.Config()", ac);
  else line(&sb, "activation_checkpoint", "None");
  if (async_tp) { /* async TP needs the model compiled, which some base configs leave out (config/configs.py) */
    line(&sb, "compile.enable", "True");
    line(&sb, "compile.components", "[\"model\", \"loss\"]");
    line(&sb, "compile.enable_async_tensor_parallel", "True");
  }
  sb_puts(&sb, "    return config\n");
  if (sb.oom) {
    sb_free(&sb);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  sb_puts(out, sb.buf);
  sb_free(&sb);
  return AP_OK;
}
