/* JSON reading helpers for the hw module. The device and cluster readers are strict: an unknown field is an
 * error with a suggestion (a typo such as "mem_bw_bps" would otherwise be silently ignored and the default
 * used), sizes and bandwidths must be > 0, and names fit the fixed buffers of hw.h. Every failure names the
 * file, the dotted field path and what was expected, through jx_fail. */
#include <float.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "hw/hw_json.h"

ap_status hwj_check_keys(const jx_src *s, json_t *obj, const char *const *allowed, size_t n_allowed) {
  return jx_check_keys(s, obj, allowed, n_allowed, 0);
}

static ap_status number_at_least(const jx_src *s, json_t *obj, const char *key, bool required, bool strict,
                                 double *out, bool *found) {
  double x = 0;
  bool here = false;
  ap_status st = jx_f64(s, obj, key, required, -DBL_MAX, DBL_MAX, &x, &here);
  if (found) *found = here;
  if (st || !here) return st;
  if (strict ? !(x > 0) : !(x >= 0))
    return jx_fail(s, key, "expected a number %s 0, got %g", strict ? ">" : ">=", x);
  *out = x;
  return AP_OK;
}

ap_status hwj_positive(const jx_src *s, json_t *obj, const char *key, bool required, double *out, bool *found) {
  return number_at_least(s, obj, key, required, true, out, found);
}

ap_status hwj_nonnegative(const jx_src *s, json_t *obj, const char *key, bool required, double *out,
                          bool *found) {
  return number_at_least(s, obj, key, required, false, out, found);
}

ap_status hwj_text(const jx_src *s, json_t *obj, const char *key, bool required, char *out, size_t cap) {
  const char *v = NULL;
  bool found = false;
  ap_status st = jx_str(s, obj, key, required, &v, &found);
  if (st || !found) return st;
  size_t n = strlen(v);
  if (n == 0) return jx_fail(s, key, "expected a non-empty string");
  if (n >= cap) return jx_fail(s, key, "expected at most %zu characters, got %zu", cap - 1, n);
  memcpy(out, v, n + 1);
  return AP_OK;
}

ap_status hwj_check_meta(const jx_src *s, json_t *obj) {
  json_t *aliases = json_object_get(obj, "aliases");
  if (aliases && !json_is_null(aliases)) {
    if (!json_is_array(aliases)) return jx_fail(s, "aliases", "expected an array of names");
    size_t i;
    json_t *a;
    json_array_foreach(aliases, i, a) {
      if (!json_is_string(a) || json_string_length(a) == 0 || json_string_length(a) >= HW_NAME_MAX)
        return jx_fail(s, "aliases", "expected names of 1 to %d characters (element %zu)", HW_NAME_MAX - 1, i);
    }
  }
  json_t *sources = json_object_get(obj, "sources");
  if (sources && !json_is_null(sources)) {
    if (!json_is_object(sources)) return jx_fail(s, "sources", "expected an object of strings");
    const char *key;
    json_t *v;
    json_object_foreach(sources, key, v) {
      if (!json_is_string(v)) return jx_fail(s, "sources", "expected a string for \"%.60s\"", key);
    }
  }
  return AP_OK;
}

void hwj_child(const jx_src *parent, const char *key, long index, char *buf, size_t cap, jx_src *child) {
  const char *w = parent->where ? parent->where : "";
  if (index >= 0)
    snprintf(buf, cap, "%s%s%s[%ld]", w, *w ? "." : "", key, index);
  else
    snprintf(buf, cap, "%s%s%s", w, *w ? "." : "", key);
  child->ctx = parent->ctx;
  child->file = parent->file;
  child->where = buf;
}
