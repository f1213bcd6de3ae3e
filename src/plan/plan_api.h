/* The public plan handle (plan layer): a plan plus which of its derivable fields the user set. */
#ifndef AP_PLAN_API_H
#define AP_PLAN_API_H

#include "plan/plan.h"

struct ap_plan {
  plan p;
  bool dp_set, n_micro_set, gbs_set;
  bool loss_set; /* fused_loss was set (ap_plan_set, or the plan file has the key); else the stack's default */
  bool prec_set; /* precision was set (ap_plan_set, or the plan file has the key); else bf16, or fp32 on the
                  * reference executor's cluster (cost_env_for_plan) */
  char origin[256]; /* the file ap_plan_load read, "" otherwise: validation errors name it */
  /* An autopar-plan/2 document (a general graph's op-level plan, docs/graph-plan.md), kept as parsed: it is
   * read against its graph once one is at hand (search/graph_plan_read.c); NULL for autopar-plan/1 plans. */
  json_t *doc2;
};

/* The format tag of an op-level plan, which plan_from_json (autopar-plan/1) does not read. */
#define PLAN_FORMAT_2 "autopar-plan/2"

/* AP_INVALID naming the file when ap is an autopar-plan/2 plan, which the transformer paths (estimate,
 * simulate, export, set) cannot take; AP_OK otherwise. what names the caller ("ap_estimate"). */
AP_HIDDEN ap_status plan_refuse_doc2(ap_ctx *ctx, const ap_plan *ap, const char *what);

/* Fills the fields the user left to derive: dp = devices / (tp·pp·cp) and the micro-batch count =
 * global batch / (micro-batch · dp), when they divide exactly (plan_validate reports it otherwise); turns
 * sequence_parallel off at tp = 1, where it is nothing (Megatron-LM does the same); and gives a plan that does
 * not state fused_loss its stack's default loss (plan/stack.h plan_stack_fused_default). */
AP_HIDDEN void plan_resolve(ap_plan *ap, int64_t n_devices);
/* Returns st; when it is a failure whose message blames "plan: " and the plan came from a file, the message
 * names the file instead ("p.json: dp·tp·pp·cp = … must equal …"). */
AP_HIDDEN ap_status plan_blame_file(ap_ctx *ctx, const ap_plan *ap, ap_status st);

#endif
