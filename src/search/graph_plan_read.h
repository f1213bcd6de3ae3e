/* Reading an op-level plan back (search layer): an autopar-plan/2 document (docs/graph-plan.md "Output"), as
 * `autopar plan --model net.onnx` writes it, checked against the graph it names and rebuilt into the planner's
 * own result (graph_plan.h gplan_result), so that estimating, simulating or exporting a plan file gives exactly
 * the figures of the plan that wrote it. The reader is strict: an unknown key at any level, a missing or
 * repeated op, an op name not in the graph, a spec of the wrong rank or naming a mesh axis the mesh lacks, or a
 * combination of specs that no legal strategy of that op gives (shard/shard.h) fails with one line naming the
 * file and the field. */
#ifndef AP_SEARCH_GRAPH_PLAN_READ_H
#define AP_SEARCH_GRAPH_PLAN_READ_H

#include "search/graph_plan.h"

#define GPLAN_FORMAT "autopar-plan/2"

/* What the document says besides the result. */
typedef struct {
  int64_t gbs;
  const char *cluster; /* the "cluster" field, or NULL (in the document's memory) */
} gplan_read_info;

/* Reads root (from file, for messages) against graph g on cluster c into r, which then holds what gplan_run
 * would for that plan: the mesh, the problem, the per-node choice, the breakdown, the search record (free it
 * with gplan_result_free, also after a failure). AP_INVALID with "file: field: …" on bad input;
 * AP_UNSUPPORTED for a plan of several stages. */
AP_HIDDEN ap_status gplan_read(ap_ctx *ctx, const char *file, json_t *root, const graph *g, const hw_cluster *c,
                               gplan_read_info *info, gplan_result *r);

/* Only the header fields (format, model, cluster), for a reader that needs the cluster before the graph. */
AP_HIDDEN ap_status gplan_read_cluster_name(ap_ctx *ctx, const char *file, json_t *root, const char **cluster);

#endif
