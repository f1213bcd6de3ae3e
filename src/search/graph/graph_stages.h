/* Alpa's inter-op pass on a general graph (search layer, above graph_problem): the op sequence is clustered
 * into layers, every candidate stage (a range of layers on a submesh with a logical mesh) gets its intra-op
 * problem solved, memoised across identical stage problems (repeated layers give byte-identical ones), and
 * the inter-op stage DP (inter_op.c, Alpa's training DP) picks the stages. graph_plan.c calls it once per
 * micro-batch count; graph_stages.c says how the costs are formed. */
#ifndef AP_SEARCH_GRAPH_STAGES_H
#define AP_SEARCH_GRAPH_STAGES_H

#include "search/graph/graph_problem.h"
#include "search/solve/solve.h"

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

/* A submesh of the pass (Alpa §5.2) and its logical meshes: config k is [shape[k][0], shape[k][1]] (rows 1: a
 * 1-axis mesh of shape[k][1] devices; shape[k][1] 0: the submesh has no config k). */
typedef struct {
  int64_t hosts, per_host;
  int64_t shape[GST_N_CONFIGS][2];
} gstage_submesh;

/* The submeshes the pass considers on c, written to out (GST_MAX_SUBMESHES entries); returns their count. */
AP_HIDDEN int gstage_submeshes(const hw_cluster *c, gstage_submesh *out);

/* The whole graph's problem on the logical mesh shape[2] ([rows, cols], rows 1 = one axis) at n_micro
 * micro-batches of b samples of length s, budget limit_bytes: the problem every stage on that mesh is a range
 * of; fix (NULL: none) the annotated strategy per node, as gplan_problem's. mesh must outlive gp; memory from arena a. The inter-op pass and the plan reader build stages with it. */
AP_HIDDEN ap_status gstage_mesh_problem(ap_ctx *ctx, arena *a, const graph *g, const hw_cluster *c,
                                        const compute_model *cm, const int64_t *shape, double b, double s,
                                        double n_micro, double limit_bytes, const int32_t *fix, shard_mesh *mesh,
                                        graph_problem *gp);

/* True when a stage may start at node p (0 < p < n_nodes): not inside a repeated block. */
AP_HIDDEN bool gstage_cut_ok(const graph_problem *gp, int p);

/* cross[p], p = 0 .. n_nodes: bytes of one micro-batch's activations produced before node p and read at or
 * after it (what a stage starting at p receives). */
AP_HIDDEN ap_status gstage_crossing_bytes(const graph_problem *gp, double b, double s, double *cross);

/* The intra-op problem of the stage of nodes lo..hi of gp, reduced to its groups (the file's comment), in
 * arena a; limit_bytes the budget of one micro-batch in flight. */
AP_HIDDEN ap_status gstage_range_problem(ap_ctx *ctx, arena *a, const graph_problem *gp, int lo, int hi,
                                         double limit_bytes, sp_problem *sp);

/* Fills y for the stage of nodes lo..hi of gp on submesh sm: range_choice[i] is node lo + i's strategy,
 * objective_s the stage problem's objective for it (per iteration), next_bytes what crosses to the next stage
 * (0 for the last); time per micro-batch, send/recv and memory as the file's comment says. y->choice (gp's
 * n_nodes entries, 0 outside the range) comes from arena a; y->in_flight is left to the caller. */
AP_HIDDEN ap_status gstage_describe(ap_ctx *ctx, arena *a, const hw_cluster *c, const gstage_submesh *sm,
                                    const graph_problem *gp, int lo, int hi, const int32_t *range_choice,
                                    double objective_s, double next_bytes, double n_micro, gstage *y);

/* Alpa's pipeline latency of stages st[0..n) at n_micro micro-batches, Σ t + (B − 1) max t, summed in the
 * order of the inter-op DP (inter_op.c: from the last stage to the first), so that it is that DP's objective
 * to the bit. */
AP_HIDDEN double gstage_latency_s(const gstage *st, int n, double n_micro);

/* Plans g on c with o->n_micro micro-batches: memory from arena a (which must outlive the result). */
AP_HIDDEN ap_status gstage_run(ap_ctx *ctx, arena *a, const graph *g, const hw_cluster *c, const compute_model *cm,
                               const gstage_opts *o, gstage_result *r);

#endif
