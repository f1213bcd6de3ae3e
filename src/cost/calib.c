/* Calibrations (cost layer; see calib.h): the tuning each device runs with, looked up by its chip, else the
 * nearest fitted chip of its family, else the nearest fitted chip of its vendor, else the documented defaults;
 * the error band of a prediction. The file
 * format, and the calibration in force for a context, are in calib_json.c. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cost/calib.h"

const calib_param *calib_params(size_t *n_out) {
  size_t n_all;
  return cost_tuning_params(&n_all, n_out);
}

/* Where constant k of chip entry `chip` (ignored for global ones) sits in c. */
static const double *param_at(const cost_calib *c, const calib_param *k, int chip) {
  size_t off = k->offset;
  if (k->scope == COST_SCOPE_DEVICE)
    return (const double *)((const char *)&c->chips[chip].compute + (off - offsetof(cost_tuning, compute)));
  /* A global constant sits in one of the calibration's three global parts. */
  if (off >= offsetof(cost_tuning, comm) && off < offsetof(cost_tuning, comm) + sizeof(comm_tuning))
    return (const double *)((const char *)&c->comm + (off - offsetof(cost_tuning, comm)));
  if (off >= offsetof(cost_tuning, memory) && off < offsetof(cost_tuning, memory) + sizeof(memory_tuning))
    return (const double *)((const char *)&c->memory + (off - offsetof(cost_tuning, memory)));
  return (const double *)((const char *)&c->overlap + (off - offsetof(cost_tuning, overlap)));
}

double *calib_param_ref(cost_calib *c, const calib_param *k, int chip_index) {
  return (double *)(uintptr_t)param_at(c, k, chip_index);
}

void calib_defaults(cost_calib *c) {
  memset(c, 0, sizeof *c);
  c->comm = comm_tuning_defaults();
  c->overlap = overlap_tuning_defaults();
  c->memory = memory_tuning_defaults();
  snprintf(c->source, sizeof c->source, "documented defaults (src/cost/compute.c, comm.c, tuning.c)");
}

void calib_chip_of(const hw_device *d, char *out, size_t n) { snprintf(out, n, "%s", d->chip[0] ? d->chip : d->name); }

int calib_chip_index(const cost_calib *c, const char *chip) {
  for (int i = 0; i < c->n_chips; i++)
    if (strcasecmp(c->chips[i].name, chip) == 0) return i;
  return -1;
}

calib_chip *calib_chip_entry(cost_calib *c, const char *chip) {
  int i = calib_chip_index(c, chip);
  if (i >= 0) return &c->chips[i];
  if (c->n_chips >= CALIB_MAX_CHIPS) return NULL;
  calib_chip *e = &c->chips[c->n_chips++];
  memset(e, 0, sizeof *e);
  snprintf(e->name, sizeof e->name, "%s", chip);
  (void)hw_chip_info(chip, e->family, sizeof e->family, e->vendor, sizeof e->vendor, &e->bf16_peak);
  e->compute = compute_tuning_defaults();
  return e;
}

/* The nearest usable entry other than chip among those whose family (by_family) or vendor matches `want`. */
static int nearest_by(const cost_calib *c, const char *chip, bool by_family, const char *want, double bf16_peak,
                      const bool *usable) {
  if (!want || !*want) return -1;
  int best = -1;
  double best_d = INFINITY;
  for (int i = 0; i < c->n_chips; i++) {
    const calib_chip *e = &c->chips[i];
    if ((usable && !usable[i]) || strcasecmp(e->name, chip) == 0 || strcmp(by_family ? e->family : e->vendor, want) != 0)
      continue;
    /* Distance in peak on a log scale (a chip of unknown peak is the farthest). */
    double d = bf16_peak > 0 && e->bf16_peak > 0 ? fabs(log(e->bf16_peak / bf16_peak)) : 1e9;
    if (d < best_d) best = i, best_d = d;
  }
  return best;
}

/* A chip of another family of the same vendor runs the same software (CUDA, cuBLAS, the framework's kernels),
 * so its fitted fractions of peak are a closer guess for an unfitted chip than the documented defaults,
 * which come from one profile of one chip (tuning.c); the nearest in peak is the generation closest to it. */
int calib_nearest(const cost_calib *c, const char *chip, const char *family, const char *vendor, double bf16_peak,
                  const bool *usable, bool *cross) {
  if (cross) *cross = false;
  int i = nearest_by(c, chip, true, family, bf16_peak, usable);
  if (i >= 0) return i;
  i = nearest_by(c, chip, false, vendor, bf16_peak, usable);
  if (i >= 0 && cross) *cross = true;
  return i;
}

/* The rule of calib.h: the chip's entry, else the nearest sibling's, else the defaults. */
static cost_tuning tuning_of(const cost_calib *c, const char *chip, const char *family, const char *vendor, double peak,
                             calib_origin *o) {
  cost_tuning t = {compute_tuning_defaults(), c->comm, c->memory, c->overlap};
  calib_origin own = {CALIB_DEFAULTS, "", "", "", "", ""};
  snprintf(own.chip, sizeof own.chip, "%s", chip);
  snprintf(own.family, sizeof own.family, "%s", family ? family : "");
  snprintf(own.vendor, sizeof own.vendor, "%s", vendor ? vendor : "");
  int i = calib_chip_index(c, chip);
  bool cross = false;
  if (i >= 0) {
    own.how = CALIB_FITTED;
  } else if ((i = calib_nearest(c, chip, family, vendor, peak, NULL, &cross)) >= 0) {
    own.how = cross ? CALIB_VENDOR : CALIB_SIBLING;
    snprintf(own.from, sizeof own.from, "%s", c->chips[i].name);
    snprintf(own.from_family, sizeof own.from_family, "%s", c->chips[i].family);
  }
  if (i >= 0) t.compute = c->chips[i].compute;
  if (o) *o = own;
  return t;
}

cost_tuning calib_tuning_for_device(const cost_calib *c, const hw_device *dev, calib_origin *origin) {
  char chip[HW_NAME_MAX];
  calib_chip_of(dev, chip, sizeof chip);
  return tuning_of(c, chip, dev->family, dev->vendor, dev->peak_flop_per_s[HW_DTYPE_BF16], origin);
}

cost_tuning calib_tuning_for_chip(const cost_calib *c, const calib_chip *e, calib_origin *origin) {
  return tuning_of(c, e->name, e->family, e->vendor, e->bf16_peak, origin);
}

cost_tuning calib_tuning_for(const cost_calib *c, const char *device) {
  ap_ctx scratch;
  memset(&scratch, 0, sizeof scratch);
  hw_device d;
  if (hw_device_find(&scratch, device, &d) != AP_OK) {
    memset(&d, 0, sizeof d);
    snprintf(d.name, sizeof d.name, "%s", device);
  }
  return calib_tuning_for_device(c, &d, NULL);
}

const calib_band *calib_band_for(const calib_band *bands, int n_bands, const char *family, const char *stack) {
  const char *fam[2] = {family && *family ? family : "any", "any"}, *stk[2] = {stack && *stack ? stack : "any", "any"};
  static const int order[4][2] = {{0, 0}, {0, 1}, {1, 0}, {1, 1}};
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < n_bands; i++)
      if (strcmp(bands[i].family, fam[order[k][0]]) == 0 && strcmp(bands[i].stack, stk[order[k][1]]) == 0)
        return &bands[i];
  return NULL;
}

void calib_origin_text(const calib_origin *o, char *out, size_t n) {
  switch (o->how) {
  case CALIB_FITTED: snprintf(out, n, "%s fitted", o->chip); break;
  case CALIB_SIBLING:
    snprintf(out, n, "%s not fitted: those of %s, the nearest fitted chip of family %s", o->chip, o->from, o->family);
    break;
  case CALIB_VENDOR:
    snprintf(out, n, "%s not fitted, nor any chip of family %s: those of %s (family %s), the nearest fitted chip of vendor %s",
             o->chip, o->family[0] ? o->family : "(none stated)", o->from, o->from_family, o->vendor);
    break;
  case CALIB_DEFAULTS:
    if (o->vendor[0])
      snprintf(out, n, "%s not fitted, nor any chip of family %s or vendor %s: the documented defaults", o->chip,
               o->family[0] ? o->family : "(none stated)", o->vendor);
    else if (o->family[0])
      snprintf(out, n, "%s not fitted, nor any chip of family %s: the documented defaults", o->chip, o->family);
    else snprintf(out, n, "%s not fitted (no family stated): the documented defaults", o->chip);
    break;
  case CALIB_GIVEN: snprintf(out, n, "given by the caller"); break;
  }
}

void calib_lend(ap_ctx *child, const cost_calib *c) {
  child->calibration = (void *)(uintptr_t)c;
  child->calibration_free = NULL;
}
