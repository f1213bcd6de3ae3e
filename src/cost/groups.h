/* The rank lists of a plan's parallel groups and where they sit on the cluster (cost layer, groups.c): which
 * ranks form one tensor-, context-, expert- or data-parallel group and which ranks a pipeline send/recv joins,
 * derived from the plan's rank order exactly as the frameworks number their ranks, then how many members of a
 * group share one domain of each link level and one node, how many nodes it spans, and which level each
 * pipeline hop crosses. cost_plan_groups (cost.h) turns these into the comm_groups that every collective of a
 * plan is costed on. Internal header: not installed; the tests reach it for the brute-force comparisons. */
#ifndef AP_COST_GROUPS_H
#define AP_COST_GROUPS_H

#include <stdbool.h>
#include <stdint.h>

#include "hw/hw.h"
#include "plan/plan.h"

enum { RANK_SHAPE_MAX_AXES = PLAN_N_ORDER };

/* What an axis of a rank shape is to the groups it describes. */
typedef enum {
  RANK_AXIS_OTHER,  /* fixed inside one group: tells groups apart */
  RANK_AXIS_MEMBER, /* varies inside one group */
  RANK_AXIS_PIPE,   /* the pipeline axis, whose neighbours exchange activations */
} rank_axis_kind;

/* One mesh as mixed-radix digits, innermost (fastest varying) first: rank = sum of digit_i * stride_i, stride_i
 * the product of the degrees inside axis i, and a group is every rank whose OTHER digits agree. This is
 * Megatron-LM's numbering (megatron/core/parallel_state.py generate_masked_orthogonal_rank_groups and
 * RankGenerator.get_ranks at NVIDIA/Megatron-LM@d98e8a64: "global_rank = tp_rank + dp_rank * tp_size + pp_rank *
 * tp_size * dp_size" for the order tp-dp-pp, a group of several axes such as dp-cp taking every combination of
 * their digits), which DeepSpeed's row-major ProcessTopology (deepspeed/runtime/pipe/topology.py @edaa7221:
 * PipeModelDataParallelTopology axes pipe, data, model, the last varying fastest) and torchtitan's device mesh
 * (torchtitan/distributed/parallel_dims.py @b5bcd76c: unflattened as pp, dp_replicate, dp_shard, cp, tp,
 * outermost first) also follow. Degree-1 axes are left out and neighbours of one kind merged, so that every
 * plan whose groups are the same rank lists has the same shape (the memo's key). */
typedef struct {
  int n_axes;
  int64_t degree[RANK_SHAPE_MAX_AXES];
  uint8_t kind[RANK_SHAPE_MAX_AXES]; /* rank_axis_kind */
} rank_shape;

/* Where the groups of one shape sit on a cluster: the worst group, level by level. */
typedef struct {
  int64_t n_ranks;                  /* members of one group */
  int64_t per_level[HW_MAX_LEVELS]; /* most members of one group inside one domain of each link level (innermost
                                     * first; n_ranks at the outermost, whose domain is the cluster) */
  int64_t per_node;                 /* most members of one group inside one node */
  int64_t nodes;                    /* most distinct nodes one group spans */
} group_geom;

/* The shape of the groups of `axes` (a bit set of 1u << plan_axis, all of one mesh: tp, cp, dp, pp for the dense,
 * etp, ep, edp, pp for the expert one) under p's order; false when the axes mix the two meshes or the order is
 * not a permutation. */
AP_HIDDEN bool rank_shape_of_axes(const plan *p, unsigned axes, rank_shape *out);
/* The dense mesh with its pipeline axis marked RANK_AXIS_PIPE (pipeline groups coincide in the two meshes). */
AP_HIDDEN void rank_shape_of_pipe(const plan *p, rank_shape *out);
/* The product of the shape's degrees: the devices it numbers. */
AP_HIDDEN int64_t rank_shape_devices(const rank_shape *s);

/* The geometry of the MEMBER groups of shape s on cluster c, whose device count the shape must number. Exact,
 * and fast at any size: when every node group shares its domain sizes, nodes and inner domains are aligned
 * blocks, and the ranks below the first point of the mixed radix that is a multiple of all of them hold every
 * pattern that occurs (groups above it only repeat it in other blocks), so only those are enumerated; on other
 * clusters every rank list is walked. AP_INVALID when the shape does not number c's devices. */
AP_HIDDEN ap_status group_geom_of(ap_ctx *ctx, const hw_cluster *c, const rank_shape *s, group_geom *out);
/* For each pipeline hop h of shape s (a shape from rank_shape_of_pipe) on cluster c: the innermost link level
 * whose domains hold both ends of every send/recv between pipeline ranks h and h+1 (h = pp-1: from the last rank
 * back to the first, which interleaved schedules use), c->n_levels-1 when the hop crosses the network; level
 * receives pp entries. A hop can cross nodes whatever the pipeline axis's place in the order. AP_INVALID as for
 * group_geom_of, or when the shape has no pipeline axis. */
AP_HIDDEN ap_status pipe_hops_of(ap_ctx *ctx, const hw_cluster *c, const rank_shape *s, uint8_t *level);

#endif
