/* The event-driven pipeline simulator (cost layer). Where schedule.c's closed forms assume what the schedule
 * achieves, this runs it: every pipeline rank executes forward (F), backward (B) and, for zero-bubble schedules,
 * weight-gradient (W) passes of its chunks in the schedule's order, each starting once the rank is free and its
 * input has arrived from the neighbouring chunk (one send/recv later). It handles uneven chunks, any number of
 * micro-batches, and writes the timeline that `autopar simulate --trace` turns into a Chrome trace.
 *
 * Orders (per rank): forward passes run in Megatron's virtual-microbatch order (micro-batches in groups of pp,
 * chunk by chunk; schedules.py get_model_chunk_id), backward passes in the mirrored order. What differs by
 * schedule is when a rank may run a forward instead of waiting for a backward: GPipe runs every forward first
 * (Huang et al. 2019); 1F1B and ZB-H1 keep at most pp − r micro-batches in flight on rank r (Narayanan et al.
 * 2021 §2.2.1); interleaved 1F1B at most (pp − r − 1)·2 + (v − 1)·pp + 1 chunk passes (Megatron's warm-up);
 * ZB-V at most 2·pp chunk passes on every rank (p·M_B, Qi et al. 2024 §6). Zero-bubble schedules split B into the input gradient and a W that a
 * rank runs whenever it would otherwise idle (Qi et al. 2024 §2). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonx.h"
#include "cost/internal.h"

/* Forward pass k (0-based) of a rank runs micro-batch mb of its local chunk lc: micro-batches in groups of g,
 * chunk by chunk (Megatron's interleaving uses g = pp). */
static void virtual_index(int64_t k, int64_t g, int64_t v, int64_t *mb, int64_t *lc) {
  int64_t group = k / (g * v);
  *lc = (k / g) % v;
  *mb = group * g + k % g;
}

typedef struct {
  int64_t next_f, next_b; /* how many F and B passes this rank has started */
  int64_t w_head, w_tail; /* queue of pending W passes (indices into a per-rank list) */
  double free_at;
  int64_t in_flight; /* chunk passes forwarded but not yet backwarded */
} rank_state;

double sim_pipeline(const plan *p, const cost_result *r, sim_event *events, size_t cap, size_t *n_events) {
  int64_t pp = p->pp, v = p->vpp, m = p->n_micro_batches, n_chunks = pp * v;
  bool zb = p->schedule == PLAN_SCHED_ZB_H1 || p->schedule == PLAN_SCHED_ZB_V;
  int64_t g = pp;
  bool flex = p->schedule == PLAN_SCHED_ZB_V;
  size_t n_ev = 0;
  /* Local chunk lc of rank rk is global chunk c: the inverse of plan_chunk_rank, built by scanning. */
  int64_t *chunk_of = malloc(sizeof(int64_t) * (size_t)n_chunks);
  int64_t *local_of = malloc(sizeof(int64_t) * (size_t)n_chunks);
  double *f_done = malloc(sizeof(double) * (size_t)(n_chunks * m));
  double *b_done = malloc(sizeof(double) * (size_t)(n_chunks * m));
  int64_t *wq = malloc(sizeof(int64_t) * (size_t)(n_chunks * m));
  rank_state *rs = calloc((size_t)pp, sizeof(rank_state));
  int64_t *nf = calloc((size_t)n_chunks, sizeof(int64_t)), *nb = calloc((size_t)n_chunks, sizeof(int64_t));
  double end = NAN;
  if (!chunk_of || !local_of || !f_done || !b_done || !wq || !rs || !nf || !nb) goto out;
  {
    int64_t *count = calloc((size_t)pp, sizeof(int64_t));
    if (!count) goto out;
    for (int64_t c = 0; c < n_chunks; c++) {
      int64_t rk = plan_chunk_rank(p, c);
      local_of[c] = count[rk];
      chunk_of[rk * v + count[rk]++] = c;
    }
    free(count);
  }
  for (int64_t i = 0; i < n_chunks * m; i++) f_done[i] = b_done[i] = INFINITY;
  /* Each rank's W queue lives in wq[rk·v·m …]. */
  int64_t total = n_chunks * m * (zb ? 3 : 2), done_ops = 0;
  double now = 0;
  end = 0;
  while (done_ops < total) {
    bool progressed = false;
    double next_time = INFINITY;
    for (int64_t rk = 0; rk < pp; rk++) {
      rank_state *R = &rs[rk];
      if (R->free_at > now) {
        next_time = fmin(next_time, R->free_at);
        continue;
      }
      int64_t limit;
      switch (p->schedule) {
      case PLAN_SCHED_GPIPE: limit = m * v; break;
      case PLAN_SCHED_INTERLEAVED_1F1B: limit = (pp - rk - 1) * 2 + (v - 1) * pp + 1; break;
      case PLAN_SCHED_ZB_V: limit = 2 * pp; break;
      default: limit = (pp - rk) * v; break;
      }
      int kind = -1;
      int64_t c = -1, mb = -1;
      /* Candidate F first: in the steady state a rank runs a forward, then a backward (Megatron schedules.py). */
      if (R->next_f < m * v && R->in_flight < limit && !flex) {
        int64_t fmb, flc;
        virtual_index(R->next_f, g, v, &fmb, &flc);
        int64_t fc = chunk_of[rk * v + flc];
        double in = fc == 0 ? 0 : f_done[(fc - 1) * m + fmb] + r->p2p_s;
        if (in <= now) kind = SIM_F, c = fc, mb = fmb;
        else if (isfinite(in)) next_time = fmin(next_time, in);
      }
      /* Candidate B: the next in mirrored order. */
      if (flex) {
        /* ZB-V: any chunk's next pass may run; the lowest micro-batch first, forwards before backwards while the
         * in-flight limit allows, backwards nearest the loss first. */
        for (int64_t lc = 0; lc < v && R->in_flight < limit; lc++) {
          int64_t fc = chunk_of[rk * v + lc], fmb = nf[rk * v + lc];
          if (fmb >= m) continue;
          double in = fc == 0 ? 0 : f_done[(fc - 1) * m + fmb] + r->p2p_s;
          if (in <= now && (kind < 0 || fmb < mb)) kind = SIM_F, c = fc, mb = fmb;
          else if (in > now && isfinite(in)) next_time = fmin(next_time, in);
        }
        for (int64_t lc = 0; lc < v && kind < 0; lc++) {
          int64_t bc = chunk_of[rk * v + lc], bmb = nb[rk * v + lc];
          if (bmb >= m) continue;
          double in = f_done[bc * m + bmb];
          if (bc + 1 < n_chunks) in = fmax(in, b_done[(bc + 1) * m + bmb] + r->p2p_s);
          if (in <= now) kind = SIM_B, c = bc, mb = bmb;
          else if (isfinite(in)) next_time = fmin(next_time, in);
        }
        if (kind == SIM_F) nf[rk * v + local_of[c]]++;
        if (kind == SIM_B) nb[rk * v + local_of[c]]++;
      }
      if (kind < 0 && !flex && R->next_b < m * v) {
        int64_t bmb, blc;
        virtual_index(R->next_b, g, v, &bmb, &blc);
        int64_t bc = chunk_of[rk * v + (v - 1 - blc)];
        double in = f_done[bc * m + bmb];
        if (bc + 1 < n_chunks) in = fmax(in, b_done[(bc + 1) * m + bmb] + r->p2p_s);
        if (in <= now && p->schedule != PLAN_SCHED_GPIPE) kind = SIM_B, c = bc, mb = bmb;
        else if (p->schedule == PLAN_SCHED_GPIPE && R->next_f >= m * v && in <= now) kind = SIM_B, c = bc, mb = bmb;
        if (in > now && isfinite(in)) next_time = fmin(next_time, in);
      }
      if (kind < 0 && zb && R->w_head < R->w_tail) {
        int64_t id = wq[rk * v * m + R->w_head];
        kind = SIM_W, c = id / m, mb = id % m;
      }
      if (kind < 0) continue;
      double dur = kind == SIM_F ? r->chunk_tf_s[c]
                   : kind == SIM_W ? r->chunk_tw_s[c]
                                   : r->chunk_tb_s[c] - (zb ? r->chunk_tw_s[c] : 0);
      double t_end = now + dur;
      if (kind == SIM_F) {
        f_done[c * m + mb] = t_end;
        R->next_f++;
        R->in_flight++;
      } else if (kind == SIM_B) {
        b_done[c * m + mb] = t_end;
        R->next_b++;
        R->in_flight--;
        if (zb) wq[rk * v * m + R->w_tail++] = c * m + mb;
      } else {
        R->w_head++;
      }
      if (events && n_ev < cap)
        events[n_ev] = (sim_event){(sim_kind)kind, (int)rk, (int)c, mb, now, t_end};
      n_ev++;
      R->free_at = t_end;
      end = fmax(end, t_end);
      done_ops++;
      progressed = true;
      next_time = fmin(next_time, t_end);
    }
    if (!progressed) {
      if (!isfinite(next_time)) {
        end = NAN; /* a deadlock: cannot happen for valid plans; reported as NaN */
        break;
      }
      now = next_time;
    }
  }
out:
  if (n_events) *n_events = n_ev;
  free(chunk_of);
  free(local_of);
  free(f_done);
  free(b_done);
  free(wq);
  free(rs);
  free(nf);
  free(nb);
  return end;
}

static const char *const kind_names[] = {"F", "B", "W", "send", "dp-sync", "optimizer"};

char *sim_trace_json(const cost_env *env, const plan *p, const cost_result *r, double *pipeline_s) {
  /* Every chunk pass of every micro-batch is one event: F and B, and W for zero-bubble schedules. */
  size_t cap = (size_t)(plan_n_chunks(p) * p->n_micro_batches * 3), n = 0;
  sim_event *ev = malloc(sizeof(sim_event) * (cap ? cap : 1));
  if (!ev) return NULL;
  double pipe = sim_pipeline(p, r, ev, cap, &n);
  if (pipeline_s) *pipeline_s = pipe;
  if (n > cap) n = cap;
  strbuf sb = {0};
  sb_puts(&sb, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"model\":");
  jx_sb_str(&sb, env->g->name);
  sb_puts(&sb, ",\"cluster\":");
  jx_sb_str(&sb, env->hc->name);
  sb_printf(&sb, ",\"schedule\":\"%s\",\"simulated_pipeline_s\":%.6g,\"closed_form_pipeline_s\":%.6g},\"traceEvents\":[",
            plan_schedule_name(p->schedule), pipe, r->pipeline_s);
  bool first = true;
  for (int64_t rk = 0; rk < p->pp; rk++) {
    for (int tid = 0; tid < 2; tid++) {
      sb_printf(&sb, "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%lld,\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
                first ? "" : ",", (long long)rk, tid, tid ? "communication" : "compute");
      first = false;
    }
    sb_printf(&sb, ",{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%lld,\"args\":{\"name\":\"pipeline stage %lld\"}}",
              (long long)rk, (long long)rk);
  }
  for (size_t i = 0; i < n; i++) {
    const sim_event *e = &ev[i];
    sb_printf(&sb,
              ",{\"name\":\"%s mb%lld c%d\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":0,"
              "\"args\":{\"micro_batch\":%lld,\"chunk\":%d}}",
              kind_names[e->kind], (long long)e->micro_batch, e->chunk, kind_names[e->kind], e->start_s * 1e6,
              (e->end_s - e->start_s) * 1e6, e->rank, (long long)e->micro_batch, e->chunk);
    /* The activation (or its gradient) leaves for the neighbouring chunk on the communication thread. */
    if (r->p2p_s > 0 && ((e->kind == SIM_F && e->chunk + 1 < p->pp * p->vpp) || (e->kind == SIM_B && e->chunk > 0)))
      sb_printf(&sb,
                ",{\"name\":\"send mb%lld\",\"cat\":\"send\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":1}",
                (long long)e->micro_batch, e->end_s * 1e6, r->p2p_s * 1e6, e->rank);
  }
  /* After the pipeline: exposed data-parallel synchronisation and the optimizer step, on every stage. */
  for (int64_t rk = 0; rk < p->pp; rk++) {
    sb_printf(&sb, ",{\"name\":\"dp-sync (exposed)\",\"cat\":\"dp\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%lld,\"tid\":1}",
              pipe * 1e6, r->time.dp_comm * 1e6, (long long)rk);
    sb_printf(&sb, ",{\"name\":\"optimizer\",\"cat\":\"optimizer\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%lld,\"tid\":0}",
              (pipe + r->time.dp_comm) * 1e6, r->time.optimizer * 1e6, (long long)rk);
  }
  sb_puts(&sb, "]}\n");
  free(ev);
  return sb_take(&sb);
}
