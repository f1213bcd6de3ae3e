/* The HTML report (html.h): a page of sections, each rendered from one of the JSON documents the commands
 * build, with inline SVG charts. Every chart is drawn here from numbers of the documents; nothing is
 * fetched, so the file opens offline. Section ids (docs/report.md): plan-table, time-breakdown, timeline,
 * memory, space, runner-ups, validate; compare-search's compare-table and compare-chart are html_compare.c's,
 * a general graph's plan (graph-plan-table, graph-stages, graph-memory, graph-ops) html_graph.c's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost/result_doc.h"
#include "report/html.h"

/* Chart geometry, in CSS pixels. */
enum { CHART_W = 960, PLOT_H = 340, MARGIN = 50 };

/* Colours of the parts of a breakdown (the timeline's are html_timeline.c's). */
static const html_part_style time_parts[] = {
    {"forward", "forward", "#4e79a7"},           {"backward", "backward", "#f28e2b"},
    {"recompute", "recompute", "#b07aa1"},       {"bubble", "pipeline bubble", "#e15759"},
    {"tp_comm_exposed", "TP comm", "#76b7b2"},   {"cp_comm_exposed", "CP comm", "#59a14f"},
    {"ep_comm_exposed", "EP comm", "#edc948"},   {"pp_comm_exposed", "PP send/recv", "#9c755f"},
    {"dp_comm_exposed", "DP comm", "#ff9da7"},   {"optimizer", "optimizer", "#bab0ac"},
    {"offload", "offload (host)", "#d37295"},
};
/* Colours of the memory parts, in the order of cost_mem_parts (cost/result_doc.h), whose keys and labels the
 * bars and the legend take, so that the stacked bars add up to the stage's total. */
static const char *const mem_colors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2",
                                         "#edc948", "#9c755f", "#bab0ac", "#79706e"};
/* The plan shown: the estimate's, else the search winner's. */
static json_t *shown_plan(const html_inputs *in, json_t **result) {
  if (in->estimate) {
    *result = in->estimate;
    return json_object_get(in->estimate, "plan");
  }
  json_t *plans = in->search ? json_object_get(in->search, "plans") : NULL;
  json_t *best = json_is_array(plans) && json_array_size(plans) ? json_array_get(plans, 0) : NULL;
  *result = best;
  return best ? json_object_get(best, "plan") : NULL;
}

static void row(strbuf *sb, const char *k, const char *v) {
  sb_puts(sb, "<tr><th>");
  html_esc(sb, k);
  sb_puts(sb, "</th><td>");
  html_esc(sb, v);
  sb_puts(sb, "</td></tr>\n");
}

static void section_plan(strbuf *sb, const html_inputs *in) {
  json_t *res = NULL, *p = shown_plan(in, &res);
  if (!p) return;
  char v[256];
  sb_puts(sb, "<section id=\"plan-table\"><h2>Plan</h2><table class=\"kv\">\n");
  /* The stack the plan is costed for, and why it is that one (the search's or the estimate's document). */
  json_t *sdoc = in->search ? in->search : in->estimate;
  if (html_str(sdoc, "stack")) {
    snprintf(v, sizeof v, "%s (%s)", html_str(sdoc, "stack"), html_str(sdoc, "stack_note") ? html_str(sdoc, "stack_note") : "");
    row(sb, "stack", v);
  }
  json_t *par = json_object_get(p, "parallel"), *pipe = json_object_get(p, "pipeline");
  snprintf(v, sizeof v, "dp %.0f, tp %.0f, pp %.0f, cp %.0f, ep %.0f, vpp %.0f", html_num(par, "dp"), html_num(par, "tp"),
           html_num(par, "pp"), html_num(par, "cp"), html_num(par, "ep"), html_num(par, "vpp"));
  row(sb, "parallelism", v);
  snprintf(v, sizeof v, "%s, micro-batch %.0f x %.0f, global batch %.0f, sequence %.0f",
           html_str(pipe, "schedule") ? html_str(pipe, "schedule") : "?", html_num(pipe, "micro_batch_size"),
           html_num(pipe, "n_micro_batches"), html_num(p, "global_batch_size"), html_num(p, "seq_length"));
  row(sb, "pipeline", v);
  json_t *rc = json_object_get(p, "recompute"), *opt = json_object_get(p, "optimizer");
  const char *oo = html_str(opt, "offload_optimizer"), *op = html_str(opt, "offload_param");
  char off[64] = "";
  if ((oo && strcmp(oo, "none") != 0) || (op && strcmp(op, "none") != 0))
    snprintf(off, sizeof off, ", offload optimizer %s, params %s", oo ? oo : "none", op ? op : "none");
  snprintf(v, sizeof v, "recompute %s, ZeRO %.0f, %s%s%s", html_str(rc, "granularity") ? html_str(rc, "granularity") : "?",
           html_num(opt, "zero_stage"), html_str(p, "precision") ? html_str(p, "precision") : "?",
           json_is_true(json_object_get(p, "sequence_parallel")) ? ", sequence parallel" : "", off);
  row(sb, "memory savers", v);
  strbuf t = {0};
  html_put_time(&t, html_num(res, "iteration_time_s"));
  if (t.buf) row(sb, "iteration time", t.buf);
  sb_free(&t);
  snprintf(v, sizeof v, "%.6g", html_num(res, "tokens_per_s_per_device"));
  row(sb, "tokens/s per device", v);
  json_t *mfu = json_object_get(res, "mfu");
  snprintf(v, sizeof v, "%.1f%% (PaLM's convention)", 100 * html_num(mfu, "palm"));
  row(sb, "MFU", v);
  if (html_str(res, "bound")) row(sb, "bound by", html_str(res, "bound_detail") ? html_str(res, "bound_detail") : html_str(res, "bound"));
  sb_puts(sb, "</table></section>\n");

  json_t *tb = json_object_get(res, "time_breakdown_s");
  if (!json_is_object(tb)) return;
  double total = 0;
  for (size_t i = 0; i < AP_COUNT(time_parts); i++) {
    double x = html_num(tb, time_parts[i].key);
    if (isfinite(x) && x > 0) total += x;
  }
  if (!(total > 0)) return;
  sb_printf(sb, "<section id=\"time-breakdown\"><h2>Where the time goes</h2>\n<svg width=\"%d\" height=\"40\" role=\"img\">",
            CHART_W);
  double x0 = 0;
  for (size_t i = 0; i < AP_COUNT(time_parts); i++) {
    double x = html_num(tb, time_parts[i].key);
    if (!(isfinite(x) && x > 0)) continue;
    double w = x / total * CHART_W;
    sb_printf(sb, "<rect class=\"part\" x=\"%.2f\" y=\"4\" width=\"%.2f\" height=\"30\" fill=\"%s\"><title>%s: ", x0, w,
              time_parts[i].color, time_parts[i].label);
    html_put_time(sb, x);
    sb_puts(sb, "</title></rect>");
    x0 += w;
  }
  sb_puts(sb, "</svg>\n");
  html_legend(sb, time_parts, AP_COUNT(time_parts));
  sb_puts(sb, "</section>\n");
}

static void section_memory(strbuf *sb, json_t *est) {
  json_t *mem = est ? json_object_get(est, "memory") : NULL, *stages = mem ? json_object_get(mem, "stages") : NULL;
  if (!json_is_array(stages) || json_array_size(stages) == 0) return;
  double cap = html_num(mem, "capacity_bytes"), top = isfinite(cap) ? cap : 0;
  size_t i;
  json_t *s;
  json_array_foreach(stages, i, s) {
    double t = html_num(s, "total_bytes");
    if (isfinite(t) && t > top) top = t;
  }
  if (!(top > 0)) return;
  size_t n = json_array_size(stages);
  double bw = fmin(60, (CHART_W - 2 * MARGIN) / (double)n * 0.7), step = (CHART_W - 2 * MARGIN) / (double)n;
  double sy = (PLOT_H - 40) / (top * 1.05);
  sb_printf(sb, "<section id=\"memory\"><h2>Memory per device, by pipeline stage</h2>\n<svg width=\"%d\" height=\"%d\" role=\"img\">\n",
            CHART_W, PLOT_H);
  size_t n_parts;
  const cost_mem_part *mp = cost_mem_parts(&n_parts);
  html_part_style legend_parts[AP_COUNT(mem_colors)];
  if (n_parts > AP_COUNT(mem_colors)) n_parts = AP_COUNT(mem_colors);
  for (size_t k = 0; k < n_parts; k++) legend_parts[k] = (html_part_style){mp[k].key, mp[k].label, mem_colors[k]};
  json_array_foreach(stages, i, s) {
    double y = PLOT_H - 20, x = MARGIN + (double)i * step;
    for (size_t k = 0; k < n_parts; k++) {
      double b = html_num(s, mp[k].key);
      if (!(isfinite(b) && b > 0)) continue;
      sb_printf(sb, "<rect class=\"part\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>stage %zu %s: ", x,
                y - b * sy, bw, b * sy, mem_colors[k], i, mp[k].label);
      html_put_bytes(sb, b);
      sb_puts(sb, "</title></rect>");
      y -= b * sy;
    }
    sb_printf(sb, "<text x=\"%.1f\" y=\"%d\" class=\"lbl\">stage %zu</text>\n", x, PLOT_H - 5, i);
  }
  if (isfinite(cap)) {
    double y = PLOT_H - 20 - cap * sy;
    sb_printf(sb, "<line id=\"capacity\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" class=\"cap\"/><text x=\"%d\" y=\"%.1f\" class=\"lbl\">capacity ",
              MARGIN / 2, CHART_W - MARGIN / 2, y, y, CHART_W - 260, y - 4);
    html_put_bytes(sb, cap);
    sb_puts(sb, "</text>");
  }
  sb_puts(sb, "</svg>\n");
  html_legend(sb, legend_parts, n_parts);
  sb_puts(sb, "</section>\n");
}

typedef struct {
  double t, m;
  bool fits, pareto, best;
  const char *label;
} point;

/* A point's peak memory and whether it fits: space[] entries carry peak_mem_bytes and fits, plans[] entries
 * the cost result's memory object (docs/json.md, autopar-search/2). */
static double point_peak(json_t *e) {
  json_t *m = json_object_get(e, "memory");
  return m ? html_num(m, "peak_bytes") : html_num(e, "peak_mem_bytes");
}
static bool point_fits(json_t *e) {
  json_t *m = json_object_get(e, "memory");
  return !json_is_false(json_object_get(m ? m : e, "fits"));
}

/* The explored space: every costed plan the search document lists (space[], else plans[]), iteration time
 * against peak memory, the Pareto front (no other plan both faster and leaner) joined, the winner marked. */
static ap_status section_space(strbuf *sb, json_t *search) {
  json_t *sp = search ? json_object_get(search, "space") : NULL;
  bool from_plans = !json_is_array(sp) || json_array_size(sp) == 0;
  if (from_plans) sp = search ? json_object_get(search, "plans") : NULL;
  size_t n = json_is_array(sp) ? json_array_size(sp) : 0;
  if (n == 0) return AP_OK;
  point *pt = calloc(n + 1, sizeof *pt); /* + 1: the winner, when the sample of space[] missed it */
  if (!pt) return AP_NOMEM;
  size_t np = 0, i;
  json_t *e;
  double tmax = 0, mmax = 0, tmin = INFINITY;
  json_array_foreach(sp, i, e) {
    double t = html_num(e, "iteration_time_s"), m = point_peak(e);
    if (!(isfinite(t) && t > 0 && isfinite(m) && m > 0)) continue;
    pt[np] = (point){t, m, point_fits(e), false, i == 0 && from_plans, html_str(e, "summary")};
    tmax = fmax(tmax, t), mmax = fmax(mmax, m), tmin = fmin(tmin, t);
    np++;
  }
  json_t *best = json_array_get(json_object_get(search, "plans"), 0);
  double bt = html_num(best, "iteration_time_s"), bm = point_peak(best);
  bool have_best = from_plans;
  for (size_t a = 0; a < np && !from_plans; a++)
    if (pt[a].t == bt && pt[a].m == bm) pt[a].best = have_best = true;
  if (!have_best && isfinite(bt) && bt > 0 && isfinite(bm) && bm > 0) {
    pt[np++] = (point){bt, bm, point_fits(best), false, true, html_str(best, "summary")};
    tmax = fmax(tmax, bt), mmax = fmax(mmax, bm), tmin = fmin(tmin, bt);
  }
  for (size_t a = 0; a < np; a++) {
    bool dominated = false;
    for (size_t b = 0; b < np && !dominated; b++)
      dominated = b != a && pt[b].fits && pt[b].t <= pt[a].t && pt[b].m <= pt[a].m && (pt[b].t < pt[a].t || pt[b].m < pt[a].m);
    pt[a].pareto = pt[a].fits && !dominated;
  }
  if (np == 0) {
    free(pt);
    return AP_OK;
  }
  /* Axes span the points (with a margin), not zero upwards: the plans of one search are often close. */
  double mmin = INFINITY;
  for (size_t a = 0; a < np; a++) mmin = fmin(mmin, pt[a].m);
  double t0 = tmin - 0.05 * (tmax - tmin) - 1e-12, m0 = mmin - 0.05 * (mmax - mmin) - 1;
  double t1 = tmax + 0.05 * (tmax - tmin) + 1e-12, m1 = mmax + 0.05 * (mmax - mmin) + 1;
  double sx = (CHART_W - 2 * MARGIN) / (t1 - t0), sy = (PLOT_H - 2 * MARGIN) / (m1 - m0);
  sb_printf(sb, "<section id=\"space\"><h2>Explored plans: iteration time against peak memory</h2>\n"
                "<p>%zu plans%s; the Pareto front joins the plans no other fitting plan beats on both; the winner is the large mark.</p>\n"
                "<svg width=\"%d\" height=\"%d\" role=\"img\">\n",
            np, from_plans ? " (the reported ones)" : "", CHART_W, PLOT_H);
  sb_printf(sb, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"axis\"/><line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"axis\"/>",
            MARGIN, PLOT_H - MARGIN, CHART_W - MARGIN, PLOT_H - MARGIN, MARGIN, MARGIN / 2, MARGIN, PLOT_H - MARGIN);
  sb_printf(sb, "<text x=\"%d\" y=\"%d\" class=\"lbl\" text-anchor=\"end\">iteration time (", CHART_W - MARGIN, PLOT_H - 12);
  html_put_time(sb, t0);
  sb_puts(sb, " … ");
  html_put_time(sb, t1);
  sb_printf(sb, ")</text><text x=\"4\" y=\"%d\" class=\"lbl\">peak memory (", MARGIN / 2 - 6);
  html_put_bytes(sb, m0);
  sb_puts(sb, " … ");
  html_put_bytes(sb, m1);
  sb_puts(sb, ")</text>\n");
  /* The front, left to right by time (insertion sort of the front's indices: it is short). */
  size_t nf = 0;
  size_t *front = calloc(np, sizeof *front);
  if (!front) {
    free(pt);
    return AP_NOMEM;
  }
  for (size_t a = 0; a < np; a++)
    if (pt[a].pareto) {
      size_t k = nf++;
      while (k > 0 && pt[front[k - 1]].t > pt[a].t) front[k] = front[k - 1], k--;
      front[k] = a;
    }
  if (nf > 1) {
    sb_puts(sb, "<polyline id=\"pareto\" class=\"pareto\" points=\"");
    for (size_t k = 0; k < nf; k++)
      sb_printf(sb, "%.1f,%.1f ", MARGIN + (pt[front[k]].t - t0) * sx, PLOT_H - MARGIN - (pt[front[k]].m - m0) * sy);
    sb_puts(sb, "\"/>\n");
  }
  free(front);
  for (size_t a = 0; a < np; a++) {
    sb_printf(sb, "<circle class=\"%s%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"%d\"%s><title>", pt[a].fits ? "fit" : "nofit",
              pt[a].pareto ? " front" : "", MARGIN + (pt[a].t - t0) * sx, PLOT_H - MARGIN - (pt[a].m - m0) * sy, pt[a].best ? 8 : 3,
              pt[a].best ? " id=\"winner\"" : "");
    if (pt[a].label) {
      html_esc(sb, pt[a].label);
      sb_puts(sb, ": ");
    }
    html_put_time(sb, pt[a].t);
    sb_puts(sb, ", ");
    html_put_bytes(sb, pt[a].m);
    sb_puts(sb, "</title></circle>\n");
  }
  sb_puts(sb, "</svg></section>\n");
  free(pt);
  return AP_OK;
}

/* The runner-ups and what each loses on: the part of the time breakdown where it is slowest against the
 * winner (vs_best.delta_s), or memory when it does not fit. */
static void section_runner_ups(strbuf *sb, json_t *search) {
  json_t *plans = search ? json_object_get(search, "plans") : NULL;
  if (!json_is_array(plans) || json_array_size(plans) < 2) return;
  sb_puts(sb, "<section id=\"runner-ups\"><h2>Runner-ups</h2><table class=\"grid\"><tr><th>rank</th><th>plan</th>"
              "<th>iteration</th><th>slower by</th><th>loses on</th><th>peak memory</th></tr>\n");
  size_t i;
  json_t *p;
  json_array_foreach(plans, i, p) {
    if (i == 0) continue;
    json_t *vs = json_object_get(p, "vs_best"), *d = json_object_get(vs, "delta_s");
    const char *worst = NULL;
    double wv = 0;
    for (size_t k = 0; k < AP_COUNT(time_parts); k++) {
      double x = html_num(d, time_parts[k].key);
      if (isfinite(x) && x > wv) wv = x, worst = time_parts[k].label;
    }
    sb_printf(sb, "<tr class=\"runner-up\"><td>%zu</td><td>", i + 1);
    html_esc(sb, html_str(p, "summary"));
    sb_puts(sb, "</td><td>");
    html_put_time(sb, html_num(p, "iteration_time_s"));
    sb_printf(sb, "</td><td>%.1f%%</td><td>", 100 * html_num(vs, "slowdown"));
    if (worst) {
      html_esc(sb, worst);
      sb_puts(sb, " +");
      html_put_time(sb, wv);
    } else {
      sb_puts(sb, "–");
    }
    sb_puts(sb, "</td><td>");
    html_put_bytes(sb, point_peak(p));
    sb_puts(sb, "</td></tr>\n");
  }
  sb_puts(sb, "</table></section>\n");
}

/* Predicted against measured tokens/s per GPU (log-log, the diagonal is a perfect prediction), and the error
 * per device type and stack. */
static ap_status section_validate(strbuf *sb, json_t *val) {
  json_t *rows = val ? json_object_get(val, "rows") : NULL;
  if (!json_is_array(rows) || json_array_size(rows) == 0) return AP_OK;
  double lo = INFINITY, hi = 0;
  size_t i;
  json_t *r;
  json_array_foreach(rows, i, r) {
    double p = html_num(r, "predicted_tokens_per_s_per_gpu"), m = html_num(r, "measured_tokens_per_s_per_gpu");
    if (p > 0 && m > 0) lo = fmin(lo, fmin(p, m)), hi = fmax(hi, fmax(p, m));
  }
  if (!(hi > lo)) return AP_OK;
  double llo = log10(lo) - 0.1, lhi = log10(hi) + 0.1, s = (PLOT_H - 2 * MARGIN) / (lhi - llo);
  json_t *sum = json_object_get(val, "summary");
  sb_printf(sb, "<section id=\"validate\"><h2>Predicted against measured</h2>\n<p>throughput MAPE %.1f%%, median %.1f%% over %.0f rows</p>\n",
            100 * html_num(sum, "mape"), 100 * html_num(sum, "median_ape"), html_num(sum, "n"));
  sb_printf(sb, "<svg width=\"%d\" height=\"%d\" role=\"img\">\n", PLOT_H, PLOT_H);
  sb_printf(sb, "<line class=\"diag\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>", MARGIN, PLOT_H - MARGIN, PLOT_H - MARGIN, MARGIN);
  sb_printf(sb, "<text x=\"%d\" y=\"%d\" class=\"lbl\">measured tokens/s per GPU (log)</text>", MARGIN, PLOT_H - 12);
  json_array_foreach(rows, i, r) {
    double p = html_num(r, "predicted_tokens_per_s_per_gpu"), m = html_num(r, "measured_tokens_per_s_per_gpu");
    if (!(p > 0 && m > 0)) continue;
    double ape = html_num(r, "ape");
    sb_printf(sb, "<circle class=\"row%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\"><title>", ape > 0.25 ? " far" : "", MARGIN + (log10(m) - llo) * s,
              PLOT_H - MARGIN - (log10(p) - llo) * s);
    html_esc(sb, html_str(r, "id"));
    sb_printf(sb, ": predicted %.0f, measured %.0f (%.1f%%)</title></circle>\n", p, m, 100 * ape);
  }
  sb_puts(sb, "</svg>\n<table class=\"grid\" id=\"error-by-group\"><tr><th>device</th><th>stack</th><th>rows</th><th>MAPE</th></tr>\n");
  /* Groups by (gpu, stack), in order of first appearance; quadratic, but a runs table has hundreds of rows. */
  size_t n = json_array_size(rows);
  bool *done = calloc(n, sizeof *done);
  if (!done) return AP_NOMEM;
  for (size_t a = 0; a < n; a++) {
    if (done[a]) continue;
    json_t *ra = json_array_get(rows, a);
    const char *g = html_str(ra, "gpu") ? html_str(ra, "gpu") : "?", *st = html_str(ra, "stack") ? html_str(ra, "stack") : "–";
    double sum_ape = 0;
    size_t k = 0;
    for (size_t b = a; b < n; b++) {
      json_t *rb = json_array_get(rows, b);
      const char *gb = html_str(rb, "gpu") ? html_str(rb, "gpu") : "?", *sb2 = html_str(rb, "stack") ? html_str(rb, "stack") : "–";
      if (done[b] || strcmp(g, gb) != 0 || strcmp(st, sb2) != 0) continue;
      done[b] = true;
      double ape = html_num(rb, "ape");
      if (isfinite(ape)) sum_ape += ape, k++;
    }
    sb_puts(sb, "<tr><td>");
    html_esc(sb, g);
    sb_puts(sb, "</td><td>");
    html_esc(sb, st);
    sb_printf(sb, "</td><td>%zu</td><td>%.1f%%</td></tr>\n", k, k ? 100 * sum_ape / (double)k : 0.0);
  }
  free(done);
  sb_puts(sb, "</table></section>\n");
  return AP_OK;
}

static const char page_css[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1000px}"
    "h1{font-size:22px}h2{font-size:17px;margin-top:28px}code{background:#f3f3f3;padding:1px 4px}"
    "table{border-collapse:collapse}th,td{padding:3px 10px;text-align:left;border-bottom:1px solid #e5e5e5}"
    ".kv th{color:#555;font-weight:500}.legend span{margin-right:14px;font-size:12px}"
    ".legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}"
    ".lbl{font-size:11px;fill:#444}.idle{fill:#fbe3e3}.cap{stroke:#c00;stroke-dasharray:6 3;stroke-width:2}"
    ".axis{stroke:#888}.pareto{fill:none;stroke:#2a7;stroke-width:2}.fit{fill:#4e79a7;opacity:.55}"
    ".nofit{fill:#aaa;opacity:.4}.front{fill:#2a7;opacity:.9}#winner{fill:#d62728;opacity:1}"
    ".diag{stroke:#888;stroke-dasharray:4 3}.row{fill:#4e79a7;opacity:.7}.row.far{fill:#e15759}"
    ".cmp-fam{fill:#4e79a7}.cmp-base{fill:#bab0ac}tr.baseline td{color:#666}"
    "#detail{position:fixed;right:12px;bottom:12px;background:#fff;border:1px solid #ccc;padding:6px 10px;display:none}";

/* The page's only script: clicking a mark shows its tooltip text in a fixed box (for touch screens, where
 * SVG titles do not show), and the page marks itself rendered for the tests. */
static const char page_js[] =
    "document.addEventListener('click',function(e){var t=e.target.querySelector&&e.target.querySelector('title');"
    "var d=document.getElementById('detail');if(t){d.textContent=t.textContent;d.style.display='block';}"
    "else d.style.display='none';});document.body.setAttribute('data-rendered',"
    "String(document.querySelectorAll('section').length));";

ap_status html_report(ap_ctx *ctx, const html_inputs *in, char **html_out) {
  if (!in || !html_out) return ctx_fail(ctx, AP_INVALID, "html_report: NULL argument");
  *html_out = NULL;
  if (!in->estimate && !in->search && !in->trace && !in->validate && !in->compare_search && !in->graph_plan)
    return ctx_fail(ctx, AP_INVALID, "report: nothing to show");
  strbuf sb = {0};
  sb_puts(&sb, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>");
  html_esc(&sb, in->title ? in->title : "autopar report");
  sb_printf(&sb, "</title><style>%s</style></head>\n<body>\n<h1>", page_css);
  html_esc(&sb, in->title ? in->title : "autopar report");
  sb_puts(&sb, "</h1>\n");
  if (in->command) {
    sb_puts(&sb, "<p><code>");
    html_esc(&sb, in->command);
    sb_puts(&sb, "</code></p>\n");
  }
  section_plan(&sb, in);
  if (!in->graph_plan) html_section_timeline(&sb, in->trace); /* a graph plan's is in its stages section */
  json_t *res = NULL;
  (void)shown_plan(in, &res);
  section_memory(&sb, in->estimate);
  ap_status st = section_space(&sb, in->search);
  if (!st) section_runner_ups(&sb, in->search);
  if (!st) st = section_validate(&sb, in->validate);
  if (!st) html_section_compare_search(&sb, in->compare_search);
  if (!st && !html_section_graph_plan(&sb, in->graph_plan, in->trace)) st = AP_NOMEM;
  sb_printf(&sb, "<div id=\"detail\"></div>\n<script>%s</script>\n</body></html>\n", page_js);
  if (st || sb.oom) {
    sb_free(&sb);
    return ctx_fail(ctx, AP_NOMEM, "report: out of memory");
  }
  *html_out = sb_take(&sb);
  return *html_out ? AP_OK : ctx_fail(ctx, AP_NOMEM, "report: out of memory");
}
