/* The public estimate API (cost layer): resolve a plan's derived fields, validate it, evaluate it and format
 * the result. ap_simulate, which adds the simulator and its trace, is in report/trace.c. */
#include <stdlib.h>

#include "core/jsonx.h"
#include "cost/internal.h"
#include "cost/result_doc.h"
#include "plan/plan_api.h"

ap_status ap_estimate(ap_ctx *ctx, const ap_model *model, const ap_cluster *cluster, ap_plan *ap, int format,
                      char **out) {
  API_ENTER(ctx);
  if (out) *out = NULL;
  if (!ctx || !model || !cluster || !ap || !out)
    return ctx_fail(ctx, AP_INVALID, "%s: ctx, model, cluster, plan and out must not be NULL", "ap_estimate");
  if (plan_refuse_doc2(ctx, ap, "ap_estimate")) return AP_INVALID;
  if (format != AP_OUT_TEXT && format != AP_OUT_JSON)
    return ctx_fail(ctx, AP_INVALID, "%s: format: expected AP_OUT_TEXT or AP_OUT_JSON, got %d", "ap_estimate", format);
  ctx_clear(ctx);
  cost_env *env = NULL;
  ap_status st = cost_env_new(ctx, model, cluster, NULL, &env);
  if (st) return st;
  plan_resolve(ap, hw_cluster_of(cluster)->n_devices);
  plan_default_sp(ap, cost_env_graph(env)->default_seq);
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
  if (!st && mem_failed()) { /* a summary line that fell back to "?" (plan_summary; core/alloc.h) */
    free(*out);
    *out = NULL;
    st = ctx_fail(ctx, AP_NOMEM, "out of memory writing the estimate");
  }
  return plan_blame_file(ctx, ap, st);
}
