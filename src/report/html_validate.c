/* Predicted against measured of the HTML report (html.h, report layer; section id "validate", docs/report.md):
 * each measured run of a validate document as its measured tokens/s per GPU (x) against the prediction (y), on
 * log axes with ticks and titles, the diagonal of a perfect prediction and the two lines of ±25% around it, rows
 * beyond 25% in red, a legend for each kind of mark; then the error per device and stack (error-by-group), the
 * stack each row ran on as the document states it (its stack column, else the model's default stack). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/html.h"

enum { SIZE = 540, LEFT = 90, BOTTOM = 60, TOP = 16, RIGHT = 16 };
#define FAR_APE 0.25

static const char C_ROW[] = "#4e79a7", C_FAR[] = "#e15759", C_DIAG[] = "#888888", C_BAND[] = "#bbbbbb";

/* A line y = k·x across the chart, clipped to the square domain. */
static void ratio_line(strbuf *sb, const html_scale *xs, const html_scale *ys, double k, const char *cls) {
  double a = fmax(xs->v0, ys->v0 / k), b = fmin(xs->v1, ys->v1 / k);
  if (!(b > a)) return;
  sb_printf(sb, "<line class=\"%s\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", cls, html_px(xs, a), html_px(ys, k * a),
            html_px(xs, b), html_px(ys, k * b));
}

static const char *row_stack(json_t *r) { return html_str(r, "stack") ? html_str(r, "stack") : "(not stated)"; }

static ap_status error_table(strbuf *sb, json_t *rows) {
  sb_puts(sb, "<table class=\"grid\" id=\"error-by-group\"><tr><th>device</th><th>stack</th><th>rows</th><th>MAPE</th></tr>\n");
  /* Groups by (gpu, stack), in order of first appearance; quadratic, but a runs table has hundreds of rows. */
  size_t n = json_array_size(rows);
  bool *done = calloc(n ? n : 1, sizeof *done);
  if (!done) return AP_NOMEM;
  for (size_t a = 0; a < n; a++) {
    if (done[a]) continue;
    json_t *ra = json_array_get(rows, a);
    const char *g = html_str(ra, "gpu") ? html_str(ra, "gpu") : "?", *st = row_stack(ra);
    double sum_ape = 0;
    size_t k = 0;
    for (size_t b = a; b < n; b++) {
      json_t *rb = json_array_get(rows, b);
      const char *gb = html_str(rb, "gpu") ? html_str(rb, "gpu") : "?";
      if (done[b] || strcmp(g, gb) != 0 || strcmp(st, row_stack(rb)) != 0) continue;
      done[b] = true;
      double ape = html_num(rb, "ape");
      if (isfinite(ape)) sum_ape += ape, k++;
    }
    sb_puts(sb, "<tr><td>");
    html_esc(sb, g);
    sb_puts(sb, "</td><td>");
    html_esc(sb, st);
    if (k) sb_printf(sb, "</td><td>%zu</td><td>%.1f%%</td></tr>\n", k, 100 * sum_ape / (double)k);
    else sb_puts(sb, "</td><td>0</td><td>–</td></tr>\n");
  }
  free(done);
  sb_puts(sb, "</table>\n");
  return AP_OK;
}

ap_status html_section_validate(strbuf *sb, json_t *val) {
  json_t *rows = val ? json_object_get(val, "rows") : NULL;
  if (!json_is_array(rows) || json_array_size(rows) == 0) return AP_OK;
  double lo = INFINITY, hi = 0;
  size_t i, n_far = 0, n_in = 0;
  json_t *r;
  json_array_foreach(rows, i, r) {
    double p = html_num(r, "predicted_tokens_per_s_per_gpu"), m = html_num(r, "measured_tokens_per_s_per_gpu");
    if (!(p > 0 && m > 0)) continue;
    lo = fmin(lo, fmin(p, m)), hi = fmax(hi, fmax(p, m));
    if (html_num(r, "ape") > FAR_APE) n_far++;
    else n_in++;
  }
  if (!(hi > 0)) return AP_OK;
  /* One domain for both axes, so that the diagonal is the diagonal. */
  html_scale xs = html_scale_log(HTML_Q_COUNT, lo, hi, LEFT, SIZE - RIGHT);
  html_scale ys = html_scale_log(HTML_Q_COUNT, lo, hi, SIZE - BOTTOM, TOP);
  json_t *sum = json_object_get(val, "summary");
  sb_printf(sb, "<section id=\"validate\"><h2>Predicted against measured</h2>\n<p>throughput MAPE %.1f%%, median %.1f%% over %.0f rows</p>\n",
            100 * html_num(sum, "mape"), 100 * html_num(sum, "median_ape"), html_num(sum, "n"));
  sb_printf(sb, "<svg id=\"validate-chart\" width=\"%d\" height=\"%d\" role=\"img\">\n", SIZE, SIZE);
  html_axis(sb, &xs, false, SIZE - BOTTOM, TOP, "measured tokens/s per GPU (log scale)");
  html_axis(sb, &ys, true, LEFT, SIZE - RIGHT, "predicted tokens/s per GPU (log scale)");
  ratio_line(sb, &xs, &ys, 1 + FAR_APE, "band");
  ratio_line(sb, &xs, &ys, 1 - FAR_APE, "band");
  ratio_line(sb, &xs, &ys, 1, "diag");
  json_array_foreach(rows, i, r) {
    double p = html_num(r, "predicted_tokens_per_s_per_gpu"), m = html_num(r, "measured_tokens_per_s_per_gpu");
    if (!(p > 0 && m > 0)) continue;
    double ape = html_num(r, "ape");
    sb_printf(sb, "<circle class=\"row%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\"><title>", ape > FAR_APE ? " far" : "", html_px(&xs, m),
              html_px(&ys, p));
    html_esc(sb, html_str(r, "id"));
    sb_puts(sb, " (");
    html_esc(sb, html_str(r, "gpu"));
    sb_puts(sb, ", ");
    html_esc(sb, row_stack(r));
    sb_printf(sb, "): predicted %.0f, measured %.0f (%+.1f%%)</title></circle>\n", p, m, 100 * (p / m - 1));
  }
  sb_puts(sb, "</svg>\n");
  char lbl[96];
  html_legend_open(sb);
  snprintf(lbl, sizeof lbl, "within 25%% of measured (%zu rows)", n_in);
  html_legend_item(sb, C_ROW, lbl, HTML_SW_DOT);
  snprintf(lbl, sizeof lbl, "more than 25%% off (%zu rows)", n_far);
  html_legend_item(sb, C_FAR, lbl, HTML_SW_DOT);
  html_legend_item(sb, C_DIAG, "perfect prediction", HTML_SW_DASH);
  html_legend_item(sb, C_BAND, "±25%", HTML_SW_LINE);
  html_legend_close(sb);
  ap_status st = error_table(sb, rows);
  sb_puts(sb, "</section>\n");
  return st;
}
