/* The explored plans of the HTML report (html.h, report layer; section id "space", docs/report.md): every plan
 * the search document lists (space[], else plans[]) as iteration time against peak memory per device, both axes
 * from 0 with ticks and units, the device memory (and the limit, when --max-mem-fraction lowers it) as a
 * dashed line, the Pareto front (no other fitting plan both faster and leaner) joined, the winner marked, and a
 * legend for each kind of mark. Plans far off the interesting part (memory beyond three times the device's, or
 * a time beyond six times the winner's) are drawn as triangles on the chart's edge and counted, so that the
 * fitting plans are not squeezed into a corner by a few that need terabytes. */
#include <math.h>
#include <stdlib.h>

#include "report/html.h"

enum { CHART_W = 960, PLOT_H = 380, LEFT = 90, RIGHT = 30, TOP = 20, BOTTOM = 60 };
/* Off-scale limits: memory beyond OFF_MEM times the device's, time beyond OFF_TIME times the winner's. */
#define OFF_MEM 3.0
#define OFF_TIME 6.0

static const char C_FIT[] = "#4e79a7", C_NOFIT[] = "#aaaaaa", C_FRONT[] = "#22aa77", C_WIN[] = "#d62728",
                  C_CAP[] = "#cc0000", C_LIMIT[] = "#ff7f0e", C_OFF[] = "#8c564b";

typedef struct {
  double t, m;
  bool fits, pareto, best;
  const char *label;
} point;

/* A point's peak memory and whether it fits: space[] entries carry peak_mem_bytes and fits, plans[] entries
 * the cost result's memory object (docs/json.md, autopar-search/2). */
double html_point_peak(json_t *e) {
  json_t *m = json_object_get(e, "memory");
  return m ? html_num(m, "peak_bytes") : html_num(e, "peak_mem_bytes");
}
static bool point_fits(json_t *e) {
  json_t *m = json_object_get(e, "memory");
  return !json_is_false(json_object_get(m ? m : e, "fits"));
}

/* The points of the document, the winner among them (added when the sample of space[] missed it); NULL and
 * *np 0 when there are none, *oom when out of memory. */
static point *read_points(json_t *search, size_t *np, bool *from_plans, bool *oom) {
  *np = 0, *oom = false;
  json_t *sp = json_object_get(search, "space");
  *from_plans = !json_is_array(sp) || json_array_size(sp) == 0;
  if (*from_plans) sp = json_object_get(search, "plans");
  size_t n = json_is_array(sp) ? json_array_size(sp) : 0, i;
  if (n == 0) return NULL;
  point *pt = calloc(n + 1, sizeof *pt);
  if (!pt) {
    *oom = true;
    return NULL;
  }
  json_t *e;
  json_array_foreach(sp, i, e) {
    double t = html_num(e, "iteration_time_s"), m = html_point_peak(e);
    if (isfinite(t) && t > 0 && isfinite(m) && m > 0)
      pt[(*np)++] = (point){t, m, point_fits(e), false, i == 0 && *from_plans, html_str(e, "summary")};
  }
  json_t *best = json_array_get(json_object_get(search, "plans"), 0);
  double bt = html_num(best, "iteration_time_s"), bm = html_point_peak(best);
  bool have_best = *from_plans;
  for (size_t a = 0; a < *np && !*from_plans; a++)
    if (pt[a].t == bt && pt[a].m == bm) pt[a].best = have_best = true;
  if (!have_best && isfinite(bt) && bt > 0 && isfinite(bm) && bm > 0)
    pt[(*np)++] = (point){bt, bm, point_fits(best), false, true, html_str(best, "summary")};
  for (size_t a = 0; a < *np; a++) {
    bool dominated = false;
    for (size_t b = 0; b < *np && !dominated; b++)
      dominated = b != a && pt[b].fits && pt[b].t <= pt[a].t && pt[b].m <= pt[a].m && (pt[b].t < pt[a].t || pt[b].m < pt[a].m);
    pt[a].pareto = pt[a].fits && !dominated;
  }
  if (*np == 0) {
    free(pt);
    return NULL;
  }
  return pt;
}

static void put_title(strbuf *sb, const point *p) {
  sb_puts(sb, "<title>");
  if (p->label) {
    html_esc(sb, p->label);
    sb_puts(sb, ": ");
  }
  html_put_time(sb, p->t);
  sb_puts(sb, ", ");
  html_put_bytes(sb, p->m);
  sb_printf(sb, "%s</title>", p->fits ? "" : " (does not fit)");
}

/* A horizontal dashed line at memory m, labelled. */
static void mem_line(strbuf *sb, const html_scale *ys, double m, const char *id, const char *cls, const char *what) {
  double y = html_px(ys, m);
  sb_printf(sb, "<line id=\"%s\" class=\"%s\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"><title>%s ", id, cls, LEFT,
            CHART_W - RIGHT, y, y, what);
  html_put_bytes(sb, m);
  sb_printf(sb, "</title></line><text class=\"lbl\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s ", CHART_W - RIGHT - 4, y - 4, what);
  html_put_bytes(sb, m);
  sb_puts(sb, "</text>\n");
}

ap_status html_section_space(strbuf *sb, json_t *search) {
  if (!search) return AP_OK;
  size_t np = 0;
  bool from_plans, oom;
  point *pt = read_points(search, &np, &from_plans, &oom);
  if (!pt) return oom ? AP_NOMEM : AP_OK;
  double cap = html_num(search, "device_memory_bytes"), lim = html_num(search, "mem_limit_bytes");
  double tbest = INFINITY, tmax = 0, mmax = 0, mfit = 0;
  for (size_t a = 0; a < np; a++) {
    if (pt[a].best) tbest = pt[a].t;
    tmax = fmax(tmax, pt[a].t), mmax = fmax(mmax, pt[a].m);
    if (pt[a].fits) mfit = fmax(mfit, pt[a].m);
  }
  double mtop = isfinite(cap) && cap > 0 ? fmin(mmax, fmax(OFF_MEM * cap, mfit)) : mmax;
  if (isfinite(cap) && cap > 0) mtop = fmax(mtop, cap);
  double ttop = isfinite(tbest) ? fmin(tmax, OFF_TIME * tbest) : tmax;
  html_scale xs = html_scale_zero(HTML_Q_TIME, ttop * 1.02, LEFT, CHART_W - RIGHT);
  html_scale ys = html_scale_zero(HTML_Q_BYTES, mtop * 1.02, PLOT_H - BOTTOM, TOP);
  size_t n_off = 0, n_fit = 0;
  for (size_t a = 0; a < np; a++) n_off += pt[a].t > xs.v1 || pt[a].m > ys.v1, n_fit += pt[a].fits;
  sb_printf(sb, "<section id=\"space\"><h2>Explored plans: iteration time against peak memory per device</h2>\n"
                "<p>%zu plans%s, %zu of them fit; the Pareto front joins the fitting plans no other fitting plan beats "
                "on both.</p>\n<svg id=\"space-chart\" width=\"%d\" height=\"%d\" role=\"img\">\n",
            np, from_plans ? " (the reported ones)" : " (a sample of those the search costed)", n_fit, CHART_W, PLOT_H);
  html_axis(sb, &xs, false, PLOT_H - BOTTOM, TOP, "iteration time");
  html_axis(sb, &ys, true, LEFT, CHART_W - RIGHT, "peak memory per device");
  if (isfinite(cap) && cap > 0) mem_line(sb, &ys, cap, "space-capacity", "cap", "device memory");
  if (isfinite(lim) && lim > 0 && isfinite(cap) && lim < cap) mem_line(sb, &ys, lim, "space-limit", "limit", "limit");
  /* The front, left to right by time (insertion sort of the front's indices: it is short). */
  size_t nf = 0, *front = calloc(np, sizeof *front);
  if (!front) {
    free(pt);
    return AP_NOMEM;
  }
  for (size_t a = 0; a < np; a++)
    if (pt[a].pareto && pt[a].t <= xs.v1 && pt[a].m <= ys.v1) {
      size_t k = nf++;
      while (k > 0 && pt[front[k - 1]].t > pt[a].t) front[k] = front[k - 1], k--;
      front[k] = a;
    }
  if (nf > 1) {
    sb_puts(sb, "<polyline id=\"pareto\" class=\"pareto\" points=\"");
    for (size_t k = 0; k < nf; k++) sb_printf(sb, "%.1f,%.1f ", html_px(&xs, pt[front[k]].t), html_px(&ys, pt[front[k]].m));
    sb_puts(sb, "\"/>\n");
  }
  free(front);
  /* Non-fitting first, the winner last, so that the marks that matter are on top. */
  for (int pass = 0; pass < 3; pass++)
    for (size_t a = 0; a < np; a++) {
      const point *p = &pt[a];
      if ((p->best ? 2 : p->fits ? 1 : 0) != pass) continue;
      bool off = p->t > xs.v1 || p->m > ys.v1;
      double x = html_px(&xs, fmin(p->t, xs.v1)), y = html_px(&ys, fmin(p->m, ys.v1));
      if (off) {
        sb_printf(sb, "<path class=\"off\" d=\"M%.1f,%.1f l-5,9 h10 z\">", x, y - 4);
      } else {
        sb_printf(sb, "<circle class=\"%s%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"%d\"%s>", p->fits ? "fit" : "nofit", p->pareto ? " front" : "", x,
                  y, p->best ? 8 : 3, p->best ? " id=\"winner\"" : "");
      }
      put_title(sb, p);
      sb_puts(sb, off ? "</path>\n" : "</circle>\n");
    }
  sb_puts(sb, "</svg>\n");
  html_legend_open(sb);
  html_legend_item(sb, C_FIT, "fits", HTML_SW_DOT);
  html_legend_item(sb, C_NOFIT, "does not fit", HTML_SW_DOT);
  html_legend_item(sb, C_FRONT, "Pareto front", HTML_SW_LINE);
  html_legend_item(sb, C_WIN, "winner", HTML_SW_DOT);
  if (isfinite(cap) && cap > 0) html_legend_item(sb, C_CAP, "device memory", HTML_SW_DASH);
  if (isfinite(lim) && lim > 0 && isfinite(cap) && lim < cap) html_legend_item(sb, C_LIMIT, "limit (--max-mem-fraction)", HTML_SW_DASH);
  if (n_off) {
    strbuf t = {0};
    sb_printf(&t, "%zu off the chart (beyond ", n_off);
    html_put_tick(&t, &ys, ys.v1);
    sb_puts(&t, " or ");
    html_put_tick(&t, &xs, xs.v1);
    sb_puts(&t, "), drawn on its edge");
    html_legend_item(sb, C_OFF, t.buf ? t.buf : "off the chart", HTML_SW_TRIANGLE);
    sb_free(&t);
  }
  html_legend_close(sb);
  sb_puts(sb, "</section>\n");
  free(pt);
  return AP_OK;
}
