/* The simulated timeline of the HTML report (html.h, report layer; section id "timeline", docs/report.md): one
 * lane per process and thread of a Chrome trace as the simulators write them (report/trace.c for a
 * transformer's schedule, report/graph_trace.c for a general graph's pipeline, whose links are processes too),
 * labelled from the trace's metadata, on a time axis from 0 with ticks; a lane's pink background is idle time,
 * so bubbles show as gaps. html.c draws it for a transformer plan, html_graph.c inside a graph plan's stages
 * section.
 *
 * Readable at any number of micro-batches: when every lane's passes fit the width at EXACT_PASS_PX or more each,
 * the iteration is drawn pass by pass (class "work"), each wide enough labelled with its micro-batch. Otherwise
 * (a real plan has hundreds of micro-batches: one pass would be a pixel or less, a barcode) the whole iteration
 * is drawn aggregated, each BIN_PX-wide column of a lane filled in proportion to the time it spends on each kind
 * of work (one <path class="agg"> per lane and kind, so the element count does not grow with the passes), and
 * beside it the first steady-state window (the warm-up of stage 0 and a few cycles after it) pass by pass with
 * its labels, the window outlined on the whole. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/html.h"

enum { CHART_W = 960, LANE_H = 18, LANE_GAP = 6, LABEL_W = 150, RIGHT = 20, AXIS_H = 44, BIN_PX = 3, EXACT_PASS_PX = 20,
       LABEL_PX = 12, WINDOW_PASS_PX = 24, MAX_PIDS = 512 };

/* Trace categories of the simulators (report/trace.c, report/graph_trace.c): compute kinds and transfers. */
static const html_part_style trace_parts[] = {
    {"F", "forward", "#4e79a7"},           {"B", "backward", "#f28e2b"}, {"W", "weight gradient", "#edc948"},
    {"R", "recompute", "#b07aa1"},         {"send", "send", "#9c755f"},  {"recv", "receive", "#76b7b2"},
    {"dp", "gradient sync", "#ff9da7"},    {"optimizer", "optimizer step", "#59a14f"},
    {"", "other", "#999999"},
};
enum { N_CATS = sizeof trace_parts / sizeof trace_parts[0] };
static const char C_IDLE[] = "#fbe3e3", C_WINDOW[] = "#333333";

typedef struct {
  double t0, t1; /* seconds */
  int lane, cat;
  double mb, chunk; /* args.micro_batch and args.chunk, NAN when absent */
  const char *name;
} tl_event;

static int cat_of(const char *c) {
  for (int k = 0; k < N_CATS - 1; k++)
    if (c && strcmp(trace_parts[k].key, c) == 0) return k;
  return N_CATS - 1;
}

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

static int by_start(const void *a, const void *b) {
  const tl_event *x = a, *y = b;
  return x->lane != y->lane ? x->lane - y->lane : (x->t0 > y->t0) - (x->t0 < y->t0);
}

/* The trace's complete events, by lane then start; NULL when none (*n 0) or out of memory (*oom). */
static tl_event *read_events(json_t *ev, size_t *n, int *n_pid, double *t_end, bool *oom) {
  size_t i, cap = json_array_size(ev);
  json_t *e;
  *n = 0, *n_pid = 0, *t_end = 0, *oom = false;
  tl_event *out = cap ? malloc(cap * sizeof *out) : NULL;
  if (cap && !out) {
    *oom = true;
    return NULL;
  }
  json_array_foreach(ev, i, e) {
    if (!html_str(e, "ph") || strcmp(html_str(e, "ph"), "X") != 0) continue;
    double ts = html_num(e, "ts"), dur = html_num(e, "dur"), pid = html_num(e, "pid"), tid = html_num(e, "tid");
    if (!isfinite(ts) || !isfinite(dur) || dur < 0 || !isfinite(pid) || pid < 0 || pid >= MAX_PIDS) continue;
    out[(*n)++] = (tl_event){ts * 1e-6, (ts + dur) * 1e-6, 2 * (int)pid + (tid > 0 ? 1 : 0), cat_of(html_str(e, "cat")),
                             html_num(json_object_get(e, "args"), "micro_batch"), html_num(json_object_get(e, "args"), "chunk"),
                             html_str(e, "name")};
    if ((int)pid + 1 > *n_pid) *n_pid = (int)pid + 1;
    if ((ts + dur) * 1e-6 > *t_end) *t_end = (ts + dur) * 1e-6;
  }
  if (*n == 0) {
    free(out);
    return NULL;
  }
  qsort(out, *n, sizeof *out, by_start);
  return out;
}

/* The most events any lane has that start before t. */
static size_t max_per_lane(const tl_event *e, size_t n, double t) {
  size_t best = 0, run = 0;
  for (size_t i = 0; i < n; i++) {
    if (i && e[i].lane != e[i - 1].lane) run = 0;
    if (e[i].t0 < t) run++;
    if (run > best) best = run;
  }
  return best;
}

/* The lanes' labels and idle backgrounds, rows from y0. */
static void lanes(strbuf *sb, json_t *ev, int n_lanes, int y0) {
  for (int l = 0; l < n_lanes; l++) {
    int y = y0 + l * (LANE_H + LANE_GAP);
    sb_printf(sb, "<text x=\"0\" y=\"%d\" class=\"lbl\">", y + 13);
    lane_label(sb, ev, l / 2, l % 2);
    sb_printf(sb, "</text><rect class=\"idle\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"><title>idle (bubble)</title></rect>\n",
              LABEL_W, y, CHART_W - LABEL_W - RIGHT, LANE_H);
  }
}

/* Pass by pass, the events that overlap [0, xs->v1]; those at least LABEL_PX wide carry their micro-batch, and
 * with virtual stages (a chunk index beyond the stages, n_pid) "micro-batch:virtual stage". */
static void draw_passes(strbuf *sb, const tl_event *e, size_t n, const html_scale *xs, int y0, int n_pid, bool virt) {
  for (size_t i = 0; i < n; i++) {
    if (e[i].t0 >= xs->v1) continue;
    double x0 = html_px(xs, e[i].t0), x1 = html_px(xs, fmin(e[i].t1, xs->v1)), w = fmax(x1 - x0, 0.5);
    int y = y0 + e[i].lane * (LANE_H + LANE_GAP);
    sb_printf(sb, "<rect class=\"work\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\"><title>", x0, y, w, LANE_H,
              trace_parts[e[i].cat].color);
    html_esc(sb, e[i].name);
    sb_puts(sb, ": ");
    html_put_time(sb, e[i].t1 - e[i].t0);
    sb_puts(sb, " from ");
    html_put_time(sb, e[i].t0);
    sb_puts(sb, "</title></rect>");
    if (w >= (virt ? 2 * LABEL_PX : LABEL_PX) && isfinite(e[i].mb)) {
      sb_printf(sb, "<text class=\"pass-lbl\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.0f", x0 + w / 2, y + 12, e[i].mb);
      if (virt && isfinite(e[i].chunk)) sb_printf(sb, ":%.0f", floor(e[i].chunk / n_pid));
      sb_puts(sb, "</text>");
    }
    sb_puts(sb, "\n");
  }
}

/* Aggregated: per lane and kind of work one path of BIN_PX-wide columns, each as high as the share of its
 * column's time the lane spends on that kind (kinds stacked in table order). False when out of memory. */
static bool draw_aggregate(strbuf *sb, const tl_event *e, size_t n, int n_lanes, const html_scale *xs, int y0) {
  int nb = (int)ceil((xs->p1 - xs->p0) / BIN_PX);
  double bin_s = (xs->v1 - xs->v0) / ((xs->p1 - xs->p0) / BIN_PX);
  double *busy = calloc((size_t)nb * N_CATS, sizeof *busy);
  if (!busy) return false;
  size_t i = 0;
  for (int l = 0; l < n_lanes; l++) {
    memset(busy, 0, (size_t)nb * N_CATS * sizeof *busy);
    bool any = false;
    for (; i < n && e[i].lane == l; i++) {
      for (int b = (int)(e[i].t0 / bin_s); b < nb && b * bin_s < e[i].t1; b++) {
        double a = fmax(e[i].t0, b * bin_s), z = fmin(e[i].t1, (b + 1) * bin_s);
        if (z > a) busy[(size_t)b * N_CATS + (size_t)e[i].cat] += (z - a) / bin_s, any = true;
      }
    }
    if (!any) continue;
    int y = y0 + l * (LANE_H + LANE_GAP);
    for (int c = 0; c < N_CATS; c++) {
      double total = 0;
      strbuf d = {0};
      for (int b = 0; b < nb; b++) {
        double below = 0, f = busy[(size_t)b * N_CATS + (size_t)c];
        for (int k = 0; k < c; k++) below += busy[(size_t)b * N_CATS + (size_t)k];
        f = fmin(f, fmax(0, 1 - below)); /* overlapping transfers cannot fill a column past its top */
        if (!(f * LANE_H >= 0.25)) continue;
        total += f;
        sb_printf(&d, "M%.1f,%.2fh%dv%.2fh-%dz", xs->p0 + b * BIN_PX, y + LANE_H - fmin(below, 1) * LANE_H - f * LANE_H, BIN_PX,
                  f * LANE_H, BIN_PX);
      }
      if (d.oom) {
        sb_free(&d);
        free(busy);
        return false;
      }
      if (d.buf) {
        sb_printf(sb, "<path class=\"agg\" fill=\"%s\" d=\"%s\"><title>%s: %.1f%% of the lane's time</title></path>\n",
                  trace_parts[c].color, d.buf, trace_parts[c].label, 100 * total / nb);
      }
      sb_free(&d);
    }
  }
  free(busy);
  return true;
}

/* One view: an <svg> of the lanes over [0, t1] with its time axis; aggregated or pass by pass. */
static bool view(strbuf *sb, json_t *ev, const tl_event *e, size_t n, int n_lanes, double t1, bool agg, const char *id,
                 double window_s, bool virt) {
  html_scale xs = html_scale_zero(HTML_Q_TIME, t1, LABEL_W, CHART_W - RIGHT);
  int plot_h = n_lanes * (LANE_H + LANE_GAP);
  sb_printf(sb, "<svg id=\"%s\" width=\"%d\" height=\"%d\" role=\"img\">\n", id, CHART_W, plot_h + AXIS_H);
  lanes(sb, ev, n_lanes, 0);
  bool ok = true;
  if (agg) ok = draw_aggregate(sb, e, n, n_lanes, &xs, 0);
  else draw_passes(sb, e, n, &xs, 0, n_lanes / 2, virt);
  if (window_s > 0)
    sb_printf(sb, "<rect id=\"zoom-window\" class=\"zoom-window\" x=\"%d\" y=\"0\" width=\"%.1f\" height=\"%d\"><title>the window drawn pass by pass below</title></rect>\n",
              LABEL_W, html_px(&xs, window_s) - LABEL_W, plot_h - LANE_GAP);
  html_axis(sb, &xs, false, plot_h, NAN, "time from the start of the iteration");
  sb_puts(sb, "</svg>\n");
  return ok;
}

/* The first steady-state window: stage 0's warm-up (its passes before its first non-forward one) and about as
 * many passes after it, at most what the width draws MIN_PASS_PX per pass. */
static double steady_window(const tl_event *e, size_t n, double width_px) {
  size_t n0 = 0, warm = 0;
  bool in_warm = true;
  for (size_t i = 0; i < n && e[i].lane == 0; i++, n0++) {
    if (e[i].cat != 0) in_warm = false;
    if (in_warm) warm++;
  }
  if (n0 == 0) return 0;
  size_t want = warm + 12, cap = (size_t)(width_px / WINDOW_PASS_PX);
  if (want > cap) want = cap;
  if (want < 1) want = 1;
  if (want > n0) want = n0;
  double t = e[want - 1].t1;
  while (want > 1 && max_per_lane(e, n, t) * WINDOW_PASS_PX > width_px) t = e[--want - 1].t1;
  return t;
}

bool html_section_timeline(strbuf *sb, json_t *trace) {
  json_t *ev = trace ? json_object_get(trace, "traceEvents") : NULL;
  if (!json_is_array(ev)) return true;
  size_t n;
  int n_pid;
  double t_end;
  bool oom;
  tl_event *e = read_events(ev, &n, &n_pid, &t_end, &oom);
  if (!e) return !oom;
  if (!(t_end > 0)) {
    free(e);
    return true;
  }
  int n_lanes = 2 * n_pid;
  double width = CHART_W - LABEL_W - RIGHT;
  size_t most = max_per_lane(e, n, INFINITY);
  bool agg = (double)most * EXACT_PASS_PX > width;
  double window = agg ? steady_window(e, n, width) : 0;
  bool used[N_CATS] = {false}, virt = false;
  for (size_t i = 0; i < n; i++) used[e[i].cat] = true, virt = virt || e[i].chunk >= n_pid;
  sb_puts(sb, "<section id=\"timeline\"><h2>Pipeline timeline (simulated)</h2>\n");
  if (agg)
    sb_printf(sb, "<p>The whole iteration, aggregated: %zu passes on the busiest lane are too many to draw one by one, so each "
                  "%d-pixel column of a lane is filled in proportion to the time it spends on each kind of work; pink is "
                  "idle time. Below it, the outlined window (the warm-up of stage 0 into the steady state) pass by pass, "
                  "each labelled with its micro-batch%s.</p>\n",
              most, BIN_PX, virt ? " and virtual stage (micro-batch:virtual stage)" : "");
  bool ok = view(sb, ev, e, n, n_lanes, t_end, agg, "timeline-whole", window, virt);
  if (ok && agg && window > 0) {
    sb_puts(sb, "<h3>The first ");
    html_put_time(sb, window);
    sb_puts(sb, ", pass by pass</h3>\n");
    ok = view(sb, ev, e, n, n_lanes, window, false, "timeline-zoom", 0, virt);
  }
  html_legend_open(sb);
  for (int k = 0; k < N_CATS; k++)
    if (used[k]) html_legend_item(sb, trace_parts[k].color, trace_parts[k].label, HTML_SW_BOX);
  html_legend_item(sb, C_IDLE, "idle (bubble)", HTML_SW_BOX);
  if (agg && window > 0) html_legend_item(sb, C_WINDOW, "window drawn pass by pass", HTML_SW_OUTLINE);
  html_legend_close(sb);
  sb_puts(sb, "</section>\n");
  free(e);
  return ok;
}
