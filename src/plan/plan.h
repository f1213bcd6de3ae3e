/* The plan: the third of autopar's four nouns (DESIGN.md "The four nouns"), in the plan layer (above model
 * and hw, below cost). A plan says how one model is trained on one cluster: the degrees of the device mesh
 * and how its axes map onto ranks, the split of layers into pipeline chunks and the schedule that runs them,
 * the batch, sequence parallelism, recomputation, optimizer sharding, precision and overlap. Every search
 * strategy produces plans, the cost model evaluates them and every exporter reads them, so nothing downstream
 * re-derives a plan's meaning: the conventions below are the contract.
 *
 * A plan owns one variable-size array, the per-op sharding specs of a general graph (empty for transformer
 * plans), so it is copied with plan_copy and released with plan_free, never by assignment; every other field
 * is a plain value, and a plan without ops costs one memcpy to copy. Its fields are described once, in the
 * table of plan_fields.c. Its JSON form is documented in docs/plan-format.md (plan_json.c). plan_validate checks a plan against a model graph and a
 * device count and names the first violated constraint in one line; the constraints follow Megatron-LM's
 * (COSTMODEL.md §6.2), whose source files are cited where each is checked.
 *
 * The device mesh (Megatron's parallel_state.py RankGenerator). Ranks are numbered through the axes of
 * `order` from the innermost (fastest varying) to the outermost; the default order is tp, cp, ep, dp, pp, so
 * tensor-parallel groups are contiguous ranks (one NVLink domain) and pipeline stages are the farthest apart.
 * Two meshes share the ranks, as in Megatron's MoE "parallel folding":
 *  - the dense mesh (attention and dense layers) has degrees tp, cp, dp, pp; ep is 1 in it, so its position
 *    in the order does not matter there; dp·tp·pp·cp is the device count;
 *  - the expert mesh (routed experts) has degrees etp, ep, edp, pp, with etp at tp's position in the order,
 *    edp at dp's, ep at its own and cp folded away (1), and edp = tp·cp·dp / (etp·ep). Expert parallelism
 *    thus borrows its ranks from tp, cp and dp; it never multiplies the device count.
 * Pipeline groups must coincide in the two meshes (checked). An axis's groups are (stride, size) groups in
 * the sense of hw_cluster_level_for_group: plan_axis_stride gives the stride, plan_axis_size the size.
 *
 * Pipeline chunks. The model's pipeline units (its layers: the repeats of BLOCK_LAYER blocks; for a graph
 * without layer blocks, the repeats of all its blocks) are cut into pp·vpp chunks in forward order. The
 * embedding rides with the first chunk and the head with the last; any other non-layer block rides with the
 * chunk of the layer before it (the first chunk when none). Chunk c runs on pipeline rank c for gpipe, 1f1b
 * and zb-h1 (vpp = 1); c mod pp for interleaved-1f1b (Megatron's layout: rank r holds chunks r, r+pp, …);
 * and for zb-v (vpp = 2) c for c < pp, else 2·pp-1-c (the V shape of Qi et al. 2024 §6).
 * Internal header: not installed, not part of the public API. */
#ifndef AP_PLAN_H
#define AP_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"
#include "core/jsonx.h"
#include "model/graph.h"

enum {
  PLAN_MAX_CHUNKS = 256, /* pipeline chunks (pp·vpp) a plan may hold; a 126-layer model at pp 32, vpp 4 fits */
  PLAN_NAME_MAX = 128,   /* bytes for the recorded model and cluster names, with the NUL */
  PLAN_N_ORDER = 5,      /* axes in the mesh order: tp, cp, ep, dp, pp */
};

/* The largest degree any axis may have: the device limit of hw.h (HW_MAX_DEVICES), repeated here because a
 * plan is checked without a cluster at hand. */
#define PLAN_MAX_DEGREE ((int64_t)1 << 22)
/* The largest micro-batch size, micro-batch count, global batch and sequence length a plan may state: far
 * beyond any training run, and small enough that products of a few of them stay clear of int64 overflow
 * once saturated. */
#define PLAN_MAX_COUNT ((int64_t)1 << 40)

/* Mesh axes. The first PLAN_N_ORDER are the ones the order lists; etp and edp are the expert mesh's names
 * for the tp and dp positions. */
#define PLAN_AXIS_MAP(X)                                      \
  X(TP, "tp")   /* tensor parallel (dense mesh) */            \
  X(CP, "cp")   /* context parallel (dense mesh) */           \
  X(EP, "ep")   /* expert parallel (expert mesh) */           \
  X(DP, "dp")   /* data parallel (dense mesh) */              \
  X(PP, "pp")   /* pipeline parallel (both meshes) */         \
  X(ETP, "etp") /* expert tensor parallel (expert mesh) */    \
  X(EDP, "edp") /* expert data parallel (expert mesh) */

typedef enum {
#define X(e, s) PLAN_AXIS_##e,
  PLAN_AXIS_MAP(X)
#undef X
  PLAN_AXIS_COUNT_
} plan_axis;

/* Pipeline schedules (COSTMODEL.md §2.2 and §3). */
#define PLAN_SCHEDULE_MAP(X)                                                                   \
  X(GPIPE, "gpipe")                       /* Huang et al. 2019: all forwards, then backwards */ \
  X(1F1B, "1f1b")                         /* PipeDream-Flush, Narayanan et al. 2021 */          \
  X(INTERLEAVED_1F1B, "interleaved-1f1b") /* vpp >= 2 chunks per rank, Narayanan 2021 */        \
  X(ZB_H1, "zb-h1")                       /* zero bubble H1, Qi et al. 2024 §2.1 */             \
  X(ZB_V, "zb-v")                         /* zero bubble V, two chunks per rank, Qi §6 */

typedef enum {
#define X(e, s) PLAN_SCHED_##e,
  PLAN_SCHEDULE_MAP(X)
#undef X
  PLAN_SCHED_COUNT_
} plan_schedule;

/* Activation recomputation (Korthikanti et al. 2022): none; selective (the core attention of every layer,
 * Megatron's --recompute-granularity selective with its default module core_attn); op (per-op selective
 * checkpointing: every layer keeps the outputs of its attention and of every other matmul and recomputes the
 * rest, torchtitan's selective_ac_option "op"); full (whole layers, --recompute-granularity full). */
#define PLAN_RECOMPUTE_MAP(X) \
  X(NONE, "none")             \
  X(SELECTIVE, "selective")   \
  X(OP, "op")                 \
  X(FULL, "full")

typedef enum {
#define X(e, s) PLAN_RECOMPUTE_##e,
  PLAN_RECOMPUTE_MAP(X)
#undef X
  PLAN_RECOMPUTE_COUNT_
} plan_recompute;

/* Training precision: bf16 or fp16 mixed precision (fp32 master weights and optimizer states), fp8 GEMMs
 * within bf16 training (Megatron --bf16 --fp8-format hybrid), or fp32 throughout. Whether the device runs fp8 is the cost
 * model's check, not plan_validate's. */
#define PLAN_PRECISION_MAP(X) \
  X(BF16, "bf16")             \
  X(FP16, "fp16")             \
  X(FP8, "fp8")               \
  X(FP32, "fp32") /* fp32 throughout (the reference executor, docs/executor.md) */

typedef enum {
#define X(e, s) PLAN_PREC_##e,
  PLAN_PRECISION_MAP(X)
#undef X
  PLAN_PREC_COUNT_
} plan_precision;

/* The software stack that runs the plan (plan/stack.h has what each runs and keeps): the names of runs.csv's
 * `stack` column, plain DeepSpeed, autopar (the reference executor: every schedule) and any (the whole space,
 * for what-if studies). DEFAULT = not named: megatron-lm for transformers, autopar for general graphs. */
#define PLAN_STACK_MAP(X) PLAN_STACK_NAMED_MAP(X) X(DEFAULT, "default") /* not named: plan_stack_default resolves it; last */
/* The stacks a user names (the --stack values), without DEFAULT. */
#define PLAN_STACK_NAMED_MAP(X)               \
  X(MEGATRON_LM, "megatron-lm")               \
  X(MEGATRON_BRIDGE, "megatron-bridge")       \
  X(NEMO, "nemo")                             \
  X(MEGATRON_DEEPSPEED, "megatron-deepspeed") \
  X(TORCHTITAN, "torchtitan")                 \
  X(LLM_FOUNDRY, "llm-foundry")               \
  X(DEEPSPEED, "deepspeed")                   \
  X(AUTOPAR, "autopar")                       \
  X(ANY, "any")

typedef enum {
#define X(e, s) PLAN_STACK_##e,
  PLAN_STACK_MAP(X)
#undef X
  PLAN_STACK_COUNT_
} plan_stack;
/* Where a model state lives when it is offloaded from device memory: not offloaded; host (CPU) memory
 * (ZeRO-Offload, Ren et al. 2021); the node's NVMe drives (ZeRO-Infinity, Rajbhandari et al. 2021). The
 * names are DeepSpeed's zero_optimization.offload_optimizer/offload_param "device" values
 * (deepspeedai/DeepSpeed docs/_pages/config-json.md), "none" for not offloaded. */
#define PLAN_OFFLOAD_MAP(X) \
  X(NONE, "none")           \
  X(CPU, "cpu")             \
  X(NVME, "nvme")

typedef enum {
#define X(e, s) PLAN_OFFLOAD_##e,
  PLAN_OFFLOAD_MAP(X)
#undef X
  PLAN_OFFLOAD_COUNT_
} plan_offload;

/* The sharding of one tensor dimension over a logical device mesh of up to two axes (issue 12; Alpa's and
 * GSPMD's notation): replicated, or split over mesh axis 0, axis 1 or both. */
#define PLAN_DIM_SPEC_MAP(X) \
  X(R, "R")                  \
  X(S0, "S0")                \
  X(S1, "S1")                \
  X(S01, "S01")

typedef enum {
#define X(e, s) PLAN_DIM_##e,
  PLAN_DIM_SPEC_MAP(X)
#undef X
  PLAN_DIM_COUNT_
} plan_dim_spec;

enum { PLAN_MAX_SPEC_DIMS = 8 }; /* tensor dimensions one spec may list (conv weights have 4, attention 4) */

/* The sharding spec of one op of a general graph (coming with issue 12; docs/plan-format.md "ops"). No
 * strategy fills it yet and the JSON reader accepts only an empty list, but the plan owns the array already,
 * so that the general-graph strategies add data rather than change the plan's ownership. */
typedef struct {
  int32_t op;                                 /* the op's index in the graph's op order */
  int32_t n_output_dims, n_weight_dims;       /* 0 when the op has no weight */
  plan_dim_spec output_spec[PLAN_MAX_SPEC_DIMS];
  plan_dim_spec weight_spec[PLAN_MAX_SPEC_DIMS];
  unsigned partial_axes;                      /* bit i: a sum is pending over mesh axis i */
} plan_op_spec;

/* One training plan. plan_defaults gives every field a value; a plan is valid only once plan_validate says
 * so. Zero means "derived" in the fields that say so (etp, seq_length, n_stage_layers, n_chunk_recompute). */
typedef struct {
  /* Mesh degrees, each >= 1. dp·tp·pp·cp is the device count; ep and etp fold into tp·cp·dp (above). */
  int64_t dp, tp, pp, cp, ep;
  int64_t etp; /* expert tensor parallel degree; 0 = the same as tp (Megatron's default) */
  int64_t vpp; /* model chunks per pipeline rank (virtual stages); 1 unless the schedule interleaves */
  plan_axis order[PLAN_N_ORDER]; /* a permutation of tp, cp, ep, dp, pp, innermost first */

  /* Pipeline. */
  plan_schedule schedule;
  int32_t n_stage_layers; /* 0 = the even split of plan_split_even; else pp·vpp, listed in stage_layers */
  int32_t stage_layers[PLAN_MAX_CHUNKS]; /* layers of each chunk in forward order (first n_stage_layers) */

  /* Batch, in sequences and tokens. global_batch_size = micro_batch_size · n_micro_batches · dp. */
  int64_t micro_batch_size;  /* sequences per micro-batch per data-parallel rank */
  int64_t n_micro_batches;   /* micro-batches per pipeline per iteration (gradient accumulation steps) */
  int64_t global_batch_size; /* sequences per iteration */
  int64_t seq_length;        /* tokens per sequence; 0 = the model's default (graph default_seq) */

  /* Memory savers. */
  bool sequence_parallel;    /* Korthikanti 2022 §4.2.2; a no-op when tp = 1, as Megatron makes it */
  plan_recompute recompute;
  /* For full recompute: how many layers of each chunk recompute, counted from the chunk's first layer
   * (Megatron --recompute-method block --recompute-num-layers N); 0 = every layer (--recompute-method uniform
   * --recompute-num-layers 1). Must be 0 for none and selective (Megatron's TransformerConfig: "must be None
   * for 'selective'"). */
  int32_t recompute_layers;
  /* For full recompute, per chunk (the layer-wise search's choice, which may differ from chunk to chunk):
   * 0 = recompute_layers applies to every chunk; else pp·vpp, and chunk_recompute_layers[c] layers of chunk c,
   * counted from its first, recompute (0 = none of that chunk's layers). recompute_layers must then be 0. */
  int32_t n_chunk_recompute;
  int32_t chunk_recompute_layers[PLAN_MAX_CHUNKS]; /* first n_chunk_recompute entries, in forward chunk order */
  /* Optimizer sharding over the data-parallel ranks (dp·cp in the dense mesh, edp for experts): 0 none;
   * 1 optimizer states (Megatron --use-distributed-optimizer, DeepSpeed ZeRO-1); 2 also gradients (ZeRO-2,
   * Megatron-FSDP optim_grads); 3 also parameters (ZeRO-3, FSDP full shard, optim_grads_params). */
  int32_t zero_stage;
  /* Offload of the optimizer states (fp32 master weights and Adam's moments; the step then runs on the host)
   * and of the 16-bit parameters (which ZeRO-3 then fetches per layer). Offloading the optimizer needs a
   * sharded optimizer (zero_stage >= 1), the parameters ZeRO-3; NVMe needs ZeRO-3 (DeepSpeed's rules,
   * docs/_pages/config-json.md). Costed in cost/offload.c. */
  plan_offload offload_optimizer;
  plan_offload offload_param;
  plan_precision precision;
  /* The stack's fused cross entropy (plan/stack.h plan_stack_loss: Megatron's --cross-entropy-loss-fusion
   * --cross-entropy-fusion-impl native, which keeps the same fp32 copy in fewer passes; flash-attn's, as
   * llm-foundry's fused_crossentropy runs it; an in-place kernel for autopar and any); false: its unfused loss.
   * A plan that does not state it takes its stack's default (plan_resolve, complete_plan); the search takes
   * the fused loss wherever the stack has one (search.c). */
  bool fused_loss;
  /* The software stack that runs it (PLAN_STACK_DEFAULT: the model's default, plan/stack.h). */
  plan_stack stack;

  /* Overlap of communication with compute. Each is a no-op where its communication does not occur
   * (param_gather without sharded parameters or optimizer, tp_comm with tp = 1). */
  bool overlap_grad_reduce;  /* Megatron --overlap-grad-reduce; default true */
  bool overlap_param_gather; /* Megatron --overlap-param-gather; default true */
  bool tp_comm_overlap;      /* Megatron --tp-comm-overlap (needs sequence parallel); default false */

  /* Names recorded for convenience ("" when unknown): the model preset or path and the cluster spec. */
  char model[PLAN_NAME_MAX];
  char cluster[PLAN_NAME_MAX];

  /* Per-op sharding specs of a general graph (n_ops entries, heap memory the plan owns; NULL and 0 for every
   * plan today). Because of this array a plan is not copied by assignment: plan_copy copies, plan_free frees. */
  plan_op_spec *ops;
  int32_t n_ops;
} plan;

/* ---- Names (plan_fields.c, generated by AP_ENUM_NAMES from the maps above). Each returns static storage; "?"
 * for an out-of-range value. The parsers return false on an unknown name and are case-sensitive, like the JSON
 * format. ---- */
AP_HIDDEN const char *plan_axis_name(plan_axis axis);
AP_HIDDEN bool plan_axis_from_name(const char *name, plan_axis *out);
AP_HIDDEN const char *plan_schedule_name(plan_schedule s);
AP_HIDDEN bool plan_schedule_from_name(const char *name, plan_schedule *out);
AP_HIDDEN const char *plan_recompute_name(plan_recompute r);
AP_HIDDEN bool plan_recompute_from_name(const char *name, plan_recompute *out);
AP_HIDDEN const char *plan_precision_name(plan_precision pr);
AP_HIDDEN bool plan_precision_from_name(const char *name, plan_precision *out);
AP_HIDDEN const char *plan_stack_name(plan_stack st);
AP_HIDDEN bool plan_stack_from_name(const char *name, plan_stack *out);

AP_HIDDEN const char *plan_offload_name(plan_offload o);
AP_HIDDEN bool plan_offload_from_name(const char *name, plan_offload *out);
AP_HIDDEN const char *plan_dim_spec_name(plan_dim_spec d);
AP_HIDDEN bool plan_dim_spec_from_name(const char *name, plan_dim_spec *out);

/* ---- The plan's fields: one table (plan_fields.c) ----
 * Every fact about a field is written once, in its row: its canonical name (the C member, the JSON key, the
 * runs.csv column and the key of ap_plan_set and --fix; a Python identifier; with dashes, the CLI's flag),
 * where the JSON form keeps it, the other spellings accepted as aliases (the habitual flag mbs, Megatron's
 * tensor_model_parallel_size), its runs.csv column, its range and its default. Validation's range checks, plan_defaults,
 * plan_equal, the JSON reader and writer, ap_plan_set, --fix, the search's fixed fields, the completion's
 * stated fields and the runs.csv reader all walk this table. A field's id is also its bit in the masks of
 * fixed (search_opts.fixed_mask) and stated (complete_plan) fields: the first COMPLETE_N_FIELDS ids are the
 * fields the completion chooses, in the order it reports them. */
#define PLAN_FIELD_MAP(X)                                   \
  X(TP, "tp")                                               \
  X(PP, "pp")                                               \
  X(DP, "dp")                                               \
  X(CP, "cp")                                               \
  X(EP, "ep")                                               \
  X(VPP, "vpp")                                             \
  X(MICRO_BATCH_SIZE, "micro_batch_size")                   \
  X(SEQUENCE_PARALLEL, "sequence_parallel")                 \
  X(RECOMPUTE, "recompute")                                 \
  X(ZERO_STAGE, "zero_stage")                               \
  X(PRECISION, "precision")                                 \
  X(SCHEDULE, "schedule")                                   \
  X(ETP, "etp")                                             \
  X(ORDER, "order")                                         \
  X(RECOMPUTE_LAYERS, "recompute_layers")                   \
  X(STAGE_LAYERS, "stage_layers")                           \
  X(N_MICRO_BATCHES, "n_micro_batches")                     \
  X(GLOBAL_BATCH_SIZE, "global_batch_size")                 \
  X(SEQ_LENGTH, "seq_length")                               \
  X(CHUNK_RECOMPUTE_LAYERS, "chunk_recompute_layers")       \
  X(FUSED_LOSS, "fused_loss")                               \
  X(STACK, "stack")                                         \
  X(OVERLAP_GRAD_REDUCE, "overlap_grad_reduce")             \
  X(OVERLAP_PARAM_GATHER, "overlap_param_gather")           \
  X(TP_COMM_OVERLAP, "tp_comm_overlap")                     \
  X(OFFLOAD_OPTIMIZER, "offload_optimizer")                 \
  X(OFFLOAD_PARAM, "offload_param")                         \
  X(MODEL, "model")                                         \
  X(CLUSTER, "cluster")

typedef enum {
#define X(e, s) PLAN_F_##e,
  PLAN_FIELD_MAP(X)
#undef X
  PLAN_F_COUNT_
} plan_field_id;
_Static_assert(PLAN_F_COUNT_ <= 32, "field masks are an unsigned");
/* The mask bit of one field: PLAN_F(TP) | PLAN_F(PP). */
#define PLAN_F(e) (1u << PLAN_F_##e)

typedef enum {
  PLAN_FK_INT,   /* an int64_t or int32_t member (size says which) */
  PLAN_FK_BOOL,  /* a bool member: 0/1, true/false */
  PLAN_FK_ENUM,  /* an enum member, by name */
  PLAN_FK_ORDER, /* the mesh order: a permutation of tp, cp, ep, dp, pp */
  PLAN_FK_LIST,  /* an int32_t array of up to PLAN_MAX_CHUNKS entries with an int32_t count */
  PLAN_FK_NAME,  /* a char[PLAN_NAME_MAX] name */
} plan_field_kind;

enum {
  PLAN_FF_SEARCHED = 1u,     /* part of the search space: --fix sets its bit in the fixed mask */
  PLAN_FF_PROBLEM = 2u,      /* part of the problem (the batch): --fix refuses it; required in runs.csv */
  PLAN_FF_OMIT_DEFAULT = 4u, /* the JSON writer leaves it out at its default (older files keep their form) */
  PLAN_FF_NO_KEY = 8u,       /* not set by name: no CLI flag, no ap_plan_set or --fix key (model, cluster) */
};

typedef struct {
  plan_field_id id;
  plan_field_kind kind;
  const char *section;  /* the JSON object that holds it: "" for the top level, else "parallel", "pipeline", … */
  const char *json_key; /* its key there */
  const char *aliases;  /* the other spellings ap_plan_set, --fix and the CLI's flags accept, '|'-separated:
                         * the habitual one first ("mbs"), then Megatron-LM's; "" for none */
  const char *csv;      /* its runs.csv column; NULL when the format has none */
  size_t offset, size;  /* the member (for lists, the array) */
  size_t count_offset;  /* lists: the int32_t count of entries */
  int64_t min, max;     /* ints: the range; lists: the range of each entry */
  int64_t def;          /* the default of ints, bools (0/1) and enums */
  const char *const *names; /* enums: the value names, n_names of them, indexed by value */
  int n_names;
  const char *value_aliases; /* enums: further value names as "alias=name|…" ("mxfp8=fp8"); "" none */
  int64_t (*resolved)(const plan *p); /* the value a fixed field is compared by (etp 0 = tp); NULL = raw */
  unsigned flags;       /* PLAN_FF_* */
  const char *help;     /* one phrase, with the unit */
} plan_field;

/* The table in the JSON document's order; *n_out receives its length (PLAN_F_COUNT_). */
AP_HIDDEN const plan_field *plan_fields(size_t *n_out);
/* The row of field id (never NULL for an id in range). */
AP_HIDDEN const plan_field *plan_field_get(plan_field_id id);
/* The canonical name ("micro_batch_size"); "?" out of range. plan_field_from_name takes canonical names only. */
AP_HIDDEN const char *plan_field_name(plan_field_id id);
AP_HIDDEN bool plan_field_from_name(const char *name, plan_field_id *out);
/* The canonical name with dashes for underscores, the CLI's flag without its "--" ("micro-batch-size"),
 * written into out. */
AP_HIDDEN void plan_field_flag(plan_field_id id, char *out, size_t n);
/* The row whose canonical name or alias is key, '-' and '_' being the same ("micro-batch-size",
 * "mbs" and "micro_batch_size" all find micro_batch_size); NULL when none. */
AP_HIDDEN const plan_field *plan_field_find(const char *key);
/* An int, bool or enum field's value as an integer (a list's count, 0 for the others). */
AP_HIDDEN int64_t plan_field_int(const plan *p, const plan_field *f);
/* Stores v into an int, bool or enum field (the caller keeps it in the field's range). */
AP_HIDDEN void plan_field_set_int(plan *p, const plan_field *f, int64_t v);
/* True when the field holds the same value in a and b (unused list entries ignored, names as strings). */
AP_HIDDEN bool plan_field_equal(const plan *a, const plan *b, const plan_field *f);
/* Parses text into p's field (ints in the field's range, with k/M/G suffixes; bools 0/1/true/false; enums by
 * name or value alias; the order as "tp,cp,ep,dp,pp" or "tp-cp-ep-dp-pp"; lists as "20,20,20"). On failure
 * records "--KEY: expected …, got \"text\"" (KEY as shown) and returns AP_INVALID, p untouched. */
AP_HIDDEN ap_status plan_field_parse(ap_ctx *ctx, const plan_field *f, const char *shown, const char *text, plan *p);
/* Writes the field's value as text (the form plan_field_parse reads) into out. */
AP_HIDDEN void plan_field_format(const plan *p, const plan_field *f, char *out, size_t n);

/* ---- The plan value (plan.c) ---- */
/* Sets every field (padding included) to the defaults of the field table (plan_fields.c), forgetting (not
 * freeing) any ops: all degrees 1, etp 0, vpp 1, order tp-cp-ep-dp-pp,
 * 1f1b, even split, one micro-batch of one sequence, global batch 1, seq_length 0 (model default), no
 * sequence parallel, no recompute, ZeRO 1 (the distributed optimizer), bf16, grad-reduce and param-gather
 * overlap on, tp-comm overlap off, no names. */
AP_HIDDEN void plan_defaults(plan *p);
/* True when every field is equal (names compared as strings, unused stage_layers and chunk_recompute_layers
 * entries ignored, the op specs compared entry by entry). */
AP_HIDDEN bool plan_equal(const plan *a, const plan *b);
/* plan_equal but for the fields of skip_mask (PLAN_F bits), which are not compared. */
AP_HIDDEN bool plan_equal_except(const plan *a, const plan *b, unsigned skip_mask);
/* Makes *dst a deep copy of *src (src's ops duplicated). dst is overwritten as raw memory, like memcpy's
 * destination: a plan that owned ops is plan_free'd first (or its ops handed on), else they leak. AP_NOMEM
 * (dst then has no ops) only when the ops do not fit in memory; a plan without ops never fails and costs one
 * memcpy. */
AP_HIDDEN ap_status plan_copy(plan *dst, const plan *src);
/* Releases the plan's ops (the rest is plain data) and leaves it with none. plan_free(NULL) is a no-op. */
AP_HIDDEN void plan_free(plan *p);
/* Replaces the plan's ops by a copy of ops[0..n-1]; AP_NOMEM leaves it with none. */
AP_HIDDEN ap_status plan_set_ops(plan *p, const plan_op_spec *ops, int32_t n);

/* The expert tensor parallel degree with 0 resolved to tp. */
static inline int64_t plan_etp(const plan *p) { return p->etp > 0 ? p->etp : p->tp; }
/* The expert data parallel degree tp·cp·dp / (etp·ep), or 0 when that is not a whole number. */
AP_HIDDEN int64_t plan_edp(const plan *p);
/* Devices the plan occupies: dp·tp·pp·cp (saturating at INT64_MAX). */
AP_HIDDEN int64_t plan_n_devices(const plan *p);
/* Pipeline chunks: pp·vpp. */
AP_HIDDEN int64_t plan_n_chunks(const plan *p);
/* The pipeline rank (0 .. pp-1) that runs chunk c (0 .. pp·vpp-1, forward order); see the header comment.
 * Inline: the closed-form schedule reads it per chunk in the searches' innermost loops. */
static inline int64_t plan_chunk_rank(const plan *p, int64_t chunk) {
  if (p->vpp <= 1 || p->pp <= 0) return chunk;
  if (p->schedule == PLAN_SCHED_ZB_V) return chunk < p->pp ? chunk : 2 * p->pp - 1 - chunk;
  return chunk % p->pp;
}

/* ---- Rank mapping (plan.c). These assume the order is a permutation (plan_validate checks it). ---- */
/* Whether an axis lives in the expert mesh only (etp, ep, edp). */
AP_HIDDEN bool plan_axis_is_expert(plan_axis axis);
/* The order position an axis takes: etp takes tp's, edp dp's, the others their own. */
AP_HIDDEN plan_axis plan_axis_token(plan_axis axis);
/* The degree at order token t (tp, cp, ep, dp or pp) in the dense or the expert mesh: Megatron builds the two
 * RankGenerators with ep = 1 and cp = 1 respectively (parallel_state.py), etp at tp's and edp at dp's place. */
AP_HIDDEN int64_t plan_mesh_degree(const plan *p, bool expert, plan_axis t);
/* The degree of an axis: its group size (etp resolved; edp from plan_edp). */
AP_HIDDEN int64_t plan_axis_size(const plan *p, plan_axis axis);
/* The rank distance between consecutive members of one of the axis's groups: the product of the degrees of
 * the axes inside it in its mesh (dense for tp, cp, dp, pp; expert for etp, ep, edp). Pass (stride, size) to
 * hw_cluster_level_for_group. Returns 0 when the order is not a permutation. */
AP_HIDDEN int64_t plan_axis_stride(const plan *p, plan_axis axis);
/* The group spanned by several axes of one mesh together (axes is a bit set of 1u << plan_axis, e.g. dp and
 * cp for Megatron's gradient-reduce group): *stride and *size of that (stride, size) group. Returns false when
 * the axes mix the two meshes (tp, cp or dp with etp, ep or edp) or when, ignoring axes of degree 1, they
 * are not adjacent in the order, so that their ranks do not form (stride, size) groups. */
AP_HIDDEN bool plan_axes_group(const plan *p, unsigned axes, int64_t *stride, int64_t *size);

/* ---- Pipeline split (plan.c) ---- */
/* The default split of n_layers layers into n_chunks chunks: n_layers / n_chunks each, and the remainder one
 * by one to chunks 1, 2, …, n_chunks-2 (the middle, since the first chunk also holds the embedding and the
 * last the head), then to chunk 0, never to the last. Writes n_chunks entries of out; returns false (writing
 * nothing) when n_chunks < 1, n_chunks > PLAN_MAX_CHUNKS or n_chunks > n_layers. */
AP_HIDDEN bool plan_split_even(int64_t n_layers, int64_t n_chunks, int32_t *out);
/* The split of a plan that states none: plan_split_even while n_chunks <= n_layers; with one or two chunks
 * more (a transformer's; plan_validate allows it only there), Megatron's split that counts the embedding and
 * the loss as one layer each: n_layers + 2 spread evenly, less one on the first and one on the last chunk, so
 * that 126 layers in pp·vpp = 16·8 = 128 chunks are [0, 1, …, 1, 0]. False when n_chunks > n_layers + 2. */
AP_HIDDEN bool plan_split_default(int64_t n_layers, int64_t n_chunks, int32_t *out);
/* Clears p's stage_layers, then writes the default split there when it is Megatron's embedding and loss
 * accounting (more chunks than n_layers), so that the plan states it; the even split stays unstated. */
AP_HIDDEN void plan_state_split(plan *p, int64_t n_layers);
/* The plan's split: stage_layers when given, else plan_split_default. Writes plan_n_chunks(p) entries of out
 * (PLAN_MAX_CHUNKS long); returns false when no such split exists (the plan is then invalid). */
AP_HIDDEN bool plan_chunk_layers(const plan *p, int64_t n_layers, int32_t *out);
/* Whether layer i (counted from 0 at the chunk's first) of chunk c pays full recompute: never unless recompute
 * is full; then i < chunk_recompute_layers[c] when the plan lists them, else i < recompute_layers, or every
 * layer when recompute_layers is 0. */
AP_HIDDEN bool plan_layer_recomputes(const plan *p, int64_t chunk, int64_t i);

/* ---- Facts about the model that the plan's constraints need (model_facts.c) ---- */
typedef struct {
  bool has_layers;   /* the graph has BLOCK_LAYER blocks (a transformer) */
  int64_t n_layers;  /* pipeline units: repeats of layer blocks, or of all blocks when there are none */
  int64_t n_attention_ops;
  /* The greatest common divisor of the attention heads (and of the KV heads, Megatron's num_query_groups)
   * over the attention ops, so that tp divides every op's heads exactly when it divides this; 0 when none. */
  int64_t heads, kv_heads;
  int64_t n_experts;      /* the gcd of the routed-expert counts of the MoE matmuls; 0 for a dense model */
  bool has_tp_ops;        /* some op's parameters are split by tensor parallelism */
  bool uses_seq;          /* some tensor has a sequence dimension (DIM_S) */
  int64_t default_seq;    /* the graph's default sequence length, tokens */
} plan_model_facts;

/* Scans g's blocks and ops. */
AP_HIDDEN void plan_model_facts_of(const graph *g, plan_model_facts *out);

/* ---- Validation (plan.c) ---- */
/* Checks p against the model graph g and a device count (n_devices <= 0 skips the device-count check, for a
 * plan read without a cluster). Returns AP_OK, or AP_INVALID with one line naming the first violated
 * constraint, prefixed by file ("plan" when file is NULL), e.g. "plan: dp·tp·pp·cp = 2·8·4·1 = 64 must
 * equal the cluster's 128 devices". What is checked, in this order:
 *  - ranges: degrees in [1, PLAN_MAX_DEGREE], etp 0 or in range, vpp >= 1, batch sizes >= 1, seq_length >=
 *    0, zero_stage 0..3, enums in range, recompute_layers >= 0, n_stage_layers 0 or pp·vpp;
 *  - the order is a permutation of tp, cp, ep, dp, pp;
 *  - dp·tp·pp·cp = n_devices;
 *  - the model: a graph without layer blocks takes only dp and pp (tp, cp and ep must be 1); tp > 1 needs
 *    tensor-parallel ops, and tp must divide the attention heads and the KV heads (num_query_groups); cp > 1
 *    needs attention; ep > 1 needs experts, which ep must divide; MoE with tp > 1 needs sequence parallel;
 *  - the expert mesh: etp·ep divides tp·cp·dp, and the pipeline groups of the two meshes coincide;
 *  - the pipeline: pp·vpp chunks fit PLAN_MAX_CHUNKS and the layers; vpp matches the schedule (1 for gpipe,
 *    1f1b and zb-h1; >= 2 for interleaved-1f1b; 2 for zb-v), interleaving needs pp >= 2 and n_micro_batches a
 *    multiple of pp; a given split sums to the layers with every chunk >= 1 (for a transformer the first
 *    and the last chunk may be 0: an embedding-only or head-only stage);
 *  - the batch: global_batch_size = micro_batch_size · n_micro_batches · dp;
 *  - the sequence: set when the model has one; cp > 1 needs seq_length % (2·cp) = 0; sequence parallel with
 *    tp > 1 needs seq_length % (tp·cp) = 0;
 *  - recompute_layers: 0 unless full, then at most the largest chunk's layers;
 *  - chunk_recompute_layers: none, or pp·vpp entries with full recompute and recompute_layers 0, each in
 *    [0, that chunk's layers];
 *  - tp_comm_overlap with tp > 1 needs sequence parallel.
 * Device-dependent checks (fp8 support, memory) are the cost model's. */
AP_HIDDEN ap_status plan_validate(ap_ctx *ctx, const plan *p, const graph *g, int64_t n_devices,
                                  const char *file);

/* ---- JSON (plan_json.c; format in docs/plan-format.md) ---- */
/* Appends the plan as one JSON object (every field written, in the documented order) to sb. */
AP_HIDDEN void plan_to_json(const plan *p, strbuf *sb);
/* Reads a plan from a parsed JSON object; absent fields keep plan_defaults' values, except that a missing
 * n_micro_batches or global_batch_size is derived from the other batch fields. Unknown keys are errors. On
 * failure records "file: field: …" and returns AP_INVALID; *out is then unspecified. Checks types and ranges
 * only: call plan_validate for the constraints. */
AP_HIDDEN ap_status plan_from_json(ap_ctx *ctx, const char *file, json_t *root, plan *out);

#endif
