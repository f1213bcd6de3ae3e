/* Device types: the dtype and topology name tables, the device file reader and lookup among the presets.
 * A device file (data/devices/NAME.json, format in docs/formats.md) states dense peak FLOP/s per dtype, memory
 * capacity and bandwidth, and optionally board power, with a "sources" entry next to each number. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hw/hw_json.h"

static const char *const dtype_names[] = {
    [HW_DTYPE_FP32] = "fp32", [HW_DTYPE_TF32] = "tf32", [HW_DTYPE_BF16] = "bf16",
    [HW_DTYPE_FP16] = "fp16", [HW_DTYPE_FP8] = "fp8",   [HW_DTYPE_FP4] = "fp4",
};
_Static_assert(AP_COUNT(dtype_names) == HW_DTYPE_COUNT, "dtype name table and enum disagree");

static const char *const topology_names[] = {
    [HW_TOPO_SWITCH] = "switch",
    [HW_TOPO_MESH] = "mesh",
};
_Static_assert(AP_COUNT(topology_names) == HW_TOPO_COUNT, "topology name table and enum disagree");

/* The fields a device object may hold. */
static const char *const device_keys[] = {
    "name", "aliases", "vendor", "description", "node", "chip", "family", "peak_flop_per_s", "mem_bytes", "mem_bw_Bps",
    "tdp_w", "host_link", "host_link_bw_Bps", "sources", "profile",
};

static void free_text(void *p) { free(p); }

/* Reads an inline "profile" (docs/profile-format.md): checks its format and GEMM table here, keeps its compact
 * JSON text in the context's memo under a key made of its FNV-1a hash, and names that key in the device, which
 * so stays a value type; the cost layer parses the text (cost/compute.c). */
static ap_status read_profile(const jx_src *s, json_t *obj, hw_device *out) {
  json_t *prof = json_object_get(obj, "profile");
  if (!prof || json_is_null(prof)) return AP_OK;
  if (!json_is_object(prof)) return jx_fail(s, "profile", "expected a profile object (autopar-profile/1)");
  json_t *fmt = json_object_get(prof, "format");
  if (!json_is_string(fmt) || strcmp(json_string_value(fmt), "autopar-profile/1") != 0)
    return jx_fail(s, "profile.format", "expected \"autopar-profile/1\"");
  if (!json_is_array(json_object_get(prof, "gemm"))) return jx_fail(s, "profile.gemm", "expected an array of measured GEMMs");
  char *text = json_dumps(prof, JSON_COMPACT | JSON_SORT_KEYS);
  if (!text) return ctx_fail(s->ctx, AP_NOMEM, "out of memory");
  uint64_t h = 1469598103934665603ull;
  for (const char *c = text; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211ull;
  snprintf(out->profile_key, sizeof out->profile_key, "inline-%016llx", (unsigned long long)h);
  char key[HW_NAME_MAX + 16];
  snprintf(key, sizeof key, "hw.profile:%s", out->profile_key);
  if (ctx_memo_get(s->ctx, key) || ctx_memo_put(s->ctx, key, text, free_text)) {
    if (ctx_memo_get(s->ctx, key) != text) free(text);
    return AP_OK;
  }
  free(text);
  return ctx_fail(s->ctx, AP_NOMEM, "out of memory");
}

const char *hw_dtype_name(hw_dtype dtype) {
  return (unsigned)dtype < HW_DTYPE_COUNT ? dtype_names[dtype] : "?";
}

bool hw_dtype_from_name(const char *name, hw_dtype *out) {
  for (size_t i = 0; i < AP_COUNT(dtype_names); i++) {
    if (strcasecmp(name, dtype_names[i]) == 0) {
      *out = (hw_dtype)i;
      return true;
    }
  }
  return false;
}

const char *hw_topology_name(hw_topology topology) {
  return (unsigned)topology < HW_TOPO_COUNT ? topology_names[topology] : "?";
}

bool hw_topology_from_name(const char *name, hw_topology *out) {
  for (size_t i = 0; i < AP_COUNT(topology_names); i++) {
    if (strcasecmp(name, topology_names[i]) == 0) {
      *out = (hw_topology)i;
      return true;
    }
  }
  return false;
}

/* Reads "peak_flop_per_s": {"bf16": 989.4e12, ...}; at least one dtype must be > 0. */
static ap_status read_peaks(const jx_src *s, json_t *obj, hw_device *out) {
  json_t *peaks = json_object_get(obj, "peak_flop_per_s");
  if (!peaks || json_is_null(peaks)) return jx_fail(s, "peak_flop_per_s", "required field missing");
  if (!json_is_object(peaks)) return jx_fail(s, "peak_flop_per_s", "expected an object of dtype: FLOP/s");
  char buf[160];
  jx_src sub;
  hwj_child(s, "peak_flop_per_s", -1, buf, sizeof buf, &sub);
  const char *key;
  json_t *v;
  bool any = false;
  json_object_foreach(peaks, key, v) {
    hw_dtype d;
    if (!hw_dtype_from_name(key, &d))
      return hwj_check_keys(&sub, peaks, dtype_names, AP_COUNT(dtype_names));
    ap_status st = hwj_nonnegative(&sub, peaks, dtype_names[d], true, &out->peak_flop_per_s[d], NULL);
    if (st) return st;
    any = any || out->peak_flop_per_s[d] > 0;
  }
  if (!any) return jx_fail(s, "peak_flop_per_s", "expected at least one dtype with a peak > 0");
  return AP_OK;
}

ap_status hw_device_from_json(const jx_src *s, json_t *obj, hw_device *out) {
  memset(out, 0, sizeof *out);
  if (!json_is_object(obj)) return jx_fail(s, "", "expected a device object");
  ap_status st = hwj_check_keys(s, obj, device_keys, AP_COUNT(device_keys));
  if (!st) st = hwj_check_meta(s, obj);
  if (!st) st = hwj_text(s, obj, "name", true, out->name, sizeof out->name);
  if (!st) st = hwj_text(s, obj, "vendor", false, out->vendor, sizeof out->vendor);
  if (!st) st = hwj_text(s, obj, "description", false, out->description, sizeof out->description);
  if (!st) st = hwj_text(s, obj, "node", false, out->default_node, sizeof out->default_node);
  if (!st) st = hwj_text(s, obj, "chip", false, out->chip, sizeof out->chip);
  if (!st) st = hwj_text(s, obj, "family", false, out->family, sizeof out->family);
  if (!st) st = read_peaks(s, obj, out);
  if (!st) st = jx_i64(s, obj, "mem_bytes", true, 1, INT64_MAX, &out->mem_bytes, NULL);
  if (!st) st = hwj_positive(s, obj, "mem_bw_Bps", true, &out->mem_bw_Bps, NULL);
  if (!st) st = hwj_positive(s, obj, "tdp_w", false, &out->tdp_w, NULL);
  if (!st) st = read_profile(s, obj, out);
  if (!st) st = hwj_text(s, obj, "host_link", false, out->host_link, sizeof out->host_link);
  if (!st && out->host_link[0] && strcmp(out->host_link, "pcie") != 0 && strcmp(out->host_link, "c2c") != 0)
    st = jx_fail(s, "host_link", "expected \"pcie\" or \"c2c\", got \"%s\"", out->host_link);
  if (!st) st = hwj_positive(s, obj, "host_link_bw_Bps", false, &out->host_link_bw_Bps, NULL);
  return st;
}

ap_status hw_device_parse(ap_ctx *ctx, const char *file, const char *text, size_t n_bytes, hw_device *out) {
  json_t *root = NULL;
  ap_status st = jx_parse(ctx, file, text, n_bytes, &root);
  if (st) return st;
  jx_src s = {ctx, file, ""};
  if (!json_is_object(root))
    st = ctx_fail(ctx, AP_INVALID, "%s: expected a JSON object at the top level", file);
  else
    st = hw_device_from_json(&s, root, out);
  json_decref(root);
  return st;
}

ap_status hw_device_find(ap_ctx *ctx, const char *name, hw_device *out) {
  const embedded_file *f = hw_preset_find(HW_PRESET_DEVICE, name);
  if (!f) {
    char hint[256];
    hw_preset_suggest(name, true, false, hint, sizeof hint);
    if (*hint) return ctx_fail(ctx, AP_NOTFOUND, "unknown device '%.80s' (did you mean %s?)", name, hint);
    return ctx_fail(ctx, AP_NOTFOUND, "unknown device '%.80s' (`autopar clusters` lists the devices)", name);
  }
  return hw_device_parse(ctx, f->path, f->text, f->n_bytes, out);
}
