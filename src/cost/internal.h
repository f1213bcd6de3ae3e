/* Shared internals of the cost layer: the environment (env.c) and the helpers of the per-layer costs
 * (layer.c) and the per-rank pieces (rank.c) that estimate.c aggregates and memory.c and schedule.c consume.
 * Nothing outside src/cost/ includes it but the tests: the search strategies see the cost model through
 * cost.h alone, whose piecewise section declares the per-layer and per-rank pieces they combine. */
#ifndef AP_COST_INTERNAL_H
#define AP_COST_INTERNAL_H

#include "cost/calib.h"
#include "cost/cost.h"
#include "cost/groups.h"
#include "model/model.h"

/* A memo of the communication groups already derived from the cluster, keyed by rank shape (groups.h): a
 * geometry walks rank lists, and a search asks for the same few shapes for thousands of plans. Open addressing
 * over a power-of-two table; a full probe sequence overwrites its first slot. */
enum { GROUP_MEMO_SLOTS = 512, PIPE_MEMO_SLOTS = 128, MEMO_PROBES = 8 };
typedef struct {
  bool used;
  rank_shape key;
  comm_group g;
} group_memo_entry;
typedef struct {
  bool used;
  rank_shape key;
  uint8_t hop_level[PLAN_MAX_CHUNKS]; /* pipe_hops_of */
} pipe_memo_entry;
typedef struct {
  group_memo_entry groups[GROUP_MEMO_SLOTS];
  pipe_memo_entry pipes[PIPE_MEMO_SLOTS];
  comm_group pair[HW_MAX_LEVELS]; /* a send/recv between two ranks that first share a domain of each level */
  /* The last plan's groups and the mesh fields they depend on (searches cost many plans of one mesh in a row). */
  bool have_last;
  int64_t last_mesh[8];
  plan_axis last_order[PLAN_N_ORDER];
  plan_groups last;
} group_memo;

/* flops.c's FLOP per token of the model at one sequence length, and the cluster's mean peak: they depend on the
 * environment and s only, and every plan of a search has the same s (a walk over every op otherwise). */
typedef struct {
  bool set;
  double s, palm_tok, megatron_tok, graph_tok, peak;
} flop_memo;

struct cost_env {
  arena *a;
  const ap_model *model;
  const graph *g;
  const ap_cluster *cluster;
  const hw_cluster *hc;
  cost_tuning tuning;
  compute_model cm; /* of the first node group's device */
  /* One per node group (hc->n_groups, in the cluster's order; [0] is a copy of cm): with groups of different
   * device types each pipeline rank is costed on its own group's device (cost_rank_group). All share
   * tuning.compute. */
  compute_model *group_cm;
  plan_model_facts facts;
  int64_t n_layers;    /* pipeline units */
  int *unit_block;     /* for each pipeline unit (layer), the index of its block */
  int *boundary_blocks; /* the blocks whose output can end a pipeline chunk (units but the last, one per run) */
  int n_boundary_blocks;
  group_memo *memo;    /* mutable through a const env: a cache, invisible in results */
  flop_memo *flops;    /* the same (NULL when its allocation failed: then nothing is memoised) */
  calib_origin origin; /* where the first node group's compute constants come from */
  calib_band *bands;   /* the calibration's error bands (n_bands, in the arena) */
  int n_bands;
  calib_point *points; /* the calibration's cross-validated residuals (n_points, in the arena) */
  int n_points;
};

/* The sequence length of a plan (its own, else the graph's default). */
AP_HIDDEN double cost_seq_len(const cost_env *env, const plan *p);
/* The compute model of node group g (the first group's for an index out of range). */
AP_HIDDEN const compute_model *cost_group_model(const cost_env *env, int g);
/* The time the plan's offload adds to an iteration and the host memory and NVMe it takes per node (offload.c),
 * for a rank on node group `group` holding shard_params parameters of its optimizer (and, with ZeRO-3,
 * parameter) shard. AP_INVALID when the cluster states no host side. */
AP_HIDDEN ap_status cost_offload(ap_ctx *ctx, const cost_env *env, const plan *p, int group, double shard_params,
                                 double *time_s, double *host_bytes_per_node, double *nvme_bytes_per_node);
/* The plan's sharding of one op (layer.c). */
AP_HIDDEN compute_shard cost_shard_of(const plan *p);
/* Sharding divisor of a saved tensor: cp for the sequence, tp when TP splits it or SP splits its sequence. */
AP_HIDDEN double cost_tensor_divisor(const graph_tensor *t, const compute_shard *sh);
/* Whether per-op selective checkpointing keeps op's output; *n_mm counts the block's matmuls seen so far. */
AP_HIDDEN bool cost_op_policy_keeps(const graph_op *op, int *n_mm);
/* Saved activation bytes of a block per micro-batch under a recompute policy (see plan.h); NAN when out of
 * memory. */
AP_HIDDEN double cost_saved_bytes(const graph_block *blk, const compute_shard *sh, double b, double s, plan_recompute rc);
/* Sizes read off the graph's own tensors (activations.c), per device of one micro-batch of b sequences of s
 * tokens. The activation that crosses a pipeline-chunk boundary: the largest output of a pipeline unit that can
 * end a chunk, in bytes, split along the sequence by sequence parallelism when seq_split. */
AP_HIDDEN double cost_boundary_bytes(const cost_env *env, const plan *p, double b, double s, bool seq_split);
/* The elements of the logits the loss reads (the input of every LOSS op). */
AP_HIDDEN double cost_logit_elems(const cost_env *env, const plan *p, double b, double s);
/* comm_s less what hides behind hide_s at most fraction of it. */
AP_HIDDEN double cost_exposed_s(double comm_s, double hide_s, double fraction);
/* One pipeline send/recv of p2p_s seconds less what the schedule hides of it. */
AP_HIDDEN double cost_p2p_exposed_s(const cost_env *env, const plan *p, double p2p_s);
/* The exposed pipeline sends and receives of one micro-batch on a rank, both directions, every crossing. */
AP_HIDDEN double cost_pp_comm_per_mb_s(const cost_env *env, const plan *p, double p2p_s);
/* The optimizer step of a rank on node group `group` over opt_params local parameters, seconds. */
AP_HIDDEN double cost_optimizer_step_s(const cost_env *env, int group, double opt_params);
/* Fills out's FLOP counts, MFU and TFLOP/s (flops.c); out->iter_s and tokens_per_iter must be set. */
AP_HIDDEN void cost_flop_conventions(const cost_env *env, const plan *p, double s, double flop_hardware,
                                     cost_result *out);

/* The reference executor on a CPU device (exec_cpu.c, exec_cpu.h): whether its pieces replace the framework
 * model's for plan p on node group `group` (stack autopar, an executor profile), and those pieces: one block's
 * cost, one pipeline send, the step's end over all pipeline ranks (synchronisation and AdamW of the slowest),
 * and memory of pipeline rank r. */
AP_HIDDEN bool cost_exec_cpu_on(const cost_env *env, int group, const plan *p);
/* One line on the constants of the executor's cost model: what of the profile it prices with. */
AP_HIDDEN void cost_exec_cpu_origin(const cost_env *env, char *out, size_t n);
AP_HIDDEN layer_cost cost_exec_cpu_block(const cost_env *env, int group, const plan *p, const graph_block *blk, double b,
                                         double s);
AP_HIDDEN double cost_exec_cpu_p2p_s(const cost_env *env, int group, const plan *p, double b, double s);
AP_HIDDEN void cost_exec_cpu_step(const cost_env *env, const plan *p, const rank_cost *rc, int n_ranks, double *sync_s,
                                  double *opt_s);
AP_HIDDEN cost_mem cost_exec_cpu_memory(const cost_env *env, const plan *p, const rank_cost *rc, int r, double b,
                                        double s);

#endif
