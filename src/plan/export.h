/* Exporters (plan layer): a plan written in the terms of a training framework, so that what autopar chose
 * can be run. DESIGN.md's data flow ends here: every exporter reads the same plan type and the same model
 * graph and re-derives nothing the plan already says. docs/exports.md lists, field by field, what each
 * format contains, which framework version it targets, and what it cannot express.
 *
 *  - export_megatron (+ export_megatron_model.c): a torchrun command line for Megatron-LM's
 *    pretrain_gpt.py with every architecture, parallelism and batch flag.
 *  - export_deepspeed: a DeepSpeed JSON config, with the degrees DeepSpeed does not read kept under a
 *    top-level "autopar" object.
 *  - export_torchtitan: a torchtitan Python config module (the dataclass registry of its current sources).
 *  - export_torchtitan_toml: a torchtitan TOML job config for v0.2.x, the last releases that read TOML.
 *
 * Each format has a check, "can this stack express this plan": AP_OK, or AP_UNSUPPORTED with a one-line
 * reason in ctx. The exporter calls it first; ap_export_check (export_api.c) lets the planner call it
 * without writing anything. Each writer takes a plan that plan_validate accepted against g and appends its
 * text to out; on failure out is left as it was. The flag and key names are checked against the frameworks'
 * own definitions by tests/test_export.c (tests/data/framework_args.tsv). Internal header. */
#ifndef AP_PLAN_EXPORT_H
#define AP_PLAN_EXPORT_H

#include "plan/plan.h"

/* Where the ranks go: nodes × processes per node = the plan's world size; and, when the plan was costed for
 * another stack than the format's, that stack and the command that plans for the format's instead. */
typedef struct {
  int64_t n_nodes, per_node;
  bool assumed; /* the plan's cluster did not load, so per_node is a guess (8, or the world on one node) */
  const char *planned_for; /* the stack the plan names when the format runs on another; NULL otherwise */
  const char *format_stack; /* the stack the format runs on (plan_stack_of_export); NULL for json */
  char replan[768];        /* "autopar plan --model … --stack X --export F" from the plan's recorded inputs */
} export_launch;

typedef ap_status (*export_check_fn)(ap_ctx *ctx, const plan *p, const graph *g);
typedef ap_status (*export_write_fn)(ap_ctx *ctx, const plan *p, const graph *g, const export_launch *l, strbuf *out);

AP_HIDDEN ap_status megatron_can_express(ap_ctx *ctx, const plan *p, const graph *g);
AP_HIDDEN ap_status export_megatron(ap_ctx *ctx, const plan *p, const graph *g, const export_launch *l, strbuf *out);
AP_HIDDEN ap_status deepspeed_can_express(ap_ctx *ctx, const plan *p, const graph *g);
AP_HIDDEN ap_status export_deepspeed(ap_ctx *ctx, const plan *p, const graph *g, const export_launch *l, strbuf *out);
AP_HIDDEN ap_status torchtitan_can_express(ap_ctx *ctx, const plan *p, const graph *g);
AP_HIDDEN ap_status export_torchtitan(ap_ctx *ctx, const plan *p, const graph *g, const export_launch *l, strbuf *out);
AP_HIDDEN ap_status torchtitan_toml_can_express(ap_ctx *ctx, const plan *p, const graph *g);
AP_HIDDEN ap_status export_torchtitan_toml(ap_ctx *ctx, const plan *p, const graph *g, const export_launch *l,
                                           strbuf *out);

/* ---- The schedule as an export states it (export_schedule.c, from plan/schedule.h) ---- */

typedef struct {
  plan_schedule kind;
  int64_t n_stages;             /* pipeline stages of the order (pp) */
  int64_t chunks_per_stage;     /* the distinct chunks stage 0 runs: virtual stages per rank */
  int64_t micro_batches;        /* the micro-batches stage 0's list names */
  bool split_w;                 /* weight gradients are passes of their own (the zero-bubble kinds) */
  int64_t in_flight_stage0;     /* most chunk passes forwarded and not yet backwarded on stage 0, along its list */
  int64_t in_flight_max;        /* the same, the largest over the stages */
  int64_t in_flight_rule_stage0; /* plan_schedule_in_flight_passes(p, 0), capped by the stage's passes */
  int64_t warmup_forwards_stage0; /* forwards stage 0 runs before its first backward */
  bool from_order;              /* counted along the built lists; false: a plan too long to list, from the rules */
} export_sched;

/* Fills s from the schedule data of plan p (validated): the work lists of plan_schedule_build when they are
 * not too long (EXPORT_SCHED_MAX_ITEMS), else the rules. AP_NOMEM when the lists cannot be built. */
AP_HIDDEN ap_status export_schedule_facts(ap_ctx *ctx, const plan *p, export_sched *s);
/* One "# schedule: …" comment line with those facts; nothing without pipeline parallelism. */
AP_HIDDEN void export_schedule_note(const export_sched *s, strbuf *sb);

/* ---- Megatron-LM's argument list (export_megatron.c, export_megatron_model.c) ---- */

typedef struct {
  strbuf body;  /* "--flag value" lines joined by " \\\n" */
  strbuf notes; /* "# …\n" lines for the header */
} margs;

AP_HIDDEN void margs_flag(margs *m, const char *name, const char *value);
AP_HIDDEN void margs_flag_i(margs *m, const char *name, int64_t v);
AP_HIDDEN void margs_note(margs *m, const char *fmt, ...) AP_PRINTF(2, 3);

/* The model's shape as Megatron states it, read from the graph's ops. */
typedef struct {
  int64_t n_layers, hidden, heads, kv_heads, head_dim, head_dim_v;
  int64_t ffn; /* dense MLP width; the expert width when every layer is MoE */
  bool gated, layernorm, rope, learned_pos, tied, mla, has_attention, has_head;
  int64_t pos_rows; /* rows of the learned position table */
  int64_t n_experts, top_k, moe_ffn, shared_ffn;
  int64_t q_lora_rank, kv_lora_rank;
  bool mixed; /* some layers dense, some MoE: --moe-layer-freq states which */
  bool qkv_bias, o_bias, mlp_bias, expert_bias, router_bias, router_score_bias, shared_gate;
  bool qk_norm, qk_norm_full, attn_sinks, post_norms, embed_norm, pre_norm, ln_mlp_reads_input, parallel_block;
  int64_t qk_norm_params; /* scale parameters of the q norm: head_dim when per head */
  int64_t window; /* the sliding window of the windowed layers; 0 when none */
  bool any_full;  /* some layer attends to the whole sequence */
} mshape;

AP_HIDDEN bool export_block_is_moe(const graph_block *blk);
/* Fills s; false when g is not a transformer Megatron's GPT model builds (no layers, attention or head). */
AP_HIDDEN bool megatron_shape_of(const graph *g, mshape *s);
/* Whether every linear layer has a bias (Megatron's add_bias_linear, routers and experts included), or none. */
AP_HIDDEN bool megatron_all_bias(const mshape *s);
AP_HIDDEN bool megatron_no_bias(const mshape *s);
/* AP_UNSUPPORTED with the reason when Megatron-LM cannot build the model as it is. */
AP_HIDDEN ap_status megatron_model_check(ap_ctx *ctx, const mshape *s, const graph *g);
/* The architecture flags, from --num-layers to --mtp-num-layers. */
AP_HIDDEN void megatron_model_flags(margs *m, const mshape *s, const graph *g, int64_t seq);

/* ---- torchtitan, both forms (export_torchtitan.c) ---- */

enum { TT_CURRENT = 1, TT_TOML = 2 }; /* the sources a flavor is read from: b5bcd76c, v0.2.2 */
typedef struct {
  const char *family;   /* autopar's model_type */
  const char *model;    /* torchtitan's model name (torchtitan/models/NAME) */
  const char *flavor;   /* its registry key */
  int64_t dim, n_layers, n_heads, n_kv_heads, n_experts; /* 0 where the flavor states none */
  unsigned versions;    /* TT_CURRENT | TT_TOML */
  const char *base;     /* the config_registry.py function the current form starts from */
} tt_flavor;

AP_HIDDEN extern const tt_flavor tt_flavors[];
AP_HIDDEN extern const size_t tt_n_flavors;
AP_HIDDEN const char *tt_schedule_name(plan_schedule s);
/* The flavor of torchtitan's registries (version TT_CURRENT or TT_TOML) whose sizes are g's, or
 * AP_UNSUPPORTED naming what torchtitan has. */
AP_HIDDEN ap_status tt_model_of(ap_ctx *ctx, const char *format, const graph *g, unsigned version, const tt_flavor **out);
/* Whether torchtitan has a model of g's family at all (any version): a stack that lacks the model runs no plan
 * of it, whatever its sizes (a missing flavor of a known family is the registry's to add, not a limit). */
AP_HIDDEN bool tt_trains_family(const graph *g);
/* The checks both forms share: precision, recompute counts, rank order. */
AP_HIDDEN ap_status tt_common_check(ap_ctx *ctx, const char *format, const plan *p, const graph *g);
/* The module_fqns_per_model_part lists, one line per chunk, each line after indent; the last chunk ends with
 * `last`, the version's modules after the layers ("\"norm\", \"lm_head\"" at b5bcd76c). */
AP_HIDDEN void tt_fqns(strbuf *sb, const char *indent, const int32_t *layers, int64_t n_chunks, const char *last);

/* ap_export_check without API_ENTER: whether format can write plan ap of model (NULL: the one the plan
 * names), with the one-line reason in ctx; replan adds the command that plans for the format's stack to a
 * refusal (ap_export_check does; the planner's admission filter, already planning for it, does not). */
AP_HIDDEN ap_status export_check_plan(ap_ctx *ctx, const ap_model *model, ap_plan *ap, const char *format, bool replan);

/* ---- Shared by the exporters (export_api.c) ---- */

/* The sequence length the plan trains at: its own, or the model's default when it leaves it at 0. */
AP_HIDDEN int64_t export_seq_length(const plan *p, const graph *g);
/* The layers of each of the plan's pp·vpp chunks in forward order (plan_chunk_layers over the model's
 * pipeline units), written to out (PLAN_MAX_CHUNKS long). Returns false when the plan has no such split,
 * which plan_validate rules out. */
AP_HIDDEN bool export_chunk_layers(const plan *p, const graph *g, int32_t *out);
/* The plan's mesh order over the axes of degree > 1, innermost first, as "tp-dp-pp" ("" when none). */
AP_HIDDEN void export_order_text(const plan *p, const plan_axis *order, char *buf, size_t cap);
/* Whether the plan's order, over the axes of degree > 1, is text (an order over all axes, "tp-cp-ep-dp-pp"). */
AP_HIDDEN bool export_order_is(const plan *p, const char *text);
/* Appends "# note: … processes per node assumed" when the launch shape is a guess, and "# note: costed for
 * STACK …" with the re-planning command when the plan was costed for another stack than the format's. */
AP_HIDDEN void export_launch_note(const plan *p, const export_launch *l, strbuf *sb);
/* The torchrun command of launch l up to its script (no newline): on one node "torchrun --standalone --nnodes 1
 * --nproc-per-node N"; on several, torch's c10d rendezvous on the first node at port EXPORT_RDZV_PORT, whose
 * address is endpoint_host (a word the shell expands, e.g. "${RDZV_HOST:?…}"), so that every node runs the same
 * command and no node rank is set by hand (pytorch/torchtitan multinode_trainer.slurm @ b5bcd76c launches so). */
AP_HIDDEN void export_torchrun(const export_launch *l, const char *endpoint_host, strbuf *sb);
/* "# launch: …" comment lines: the rendezvous, the SLURM srun line and the command on each node by hand, for
 * `run` = what every node runs after its torchrun options (" -m torchtitan.train …") when script is NULL, or
 * for a script every node runs as it is ("bash megatron.sh") with RDZV_HOST set. */
AP_HIDDEN void export_launch_comment(const export_launch *l, const char *run, const char *script, strbuf *sb);
enum { EXPORT_RDZV_PORT = 29500 }; /* torchrun's default master port; multinode_trainer.slurm's endpoint port */
/* Appends one line summing the plan up, without a newline: "llama-3-70b: dp 2 x tp 8 x pp 4 x cp 1, …". */
AP_HIDDEN void export_summary(const plan *p, const graph *g, strbuf *sb);

#endif
