/* The event timeline of a pipelined op-level plan (search layer; graph_pipe.h describes the model). The loop
 * is cost/sim.c's: at each instant every stage whose next pass has its input and whose compute stream is free
 * starts it; the sends it causes are placed on their link's stream when the pass is placed (a link direction
 * carries one sender's transfers, in the order of that sender's passes, so FIFO order is placement order), and
 * a blocking send keeps the sender's stream until it has arrived. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/schedule.h"
#include "search/graph/graph_pipe.h"
#include "search/graph/graph_sim.h"

/* One stage's durations from the simulation of nodes lo..hi of gp under choice (graph_pipe.h). */
static ap_status stage_times(ap_ctx *ctx, arena *a, const graph_problem *gp, int lo, int hi, const int32_t *choice,
                             double n_micro, double send_s, bool last, gpipe_stage *out, int64_t *n_ev) {
  gsim s;
  ap_status st = gsim_init_range(ctx, a, gp, lo, hi, &s);
  if (st) return st;
  double whole_s = gsim_full(&s, choice), fwd_s = s.fwd_end_s;
  *n_ev += s.n_events;
  s.skip_wgrad = true;
  double no_sync_s = gsim_full(&s, choice);
  *out = (gpipe_stage){fwd_s / n_micro, (no_sync_s - fwd_s) / n_micro, whole_s - no_sync_s, last ? 0 : send_s / 2,
                       last ? 0 : send_s / 2};
  return AP_OK;
}

ap_status gpipe_stage_times(ap_ctx *ctx, const gplan_result *r, gpipe_stage *out, int *n_stages, int64_t *n_sim_events) {
  *n_sim_events = 0;
  double m = r->n_micro > 0 ? r->n_micro : 1;
  if (r->n_stages < 2) {
    *n_stages = 1;
    return stage_times(ctx, r->a, &r->gp, 0, r->gp.n_nodes - 1, r->choice, m, 0, true, out, n_sim_events);
  }
  *n_stages = r->n_stages;
  for (int q = 0; q < r->n_stages; q++) {
    const gstage *y = &r->stages[q];
    ap_status st = stage_times(ctx, r->a, y->gp, y->first_node, y->last_node, y->choice, m, y->send_s,
                               q + 1 == r->n_stages, &out[q], n_sim_events);
    if (st) return st;
  }
  return AP_OK;
}

double gpipe_stage_per_micro_s(const gpipe_stage *s, double n_micro) {
  return s->fwd_s + s->bwd_s + s->wsync_s / (n_micro > 0 ? n_micro : 1) + s->act_send_s + s->grad_send_s;
}

/* A transfer of dur_s that may start at ready_s on a FIFO stream free at *free_s: when it arrives. */
static double on_link(double *free_s, double ready_s, double dur_s) {
  if (dur_s <= 0) return ready_s;
  *free_s = fmax(*free_s, ready_s) + dur_s;
  return *free_s;
}

typedef struct {
  gpipe_event *ev;
  size_t n;
} ev_list;

static void put(ev_list *l, gpipe_kind k, int stage, int64_t mb, double start, double end) {
  if (l->ev) l->ev[l->n] = (gpipe_event){k, stage, mb, start, end};
  l->n++;
}

ap_status gpipe_simulate(ap_ctx *ctx, const gpipe_stage *st, int n, int64_t m, plan_schedule kind, gpipe_event **events,
                         size_t *n_events, double *end_s) {
  if (events) *events = NULL;
  if (n_events) *n_events = 0;
  *end_s = NAN;
  if (kind != PLAN_SCHED_1F1B && kind != PLAN_SCHED_GPIPE)
    return ctx_fail(ctx, AP_INVALID, "pipeline timeline: schedule %s: a graph pipeline runs 1f1b or gpipe",
                    plan_schedule_name(kind));
  if (n < 1 || m < 1) return ctx_fail(ctx, AP_INVALID, "pipeline timeline: needs stages and micro-batches >= 1");
  plan p;
  plan_defaults(&p);
  p.pp = n, p.vpp = 1, p.n_micro_batches = m, p.schedule = kind;
  bool blocking = !plan_schedule_async_p2p(&p); /* the sender waits for its send (both kinds here) */
  plan_schedule_order o;
  ap_status rc = plan_schedule_build(ctx, &p, &o);
  if (rc) return rc;
  size_t cells = (size_t)n * (size_t)m;
  /* f_done: F ended; act_at: its activation is at the next stage; b_done, grad_at: the same backward */
  double *f_done = malloc(sizeof(double) * cells), *act_at = malloc(sizeof(double) * cells);
  double *b_done = malloc(sizeof(double) * cells), *grad_at = malloc(sizeof(double) * cells);
  double *free_at = calloc((size_t)n, sizeof(double)), *link_fwd = calloc((size_t)n, sizeof(double)),
         *link_bwd = calloc((size_t)n, sizeof(double));
  size_t *next = malloc(sizeof(size_t) * (size_t)n);
  /* every pass, a send after each but the outermost, and one W per stage */
  size_t cap = o.n_items * 2 + (size_t)n;
  ev_list l = {events ? malloc(sizeof(gpipe_event) * cap) : NULL, 0};
  if (!f_done || !act_at || !b_done || !grad_at || !free_at || !link_fwd || !link_bwd || !next || (events && !l.ev)) {
    rc = ctx_fail(ctx, AP_NOMEM, "out of memory");
    goto out;
  }
  for (size_t i = 0; i < cells; i++) f_done[i] = act_at[i] = b_done[i] = grad_at[i] = INFINITY;
  for (int q = 0; q < n; q++) next[q] = o.first[q];
  size_t done = 0;
  double now = 0, end = 0;
  while (done < o.n_items) {
    bool progressed = false;
    double next_time = INFINITY;
    for (int q = 0; q < n; q++) {
      if (next[q] >= o.first[q + 1]) continue;
      if (free_at[q] > now) {
        next_time = fmin(next_time, free_at[q]);
        continue;
      }
      const sched_item *it = &o.items[next[q]];
      int64_t mb = it->micro_batch;
      size_t cell = (size_t)q * (size_t)m + (size_t)mb;
      bool fwd = it->pass == SCHED_F;
      double in = fwd ? (q == 0 ? 0 : act_at[cell - (size_t)m])
                      : fmax(f_done[cell], q + 1 < n ? grad_at[cell + (size_t)m] : 0);
      if (in > now) {
        if (isfinite(in)) next_time = fmin(next_time, in);
        continue;
      }
      double t_end = now + (fwd ? st[q].fwd_s : st[q].bwd_s), busy = t_end;
      put(&l, fwd ? GPIPE_F : GPIPE_B, q, mb, now, t_end);
      if (fwd) {
        f_done[cell] = t_end;
        if (q + 1 < n) {
          act_at[cell] = on_link(&link_fwd[q], t_end, st[q].act_send_s);
          if (st[q].act_send_s > 0) put(&l, GPIPE_SEND_ACT, q, mb, act_at[cell] - st[q].act_send_s, act_at[cell]);
          if (blocking) busy = act_at[cell];
        }
      } else {
        b_done[cell] = t_end;
        if (q > 0) {
          grad_at[cell] = on_link(&link_bwd[q - 1], t_end, st[q - 1].grad_send_s);
          if (st[q - 1].grad_send_s > 0)
            put(&l, GPIPE_SEND_GRAD, q, mb, grad_at[cell] - st[q - 1].grad_send_s, grad_at[cell]);
          if (blocking) busy = grad_at[cell];
        }
      }
      end = fmax(end, busy);
      if (++next[q] == o.first[q + 1]) { /* the stage's last pass: its weight-gradient sync follows */
        if (st[q].wsync_s > 0) put(&l, GPIPE_W, q, -1, t_end, t_end + st[q].wsync_s);
        end = fmax(end, t_end + st[q].wsync_s);
      }
      free_at[q] = busy;
      done++;
      progressed = true;
      next_time = fmin(next_time, busy);
    }
    if (!progressed) {
      if (!isfinite(next_time)) { /* cannot happen for an order plan_schedule_build made (cost/sim.c) */
        rc = ctx_fail(ctx, AP_INTERNAL, "pipeline timeline: the %s schedule stopped after %zu of %zu passes",
                      plan_schedule_name(kind), done, o.n_items);
        goto out;
      }
      now = next_time;
    }
  }
  *end_s = end;
  if (events) {
    *events = l.ev;
    l.ev = NULL;
  }
  if (n_events) *n_events = l.n;
out:
  free(l.ev);
  free(f_done);
  free(act_at);
  free(b_done);
  free(grad_at);
  free(free_at);
  free(link_fwd);
  free(link_bwd);
  free(next);
  plan_schedule_free(&o);
  return rc;
}
