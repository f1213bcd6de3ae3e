/* The schedule facts an export states, read from the schedule data (plan layer; plan/schedule.h), so that
 * an export and the simulator, the memory model and the executor describe one schedule: the stages and the
 * chunks (virtual stages) each runs, the micro-batches, whether weight gradients are separate passes, and
 * the passes a stage keeps in flight, counted along its ordered work list (tests/test_export.c checks the
 * count against the in-flight rule that memory reads). The exporters take these from export_schedule_facts rather than restating the plan's fields
 * (export.h); tests/test_export.c checks that every export states what the schedule data says, over every
 * schedule kind. */
#include <stdio.h>
#include <string.h>

#include "plan/export.h"
#include "plan/schedule.h"

/* Work lists longer than this are not built for an export (a plan with millions of micro-batches): the
 * facts then come from the rules alone. TUNING: 2^22 items of 16 bytes is 64 MiB, far above any published
 * pipeline (Llama 3 405B: pp 16, vpp 8, 16 micro-batches ≈ 6k items per stage). */
#define EXPORT_SCHED_MAX_ITEMS ((int64_t)1 << 22)

/* Walks stage r's list: the distinct chunks and micro-batches it names, the forwards before its first
 * backward, the most forwards not yet backwarded, and whether it has W passes. */
static void walk_stage(const plan_schedule_order *o, int64_t r, export_sched *s, int64_t *peak) {
  bool chunk_seen[PLAN_MAX_CHUNKS] = {false};
  int64_t chunks = 0, live = 0, warmup = -1, max_mb = -1;
  *peak = 0;
  for (size_t i = o->first[r]; i < o->first[r + 1]; i++) {
    const sched_item *it = &o->items[i];
    if (it->chunk >= 0 && it->chunk < PLAN_MAX_CHUNKS && !chunk_seen[it->chunk]) chunk_seen[it->chunk] = true, chunks++;
    if (it->micro_batch > max_mb) max_mb = it->micro_batch;
    if (it->pass == SCHED_F) {
      if (++live > *peak) *peak = live;
    } else if (it->pass == SCHED_B) {
      if (warmup < 0) warmup = live;
      live--;
    } else {
      s->split_w = true;
    }
  }
  if (r == 0) {
    s->chunks_per_stage = chunks;
    s->micro_batches = max_mb + 1;
    s->warmup_forwards_stage0 = warmup < 0 ? 0 : warmup;
  }
}

ap_status export_schedule_facts(ap_ctx *ctx, const plan *p, export_sched *s) {
  memset(s, 0, sizeof *s);
  s->kind = p->schedule;
  s->n_stages = p->pp;
  int64_t total = p->vpp * p->n_micro_batches;
  /* The rule: at most all of the stage's chunk passes. */
  s->in_flight_rule_stage0 = plan_schedule_in_flight_passes(p, 0);
  if (s->in_flight_rule_stage0 > total) s->in_flight_rule_stage0 = total;
  s->from_order = p->pp * total * 3 <= EXPORT_SCHED_MAX_ITEMS;
  if (!s->from_order) {
    s->chunks_per_stage = p->vpp;
    s->micro_batches = p->n_micro_batches;
    s->split_w = p->schedule == PLAN_SCHED_ZB_H1 || p->schedule == PLAN_SCHED_ZB_V;
    s->in_flight_stage0 = s->in_flight_max = s->in_flight_rule_stage0;
    s->warmup_forwards_stage0 = s->in_flight_stage0 > 0 ? s->in_flight_stage0 - 1 : 0;
    return AP_OK;
  }
  plan_schedule_order o;
  ap_status st = plan_schedule_build(ctx, p, &o);
  if (st) return st;
  for (int64_t r = 0; r < o.n_stages; r++) {
    int64_t peak = 0;
    walk_stage(&o, r, s, &peak);
    if (r == 0) s->in_flight_stage0 = peak;
    if (peak > s->in_flight_max) s->in_flight_max = peak;
  }
  plan_schedule_free(&o);
  return AP_OK;
}

void export_schedule_note(const export_sched *s, strbuf *sb) {
  if (s->n_stages <= 1) return;
  sb_printf(sb,
            "# schedule: %s over %lld stages, %lld chunk%s per stage, %lld micro-batches%s; stage 0 keeps at most "
            "%lld chunk passes in flight (%lld forwards before its first backward)\n",
            plan_schedule_name(s->kind), (long long)s->n_stages, (long long)s->chunks_per_stage,
            s->chunks_per_stage == 1 ? "" : "s", (long long)s->micro_batches,
            s->split_w ? ", weight gradients as separate passes" : "", (long long)s->in_flight_stage0,
            (long long)s->warmup_forwards_stage0);
}
