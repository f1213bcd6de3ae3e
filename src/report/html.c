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
enum { CHART_W = 960, PLOT_H = 340 };

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

/* The "text" of each entry of list (assumptions, warnings) in the documents of docs[0..n) as <li> items, each
 * text once (a plan report's estimate and search carry some of the same); the count written. */
static size_t notes(strbuf *sb, json_t *const *docs, size_t n_docs, const char *list) {
  size_t n = 0;
  for (size_t d = 0; d < n_docs; d++) {
    json_t *a = docs[d] ? json_object_get(docs[d], list) : NULL;
    size_t i;
    json_t *e;
    json_array_foreach(a, i, e) {
      const char *t = html_str(e, "text");
      bool seen = !t;
      for (size_t d2 = 0; d2 < d && !seen; d2++) {
        json_t *a2 = docs[d2] ? json_object_get(docs[d2], list) : NULL;
        size_t j;
        json_t *e2;
        json_array_foreach(a2, j, e2) seen = seen || (html_str(e2, "text") && strcmp(html_str(e2, "text"), t) == 0);
      }
      if (seen) continue;
      sb_puts(sb, "<li>");
      html_esc(sb, t);
      sb_puts(sb, "</li>");
      n++;
    }
  }
  return n;
}

/* What the answer found absurd (warnings) and took without being told (assumptions): from the estimate
 * document, the search document and its winner (docs/json.md "Assumptions and warnings"). */
static void section_notes(strbuf *sb, const html_inputs *in) {
  json_t *plans = in->search ? json_object_get(in->search, "plans") : NULL;
  json_t *docs[] = {in->estimate, in->search, json_is_array(plans) ? json_array_get(plans, 0) : NULL};
  strbuf w = {0}, a = {0};
  size_t nw = notes(&w, docs, 3, "warnings"), na = notes(&a, docs, 3, "assumptions");
  if (nw) sb_printf(sb, "<div class=\"warn\" id=\"warnings\"><b>Warning</b><ul>%s</ul></div>\n", w.buf ? w.buf : "");
  if (na) sb_printf(sb, "<div id=\"assumptions\"><b>Assumed</b> (the input did not say)<ul>%s</ul></div>\n", a.buf ? a.buf : "");
  sb_free(&w);
  sb_free(&a);
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
  /* A plan that leaves the sequence to the model (0) has it in its document's seq_length. */
  double seq = html_num(p, "seq_length");
  if (!(seq > 0)) seq = html_num(in->estimate ? in->estimate : in->search, "seq_length");
  snprintf(v, sizeof v, "%s, micro-batch %.0f x %.0f, global batch %.0f, sequence %.0f",
           html_str(pipe, "schedule") ? html_str(pipe, "schedule") : "?", html_num(pipe, "micro_batch_size"),
           html_num(pipe, "n_micro_batches"), html_num(p, "global_batch_size"), seq);
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
  sb_puts(sb, "</table>\n");
  section_notes(sb, in);
  sb_puts(sb, "</section>\n");

  json_t *tb = json_object_get(res, "time_breakdown_s");
  if (!json_is_object(tb)) return;
  double total = 0;
  for (size_t i = 0; i < AP_COUNT(time_parts); i++) {
    double x = html_num(tb, time_parts[i].key);
    if (isfinite(x) && x > 0) total += x;
  }
  if (!(total > 0)) return;
  /* One bar of the iteration on a time axis from 0, the legend naming the parts it holds. */
  html_scale xs = html_scale_zero(HTML_Q_TIME, total, 30, CHART_W - 30);
  sb_printf(sb, "<section id=\"time-breakdown\">\n<h2>Where the time goes</h2>\n<svg id=\"breakdown-chart\" width=\"%d\" height=\"84\" role=\"img\">",
            CHART_W);
  html_axis(sb, &xs, false, 40, NAN, "time on the critical pipeline rank, one iteration");
  double t0 = 0;
  html_part_style shown[AP_COUNT(time_parts)];
  size_t n_shown = 0;
  for (size_t i = 0; i < AP_COUNT(time_parts); i++) {
    double x = html_num(tb, time_parts[i].key);
    if (!(isfinite(x) && x > 0)) continue;
    shown[n_shown++] = time_parts[i];
    sb_printf(sb, "<rect class=\"part\" x=\"%.2f\" y=\"6\" width=\"%.2f\" height=\"30\" fill=\"%s\"><title>%s: ", html_px(&xs, t0),
              html_px(&xs, t0 + x) - html_px(&xs, t0), time_parts[i].color, time_parts[i].label);
    html_put_time(sb, x);
    sb_printf(sb, " (%.1f%%)</title></rect>", 100 * x / total);
    t0 += x;
  }
  sb_puts(sb, "</svg>\n");
  html_legend(sb, shown, n_shown);
  sb_puts(sb, "</section>\n");
}

/* Memory per device, one stacked bar per pipeline stage on an axis from 0, against the device's capacity. */
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
  enum { LEFT = 90, BOTTOM = 40, TOP = 16 };
  size_t n = json_array_size(stages);
  double step = (CHART_W - LEFT - 20) / (double)n, bw = fmin(60, step * 0.7);
  html_scale ys = html_scale_zero(HTML_Q_BYTES, top * 1.04, PLOT_H - BOTTOM, TOP);
  sb_printf(sb, "<section id=\"memory\"><h2>Memory per device, by pipeline stage</h2>\n<svg id=\"memory-chart\" width=\"%d\" height=\"%d\" role=\"img\">\n",
            CHART_W, PLOT_H);
  html_axis(sb, &ys, true, LEFT, CHART_W - 20, "memory per device");
  size_t n_parts;
  const cost_mem_part *mp = cost_mem_parts(&n_parts);
  if (n_parts > AP_COUNT(mem_colors)) n_parts = AP_COUNT(mem_colors);
  bool used[AP_COUNT(mem_colors)] = {false};
  json_array_foreach(stages, i, s) {
    double b0 = 0, x = LEFT + 10 + (double)i * step;
    for (size_t k = 0; k < n_parts; k++) {
      double b = html_num(s, mp[k].key);
      if (!(isfinite(b) && b > 0)) continue;
      used[k] = true;
      double y1 = html_px(&ys, b0), y0 = html_px(&ys, b0 + b);
      sb_printf(sb, "<rect class=\"part\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>stage %zu %s: ", x,
                y0, bw, y1 - y0, mem_colors[k], i, mp[k].label);
      html_put_bytes(sb, b);
      sb_puts(sb, "</title></rect>");
      b0 += b;
    }
    sb_printf(sb, "<text x=\"%.1f\" y=\"%d\" class=\"lbl\" text-anchor=\"middle\">stage %zu</text>", x + bw / 2, PLOT_H - BOTTOM + 16, i);
    sb_printf(sb, "<text x=\"%.1f\" y=\"%.1f\" class=\"lbl\" text-anchor=\"middle\">", x + bw / 2, html_px(&ys, b0) - 4);
    html_put_bytes(sb, b0);
    sb_puts(sb, "</text>\n");
  }
  if (isfinite(cap)) {
    double y = html_px(&ys, cap);
    sb_printf(sb, "<line id=\"capacity\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" class=\"cap\"><title>device memory ", LEFT,
              CHART_W - 20, y, y);
    html_put_bytes(sb, cap);
    sb_printf(sb, "</title></line><text x=\"%d\" y=\"%.1f\" class=\"lbl\" text-anchor=\"end\">device memory ", CHART_W - 24, y - 4);
    html_put_bytes(sb, cap);
    sb_puts(sb, "</text>");
  }
  sb_puts(sb, "</svg>\n");
  html_legend_open(sb);
  for (size_t k = 0; k < n_parts; k++)
    if (used[k]) html_legend_item(sb, mem_colors[k], mp[k].label, HTML_SW_BOX);
  if (isfinite(cap)) html_legend_item(sb, "#cc0000", "device memory", HTML_SW_DASH);
  html_legend_close(sb);
  sb_puts(sb, "</section>\n");
}

/* The runner-ups and what each loses on: the part of the time breakdown where it is slowest against the
 * winner (vs_best.delta_s), or memory when it does not fit. */
static void section_runner_ups(strbuf *sb, json_t *search) {
  json_t *plans = search ? json_object_get(search, "plans") : NULL;
  double folded = html_num(json_object_get(search, "search"), "folded_order_variants");
  if (!json_is_array(plans) || (json_array_size(plans) < 2 && !(folded > 0))) return;
  sb_puts(sb, "<section id=\"runner-ups\"><h2>Runner-ups</h2>\n");
  size_t i;
  json_t *p;
  if (folded > 0) { /* plans that differ from one above only in the rank order (docs/json.md order_variants) */
    sb_printf(sb, "<p id=\"folded\">%.0f plan%s of the search's top that differ%s from a plan above only in the rank order, "
                  "folded into it:", folded, folded == 1 ? "" : "s", folded == 1 ? "s" : "");
    json_array_foreach(plans, i, p) {
      size_t k;
      json_t *v;
      json_array_foreach(json_object_get(p, "order_variants"), k, v) {
        sb_printf(sb, " #%.0f as order ", html_num(p, "rank"));
        html_esc(sb, html_str(v, "order"));
        sb_printf(sb, " (%+.2f%%);", 100 * html_num(v, "slowdown"));
      }
    }
    sb_puts(sb, "</p>\n");
  }
  sb_puts(sb, "<table class=\"grid\"><tr><th>rank</th><th>plan</th>"
              "<th>iteration</th><th>slower by</th><th>loses on</th><th>peak memory</th></tr>\n");
  json_array_foreach(plans, i, p) {
    if (i == 0) continue;
    json_t *vs = json_object_get(p, "vs_best"), *d = json_object_get(vs, "delta_s");
    const char *worst = NULL;
    double wv = 0;
    for (size_t k = 0; k < AP_COUNT(time_parts); k++) {
      double x = html_num(d, time_parts[k].key);
      if (isfinite(x) && x > wv) wv = x, worst = time_parts[k].label;
    }
    sb_printf(sb, "<tr class=\"runner-up\"><td>%.0f</td><td>", html_num(p, "rank"));
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
    html_put_bytes(sb, html_point_peak(p));
    sb_puts(sb, "</td></tr>\n");
  }
  sb_puts(sb, "</table></section>\n");
}

/* Colours here and in the sections' legends are the same (test_report.py matches every mark's colour with a
 * legend entry). */
static const char page_css[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1000px}"
    "h1{font-size:22px}h2{font-size:17px;margin-top:28px}code{background:#f3f3f3;padding:1px 4px}"
    "table{border-collapse:collapse}th,td{padding:3px 10px;text-align:left;border-bottom:1px solid #e5e5e5}"
    ".kv th{color:#555;font-weight:500}.legend span{margin-right:14px;font-size:12px;white-space:nowrap}"
    ".legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle;box-sizing:border-box}"
    ".legend .sw-dot{border-radius:50%}.legend .sw-line{height:3px;width:16px}"
    ".legend .sw-dash{height:0;width:16px;border-top:2px dashed}.legend .sw-outline{border:2px solid}"
    ".legend .sw-tri{width:0;height:0;border-left:5px solid transparent;border-right:5px solid transparent;border-bottom:9px solid}"
    ".lbl{font-size:11px;fill:#444}.idle{fill:#fbe3e3}.cap{stroke:#c00;stroke-dasharray:6 3;stroke-width:2}"
    ".limit{stroke:#ff7f0e;stroke-dasharray:6 3;stroke-width:2}"
    ".axis-line,.tick{stroke:#666}.grid{stroke:#eee}.tick-label{font-size:11px;fill:#333}"
    ".axis-title{font-size:12px;fill:#222}"
    ".pareto{fill:none;stroke:#2a7;stroke-width:2}.fit{fill:#4e79a7;opacity:.55}"
    ".nofit{fill:#aaa;opacity:.4}.front{fill:#2a7;opacity:.9}#winner{fill:#d62728;opacity:1}.off{fill:#8c564b}"
    ".diag{stroke:#888;stroke-dasharray:4 3}.band{stroke:#bbb}.row{fill:#4e79a7;opacity:.7}.row.far{fill:#e15759}"
    ".zoom-window{fill:none;stroke:#333;stroke-width:1.5}.pass-lbl{font-size:9px;fill:#fff;pointer-events:none}"
    ".cmp-fam{fill:#4e79a7}.cmp-base{fill:#bab0ac}tr.baseline td{color:#666}"
    ".warn{background:#fff4e5;border-left:4px solid #e8a33d;padding:6px 10px}"
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
  bool ok = in->graph_plan || html_section_timeline(&sb, in->trace); /* a graph plan's is in its stages section */
  json_t *res = NULL;
  (void)shown_plan(in, &res);
  section_memory(&sb, in->estimate);
  ap_status st = ok ? html_section_space(&sb, in->search) : AP_NOMEM;
  if (!st) section_runner_ups(&sb, in->search);
  if (!st) st = html_section_validate(&sb, in->validate);
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
