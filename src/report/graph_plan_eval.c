/* Op-level plan files read back (report layer; include/autopar.h ap_graph_plan_estimate, _simulate, _export):
 * an autopar-plan/2 document that ap_plan_load kept whole is read against the model's graph
 * (search/graph_plan_read.c) and then estimated with the planner's own objective (the figures of the plan's
 * "time", "memory" and "stages" sections; for a pipeline, Σ t + (B − 1) max t over the stages' times per
 * micro-batch, as the inter-op pass prices it), simulated (each stage's nodes by the op-level event simulator,
 * search/graph_sim.c, whose sweeps give the durations of one event timeline of the 1F1B pipeline,
 * search/graph_pipe.c; `simulate --trace` writes that timeline, graph_trace.c), or
 * written again by the planner's document writer (graph_plan_report.c), so that a plan read and exported is the
 * same file. The formats are in docs/json.md ("autopar-graph-estimate/1", "autopar-graph-simulate/1"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/cost.h"
#include "model/model.h"
#include "plan/plan_api.h"
#include "report/graph_plan_io.h"
#include "search/graph/graph_plan_read.h"
#include "search/graph/graph_pipe.h"

/* Reads the plan against the model's graph on cluster c. */
static ap_status read_plan(ap_ctx *ctx, const ap_model *model, const hw_cluster *c, const ap_plan *ap,
                           gplan_read_info *info, gplan_result *r) {
  memset(r, 0, sizeof *r);
  if (!ap->doc2)
    return ctx_fail(ctx, AP_INVALID, "%s: not an autopar-plan/2 plan (an op-level plan of a general graph)",
                    ap->origin[0] ? ap->origin : "plan");
  if (!model) return ctx_fail(ctx, AP_INVALID, "%s: an autopar-plan/2 plan is read against its graph: name the model "
                              "(--model net.onnx)", ap->origin);
  char cspec[256];
  return gplan_read(ctx, ap->origin, ap->doc2, model_graph(model), c, gpr_cluster_spec(c, cspec, sizeof cspec), info, r);
}

static void mesh_json(strbuf *sb, const shard_mesh *m) {
  sb_puts(sb, "{\"shape\": [");
  for (int a = 0; a < m->n_axes; a++) sb_printf(sb, "%s%lld", a ? ", " : "", (long long)m->shape[a]);
  sb_puts(sb, "], \"levels\": [");
  for (int a = 0; a < m->n_axes; a++) {
    if (a) sb_puts(sb, ", ");
    jx_sb_str(sb, m->level_name[a]);
  }
  sb_puts(sb, "]}");
}

/* The fields the estimate and the simulation share: what was read. */
static void head_json(strbuf *sb, const char *format, const ap_plan *ap, const graph *g, const hw_cluster *c,
                      const gplan_result *r) {
  sb_printf(sb, "{\"format\": \"%s\", \"plan\": ", format);
  jx_sb_str(sb, ap->origin);
  sb_puts(sb, ", \"model\": ");
  jx_sb_str(sb, g->name);
  char cspec[256];
  sb_puts(sb, ", \"cluster\": ");
  jx_sb_str(sb, gpr_cluster_spec(c, cspec, sizeof cspec));
  sb_puts(sb, ", \"mesh\": ");
  mesh_json(sb, &r->mesh);
  sb_printf(sb, ", \"micro_batches\": %.0f, \"micro_batch_size\": %.0f, \"seq\": %.0f", r->n_micro, r->b, r->s);
}

static void head_text(strbuf *sb, const char *what, const ap_plan *ap, const graph *g, const hw_cluster *c,
                      const gplan_result *r) {
  char cspec[256];
  sb_printf(sb, "autopar %s: %s (%s on %s), mesh", what, ap->origin, g->name, gpr_cluster_spec(c, cspec, sizeof cspec));
  for (int a = 0; a < r->mesh.n_axes; a++)
    sb_printf(sb, " %s%lld (%s)", a ? "x " : "", (long long)r->mesh.shape[a], r->mesh.level_name[a]);
  sb_printf(sb, ", %.0f micro-batches of %.0f\n", r->n_micro, r->b);
}

static ap_status finish(ap_ctx *ctx, strbuf *sb, gplan_result *r, char **out) {
  gplan_result_free(r);
  *out = sb_take(sb);
  return *out ? AP_OK : ctx_fail(ctx, AP_NOMEM, "out of memory");
}

ap_status ap_graph_plan_estimate(ap_ctx *ctx, const ap_model *model, const ap_cluster *cluster, const ap_plan *ap,
                                 int format, char **out) {
  API_ENTER(ctx);
  if (out) *out = NULL;
  if (!ctx || !cluster || !ap || !out)
    return ctx_fail(ctx, AP_INVALID, "ap_graph_plan_estimate: ctx, cluster, plan and out must not be NULL");
  const hw_cluster *c = hw_cluster_of(cluster);
  gplan_read_info info;
  gplan_result r;
  ap_status st = read_plan(ctx, model, c, ap, &info, &r);
  if (st) {
    gplan_result_free(&r);
    return st;
  }
  const graph *g = model_graph(model);
  bool fits = r.br.mem_bytes <= r.mem_limit_bytes;
  strbuf sb = {0};
  if (format == AP_OUT_JSON) {
    head_json(&sb, "autopar-graph-estimate/1", ap, g, c, &r);
    sb_printf(&sb, ", \"time\": {\"iteration_s\": %.6g, \"compute_s\": %.6g, \"op_comm_s\": %.6g, \"reshard_s\": %.6g}",
              r.br.total_s, r.br.compute_s, r.br.op_comm_s, r.br.reshard_s);
    sb_printf(&sb, ", \"memory\": {\"peak_bytes\": %.6g, \"limit_bytes\": %.6g, \"fits\": %s}", r.br.mem_bytes,
              r.mem_limit_bytes, fits ? "true" : "false");
    sb_puts(&sb, ", \"stages\": ");
    gpr_stages_json(&sb, c, &r);
    sb_puts(&sb, "}\n");
  } else {
    head_text(&sb, "estimate", ap, g, c, &r);
    if (r.n_stages > 1)
      sb_printf(&sb, "predicted %.4g s per iteration (pipeline latency); summed over the stages: compute %.4g s, op "
                "collectives %.4g s, resharding %.4g s\n", r.br.total_s, r.br.compute_s, r.br.op_comm_s, r.br.reshard_s);
    else
      sb_printf(&sb, "predicted %.4g s per iteration: compute %.4g s, op collectives %.4g s, resharding %.4g s\n",
                r.br.total_s, r.br.compute_s, r.br.op_comm_s, r.br.reshard_s);
    gpr_stages_text(&sb, &r);
    sb_printf(&sb, "memory    peak %.2f GiB per device, limit %.2f GiB%s\n", r.br.mem_bytes / 1073741824.0,
              r.mem_limit_bytes / 1073741824.0, fits ? "" : " (does not fit)");
  }
  return finish(ctx, &sb, &r, out);
}

ap_status ap_graph_plan_simulate(ap_ctx *ctx, const ap_model *model, const ap_cluster *cluster, const ap_plan *ap,
                                 const char *trace_path, int format, char **out) {
  API_ENTER(ctx);
  if (out) *out = NULL;
  if (!ctx || !cluster || !ap || !out)
    return ctx_fail(ctx, AP_INVALID, "ap_graph_plan_simulate: ctx, cluster, plan and out must not be NULL");
  if (trace_path && !*trace_path)
    return ctx_fail(ctx, AP_INVALID, "ap_graph_plan_simulate: trace_path: expected a file name or NULL, got \"\"");
  const hw_cluster *c = hw_cluster_of(cluster);
  gplan_read_info info;
  gplan_result r;
  ap_status st = read_plan(ctx, model, c, ap, &info, &r);
  /* The pipeline as one event timeline (search/graph_pipe.h): each stage's passes from its own simulation. */
  gpipe_stage ps[GST_MAX_LAYERS];
  int n_ps = 0;
  int64_t events = 0;
  gpipe_event *ev = NULL;
  size_t n_ev = 0;
  double sim_s = 0;
  if (!st) st = gpipe_stage_times(ctx, &r, ps, &n_ps, &events);
  /* the transformer simulator's limit on passes (ap_ctx_set_simulate_limit), each a trace event */
  size_t limit = ctx->sim_max_passes > 0 ? (size_t)ctx->sim_max_passes : SIM_MAX_PASSES_DEFAULT;
  double n_passes = 2.0 * n_ps * r.n_micro;
  if (!st && n_passes > (double)limit)
    st = ctx_fail(ctx, AP_UNSUPPORTED, "simulate: the pipeline has %.0f passes (%d stages x %.0f micro-batches x 2), "
                  "more than the limit of %zu; raise it with --max-events", n_passes, n_ps, r.n_micro, limit);
  if (!st) st = gpipe_simulate(ctx, ps, n_ps, (int64_t)r.n_micro, PLAN_SCHED_1F1B, &ev, &n_ev, &sim_s);
  const graph *g = st ? NULL : model_graph(model);
  char *trace = NULL;
  if (!st && trace_path) {
    strbuf tb = {0};
    gpr_trace_json(&tb, g, c, &r, n_ps, ev, n_ev, sim_s);
    if (!(trace = sb_take(&tb))) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  free(ev);
  if (st) {
    gplan_result_free(&r);
    return st;
  }
  bool multi = r.n_stages > 1;
  strbuf sb = {0};
  if (format == AP_OUT_JSON) {
    head_json(&sb, "autopar-graph-simulate/1", ap, g, c, &r);
    sb_printf(&sb, ", \"schedule\": \"1f1b\", \"simulated_iteration_s\": %.6g, \"closed_form_iteration_s\": %.6g, "
                   "\"events\": %lld, \"timeline_events\": %zu, \"peak_bytes\": %.6g",
              sim_s, r.br.total_s, (long long)events, n_ev, r.br.mem_bytes);
    sb_puts(&sb, ", \"stages\": [");
    for (int q = 0; multi && q < n_ps; q++)
      sb_printf(&sb, "%s{\"forward_per_micro_batch_s\": %.6g, \"backward_per_micro_batch_s\": %.6g, "
                "\"weight_sync_s\": %.6g, \"simulated_time_per_micro_batch_s\": %.6g, \"time_per_micro_batch_s\": %.6g, "
                "\"send_recv_s\": %.6g}", q ? ", " : "", ps[q].fwd_s, ps[q].bwd_s, ps[q].wsync_s,
                gpipe_stage_per_micro_s(&ps[q], r.n_micro), r.stages[q].time_s, r.stages[q].send_s);
    sb_puts(&sb, "]");
    if (trace_path) {
      sb_puts(&sb, ", \"trace\": ");
      jx_sb_str(&sb, trace_path);
    }
    sb_puts(&sb, "}\n");
  } else {
    head_text(&sb, "simulate", ap, g, c, &r);
    sb_printf(&sb, "simulated %.4g s per iteration (%lld events; the planner's closed form: %.4g s)\n",
              sim_s, (long long)events, r.br.total_s);
    for (int q = 0; multi && q < n_ps; q++)
      sb_printf(&sb, "  stage %d: simulated %.4g s per micro-batch (forward %.4g s, backward %.4g s, weight sync %.3g s "
                "once; closed form %.4g s, send/recv %.3g s)\n", q, gpipe_stage_per_micro_s(&ps[q], r.n_micro),
                ps[q].fwd_s, ps[q].bwd_s, ps[q].wsync_s, r.stages[q].time_s, r.stages[q].send_s);
    if (multi)
      sb_printf(&sb, "(a pipeline of %d stages, 1F1B over %.0f micro-batches, played as one timeline of %zu events: "
                "passes on each stage's compute stream, sends on the links between the stages)\n", r.n_stages, r.n_micro, n_ev);
    if (trace_path) sb_printf(&sb, "timeline written to %s (Chrome trace format)\n", trace_path);
  }
  /* The trace is written last, so that a failure before it leaves no file. */
  st = finish(ctx, &sb, &r, out);
  if (!st && trace_path && (st = util_write_file_atomic(ctx, trace_path, trace))) {
    free(*out);
    *out = NULL;
  }
  free(trace);
  return st;
}

ap_status ap_graph_plan_export(ap_ctx *ctx, const ap_model *model, const ap_plan *ap, char **out) {
  API_ENTER(ctx);
  if (out) *out = NULL;
  if (!ctx || !ap || !out) return ctx_fail(ctx, AP_INVALID, "ap_graph_plan_export: ctx, plan and out must not be NULL");
  if (!ap->doc2)
    return ctx_fail(ctx, AP_INVALID, "%s: not an autopar-plan/2 plan (an op-level plan of a general graph)",
                    ap->origin[0] ? ap->origin : "plan");
  const char *cname = NULL;
  ap_status st = gplan_read_cluster_name(ctx, ap->origin, ap->doc2, &cname);
  ap_cluster *cl = NULL;
  if (!st && (st = ap_cluster_load(ctx, cname, &cl))) {
    char why[512];
    snprintf(why, sizeof why, "%s", ap_ctx_error(ctx));
    st = ctx_fail(ctx, st, "%s: cluster: \"%.128s\" does not load: %s", ap->origin, cname, why);
  }
  if (st) return st;
  /* Without a model, the file the plan records (model_path: the planner writes it for a model read from a file). */
  ap_model *owned = NULL;
  if (!model) {
    const char *path = NULL;
    st = gplan_read_model_path(ctx, ap->origin, ap->doc2, &path);
    if (!st && !path)
      st = ctx_fail(ctx, AP_INVALID, "%s: an autopar-plan/2 plan is read against its graph, and this one records no "
                    "model_path: name the model with --model", ap->origin);
    if (!st && (st = ap_model_load(ctx, path, &owned))) {
      char why[512];
      snprintf(why, sizeof why, "%s", ap_ctx_error(ctx));
      st = ctx_fail(ctx, st, "%s: model_path: \"%.200s\" does not load: %s", ap->origin, path, why);
    }
    model = owned;
  }
  if (st) {
    ap_cluster_free(cl);
    return st;
  }
  const hw_cluster *c = hw_cluster_of(cl);
  gplan_read_info info;
  gplan_result r;
  st = read_plan(ctx, model, c, ap, &info, &r);
  strbuf sb = {0};
  if (!st) gpr_plan_write(&sb, model_graph(model), model->spec, c, info.gbs, &r, true);
  else gplan_result_free(&r);
  if (!st) st = finish(ctx, &sb, &r, out);
  ap_model_free(owned);
  ap_cluster_free(cl);
  return st;
}

ap_status ap_graph_plan_render(ap_ctx *ctx, const ap_model *model, const ap_cluster *cluster, const char *doc_json,
                               int format, char **out) {
  API_ENTER(ctx);
  if (out) *out = NULL;
  if (!ctx || !model || !cluster || !doc_json || !out)
    return ctx_fail(ctx, AP_INVALID, "ap_graph_plan_render: ctx, model, cluster, document and out must not be NULL");
  if (format != AP_OUT_TEXT && format != AP_OUT_JSON)
    return ctx_fail(ctx, AP_INVALID, "ap_graph_plan_render: format: expected AP_OUT_TEXT or AP_OUT_JSON, got %d", format);
  json_error_t err;
  json_t *root = json_loads(doc_json, 0, &err);
  if (!root) return ctx_fail(ctx, AP_PARSE, "plan document: not JSON: %s (line %d)", err.text, err.line);
  const hw_cluster *c = hw_cluster_of(cluster);
  const graph *g = model_graph(model);
  char cspec[256];
  gplan_read_info info;
  gplan_result r;
  ap_status st = gplan_read(ctx, "plan document", root, g, c, gpr_cluster_spec(c, cspec, sizeof cspec), &info, &r);
  strbuf sb = {0};
  if (!st) gpr_plan_write(&sb, g, model->spec, c, info.gbs, &r, format == AP_OUT_JSON);
  if (st) gplan_result_free(&r);
  else st = finish(ctx, &sb, &r, out);
  json_decref(root);
  return st;
}
