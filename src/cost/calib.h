/* Calibrations (cost layer): the cost model's tunable constants per device type and per link class, as one
 * value that `autopar calibrate` fits and writes, and that `--calibration FILE` reads back. The shipped
 * defaults are such a file, data/calibration/default.json, produced by `make calibrate` from the reference
 * runs; without it the documented defaults of tuning.c apply.
 *
 * Compute constants are kept per chip, not per device type (calib_chip); a device whose chip has no entry
 * takes those of the nearest chip of its family, and says so (calib_origin). Each prediction carries the error
 * band of its device family and stack (calib_band).
 *
 * The constants and their physical ranges are those of the cost model's one table (cost_tuning_params,
 * tuning.c), with their scope (a device type, or global for link classes, overlap and memory) and the reason
 * for each default, so a fit can never leave the range in which the constant means what it says (an
 * efficiency stays in (0, 1]). */
#ifndef AP_COST_CALIB_H
#define AP_COST_CALIB_H

#include "cost/cost.h"

enum { CALIB_MAX_CHIPS = 32, CALIB_MAX_BANDS = 64, CALIB_MAX_POINTS = 1024 };

/* The compute constants of one chip: every device type on that chip (hw_device.chip; an A100 40 GB and 80 GB,
 * an H100 SXM, H200 and H800) runs the same silicon and kernels, so they share them; memory capacity and
 * bandwidth stay the device type's own (hw_device). */
typedef struct {
  char name[HW_NAME_MAX];   /* the chip ("GA100"), or the name of a device type that states no chip */
  char family[HW_NAME_MAX]; /* its architecture, from a device preset on the chip (hw_chip_info); "" unknown */
  char vendor[HW_NAME_MAX]; /* its maker ("nvidia"), from the same preset; "" unknown */
  double bf16_peak;         /* that preset's dense bf16 peak, FLOP/s, for the nearest sibling; 0 unknown */
  compute_tuning compute;
} calib_chip;

/* The error band of predictions for one device family and stack: the spread of validate's residuals
 * (predicted / measured tokens/s - 1) over the reference rows of that family and stack, as written by
 * `autopar calibrate`. "any" stands for every family or stack. */
typedef struct {
  char family[HW_NAME_MAX], stack[HW_NAME_MAX];
  int rows;
  double error_low, error_high; /* the 10th and 90th percentiles of the residuals */
  double mape;                  /* their mean absolute value */
} calib_band;

/* One cross-validated residual of a reference run and what describes the run (report/validate_band.c builds
 * each prediction's band from the points nearest to it): its device family, stack, dense or MoE, offload,
 * whether the fit that predicted it had no row of its chip, its devices, and ln(predicted / measured) of its
 * tokens/s and of its memory (NAN when not measured). */
typedef struct {
  char family[HW_NAME_MAX], stack[32];
  bool moe, offload, chip_unseen;
  double num_gpus;
  double err, mem_err;
} calib_point;

/* The level of every error band: the 10th to the 90th percentile. */
#define CALIB_BAND_LEVEL 0.8

/* A band built from the points nearest to a target (calib_points_band): its low and high residual
 * ln(predicted / measured), the points it took, their mean distance to the target, the factor the spread was
 * widened by, and a line on what it was built from. */
typedef struct {
  double r_lo, r_hi;
  int k;
  double mean_distance, widen;
  char from[360];
} calib_near_band;

/* A calibration: compute constants per chip; global communication, overlap and memory constants; error bands. */
typedef struct {
  int n_chips;
  calib_chip chips[CALIB_MAX_CHIPS];
  comm_tuning comm;
  overlap_tuning overlap;
  memory_tuning memory;
  int n_bands;
  calib_band bands[CALIB_MAX_BANDS];
  int n_points; /* `autopar calibrate`'s leave-one-source-out and leave-one-chip-out residuals */
  calib_point points[CALIB_MAX_POINTS];
  char source[256]; /* how it was made */
} cost_calib;

/* Where the compute constants a device runs with come from. */
typedef enum {
  CALIB_FITTED,   /* its chip's entry */
  CALIB_SIBLING,  /* its chip has none: the entry of the nearest chip of its family (calib_nearest) */
  CALIB_VENDOR,   /* no entry of its chip or family: the nearest chip of its vendor in another family */
  CALIB_DEFAULTS, /* no entry of its chip, family or vendor: the documented defaults (tuning.c) */
  CALIB_GIVEN,    /* the caller gave the tuning (cost_env_new with t) */
} calib_how;

typedef struct {
  calib_how how;
  char chip[HW_NAME_MAX];   /* the device's chip (calib_chip_of) */
  char family[HW_NAME_MAX]; /* its family ("" when not stated) */
  char from[HW_NAME_MAX];   /* CALIB_SIBLING, CALIB_VENDOR: the chip whose constants it takes */
  char from_family[HW_NAME_MAX]; /* CALIB_VENDOR: that chip's family */
  char vendor[HW_NAME_MAX]; /* the device's vendor ("" when not stated) */
} calib_origin;

/* The documented defaults, with no chip entries and no bands. */
AP_HIDDEN void calib_defaults(cost_calib *c);
/* The shipped calibration (data/calibration/default.json) when the build embedded one, else the defaults.
 * Parsed once per call; cheap enough for per-run use. */
AP_HIDDEN ap_status calib_builtin(ap_ctx *ctx, cost_calib *out);
/* The chip a device's constants are kept under: its chip, else its own name. */
AP_HIDDEN void calib_chip_of(const hw_device *d, char *out, size_t n);
/* The tuning a device runs with: its chip's entry, else the nearest sibling's (calib_nearest), else the
 * documented compute defaults; origin (may be NULL) says which. */
AP_HIDDEN cost_tuning calib_tuning_for_device(const cost_calib *c, const hw_device *dev, calib_origin *origin);
/* The same for a device type named by its preset name (the defaults' rule when it is not a preset). */
AP_HIDDEN cost_tuning calib_tuning_for(const cost_calib *c, const char *device);
/* The same for chip entry `e` (of this or another calibration), by its name, family and peak. */
AP_HIDDEN cost_tuning calib_tuning_for_chip(const cost_calib *c, const calib_chip *e, calib_origin *origin);
/* The index of the chip entry of c (among those with usable[i], or all when usable is NULL) nearest to a chip
 * of family `family` and vendor `vendor` with dense bf16 peak `bf16_peak`: another chip (not `chip`) of the
 * same family, the nearest in peak on a log scale (the first listed on a tie); when the family has none (or is
 * unknown), the nearest such chip of the same vendor in any family, and *cross (may be NULL) is set; -1 when
 * neither exists. */
AP_HIDDEN int calib_nearest(const cost_calib *c, const char *chip, const char *family, const char *vendor,
                            double bf16_peak, const bool *usable, bool *cross);
/* The index of chip's entry; -1 when c lists none. */
AP_HIDDEN int calib_chip_index(const cost_calib *c, const char *chip);
/* The chip's entry, added (from the defaults, with its family and peak looked up) when missing; NULL when the
 * table is full. */
AP_HIDDEN calib_chip *calib_chip_entry(cost_calib *c, const char *chip);
/* The band for a prediction on family / stack: the first of (family, stack), (family, any), (any, stack),
 * (any, any) among bands[0..n_bands-1]; NULL when none. */
AP_HIDDEN const calib_band *calib_band_for(const calib_band *bands, int n_bands, const char *family, const char *stack);
/* The band of target t from the residuals of pool[0..n-1] with use[i] (NULL: all) nearest to it (calib_band.c,
 * the one neighbour rule of validate's rows and of estimate's and plan's predictions); memory: of the memory
 * residuals. 1 when built, 0 when the pool has none, -1 out of memory. */
/* The q-quantile of sorted x[0..n-1] (n >= 1), by linear interpolation between order statistics. */
AP_HIDDEN double calib_quantile(const double *x, int n, double q);
AP_HIDDEN int calib_points_band(const calib_point *t, const calib_point *pool, int n, const bool *use, bool memory,
                                calib_near_band *out);
/* One line on origin: "GA100 fitted", "B300 not fitted: those of B200, the nearest fitted chip of family
 * Blackwell", ... */
AP_HIDDEN void calib_origin_text(const calib_origin *o, char *out, size_t n);

/* Where an environment's compute constants come from (env.c), and the error band of plan p on it (its
 * device's family and the plan's stack); NULL when the calibration holds none. */
AP_HIDDEN const calib_origin *cost_env_origin(const cost_env *env);
AP_HIDDEN const calib_band *cost_env_band(const cost_env *env, const plan *p);
/* The point that describes plan p on env as a target of calib_points_band (its device family, stack, dense or
 * MoE, offload, whether its chip has constants of its own, its devices), and its band from the calibration's
 * cross-validated residuals (memory: of its memory residuals): 1 built, 0 none (no residuals, or constants that
 * are the documented defaults or given), -1 out of memory. */
AP_HIDDEN void cost_env_point(const cost_env *env, const plan *p, calib_point *out);
AP_HIDDEN int cost_env_point_band(const cost_env *env, const plan *p, bool memory, calib_near_band *out);

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
