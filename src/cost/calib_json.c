/* Calibration files (cost layer; see calib.h), format autopar-calibration/2 (docs/calibration.md): compute
 * constants per chip under "chips", the global constants, the error bands; the fit summary under "fit" is
 * kept for people and not read. Files of format /1 (constants per device type under "devices") still read:
 * each device type's entry becomes its chip's. Every key is checked (jx_check_keys, the wording of every
 * reader) and every constant against its physical range. Also the calibration a context evaluates with: its
 * --calibration file, else the shipped one (data/calibration/default.json, embedded), parsed once. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonx.h"
#include "cost/calib.h"

/* The names of the constants of one scope, for the unknown-key check. */
static size_t scope_names(cost_scope scope, const char **names, size_t cap) {
  size_t n_params, n = 0;
  const calib_param *params = calib_params(&n_params);
  for (size_t i = 0; i < n_params && n < cap; i++)
    if (params[i].scope == scope) names[n++] = params[i].name;
  return n;
}

/* Reads the keys of one object (the constants of chip entry `chip`, or the global ones) through the table. */
static ap_status read_scope(const jx_src *s, json_t *obj, cost_scope scope, cost_calib *c, int chip) {
  const char *names[64];
  size_t n_names = scope_names(scope, names, AP_COUNT(names));
  ap_status st = jx_check_keys(s, obj, names, n_names, 0);
  size_t n_params;
  const calib_param *params = calib_params(&n_params);
  for (size_t i = 0; i < n_params && !st; i++) {
    if (params[i].scope != scope) continue;
    double x = 0;
    bool found = false;
    st = jx_f64(s, obj, params[i].name, false, params[i].min, params[i].max, &x, &found);
    if (!st && found) *calib_param_ref(c, &params[i], chip) = x;
  }
  return st;
}

/* One entry of "chips" (or, in format /1, of "devices": a device type, kept under its chip). */
static ap_status read_chip(ap_ctx *ctx, const char *file, const char *section, const char *name, json_t *obj,
                           bool by_device, cost_calib *out) {
  char where[128];
  snprintf(where, sizeof where, "%s.%s", section, name);
  jx_src ds = {ctx, file, where};
  if (!json_is_object(obj)) return jx_fail(&ds, "", "expected an object of constants");
  /* A longer name would be cut to fit calib_chip.name, and could then match no chip or collide with another
   * entry. */
  if (strlen(name) >= HW_NAME_MAX) return jx_fail(&ds, "", "expected a name of at most %d bytes", HW_NAME_MAX - 1);
  char chip[HW_NAME_MAX];
  snprintf(chip, sizeof chip, "%s", name);
  if (by_device) {
    ap_ctx scratch;
    memset(&scratch, 0, sizeof scratch);
    hw_device d;
    if (hw_device_find(&scratch, name, &d) == AP_OK) calib_chip_of(&d, chip, sizeof chip);
  }
  if (calib_chip_index(out, chip) >= 0)
    return jx_fail(&ds, "", "a second entry for chip %s (devices of one chip share their constants: list the chip "
                            "once, under \"chips\")", chip);
  calib_chip *e = calib_chip_entry(out, chip);
  if (!e) return jx_fail(&ds, "", "more than %d chips", CALIB_MAX_CHIPS);
  return read_scope(&ds, obj, COST_SCOPE_DEVICE, out, (int)(e - out->chips));
}

static ap_status read_bands(ap_ctx *ctx, const char *file, json_t *arr, cost_calib *out) {
  jx_src src = {ctx, file, ""};
  if (!json_is_array(arr)) return jx_fail(&src, "bands", "expected an array of error bands");
  if (json_array_size(arr) > CALIB_MAX_BANDS) return jx_fail(&src, "bands", "expected at most %d bands", CALIB_MAX_BANDS);
  static const char *const keys[] = {"family", "stack", "rows", "error_low", "error_high", "mape"};
  size_t i;
  json_t *b;
  json_array_foreach(arr, i, b) {
    char where[32];
    snprintf(where, sizeof where, "bands[%zu]", i);
    jx_src bs = {ctx, file, where};
    if (!json_is_object(b)) return jx_fail(&bs, "", "expected an error band object");
    calib_band *o = &out->bands[out->n_bands];
    memset(o, 0, sizeof *o);
    const char *fam = NULL, *stk = NULL;
    int64_t rows = 0;
    ap_status st = jx_check_keys(&bs, b, keys, AP_COUNT(keys), 0);
    if (!st) st = jx_str(&bs, b, "family", true, &fam, NULL);
    if (!st) st = jx_str(&bs, b, "stack", true, &stk, NULL);
    if (!st && (strlen(fam) >= sizeof o->family || strlen(stk) >= sizeof o->stack))
      st = jx_fail(&bs, "", "expected family and stack names of at most %d bytes", HW_NAME_MAX - 1);
    if (!st) st = jx_i64(&bs, b, "rows", true, 1, 1000000000, &rows, NULL);
    if (!st) st = jx_f64(&bs, b, "error_low", true, -1.0, 100.0, &o->error_low, NULL);
    if (!st) st = jx_f64(&bs, b, "error_high", true, o->error_low, 100.0, &o->error_high, NULL);
    if (!st) st = jx_f64(&bs, b, "mape", true, 0.0, 100.0, &o->mape, NULL);
    if (st) return st;
    snprintf(o->family, sizeof o->family, "%s", fam);
    snprintf(o->stack, sizeof o->stack, "%s", stk);
    o->rows = (int)rows;
    out->n_bands++;
  }
  return AP_OK;
}

/* "residuals": [[family, stack, moe, offload, chip_unseen, num_gpus, err, mem_err], ...], err and mem_err null
 * when not measured. */
static ap_status read_points(ap_ctx *ctx, const char *file, json_t *arr, cost_calib *out) {
  jx_src src = {ctx, file, ""};
  if (!json_is_array(arr)) return jx_fail(&src, "residuals", "expected an array of residuals");
  if (json_array_size(arr) > CALIB_MAX_POINTS) return jx_fail(&src, "residuals", "expected at most %d residuals", CALIB_MAX_POINTS);
  size_t i;
  json_t *p;
  json_array_foreach(arr, i, p) {
    char where[40];
    snprintf(where, sizeof where, "residuals[%zu]", i);
    jx_src ps = {ctx, file, where};
    calib_point *o = &out->points[out->n_points];
    memset(o, 0, sizeof *o);
    const json_t *fam = json_array_get(p, 0), *stk = json_array_get(p, 1), *gp = json_array_get(p, 5),
                 *e = json_array_get(p, 6), *me = json_array_get(p, 7);
    if (!json_is_array(p) || json_array_size(p) != 8 || !json_is_string(fam) || !json_is_string(stk) ||
        !json_is_boolean(json_array_get(p, 2)) || !json_is_boolean(json_array_get(p, 3)) ||
        !json_is_boolean(json_array_get(p, 4)) || !json_is_number(gp) || !(json_is_number(e) || json_is_null(e)) ||
        !(json_is_number(me) || json_is_null(me)))
      return jx_fail(&ps, "", "expected [family, stack, moe, offload, chip_unseen, num_gpus, error, memory error]");
    if (strlen(json_string_value(fam)) >= sizeof o->family || strlen(json_string_value(stk)) >= sizeof o->stack)
      return jx_fail(&ps, "", "expected family and stack names of at most %d and %d bytes", HW_NAME_MAX - 1,
                     (int)sizeof o->stack - 1);
    snprintf(o->family, sizeof o->family, "%s", json_string_value(fam));
    snprintf(o->stack, sizeof o->stack, "%s", json_string_value(stk));
    o->moe = json_is_true(json_array_get(p, 2));
    o->offload = json_is_true(json_array_get(p, 3));
    o->chip_unseen = json_is_true(json_array_get(p, 4));
    o->num_gpus = json_number_value(gp);
    o->err = json_is_null(e) ? NAN : json_number_value(e);
    o->mem_err = json_is_null(me) ? NAN : json_number_value(me);
    if (!(o->num_gpus >= 1 && o->num_gpus <= 1e9) || (isfinite(o->err) && fabs(o->err) > 10) ||
        (isfinite(o->mem_err) && fabs(o->mem_err) > 10))
      return jx_fail(&ps, "", "expected num_gpus in [1, 1e9] and errors (log ratios) within [-10, 10]");
    out->n_points++;
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
  static const char *const keys[] = {"format", "source", "chips", "devices", "global", "bands", "residuals", "fit"};
  if (!json_is_object(root)) st = ctx_fail(ctx, AP_INVALID, "%s: expected a JSON object", file);
  if (!st) st = jx_check_keys(&src, root, keys, AP_COUNT(keys), 0);
  if (!st) st = jx_str(&src, root, "format", true, &fmt, NULL);
  bool v1 = !st && strcmp(fmt, "autopar-calibration/1") == 0;
  if (!st && !v1 && strcmp(fmt, "autopar-calibration/2") != 0)
    st = jx_fail(&src, "format", "expected \"autopar-calibration/2\" (or /1), got \"%s\"", fmt);
  const char *section = v1 ? "devices" : "chips", *other = v1 ? "chips" : "devices";
  if (!st && json_object_get(root, other))
    st = jx_fail(&src, other, "not in format %s (which lists \"%s\")", fmt, section);
  if (!st) st = jx_str(&src, root, "source", false, &source, NULL);
  if (!st && source) snprintf(out->source, sizeof out->source, "%s", source);
  json_t *chips = st ? NULL : json_object_get(root, section);
  if (chips && !json_is_object(chips)) st = jx_fail(&src, section, "expected an object of %s", v1 ? "device types" : "chips");
  const char *name;
  json_t *obj;
  if (!st && chips) json_object_foreach(chips, name, obj) {
      if ((st = read_chip(ctx, file, section, name, obj, v1, out))) break;
    }
  json_t *glob = st ? NULL : json_object_get(root, "global");
  if (glob) {
    jx_src gs = {ctx, file, "global"};
    st = json_is_object(glob) ? read_scope(&gs, glob, COST_SCOPE_GLOBAL, out, 0)
                              : jx_fail(&src, "global", "expected an object of constants");
  }
  json_t *bands = st ? NULL : json_object_get(root, "bands");
  if (bands) st = read_bands(ctx, file, bands, out);
  json_t *points = st ? NULL : json_object_get(root, "residuals");
  if (points) st = read_points(ctx, file, points, out);
  json_decref(root);
  return st;
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
  sb_puts(sb, "{\n  \"format\": \"autopar-calibration/2\",\n  \"source\": ");
  char source[sizeof c->source];
  size_t len = utf8_whole_len(c->source);
  memcpy(source, c->source, len);
  source[len] = '\0';
  jx_sb_str(sb, source);
  sb_puts(sb, ",\n  \"chips\": {");
  for (int i = 0; i < c->n_chips; i++) {
    sb_printf(sb, "%s\n    ", i ? "," : "");
    jx_sb_str(sb, c->chips[i].name);
    sb_puts(sb, ": {");
    int n = 0;
    for (size_t k = 0; k < n_params; k++) {
      if (params[k].scope != COST_SCOPE_DEVICE) continue;
      sb_printf(sb, "%s\"%s\": ", n++ ? ", " : "", params[k].name);
      put_const(sb, &params[k], *calib_param_ref((cost_calib *)c, &params[k], i));
    }
    sb_puts(sb, "}");
  }
  sb_puts(sb, "\n  },\n  \"global\": {");
  int n = 0;
  for (size_t k = 0; k < n_params; k++) {
    if (params[k].scope != COST_SCOPE_GLOBAL) continue;
    sb_printf(sb, "%s\n    \"%s\": ", n++ ? "," : "", params[k].name);
    put_const(sb, &params[k], *calib_param_ref((cost_calib *)c, &params[k], 0));
  }
  sb_puts(sb, "\n  },\n  \"bands\": [");
  for (int i = 0; i < c->n_bands; i++) {
    const calib_band *b = &c->bands[i];
    sb_printf(sb, "%s\n    {\"family\": ", i ? "," : "");
    jx_sb_str(sb, b->family);
    sb_puts(sb, ", \"stack\": ");
    jx_sb_str(sb, b->stack);
    sb_printf(sb, ", \"rows\": %d, \"error_low\": ", b->rows);
    jx_sb_num(sb, b->error_low);
    sb_puts(sb, ", \"error_high\": ");
    jx_sb_num(sb, b->error_high);
    sb_puts(sb, ", \"mape\": ");
    jx_sb_num(sb, b->mape);
    sb_puts(sb, "}");
  }
  sb_puts(sb, c->n_bands ? "\n  ]" : "]");
  if (c->n_points) sb_puts(sb, ",\n  \"residuals\": [");
  for (int i = 0; i < c->n_points; i++) {
    const calib_point *p = &c->points[i];
    sb_printf(sb, "%s\n    [", i ? "," : "");
    jx_sb_str(sb, p->family);
    sb_puts(sb, ", ");
    jx_sb_str(sb, p->stack);
    sb_printf(sb, ", %s, %s, %s, %.0f, ", p->moe ? "true" : "false", p->offload ? "true" : "false",
              p->chip_unseen ? "true" : "false", p->num_gpus);
    if (isfinite(p->err)) sb_printf(sb, "%.6g, ", p->err);
    else sb_puts(sb, "null, ");
    if (isfinite(p->mem_err)) sb_printf(sb, "%.6g]", p->mem_err);
    else sb_puts(sb, "null]");
  }
  if (c->n_points) sb_puts(sb, "\n  ]");
  if (fit_summary) sb_printf(sb, ",\n  \"fit\": %s", fit_summary);
  sb_puts(sb, "\n}\n");
}

ap_status calib_builtin(ap_ctx *ctx, cost_calib *out) {
  const embedded_file *f = embedded_find("data/calibration/default.json");
  if (!f) {
    calib_defaults(out);
    return AP_OK;
  }
  return calib_parse(ctx, f->path, f->text, f->n_bytes, out);
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
