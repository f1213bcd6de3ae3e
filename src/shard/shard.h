/* Op-level sharding specs (shard layer: above cost, below search; DESIGN.md "Layers": search → shard → cost).
 *
 * A logical device mesh of one or two axes is laid over the cluster's ranks: axis 1 (the inner one) takes
 * consecutive ranks, so by default it stays inside a node on the fast links, and axis 0 strides over it
 * (Alpa, Zheng et al. 2022 §4.1 "device mesh"; GSPMD, Xu et al. 2021 §3.1). Each axis is one comm_group of
 * the cost model (cost/comm.h), so a collective on it is costed on the link levels it really crosses.
 *
 * A tensor's spec gives each dim a set of mesh axes that split it: R (none), S0, S1 or S01 (both), the
 * notation of Alpa's auto_sharding (alpa/shard_parallel/auto_sharding.py) and ColossalAI's ShardingSpec
 * (colossalai/tensor/sharding_spec.py). Every op is seen as an einsum over *loop dims* (Tofu, Wang et al.
 * 2019 §4; FlexFlow's SOAP dims, Jia et al. 2019 §4): the dims of its output (parallel loops) plus its
 * contraction dims (a matmul's K, a convolution's input channels, an embedding's rows). A strategy sends each
 * mesh axis to one loop dim or to none (replicated work): splitting a parallel loop splits the output and the
 * operands that carry that dim; splitting a contraction leaves a partial sum on the output, resolved by an
 * all-reduce on that axis (Alpa's "RR = RS0 x S0R" strategies); in the backward pass an operand's gradient is a
 * partial sum over the axes on loops it lacks, so the weight of a batch-split op gets the data-parallel
 * gradient all-reduce and the input of a column-split matmul its all-reduce (Megatron-LM, Shoeybi et al.
 * 2019 §3, the f and g operators). For a matmul on a 2-axis mesh this gives 16 strategies (each axis on M, K,
 * N or none; S01 when both take one dim), Alpa's and ColossalAI's enumerations.
 *
 * The compute cost of a strategy is the cost model's own (compute_op) on the op's shard: the op is rebuilt on
 * tensors of the shard's shape. Memory is the weight's training state on the shard plus the saved activations
 * on the shard. Resharding an edge from one spec to another costs, per axis, an all-gather, a local slice or an
 * all-to-all forward and the matching reduce-scatter, all-gather or all-to-all on the gradient backward. */
#ifndef AP_SHARD_SHARD_H
#define AP_SHARD_SHARD_H

#include <stdbool.h>
#include <stdint.h>

#include "cost/comm.h"
#include "cost/compute.h"
#include "model/graph.h"

enum { SHARD_MAX_AXES = 2, SHARD_MAX_LOOPS = 10, SHARD_MAX_COMM = 8, SHARD_MAX_WDIMS = 4 };

/* PyTorch DDP's gradient bucket, 25 MiB (bucket_cap_mb = 25, torch/nn/parallel/distributed.py), and its first
 * bucket, 1 MiB (kDefaultFirstBucketBytes, torch/csrc/distributed/c10d/reducer.hpp), which DDP keeps small so
 * that the first all-reduce starts early in the backward pass. */
#define SHARD_BUCKET_BYTES (25.0 * 1024 * 1024)
#define SHARD_FIRST_BUCKET_BYTES (1.0 * 1024 * 1024)

/* The logical mesh over a cluster (or over a submesh of it: a stage). */
typedef struct {
  int n_axes;
  int64_t shape[SHARD_MAX_AXES];
  int level[SHARD_MAX_AXES];          /* the outermost link level each axis crosses */
  const char *level_name[SHARD_MAX_AXES];
  comm_group group[SHARD_MAX_AXES];
  int64_t n_devices;
} shard_mesh;

/* Builds a mesh of shape[0] x shape[1] (n_axes 2) or shape[0] (n_axes 1) over the first ranks of cluster c.
 * AP_INVALID when the shape does not fit the cluster. */
AP_HIDDEN ap_status shard_mesh_init(ap_ctx *ctx, const hw_cluster *c, int n_axes, const int64_t *shape,
                                    shard_mesh *out);

/* One tensor's spec: per dim, a mask of mesh axes (bit a = split over axis a). */
typedef struct {
  int8_t n_dims; /* int8_t: a strategy holds one spec per input of an n-ary op (graph.h OP_MAX_IN) */
  uint8_t dim[GRAPH_MAX_DIMS];
} shard_spec;

/* "S0", "R", "S01" for a dim mask. Static storage. */
AP_HIDDEN const char *shard_dim_name(uint8_t mask);
/* Parses "S0,R" into a spec of n_dims dims; false when malformed or of another rank. */
AP_HIDDEN bool shard_spec_parse(const char *text, int n_dims, shard_spec *out);
AP_HIDDEN bool shard_spec_equal(const shard_spec *a, const shard_spec *b);

/* One collective a strategy or an edge needs, per device per iteration. */
typedef struct {
  comm_coll coll;
  int axis;
  double bytes;
  double time_s;
} shard_comm;

/* One legal strategy of one op. */
typedef struct {
  int8_t axis_loop[SHARD_MAX_AXES]; /* the loop dim each axis splits, -1 = none */
  int n_out;
  shard_spec out[OP_MAX_OUT];
  shard_spec in[OP_MAX_IN];         /* what it needs of each input */
  shard_spec weight;                /* its weight as stored ([k, n]; conv [Cout, Cin, kh, kw]); n_dims 0 = none */
  uint8_t partial;                  /* axes whose contraction split leaves a pending sum on the output */
  double compute_s, comm_s;         /* per iteration: forward + backward on the shard; its collectives */
  double compute_fwd_s;             /* the forward part of compute_s */
  double fwd_comm_s, bwd_comm_s, wgrad_comm_s; /* comm_s by phase: the output's pending sum (forward), the
                                                  inputs' gradient sums (backward, blocking), the weight's
                                                  gradient sum (once per iteration, may overlap) */
  double wgrad_bytes;                /* the weight gradient's bytes that wgrad_comm_s reduces (0: none) */
  uint8_t wgrad_mask;                /* the mesh axes it is reduced over */
  double weight_mem_bytes, act_mem_bytes;
  int n_comm;
  shard_comm comm[SHARD_MAX_COMM];
} shard_strategy;

/* The spec of weight w as its file stores it (graph.h graph_weight) under strategy s: each stored dim takes
 * the split of the logical weight dim it is, R where it is none. */
AP_HIDDEN void shard_stored_weight_spec(const shard_strategy *s, const graph_weight *w, shard_spec *out);

/* The loop structure of one op at concrete sizes. */
typedef struct {
  int n_loops;
  int64_t size[SHARD_MAX_LOOPS];
  bool splittable[SHARD_MAX_LOOPS];  /* false: splitting it needs halos or statistics (spatial dims, norm dim) */
  bool reduce[SHARD_MAX_LOOPS];      /* a contraction dim (not in the output) */
  int8_t in_map[OP_MAX_IN][GRAPH_MAX_DIMS];   /* per input dim: its loop, or -1 */
  int8_t out_map[OP_MAX_OUT][GRAPH_MAX_DIMS];
  int w_dims;
  int64_t w_shape[SHARD_MAX_WDIMS];
  int8_t w_map[SHARD_MAX_WDIMS];
  int8_t k_loop, n_loop, cin_loop, head_loop; /* loops that divide op fields (weight_k, weight_n, heads), or -1 */
} shard_loops;

/* The loops of op at micro-batch b and sequence s. */
AP_HIDDEN void shard_op_loops(const graph_block *blk, const graph_op *op, double b, double s, shard_loops *out);

/* What the cost of a strategy needs besides the op. */
typedef struct {
  const compute_model *cm;
  const shard_mesh *mesh;
  double b, s;              /* the batch the mesh runs per micro-batch, and the sequence length */
  double n_micro;           /* micro-batches per iteration (compute and activation comm scale by it) */
  double state_bytes_per_param; /* weight + gradient + optimizer state */
  hw_dtype gemm_dtype;
} shard_env;

/* Every legal strategy of op into out (at most max_out); returns the count (>= 1: the replicated one). */
AP_HIDDEN int shard_enumerate(const shard_env *env, const graph_block *blk, const graph_op *op, shard_strategy *out,
                              int max_out);
/* Upper bound on shard_enumerate's count for a mesh of n_axes axes. */
AP_HIDDEN int shard_max_strategies(int n_axes);

/* Seconds per iteration to reshard a tensor of `bytes` (whole, unsharded) from spec `from` to spec `to`
 * (forward and backward), and the collectives it takes when comm is not NULL (at most SHARD_MAX_COMM). */
AP_HIDDEN double shard_reshard_s(const shard_env *env, double bytes, const shard_spec *from, const shard_spec *to,
                                 shard_comm *comm, int *n_comm);

/* The same, split into the forward and the backward part. */
AP_HIDDEN double shard_reshard_fb(const shard_env *env, double bytes, const shard_spec *from, const shard_spec *to,
                                  shard_comm *comm, int *n_comm, double *fwd_s, double *bwd_s);

#endif
