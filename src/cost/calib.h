/* Calibrations (cost layer): the cost model's tunable constants per device type and per link class, as one
 * value that `autopar calibrate` fits and writes, and that `--calibration FILE` reads back. The shipped
 * defaults are such a file, data/calibration/default.json, produced by `make calibrate` from the reference
 * runs; without it the documented defaults of tuning.c apply.
 *
 * The constants and their physical ranges are those of the cost model's one table (cost_tuning_params,
 * tuning.c), with their scope (a device type, or global for link classes, overlap and memory) and the reason
 * for each default, so a fit can never leave the range in which the constant means what it says (an
 * efficiency stays in (0, 1]). */
#ifndef AP_COST_CALIB_H
#define AP_COST_CALIB_H

#include "cost/cost.h"

enum { CALIB_MAX_DEVICES = 32 };

typedef struct {
  char name[HW_NAME_MAX]; /* device type, as in data/devices/ */
  char chip[HW_NAME_MAX]; /* its chip (hw_device.chip), "" when unknown: looked up once, when the entry is made */
  compute_tuning compute;
} calib_device;

/* A calibration: per device type compute constants; global communication, overlap and memory constants. */
typedef struct {
  int n_devices;
  calib_device devices[CALIB_MAX_DEVICES];
  comm_tuning comm;
  overlap_tuning overlap;
  memory_tuning memory;
  char source[256]; /* how it was made */
} cost_calib;

/* The documented defaults, with no device entries. */
AP_HIDDEN void calib_defaults(cost_calib *c);
/* The shipped calibration (data/calibration/default.json) when the build embedded one, else the defaults.
 * Parsed once per call; cheap enough for per-run use. */
AP_HIDDEN ap_status calib_builtin(ap_ctx *ctx, cost_calib *out);
/* The tuning that applies to one device type: its entry, else the entry of a listed device type on the same
 * chip (calib_sibling), else the documented compute defaults. */
AP_HIDDEN cost_tuning calib_tuning_for(const cost_calib *c, const char *device);
/* The same for a device already read (its chip is known, so nothing is looked up). */
AP_HIDDEN cost_tuning calib_tuning_for_device(const cost_calib *c, const hw_device *dev);
/* The index of the first device of c (among those with usable[i], or all when usable is NULL) that is another
 * device type on the same chip as `device` (hw_device.chip); -1 when none. */
AP_HIDDEN int calib_sibling(const cost_calib *c, const char *device, const bool *usable);
/* The device's entry, added (from the defaults) when missing; NULL when the table is full. */
AP_HIDDEN calib_device *calib_device_entry(cost_calib *c, const char *device);

/* Makes a child context (ctx_child) evaluate with calibration c, which the caller keeps alive and frees. */
AP_HIDDEN void calib_lend(ap_ctx *child, const cost_calib *c);
/* The calibration in force for ctx: its --calibration file, else the built-in one. */
AP_HIDDEN ap_status calib_of_ctx(ap_ctx *ctx, cost_calib *out);
AP_HIDDEN ap_status calib_parse(ap_ctx *ctx, const char *file, const char *text, size_t n, cost_calib *out);
AP_HIDDEN ap_status calib_load(ap_ctx *ctx, const char *path, cost_calib *out);
/* Appends the calibration as JSON; fit_summary (may be NULL) is a JSON object inserted under "fit". */
AP_HIDDEN void calib_to_json(const cost_calib *c, const char *fit_summary, strbuf *sb);

/* One constant of a calibration file: an entry of the cost model's table (tuning.c). */
typedef cost_tuning_param calib_param;

/* The constants of calibration files, in file order: the first entries of cost_tuning_params. */
AP_HIDDEN const calib_param *calib_params(size_t *n_out);
/* The value of parameter k for device d (ignored for global ones). */
AP_HIDDEN double *calib_param_ref(cost_calib *c, const calib_param *k, int device_index);

#endif
