/* Solver problem files (search layer): the two documented formats that `autopar solve` reads
 * (docs/solve.md), so that every search family can be checked on published instances independently of the
 * cost model.
 *
 *  - autopar-sharding-problem/1: Alpa's intra-op formulation (alpa/shard_parallel/auto_sharding.py,
 *    _call_solver_serialized_args; SURVEY.md §3.1): nodes with per-strategy costs and memory, followers,
 *    resharding matrices on edges, alias incompatibilities, liveness sets and a memory budget.
 *  - autopar-stage-problem/1: Alpa's inter-op formulation (alpa/pipeline_parallel/stage_construction.py,
 *    training_dp): per-stage costs by layer range, submesh and logical-mesh config.
 *
 * The readers check every size, index and cross-reference and fail with one line naming the file and the
 * field. A sharding problem is also reduced once to its *groups* (a leader and the nodes that follow it,
 * transitively), with merged unary costs, one merged pair table per pair of groups and merged memory terms
 * per program point: every solver works on that reduced form, so that duplicate coefficients of followers are
 * summed once (NOTES.md "ILP through CBC's C API"). Everything lives in the problem's arena. */
#ifndef AP_SEARCH_PROBLEM_H
#define AP_SEARCH_PROBLEM_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"
#include "core/jsonx.h"

#define SP_FORMAT "autopar-sharding-problem/1"
#define STP_FORMAT "autopar-stage-problem/1"

/* ---- Sharding problem, as read ---- */
typedef struct {
  int32_t n_strategies;
  double *cost;      /* compute + communication per strategy; NAN where the file has null */
  double *mem_bytes; /* NAN where the file has null */
  int32_t follow;    /* the node it follows as the file says, -1 for none */
} sp_node;

typedef struct {
  int32_t from, to;
  double *cost; /* n_from rows of n_to entries, row-major; NAN where null (a forbidden pair) */
} sp_edge;

typedef struct {
  int32_t a, b;
  uint8_t *forbidden; /* n_a rows of n_b entries, 1 = the pair may not be chosen together */
} sp_alias;

typedef struct {
  int32_t n;
  int32_t *nodes;
} sp_point;

/* ---- The reduced form over groups (a group is a leader and all nodes that follow it). ---- */
typedef struct {
  int32_t g, h;  /* g < h */
  double *cost;  /* n_s[g] rows of n_s[h] entries; INFINITY where forbidden (null edge entry or alias) */
} sp_pair;

typedef struct {
  int32_t g;
  double *mem_bytes; /* per strategy of group g: the summed memory of the point's nodes in g */
} sp_memterm;

typedef struct {
  int32_t n_terms;
  sp_memterm *terms;
} sp_mempoint;

typedef struct {
  arena *a;
  const char *file; /* for messages */
  int32_t n_nodes, n_edges, n_aliases, n_points;
  sp_node *nodes;
  sp_edge *edges;
  sp_alias *aliases;
  sp_point *points;
  bool has_budget, has_penalty;
  double budget_bytes, penalty_per_byte;
  double cost_unit_ms;  /* milliseconds per cost unit, for MCMC's temperature (FlexFlow's alpha is per ms): 1000
                           for the graph planner's problems (seconds); 0 = 1 (problem files: read as ms) */
  /* Reduced form. */
  int32_t n_groups;
  int32_t *group_of;    /* per node */
  int32_t *leader;      /* per group: its leader node */
  int32_t *n_s;         /* per group: its strategy count */
  double **unary;       /* per group, per strategy: summed node costs and intra-group edge diagonals;
                           INFINITY where any member forbids the strategy */
  int32_t n_pairs;
  sp_pair *pairs;
  int32_t *adj_start;   /* CSR over groups: adj[adj_start[g] .. adj_start[g+1]) are pair indices */
  int32_t *adj;
  bool mem_active;      /* a budget and at least one program point */
  sp_mempoint *mem;     /* n_points entries when mem_active */
} sp_problem;

/* The value of a group choice: objective (node + edge costs + penalty) and how far it is from feasible
 * (0 when feasible: the count of forbidden terms picked plus the relative excess over a hard budget). */
typedef struct {
  double objective;
  double violation;
  double peak_bytes;
} sp_score;

/* ---- Stage problem ---- */
typedef struct {
  arena *a;
  const char *file;
  int32_t n_layers, n_devices, n_micro_batches, n_submeshes, n_configs;
  int32_t *submesh_hosts, *submesh_devices_per_host, *submesh_size;
  double *cost;      /* [i][j][m][c] flattened (stp_at); NAN where null or j < i */
  int32_t *max_succ; /* same shape, or NULL when absent; -1 = unbounded */
} stp_problem;

/* Index of entry (i, j, m, c) in stp_problem's arrays. */
static inline size_t stp_at(const stp_problem *p, int32_t i, int32_t j, int32_t m, int32_t c) {
  return (((size_t)i * (size_t)p->n_layers + (size_t)j) * (size_t)p->n_submeshes + (size_t)m) *
             (size_t)p->n_configs + (size_t)c;
}

/* Which format a parsed document claims: its "format" string, or NULL (with the failure recorded) when it
 * has none or an unknown one. */
AP_HIDDEN const char *problem_format(ap_ctx *ctx, const char *file, json_t *root);

/* Read and check a sharding or stage problem from a parsed document; the problem is allocated in arena a
 * (the caller frees the arena). On bad input: AP_INVALID with "file: field: what was expected". */
AP_HIDDEN ap_status sp_from_json(ap_ctx *ctx, arena *a, const char *file, json_t *root, sp_problem *out);
AP_HIDDEN ap_status stp_from_json(ap_ctx *ctx, arena *a, const char *file, json_t *root, stp_problem *out);

/* Scores a group choice (choice[g] in [0, n_s[g])). */
AP_HIDDEN sp_score sp_eval(const sp_problem *p, const int32_t *choice);
/* True when score a is better than b: fewer violations first, then a lower objective. */
AP_HIDDEN bool sp_better(sp_score a, sp_score b);
/* True when strategy k of group g is not forbidden by any member node. */
static inline bool sp_allowed(const sp_problem *p, int32_t g, int32_t k) {
  return p->unary[g][k] < (double)INFINITY;
}
/* The pair table value for groups g, h (in either order) at strategies kg, kh. */
static inline double sp_pair_cost(const sp_problem *p, const sp_pair *e, int32_t g, int32_t kg, int32_t kh) {
  return e->g == g ? e->cost[(size_t)kg * (size_t)p->n_s[e->h] + (size_t)kh]
                   : e->cost[(size_t)kh * (size_t)p->n_s[e->h] + (size_t)kg];
}
/* The group at the other end of pair e from g. */
static inline int32_t sp_pair_other(const sp_pair *e, int32_t g) { return e->g == g ? e->h : e->g; }

#endif
