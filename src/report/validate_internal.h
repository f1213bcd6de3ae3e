/* What validate.c, validate_model.c and validate_summary.c share (report layer, private to them): the report
 * object, a row's inputs as read from the runs table (row_spec) and the functions one file calls in another.
 * validate.c reads the rows and runs the predictions; validate_model.c builds each row's model and cluster;
 * validate_summary.c computes the figures over the rows. Nothing outside these three files includes it. */
#ifndef AP_REPORT_VALIDATE_INTERNAL_H
#define AP_REPORT_VALIDATE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"
#include "report/runs_csv.h"
#include "report/validate.h"

struct validate_report {
  arena *a;
  bool keep;
  bool search;            /* validate_file_search: the planner's best plan for every row */
  double search_budget_s; /* per row */
  const char *cluster;    /* ap_validate_on: one cluster for every row; NULL: each row's */
  plan_stack stack;       /* ap_validate_stack: the stack of rows whose stack column is empty; DEFAULT: none */
  runs_table *t;
  int64_t n_rows;
  validate_row *rows;
  validate_summary sum;
  validate_report **held; /* reports whose rows this one holds (validate_report_hold), freed with it */
  int n_held;
  const char *cv;          /* validate_report_resummarise's grouping, copied into sum.cv */
  validate_fold *folds;
  int64_t n_folds;
};

/* The architecture as the row states it inline. */
typedef struct {
  const char *model_config; /* "" when none */
  bool has_layers, has_hidden, has_heads, has_vocab, has_ffn, has_kv, has_mlp, has_experts, has_top_k, has_moe_ffn;
  int64_t layers, hidden, heads, vocab, ffn, kv, experts, top_k, moe_ffn;
  int mlp; /* index into mlp_names */
  int arch; /* index into arch_names; -1 when empty */
} arch_spec;

/* The cluster as the row states it. */
typedef struct {
  const char *gpu;
  int64_t num_gpus, gpus_per_node;
  bool has_gpus_per_node, has_inter_bw;
  double inter_GBps;
} cluster_spec;

typedef struct {
  arch_spec arch;
  cluster_spec cl;
  plan partial;
  unsigned stated;
  bool selective; /* recompute "selective": which selective granularity depends on the model (row_predict) */
} row_spec;

/* The row's model (validate_model.c): the named HF config or the inline architecture; failures are the row's
 * error, left in ctx, and *note says when a built-in preset or the inline columns stood in for the file. */
ap_status validate_row_model(ap_ctx *ctx, arena *a, const char *csv_dir, const validate_row *v, const row_spec *rs,
                             ap_model **out, const char **note);
/* The row's cluster (validate_model.c) from its gpu, device counts and inter-node bandwidth. */
ap_status validate_row_cluster(ap_ctx *ctx, const validate_row *v, const cluster_spec *cs, ap_cluster **out);
/* The figures over all rows (validate_summary.c) into rep->sum. */
ap_status validate_summarise(ap_ctx *ctx, validate_report *rep);

#endif
