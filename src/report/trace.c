/* The simulated timeline as a Chrome trace-event document, and the simulate answer (report layer); see
 * trace.h. The trace-event format: Google, "Trace Event Format" (the JSON object form with traceEvents; "X"
 * complete events carry ts and dur in microseconds, "M" metadata events name processes and threads). */
#include <math.h>
#include <stdlib.h>

#include "core/jsonx.h"
#include "cost/result_doc.h"
#include "plan/plan_api.h"
#include "report/trace.h"

static const char *const pass_names[] = {[SIM_F] = "F", [SIM_B] = "B", [SIM_W] = "W"};

char *report_trace_json(const char *model, const char *cluster, const plan *p, const cost_result *r,
                        const sim_event *ev, size_t n, double pipe) {
  strbuf sb = {0};
  sb_puts(&sb, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"model\":");
  jx_sb_str(&sb, model);
  sb_puts(&sb, ",\"cluster\":");
  jx_sb_str(&sb, cluster);
  sb_printf(&sb, ",\"schedule\":\"%s\",\"simulated_pipeline_s\":", plan_schedule_name(p->schedule));
  jx_sb_num(&sb, pipe);
  sb_puts(&sb, ",\"closed_form_pipeline_s\":");
  jx_sb_num(&sb, r->pipeline_s);
  sb_puts(&sb, "},\"traceEvents\":[");
  bool first = true;
  for (int64_t rk = 0; rk < p->pp; rk++) {
    for (int tid = 0; tid < 2; tid++) {
      sb_printf(&sb, "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%lld,\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
                first ? "" : ",", (long long)rk, tid, tid ? "communication" : "compute");
      first = false;
    }
    sb_printf(&sb, ",{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%lld,\"args\":{\"name\":\"pipeline stage %lld\"}}",
              (long long)rk, (long long)rk);
  }
  for (size_t i = 0; i < n; i++) {
    const sim_event *e = &ev[i];
    const char *name = pass_names[e->kind];
    sb_printf(&sb,
              ",{\"name\":\"%s mb%lld c%d\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":0,"
              "\"args\":{\"micro_batch\":%lld,\"chunk\":%d}}",
              name, (long long)e->micro_batch, e->chunk, name, e->start_s * 1e6, (e->end_s - e->start_s) * 1e6, e->rank,
              (long long)e->micro_batch, e->chunk);
    /* The activation (or its gradient) leaves for the neighbouring chunk on the communication thread. */
    if (r->p2p_s > 0 && ((e->kind == SIM_F && e->chunk + 1 < p->pp * p->vpp) || (e->kind == SIM_B && e->chunk > 0)))
      sb_printf(&sb,
                ",{\"name\":\"send mb%lld\",\"cat\":\"send\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":1}",
                (long long)e->micro_batch, e->end_s * 1e6, r->p2p_s * 1e6, e->rank);
  }
  /* After the pipeline: exposed data-parallel synchronisation and the optimizer step, on every stage. */
  for (int64_t rk = 0; rk < p->pp; rk++) {
    sb_printf(&sb, ",{\"name\":\"dp-sync (exposed)\",\"cat\":\"dp\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%lld,\"tid\":1}",
              pipe * 1e6, r->time.dp_comm * 1e6, (long long)rk);
    sb_printf(&sb, ",{\"name\":\"optimizer\",\"cat\":\"optimizer\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%lld,\"tid\":0}",
              (pipe + r->time.dp_comm) * 1e6, r->time.optimizer * 1e6, (long long)rk);
  }
  sb_puts(&sb, "]}\n");
  return sb_take(&sb);
}

ap_status ap_ctx_set_simulate_limit(ap_ctx *ctx, int64_t max_passes) {
  API_ENTER(ctx);
  if (!ctx) return AP_INVALID;
  if (max_passes < 0) return ctx_fail(ctx, AP_INVALID, "simulate: the pass limit must be >= 0, got %lld", (long long)max_passes);
  ctx->sim_max_passes = max_passes;
  return AP_OK;
}

ap_status ap_simulate(ap_ctx *ctx, const ap_model *model, const ap_cluster *cluster, ap_plan *ap,
                      const char *trace_path, int format, char **out) {
  API_ENTER(ctx);
  if (out) *out = NULL;
  if (!ctx || !model || !cluster || !ap || !out)
    return ctx_fail(ctx, AP_INVALID, "ap_simulate: ctx, model, cluster, plan and out must not be NULL");
  if (plan_refuse_doc2(ctx, ap, "ap_simulate")) return AP_INVALID;
  if (format != AP_OUT_TEXT && format != AP_OUT_JSON)
    return ctx_fail(ctx, AP_INVALID, "ap_simulate: format: expected AP_OUT_TEXT or AP_OUT_JSON, got %d", format);
  if (trace_path && !*trace_path) return ctx_fail(ctx, AP_INVALID, "ap_simulate: trace_path: expected a file name or NULL, got \"\"");
  ctx_clear(ctx);
  cost_env *env = NULL;
  ap_cluster *sub = NULL;
  cost_plan_note note;
  ap_status st = cost_env_for_plan(ctx, model, cluster, ap, &env, &sub, &note);
  if (st) {
    cost_env_free(env);
    ap_cluster_free(sub);
    return st;
  }
  cost_result *r = calloc(1, sizeof *r);
  char *trace = NULL;
  sim_event *ev = NULL;
  size_t n_ev = 0;
  double sim_s = 0;
  size_t limit = ctx->sim_max_passes > 0 ? (size_t)ctx->sim_max_passes : SIM_MAX_PASSES_DEFAULT;
  if (!r) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  if (!st) st = cost_estimate(ctx, env, &ap->p, r);
  if (!st) st = sim_pipeline(ctx, &ap->p, r, limit, trace_path ? &ev : NULL, &n_ev, &sim_s);
  if (!st && trace_path &&
      !(trace = report_trace_json(cost_env_graph(env)->name, cost_env_cluster(env)->name, &ap->p, r, ev, n_ev, sim_s)))
    st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  /* The answer: one document (autopar-simulate/1, docs/json.md), written or rendered (cost/result_fmt.c). */
  if (!st && !(*out = cost_simulate_out(&ap->p, r, sim_s, trace_path, format)))
    st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  /* The trace is written last, so that a failure before it leaves no file. */
  if (!st && trace_path && (st = util_write_file_atomic(ctx, trace_path, trace))) {
    free(*out);
    *out = NULL;
  }
  free(ev);
  free(trace);
  free(r);
  cost_env_free(env);
  ap_cluster_free(sub);
  return plan_blame_file(ctx, ap, st);
}
