/* A sharding problem from a model graph (search layer, above shard): one node per op with the op's legal
 * strategies (shard/shard.h) and their costs, one edge per producer → consumer tensor with the resharding cost
 * of every pair of specs, followers (elementwise ops and views that take their operand's spec) merged onto
 * their operand, a block's repeats sharing one strategy (its costs and memory times the repeat count), one
 * program point holding every node (training keeps every saved activation and every weight's state until the
 * backward pass: the peak is their sum) and the memory budget from the device memory. The result is e-solve's
 * in-memory sp_problem (search/problem.h), so every solve strategy (solve.h) applies to it unchanged, and the
 * per-node strategy tables that turn a choice back into per-op specs. */
#ifndef AP_SEARCH_GRAPH_PROBLEM_H
#define AP_SEARCH_GRAPH_PROBLEM_H

#include "search/solve/problem.h"
#include "shard/shard.h"

typedef struct {
  int block, op;
  int n_s;
  shard_strategy *s; /* n_s strategies; a follower's are aligned with its leader's (same index, same count) */
  int32_t follow;    /* the node it follows, -1 for none */
  double repeat;
} gp_node;

typedef struct {
  bool merge_followers;  /* default true */
  double mem_budget_bytes; /* 0 = none */
  bool tie_repeats;       /* ops of identical repeated layers share one strategy (default true) */
  int32_t *fix;          /* per node: the strategy index it must take, -1 for free; NULL = none (annotations) */
} gp_opts;

typedef struct {
  arena *a;
  const graph *g;
  shard_env env;
  int n_nodes;
  gp_node *nodes;
  int *block_base; /* node index of op 0 of each block */
  int n_followers;
  int n_tied; /* ops tied to the same op of an earlier identical layer */
  const int32_t *fix;     /* per node: the annotated strategy or -1; NULL when none (set by gplan_problem) */
  double mem_limit_bytes; /* per device (set by gplan_problem) */
  sp_problem sp;
} graph_problem;

/* Builds the problem for graph g under env (env.mesh and env.cm must outlive it); memory from arena a. */
AP_HIDDEN ap_status graph_problem_build(ap_ctx *ctx, arena *a, const graph *g, const shard_env *env,
                                        const gp_opts *o, graph_problem *out);

/* The node of (block, op). */
static inline int gp_node_of(const graph_problem *gp, int block, int op) { return gp->block_base[block] + op; }

/* The strategy index of each node from a group choice of the reduced problem. */
AP_HIDDEN void gp_node_choice(const graph_problem *gp, const int32_t *group_choice, int32_t *node_choice);

/* Cost split of a node choice, per iteration: compute, the ops' own collectives, resharding on edges;
 * the peak memory per device. */
typedef struct {
  double compute_s, op_comm_s, reshard_s, total_s, mem_bytes;
} gp_breakdown;
AP_HIDDEN gp_breakdown gp_evaluate(const graph_problem *gp, const int32_t *node_choice);
/* The same over nodes lo..hi and the edges between them (a pipeline stage). */
AP_HIDDEN gp_breakdown gp_evaluate_range(const graph_problem *gp, const int32_t *node_choice, int lo, int hi);
/* The weight-gradient synchronisation of nodes lo..hi as PyTorch DDP runs it (shard.h SHARD_BUCKET_BYTES): the
 * gradients fill buckets in backward order, a full bucket is all-reduced once its last gradient is ready, on a
 * stream of its own that overlaps the backward pass (each op's backward compute and its input-gradient sums,
 * in reverse op order); returns the part that outlasts the backward pass (the exposed tail), and the sum of
 * every bucket's all-reduce in *total_s when it is not NULL. The evaluation (gp_evaluate) counts this exposed
 * part instead of the sum; the solvers' additive objective keeps the sum (an upper bound). */
AP_HIDDEN double gp_wgrad_exposed_s(const graph_problem *gp, const int32_t *node_choice, int lo, int hi,
                                    double *total_s);

/* The bytes of the tensor an edge carries (whole), and the resharding seconds of edge e between the chosen
 * strategies, with its collectives when comm is not NULL. */
AP_HIDDEN double gp_edge_reshard(const graph_problem *gp, const graph_edge *e, int32_t k_from, int32_t k_to,
                                 shard_comm *comm, int *n_comm);

#endif
