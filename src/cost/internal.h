/* Shared internals of the cost layer: the environment and the per-layer costs that estimate.c computes and
 * memory.c, schedule.c and sim.c consume. Not for use outside src/cost/. */
#ifndef AP_COST_INTERNAL_H
#define AP_COST_INTERNAL_H

#include "cost/cost.h"
#include "model/model.h"

struct cost_env {
  arena *a;
  const ap_model *model;
  const graph *g;
  const ap_cluster *cluster;
  const hw_cluster *hc;
  cost_tuning tuning;
  compute_model cm; /* of the first node group's device (heterogeneous groups: the search handles them) */
  plan_model_facts facts;
  int64_t n_layers;    /* pipeline units */
  int *unit_block;     /* for each pipeline unit (layer), the index of its block */
};

/* Costs of one block repeat (one layer) for one micro-batch on one device of its pipeline rank. */
typedef struct {
  double fwd_s, bwd_s, wgrad_s;   /* compute; wgrad_s is the part of bwd_s that computes weight gradients */
  double recompute_full_s;        /* one more forward of the whole layer */
  double recompute_sel_s;         /* one more forward of the core attention */
  double tp_comm_s, cp_comm_s, ep_comm_s; /* per micro-batch, forward + backward, before overlap */
  double attn_fwd_s;              /* core attention forward compute (what CP's KV exchange can hide behind) */
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

/* Per pipeline rank aggregates for the schedule and memory models. */
typedef struct {
  double tf, tb, tw;          /* forward, backward (recompute included), weight-gradient part: one micro-batch */
  double act_bytes;           /* saved activations of one micro-batch of all the rank's chunks */
  double act_chunk_bytes_max; /* the largest chunk's */
  double working_bytes;       /* transient per-layer peak */
  double params_dense, params_expert;
  double p2p_s;               /* send or receive of one boundary activation */
  bool has_embed, has_head;
} rank_cost;

/* Pipeline time of the schedule (closed form), filling out->bubble and compute terms; returns seconds. */
AP_HIDDEN double schedule_time_s(const plan *p, const rank_cost *rc, int n_ranks, cost_time *out);
/* Memory of pipeline rank r. */
AP_HIDDEN cost_mem memory_rank(const cost_env *env, const plan *p, const rank_cost *rc, int r, double b, double s);

#endif
