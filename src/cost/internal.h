/* Shared internals of the cost layer: the environment (env.c), the per-layer costs (layer.c), the per-rank
 * pieces (rank.c) that estimate.c aggregates and memory.c and schedule.c consume. Outside src/cost/ only the search strategies that build a pipeline
 * split piece by piece (search/stage_dp.c, layer_dp.c, hetero.c) and the tests include it, for the per-layer
 * costs and the piecewise costs at the end. */
#ifndef AP_COST_INTERNAL_H
#define AP_COST_INTERNAL_H

#include "cost/cost.h"
#include "model/model.h"

/* A memo of the communication groups already derived from the cluster, keyed by (stride, size): asking the
 * hierarchy walks every rank (hw_cluster_level_for_group), and a search asks for the same few groups for
 * thousands of plans. */
enum { GROUP_MEMO_SIZE = 128 };
typedef struct {
  int n;
  int next; /* round-robin replacement once full */
  struct {
    int64_t stride, size;
    comm_group g;
  } e[GROUP_MEMO_SIZE];
} group_memo;

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
  group_memo *memo;    /* mutable through a const env: a cache, invisible in results */
};

/* Costs of one block repeat (one layer) for one micro-batch on one device of its pipeline rank. */
typedef struct {
  double fwd_s, bwd_s, wgrad_s;   /* compute; wgrad_s is the part of bwd_s that computes weight gradients */
  double recompute_full_s;        /* one more forward of the whole layer */
  double recompute_sel_s;         /* one more forward of the core attention */
  double recompute_op_s;          /* one more forward of the ops per-op checkpointing drops (plan.h "op") */
  double recompute_op_flop;       /* their FLOP per device */
  double tp_comm_s, cp_comm_s, ep_comm_s; /* per micro-batch, forward + backward, before overlap */
  double tp_recompute_comm_s;     /* the forward TP collectives again, paid by layers that fully recompute */
  double attn_fwd_s;              /* core attention forward compute (what CP's KV exchange can hide behind) */
  double attn_fwd_flop;           /* its FLOP per device (selective recompute runs it again) */
  double act_bytes[PLAN_RECOMPUTE_COUNT_]; /* saved activations per micro-batch, by recompute policy */
  double act_full_working_bytes;  /* transient: the whole layer's activations while it is recomputed */
  double params_dense;            /* parameters held by this device (after tp split) */
  double params_expert;           /* expert parameters held by this device (after ep, etp split) */
  double fwd_flop, bwd_flop;      /* per device */
} layer_cost;

/* Evaluates block bi for plan p at micro-batch b, sequence s; groups are the plan's axes on the cluster. */
typedef struct {
  comm_group tp, cp, ep, dp, edp, pp;
} plan_groups;

AP_HIDDEN ap_status cost_plan_groups(ap_ctx *ctx, const cost_env *env, const plan *p, plan_groups *out);
AP_HIDDEN layer_cost cost_block(const cost_env *env, const plan *p, const plan_groups *pg, int bi, double b, double s);
/* cost_block on the device of node group `group` (cost_block is group 0). */
AP_HIDDEN layer_cost cost_block_on(const cost_env *env, int group, const plan *p, const plan_groups *pg, int bi, double b,
                                   double s);
/* Heterogeneous clusters: the node group whose device pipeline rank r of plan p is costed on, and in
 * *capacity_bytes (may be NULL) the device memory that bounds the rank. A rank's devices are those whose
 * position along the pp axis of the mesh is r (with the default order, pp outermost, a contiguous block of
 * devices); of the node groups they touch, the one with the lowest dense bf16 peak sets the pace (its
 * collectives wait for the slowest member) and the smallest memory bounds it. 0 and the first group's memory
 * on a cluster of one node group. */
AP_HIDDEN int cost_rank_group(const cost_env *env, const plan *p, int64_t r, double *capacity_bytes);

/* Per pipeline rank aggregates for the schedule and memory models. */
typedef struct {
  double tf, tb, tw;          /* forward, backward (recompute included), weight-gradient part: one micro-batch */
  double act_bytes;           /* saved activations of one micro-batch of all the rank's chunks */
  double act_chunk_bytes_max; /* the largest chunk's */
  /* tf + tb of the chunk being built (cost_rank_add_layer adds, cost_rank_end_chunk closes) and of the rank's
   * slowest chunk: an uneven split's longest chunk, which the interleaved schedule's fill waits on. */
  double chunk_t_s, chunk_t_max_s;
  double working_bytes;       /* transient per-layer peak */
  double params_dense, params_expert;
  int64_t n_layers;           /* layers of all the rank's chunks */
  /* The breakdown of tf + tb: compute, recompute and exposed communication of one micro-batch (the non-layer
   * blocks' TP collectives whole), and the hardware FLOP of one micro-batch times tp·cp. */
  double fwd_s, bwd_s, recompute_s, tp_s, cp_s, ep_s, hw_flop;
  /* What the non-layer blocks add to the first chunk ([0]) and to the last chunk ([1]), if this rank holds them. */
  double edge_tf_s[2], edge_tb_s[2], edge_tw_s[2];
  double p2p_s;               /* send or receive of one boundary activation */
  bool has_embed, has_head;
} rank_cost;

/* The sequence length of a plan (its own, else the graph's default). */
AP_HIDDEN double cost_seq_len(const cost_env *env, const plan *p);
/* The compute model of node group g (the first group's for an index out of range). */
AP_HIDDEN const compute_model *cost_group_model(const cost_env *env, int g);
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

/* Pipeline time of the schedule (closed form), filling out->bubble and compute terms; returns seconds. */
AP_HIDDEN double schedule_time_s(const plan *p, const rank_cost *rc, int n_ranks, cost_time *out);
/* The interleaved and ZB-V schedules on an uneven split, from the chunk times (tf, tb, tw of chunk c, pp·vpp
 * of them): m·Σ_j max_r (the j-th chunk of rank r) + the fill; 0 for the other kinds. estimate.c takes the
 * larger of this and schedule_time_s (they are equal on even splits). */
AP_HIDDEN double schedule_lockstep_s(const plan *p, const rank_cost *rc, int n_ranks, const double *chunk_tf_s,
                                     const double *chunk_tb_s, const double *chunk_tw_s);
/* The pipeline time cost_estimate reports: adds the ranks' non-layer blocks (edge_*) to the first and last of
 * the layer-only chunk times (modified in place), then the larger of schedule_time_s and schedule_lockstep_s.
 * The searches' predictors call it with the same pieces, so they predict what cost_estimate computes. */
AP_HIDDEN double schedule_pipeline_s(const plan *p, rank_cost *rc, int n_ranks, double *chunk_tf_s, double *chunk_tb_s,
                                     double *chunk_tw_s, cost_time *out);
/* Memory of pipeline rank r. */
AP_HIDDEN cost_mem memory_rank(const cost_env *env, const plan *p, const rank_cost *rc, int r, double b, double s);

/* ---- Piecewise costs (rank.c): the pieces cost_estimate builds every rank from, for the searches that build
 * a pipeline split chunk by chunk too (search/stage_dp.c, layer_dp.c, hetero.c), so that a dynamic programme over splits predicts the finished plan's pipeline time (schedule_time_s
 * on the ranks' tf + tb) and memory (memory_rank) as cost_estimate computes them. ---- */
/* Adds one layer of cost L (cost_block_on for the rank's group) to rank R as cost_estimate's chunk loop does,
 * under full recompute when full (else the plan's granularity); its saved activation bytes go to
 * *chunk_act_bytes, which cost_rank_end_chunk adds to R once the chunk is complete. */
/* What one layer adds to its rank beyond compute: its recompute and exposed communication, seconds. */
typedef struct {
  double recompute_s, tp_exposed_s, cp_exposed_s, ep_exposed_s;
} layer_share;
AP_HIDDEN layer_share cost_rank_add_layer(const cost_env *env, const plan *p, const layer_cost *L, bool full,
                                          rank_cost *R, double *chunk_act_bytes);
AP_HIDDEN void cost_rank_end_chunk(rank_cost *R, double chunk_act_bytes);
/* Adds to R what pipeline rank r holds besides its layers: the non-layer blocks (the
 * head with the last chunk, the others with chunk 0), the copy of a tied embedding on the last rank, and the
 * exposed pipeline sends and receives. */
AP_HIDDEN void cost_rank_add_extras(const cost_env *env, const plan *p, const plan_groups *pg, int r, rank_cost *R);
/* cost_rank_add_extras into a cleared *out. */
AP_HIDDEN void cost_rank_extras(const cost_env *env, const plan *p, const plan_groups *pg, int r, rank_cost *out);
/* into += from: sums of the times, bytes and parameters, maxima of the peaks, union of the flags. */
AP_HIDDEN void cost_rank_merge(rank_cost *into, const rank_cost *from);

#endif
