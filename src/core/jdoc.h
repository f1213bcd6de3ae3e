/* Result documents (core layer): every answer autopar gives (an estimate, a search, a validation, …) is built
 * once as a jansson tree, then written as JSON (jd_dump) or rendered as text from the same tree, so that the
 * two can never disagree (docs/json.md lists every document's keys). Builders never check for out of memory
 * one by one: a jd carries a sticky flag, set by the first allocation that fails, and every later call on it
 * does nothing; jd_finish reports it once.
 *
 * Numbers are written at full precision (the shortest text that reads back to the same double, jx_sb_num);
 * a number that is not finite is written as null, since JSON has no NaN. Object keys keep their insertion
 * order. Strings are stored unchecked and escaped on output, so a file name that is not UTF-8 still writes. */
#ifndef AP_JDOC_H
#define AP_JDOC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"

typedef struct {
  json_t *root; /* the document, an object; owned by the jd until jd_finish or jd_free */
  bool failed;  /* an allocation failed: the tree is incomplete */
} jd;

/* Starts a document {"format": format} (format such as "autopar-estimate/1"). */
AP_HIDDEN void jd_init(jd *d, const char *format);
/* Releases the tree. */
AP_HIDDEN void jd_free(jd *d);

/* Each setter adds a value under parent: as key `key` when parent is an object, appended (key ignored, may
 * be NULL) when it is an array. A NULL parent (an earlier failure) marks the document failed. */
AP_HIDDEN json_t *jd_obj(jd *d, json_t *parent, const char *key);
AP_HIDDEN json_t *jd_arr(jd *d, json_t *parent, const char *key);
AP_HIDDEN void jd_num(jd *d, json_t *parent, const char *key, double x); /* null when not finite */
AP_HIDDEN void jd_int(jd *d, json_t *parent, const char *key, int64_t x);
AP_HIDDEN void jd_str(jd *d, json_t *parent, const char *key, const char *s); /* null when s is NULL */
AP_HIDDEN void jd_bool(jd *d, json_t *parent, const char *key, bool b);
AP_HIDDEN void jd_null(jd *d, json_t *parent, const char *key);
/* Adds v (a new reference, which this call takes; NULL marks the document failed). */
AP_HIDDEN void jd_put(jd *d, json_t *parent, const char *key, json_t *v);

/* Adds a subtree given as JSON text (which must be one valid JSON value), written verbatim by jd_write: for
 * objects that their own module writes as text (the plan, plan_to_json), so that a document does not pay for
 * parsing them back (a plan's parse cost more than the rest of an estimate's document). In-process readers see
 * it as an opaque object, {JD_RAW_KEY: text}; the written document holds the value itself. */
#define JD_RAW_KEY "\001raw"
AP_HIDDEN void jd_raw(jd *d, json_t *parent, const char *key, const char *json_text);

/* Appends v as compact JSON (no spaces, keys in insertion order, full-precision numbers). */
AP_HIDDEN void jd_write(strbuf *sb, const json_t *v);
/* The whole document as JSON with a closing newline; NULL when the document failed or out of memory. The
 * caller frees the string with free(). The document stays the caller's. */
AP_HIDDEN char *jd_dump(const jd *d);

/* Readers for renderers. A dotted path ("memory.peak_bytes") walks nested objects; a missing key or a null
 * reads as NAN, 0, "" or false; jd_geti truncates a real towards zero and reads one outside int64's range (or
 * NaN) as 0. */
AP_HIDDEN json_t *jd_at(const json_t *v, const char *path);
AP_HIDDEN double jd_getn(const json_t *v, const char *path);
AP_HIDDEN int64_t jd_geti(const json_t *v, const char *path);
AP_HIDDEN const char *jd_gets(const json_t *v, const char *path);
AP_HIDDEN bool jd_getb(const json_t *v, const char *path);

#endif
