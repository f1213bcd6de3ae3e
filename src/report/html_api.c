/* ap_report_html (report layer): parses the documents a host hands over and writes the page of html.c. */
#include <stdlib.h>
#include <string.h>

#include "core/jsonx.h"
#include "report/html.h"

/* Parses one input and checks it is the document it should be: its "format" tag starts with want (e.g.
 * "autopar-search/") or alt (NULL: none), or, for the trace (want NULL), it has a traceEvents array. */
static ap_status parse_doc(ap_ctx *ctx, const char *what, const char *want, const char *alt, const char *text,
                           json_t **out) {
  *out = NULL;
  if (!text) return AP_OK;
  json_error_t err;
  *out = json_loads(text, 0, &err);
  if (!*out) return ctx_fail(ctx, AP_PARSE, "report: %s is not JSON: %d:%d: %s", what, err.line, err.column, err.text);
  const char *fmt = json_string_value(json_object_get(*out, "format"));
  bool ok = want ? fmt && (strncmp(fmt, want, strlen(want)) == 0 || (alt && strncmp(fmt, alt, strlen(alt)) == 0))
                 : json_is_array(json_object_get(*out, "traceEvents"));
  if (!ok)
    return ctx_fail(ctx, AP_INVALID, "report: %s: expected %s%s%s, got %s%s%s", what, want ? "a document of format " : "",
                    want ? want : "a Chrome trace with traceEvents", want ? "N" : "", fmt ? "format \"" : "",
                    fmt ? fmt : "no format tag", fmt ? "\"" : "");
  return AP_OK;
}

ap_status ap_report_html(ap_ctx *ctx, const ap_report_inputs *in, const char *out_path) {
  API_ENTER(ctx);
  if (!ctx) return AP_INVALID;
  if (!in || !out_path || !*out_path)
    return ctx_fail(ctx, AP_INVALID, "ap_report_html: %s must not be NULL or empty", in ? "out_path" : "in");
  json_t *est = NULL, *search = NULL, *trace = NULL, *val = NULL, *cmp = NULL;
  ap_status st = parse_doc(ctx, "the estimate document", "autopar-estimate/", NULL, in->estimate_json, &est);
  /* search_json also takes a general graph's plan (autopar-plan/2, what `plan --json` prints for an ONNX
   * model); its format tag says which it is. */
  json_t *gp = NULL;
  if (!st) st = parse_doc(ctx, "the search document", "autopar-search/", "autopar-plan/", in->search_json, &search);
  const char *sfmt = search ? json_string_value(json_object_get(search, "format")) : NULL;
  if (sfmt && strncmp(sfmt, "autopar-plan/", 13) == 0) {
    gp = search;
    search = NULL;
  }
  if (!st) st = parse_doc(ctx, "the trace", NULL, NULL, in->trace_json, &trace);
  if (!st) st = parse_doc(ctx, "the validate document", "autopar-validate/", NULL, in->validate_json, &val);
  if (!st)
    st = parse_doc(ctx, "the compare-search document", "autopar-compare-search/", NULL, in->compare_search_json, &cmp);
  char *html = NULL;
  if (!st) {
    html_inputs hi = {in->title, in->command, est, search, trace, val, cmp, gp};
    st = html_report(ctx, &hi, &html);
  }
  if (!st) st = ap_write_file(ctx, out_path, html);
  free(html);
  json_decref(est);
  json_decref(search);
  json_decref(trace);
  json_decref(val);
  json_decref(cmp);
  json_decref(gp);
  return st;
}
