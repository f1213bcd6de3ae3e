/* The public estimate API (cost layer): resolve a plan's derived fields, validate it, evaluate it and format
 * the result. ap_simulate, which adds the simulator and its trace, is in report/trace.c. */
#include <stdlib.h>
#include <string.h>

#include "core/jsonx.h"
#include "cost/internal.h"
#include "cost/result_doc.h"
#include "plan/plan_api.h"

ap_status cost_env_for_plan(ap_ctx *ctx, const ap_model *model, const ap_cluster *cluster, ap_plan *ap, cost_env **env,
                            ap_cluster **sub, cost_plan_note *note) {
  *env = NULL;
  *sub = NULL;
  memset(note, 0, sizeof *note);
  ap_status st = cost_env_new(ctx, model, cluster, NULL, env);
  if (st) return st;
  plan *p = &ap->p;
  bool executor = cost_env_executor(*env);
  note->stack_source = p->stack != PLAN_STACK_DEFAULT ? "plan" : executor ? "cluster" : "default";
  p->stack = cost_env_stack(*env, p, &note->stack_why);
  /* The executor computes in fp32 only (docs/executor.md): that is its plans' precision unless they say. */
  if (executor && p->stack == PLAN_STACK_AUTOPAR && !ap->prec_set) p->precision = PLAN_PREC_FP32;
  int64_t n = hw_cluster_of(cluster)->n_devices;
  plan_resolve(ap, n);
  /* On the executor's own cluster a plan may take fewer ranks than the profile measured (a serial run of
   * `autopar run`, one rank of a 2-rank profile): it runs on the first of them, which are alike. */
  int64_t want = plan_n_devices(p);
  if (executor && ap->dp_set && want >= 1 && want < n) {
    if ((st = hw_cluster_first_devices(ctx, cluster, want, sub))) return st;
    cost_env_free(*env);
    *env = NULL;
    if ((st = cost_env_new(ctx, model, *sub, NULL, env))) return st;
    note->devices_used = want;
    note->devices_of = n;
  }
  return AP_OK;
}

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
  ap_cluster *sub = NULL;
  cost_plan_note note;
  ap_status st = cost_env_for_plan(ctx, model, cluster, ap, &env, &sub, &note);
  cost_result *r = NULL; /* env and sub are freed below whatever failed */
  if (!st && !(r = calloc(1, sizeof *r))) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  if (!st) st = cost_estimate(ctx, env, &ap->p, r);
  if (!st) {
    *out = format == AP_OUT_JSON ? cost_result_json(env, &ap->p, r, &note) : cost_result_text(env, &ap->p, r, &note);
    if (!*out) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  free(r);
  cost_env_free(env);
  ap_cluster_free(sub);
  if (!st && mem_failed()) { /* a summary line that fell back to "?" (plan_summary; core/alloc.h) */
    free(*out);
    *out = NULL;
    st = ctx_fail(ctx, AP_NOMEM, "out of memory writing the estimate");
  }
  return plan_blame_file(ctx, ap, st);
}
