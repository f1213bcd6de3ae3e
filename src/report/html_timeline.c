/* The simulated timeline of the HTML report (html.h, report layer; section id "timeline", docs/report.md): one
 * lane per process and thread of a Chrome trace as the simulators write them (report/trace.c for a
 * transformer's schedule, report/graph_trace.c for a general graph's pipeline, whose links are processes too),
 * labelled from the trace's metadata; a lane's background is idle time, so bubbles show as gaps. html.c draws
 * it for a transformer plan, html_graph.c inside a graph plan's stages section. */
#include <math.h>
#include <string.h>

#include "report/html.h"

enum { CHART_W = 960, LANE_H = 18, LANE_GAP = 6, LABEL_W = 150 };

/* Trace categories of the simulator (report/trace.c): compute kinds and transfers. */
static const html_part_style trace_parts[] = {
    {"F", "forward", "#4e79a7"}, {"B", "backward", "#f28e2b"}, {"W", "weight gradient", "#edc948"},
    {"R", "recompute", "#b07aa1"}, {"send", "send", "#9c755f"}, {"recv", "receive", "#76b7b2"},
    {"dp", "gradient sync", "#ff9da7"},
};

/* The name the trace's metadata gives process pid (tid < 0) or its thread tid, or NULL. */
static const char *meta_name(json_t *ev, double pid, int tid) {
  size_t i;
  json_t *e;
  json_array_foreach(ev, i, e) {
    const char *ph = html_str(e, "ph"), *what = html_str(e, "name");
    if (!ph || strcmp(ph, "M") != 0 || !what || html_num(e, "pid") != pid) continue;
    if (tid < 0 ? strcmp(what, "process_name") == 0 : strcmp(what, "thread_name") == 0 && html_num(e, "tid") == tid)
      return html_str(json_object_get(e, "args"), "name");
  }
  return NULL;
}

/* A lane's label: "stage 0 compute", "stage 0 comm", or what the trace names the process and thread (a graph
 * pipeline's links, report/graph_trace.c: "link 0-1 activations"). */
static void lane_label(strbuf *sb, json_t *ev, int pid, int tid) {
  const char *pn = meta_name(ev, pid, -1), *tn = meta_name(ev, pid, tid);
  if (!pn || !tn) {
    sb_printf(sb, "stage %d %s", pid, tid ? "comm" : "compute");
    return;
  }
  html_esc(sb, strncmp(pn, "pipeline ", 9) == 0 ? pn + 9 : pn);
  sb_puts(sb, " ");
  html_esc(sb, strcmp(tn, "communication") == 0 ? "comm" : tn);
}

/* One lane per pipeline stage and thread (compute, communication), and per further process of the trace (a
 * graph pipeline's links); a lane's background is the idle time, so bubbles show as the gaps between work. */
void html_section_timeline(strbuf *sb, json_t *trace) {
  json_t *ev = trace ? json_object_get(trace, "traceEvents") : NULL;
  if (!json_is_array(ev)) return;
  double t_end = 0;
  int n_pid = 0;
  size_t i;
  json_t *e;
  json_array_foreach(ev, i, e) {
    if (!html_str(e, "ph") || strcmp(html_str(e, "ph"), "X") != 0) continue;
    double end = html_num(e, "ts") + html_num(e, "dur");
    if (isfinite(end) && end > t_end) t_end = end;
    double pid = html_num(e, "pid");
    if (isfinite(pid) && pid + 1 > n_pid && pid < 4096) n_pid = (int)pid + 1;
  }
  if (n_pid == 0 || !(t_end > 0)) return;
  int lanes = 2 * n_pid, h = lanes * (LANE_H + LANE_GAP) + 30;
  double sx = (CHART_W - LABEL_W) / t_end;
  sb_printf(sb, "<section id=\"timeline\"><h2>Pipeline timeline (simulated)</h2>\n<svg width=\"%d\" height=\"%d\" role=\"img\">\n",
            CHART_W, h);
  for (int l = 0; l < lanes; l++) {
    int y = l * (LANE_H + LANE_GAP);
    sb_printf(sb, "<text x=\"0\" y=\"%d\" class=\"lbl\">", y + 13);
    lane_label(sb, ev, l / 2, l % 2);
    sb_puts(sb, "</text>");
    sb_printf(sb, "<rect class=\"idle\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"><title>idle (bubble)</title></rect>\n",
              LABEL_W, y, CHART_W - LABEL_W, LANE_H);
  }
  json_array_foreach(ev, i, e) {
    if (!html_str(e, "ph") || strcmp(html_str(e, "ph"), "X") != 0) continue;
    double ts = html_num(e, "ts"), dur = html_num(e, "dur"), pid = html_num(e, "pid"), tid = html_num(e, "tid");
    if (!isfinite(ts) || !isfinite(dur) || !isfinite(pid) || pid < 0 || pid >= n_pid) continue;
    int lane = 2 * (int)pid + (tid > 0 ? 1 : 0);
    const char *cat = html_str(e, "cat") ? html_str(e, "cat") : "";
    sb_printf(sb, "<rect class=\"work\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\"><title>", LABEL_W + ts * sx,
              lane * (LANE_H + LANE_GAP), fmax(dur * sx, 0.5), LANE_H, html_style_color(trace_parts, AP_COUNT(trace_parts), cat));
    html_esc(sb, html_str(e, "name"));
    sb_puts(sb, ": ");
    html_put_time(sb, dur * 1e-6);
    sb_puts(sb, "</title></rect>\n");
  }
  sb_printf(sb, "<text x=\"%d\" y=\"%d\" class=\"lbl\">0</text><text x=\"%d\" y=\"%d\" class=\"lbl\" text-anchor=\"end\">", LABEL_W,
            h - 8, CHART_W, h - 8);
  html_put_time(sb, t_end * 1e-6);
  sb_puts(sb, "</text></svg>\n");
  html_legend(sb, trace_parts, AP_COUNT(trace_parts));
  sb_puts(sb, "</section>\n");
}
