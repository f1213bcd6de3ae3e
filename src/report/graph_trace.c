/* The timeline of a pipelined op-level plan as a Chrome trace-event document (report layer; graph_plan_io.h),
 * what `autopar simulate --plan P.json --model net.onnx --trace OUT.json` writes. The trace-event format as in
 * trace.c (Google, "Trace Event Format": "X" complete events with ts and dur in microseconds, "M" metadata
 * events naming processes and threads). Processes 0 .. n − 1 are the stages (thread 0 compute: F and B per
 * micro-batch; thread 1 communication: the weight-gradient sync after the last backward); process n + q, "link
 * q-(q+1)", is the link between stages q and q + 1 (thread 0 the activations it carries forward, thread 1 the
 * gradients back).
 * otherData carries the simulated and the closed-form iteration times, as the transformer's trace does. */
#include <stdio.h>

#include "core/jsonx.h"
#include "report/graph_plan_io.h"

/* A metadata event naming process pid (tid < 0) or its thread tid. */
static void meta(strbuf *sb, bool first, int pid, int tid, const char *name) {
  sb_printf(sb, "%s{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d", first ? "" : ",", tid < 0 ? "process_name" : "thread_name",
            pid);
  if (tid >= 0) sb_printf(sb, ",\"tid\":%d", tid);
  sb_printf(sb, ",\"args\":{\"name\":\"%s\"}}", name);
}

void gpr_trace_json(strbuf *sb, const graph *g, const hw_cluster *c, const gplan_result *r, int n, const gpipe_event *ev,
                    size_t n_ev, double end_s) {
  char cspec[256];
  sb_puts(sb, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"model\":");
  jx_sb_str(sb, g->name);
  sb_puts(sb, ",\"cluster\":");
  jx_sb_str(sb, gpr_cluster_spec(c, cspec, sizeof cspec));
  sb_printf(sb, ",\"schedule\":\"1f1b\",\"stages\":%d,\"micro_batches\":%.0f,\"simulated_iteration_s\":", n, r->n_micro);
  jx_sb_num(sb, end_s);
  sb_puts(sb, ",\"closed_form_iteration_s\":");
  jx_sb_num(sb, r->br.total_s);
  sb_puts(sb, "},\"traceEvents\":[");
  for (int q = 0; q < n; q++) {
    char name[64];
    snprintf(name, sizeof name, "pipeline stage %d", q);
    meta(sb, q == 0, q, -1, name);
    meta(sb, false, q, 0, "compute");
    meta(sb, false, q, 1, "communication");
    if (q + 1 < n) {
      snprintf(name, sizeof name, "link %d-%d", q, q + 1);
      meta(sb, false, n + q, -1, name);
      meta(sb, false, n + q, 0, "activations");
      meta(sb, false, n + q, 1, "gradients");
    }
  }
  /* names, and categories as the transformer trace and the report's colours have them (html.c trace_parts) */
  static const char *const names[] = {[GPIPE_F] = "F", [GPIPE_B] = "B", [GPIPE_W] = "weight-gradient sync",
                                      [GPIPE_SEND_ACT] = "send activation", [GPIPE_SEND_GRAD] = "send gradient"};
  static const char *const cats[] = {[GPIPE_F] = "F", [GPIPE_B] = "B", [GPIPE_W] = "dp", [GPIPE_SEND_ACT] = "send",
                                     [GPIPE_SEND_GRAD] = "send"};
  for (size_t i = 0; i < n_ev; i++) {
    const gpipe_event *e = &ev[i];
    int pid = e->stage, tid = 0;
    if (e->kind == GPIPE_W) tid = 1;
    if (e->kind == GPIPE_SEND_ACT) pid = n + e->stage;
    if (e->kind == GPIPE_SEND_GRAD) pid = n + e->stage - 1, tid = 1;
    sb_printf(sb, ",{\"name\":\"%s", names[e->kind]);
    if (e->micro_batch >= 0) sb_printf(sb, " mb%lld", (long long)e->micro_batch);
    sb_printf(sb, "\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d,\"args\":{\"stage\":%d",
              cats[e->kind], e->start_s * 1e6, (e->end_s - e->start_s) * 1e6, pid, tid, e->stage);
    if (e->micro_batch >= 0) sb_printf(sb, ",\"micro_batch\":%lld", (long long)e->micro_batch);
    sb_puts(sb, "}}");
  }
  sb_puts(sb, "]}\n");
}
