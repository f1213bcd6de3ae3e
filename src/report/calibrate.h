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

/* Replaces cal's error bands by those of the residuals of rep, a validate run under cal (calibrate_bands.c). */
AP_HIDDEN ap_status calibrate_bands(ap_ctx *ctx, const validate_report *rep, cost_calib *cal);

#endif
