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
/* A legend built item by item: html_legend_open, then one html_legend_item per kind of mark (its colour, what
 * it means, and the swatch's shape: HTML_SW_BOX a filled square, HTML_SW_DOT a dot, HTML_SW_LINE a line,
 * HTML_SW_DASH a dashed line, HTML_SW_OUTLINE an outlined box), then html_legend_close. */
typedef enum { HTML_SW_BOX, HTML_SW_DOT, HTML_SW_LINE, HTML_SW_DASH, HTML_SW_OUTLINE, HTML_SW_TRIANGLE } html_swatch;
AP_HIDDEN void html_legend_open(strbuf *sb);
AP_HIDDEN void html_legend_item(strbuf *sb, const char *color, const char *label, html_swatch shape);
AP_HIDDEN void html_legend_close(strbuf *sb);

/* Scales and axes (html_axis.c). A scale maps a quantity's domain [v0, v1] to pixels [p0, p1] (p1 < p0 for a
 * y axis that grows upwards), linearly or in log10. html_scale_zero: linear from 0 to a round value at or above
 * hi; html_scale_log: log over round values around [lo, hi]. html_axis draws s's axis line at the other
 * coordinate `at`, its ticks and labels (each with the unit), grid lines from the axis to grid_to (NAN: none)
 * and the title; html_put_tick writes one tick's label. */
typedef enum { HTML_Q_TIME, HTML_Q_BYTES, HTML_Q_COUNT } html_quantity;
typedef struct {
  double v0, v1, p0, p1;
  bool log;
  html_quantity q;
} html_scale;
AP_HIDDEN html_scale html_scale_zero(html_quantity q, double hi, double p0, double p1);
AP_HIDDEN html_scale html_scale_log(html_quantity q, double lo, double hi, double p0, double p1);
AP_HIDDEN double html_px(const html_scale *s, double v);
AP_HIDDEN void html_put_tick(strbuf *sb, const html_scale *s, double v);
AP_HIDDEN void html_axis(strbuf *sb, const html_scale *s, bool vertical, double at, double grid_to, const char *title);
/* The compare-search section (html_compare.c): a table and a chart of the families and baselines; nothing
 * when doc is NULL or lists no family. */
AP_HIDDEN void html_section_compare_search(strbuf *sb, json_t *doc);

/* The sections of a general graph's plan (html_graph.c): plan table, stages chart and table (with the simulated
 * timeline when trace, `simulate --trace` of the plan, is not NULL), peak memory against the limit, heaviest
 * ops; nothing when doc is NULL. False when out of memory. */
AP_HIDDEN bool html_section_graph_plan(strbuf *sb, json_t *doc, json_t *trace);
/* The explored plans (section #space, html_space.c) and predicted against measured (section #validate,
 * html_validate.c); AP_NOMEM when out of memory, else AP_OK (nothing drawn without their data).
 * html_point_peak: the peak memory of a space[] or plans[] entry. */
AP_HIDDEN ap_status html_section_space(strbuf *sb, json_t *search);
AP_HIDDEN ap_status html_section_validate(strbuf *sb, json_t *val);
AP_HIDDEN double html_point_peak(json_t *e);
/* The simulated timeline (section #timeline, html_timeline.c): a lane per process and thread of the Chrome
 * trace, pass by pass or aggregated with a window pass by pass; nothing without one. False when out of memory. */
AP_HIDDEN bool html_section_timeline(strbuf *sb, json_t *trace);

#endif
