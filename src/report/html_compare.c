/* The compare-search part of the HTML report (html.h, report layer): `autopar compare-search --report` draws
 * its document (autopar-compare-search/1, docs/json.md) as a table, one row per search family and baseline
 * (status, best iteration time, time to reach it, evaluations, gap to the LP bound), and a chart of the best
 * iteration time of each, the baselines apart in grey, the LP lower bound as a dashed line. Element ids
 * (docs/report.md): compare-search, compare-table, compare-chart, lp-bound. */
#include <math.h>
#include <string.h>

#include "report/html.h"

/* Chart geometry, in CSS pixels: one bar per family. */
enum { CMP_W = 960, CMP_LABEL_W = 190, CMP_BAR_H = 16, CMP_GAP = 6, CMP_TOP = 24, CMP_RIGHT = 120 };

/* Baselines are named "baseline: …" by the document (search/compare_search.c). */
static bool is_baseline(const char *name) { return name && strncmp(name, "baseline", 8) == 0; }

static void put_cell_time(strbuf *sb, double s) {
  sb_puts(sb, "<td>");
  html_put_time(sb, s);
  sb_puts(sb, "</td>");
}

static void table(strbuf *sb, json_t *fams) {
  sb_puts(sb, "<table class=\"grid\" id=\"compare-table\"><tr><th>family</th><th>status</th><th>best time/iter</th>"
              "<th>time to best</th><th>total time</th><th>evaluations</th><th>gap to LP bound</th></tr>\n");
  size_t i;
  json_t *f;
  json_array_foreach(fams, i, f) {
    const char *name = html_str(f, "name");
    sb_printf(sb, "<tr%s><td>", is_baseline(name) ? " class=\"baseline\"" : "");
    html_esc(sb, name ? name : "?");
    sb_puts(sb, "</td><td>");
    html_esc(sb, json_is_false(json_object_get(f, "ran")) ? "not run" : html_str(f, "status"));
    sb_puts(sb, "</td>");
    put_cell_time(sb, html_num(f, "best_s"));
    put_cell_time(sb, html_num(f, "time_to_best_s"));
    put_cell_time(sb, html_num(f, "total_s"));
    double ev = html_num(f, "evaluations"), gap = html_num(f, "gap_to_lp");
    if (isfinite(ev)) sb_printf(sb, "<td>%.0f</td>", ev);
    else sb_puts(sb, "<td>–</td>");
    if (isfinite(gap)) sb_printf(sb, "<td>%.2f%%</td></tr>\n", 100 * gap);
    else sb_puts(sb, "<td>–</td></tr>\n");
  }
  sb_puts(sb, "</table>\n");
}

/* Bars of the best iteration time on an axis from 0 (the families' times are often within a few percent of each
 * other: each bar is labelled with its time and its gap to the LP bound), the LP bound as a dashed line. */
static void chart(strbuf *sb, json_t *fams, double lp) {
  double hi = isfinite(lp) && lp > 0 ? lp : 0;
  size_t i, n = 0;
  json_t *f;
  json_array_foreach(fams, i, f) {
    double b = html_num(f, "best_s");
    if (isfinite(b) && b > 0) hi = fmax(hi, b), n++;
  }
  if (n == 0) return;
  int height = CMP_TOP + (int)json_array_size(fams) * (CMP_BAR_H + CMP_GAP) + 50;
  html_scale xs = html_scale_zero(HTML_Q_TIME, hi, CMP_LABEL_W, CMP_W - CMP_RIGHT);
  sb_printf(sb, "<svg id=\"compare-chart\" width=\"%d\" height=\"%d\" role=\"img\">\n", CMP_W, height);
  int y = CMP_TOP;
  bool any_base = false, any_fam = false;
  json_array_foreach(fams, i, f) {
    const char *name = html_str(f, "name");
    double b = html_num(f, "best_s");
    sb_printf(sb, "<text x=\"%d\" y=\"%d\" class=\"lbl\" text-anchor=\"end\">", CMP_LABEL_W - 8, y + CMP_BAR_H - 4);
    html_esc(sb, name ? name : "?");
    sb_puts(sb, "</text>");
    if (isfinite(b) && b > 0) {
      double w = fmax(1.0, html_px(&xs, b) - CMP_LABEL_W);
      if (is_baseline(name)) any_base = true;
      else any_fam = true;
      sb_printf(sb, "<rect class=\"%s\" x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\"><title>", is_baseline(name) ? "cmp-base" : "cmp-fam",
                CMP_LABEL_W, y, w, CMP_BAR_H);
      html_esc(sb, name ? name : "?");
      sb_puts(sb, ": ");
      html_put_time(sb, b);
      sb_printf(sb, " per iteration, reached after ");
      html_put_time(sb, html_num(f, "time_to_best_s"));
      sb_printf(sb, ", %.0f evaluations</title></rect>", html_num(f, "evaluations"));
      double gap = html_num(f, "gap_to_lp");
      sb_printf(sb, "<text x=\"%.1f\" y=\"%d\" class=\"lbl\">", CMP_LABEL_W + w + 6, y + CMP_BAR_H - 4);
      html_put_time(sb, b);
      if (isfinite(gap)) sb_printf(sb, " (+%.2f%%)", 100 * gap);
      sb_puts(sb, "</text>");
    }
    sb_puts(sb, "\n");
    y += CMP_BAR_H + CMP_GAP;
  }
  if (isfinite(lp) && lp > 0) {
    double x = html_px(&xs, lp);
    sb_printf(sb, "<line id=\"lp-bound\" class=\"cap\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"><title>LP lower bound ", x,
              CMP_TOP - 8, x, y);
    html_put_time(sb, lp);
    sb_printf(sb, "</title></line><text x=\"%.1f\" y=\"%d\" class=\"lbl\">LP bound</text>", x + 4, CMP_TOP - 10);
  }
  html_axis(sb, &xs, false, y + 2, NAN, "best iteration time");
  sb_puts(sb, "</svg>\n");
  html_legend_open(sb);
  if (any_fam) html_legend_item(sb, "#4e79a7", "search family", HTML_SW_BOX);
  if (any_base) html_legend_item(sb, "#bab0ac", "baseline", HTML_SW_BOX);
  if (isfinite(lp) && lp > 0) html_legend_item(sb, "#cc0000", "LP lower bound", HTML_SW_DASH);
  html_legend_close(sb);
}

void html_section_compare_search(strbuf *sb, json_t *doc) {
  json_t *fams = doc ? json_object_get(doc, "families") : NULL;
  if (!json_is_array(fams) || json_array_size(fams) == 0) return;
  double lp = html_num(doc, "lp_bound_s");
  sb_puts(sb, "<section id=\"compare-search\"><h2>Search families on one sharding problem</h2>\n<p>");
  html_esc(sb, html_str(doc, "model"));
  sb_puts(sb, " on ");
  html_esc(sb, html_str(doc, "cluster"));
  sb_printf(sb, ", %.0f groups; every family with the same budget, beside pure data parallelism and Megatron's "
                "column/row sharding (grey). LP lower bound ",
            html_num(doc, "groups"));
  html_put_time(sb, lp);
  sb_puts(sb, ".</p>\n");
  table(sb, fams);
  chart(sb, fams, lp);
  sb_puts(sb, "</section>\n");
}
