/* The fit of a calibration (report layer, private to calibrate.c and calibrate_cv.c): the rows a fit reads, its
 * coordinate descent (calibrate.c's "Method"), and the groupings that cross-validation leaves out one at a
 * time (calibrate_cv.c). */
#ifndef AP_REPORT_CALIBRATE_FIT_H
#define AP_REPORT_CALIBRATE_FIT_H

#include <stdbool.h>

#include "core/core.h"
#include "cost/calib.h"
#include "report/validate.h"

/* TUNING: three sweeps of 14 golden-section steps each settle every constant to about 0.1% of its range
 * (0.618^14 ≈ 1e-3); further sweeps change the fitted MAPE by less than 0.1 point on runs.csv. */
enum { FIT_SWEEPS = 3, GOLDEN_STEPS = 14 };

/* The most groups a grouping may hold (the rest share the last). */
enum { MAX_FOLDS = 64 };

typedef struct {
  const validate_row *v;
  int dev;       /* index in the calibration's device table */
  int fold;      /* group under the run's grouping */
  bool fp8, moe; /* whether the row exercises fp8 GEMMs and routed experts */
  bool tput, mem; /* whether it has a measured throughput, a measured peak memory */
} cal_row;

typedef struct {
  cost_calib *cal;
  cal_row *rows;
  int n_rows;
  cost_result *scratch; /* two */
  int exclude_fold; /* -1 = fit on every row */
  int sweeps, steps;
  bool memory; /* fit the memory constants to measured peaks instead of throughput */
} fit_state;

/* How rows are grouped for leaving one group out (validate --cv). */
typedef enum {
  CV_SOURCE,  /* the source column up to its first space ("mosaicml/llm-foundry") */
  CV_CHIP,    /* the chip of the row's gpu (calib_chip_of: GA100 for both A100s) */
  CV_RELEASE, /* the source and its release: the container ("26.02 NeMo Container") or the commit ("@495218376") */
  CV_STACK,   /* the stack the row runs on (its stack column, else a transformer's default) */
  CV_COUNT_
} cv_grouping;

/* The grouping's name as --cv spells it; and the grouping of a name (false when it names none). */
AP_HIDDEN const char *cv_grouping_name(cv_grouping g);
AP_HIDDEN bool cv_grouping_from_name(const char *name, cv_grouping *out);
/* Row v's group under g, as text, into out. */
AP_HIDDEN void cv_key(const validate_row *v, cv_grouping g, char *out, size_t n);
/* The index of key among names[0..*n_names-1], added (a copy the caller frees) when new; the last when full. */
AP_HIDDEN int cv_fold_index(const char *key, const char **names, int *n_names, int cap);

/* The fit rows of a kept report (validate_file_keep): each fits the constants of its device's chip (chips
 * missing from cal are added with defaults), grouped under g into fold_names. Only rows on `device` when not
 * NULL. Returns their count. */
AP_HIDDEN int calfit_collect_rows(const validate_report *rep, cost_calib *cal, const char *device, cv_grouping g,
                                  cal_row *rows, const char **fold_names, int *n_folds);
/* Fits the constants (throughput, or memory when f->memory) to the rows outside f->exclude_fold. */
AP_HIDDEN void calfit_fit(fit_state *f);
/* After a fit that left out some rows: every chip with no training row takes the nearest fitted chip's. */
AP_HIDDEN void calfit_borrow_for_unfitted(fit_state *f);
/* The MAPE of one fold's rows (every row when fold < 0) under f's calibration; *n_out (may be NULL) their count. */
AP_HIDDEN double calfit_mape_of(fit_state *f, int fold, int *n_out);
/* Warns about every constant at an end of its range. */
AP_HIDDEN void calfit_warn_at_edges(ap_ctx *ctx, cost_calib *cal);

#endif
