/* Op-level planning of a general graph (search layer): for each logical mesh over the cluster (one axis of
 * every device, and two axes rows × columns with the columns inside a node first) and for the fewest
 * micro-batches whose activations fit, build the sharding problem (graph_problem.h) and solve it with each
 * requested solve strategy (solve.h); keep the fastest feasible. `autopar plan` on an ONNX model and
 * `autopar compare-search` call it; report/graph_plan_report.c writes the result. */
#ifndef AP_SEARCH_GRAPH_PLAN_H
#define AP_SEARCH_GRAPH_PLAN_H

#include "search/graph/graph_problem.h"
#include "search/graph/graph_stages.h"
#include "search/solve/solve.h"

typedef struct {
  int64_t gbs, seq;          /* global batch (sequences or samples) and sequence length (0 = the model's) */
  const char *strategies;    /* comma-separated solve strategies; NULL = the default set */
  const char *annotate;      /* 'op=S0,R;op2=R,S1' or NULL */
  double max_mem_fraction;   /* (0, 1]; 0 = 1 */
  double time_budget_s;      /* per solve; 0 = none */
  int64_t max_evals;         /* per heuristic solve; 0 = the solve default */
  uint64_t seed;
  int n_mesh_shapes;         /* 0 = every factorisation; else only the listed shapes */
  int64_t mesh_shapes[8][2]; /* [rows, cols]; rows 1 means a 1-axis mesh of cols devices */
  const char *model_path;    /* the model's file (ap_model_spec), which the plan document records; NULL = none */
} gplan_opts;

AP_HIDDEN void gplan_opts_init(gplan_opts *o);

/* One solve of one mesh. */
typedef struct {
  const char *strategy;
  int64_t mesh[2];
  int n_axes;
  double n_micro;
  solve_status status;
  double objective_s, lower_bound_s, time_s;
  int64_t n_evals;
} gplan_try;

typedef struct {
  arena *a;
  const graph *g;
  compute_model cm;
  shard_mesh mesh;     /* the winner's */
  graph_problem gp;    /* the winner's problem */
  int32_t *choice;     /* per node of gp */
  gp_breakdown br;
  const char *strategy;
  solve_status status;
  double lower_bound_s;
  double n_micro, b, s;
  double mem_limit_bytes;
  int n_tries;
  gplan_try tries[64];
  bool found;
  arena *work; /* the winner's problem and choice */
  /* Pipeline stages (graph_stages.h): one on the whole mesh unless the inter-op pass found a faster split.
   * With several, gp/choice/mesh/br above are the slowest stage's, br.total_s the pipeline latency. */
  int n_stages;
  gstage stages[GST_MAX_LAYERS];
  int n_layers, stage_solves, memo_hits;
  double inter_op_s; /* wall time of the inter-op pass, 0 when it did not run */
  arena *stage_arena;
} gplan_result;

/* Frees what gplan_run allocated. */
AP_HIDDEN void gplan_result_free(gplan_result *r);

/* Plans g on cluster c. The result lives in a fresh arena (r->a; free it with arena_free). AP_INVALID on a
 * bad annotation (naming the op) or options; found = false when nothing fits. */
AP_HIDDEN ap_status gplan_run(ap_ctx *ctx, const graph *g, const hw_cluster *c, const gplan_opts *o,
                              gplan_result *r);

/* The sharding problem of g on a mesh of shape [rows, cols] (rows 1: a 1-axis mesh) with the fewest
 * micro-batches whose least memory fits, annotations applied; memory from arena a. */
AP_HIDDEN ap_status gplan_problem(ap_ctx *ctx, arena *a, const graph *g, const hw_cluster *c, const compute_model *cm,
                                  const gplan_opts *o, const int64_t *shape, graph_problem *gp);

/* The inter-op pass (graph_stages.h) with the named per-stage solvers: replaces r's single stage when a
 * pipeline of several is faster. gplan_run calls it when the strategy list holds "inter-op". */
AP_HIDDEN ap_status gplan_inter_op(ap_ctx *ctx, const graph *g, const hw_cluster *c, const gplan_opts *o,
                                   const char *const *names, int n_names, gplan_result *r);

/* Makes r describe the pipeline of stages st[0..n) (n >= 2) at n_micro micro-batches of the global batch gbs:
 * gp, choice and mesh become the slowest stage's (the first of equal ones), br sums the stages' compute,
 * collectives and resharding, br.total_s is latency_s (gstage_latency_s) and br.mem_bytes the largest stage's
 * training state plus its in-flight micro-batches' activations. The inter-op pass and the plan reader share it;
 * the stages' problems stay where they are (st[q].gp). */
AP_HIDDEN void gplan_take_stages(gplan_result *r, const gstage *st, int n, double n_micro, int64_t gbs,
                                 double latency_s);

/* The index of r's slowest stage (the first of equal ones): the one whose mesh, problem and choice r holds. */
AP_HIDDEN int gplan_slowest_stage(const gplan_result *r);

/* Parses an annotation string against a problem: fix[node] = strategy index, -1 elsewhere. */
AP_HIDDEN ap_status gplan_parse_annotate(ap_ctx *ctx, const graph_problem *gp, const char *text, int32_t *fix);

/* The default solve strategies: "ilp,greedy,inter-op" when the ilp part is built, else
 * "elim-dp,greedy,mcmc,inter-op" ("inter-op" runs the stage pass with the others as its per-stage solvers). */
AP_HIDDEN const char *gplan_default_strategies(ap_ctx *ctx);

#endif
