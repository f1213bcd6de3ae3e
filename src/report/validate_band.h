/* Error bands from cross-validated residuals (report layer; validate_band.c): each prediction's band is the
 * spread of the out-of-sample errors of the measured runs most like it (chip measured by the fit or not, stack,
 * dense or MoE, offload, device family, scale), widened where those runs are few or unlike it, and it names
 * what it was built from. */
#ifndef AP_REPORT_VALIDATE_BAND_H
#define AP_REPORT_VALIDATE_BAND_H

#include <stdbool.h>

#include "core/core.h"
#include "cost/calib.h"
#include "hw/hw.h"
#include "report/validate.h"

/* One cross-validated residual and what describes its run (cost/calib.h). */
typedef calib_point band_point;

/* The point of a modelled row v (its error as predicted, so a cross-validated row's is out of sample). */
AP_HIDDEN void band_point_of(const validate_row *v, band_point *out);
/* Fills every row's band of rep from the points of the rows in other groups (fold_of_row[i]: row i's group). */
AP_HIDDEN ap_status band_fill_cv(ap_ctx *ctx, validate_report *rep, const int *fold_of_row);
/* Fills every row's band of rep from pool[0..n-1] (the calibration's points). */
AP_HIDDEN ap_status band_fill_pool(ap_ctx *ctx, validate_report *rep, const band_point *pool, int n);

#endif
