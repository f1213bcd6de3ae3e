/* Validation against measured runs (report layer): `autopar validate FILE.csv` and ap_validate.
 *
 * Each row of a runs table (runs_csv.h; the format is ../shared/reference/README.md) is one measured
 * training run. validate_file builds the row's model (the HF config named by model_config in the models/
 * folder beside the CSV file, or a transformer from the inline architecture columns), its cluster (the gpu
 * preset's node type, num_gpus devices, inter_node_GBps_per_gpu as the network bandwidth when given) and its
 * plan (the stated plan fields; complete_plan chooses the empty ones), then predicts it with cost_estimate.
 * The report compares the predicted and the measured tokens per second per GPU row by row and sums up:
 *  - throughput: the absolute percentage error (APE) of every row measured ok, their mean (MAPE) and
 *    median, and the worst row. A row the tool cannot model is a miss: its APE counts as 1 (as if it had
 *    predicted nothing); rows measured oom have no throughput and are left out;
 *  - ranking: Spearman's rank correlation of predicted and measured throughput within each group of at least
 *    three modelled rows on the same model and gpu, and the mean over the groups;
 *  - out of memory: how many rows measured oom are predicted not to fit, and how many measured ok to fit;
 *  - memory: for rows that report a measured peak, the APE of the predicted memory. The prediction is the
 *    cost model's total per device, which includes its fixed overhead (CUDA context, workspaces, NCCL
 *    buffers) and the allocator's reserve over live bytes. For mem_convention nvidia-smi (read on the first
 *    node) it is the most loaded pipeline rank among the first node's devices; for max_memory_reserved
 *    (PyTorch's reserved bytes, the maximum over GPUs) it is the peak over all ranks. Both conventions see
 *    the caching allocator's pool of freed blocks on top of the live peak (memory.pool_fraction); reserved
 *    bytes leave out the CUDA context and NCCL's own buffers, which nvidia-smi shows;
 *  - the data floor (data_floor.h): rows whose input columns are all equal but whose measurements differ (the
 *    same configuration on two software releases) force an error on any prediction; the report gives the
 *    least MAPE and the least number of rows above 25% that any prediction from the rows' fields can reach.
 * Bad input (a malformed CSV, a missing required column, a field that is not what its column holds) fails
 * the whole run with a one-line message naming file:line:column. A row that is well formed but cannot be
 * modelled (an unknown device, a model config that does not load, a plan that no completion makes valid)
 * gets an error string and the run goes on.
 * Internal header: not installed, not part of the public API. */
#ifndef AP_REPORT_VALIDATE_H
#define AP_REPORT_VALIDATE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/jdoc.h"
#include "cost/calib.h"
#include "cost/cost.h"
#include "plan/plan.h"
#include "report/data_floor.h"

/* How a row's measured peak memory was read (the mem_convention column), and so what it is compared with. */
#define VALIDATE_MEM_MAP(X)                                                                     \
  X(NVIDIA_SMI, "nvidia-smi")                   /* device total on the first node: its ranks */ \
  X(MAX_RESERVED, "max_memory_reserved")        /* PyTorch peak reserved, max over GPUs */ \
  X(RSS, "rss")                                 /* peak resident set of a process, max over ranks (autopar run) */

typedef enum {
#define X(e, s) VALIDATE_MEM_##e,
  VALIDATE_MEM_MAP(X)
#undef X
  VALIDATE_MEM_COUNT_
} validate_mem_convention;

/* One row's prediction next to its measurement. Strings are owned by the report. */
typedef struct {
  const char *id, *model, *gpu;
  const char *source; /* the source column ("" when absent): calibration groups rows by it */
  const char *input_key; /* every input column's text, joined: equal keys = identical inputs (data_floor.h) */
  int64_t line; /* where the row starts in the CSV file */
  int64_t num_gpus;
  bool measured_oom;        /* the source reports the run did not fit */
  bool has_measured;        /* measured_tokens is given */
  double measured_tokens;   /* tokens/s per GPU */
  bool has_mem;             /* a measured peak memory is given */
  double measured_mem_bytes;
  validate_mem_convention mem_convention;
  const char *error; /* why the row could not be modelled; NULL when it was */
  const char *note;  /* a remark on how it was modelled; NULL when none */
  /* The prediction (when error is NULL). */
  plan plan;
  unsigned stated; /* complete_field bits the row stated */
  double predicted_tokens, predicted_peak_mem_bytes, compared_mem_bytes, iter_s, mfu_palm;
  bool fits;
  const char *bound;
  int64_t n_evaluated; /* candidate plans costed to fill the unstated fields */
  double ape;          /* |predicted - measured| / measured; NAN when there is no measured throughput */
  double mem_ape;      /* NAN when no measured memory */
  /* With a search (validate_file_search): the planner's best plan for the row's model, devices, global batch,
   * sequence length and precision, under the same cost model as the prediction above. */
  bool searched;          /* the search ran on this row (it was modelled) */
  bool has_best;          /* it found a plan that fits */
  double best_tokens;     /* its tokens/s per GPU */
  plan best_plan;
  const char *search_note; /* why there is no best plan, or that the time budget cut the search; NULL when none */
  /* Kept only by validate_file_keep: the row's model, cluster and cost environment, alive until the report is
   * freed, so that a calibration can re-evaluate the row's plan under other constants. */
  ap_model *kept_model;
  ap_cluster *kept_cluster;
  struct cost_env *kept_env;
  plan kept_partial;     /* what the completion started from: the stated fields */
  unsigned kept_stated;  /* and which they are */
  bool moe;              /* the model routes tokens to experts (when modelled) */
  /* Cross-validation (validate --cv, calibrate_cv.c): the row's group, which the fit that predicted it left
   * out, and whether that fit had no row of its chip (the chip's constants borrowed: calib_nearest). NULL and
   * false without --cv. */
  const char *fold;
  bool chip_unseen;
  /* The error band (validate_band.c): where the measurement is expected to fall, from the cross-validated
   * residuals of the runs most like this one; band_from says which. has_band false when none was built. */
  bool has_band, has_mem_band;
  double band_low, band_high;                     /* tokens/s per GPU */
  double mem_band_low_bytes, mem_band_high_bytes; /* of compared_mem_bytes when measured, else of the peak */
  const char *band_from;
  /* The fit test at the memory band's upper edge (validate_band.c): fits_band_high is fits with the peak
   * rank's total raised to the band's upper edge (peak_band_high_bytes) against its device's memory
   * (capacity_bytes); fits itself, like the plan completion and the planner, tests the point prediction. */
  bool fits_band_high;
  double capacity_bytes, peak_band_high_bytes;
} validate_row;

/* The share of measurements an error band is built to hold: the middle 80%. */
#define VALIDATE_BAND_LEVEL CALIB_BAND_LEVEL

/* One group of a cross-validation: its rows' figures when predicted by constants fitted without them. */
typedef struct {
  const char *name;
  int64_t n, mem_n;      /* rows with a measured throughput, a measured peak */
  double mape, mem_mape; /* NAN when none */
  int64_t chips_unseen;  /* of its throughput rows, those whose chip no training row measured */
} validate_fold;

/* A group of rows on the same model and gpu, for the rank correlation. */
typedef struct {
  const char *model, *gpu;
  int64_t n;
  double rho; /* NAN when the predictions or the measurements of the group are all equal */
} validate_group;

typedef struct {
  int64_t n_rows, n_errors;
  int64_t n; /* rows in the throughput figures: measured ok, modelled or missed */
  double mape, median_ape, mean_signed_error; /* signed error over modelled rows only */
  const char *worst_id;                        /* NULL when no row was modelled */
  double worst_ape;
  double spearman;  /* mean rho over the groups where it is defined; NAN when none is */
  int64_t n_groups; /* groups of at least 3 rows, listed in groups[] */
  int64_t n_ranked; /* of those, groups whose rho is defined (both sides vary): the mean's count */
  validate_group *groups;
  int64_t oom_rows, oom_predicted_oom, ok_rows, ok_predicted_fit;
  int64_t mem_n;
  double mem_mape;
  int64_t mem_n_by[VALIDATE_MEM_COUNT_];
  double mem_mape_by[VALIDATE_MEM_COUNT_];
  /* With a search: rows whose stated plan fits under the cost model, and of those the rows where the planner's
   * best is at least as fast (within one part in 10^9) and where it is slower; rows whose stated plan does not
   * fit; rows where no plan fits; rows whose search the time budget cut. */
  bool searched;
  int64_t search_compared, search_at_least, search_slower, search_stated_unfit, search_none_fit, search_truncated;
  const char *search_worst_id; /* the row where the planner lags most (NULL when it never does) */
  double search_worst_ratio;   /* best / stated tokens on that row */
  /* The error that rows with identical inputs and different measurements force on any prediction. */
  data_floor floor;
  /* Error bands: rows with a measured throughput (memory) and a band, and how many fell inside it. */
  int64_t band_n, band_covered, mem_band_n, mem_band_covered;
  /* The fit test at the band's upper edge (fits_band_high): oom rows it passes, ok rows it passes. */
  int64_t oom_fit_band_high, ok_fit_band_high;
  double band_level; /* the share of measurements each band is built to hold (0.8) */
  /* validate --cv: the grouping ("source", "chip", "release", "stack"; NULL without --cv) and its groups. */
  const char *cv;
  int64_t n_folds;
  validate_fold *folds;
} validate_summary;

typedef struct validate_report validate_report;

/* Reads the runs table at csv_path, predicts every row and sums up. Fails only on bad input or out of
 * memory; the caller frees *out with validate_report_free. */
/* Reads a runs table held in memory and every row's fields as validate does (types, ranges, enums, the
 * model_config path), without predicting: the row semantics alone (fuzz/fuzz_runs_rows.c). *n_rows (may be
 * NULL) receives the rows read. */
AP_HIDDEN ap_status validate_read_rows(ap_ctx *ctx, const char *file, const char *text, size_t n, int64_t *n_rows);
AP_HIDDEN ap_status validate_file(ap_ctx *ctx, const char *csv_path, validate_report **out);
/* The same, keeping each modelled row's model, cluster and cost environment in the row (kept_*). */
AP_HIDDEN ap_status validate_file_keep(ap_ctx *ctx, const char *csv_path, validate_report **out);
/* The same, and for every modelled row the planner's best plan (search.h) for its model, devices, global batch,
 * sequence length and precision, each search within budget_per_row_s seconds (<= 0: no limit). */
AP_HIDDEN ap_status validate_file_search(ap_ctx *ctx, const char *csv_path, double budget_per_row_s,
                                         validate_report **out);
/* validate_file_search (budget > 0) or validate_file (budget 0) with one cluster for every row (NULL: each
 * row's; ap_validate_on). */
AP_HIDDEN ap_status validate_file_on(ap_ctx *ctx, const char *csv_path, const char *cluster, double budget_per_row_s,
                                     validate_report **out);
/* The same, with stack for the rows whose stack column is empty (a row's own stack wins; PLAN_STACK_DEFAULT:
 * none, each such row runs on its model's default stack). */
AP_HIDDEN ap_status validate_file_stack(ap_ctx *ctx, const char *csv_path, const char *cluster, plan_stack stack,
                                        double budget_per_row_s, validate_report **out);
AP_HIDDEN void validate_report_free(validate_report *r);
/* Cross-validation's assembly (calibrate_cv.c): row i of dst replaced by row i of src, a report of the same
 * table (its strings stay src's: dst must hold src, validate_report_hold); dst takes src over, freeing it with
 * itself; the figures over dst's rows again, with the grouping and its folds (copied into dst). */
AP_HIDDEN void validate_report_set_row(validate_report *dst, int64_t i, const validate_row *src);
AP_HIDDEN ap_status validate_report_hold(ap_ctx *ctx, validate_report *dst, validate_report *src);
AP_HIDDEN ap_status validate_report_resummarise(ap_ctx *ctx, validate_report *rep, const char *cv,
                                                const validate_fold *folds, int64_t n_folds);
/* A row of rep to fill in (bands, folds). */
AP_HIDDEN validate_row *validate_report_row_mut(validate_report *r, int64_t i);
/* A string copied into the report's memory; NULL when out of memory. */
AP_HIDDEN const char *validate_report_strdup(validate_report *r, const char *s);
AP_HIDDEN int64_t validate_report_n_rows(const validate_report *r);
AP_HIDDEN const validate_row *validate_report_row(const validate_report *r, int64_t i);
AP_HIDDEN const validate_summary *validate_report_summary(const validate_report *r);
/* The report as one document, autopar-validate/1 ({"format", "rows": [...], "summary": {...}}, docs/json.md),
 * into d (jd_init is done here; the caller frees it with jd_free); and the text table rendered from such a
 * document alone (validate_doc.c). */
AP_HIDDEN void validate_doc(jd *d, const validate_report *r);
AP_HIDDEN char *validate_doc_text(const json_t *doc);
/* The document written as JSON, or rendered as text; NULL when out of memory. The caller frees the string with
 * free(). */
AP_HIDDEN char *validate_report_json(const validate_report *r);
AP_HIDDEN char *validate_report_text(const validate_report *r);
/* The name of a memory convention as the runs table's mem_convention column spells it; "?" when out of range. */
AP_HIDDEN const char *validate_mem_name(validate_mem_convention c);
/* What a row that cannot be modelled adds to MAPE (1: as if it predicted no throughput). */
AP_HIDDEN double validate_miss_ape(void);
/* The memory to compare with a row's measured peak under its mem_convention: for PyTorch's reserved bytes the
 * peak over all ranks less the CUDA context and NCCL buffers, with the allocator's pool on top; for nvidia-smi
 * on the first node, the most loaded pipeline rank among that node's devices, pool and context included. */
/* Whether the verdict on a kept row v (validate_file_keep), under its environment's current constants,
 * contradicts its outcome, as validate would report it: a run measured ok whose plan does not fit, after the
 * unstated fields are chosen again (only when the kept plan does not fit), or one measured oom that fits. cr is
 * the cost result of the kept plan under these constants; *scratch is overwritten. */
AP_HIDDEN bool validate_fit_disagrees(const validate_row *v, const cost_result *cr, cost_result *scratch);
AP_HIDDEN double validate_compared_mem(const validate_row *v, const struct cost_env *env, const cost_result *cr);
/* The plan in one short line, "tp8 pp4 dp2 mbs1 vpp1 sp1 rc=selective z1", with '*' after each field that
 * the tool chose (not in `stated`): plan_summary's compact style (plan/summary.h) with the row's marks. */
AP_HIDDEN void validate_plan_brief(const plan *p, unsigned stated, char *out, size_t n);

#endif
