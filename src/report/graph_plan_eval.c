/* Op-level plan files read back (report layer; include/autopar.h ap_graph_plan_estimate, _simulate, _export):
 * an autopar-plan/2 document that ap_plan_load kept whole is read against the model's graph
 * (search/graph_plan_read.c) and then estimated with the planner's own objective (the figures of the plan's
 * "time", "memory" and "stages" sections; for a pipeline, Σ t + (B − 1) max t over the stages' times per
 * micro-batch, as the inter-op pass prices it), simulated with the op-level event simulator (search/graph_sim.c;
 * a pipeline's stages each on its own nodes, then the same 1F1B formula over the simulated stage times), or
 * written again by the planner's document writer (graph_plan_report.c), so that a plan read and exported is the
 * same file. The formats are in docs/json.md ("autopar-graph-estimate/1", "autopar-graph-simulate/1"). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/model.h"
#include "plan/plan_api.h"
#include "report/graph_plan_io.h"
#include "search/graph_plan_read.h"
#include "search/graph_sim.h"

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
                                 int format, char **out) {
  API_ENTER(ctx);
  if (out) *out = NULL;
  if (!ctx || !cluster || !ap || !out)
    return ctx_fail(ctx, AP_INVALID, "ap_graph_plan_simulate: ctx, cluster, plan and out must not be NULL");
  const hw_cluster *c = hw_cluster_of(cluster);
  gplan_read_info info;
  gplan_result r;
  ap_status st = read_plan(ctx, model, c, ap, &info, &r);
  double sim_s = 0;
  int64_t events = 0;
  gstage sim_st[GST_MAX_LAYERS]; /* a pipeline's stages with their simulated times per micro-batch */
  for (int q = 0; !st && q < (r.n_stages > 1 ? r.n_stages : 1); q++) {
    gsim sim;
    if (r.n_stages > 1) {
      const gstage *y = &r.stages[q];
      if ((st = gsim_init_range(ctx, r.a, y->gp, y->first_node, y->last_node, &sim))) break;
      sim_st[q] = *y;
      sim_st[q].time_s = gsim_full(&sim, y->choice) / r.n_micro + y->send_s;
    } else {
      if ((st = gsim_init(ctx, r.a, &r.gp, &sim))) break;
      sim_s = gsim_full(&sim, r.choice);
    }
    events += sim.n_events;
  }
  if (st) {
    gplan_result_free(&r);
    return st;
  }
  if (r.n_stages > 1) sim_s = gstage_latency_s(sim_st, r.n_stages, r.n_micro);
  const graph *g = model_graph(model);
  strbuf sb = {0};
  if (format == AP_OUT_JSON) {
    head_json(&sb, "autopar-graph-simulate/1", ap, g, c, &r);
    sb_printf(&sb, ", \"simulated_iteration_s\": %.6g, \"closed_form_iteration_s\": %.6g, \"events\": %lld, "
                   "\"peak_bytes\": %.6g", sim_s, r.br.total_s, (long long)events, r.br.mem_bytes);
    sb_puts(&sb, ", \"stages\": [");
    for (int q = 0; q < r.n_stages && r.n_stages > 1; q++)
      sb_printf(&sb, "%s{\"simulated_time_per_micro_batch_s\": %.6g, \"time_per_micro_batch_s\": %.6g, "
                "\"send_recv_s\": %.6g}", q ? ", " : "", sim_st[q].time_s, r.stages[q].time_s, r.stages[q].send_s);
    sb_puts(&sb, "]}\n");
  } else {
    head_text(&sb, "simulate", ap, g, c, &r);
    sb_printf(&sb, "simulated %.4g s per iteration (%lld events; the planner's closed form, without overlap: %.4g s)\n",
              sim_s, (long long)events, r.br.total_s);
    for (int q = 0; q < r.n_stages && r.n_stages > 1; q++)
      sb_printf(&sb, "  stage %d: simulated %.4g s per micro-batch (closed form %.4g s, send/recv %.3g s)\n", q,
                sim_st[q].time_s, r.stages[q].time_s, r.stages[q].send_s);
    if (r.n_stages > 1)
      sb_printf(&sb, "(a pipeline of %d stages, 1F1B over %.0f micro-batches: sum + (micro-batches - 1) x the slowest)\n",
                r.n_stages, r.n_micro);
  }
  return finish(ctx, &sb, &r, out);
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
  const hw_cluster *c = hw_cluster_of(cl);
  gplan_read_info info;
  gplan_result r;
  st = read_plan(ctx, model, c, ap, &info, &r);
  strbuf sb = {0};
  if (!st) gpr_plan_json(&sb, model_graph(model), c, info.gbs, &r);
  else gplan_result_free(&r);
  if (!st) st = finish(ctx, &sb, &r, out);
  ap_cluster_free(cl);
  return st;
}
