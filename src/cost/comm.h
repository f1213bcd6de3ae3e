/* The communication part of the cost model (cost layer, above hw and core): how long one collective takes
 * on one communication group. DESIGN.md "Cost model": alpha-beta (Hockney) costs of ring, tree and
 * hierarchical algorithms, on the link levels that the group actually crosses given the rank mapping, with
 * a node's NICs shared among the groups that use them at the same time. The formulas and their sources are
 * in comm.c and docs/cost-model.md ("Communication").
 *
 * Use: build a comm_group once per mesh axis of a plan (comm_group_from_cluster or comm_groups_for_axes),
 * then ask comm_time_s for each collective of that axis; comm_time_s does no allocation and no lookups.
 * Internal header: not installed, not part of the public API. */
#ifndef AP_COST_COMM_H
#define AP_COST_COMM_H

#include <stdbool.h>
#include <stdint.h>

#include "hw/hw.h"

/* The collectives. bytes (comm_time_s) means, for each:
 *  allreduce      the buffer each rank holds (input = output size);
 *  reduce_scatter the full input buffer of each rank (its output is bytes/n);
 *  allgather      the full gathered output buffer (each rank contributes bytes/n);
 *  alltoall       each rank's whole send buffer (bytes/n goes to each rank, itself included);
 *  sendrecv       the message one rank sends to its neighbour in the group;
 *  broadcast      the buffer the root sends. */
typedef enum {
  COMM_ALLREDUCE,
  COMM_REDUCE_SCATTER,
  COMM_ALLGATHER,
  COMM_ALLTOALL,
  COMM_SENDRECV,
  COMM_BROADCAST,
  COMM_COLL_COUNT
} comm_coll;

/* The algorithms. "ring" is the flat algorithm over all ranks: a ring for the reductions and gathers, a
 * pipelined chain for broadcast, direct pairwise exchange for all-to-all and send/recv (what NCCL runs for
 * those). "tree" is NCCL's tree all-reduce (chains inside the inner levels, a double binary tree across the
 * outermost); it applies to all-reduce only. "hierarchical" runs the collective level by level, innermost
 * first. "auto" is the fastest of those that apply, as NCCL's tuner picks by its own model. Send/recv costs
 * the same under every algorithm. */
typedef enum { COMM_RING, COMM_TREE, COMM_HIERARCHICAL, COMM_AUTO, COMM_ALGO_COUNT } comm_algo;

/* Link classes, for the bandwidth efficiencies of comm_tuning. A level is "network" when it is the
 * outermost level of its cluster, "pcie" when its name says so, and "scale_up" (NVLink, xGMI) otherwise. */
typedef enum { COMM_LINK_SCALE_UP, COMM_LINK_PCIE, COMM_LINK_NETWORK, COMM_LINK_COUNT } comm_link_class;

/* One link level that a communication group crosses. */
typedef struct {
  int hw_level;          /* index in the cluster's hierarchy (hw_link_level); -1 for a group built by hand */
  const char *name;      /* "nvlink", "network"; static storage or the cluster's arena, so valid while it lives */
  comm_link_class link;
  int64_t members;       /* most ranks of the group inside one domain of this level; n_ranks at the outermost */
  double bw_Bps;         /* per member and direction at this level, NIC sharing applied at the network */
  double latency_s;      /* per message step at this level (the alpha) */
} comm_level;

/* One communication group as the cost model sees it: its size and the levels it crosses, innermost first,
 * with members strictly increasing up to n_ranks. A group of one rank has no levels and costs nothing.
 * A value type: copy it freely (names point into the cluster). */
typedef struct {
  int64_t n_ranks;
  int n_levels;
  comm_level levels[HW_MAX_LEVELS];
  double nic_share; /* factor applied to the network bandwidth for NIC sharing (1 = the hw per-device figure) */
} comm_group;

/* Tunable constants of the communication model. Every field is listed in the cost model's one table of
 * constants (cost_tuning_params, tuning.c), with its unit, range, source and reason. */
typedef struct {
  double bus_eff[COMM_LINK_COUNT]; /* fraction of a link's per-direction bandwidth that collectives reach */
  double tree_bw_factor;           /* tree all-reduce bandwidth relative to ring on the same links */
  double call_latency_s;           /* fixed cost of one collective call (kernel launch, setup) */
} comm_tuning;

/* Their documented defaults (tuning.c). */
AP_HIDDEN comm_tuning comm_tuning_defaults(void);
/* Efficiencies 1, tree factor 1, no call latency: the textbook alpha-beta model, for tests and bounds. */
AP_HIDDEN comm_tuning comm_tuning_ideal(void);

/* Names ("allreduce", "ring", "network"); "?" for an out-of-range value. Static storage. */
AP_HIDDEN const char *comm_coll_name(comm_coll coll);
AP_HIDDEN const char *comm_algo_name(comm_algo algo);
AP_HIDDEN const char *comm_link_class_name(comm_link_class link);
/* Finds by name, case-insensitively; false when the name is not one. */
AP_HIDDEN bool comm_coll_from_name(const char *name, comm_coll *out);
AP_HIDDEN bool comm_algo_from_name(const char *name, comm_algo *out);

/* A group of n ranks on one level with the given per-rank bandwidth and latency (tests, quick estimates). */
AP_HIDDEN comm_group comm_group_flat(int64_t n_ranks, double bw_Bps, double latency_s, comm_link_class link);

/* The group of `size` ranks `stride` apart on cluster c (the groups of one mesh axis, see
 * hw_cluster_level_for_group; the worst group of the axis is described). The levels come from asking the
 * hierarchy for the group, then for its part inside one inner domain, and so on inward.
 * NIC sharing: net_users_per_node is how many devices of one node send over the network at the same time,
 * counting a device once for each collective it runs at that moment; 0 means devices_per_node, i.e. every
 * device in one group of this axis, all running at once (the usual case, and what the network level's
 * bw_Bps already assumes). Each such user gets the node's network bandwidth divided by the users, but no
 * more than the NIC(s) it sits behind. Fails with AP_INVALID on bad stride/size (from hw) or a negative
 * net_users_per_node. */
AP_HIDDEN ap_status comm_group_from_cluster(ap_ctx *ctx, const hw_cluster *c, int64_t stride, int64_t size,
                                            int64_t net_users_per_node, comm_group *out);

/* The group of n_ranks ranks that has at most per_level[l] members inside one domain of link level l (one entry
 * per level of c, innermost first; the outermost's is n_ranks whatever it says): a level is crossed where that
 * count grows, with the bandwidth and latency the hierarchy gives a group of that many members there (over every
 * node group), NIC sharing as for comm_group_from_cluster. cost/groups.c counts per_level from the explicit rank
 * lists of a plan's mesh, for groups of any shape. AP_INVALID on no cluster, n_ranks < 1 or a negative
 * net_users_per_node. */
AP_HIDDEN ap_status comm_group_from_counts(ap_ctx *ctx, const hw_cluster *c, int64_t n_ranks, const int64_t *per_level,
                                           int64_t net_users_per_node, comm_group *out);

/* One mesh axis: the groups of `size` ranks `stride` apart, and the NIC sharing as above. */
typedef struct {
  int64_t stride, size;
  int64_t net_users_per_node; /* 0 = devices_per_node */
} comm_axis;

/* comm_group_from_cluster for each of n axes, into out[0..n-1]. The cost model calls this once per plan
 * (each call walks the cluster's ranks), then comm_time_s per op. Stops at the first failure. */
AP_HIDDEN ap_status comm_groups_for_axes(ap_ctx *ctx, const hw_cluster *c, const comm_axis *axes, int n_axes,
                                         comm_group *out);

/* True when the algorithm can run the collective: ring, hierarchical and auto run every collective, tree
 * only all-reduce (and send/recv, which every algorithm runs as the same direct transfer). */
AP_HIDDEN bool comm_algo_applies(comm_coll coll, comm_algo algo);

/* Seconds that one collective of `bytes` (see comm_coll for what bytes means) takes on group g with
 * algorithm algo. t == NULL means comm_tuning_defaults(). Returns 0 for a group of one rank or bytes <= 0,
 * and INFINITY when the algorithm does not apply to the collective (tree all-gather). */
AP_HIDDEN double comm_time_s(const comm_group *g, comm_coll coll, comm_algo algo, double bytes,
                             const comm_tuning *t);

/* Seconds of one MoE token dispatch (or combine) of `bytes` per rank, the routed copies of its tokens to top_k
 * experts spread evenly over the group: the faster of a flat all-to-all and the node-deduplicating two-phase
 * one of DeepEP and HybridEP, in which a token crosses the outermost level once per distinct remote domain
 * among its experts and fans out inside it. */
AP_HIDDEN double comm_dispatch_time_s(const comm_group *g, double bytes, int64_t top_k, const comm_tuning *t);

/* The algorithm that COMM_AUTO picks for this call (the fastest that applies; ties go to the earlier of
 * ring, tree, hierarchical). */
AP_HIDDEN comm_algo comm_algo_pick(const comm_group *g, comm_coll coll, double bytes, const comm_tuning *t);

#endif
