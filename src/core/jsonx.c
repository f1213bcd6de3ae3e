/* JSON reading helpers (core layer); see jsonx.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/jsonx.h"

ap_status jx_parse(ap_ctx *ctx, const char *file, const char *text, size_t n, json_t **out) {
  json_error_t err;
  *out = mem_json_loadb(text, n, JSON_REJECT_DUPLICATES, &err); /* json_loadb (core/alloc.h) */
  /* jansson 2.14's lexer drops a character when its buffer cannot grow (lex_save ignores the failure), so a
   * parse during which an allocation failed is not trusted (core/alloc.h). */
  if (*out && mem_failed()) {
    json_decref(*out);
    *out = NULL;
    return ctx_fail(ctx, AP_NOMEM, "%s: out of memory parsing JSON", file);
  }
  if (!*out) return ctx_fail(ctx, AP_PARSE, "%s:%d:%d: invalid JSON: %s", file, err.line, err.column, err.text);
  return AP_OK;
}

ap_status jx_load_file(ap_ctx *ctx, const char *path, json_t **out) {
  char *text = NULL;
  size_t n = 0;
  *out = NULL;
  ap_status st = util_read_file(ctx, path, &text, &n);
  if (st) return st;
  st = jx_parse(ctx, path, text, n, out);
  free(text);
  return st;
}

json_t *jx_lookup(json_t *obj, const char *keys, const char **key_used) {
  if (!json_is_object(obj)) return NULL;
  char name[128];
  for (const char *p = keys; *p;) {
    const char *bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (len >= sizeof name) len = sizeof name - 1;
    memcpy(name, p, len);
    name[len] = '\0';
    json_t *v = json_object_get(obj, name);
    if (v && !json_is_null(v)) {
      if (key_used) *key_used = json_object_iter_key(json_object_iter_at(obj, name));
      return v;
    }
    p += len + (bar ? 1 : 0);
    if (!bar) break;
  }
  return NULL;
}

/* The display name of a key list: the first alias. */
static void first_alias(const char *keys, char *out, size_t n) {
  size_t len = strcspn(keys, "|");
  if (len >= n) len = n - 1;
  memcpy(out, keys, len);
  out[len] = '\0';
}

ap_status jx_fail(const jx_src *s, const char *key, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  char k[128];
  first_alias(key, k, sizeof k);
  return ctx_fail(s->ctx, AP_INVALID, "%s: %s%s%s: %s", s->file, s->where ? s->where : "",
                  (s->where && *s->where && *k) ? "." : "", k, msg);
}

static ap_status missing(const jx_src *s, const char *keys) {
  if (strchr(keys, '|')) {
    char list[256];
    snprintf(list, sizeof list, "%s", keys);
    for (char *p = list; *p; p++)
      if (*p == '|') *p = '/';
    return jx_fail(s, keys, "required field missing (accepted names: %s)", list);
  }
  return jx_fail(s, keys, "required field missing");
}

jx_int_kind jx_int_of(json_t *v, int64_t *out, double *real) {
  if (json_is_integer(v)) {
    *out = (int64_t)json_integer_value(v);
    return JX_INT;
  }
  if (!json_is_real(v)) return JX_INT_NOT_NUMBER;
  double x = json_real_value(v); /* finite: jansson reads no NaN or infinity */
  *real = x;
  if (x != floor(x)) return JX_INT_FRACTION;
  if (fabs(x) >= 9007199254740992.0) return JX_INT_HUGE; /* 2^53: beyond it a real is no exact integer */
  *out = (int64_t)x;
  return JX_INT;
}

ap_status jx_i64(const jx_src *s, json_t *obj, const char *keys, bool required, int64_t min, int64_t max,
                 int64_t *out, bool *found) {
  const char *used = NULL;
  json_t *v = jx_lookup(obj, keys, &used);
  if (found) *found = v != NULL;
  if (!v) return required ? missing(s, keys) : AP_OK;
  int64_t x = 0;
  double real = 0;
  switch (jx_int_of(v, &x, &real)) {
  case JX_INT:
    break;
  case JX_INT_HUGE:
    return jx_fail(s, keys, "out of range: expected an integer in [%lld, %lld], got %g", (long long)min,
                   (long long)max, real);
  case JX_INT_FRACTION:
    return jx_fail(s, keys, "expected an integer, got a fraction (%g)", real);
  default:
    return jx_fail(s, keys, "expected an integer, got %s",
                   json_is_string(v) ? "a string" : json_is_boolean(v) ? "a boolean" : "another type");
  }
  if (x < min || x > max) {
    if (max == INT64_MAX)
      return jx_fail(s, keys, "expected an integer >= %lld, got %lld", (long long)min, (long long)x);
    return jx_fail(s, keys, "expected an integer in [%lld, %lld], got %lld", (long long)min, (long long)max,
                   (long long)x);
  }
  *out = x;
  return AP_OK;
}

ap_status jx_f64(const jx_src *s, json_t *obj, const char *keys, bool required, double min, double max,
                 double *out, bool *found) {
  json_t *v = jx_lookup(obj, keys, NULL);
  if (found) *found = v != NULL;
  if (!v) return required ? missing(s, keys) : AP_OK;
  if (!json_is_number(v)) return jx_fail(s, keys, "expected a number");
  double x = json_number_value(v);
  if (!isfinite(x) || x < min || x > max) return jx_fail(s, keys, "expected a number in [%g, %g], got %g", min, max, x);
  *out = x;
  return AP_OK;
}

ap_status jx_str(const jx_src *s, json_t *obj, const char *keys, bool required, const char **out, bool *found) {
  json_t *v = jx_lookup(obj, keys, NULL);
  if (found) *found = v != NULL;
  if (!v) return required ? missing(s, keys) : AP_OK;
  if (!json_is_string(v)) return jx_fail(s, keys, "expected a string");
  *out = json_string_value(v);
  return AP_OK;
}

ap_status jx_bool(const jx_src *s, json_t *obj, const char *keys, bool required, bool *out, bool *found) {
  json_t *v = jx_lookup(obj, keys, NULL);
  if (found) *found = v != NULL;
  if (!v) return required ? missing(s, keys) : AP_OK;
  if (!json_is_boolean(v)) return jx_fail(s, keys, "expected true or false");
  *out = json_is_true(v);
  return AP_OK;
}

void jx_sb_num(strbuf *sb, double x) {
  if (!isfinite(x)) {
    sb_puts(sb, "null");
    return;
  }
  char buf[32];
  jx_format_double(x, buf);
  sb_puts(sb, buf);
}

void jx_sb_str(strbuf *sb, const char *str) {
  sb_putn(sb, "\"", 1);
  const unsigned char *p = (const unsigned char *)str;
  for (;;) {
    /* A run of characters that need no escape goes in one append. */
    const unsigned char *run = p;
    while (*p && *p != '"' && *p != '\\' && *p >= 0x20) p++;
    if (p > run) sb_putn(sb, (const char *)run, (size_t)(p - run));
    if (!*p) break;
    if (*p == '"' || *p == '\\') sb_printf(sb, "\\%c", *p);
    else sb_printf(sb, "\\u%04x", *p);
    p++;
  }
  sb_putn(sb, "\"", 1);
}

/* ---- Strict keys ---- */

bool jx_unknown_key(json_t *obj, const char *const *allowed, size_t n, unsigned flags, char *shown, size_t shown_n,
                    char *msg, size_t msg_n) {
  if (!json_is_object(obj)) return false;
  const char *key;
  json_t *v;
  json_object_foreach(obj, key, v) {
    (void)v;
    if ((flags & JX_KEYS_COMMENTS) && key[0] == '_') continue;
    if (names_find(allowed, n, key) >= 0) continue;
    /* A key that differs only in case ("mem_bw_bps") has one obvious fix; otherwise the closest names. */
    char hint[256] = "";
    for (size_t i = 0; i < n && !*hint; i++)
      if (strcasecmp(key, allowed[i]) == 0) snprintf(hint, sizeof hint, "%s", allowed[i]);
    if (!*hint) util_suggest(key, allowed, n, hint, sizeof hint);
    char list[384] = "";
    for (size_t i = 0; i < n; i++) {
      size_t len = strlen(list);
      snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", allowed[i]);
    }
    snprintf(shown, shown_n, "%s", key); /* a long junk key must not crowd out the message */
    for (char *p = shown; *p; p++)
      if (*p == '|') *p = '?';
    snprintf(msg, msg_n, "unknown field%s%s%s; fields here: %s%s", *hint ? " (did you mean " : "", hint,
             *hint ? "?)" : "", list, (flags & JX_KEYS_COMMENTS) ? "; keys starting with '_' are comments" : "");
    return true;
  }
  return false;
}

ap_status jx_check_keys(const jx_src *s, json_t *obj, const char *const *allowed, size_t n, unsigned flags) {
  char shown[64], msg[480];
  if (!jx_unknown_key(obj, allowed, n, flags, shown, sizeof shown, msg, sizeof msg)) return AP_OK;
  return jx_fail(s, shown, "%s", msg);
}
