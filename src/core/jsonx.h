/* JSON reading helpers over jansson (core layer). Every getter names the file and the field in its error,
 * and parse errors carry jansson's line and column, so that bad input always yields a one-line message
 * like "cluster.json: links[1].bw_GBps: expected a number > 0, got -5". */
#ifndef AP_JSONX_H
#define AP_JSONX_H

#include <jansson.h>

#include "core/core.h"

/* Where a value lives, for error messages: the file and the dotted path of the enclosing object. */
typedef struct {
  ap_ctx *ctx;
  const char *file;
  const char *where; /* "" at the top level, else e.g. "links[1]" */
} jx_src;

/* Parses text; on failure records "file:line:col: message". The caller frees *out with json_decref. */
AP_HIDDEN ap_status jx_parse(ap_ctx *ctx, const char *file, const char *text, size_t n, json_t **out);
/* Reads and parses a file. */
AP_HIDDEN ap_status jx_load_file(ap_ctx *ctx, const char *path, json_t **out);

/* Keys may list aliases separated by '|' ("hidden_size|n_embd"); the first one present (and not null)
 * wins. *found (may be NULL) says whether any was present. Absent optional keys leave *out untouched. */
AP_HIDDEN json_t *jx_lookup(json_t *obj, const char *keys, const char **key_used);
/* How a JSON value reads as an integer, the one rule of every reader: JX_INT an integer, or a real without a
 * fraction below 2^53 in magnitude (so exactly an integer), in *out; JX_INT_HUGE a real without a fraction
 * beyond that (1e308: out of range for any integer field, never "a fraction"), in *real; JX_INT_FRACTION a
 * real with a fraction (2.5), in *real; JX_INT_NOT_NUMBER anything else. */
typedef enum { JX_INT, JX_INT_HUGE, JX_INT_FRACTION, JX_INT_NOT_NUMBER } jx_int_kind;
AP_HIDDEN jx_int_kind jx_int_of(json_t *v, int64_t *out, double *real);
AP_HIDDEN ap_status jx_i64(const jx_src *s, json_t *obj, const char *keys, bool required, int64_t min,
                           int64_t max, int64_t *out, bool *found);
AP_HIDDEN ap_status jx_f64(const jx_src *s, json_t *obj, const char *keys, bool required, double min,
                           double max, double *out, bool *found);
AP_HIDDEN ap_status jx_str(const jx_src *s, json_t *obj, const char *keys, bool required, const char **out,
                           bool *found);
AP_HIDDEN ap_status jx_bool(const jx_src *s, json_t *obj, const char *keys, bool required, bool *out,
                            bool *found);
/* Records "file: where.key: expected WHAT" and returns AP_INVALID. */
AP_HIDDEN ap_status jx_fail(const jx_src *s, const char *key, const char *fmt, ...) AP_PRINTF(3, 4);

/* ---- The strict-key check of every JSON reader (plans, devices, clusters, op graphs, calibrations) ---- */
enum { JX_KEYS_COMMENTS = 1u }; /* keys that start with '_' are comments and are skipped */
/* Finds the first key of obj that is not in allowed[0..n-1]. Returns false when there is none (or obj is not
 * an object). Otherwise returns true with the key in shown (truncated to shown_n, any '|' shown as '?' so that
 * it cannot read as an alias list) and in msg the one wording every reader uses:
 *   unknown field (did you mean hidden_size?); fields here: a, b, c
 * where the suggestion (a key equal but for case, else the closest by edit distance) is left out when none is
 * close. With JX_KEYS_COMMENTS the message ends "; keys starting with '_' are comments". */
AP_HIDDEN bool jx_unknown_key(json_t *obj, const char *const *allowed, size_t n, unsigned flags, char *shown,
                              size_t shown_n, char *msg, size_t msg_n);
/* jx_unknown_key reported through jx_fail ("file: where.key: unknown field …"): AP_INVALID, or AP_OK. */
AP_HIDDEN ap_status jx_check_keys(const jx_src *s, json_t *obj, const char *const *allowed, size_t n,
                                  unsigned flags);

/* Appends a number to sb at full precision (the shortest decimal text that reads back to the same double), or
 * null when it is not finite (JSON has no NaN). The one JSON number writer: every document goes through it. */
AP_HIDDEN void jx_sb_num(strbuf *sb, double x);
/* The text jx_sb_num writes for a finite x (jnum.c): printf's %g layout with 15 to 17 significant digits. */
AP_HIDDEN void jx_format_double(double x, char out[32]);
/* Appends a JSON-escaped string literal (with quotes) to sb. */
AP_HIDDEN void jx_sb_str(strbuf *sb, const char *s);

#endif
