/* The graph-plan sections of the HTML report (html.h, report layer): a general graph's op-level plan, the
 * autopar-plan/2 document that `autopar plan --json` prints for an ONNX model (docs/graph-plan.md), drawn as
 * a plan table (mesh and link levels per axis, micro-batches, iteration time, memory, MFU on the graph's
 * FLOPs), the pipeline stages as an SVG chart with a table (and, given the trace of `simulate --trace` of the
 * plan, its simulated timeline), the plan's peak memory against the limit, and the ops that move the most
 * bytes. Only the document's numbers (and the trace's) are drawn; what they do not carry (a schedule without a
 * trace, memory per stage, time per op) is named on the page as absent, never filled in. Section ids
 * (docs/report.md): graph-plan-table, graph-stages, graph-memory, graph-ops. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/html.h"

enum { G_W = 960, G_LABEL_W = 170, G_LANE_H = 22, G_TOP_OPS = 15 };

/* "[8, 2]" or "nvlink, ib" from a JSON array of numbers or strings. */
static void put_list(strbuf *sb, json_t *a, const char *sep) {
  size_t i;
  json_t *v;
  json_array_foreach(a, i, v) {
    if (i) sb_puts(sb, sep);
    if (json_is_string(v)) html_esc(sb, json_string_value(v));
    else if (json_is_number(v)) sb_printf(sb, "%.0f", json_number_value(v));
    else if (json_is_array(v)) {
      sb_puts(sb, "[");
      put_list(sb, v, ",");
      sb_puts(sb, "]");
    }
  }
}

static void kv_open(strbuf *sb, const char *k) { sb_printf(sb, "<tr><th>%s</th><td>", k); }

static void section_table(strbuf *sb, json_t *doc) {
  sb_puts(sb, "<section id=\"graph-plan-table\"><h2>Plan (general graph, op by op)</h2><table class=\"kv\">\n");
  kv_open(sb, "model");
  html_esc(sb, html_str(doc, "model"));
  sb_puts(sb, " on ");
  html_esc(sb, html_str(doc, "cluster"));
  sb_puts(sb, "</td></tr>\n");
  json_t *mesh = json_object_get(doc, "mesh"), *shape = json_object_get(mesh, "shape"), *lv = json_object_get(mesh, "levels");
  kv_open(sb, "mesh");
  size_t i;
  json_t *d;
  json_array_foreach(shape, i, d) {
    if (i) sb_puts(sb, " x ");
    sb_printf(sb, "%.0f", json_number_value(d));
    const char *l = json_string_value(json_array_get(lv, i));
    if (l) {
      sb_printf(sb, " (axis %zu: ", i);
      html_esc(sb, l);
      sb_puts(sb, ")");
    }
  }
  sb_puts(sb, "</td></tr>\n");
  kv_open(sb, "batch");
  sb_printf(sb, "global %.0f, %.0f micro-batch(es) of %.0f, sequence %.0f</td></tr>\n", html_num(doc, "global_batch_size"),
            html_num(doc, "micro_batches"), html_num(doc, "micro_batch_size"), html_num(doc, "seq"));
  json_t *t = json_object_get(doc, "time");
  kv_open(sb, "iteration time");
  html_put_time(sb, html_num(t, "iteration_s"));
  sb_puts(sb, " (compute ");
  html_put_time(sb, html_num(t, "compute_s"));
  sb_puts(sb, ", op collectives ");
  html_put_time(sb, html_num(t, "op_comm_s"));
  sb_puts(sb, ", resharding ");
  html_put_time(sb, html_num(t, "reshard_s"));
  sb_puts(sb, ")</td></tr>\n");
  json_t *mem = json_object_get(doc, "memory");
  kv_open(sb, "memory");
  html_put_bytes(sb, html_num(mem, "peak_bytes"));
  sb_puts(sb, " peak of ");
  html_put_bytes(sb, html_num(mem, "limit_bytes"));
  sb_puts(sb, " limit</td></tr>\n");
  json_t *mfu = json_object_get(doc, "mfu");
  kv_open(sb, "MFU");
  sb_printf(sb, "%.1f%% on the graph's %.4g FLOP per iteration (convention: ", 100 * html_num(mfu, "value"),
            html_num(mfu, "flop_per_iteration"));
  html_esc(sb, html_str(mfu, "convention") ? html_str(mfu, "convention") : "?");
  sb_puts(sb, ")</td></tr>\n");
  json_t *s = json_object_get(doc, "search");
  if (json_is_object(s)) {
    kv_open(sb, "search");
    html_esc(sb, html_str(s, "strategy"));
    sb_puts(sb, ", ");
    html_esc(sb, html_str(s, "status"));
    sb_puts(sb, ", lower bound ");
    html_put_time(sb, html_num(s, "lower_bound_s"));
    sb_puts(sb, "</td></tr>\n");
  }
  sb_puts(sb, "</table>\n");
  json_t *ex = json_object_get(doc, "explain");
  if (json_is_array(ex) && json_array_size(ex)) {
    sb_puts(sb, "<ul class=\"explain\">");
    json_array_foreach(ex, i, d) {
      sb_puts(sb, "<li>");
      html_esc(sb, json_string_value(d));
      sb_puts(sb, "</li>");
    }
    sb_puts(sb, "</ul>\n");
  }
  sb_puts(sb, "</section>\n");
}

/* One lane per stage: its time per micro-batch and its send/recv, on one scale; then, when the plan was
 * simulated, the timeline of its micro-batches (the trace of `simulate --trace`). The document itself states no
 * schedule, so without a trace no timeline is drawn, and the page says so. */
static bool section_stages(strbuf *sb, json_t *doc, json_t *trace) {
  json_t *st = json_object_get(doc, "stages");
  if (!json_is_array(st) || !json_array_size(st)) {
    sb_puts(sb, "<section id=\"graph-stages\"><h2>Pipeline stages</h2><p>The document lists no stages.</p></section>\n");
    return true;
  }
  double top = 0;
  size_t i, n = json_array_size(st);
  json_t *s;
  json_array_foreach(st, i, s) {
    double x = html_num(s, "time_per_micro_batch_s"), y = html_num(s, "send_recv_s");
    double sum = (isfinite(x) ? x : 0) + (isfinite(y) && y > 0 ? y : 0);
    if (sum > top) top = sum;
  }
  sb_puts(sb, "<section id=\"graph-stages\"><h2>Pipeline stages</h2>\n");
  if (top > 0) {
    html_scale xs = html_scale_zero(HTML_Q_TIME, top, G_LABEL_W, G_W - 20);
    int h = (int)n * (G_LANE_H + 6) + 6;
    sb_printf(sb, "<svg id=\"graph-stages-chart\" width=\"%d\" height=\"%d\" role=\"img\">\n", G_W, h + 44);
    bool any_comm = false;
    json_array_foreach(st, i, s) {
      double y0 = 3 + (double)i * (G_LANE_H + 6), x = html_num(s, "time_per_micro_batch_s"), c = html_num(s, "send_recv_s");
      sb_printf(sb, "<text x=\"0\" y=\"%.1f\" class=\"lbl\">stage %zu</text>", y0 + 15, i);
      double w = isfinite(x) && x > 0 ? html_px(&xs, x) - G_LABEL_W : 0;
      sb_printf(sb, "<rect class=\"part\" x=\"%d\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"#4e79a7\"><title>stage %zu: ",
                G_LABEL_W, y0, w, G_LANE_H, i);
      html_put_time(sb, x);
      sb_puts(sb, " per micro-batch</title></rect>");
      if (isfinite(c) && c > 0) {
        any_comm = true;
        sb_printf(sb, "<rect class=\"part\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"#9c755f\"><title>stage %zu send/recv: ",
                  G_LABEL_W + w, y0, html_px(&xs, c) - G_LABEL_W, G_LANE_H, i);
        html_put_time(sb, c);
        sb_puts(sb, "</title></rect>");
      }
      sb_puts(sb, "\n");
    }
    html_axis(sb, &xs, false, h, NAN, "time per micro-batch");
    sb_puts(sb, "</svg>\n");
    html_legend_open(sb);
    html_legend_item(sb, "#4e79a7", "time per micro-batch", HTML_SW_BOX);
    if (any_comm) html_legend_item(sb, "#9c755f", "send/recv", HTML_SW_BOX);
    html_legend_close(sb);
  }
  if (trace)
    sb_puts(sb, "<p>Each bar is one stage's time per micro-batch as the plan prices it; the simulated timeline of "
                "the micro-batches (1F1B, each stage's passes and the sends on the links between stages) follows the "
                "table.</p>\n");
  else
    sb_puts(sb, "<p>Each bar is one stage's time per micro-batch; the plan document states no schedule, so no "
                "timeline of the micro-batches is drawn (<code>autopar simulate --trace</code> of the plan draws one).</p>\n");
  sb_puts(sb, "<table><tr><th>stage</th><th>first op</th><th>last op</th>"
              "<th>submesh</th><th>mesh (levels)</th><th>time / micro-batch</th><th>send/recv</th><th>in flight</th></tr>\n");
  json_array_foreach(st, i, s) {
    sb_printf(sb, "<tr><td>%zu</td><td>", i);
    html_esc(sb, html_str(s, "first_op"));
    sb_puts(sb, "</td><td>");
    html_esc(sb, html_str(s, "last_op"));
    sb_puts(sb, "</td><td>");
    put_list(sb, json_object_get(s, "submesh"), " x ");
    sb_puts(sb, "</td><td>");
    put_list(sb, json_object_get(s, "mesh"), " x ");
    sb_puts(sb, " (");
    put_list(sb, json_object_get(s, "levels"), ", ");
    sb_puts(sb, ")</td><td>");
    html_put_time(sb, html_num(s, "time_per_micro_batch_s"));
    sb_puts(sb, "</td><td>");
    html_put_time(sb, html_num(s, "send_recv_s"));
    sb_printf(sb, "</td><td>%.0f</td></tr>\n", html_num(s, "in_flight"));
  }
  sb_puts(sb, "</table></section>\n");
  return html_section_timeline(sb, trace);
}

/* The plan's peak against the limit: the document carries one peak for the plan (the largest stage's), not one
 * per stage. */
static void section_memory(strbuf *sb, json_t *doc) {
  json_t *mem = json_object_get(doc, "memory");
  double peak = html_num(mem, "peak_bytes"), lim = html_num(mem, "limit_bytes");
  sb_puts(sb, "<section id=\"graph-memory\"><h2>Memory per device</h2>\n");
  double top = fmax(isfinite(peak) ? peak : 0, isfinite(lim) ? lim : 0);
  if (top > 0) {
    html_scale xs = html_scale_zero(HTML_Q_BYTES, top * 1.02, G_LABEL_W, G_W - 20);
    sb_printf(sb, "<svg id=\"graph-memory-chart\" width=\"%d\" height=\"84\" role=\"img\"><text x=\"0\" y=\"22\" class=\"lbl\">plan peak</text>", G_W);
    if (isfinite(peak) && peak > 0) {
      sb_printf(sb, "<rect class=\"part\" x=\"%d\" y=\"6\" width=\"%.1f\" height=\"24\" fill=\"#59a14f\"><title>peak: ", G_LABEL_W,
                html_px(&xs, peak) - G_LABEL_W);
      html_put_bytes(sb, peak);
      sb_puts(sb, "</title></rect>");
    }
    if (isfinite(lim) && lim > 0) {
      double x = html_px(&xs, lim);
      sb_printf(sb, "<line id=\"graph-capacity\" x1=\"%.1f\" x2=\"%.1f\" y1=\"0\" y2=\"36\" class=\"cap\"><title>limit: ", x, x);
      html_put_bytes(sb, lim);
      sb_puts(sb, "</title></line>");
    }
    html_axis(sb, &xs, false, 36, NAN, "memory per device");
    sb_puts(sb, "</svg>\n");
    html_legend_open(sb);
    if (isfinite(peak) && peak > 0) html_legend_item(sb, "#59a14f", "plan peak", HTML_SW_BOX);
    if (isfinite(lim) && lim > 0) html_legend_item(sb, "#cc0000", "limit", HTML_SW_DASH);
    html_legend_close(sb);
  }
  sb_puts(sb, "<p>The plan document gives one peak per device for the whole plan, with several stages the largest "
              "stage's with its in-flight micro-batches (docs/graph-plan.md); the dashed line is the limit. It carries "
              "no memory per stage, so no per-stage bars are drawn.</p></section>\n");
}

static double comm_bytes(json_t *op) {
  double b = 0;
  size_t i;
  json_t *c;
  json_array_foreach(json_object_get(op, "comm"), i, c) {
    double x = html_num(c, "bytes");
    if (isfinite(x) && x > 0) b += x;
  }
  return b;
}

typedef struct {
  json_t *op;
  double bytes;
} ranked_op;

static int by_bytes_desc(const void *a, const void *b) {
  double x = ((const ranked_op *)a)->bytes, y = ((const ranked_op *)b)->bytes;
  return (x < y) - (x > y);
}

/* The ops that move the most bytes in collectives; the document carries no time per op, so bytes rank them.
 * Returns false when out of memory. */
static bool section_ops(strbuf *sb, json_t *doc) {
  json_t *ops = json_object_get(doc, "ops");
  size_t n = json_is_array(ops) ? json_array_size(ops) : 0;
  sb_puts(sb, "<section id=\"graph-ops\"><h2>Heaviest ops by collective bytes</h2>\n");
  if (!n) {
    sb_puts(sb, "<p>The document lists no ops.</p></section>\n");
    return true;
  }
  ranked_op *r = malloc(n * sizeof *r);
  if (!r) return false;
  for (size_t i = 0; i < n; i++) r[i] = (ranked_op){json_array_get(ops, i), comm_bytes(json_array_get(ops, i))};
  qsort(r, n, sizeof *r, by_bytes_desc);
  size_t k = n < G_TOP_OPS ? n : G_TOP_OPS;
  sb_printf(sb, "<p>The %zu of %zu ops that move the most bytes in their collectives, per device per iteration as the "
                "plan states them (its own collectives and the resharding of its inputs); the document carries no time per op, so they are ranked by bytes.</p>\n"
                "<table><tr><th>op</th><th>type</th><th>output spec</th><th>weight spec</th><th>collectives</th></tr>\n", k, n);
  for (size_t i = 0; i < k; i++) {
    json_t *op = r[i].op;
    sb_puts(sb, "<tr><td>");
    html_esc(sb, html_str(op, "name"));
    sb_puts(sb, "</td><td>");
    html_esc(sb, html_str(op, "op_type"));
    sb_puts(sb, "</td><td>");
    put_list(sb, json_object_get(op, "output_spec"), ",");
    sb_puts(sb, "</td><td>");
    json_t *w = json_object_get(op, "weight_spec");
    if (json_is_array(w)) put_list(sb, w, ",");
    else sb_puts(sb, "–");
    sb_puts(sb, "</td><td>");
    size_t j;
    json_t *c;
    json_array_foreach(json_object_get(op, "comm"), j, c) {
      if (j) sb_puts(sb, "; ");
      html_esc(sb, html_str(c, "kind"));
      sb_printf(sb, " axis %.0f, %.4g bytes", html_num(c, "axis"), html_num(c, "bytes"));
    }
    if (!json_array_size(json_object_get(op, "comm"))) sb_puts(sb, "none");
    sb_puts(sb, "</td></tr>\n");
  }
  sb_puts(sb, "</table></section>\n");
  free(r);
  return true;
}

bool html_section_graph_plan(strbuf *sb, json_t *doc, json_t *trace) {
  if (!doc) return true;
  section_table(sb, doc);
  if (!section_stages(sb, doc, trace)) return false;
  section_memory(sb, doc);
  return section_ops(sb, doc);
}
