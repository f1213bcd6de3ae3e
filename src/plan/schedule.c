/* The pipeline schedule as data (plan layer); see schedule.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/schedule.h"

int64_t plan_schedule_in_flight_passes(const plan *p, int64_t r) {
  int64_t pp = p->pp, v = p->vpp, m = p->n_micro_batches;
  switch (p->schedule) {
  case PLAN_SCHED_GPIPE: return m * v;
  case PLAN_SCHED_INTERLEAVED_1F1B: return (pp - r - 1) * 2 + (v - 1) * pp + 1;
  case PLAN_SCHED_ZB_V: return 2 * pp;
  case PLAN_SCHED_1F1B:
  case PLAN_SCHED_ZB_H1:
  case PLAN_SCHED_COUNT_: break;
  }
  return (pp - r) * v;
}

double plan_schedule_in_flight_mb(const plan *p, int64_t r) {
  double v = (double)p->vpp, passes = (double)plan_schedule_in_flight_passes(p, r);
  return fmin(passes, (double)p->n_micro_batches * v) / v;
}

int64_t plan_schedule_p2p_crossings(const plan *p) { return p->schedule == PLAN_SCHED_INTERLEAVED_1F1B ? p->vpp : 1; }

bool plan_schedule_async_p2p(const plan *p) {
  return p->schedule == PLAN_SCHED_INTERLEAVED_1F1B || p->schedule == PLAN_SCHED_ZB_H1 || p->schedule == PLAN_SCHED_ZB_V;
}

void plan_schedule_free(plan_schedule_order *o) {
  if (!o) return;
  free(o->first);
  free(o->items);
  memset(o, 0, sizeof *o);
}

/* Forward pass k (0-based) of a stage runs micro-batch mb of its local chunk lc: micro-batches in groups of
 * pp, chunk by chunk (Megatron's get_model_chunk_id with microbatch group size pp). */
static void virtual_index(int64_t k, int64_t pp, int64_t v, int64_t *mb, int64_t *lc) {
  *lc = (k / pp) % v;
  *mb = k / (pp * v) * pp + k % pp;
}

/* Stage r's chunks in local order (the inverse of plan_chunk_rank). */
static void local_chunks(const plan *p, int64_t r, int32_t *out) {
  int n = 0;
  for (int64_t c = 0; c < plan_n_chunks(p); c++)
    if (plan_chunk_rank(p, c) == r) out[n++] = (int32_t)c;
}

static sched_item item(sched_pass pass, int32_t chunk, int64_t mb) { return (sched_item){pass, chunk, mb}; }

/* GPipe, 1F1B and interleaved 1F1B: the fixed orders of Megatron's schedules.py. */
static void build_fixed(const plan *p, int64_t r, sched_item *out) {
  int64_t v = p->vpp, m = p->n_micro_batches, total = m * v, n = 0;
  int32_t chunks[PLAN_MAX_CHUNKS];
  local_chunks(p, r, chunks);
  int64_t warm = p->schedule == PLAN_SCHED_GPIPE ? total : plan_schedule_in_flight_passes(p, r) - 1;
  if (warm > total) warm = total;
  int64_t nf = 0, nb = 0, mb, lc;
#define PUT_F()                                                                                                \
  (virtual_index(nf++, p->pp, v, &mb, &lc), out[n++] = item(SCHED_F, chunks[lc], mb))
#define PUT_B()                                                                                                \
  (virtual_index(nb++, p->pp, v, &mb, &lc), out[n++] = item(SCHED_B, chunks[v - 1 - lc], mb))
  while (nf < warm) PUT_F();
  while (nf < total) {
    PUT_F();
    PUT_B();
  }
  while (nb < total) PUT_B();
#undef PUT_F
#undef PUT_B
}

/* The zero-bubble kinds: the order a stage runs at equal pass times and free sends (schedule.h). */
typedef struct {
  int64_t next_f, next_b, in_flight, w_head, w_tail, n_out;
  double free_at;
} zb_stage;

static ap_status build_zero_bubble(ap_ctx *ctx, const plan *p, plan_schedule_order *o) {
  int64_t pp = p->pp, v = p->vpp, m = p->n_micro_batches, n_chunks = pp * v;
  bool flex = p->schedule == PLAN_SCHED_ZB_V;
  size_t cells = (size_t)(n_chunks * m);
  double *f_done = malloc(sizeof(double) * cells), *b_done = malloc(sizeof(double) * cells);
  int64_t *wq = malloc(sizeof(int64_t) * cells), *nf = calloc((size_t)n_chunks, sizeof(int64_t)),
          *nb = calloc((size_t)n_chunks, sizeof(int64_t));
  zb_stage *rs = calloc((size_t)pp, sizeof(zb_stage));
  int32_t(*chunks)[PLAN_MAX_CHUNKS] = malloc(sizeof(*chunks) * (size_t)pp);
  int64_t *local_of = malloc(sizeof(int64_t) * (size_t)n_chunks);
  ap_status st = AP_OK;
  if (!f_done || !b_done || !wq || !nf || !nb || !rs || !chunks || !local_of) {
    st = ctx_fail(ctx, AP_NOMEM, "out of memory");
    goto out;
  }
  for (int64_t r = 0; r < pp; r++) {
    local_chunks(p, r, chunks[r]);
    for (int64_t lc = 0; lc < v; lc++) local_of[chunks[r][lc]] = lc;
  }
  for (size_t i = 0; i < cells; i++) f_done[i] = b_done[i] = INFINITY;
  size_t total = cells * 3, done = 0;
  double now = 0;
  while (done < total) {
    bool progressed = false;
    double next_time = INFINITY;
    for (int64_t rk = 0; rk < pp; rk++) {
      zb_stage *R = &rs[rk];
      if (R->free_at > now) {
        next_time = fmin(next_time, R->free_at);
        continue;
      }
      int64_t limit = plan_schedule_in_flight_passes(p, rk);
      int kind = -1;
      int64_t c = -1, mb = -1;
      if (!flex) {
        if (R->next_f < m * v && R->in_flight < limit) {
          int64_t fmb, flc;
          virtual_index(R->next_f, pp, v, &fmb, &flc);
          int64_t fc = chunks[rk][flc];
          if (fc == 0 || f_done[(fc - 1) * m + fmb] <= now) kind = SCHED_F, c = fc, mb = fmb;
        }
        if (kind < 0 && R->next_b < m * v) {
          int64_t bmb, blc;
          virtual_index(R->next_b, pp, v, &bmb, &blc);
          int64_t bc = chunks[rk][v - 1 - blc];
          double in = f_done[bc * m + bmb];
          if (bc + 1 < n_chunks) in = fmax(in, b_done[(bc + 1) * m + bmb]);
          if (in <= now) kind = SCHED_B, c = bc, mb = bmb;
        }
      } else {
        /* ZB-V: any chunk's next pass; the lowest micro-batch first, forwards while the in-flight limit
         * allows, then backwards nearest the loss first. */
        for (int64_t lc = 0; lc < v && R->in_flight < limit; lc++) {
          int64_t fc = chunks[rk][lc], fmb = nf[fc];
          if (fmb >= m) continue;
          if ((fc == 0 || f_done[(fc - 1) * m + fmb] <= now) && (kind < 0 || fmb < mb)) kind = SCHED_F, c = fc, mb = fmb;
        }
        for (int64_t lc = v - 1; lc >= 0 && kind < 0; lc--) {
          int64_t bc = chunks[rk][lc], bmb = nb[bc];
          if (bmb >= m) continue;
          double in = f_done[bc * m + bmb];
          if (bc + 1 < n_chunks) in = fmax(in, b_done[(bc + 1) * m + bmb]);
          if (in <= now) kind = SCHED_B, c = bc, mb = bmb;
        }
      }
      if (kind < 0 && R->w_head < R->w_tail) {
        int64_t id = wq[rk * v * m + R->w_head++];
        kind = SCHED_W, c = id / m, mb = id % m;
      }
      if (kind < 0) continue;
      double end = now + 1;
      if (kind == SCHED_F) {
        f_done[c * m + mb] = end;
        R->next_f++;
        R->in_flight++;
        nf[c]++;
      } else if (kind == SCHED_B) {
        b_done[c * m + mb] = end;
        R->next_b++;
        R->in_flight--;
        nb[c]++;
        wq[rk * v * m + R->w_tail++] = c * m + mb;
      }
      o->items[o->first[rk] + (size_t)R->n_out++] = item((sched_pass)kind, (int32_t)c, mb);
      R->free_at = end;
      done++;
      progressed = true;
      next_time = fmin(next_time, end);
    }
    if (!progressed) {
      if (!isfinite(next_time)) {
        st = ctx_fail(ctx, AP_INTERNAL, "schedule %s: no order for pp %lld, vpp %lld, %lld micro-batches",
                      plan_schedule_name(p->schedule), (long long)pp, (long long)v, (long long)m);
        break;
      }
      now = next_time;
    }
  }
out:
  free(f_done);
  free(b_done);
  free(wq);
  free(nf);
  free(nb);
  free(rs);
  free(chunks);
  free(local_of);
  return st;
}

ap_status plan_schedule_build(ap_ctx *ctx, const plan *p, plan_schedule_order *o) {
  memset(o, 0, sizeof *o);
  bool zb = p->schedule == PLAN_SCHED_ZB_H1 || p->schedule == PLAN_SCHED_ZB_V;
  int64_t pp = p->pp, per_stage = p->vpp * p->n_micro_batches * (zb ? 3 : 2);
  if (pp < 1 || p->vpp < 1 || p->n_micro_batches < 1 || pp * p->vpp > PLAN_MAX_CHUNKS)
    return ctx_fail(ctx, AP_INVALID, "schedule: needs pp, vpp and micro-batches >= 1 and pp·vpp <= %d",
                    PLAN_MAX_CHUNKS);
  o->n_stages = pp;
  o->n_items = (size_t)(pp * per_stage);
  o->first = malloc(sizeof(size_t) * (size_t)(pp + 1));
  o->items = malloc(sizeof(sched_item) * o->n_items);
  if (!o->first || !o->items) {
    plan_schedule_free(o);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  for (int64_t r = 0; r <= pp; r++) o->first[r] = (size_t)(r * per_stage);
  ap_status st = AP_OK;
  if (zb) st = build_zero_bubble(ctx, p, o);
  else
    for (int64_t r = 0; r < pp; r++) build_fixed(p, r, &o->items[o->first[r]]);
  if (st) plan_schedule_free(o);
  return st;
}
