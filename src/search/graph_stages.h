/* Alpa's inter-op pass on a general graph (search layer, above graph_problem): the op sequence is clustered
 * into layers, every candidate stage (a range of layers on a submesh with a logical mesh) gets its intra-op
 * problem solved, memoised across identical stage problems (repeated layers give byte-identical ones), and
 * the inter-op stage DP (inter_op.c, Alpa's training DP) picks the stages. graph_plan.c calls it once per
 * micro-batch count; graph_stages.c says how the costs are formed. */
#ifndef AP_SEARCH_GRAPH_STAGES_H
#define AP_SEARCH_GRAPH_STAGES_H

#include "search/graph_problem.h"
#include "search/solve.h"

enum { GST_MAX_LAYERS = 8, GST_MAX_SUBMESHES = 16, GST_N_CONFIGS = 2 };

typedef struct {
  int first_node, last_node;     /* nodes of the graph problem, inclusive */
  int64_t hosts, per_host;       /* the submesh */
  shard_mesh mesh;               /* the logical mesh over it */
  const graph_problem *gp;       /* the whole graph's problem on that mesh (its nodes in range are the stage's) */
  int32_t *choice;               /* per node of gp; meaningful in [first_node, last_node], 0 elsewhere */
  double time_s;                 /* per micro-batch: the stage's intra-op cost / micro-batches + its send/recv */
  double send_s;                 /* per micro-batch: activation out, gradient back, on the link to the next stage */
  double weight_mem_bytes, act_mem_bytes; /* per device: training state, and activations of one micro-batch */
  int in_flight;                 /* micro-batches the stage holds under 1F1B (stages after it + 1) */
} gstage;

typedef struct {
  const char *const *strategies; /* solve strategies per stage problem (the first that solves is kept) */
  int n_strategies;
  double time_budget_s;
  int64_t max_evals;
  uint64_t seed;
  double mem_limit_bytes;
  int64_t gbs;
  double s;
  int64_t n_micro;
  int max_layers;                /* 0 = GST_MAX_LAYERS */
  double upper_s;                /* a pipeline latency already in hand (the single stage's), 0 = none: a
                                    stage whose lower bound times n_micro reaches it is not solved */
} gstage_opts;

typedef struct {
  bool found;
  solve_status status;
  double objective_s;            /* Σ t + (B − 1) max t (Alpa's pipeline latency), per iteration */
  int n_layers;
  int layer_first[GST_MAX_LAYERS + 1]; /* node index where each layer starts; [n_layers] = n_nodes */
  int n_stages;
  gstage stages[GST_MAX_LAYERS];
  int n_stage_solves, n_memo_hits, n_pruned;
  stp_problem problem;           /* the stage problem the DP solved (in the arena), for tests and reports */
} gstage_result;

/* Plans g on c with o->n_micro micro-batches: memory from arena a (which must outlive the result). */
AP_HIDDEN ap_status gstage_run(ap_ctx *ctx, arena *a, const graph *g, const hw_cluster *c, const compute_model *cm,
                               const gstage_opts *o, gstage_result *r);

#endif
