/* The parts of the autopar-plan/2 writer and reader that the report layer shares (report layer; internal): the
 * per-op spec fields (graph_plan_specs.c) that ap_graph_plan writes and the reader (search/graph_plan_read.c)
 * checks, and the whole document writer of graph_plan_report.c, which ap_graph_plan and the /2 export share. */
#ifndef AP_REPORT_GRAPH_PLAN_IO_H
#define AP_REPORT_GRAPH_PLAN_IO_H

#include "search/graph/graph_pipe.h"
#include "search/graph/graph_plan.h"

/* A spec as JSON (["S0", "R"]) and as text ("S0,R"; "-" for a spec of no dims). */
AP_HIDDEN void gpr_spec_json(strbuf *sb, const shard_spec *s);
AP_HIDDEN void gpr_spec_text(strbuf *sb, const shard_spec *s);
/* Appends `, "weight_spec": […]` for an op with a weight: one entry per dim of its main weight as stored (an
 * ONNX initializer's dims) when the op records its weights (graph.h graph_weight), else of its logical weight;
 * and `, "weight_specs": {"name": […], …}` keyed by initializer name when it has several. Nothing for an op
 * without parameters. */
AP_HIDDEN void gpr_weight_json(strbuf *sb, const graph_op *op, const shard_strategy *s);
/* The same as the explanations' text: ` weight S0,R` (the main weight as stored), or with several weights
 * ` weight NAME S0,R, NAME2 S0` (each by initializer name, in the op's order); nothing without parameters. */
AP_HIDDEN void gpr_weight_text(strbuf *sb, const graph_op *op, const shard_strategy *s);
/* Appends `, "input_specs": [[…], …]`: what the strategy needs of each activation input (the one part of a
 * strategy that its output, weight and pending sums may leave open, e.g. which logit dim a loss splits). */
AP_HIDDEN void gpr_input_json(strbuf *sb, const graph_op *op, const shard_strategy *s);
/* The spec that loads cluster c again (ap_cluster_load): the preset or shorthand it was loaded from
 * ("dgx-h100:4x8"), else its file's path, else its name; written to buf. */
AP_HIDDEN const char *gpr_cluster_spec(const hw_cluster *c, char *buf, size_t n);
/* The plan's "stages" array (docs/graph-plan.md "Output"): r's stages, or its one stage on the whole mesh. */
AP_HIDDEN void gpr_stages_json(strbuf *sb, const hw_cluster *c, const gplan_result *r);
/* The text lines of a plan of several stages (nothing for one): each stage's ops, submesh, mesh, time per
 * micro-batch, send/recv and memory with its in-flight micro-batches. */
AP_HIDDEN void gpr_stages_text(strbuf *sb, const gplan_result *r);
/* The whole autopar-plan/2 document of a planner (or reader) result (json), or the planner's text of it;
 * model_path (NULL = none) is the model's file, recorded as "model_path". */
AP_HIDDEN void gpr_plan_write(strbuf *sb, const graph *g, const char *model_path, const hw_cluster *c, int64_t gbs,
                              const gplan_result *r, bool json);

/* The pipeline timeline of r (graph_trace.c) as a Chrome trace-event document, as the transformer's `simulate
 * --trace` writes one (report/trace.h): a process per stage (compute and communication threads) and one per
 * link between two stages (activations and gradients threads). */
AP_HIDDEN void gpr_trace_json(strbuf *sb, const graph *g, const hw_cluster *c, const gplan_result *r, int n_stages,
                              const gpipe_event *ev, size_t n_ev, double end_s);

#endif
