/* Result documents (core layer); see jdoc.h. The writer is our own rather than json_dumps so that numbers go
 * through the one number writer (jx_sb_num, shortest round-trip text) and strings through the one escaper. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/jdoc.h"
#include "core/jsonx.h"

void jd_init(jd *d, const char *format) {
  d->root = json_object();
  d->failed = d->root == NULL;
  jd_str(d, d->root, "format", format);
}

void jd_free(jd *d) {
  json_decref(d->root);
  d->root = NULL;
}

void jd_put(jd *d, json_t *parent, const char *key, json_t *v) {
  int rc = -1;
  if (parent && v) {
    if (json_is_array(parent)) rc = json_array_append_new(parent, v);
    else if (json_is_object(parent) && key) rc = json_object_set_new_nocheck(parent, key, v);
    else json_decref(v);
  } else if (v) {
    json_decref(v);
  }
  if (rc != 0) d->failed = true;
}

/* On success the parent holds the one reference and the new container is returned borrowed; on failure
 * jd_put has released it and NULL is returned. */
json_t *jd_obj(jd *d, json_t *parent, const char *key) {
  json_t *o = json_object();
  jd_put(d, parent, key, o);
  return d->failed ? NULL : o;
}

json_t *jd_arr(jd *d, json_t *parent, const char *key) {
  json_t *a = json_array();
  jd_put(d, parent, key, a);
  return d->failed ? NULL : a;
}

void jd_num(jd *d, json_t *parent, const char *key, double x) {
  jd_put(d, parent, key, isfinite(x) ? json_real(x) : json_null());
}

void jd_int(jd *d, json_t *parent, const char *key, int64_t x) { jd_put(d, parent, key, json_integer((json_int_t)x)); }

void jd_str(jd *d, json_t *parent, const char *key, const char *s) {
  jd_put(d, parent, key, s ? json_string_nocheck(s) : json_null());
}

void jd_bool(jd *d, json_t *parent, const char *key, bool b) { jd_put(d, parent, key, json_boolean(b)); }

void jd_null(jd *d, json_t *parent, const char *key) { jd_put(d, parent, key, json_null()); }

void jd_raw(jd *d, json_t *parent, const char *key, const char *json_text) {
  json_t *o = jd_obj(d, parent, key);
  if (!json_text) d->failed = true;
  else jd_str(d, o, JD_RAW_KEY, json_text);
}

void jd_write(strbuf *sb, const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT: {
    json_t *raw = json_object_size(v) == 1 ? json_object_get(v, JD_RAW_KEY) : NULL;
    if (json_is_string(raw)) {
      sb_puts(sb, json_string_value(raw));
      break;
    }
    sb_puts(sb, "{");
    bool first = true;
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)v, k, x) {
      if (!first) sb_puts(sb, ",");
      first = false;
      jx_sb_str(sb, k);
      sb_puts(sb, ":");
      jd_write(sb, x);
    }
    sb_puts(sb, "}");
    break;
  }
  case JSON_ARRAY: {
    sb_puts(sb, "[");
    for (size_t i = 0; i < json_array_size(v); i++) {
      if (i) sb_puts(sb, ",");
      jd_write(sb, json_array_get(v, i));
    }
    sb_puts(sb, "]");
    break;
  }
  case JSON_STRING:
    jx_sb_str(sb, json_string_value(v));
    break;
  case JSON_INTEGER:
    sb_printf(sb, "%lld", (long long)json_integer_value(v));
    break;
  case JSON_REAL:
    jx_sb_num(sb, json_real_value(v));
    break;
  case JSON_TRUE:
    sb_puts(sb, "true");
    break;
  case JSON_FALSE:
    sb_puts(sb, "false");
    break;
  case JSON_NULL:
    sb_puts(sb, "null");
    break;
  }
}

char *jd_dump(const jd *d) {
  if (d->failed || !d->root) return NULL;
  strbuf sb = {0};
  jd_write(&sb, d->root);
  sb_puts(&sb, "\n");
  return sb_take(&sb);
}

json_t *jd_at(const json_t *v, const char *path) {
  char key[128];
  json_t *cur = (json_t *)v;
  for (const char *p = path; cur && *p;) {
    size_t len = strcspn(p, ".");
    if (len >= sizeof key) return NULL;
    memcpy(key, p, len);
    key[len] = '\0';
    cur = json_object_get(cur, key);
    p += len + (p[len] == '.');
  }
  return cur;
}

double jd_getn(const json_t *v, const char *path) {
  json_t *x = jd_at(v, path);
  return json_is_number(x) ? json_number_value(x) : NAN;
}

int64_t jd_geti(const json_t *v, const char *path) {
  json_t *x = jd_at(v, path);
  if (json_is_integer(x)) return (int64_t)json_integer_value(x);
  if (!json_is_real(x)) return 0;
  /* A real is converted only inside int64's range (2^63 is exactly representable; the cast of anything at or
   * beyond it, or of NaN, is undefined behaviour, C11 6.3.1.4): a document made elsewhere may hold 1e155. */
  double r = json_real_value(x);
  return r > -0x1p63 && r < 0x1p63 ? (int64_t)r : 0;
}

const char *jd_gets(const json_t *v, const char *path) {
  json_t *x = jd_at(v, path);
  return json_is_string(x) ? json_string_value(x) : "";
}

bool jd_getb(const json_t *v, const char *path) { return json_is_true(jd_at(v, path)); }
