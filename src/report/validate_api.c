/* ap_validate, the public entry point of validation (report layer): reads and predicts a runs table through
 * validate.c and returns its document as JSON or text through validate_doc.c. Apart from validate.c and
 * validate_doc.c so that those two call one way (validate_doc.c reads the report; validate.c calls neither). */
#include <stdlib.h>

#include "report/calibrate.h"
#include "report/validate.h"

/* TUNING: the time budget of the planner's search on one row of `validate --search`, seconds. Most rows (up to
 * a few hundred devices) finish in milliseconds; the largest meshes take longer, and 0.5 s each keeps a run
 * over the 385 reference rows near a minute on two cores. */
static const double VALIDATE_SEARCH_BUDGET_S = 0.5;

ap_status ap_validate(ap_ctx *ctx, const char *csv_path, int flags, char **out) {
  return ap_validate_on(ctx, csv_path, NULL, flags, out);
}

ap_status ap_validate_on(ap_ctx *ctx, const char *csv_path, const char *cluster, int flags, char **out) {
  return ap_validate_stack(ctx, csv_path, cluster, NULL, flags, out);
}

ap_status ap_validate_stack(ap_ctx *ctx, const char *csv_path, const char *cluster, const char *stack, int flags,
                            char **out) {
  API_ENTER(ctx);
  if (!ctx || !out) return ctx_fail(ctx, AP_INVALID, "ap_validate: ctx and out must not be NULL");
  *out = NULL;
  ctx_clear(ctx);
  if (!csv_path || !*csv_path) return ctx_fail(ctx, AP_INVALID, "validate: expected the path of a runs CSV file");
  if (flags & ~(AP_VALIDATE_JSON | AP_VALIDATE_SEARCH))
    return ctx_fail(ctx, AP_INVALID, "ap_validate: unknown flags 0x%x", (unsigned)flags);
  if (cluster && !*cluster) return ctx_fail(ctx, AP_INVALID, "validate: the cluster must not be empty");
  plan_stack stk = PLAN_STACK_DEFAULT;
  if (stack && *stack && (!plan_stack_from_name(stack, &stk) || stk == PLAN_STACK_DEFAULT))
    return ctx_fail(ctx, AP_INVALID,
                    "validate: --stack must be one of megatron-lm, megatron-bridge, nemo, megatron-deepspeed, torchtitan, "
                    "llm-foundry, deepspeed, autopar, any; got \"%.64s\"",
                    stack);
  if (cluster) { /* a bad cluster is bad input, not a row's error */
    ap_cluster *cl = NULL;
    ap_status cst = ap_cluster_load(ctx, cluster, &cl);
    ap_cluster_free(cl);
    if (cst) return cst;
  }
  validate_report *rep = NULL;
  ap_status st =
      validate_file_stack(ctx, csv_path, cluster, stk, (flags & AP_VALIDATE_SEARCH) ? VALIDATE_SEARCH_BUDGET_S : 0, &rep);
  if (st) return st;
  *out = (flags & AP_VALIDATE_JSON) ? validate_report_json(rep) : validate_report_text(rep);
  validate_report_free(rep);
  if (!*out) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  if (mem_failed()) { /* a summary line that fell back to "?" (plan_summary; core/alloc.h) */
    free(*out);
    *out = NULL;
    return ctx_fail(ctx, AP_NOMEM, "out of memory writing the report");
  }
  return AP_OK;
}

ap_status ap_validate_cv(ap_ctx *ctx, const char *csv_path, const char *grouping, int flags, char **out) {
  API_ENTER(ctx);
  if (!ctx || !out) return ctx_fail(ctx, AP_INVALID, "ap_validate_cv: ctx and out must not be NULL");
  *out = NULL;
  ctx_clear(ctx);
  if (!csv_path || !*csv_path) return ctx_fail(ctx, AP_INVALID, "validate: expected the path of a runs CSV file");
  if (flags & ~AP_VALIDATE_JSON) return ctx_fail(ctx, AP_INVALID, "ap_validate_cv: unknown flags 0x%x", (unsigned)flags);
  validate_report *rep = NULL;
  ap_status st = validate_cv(ctx, csv_path, grouping, 0, &rep);
  if (st) return st;
  *out = (flags & AP_VALIDATE_JSON) ? validate_report_json(rep) : validate_report_text(rep);
  validate_report_free(rep);
  if (!*out) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  if (mem_failed()) {
    free(*out);
    *out = NULL;
    return ctx_fail(ctx, AP_NOMEM, "out of memory writing the report");
  }
  return AP_OK;
}
