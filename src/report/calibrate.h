/* Calibration of the cost model's constants against measured runs (report layer); see calibrate.c. */
#ifndef AP_REPORT_CALIBRATE_H
#define AP_REPORT_CALIBRATE_H

#include "core/core.h"
#include "cost/calib.h"
#include "report/validate.h"

/* Fits the constants to the runs table at csv_path (only rows on `device` when not NULL), writes the
 * calibration to out_path atomically, and returns a report (text, or JSON when format is 1) in *report_out,
 * which the caller frees with free(). effort 0 is the full fit, 1 a quick one (tests). */
AP_HIDDEN ap_status calibrate_file(ap_ctx *ctx, const char *csv_path, const char *device, const char *out_path,
                                   int format, int effort, char **report_out);

/* Cross-validation (calibrate_cv.c): the runs table at csv_path, each group of rows under grouping ("source",
 * "chip", "release", "stack") predicted by constants fitted without it, as one validate report whose summary
 * carries the groups' figures and whose rows carry bands from the other groups' residuals. effort as
 * calibrate_file's. */
AP_HIDDEN ap_status validate_cv(ap_ctx *ctx, const char *csv_path, const char *grouping, int effort, validate_report **out);

/* Replaces cal's error bands by those of the residuals of rep, a validate run under cal (calibrate_bands.c). */
AP_HIDDEN ap_status calibrate_bands(ap_ctx *ctx, const validate_report *rep, cost_calib *cal);

#endif
