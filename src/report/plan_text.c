/* `plan`'s text explanation, rendered from its autopar-search document alone (report layer; plan_doc.h).
 * Reading order: the header (problem and search), one block per plan (plan_block: iteration time, tokens/s,
 * MFU, what bounds it, the time breakdown, memory per stage, what it loses on against #1), the closest plans
 * when nothing fits, and the --compare table. Every figure is read from the document (jd_get*), so the text
 * shows exactly what `plan --json` writes, rounded for reading. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cost/result_doc.h"
#include "report/plan_doc.h"

static double gib(double bytes) { return bytes / 1073741824.0; }

/* The parts where d (the seconds by which a plan is slower than its reference, per part) is positive, largest
 * first, then where it gains; eps is the smallest difference worth naming. */
static void loses_on(strbuf *sb, const json_t *delta, double eps, double sign) {
  const cost_time_part *parts = cost_time_parts();
  double d[COST_N_TIME_PARTS];
  size_t order[COST_N_TIME_PARTS];
  for (size_t i = 0; i < COST_N_TIME_PARTS; i++) {
    d[i] = sign * jd_getn(delta, parts[i].key);
    order[i] = i;
  }
  for (size_t i = 1; i < COST_N_TIME_PARTS; i++)
    for (size_t j = i; j > 0 && d[order[j]] > d[order[j - 1]]; j--) {
      size_t t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  int k = 0;
  for (size_t i = 0; i < COST_N_TIME_PARTS && k < 3; i++)
    if (d[order[i]] > eps) sb_printf(sb, "%s%s +%.3g s", k++ ? ", " : "", parts[order[i]].label, d[order[i]]);
  if (k == 0) sb_puts(sb, "no part slower");
  int g = 0;
  for (size_t i = COST_N_TIME_PARTS; i-- > 0 && g < 2;)
    if (d[order[i]] < -eps) sb_printf(sb, "%s%s %.3g s", g++ ? ", " : "; gains ", parts[order[i]].label, d[order[i]]);
}

static void breakdown(strbuf *sb, const json_t *pl) {
  const cost_time_part *parts = cost_time_parts();
  double it = jd_getn(pl, "iteration_time_s");
  const json_t *tb = jd_at(pl, "time_breakdown_s");
  sb_puts(sb, "    time      ");
  int k = 0;
  for (size_t i = 0; i < COST_N_TIME_PARTS; i++) {
    double v = jd_getn(tb, parts[i].key);
    if (v <= 1e-6 * it) continue;
    sb_printf(sb, "%s%s %.3g s (%.1f%%)", k++ ? ", " : "", parts[i].label, v, 100 * v / it);
  }
  sb_puts(sb, "\n");
}

/* The peak stage's parts, "parameters 16.4, gradients 4.1, …" (GiB), every part of cost_mem_parts that is not
 * zero, so that they add up to the stage's total. */
static void peak_parts(strbuf *sb, const json_t *stage, const char *sep_last) {
  size_t n;
  const cost_mem_part *mp = cost_mem_parts(&n);
  int k = 0;
  for (size_t i = 0; i < n; i++) {
    double v = jd_getn(stage, mp[i].key);
    if (v > 0) sb_printf(sb, "%s%s %.1f", k++ ? ", " : "", mp[i].label, gib(v));
  }
  sb_puts(sb, sep_last);
}

static void memory(strbuf *sb, const json_t *pl, double limit) {
  const json_t *m = jd_at(pl, "memory");
  const json_t *stages = jd_at(m, "stages");
  size_t n = json_array_size(stages);
  int64_t peak = jd_geti(m, "peak_stage");
  sb_printf(sb, "    memory    peak %.1f GiB on stage %lld (limit %.1f GiB)", gib(jd_getn(m, "peak_bytes")), (long long)peak,
            gib(limit));
  if (n > 1) {
    if (n <= 16) {
      sb_puts(sb, "; per stage");
      for (size_t i = 0; i < n; i++) sb_printf(sb, " %.1f", gib(jd_getn(json_array_get(stages, i), "total_bytes")));
    } else {
      double lo = INFINITY;
      for (size_t i = 0; i < n; i++) lo = fmin(lo, jd_getn(json_array_get(stages, i), "total_bytes"));
      sb_printf(sb, "; stages from %.1f to %.1f over %zu", gib(lo), gib(jd_getn(m, "peak_bytes")), n);
    }
  }
  sb_puts(sb, "\n              (peak stage: ");
  peak_parts(sb, json_array_get(stages, (size_t)peak), " GiB)\n");
}

static void plan_block(strbuf *sb, const json_t *pl, const json_t *best, double limit, bool memory_objective) {
  sb_printf(sb, "#%lld  %s   (%s)\n", (long long)jd_geti(pl, "rank"), jd_gets(pl, "summary"),
            *jd_gets(pl, "found_by") ? jd_gets(pl, "found_by") : "?");
  sb_printf(sb, "    predicted %.4g s per iteration, %.0f tokens/s, %.1f tokens/s per device, MFU %.1f%% (PaLM), "
                "%.1f TFLOP/s per device\n",
            jd_getn(pl, "iteration_time_s"), jd_getn(pl, "tokens_per_s"), jd_getn(pl, "tokens_per_s_per_device"),
            100 * jd_getn(pl, "mfu.palm"), jd_getn(pl, "tflops_per_device.palm"));
  sb_printf(sb, "    bound     %s\n", jd_gets(pl, "bound_detail"));
  if (jd_geti(pl, "rank") == 1) cost_calibration_text(sb, jd_at(pl, "calibration"), "    ", 10);
  breakdown(sb, pl);
  memory(sb, pl, limit);
  const json_t *vs = jd_at(pl, "vs_best");
  if (vs && best) {
    double slower = jd_getn(vs, "slowdown");
    if (memory_objective)
      sb_printf(sb, "    vs #1     %+.1f GiB peak memory, %+.1f%% time: ", gib(jd_getn(vs, "peak_mem_delta_bytes")),
                100 * slower);
    else
      sb_printf(sb, "    vs #1     %.1f%% slower: ", 100 * slower);
    loses_on(sb, jd_at(vs, "delta_s"), 1e-4 * jd_getn(best, "iteration_time_s"), 1);
    sb_puts(sb, "\n");
  }
}

static void closest(strbuf *sb, const json_t *arr, double limit) {
  sb_puts(sb, "\nclosest plans (each with the most memory savers that help it):\n");
  for (size_t i = 0; i < json_array_size(arr); i++) {
    const json_t *c = json_array_get(arr, i);
    const json_t *m = jd_at(c, "memory");
    int64_t peak = jd_geti(m, "peak_stage");
    sb_printf(sb, "#%lld  %s\n", (long long)jd_geti(c, "rank"), jd_gets(c, "summary"));
    sb_printf(sb, "    needs %.1f GiB on stage %lld: over the %.1f GiB limit by %.1f GiB (", gib(jd_getn(m, "peak_bytes")),
              (long long)peak, gib(limit), gib(jd_getn(c, "over_bytes")));
    peak_parts(sb, json_array_get(jd_at(m, "stages"), (size_t)peak), ")\n");
    const json_t *fixes = jd_at(c, "fixes");
    for (size_t k = 0; k < json_array_size(fixes); k++) {
      const json_t *f = json_array_get(fixes, k);
      double b = jd_getn(f, "peak_mem_bytes");
      if (jd_getb(f, "fits"))
        sb_printf(sb, "    with %s it would fit: %.1f GiB, %.4g s per iteration\n", jd_gets(f, "change"), gib(b),
                  jd_getn(f, "iteration_time_s"));
      else if (b <= limit && jd_getb(f, "host_short"))
        sb_printf(sb, "    with %s: %.1f GiB, but the offloaded states exceed the host memory\n", jd_gets(f, "change"), gib(b));
      else sb_printf(sb, "    with %s: %.1f GiB, still %.1f over\n", jd_gets(f, "change"), gib(b), gib(b - limit));
    }
    int64_t need = jd_geti(c, "devices_needed_estimate");
    if (need > 0)
      sb_printf(sb, "    more devices: about %lld would hold its model states sharded (ZeRO 3) over more data-parallel ranks\n",
                (long long)need);
    else
      sb_printf(sb, "    more devices alone do not help: its activations, logits and buffers exceed the limit; split the "
                    "model further (tp, cp, pp) or shorten the micro-batch\n");
  }
}

static void compare(strbuf *sb, const json_t *c, const json_t *w) {
  sb_puts(sb, "\ncompare: the given plan against #1\n");
  sb_printf(sb, "  given  %s\n", jd_gets(c, "summary"));
  if (!jd_getb(c, "valid")) {
    sb_printf(sb, "  the given plan cannot run here: %s\n", jd_gets(c, "error"));
    return;
  }
  if (jd_getb(c, "batch_differs")) sb_puts(sb, "  note: its global batch or sequence length differs from the search's\n");
  bool fits = jd_getb(c, "memory.fits");
  if (!w) {
    sb_printf(sb, "  %.4g s per iteration, %.1f tokens/s per device, peak %.1f GiB%s\n", jd_getn(c, "iteration_time_s"),
              jd_getn(c, "tokens_per_s_per_device"), gib(jd_getn(c, "memory.peak_bytes")), fits ? "" : " (does not fit)");
    return;
  }
  double ai = jd_getn(c, "iteration_time_s"), wi = jd_getn(w, "iteration_time_s");
  double at = jd_getn(c, "tokens_per_s_per_device"), wt = jd_getn(w, "tokens_per_s_per_device");
  double am = jd_getn(c, "mfu.palm"), wm = jd_getn(w, "mfu.palm");
  double ap = jd_getn(c, "memory.peak_bytes"), wp = jd_getn(w, "memory.peak_bytes");
  sb_printf(sb, "  %-24s %14s %14s %14s\n", "", "given", "#1", "#1 - given");
  sb_printf(sb, "  %-24s %14.4g %14.4g %+14.4g\n", "iteration (s)", ai, wi, wi - ai);
  sb_printf(sb, "  %-24s %14.1f %14.1f %+14.1f\n", "tokens/s per device", at, wt, wt - at);
  sb_printf(sb, "  %-24s %13.1f%% %13.1f%% %+13.1f%%\n", "MFU (PaLM)", 100 * am, 100 * wm, 100 * (wm - am));
  const cost_time_part *parts = cost_time_parts();
  for (size_t i = 0; i < COST_N_TIME_PARTS; i++) {
    double x = jd_getn(jd_at(c, "time_breakdown_s"), parts[i].key), y = jd_getn(jd_at(w, "time_breakdown_s"), parts[i].key);
    if (x <= 0 && y <= 0) continue;
    char label[48];
    snprintf(label, sizeof label, "%s (s)", parts[i].label);
    sb_printf(sb, "  %-24s %14.4g %14.4g %+14.4g\n", label, x, y, y - x);
  }
  sb_printf(sb, "  %-24s %14.1f %14.1f %+14.1f%s\n", "peak memory (GiB)", gib(ap), gib(wp), gib(wp - ap),
            fits ? "" : "   (the given plan does not fit)");
  if (ai > wi) {
    sb_printf(sb, "  #1 is %.1f%% faster; the given plan loses on: ", 100 * (ai / wi - 1));
    /* best_vs_given holds #1 minus the given plan; the given plan's losses are its negation. */
    loses_on(sb, jd_at(c, "best_vs_given.delta_s"), 1e-4 * wi, -1);
    sb_puts(sb, "\n");
  } else {
    sb_puts(sb, "  the given plan is at least as fast as #1 under the cost model");
    const char *why = jd_gets(c, "not_chosen_because");
    if (why && *why) sb_printf(sb, "; not chosen: %s\n", why);
    else sb_puts(sb, fits ? "\n" : ", but does not fit\n");
  }
}

char *plan_doc_text(const json_t *doc) {
  strbuf sb = {0};
  const json_t *s = jd_at(doc, "search");
  double limit = jd_getn(doc, "mem_limit_bytes");
  sb_printf(&sb, "autopar plan: %s on %s (%lld x %s, %.1f GiB each), global batch %lld x %lld tokens\n",
            jd_gets(doc, "model"), jd_gets(doc, "cluster"), (long long)jd_geti(doc, "n_devices"), jd_gets(doc, "device"),
            gib((double)jd_geti(doc, "device_memory_bytes")), (long long)jd_geti(doc, "global_batch_size"),
            (long long)jd_geti(doc, "seq_length"));
  sb_puts(&sb, "search: ");
  const json_t *names = jd_at(s, "strategies");
  for (size_t i = 0; i < json_array_size(names); i++)
    sb_printf(&sb, "%s%s", i ? ", " : "", json_string_value(json_array_get(names, i)));
  double elapsed = jd_getn(s, "elapsed_s");
  long long n_eval = (long long)jd_geti(s, "n_evaluated");
  sb_printf(&sb, "; %lld plans costed in %.2f s (%.0f per second), %lld fit; objective %s\n", n_eval, elapsed,
            elapsed > 0 ? (double)n_eval / elapsed : 0, (long long)jd_geti(s, "n_fit"), jd_gets(doc, "objective"));
  sb_printf(&sb, "stack: %s (%s)\n", jd_gets(doc, "stack"), jd_gets(doc, "stack_note"));
  if (jd_getb(s, "truncated"))
    sb_printf(&sb, "note: the time budget of %.3g s ran out; these are the best plans found so far\n",
              jd_getn(s, "time_budget_s"));
  if (jd_getb(s, "cancelled")) sb_puts(&sb, "note: the search was cancelled; these are the best plans found so far\n");
  const json_t *plans = jd_at(doc, "plans");
  const json_t *best = json_array_get(plans, 0);
  if (jd_at(doc, "closest")) {
    sb_printf(&sb, "\n%s\n", jd_gets(doc, "message"));
    closest(&sb, jd_at(doc, "closest"), limit);
  } else {
    sb_puts(&sb, "\n");
    bool mem_obj = strcmp(jd_gets(doc, "objective"), "memory") == 0;
    for (size_t i = 0; i < json_array_size(plans); i++) {
      plan_block(&sb, json_array_get(plans, i), best, limit, mem_obj);
      sb_puts(&sb, "\n");
    }
  }
  if (jd_at(doc, "compare")) compare(&sb, jd_at(doc, "compare"), best);
  return sb_take(&sb);
}
