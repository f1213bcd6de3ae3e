/* The pipeline schedule as data (plan layer): for a plan's schedule kind (GPipe, 1F1B, interleaved 1F1B,
 * ZB-H1, ZB-V), the ordered list of forward (F), backward (B; the input gradient for zero-bubble kinds) and
 * weight-gradient (W) passes that every pipeline stage runs, each naming its chunk and micro-batch; and the
 * schedule's rules that others read: how many chunk passes a stage keeps in flight (so how many micro-batches
 * of activations it holds), how often a micro-batch crosses a stage boundary, and whether sends overlap.
 * The event-driven simulator (cost/sim.c) runs these lists with the plan's costs, the closed forms'
 * tests check against them, memory (cost/memory.c) takes the in-flight rule from here, and exporters and an
 * executor can read the same lists. */
#ifndef AP_PLAN_SCHEDULE_H
#define AP_PLAN_SCHEDULE_H

#include "plan/plan.h"

typedef enum { SCHED_F, SCHED_B, SCHED_W } sched_pass;

/* One unit of work of one stage: pass `pass` of global chunk `chunk` for micro-batch `micro_batch`. */
typedef struct {
  sched_pass pass;
  int32_t chunk;
  int64_t micro_batch;
} sched_item;

/* Every stage's ordered work: stage r runs items[first[r]] … items[first[r + 1] − 1] in that order, each once
 * its input has arrived (F of chunk c after F of chunk c − 1, B of chunk c after F of c and B of c + 1, W after
 * its B). Built by plan_schedule_build, freed by plan_schedule_free. */
typedef struct {
  int64_t n_stages;
  size_t n_items;
  size_t *first; /* n_stages + 1 offsets */
  sched_item *items;
} plan_schedule_order;

/* Chunk passes that stage r of plan p keeps in flight (forwarded, not yet backwarded) at most: all of them for
 * GPipe (Huang et al. 2019); pp − r for 1F1B and ZB-H1 (Narayanan et al. 2021 §2.2.1: Megatron's pp − r − 1
 * warm-up forwards and one more; ZB-H1 keeps 1F1B's memory, Qi et al. 2024 §2.1); (pp − r − 1)·2 + (v − 1)·pp
 * + 1 for interleaved 1F1B (Megatron schedules.py warm-up); 2·pp for ZB-V (p·M_B, Qi et al. 2024 §6). */
AP_HIDDEN int64_t plan_schedule_in_flight_passes(const plan *p, int64_t r);
/* The micro-batches whose activations stage r holds at its peak, in units of all the stage's chunks for one
 * micro-batch: min(in-flight passes, m·v) / v. */
AP_HIDDEN double plan_schedule_in_flight_mb(const plan *p, int64_t r);
/* How many times per direction one micro-batch crosses a stage boundary out of one stage: v with interleaving
 * (each chunk hands on to the next stage), once otherwise (ZB-V turns round on the last stage). */
AP_HIDDEN int64_t plan_schedule_p2p_crossings(const plan *p);
/* Whether the schedule posts its sends and receives asynchronously, so they can hide behind compute: the
 * interleaved schedule (Megatron --overlap-p2p-comm exists only there, forward_backward_pipelining_with_
 * interleaving) and the zero-bubble ones (Qi et al. 2024 §4); Megatron's plain 1F1B and GPipe, like DeepSpeed's
 * pipeline engine, block on each. */
AP_HIDDEN bool plan_schedule_async_p2p(const plan *p);

/* Builds the order of plan p (pp, vpp, n_micro_batches, schedule; validated). GPipe: all forwards, then all
 * backwards. 1F1B and interleaved 1F1B: Megatron's order (schedules.py): forwards in virtual-microbatch order
 * (micro-batches in groups of pp, chunk by chunk, get_model_chunk_id), backwards mirrored, in-flight passes −
 * 1 warm-up forwards, then one forward and one backward in turn, then the cool-down backwards. Zero-bubble
 * kinds split B and W, and their order is that of a stage that runs, at equal pass times and free sends, a
 * ready forward while under the in-flight limit (ZB-V: any chunk's, the lowest micro-batch first), else a
 * ready backward, else a pending W (Qi et al. 2024 §2 and §6: W fills what would be idle). Fails with
 * AP_NOMEM, or AP_INTERNAL should a kind's rule not complete. The caller frees *out with plan_schedule_free. */
AP_HIDDEN ap_status plan_schedule_build(ap_ctx *ctx, const plan *p, plan_schedule_order *out);
AP_HIDDEN void plan_schedule_free(plan_schedule_order *o);

#endif
