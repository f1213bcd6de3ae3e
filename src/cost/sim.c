/* The event-driven pipeline simulator (cost layer). Where schedule.c's closed forms assume what the schedule
 * achieves, this runs it: every pipeline stage executes its list of forward (F), backward (B) and, for the
 * zero-bubble kinds, weight-gradient (W) passes in the order the schedule gives (plan/schedule.h), each pass
 * starting once the stage is free and its input has arrived from the neighbouring chunk (one send/recv
 * later), with the plan's per-chunk times (cost_result). It handles uneven chunks and any number of
 * micro-batches. Since every order is one a stage can run at equal pass times, every order completes under any
 * times: the dependencies and the stage orders form no cycle. The timeline goes to report/trace.c, which
 * writes the Chrome trace of `autopar simulate --trace`. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost/internal.h"
#include "plan/schedule.h"

size_t sim_n_passes(const plan *p) {
  bool zb = p->schedule == PLAN_SCHED_ZB_H1 || p->schedule == PLAN_SCHED_ZB_V;
  double n = (double)plan_n_chunks(p) * (double)p->n_micro_batches * (zb ? 3 : 2);
  return n < 1e18 ? (size_t)n : (size_t)-1;
}

ap_status sim_pipeline(ap_ctx *ctx, const plan *p, const cost_result *r, size_t max_passes, sim_event **events,
                       size_t *n_events, double *pipeline_s) {
  if (events) *events = NULL;
  if (n_events) *n_events = 0;
  *pipeline_s = NAN;
  size_t n_passes = sim_n_passes(p);
  if (max_passes > 0 && n_passes > max_passes)
    return ctx_fail(ctx, AP_UNSUPPORTED,
                    "simulate: the schedule has %zu passes (pp·vpp chunks × %lld micro-batches), more than the limit "
                    "of %zu; raise it with --max-events or simulate fewer micro-batches",
                    n_passes, (long long)p->n_micro_batches, max_passes);
  plan_schedule_order o;
  ap_status st = plan_schedule_build(ctx, p, &o);
  if (st) return st;
  bool zb = p->schedule == PLAN_SCHED_ZB_H1 || p->schedule == PLAN_SCHED_ZB_V;
  int64_t pp = p->pp, m = p->n_micro_batches, n_chunks = plan_n_chunks(p);
  size_t cells = (size_t)(n_chunks * m);
  double *f_done = malloc(sizeof(double) * cells), *b_done = malloc(sizeof(double) * cells);
  double *free_at = calloc((size_t)pp, sizeof(double));
  size_t *next = malloc(sizeof(size_t) * (size_t)pp);
  sim_event *ev = events ? malloc(sizeof(sim_event) * (o.n_items ? o.n_items : 1)) : NULL;
  if (!f_done || !b_done || !free_at || !next || (events && !ev)) {
    st = ctx_fail(ctx, AP_NOMEM, "out of memory");
    goto out;
  }
  for (size_t i = 0; i < cells; i++) f_done[i] = b_done[i] = INFINITY;
  for (int64_t rk = 0; rk < pp; rk++) next[rk] = o.first[rk];
  size_t done = 0, n_ev = 0;
  double now = 0, end = 0;
  while (done < o.n_items) {
    bool progressed = false;
    double next_time = INFINITY;
    for (int64_t rk = 0; rk < pp; rk++) {
      if (next[rk] >= o.first[rk + 1]) continue;
      if (free_at[rk] > now) {
        next_time = fmin(next_time, free_at[rk]);
        continue;
      }
      const sched_item *it = &o.items[next[rk]];
      int64_t c = it->chunk, mb = it->micro_batch;
      double in = 0, dur = 0;
      if (it->pass == SCHED_F) {
        in = c == 0 ? 0 : f_done[(c - 1) * m + mb] + r->p2p_s;
        dur = r->chunk_tf_s[c];
      } else if (it->pass == SCHED_B) {
        in = f_done[c * m + mb];
        if (c + 1 < n_chunks) in = fmax(in, b_done[(c + 1) * m + mb] + r->p2p_s);
        dur = r->chunk_tb_s[c] - (zb ? r->chunk_tw_s[c] : 0);
      } else {
        in = b_done[c * m + mb];
        dur = r->chunk_tw_s[c];
      }
      if (in > now) {
        if (isfinite(in)) next_time = fmin(next_time, in);
        continue;
      }
      double t_end = now + dur;
      if (it->pass == SCHED_F) f_done[c * m + mb] = t_end;
      if (it->pass == SCHED_B) b_done[c * m + mb] = t_end;
      if (ev) ev[n_ev++] = (sim_event){(sim_kind)it->pass, (int)rk, (int)c, mb, now, t_end};
      next[rk]++;
      free_at[rk] = t_end;
      end = fmax(end, t_end);
      done++;
      progressed = true;
      next_time = fmin(next_time, t_end);
    }
    if (!progressed) {
      if (!isfinite(next_time)) {
        /* Cannot happen for an order plan_schedule_build made (see the top of the file). */
        st = ctx_fail(ctx, AP_INTERNAL, "simulate: the %s schedule stopped after %zu of %zu passes",
                      plan_schedule_name(p->schedule), done, o.n_items);
        goto out;
      }
      now = next_time;
    }
  }
  *pipeline_s = end;
  if (events) {
    *events = ev;
    ev = NULL;
  }
  if (n_events) *n_events = n_ev;
out:
  free(ev);
  free(f_done);
  free(b_done);
  free(free_at);
  free(next);
  plan_schedule_free(&o);
  return st;
}
