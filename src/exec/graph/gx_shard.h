/* One micro-batch of a graph under an op-level plan on a device mesh (exec layer; gx_shard.c): each op of the
 * plan computes on its shards as its spec says, the resharding between ops, the pending sums' all-reduces and
 * every operand gradient's pending sum. The communication is the host's (gx_mesh callbacks), so this file
 * links no MPI. Internal header: not installed, not part of the public API. */
#ifndef AP_EXEC_GX_SHARD_H
#define AP_EXEC_GX_SHARD_H

#include "exec/graph/gx.h"

enum { GX_MAX_OUT_SPECS = 8 };

/* A tensor's spec: per dim, the mesh axes splitting it (bit a for axis a; 0 is R, 3 is S01). */
typedef struct {
  int rank; /* -1: whole (every dim R, whatever the rank) */
  uint8_t d[GX_MAX_DIMS];
} gx_spec;

/* What the plan says of one node. Nodes the plan does not list (shape arithmetic, constants, ops on weights
 * alone) run on whole tensors on every rank. */
typedef struct {
  bool in_plan;
  gx_spec out[GX_MAX_OUT_SPECS];
  gx_spec in[GX_MAX_IO]; /* per node input: the spec the op takes it in (rank -1: whole) */
  unsigned partial;      /* mesh axes of the output's pending sum */
  unsigned used;         /* mesh axes that the op's strategy puts on some loop */
} gx_opspec;

/* The mesh and this rank's place on it; all_reduce sums n floats over the ranks that differ only in the mesh
 * axes `axes` (3: every rank of a 2-axis mesh). */
typedef struct {
  int n_axes;
  int64_t size[2];
  int coord[2];
  void *user;
  void (*all_reduce)(void *user, unsigned axes, float *buf, int64_t n);
  void (*sum_d)(void *user, unsigned axes, double *buf, int64_t n);
} gx_mesh;

/* The whole (global) shape of every value, from one forward pass of a whole micro-batch on one process:
 * what a view op's shard takes its shape from. */
typedef struct {
  int rank;
  int64_t dims[GX_MAX_DIMS];
} gx_shape;

/* Inter-op stages (a pipeline): each node's stage (-1: every stage runs it, for nodes on weights and constants
 * alone); send puts n floats to every rank of stage dst (only this stage's first rank sends: the tensor is
 * whole and the same on each of its ranks), recv takes n floats from stage src's first rank, flush waits for
 * the sends. NULL or one stage: no pipeline. */
typedef struct {
  int n_stages, stage;
  const int *stage_of;
  void *user;
  void (*send)(void *user, int dst, const float *buf, int64_t n);
  void (*recv)(void *user, int src, float *buf, int64_t n);
  void (*flush)(void *user);
} gx_pipe;

/* One micro-batch on this rank's shards, in passes, so that a pipeline schedule can order them. */
typedef struct gx_shard_mb gx_shard_mb;
/* The forward pass of this stage's nodes: inputs are the whole micro-batch (each op slices its spec's share);
 * activations from earlier stages are received whole and those later stages read are sent whole. r stays in
 * use until gx_shard_bwd. NULL with r->err set on failure. */
AP_HIDDEN gx_shard_mb *gx_shard_fwd(gx_run *r, const gx_mesh *mesh, const gx_opspec *ops, const gx_shape *shapes,
                                    const gx_pipe *pipe, const gx_tensor *inputs);
/* Whether this rank's stage computes the graph's output (and so the loss). */
AP_HIDDEN bool gx_shard_has_output(const gx_shard_mb *h);
/* The loss on the gathered output (the whole loss, on every rank of the stage), as gx_step's. */
AP_HIDDEN double gx_shard_loss(gx_shard_mb *h, const gx_tensor *labels, int loss, double scale);
/* The backward pass of this stage's nodes; adds this rank's share of the parameter gradient to r->gw (summed
 * over every rank by the host it is the whole gradient) and frees h. False with r->err set. */
AP_HIDDEN bool gx_shard_bwd(gx_shard_mb *h);
/* The whole shapes: one forward pass of inputs on this process (gx_train.c). False with r->err set. */
AP_HIDDEN bool gx_shapes(gx_run *r, const gx_tensor *inputs, gx_shape *out);

#endif
