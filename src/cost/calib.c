/* Calibrations (cost layer); see calib.h. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/jsonx.h"
#include "cost/calib.h"

#define DEV(field) offsetof(compute_tuning, field)
#define GLOB(field) offsetof(cost_calib, field)

/* The fitted constants and their physical ranges. Device-scope efficiencies are fractions of a peak, so they
 * stay in (0, 1]; the fp8 speed-up is at most the 2x of the fp8 peak; a kernel launch costs at most 20 us. */
static const calib_param params[] = {
    {"gemm_eff_max", CALIB_SCOPE_DEVICE, DEV(gemm_eff_max), 0.15, 1.0, "1"},
    {"attn_fwd_eff", CALIB_SCOPE_DEVICE, DEV(attn_fwd_eff), 0.1, 1.0, "1"},
    {"attn_bwd_eff", CALIB_SCOPE_DEVICE, DEV(attn_bwd_eff), 0.1, 1.0, "1"},
    {"mem_eff", CALIB_SCOPE_DEVICE, DEV(mem_eff), 0.2, 1.0, "1"},
    {"fp8_gemm_speedup", CALIB_SCOPE_DEVICE, DEV(fp8_gemm_speedup), 1.0, 2.0, "1"},
    {"moe_gemm_factor", CALIB_SCOPE_DEVICE, DEV(moe_gemm_factor), 0.05, 1.0, "1"},
    {"op_latency_s", CALIB_SCOPE_DEVICE, DEV(op_latency_s), 0.0, 2e-5, "s"},
    {"bus_eff.scale_up", CALIB_SCOPE_GLOBAL, GLOB(comm.bus_eff[COMM_LINK_SCALE_UP]), 0.05, 1.0, "1"},
    {"bus_eff.network", CALIB_SCOPE_GLOBAL, GLOB(comm.bus_eff[COMM_LINK_NETWORK]), 0.05, 1.0, "1"},
    {"overlap.tp", CALIB_SCOPE_GLOBAL, GLOB(overlap.tp_overlap), 0.0, 1.0, "1"},
    {"overlap.dp", CALIB_SCOPE_GLOBAL, GLOB(overlap.dp_overlap), 0.0, 1.0, "1"},
    {"overlap.zero3", CALIB_SCOPE_GLOBAL, GLOB(overlap.zero3_overlap), 0.0, 1.0, "1"},
    {"overlap.cp", CALIB_SCOPE_GLOBAL, GLOB(overlap.cp_overlap), 0.0, 1.0, "1"},
    {"overlap.ep", CALIB_SCOPE_GLOBAL, GLOB(overlap.ep_overlap), 0.0, 1.0, "1"},
    {"overlap.pp", CALIB_SCOPE_GLOBAL, GLOB(overlap.pp_overlap), 0.0, 1.0, "1"},
    {"memory.overhead_bytes", CALIB_SCOPE_GLOBAL, GLOB(memory.overhead_bytes), 0.0, 16.0 * 1073741824.0, "bytes"},
    {"memory.context_bytes", CALIB_SCOPE_GLOBAL, GLOB(memory.context_bytes), 0.0, 4.0 * 1073741824.0, "bytes"},
    {"memory.fragmentation", CALIB_SCOPE_GLOBAL, GLOB(memory.fragmentation), 1.0, 1.6, "1"},
    {"memory.pool_fraction", CALIB_SCOPE_GLOBAL, GLOB(memory.pool_fraction), 0.0, 0.6, "1"},
    {"memory.loss_bytes_per_logit", CALIB_SCOPE_GLOBAL, GLOB(memory.loss_bytes_per_logit), 2.0, 16.0, "bytes"},
};

const calib_param *calib_params(size_t *n_out) {
  *n_out = AP_COUNT(params);
  return params;
}

double *calib_param_ref(cost_calib *c, const calib_param *k, int device_index) {
  if (k->scope == CALIB_SCOPE_DEVICE) return (double *)((char *)&c->devices[device_index].compute + k->offset);
  return (double *)((char *)c + k->offset);
}

void calib_defaults(cost_calib *c) {
  memset(c, 0, sizeof *c);
  c->comm = comm_tuning_defaults();
  c->overlap = overlap_tuning_defaults();
  c->memory = memory_tuning_defaults();
  snprintf(c->source, sizeof c->source, "documented defaults (src/cost/compute.c, comm.c, estimate.c)");
}

calib_device *calib_device_entry(cost_calib *c, const char *device) {
  for (int i = 0; i < c->n_devices; i++)
    if (strcasecmp(c->devices[i].name, device) == 0) return &c->devices[i];
  if (c->n_devices >= CALIB_MAX_DEVICES) return NULL;
  calib_device *d = &c->devices[c->n_devices++];
  snprintf(d->name, sizeof d->name, "%s", device);
  d->compute = compute_tuning_defaults();
  return d;
}

/* The chip of a device type ("" when unknown or not stated). */
static void chip_of(const char *device, char *chip, size_t n) {
  ap_ctx scratch;
  memset(&scratch, 0, sizeof scratch);
  hw_device d;
  snprintf(chip, n, "%s", hw_device_find(&scratch, device, &d) == AP_OK ? d.chip : "");
}

int calib_sibling(const cost_calib *c, const char *device, const bool *usable) {
  char want[HW_NAME_MAX], have[HW_NAME_MAX];
  chip_of(device, want, sizeof want);
  if (!*want) return -1;
  for (int i = 0; i < c->n_devices; i++) {
    if ((usable && !usable[i]) || strcasecmp(c->devices[i].name, device) == 0) continue;
    chip_of(c->devices[i].name, have, sizeof have);
    if (strcmp(have, want) == 0) return i;
  }
  return -1;
}

cost_tuning calib_tuning_for(const cost_calib *c, const char *device) {
  cost_tuning t = {compute_tuning_defaults(), c->comm, c->memory, c->overlap};
  for (int i = 0; i < c->n_devices; i++)
    if (strcasecmp(c->devices[i].name, device) == 0) {
      t.compute = c->devices[i].compute;
      return t;
    }
  /* A device type the calibration does not list takes the constants of one it lists on the same chip (an H200
   * those of an H100): the same silicon and kernels, a different memory or power limit. */
  int s = calib_sibling(c, device, NULL);
  if (s >= 0) t.compute = c->devices[s].compute;
  return t;
}

/* Reads the keys of one object into doubles of a struct through the parameter table. */
static ap_status read_scope(const jx_src *s, json_t *obj, calib_scope scope, void *base) {
  const char *key;
  json_t *v;
  json_object_foreach(obj, key, v) {
    const calib_param *k = NULL;
    for (size_t i = 0; i < AP_COUNT(params); i++)
      if (params[i].scope == scope && strcmp(params[i].name, key) == 0) k = &params[i];
    if (!k) {
      const char *names[AP_COUNT(params)];
      size_t n = 0;
      for (size_t i = 0; i < AP_COUNT(params); i++)
        if (params[i].scope == scope) names[n++] = params[i].name;
      char sugg[256];
      util_suggest(key, names, n, sugg, sizeof sugg);
      return jx_fail(s, key, "unknown constant%s%s", *sugg ? "; did you mean " : "", sugg);
    }
    double x = 0;
    ap_status st = jx_f64(s, obj, key, true, k->min, k->max, &x, NULL);
    if (st) return st;
    *(double *)((char *)base + k->offset) = x;
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
      if ((st = read_scope(&ds, obj, CALIB_SCOPE_DEVICE, &d->compute))) break;
    }
  json_t *glob = json_object_get(root, "global");
  if (!st && glob) {
    jx_src gs = {ctx, file, "global"};
    st = json_is_object(glob) ? read_scope(&gs, glob, CALIB_SCOPE_GLOBAL, out)
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
    for (size_t k = 0; k < AP_COUNT(params); k++) {
      if (params[k].scope != CALIB_SCOPE_DEVICE) continue;
      sb_printf(sb, "%s\"%s\": ", n++ ? ", " : "", params[k].name);
      put_const(sb, &params[k], *(const double *)((const char *)&c->devices[i].compute + params[k].offset));
    }
    sb_puts(sb, "}");
  }
  sb_puts(sb, "\n  },\n  \"global\": {");
  int n = 0;
  for (size_t k = 0; k < AP_COUNT(params); k++) {
    if (params[k].scope != CALIB_SCOPE_GLOBAL) continue;
    sb_printf(sb, "%s\n    \"%s\": ", n++ ? "," : "", params[k].name);
    put_const(sb, &params[k], *(const double *)((const char *)c + params[k].offset));
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
  return calib_builtin(ctx, out);
}
