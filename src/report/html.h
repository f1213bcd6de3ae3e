/* The HTML report (report layer): one self-contained file — inline SVG, CSS and a few lines of script, no
 * network and no external URL — rendered from the JSON documents that the commands build (docs/json.md), so
 * that the page shows exactly what `--json` says. docs/report.md lists its parts and their element ids.
 * Internal header: not installed, not part of the public API. */
#ifndef AP_REPORT_HTML_H
#define AP_REPORT_HTML_H

#include "core/jsonx.h"

/* What a report shows; every member may be NULL, and a part whose input is absent is left out. The documents
 * are borrowed. */
typedef struct {
  const char *title;    /* the page's heading, e.g. "autopar plan: llama-3-70b on dgx-h100:8x8" */
  const char *command;  /* the command line that made it, shown under the heading */
  json_t *estimate;     /* an estimate document of the plan shown (plan, time_breakdown_s, memory.stages …) */
  json_t *search;       /* a search document (plans[] best first with vs_best, and space[] when present) */
  json_t *trace;        /* the simulator's Chrome trace of the plan shown ({"traceEvents": […]}) */
  json_t *validate;     /* a validate document (rows[], summary) */
  json_t *compare_search; /* a compare-search document (families[], lp_bound_s) */
  json_t *graph_plan;   /* a general graph's op-level plan (autopar-plan/2: mesh, stages[], ops[]) */
} html_inputs;

/* Renders the report; the caller frees *html_out with free(). AP_NOMEM when out of memory; AP_INVALID when
 * no input is given at all. */
AP_HIDDEN ap_status html_report(ap_ctx *ctx, const html_inputs *in, char **html_out);

/* A coloured part of a chart and its legend entry. */
typedef struct {
  const char *key;   /* the document's key (time_breakdown_s.*, memory.stages[].*, trace category) */
  const char *label; /* what the legend says */
  const char *color;
} html_part_style;

/* The pieces every section uses (html_util.c): the colour of key in t[0..n) (grey when absent) and the legend
 * of t; and s escaped for HTML; obj[key] as a number (NAN when absent) and as
 * a string (NULL when absent); a duration in s, ms or µs. */
AP_HIDDEN void html_esc(strbuf *sb, const char *s);
AP_HIDDEN double html_num(json_t *obj, const char *key);
AP_HIDDEN const char *html_str(json_t *obj, const char *key);
AP_HIDDEN void html_put_time(strbuf *sb, double s);
AP_HIDDEN void html_put_bytes(strbuf *sb, double b);
AP_HIDDEN const char *html_style_color(const html_part_style *t, size_t n, const char *key);
AP_HIDDEN void html_legend(strbuf *sb, const html_part_style *t, size_t n);
/* The compare-search section (html_compare.c): a table and a chart of the families and baselines; nothing
 * when doc is NULL or lists no family. */
AP_HIDDEN void html_section_compare_search(strbuf *sb, json_t *doc);

/* The sections of a general graph's plan (html_graph.c): plan table, stages chart and table (with the simulated
 * timeline when trace, `simulate --trace` of the plan, is not NULL), peak memory against the limit, heaviest
 * ops; nothing when doc is NULL. False when out of memory. */
AP_HIDDEN bool html_section_graph_plan(strbuf *sb, json_t *doc, json_t *trace);
/* The simulated timeline (section #timeline, html_timeline.c): a lane per process and thread of the Chrome
 * trace; nothing without one. */
AP_HIDDEN void html_section_timeline(strbuf *sb, json_t *trace);

#endif
