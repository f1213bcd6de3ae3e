/* Reading an op-level plan back (search layer): an autopar-plan/2 document (docs/graph-plan.md "Output"), as
 * `autopar plan --model net.onnx` writes it, checked against the graph it names and rebuilt into the planner's
 * own result (graph_plan.h gplan_result), so that estimating, simulating or exporting a plan file gives exactly
 * the figures of the plan that wrote it. The reader is strict: an unknown key at any level, a missing or
 * repeated op, an op name not in the graph, a spec of the wrong rank or naming a mesh axis the mesh lacks, or a
 * combination of specs that no legal strategy of that op gives (shard/shard.h) fails with one line naming the
 * file and the field. */
#ifndef AP_SEARCH_GRAPH_PLAN_READ_H
#define AP_SEARCH_GRAPH_PLAN_READ_H

#include "search/graph/graph_plan.h"

#define GPLAN_FORMAT "autopar-plan/2"

/* What the document says besides the result. */
typedef struct {
  int64_t gbs;
  const char *cluster; /* the "cluster" field, or NULL (in the document's memory) */
} gplan_read_info;

/* Reads root (from file, for messages) against graph g on cluster c (cluster: its spec as given, e.g.
 * "dgx-h100:4x8", for messages; NULL = c's name) into r, which then holds what gplan_run would for that plan:
 * the mesh, the problem, the per-node choice, the breakdown, the stages of a pipeline, the search record (free
 * it with gplan_result_free, also after a failure). AP_INVALID with "file: field: …" on bad input. */
AP_HIDDEN ap_status gplan_read(ap_ctx *ctx, const char *file, json_t *root, const graph *g, const hw_cluster *c,
                               const char *cluster, gplan_read_info *info, gplan_result *r);

/* Only the header fields (format, model, cluster), for a reader that needs the cluster before the graph. */
AP_HIDDEN ap_status gplan_read_cluster_name(ap_ctx *ctx, const char *file, json_t *root, const char **cluster);
/* The model file the document records ("model_path"), or NULL in *path when it records none. */
AP_HIDDEN ap_status gplan_read_model_path(ap_ctx *ctx, const char *file, json_t *root, const char **path);

/* ---- The reader's stage part (graph_plan_read_stages.c), for graph_plan_read.c ---- */

/* What a stage entry states. */
typedef struct {
  const char *first, *last;
  int64_t sub[2], mesh[2];
  int n_mesh;
  int64_t in_flight; /* -1 when absent */
} gread_stated;

typedef struct {
  int lo, hi;         /* its nodes, inclusive */
  gstage_submesh sub; /* its submesh, as the inter-op pass lists it */
  int64_t shape[2];   /* its logical mesh, [rows, cols] (rows 1: one axis) */
  graph_problem *gp;  /* the whole graph's problem on that mesh (shared by the stages on one mesh) */
  sp_problem sp;      /* the stage's own problem, nodes lo..hi as 0.. */
} gread_stage;

typedef struct {
  int n;
  gread_stage st[GST_MAX_LAYERS];
} gread_stages;

/* Checks the n >= 2 stage entries x against graph g and cluster c: submeshes and meshes, devices, the ops
 * covered in order; fills out's node ranges and meshes. */
AP_HIDDEN ap_status gread_stages_check(const jx_src *top, const gread_stated *x, int n, const graph *g,
                                       const hw_cluster *c, const char *cluster, gread_stages *out);
/* Builds each stage's problems (as the inter-op pass does) at n_micro micro-batches of b, sequence s. */
AP_HIDDEN ap_status gread_stages_build(const jx_src *top, arena *a, const graph *g, const hw_cluster *c,
                                       const compute_model *cm, double b, double s, double n_micro,
                                       double limit_bytes, gread_stages *x);
/* With every node's strategy matched (choice, per node), prices the stages and makes r describe the pipeline
 * (gplan_take_stages). */
AP_HIDDEN ap_status gread_stages_finish(ap_ctx *ctx, arena *a, const hw_cluster *c, const gread_stages *x,
                                        const int32_t *choice, double n_micro, int64_t gbs, double s,
                                        gplan_result *r);

#endif
