/* Shared internals of the cost layer: the environment that estimate.c builds and memory.c, schedule.c and
 * sim.c read. Nothing outside src/cost/ includes it but the tests; the search strategies see the cost model
 * through cost.h alone (its piecewise section serves those that build a split piece by piece). */
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

#endif
