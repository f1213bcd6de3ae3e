/* The public estimate API (cost layer): resolve a plan's derived fields, validate it, evaluate it and format
 * the result. */
#include <math.h>
#include <stdlib.h>

#include "core/jsonx.h"
#include "cost/internal.h"
#include "plan/plan_api.h"

ap_status ap_estimate(ap_ctx *ctx, const ap_model *model, const ap_cluster *cluster, ap_plan *ap, int format,
                      char **out) {
  API_ENTER(ctx);
  if (out) *out = NULL;
  if (!ctx || !model || !cluster || !ap || !out)
    return ctx_fail(ctx, AP_INVALID, "%s: ctx, model, cluster, plan and out must not be NULL", "ap_estimate");
  if (format != AP_OUT_TEXT && format != AP_OUT_JSON)
    return ctx_fail(ctx, AP_INVALID, "%s: format: expected AP_OUT_TEXT or AP_OUT_JSON, got %d", "ap_estimate", format);
  ctx_clear(ctx);
  cost_env *env = NULL;
  ap_status st = cost_env_new(ctx, model, cluster, NULL, &env);
  if (st) return st;
  plan_resolve(ap, hw_cluster_of(cluster)->n_devices);
  cost_result *r = calloc(1, sizeof *r);
  if (!r) {
    cost_env_free(env);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  st = cost_estimate(ctx, env, &ap->p, r);
  if (!st) {
    *out = format == AP_OUT_JSON ? cost_result_json(env, &ap->p, r) : cost_result_text(env, &ap->p, r);
    if (!*out) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  free(r);
  cost_env_free(env);
  return plan_blame_file(ctx, ap, st);
}

ap_status ap_simulate(ap_ctx *ctx, const ap_model *model, const ap_cluster *cluster, ap_plan *ap,
                      const char *trace_path, int format, char **out) {
  API_ENTER(ctx);
  if (out) *out = NULL;
  if (!ctx || !model || !cluster || !ap || !out)
    return ctx_fail(ctx, AP_INVALID, "%s: ctx, model, cluster, plan and out must not be NULL", "ap_simulate");
  if (format != AP_OUT_TEXT && format != AP_OUT_JSON)
    return ctx_fail(ctx, AP_INVALID, "%s: format: expected AP_OUT_TEXT or AP_OUT_JSON, got %d", "ap_simulate", format);
  if (trace_path && !*trace_path) return ctx_fail(ctx, AP_INVALID, "ap_simulate: trace_path: expected a file name or NULL, got \"\"");
  ctx_clear(ctx);
  cost_env *env = NULL;
  ap_status st = cost_env_new(ctx, model, cluster, NULL, &env);
  if (st) return st;
  plan_resolve(ap, hw_cluster_of(cluster)->n_devices);
  cost_result *r = calloc(1, sizeof *r);
  char *trace = NULL;
  if (!r) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  if (!st) st = cost_estimate(ctx, env, &ap->p, r);
  double sim_s = 0;
  if (!st && trace_path) {
    if (!(trace = sim_trace_json(env, &ap->p, r, &sim_s))) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  } else if (!st) {
    sim_s = sim_pipeline(&ap->p, r, NULL, 0, NULL);
  }
  if (!st && !isfinite(sim_s)) st = ctx_fail(ctx, AP_INTERNAL, "simulate: the schedule simulation did not complete");
  if (!st) {
    double iter_sim = sim_s + r->time.dp_comm + r->time.optimizer;
    strbuf sb = {0};
    if (format == AP_OUT_JSON) {
      sb_printf(&sb,
                "{\"simulated_pipeline_s\":%.6g,\"closed_form_pipeline_s\":%.6g,\"simulated_iteration_time_s\":%.6g,"
                "\"closed_form_iteration_time_s\":%.6g,\"tokens_per_s_per_device\":%.6g,\"trace\":",
                sim_s, r->pipeline_s, iter_sim, r->iter_s, r->tokens_per_iter / iter_sim / (double)plan_n_devices(&ap->p));
      jx_sb_str(&sb, trace_path ? trace_path : "");
      sb_puts(&sb, "}\n");
    } else {
      sb_printf(&sb,
                "pipeline   %.4f s simulated, %.4f s closed form (%+.2f%%)\niteration  %.4f s simulated (with %.4f s "
                "exposed DP sync and %.4f s optimizer)\n%s%s%s",
                sim_s, r->pipeline_s, 100 * (sim_s - r->pipeline_s) / r->pipeline_s, iter_sim, r->time.dp_comm,
                r->time.optimizer, trace_path ? "trace      " : "", trace_path ? trace_path : "", trace_path ? "\n" : "");
    }
    *out = sb_take(&sb);
    if (!*out) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  /* The trace is written last, so that a failure before it leaves no file. */
  if (!st && trace_path && (st = util_write_file_atomic(ctx, trace_path, trace))) {
    free(*out);
    *out = NULL;
  }
  free(trace);
  free(r);
  cost_env_free(env);
  return plan_blame_file(ctx, ap, st);
}
