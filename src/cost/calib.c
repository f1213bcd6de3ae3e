/* Calibrations (cost layer); see calib.h. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/jsonx.h"
#include "cost/calib.h"

const calib_param *calib_params(size_t *n_out) {
  size_t n_all;
  return cost_tuning_params(&n_all, n_out);
}

/* Where constant k of device entry dev (ignored for global ones) sits in c. */
static const double *param_at(const cost_calib *c, const calib_param *k, int dev) {
  size_t off = k->offset;
  if (k->scope == COST_SCOPE_DEVICE)
    return (const double *)((const char *)&c->devices[dev].compute + (off - offsetof(cost_tuning, compute)));
  /* A global constant sits in one of the calibration's three global parts. */
  if (off >= offsetof(cost_tuning, comm) && off < offsetof(cost_tuning, comm) + sizeof(comm_tuning))
    return (const double *)((const char *)&c->comm + (off - offsetof(cost_tuning, comm)));
  if (off >= offsetof(cost_tuning, memory) && off < offsetof(cost_tuning, memory) + sizeof(memory_tuning))
    return (const double *)((const char *)&c->memory + (off - offsetof(cost_tuning, memory)));
  return (const double *)((const char *)&c->overlap + (off - offsetof(cost_tuning, overlap)));
}

double *calib_param_ref(cost_calib *c, const calib_param *k, int device_index) {
  return (double *)(uintptr_t)param_at(c, k, device_index);
}

void calib_defaults(cost_calib *c) {
  memset(c, 0, sizeof *c);
  c->comm = comm_tuning_defaults();
  c->overlap = overlap_tuning_defaults();
  c->memory = memory_tuning_defaults();
  snprintf(c->source, sizeof c->source, "documented defaults (src/cost/compute.c, comm.c, tuning.c)");
}

/* The chip of a device type ("" when unknown or not stated). */
static void chip_of(const char *device, char *chip, size_t n) {
  ap_ctx scratch;
  memset(&scratch, 0, sizeof scratch);
  hw_device d;
  snprintf(chip, n, "%s", hw_device_find(&scratch, device, &d) == AP_OK ? d.chip : "");
}

calib_device *calib_device_entry(cost_calib *c, const char *device) {
  for (int i = 0; i < c->n_devices; i++)
    if (strcasecmp(c->devices[i].name, device) == 0) return &c->devices[i];
  if (c->n_devices >= CALIB_MAX_DEVICES) return NULL;
  calib_device *d = &c->devices[c->n_devices++];
  snprintf(d->name, sizeof d->name, "%s", device);
  chip_of(device, d->chip, sizeof d->chip);
  d->compute = compute_tuning_defaults();
  return d;
}

/* The first listed device (among the usable) of another type on chip `want`. */
static int sibling_on_chip(const cost_calib *c, const char *device, const char *want, const bool *usable) {
  if (!*want) return -1;
  for (int i = 0; i < c->n_devices; i++) {
    if ((usable && !usable[i]) || strcasecmp(c->devices[i].name, device) == 0) continue;
    if (strcmp(c->devices[i].chip, want) == 0) return i;
  }
  return -1;
}

int calib_sibling(const cost_calib *c, const char *device, const bool *usable) {
  char want[HW_NAME_MAX];
  chip_of(device, want, sizeof want);
  return sibling_on_chip(c, device, want, usable);
}

/* The tuning of `device` on chip `chip`: its entry, else a sibling's (calib_tuning_for). */
static cost_tuning tuning_for(const cost_calib *c, const char *device, const char *chip) {
  cost_tuning t = {compute_tuning_defaults(), c->comm, c->memory, c->overlap};
  for (int i = 0; i < c->n_devices; i++)
    if (strcasecmp(c->devices[i].name, device) == 0) {
      t.compute = c->devices[i].compute;
      return t;
    }
  /* A device type the calibration does not list takes the constants of one it lists on the same chip (an H200
   * those of an H100): the same silicon and kernels, a different memory or power limit. */
  int s = chip ? sibling_on_chip(c, device, chip, NULL) : calib_sibling(c, device, NULL);
  if (s >= 0) t.compute = c->devices[s].compute;
  return t;
}

cost_tuning calib_tuning_for(const cost_calib *c, const char *device) { return tuning_for(c, device, NULL); }

cost_tuning calib_tuning_for_device(const cost_calib *c, const hw_device *dev) {
  return tuning_for(c, dev->name, dev->chip);
}

/* Reads the keys of one object (the constants of device entry `dev`, or the global ones) through the table. */
static ap_status read_scope(const jx_src *s, json_t *obj, cost_scope scope, cost_calib *c, int dev) {
  size_t n_params;
  const calib_param *params = calib_params(&n_params);
  const char *key;
  json_t *v;
  json_object_foreach(obj, key, v) {
    const calib_param *k = NULL;
    for (size_t i = 0; i < n_params; i++)
      if (params[i].scope == scope && strcmp(params[i].name, key) == 0) k = &params[i];
    if (!k) {
      const char *names[64];
      size_t n = 0;
      for (size_t i = 0; i < n_params && n < AP_COUNT(names); i++)
        if (params[i].scope == scope) names[n++] = params[i].name;
      char sugg[256];
      util_suggest(key, names, n, sugg, sizeof sugg);
      return jx_fail(s, key, "unknown constant%s%s", *sugg ? "; did you mean " : "", sugg);
    }
    double x = 0;
    ap_status st = jx_f64(s, obj, key, true, k->min, k->max, &x, NULL);
    if (st) return st;
    *calib_param_ref(c, k, dev) = x;
  }
  return AP_OK;
}

ap_status calib_parse(ap_ctx *ctx, const char *file, const char *text, size_t n, cost_calib *out) {
  calib_defaults(out);
  json_t *root = NULL;
  ap_status st = jx_parse(ctx, file, text, n, &root);
  if (st) return st;
  jx_src src = {ctx, file, ""};
  const char *fmt = NULL, *source = NULL;
  if (!json_is_object(root)) st = ctx_fail(ctx, AP_INVALID, "%s: expected a JSON object", file);
  if (!st) st = jx_str(&src, root, "format", true, &fmt, NULL);
  if (!st && strcmp(fmt, "autopar-calibration/1") != 0)
    st = jx_fail(&src, "format", "expected \"autopar-calibration/1\", got \"%s\"", fmt);
  if (!st) st = jx_str(&src, root, "source", false, &source, NULL);
  if (!st && source) snprintf(out->source, sizeof out->source, "%s", source);
  json_t *devs = json_object_get(root, "devices");
  if (!st && devs && !json_is_object(devs)) st = jx_fail(&src, "devices", "expected an object of device types");
  const char *name;
  json_t *obj;
  if (!st && devs) json_object_foreach(devs, name, obj) {
      char where[128];
      snprintf(where, sizeof where, "devices.%s", name);
      jx_src ds = {ctx, file, where};
      if (!json_is_object(obj)) {
        st = jx_fail(&ds, "", "expected an object of constants");
        break;
      }
      /* A longer name would be cut to fit calib_device.name, and could then match no device or collide with
       * another entry. */
      if (strlen(name) >= HW_NAME_MAX) {
        st = jx_fail(&ds, "", "expected a device type name of at most %d bytes", HW_NAME_MAX - 1);
        break;
      }
      calib_device *d = calib_device_entry(out, name);
      if (!d) {
        st = jx_fail(&ds, "", "more than %d device types", CALIB_MAX_DEVICES);
        break;
      }
      if ((st = read_scope(&ds, obj, COST_SCOPE_DEVICE, out, (int)(d - out->devices)))) break;
    }
  json_t *glob = json_object_get(root, "global");
  if (!st && glob) {
    jx_src gs = {ctx, file, "global"};
    st = json_is_object(glob) ? read_scope(&gs, glob, COST_SCOPE_GLOBAL, out, 0)
                              : jx_fail(&src, "global", "expected an object of constants");
  }
  json_decref(root);
  return st;
}

ap_status calib_load(ap_ctx *ctx, const char *path, cost_calib *out) {
  char *text = NULL;
  size_t n = 0;
  ap_status st = util_read_file(ctx, path, &text, &n);
  if (st) return st;
  st = calib_parse(ctx, path, text, n, out);
  free(text);
  return st;
}

ap_status calib_builtin(ap_ctx *ctx, cost_calib *out) {
  const embedded_file *f = embedded_find("data/calibration/default.json");
  if (!f) {
    calib_defaults(out);
    return AP_OK;
  }
  return calib_parse(ctx, f->path, f->text, f->n_bytes, out);
}

/* Appends one constant. Six significant digits keep the file readable, but rounding can carry a constant at the
 * end of its range past that end (the 16 GiB bound of memory.overhead_bytes prints as 1.71799e+10, which is
 * more than 17179869184), and calib_parse would then refuse the file that calibrate wrote: such a value is
 * written with all 17 digits, which read back exactly. */
static void put_const(strbuf *sb, const calib_param *k, double x) {
  char buf[40];
  snprintf(buf, sizeof buf, "%.6g", x);
  double back = strtod(buf, NULL);
  if (back < k->min || back > k->max) snprintf(buf, sizeof buf, "%.17g", x);
  sb_puts(sb, buf);
}

/* The length of s without a UTF-8 character cut short at its end. The source is copied into a fixed array
 * (by calib_parse and by calibrate), which may cut a character in two, and a file holding half a character is
 * not JSON: calib_parse would refuse what calib_to_json wrote. */
static size_t utf8_whole_len(const char *s) {
  size_t n = strlen(s), i = n;
  while (i > 0 && n - i < 3 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) i--; /* back to the last lead byte */
  if (i == 0) return n;
  unsigned char lead = (unsigned char)s[i - 1];
  size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  return n - (i - 1) < need ? i - 1 : n;
}

void calib_to_json(const cost_calib *c, const char *fit_summary, strbuf *sb) {
  size_t n_params;
  const calib_param *params = calib_params(&n_params);
  sb_puts(sb, "{\n  \"format\": \"autopar-calibration/1\",\n  \"source\": ");
  char source[sizeof c->source];
  size_t len = utf8_whole_len(c->source);
  memcpy(source, c->source, len);
  source[len] = '\0';
  jx_sb_str(sb, source);
  sb_puts(sb, ",\n  \"devices\": {");
  for (int i = 0; i < c->n_devices; i++) {
    sb_printf(sb, "%s\n    ", i ? "," : "");
    jx_sb_str(sb, c->devices[i].name);
    sb_puts(sb, ": {");
    int n = 0;
    for (size_t k = 0; k < n_params; k++) {
      if (params[k].scope != COST_SCOPE_DEVICE) continue;
      sb_printf(sb, "%s\"%s\": ", n++ ? ", " : "", params[k].name);
      put_const(sb, &params[k], *param_at(c, &params[k], i));
    }
    sb_puts(sb, "}");
  }
  sb_puts(sb, "\n  },\n  \"global\": {");
  int n = 0;
  for (size_t k = 0; k < n_params; k++) {
    if (params[k].scope != COST_SCOPE_GLOBAL) continue;
    sb_printf(sb, "%s\n    \"%s\": ", n++ ? "," : "", params[k].name);
    put_const(sb, &params[k], *param_at(c, &params[k], 0));
  }
  sb_puts(sb, "\n  }");
  if (fit_summary) sb_printf(sb, ",\n  \"fit\": %s", fit_summary);
  sb_puts(sb, "\n}\n");
}

ap_status ap_ctx_set_calibration(ap_ctx *ctx, const char *path) {
  API_ENTER(ctx);
  if (!ctx) return AP_INVALID;
  cost_calib *c = NULL;
  if (path && *path) {
    c = malloc(sizeof *c);
    if (!c) return ctx_fail(ctx, AP_NOMEM, "out of memory");
    ap_status st = calib_load(ctx, path, c);
    if (st) {
      free(c);
      return st;
    }
  }
  /* Read and checked: it replaces the previous one, which this context owned or borrowed. */
  if (ctx->calibration_free) ctx->calibration_free(ctx->calibration);
  ctx->calibration = c;
  ctx->calibration_free = c ? free : NULL;
  return AP_OK;
}

void calib_lend(ap_ctx *child, const cost_calib *c) {
  child->calibration = (void *)(uintptr_t)c;
  child->calibration_free = NULL;
}

ap_status calib_of_ctx(ap_ctx *ctx, cost_calib *out) {
  if (ctx && ctx->calibration) {
    *out = *(const cost_calib *)ctx->calibration;
    return AP_OK;
  }
  /* The built-in one is parsed once per context (its memo), not once per evaluation. */
  static const char key[] = "cost.calibration:builtin";
  const cost_calib *cached = ctx_memo_get(ctx, key);
  if (cached) {
    *out = *cached;
    return AP_OK;
  }
  ap_status st = calib_builtin(ctx, out);
  cost_calib *keep = st ? NULL : malloc(sizeof *keep);
  if (keep) {
    *keep = *out;
    if (!ctx_memo_put(ctx, key, keep, free)) free(keep);
  }
  return st;
}
