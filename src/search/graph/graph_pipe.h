/* One event timeline of a pipelined op-level plan (search layer, above graph_sim.h and plan/schedule.h).
 *
 * The inter-op pass prices a pipeline with Alpa's closed form Σ t + (B − 1) max t over the stages' times per
 * micro-batch (graph_stages.h gstage_latency_s). This plays the pipeline instead: every stage runs the forward
 * (F) and backward (B) passes of each micro-batch on its compute stream in the order of the schedule data the
 * transformer simulator reads (plan/schedule.h plan_schedule_build; the graph pipeline runs 1F1B, Narayanan et
 * al. 2021 §2.2.1, and GPipe is accepted too), each pass once its input has arrived. An activation leaves stage
 * q for stage q + 1 when F ends, and its gradient comes back when stage q + 1's B ends, each as a transfer on
 * the link between the two submeshes, one FIFO stream per direction (the cost model prices one direction of a
 * send/recv, comm.c COMM_SENDRECV; graph_stages.c prices a stage's send/recv as one of each). The receiver
 * waits for the data; the sender waits for its send to arrive too unless the schedule posts its sends
 * asynchronously (plan/schedule.h plan_schedule_async_p2p: 1F1B and GPipe do not, as Megatron's plain 1F1B and
 * DeepSpeed's pipeline engine block on each), so a stage's stream is busy for its F (B) and the send that
 * follows, which is what the closed form charges per micro-batch. After its last B each stage runs the weight-gradient
 * synchronisation its own simulation leaves exposed (W, on the stage's communication stream), once per
 * iteration: the gradients accumulate over the micro-batches and are all-reduced once (shard_cost.c).
 *
 * Durations come from the per-stage intra-op simulation (graph_sim.h), which plays one stage's nodes for the
 * whole iteration's micro-batches as one forward and one backward sweep: with F_q its forward sweep, T_q its
 * whole time and T0_q the same without the weight-gradient all-reduces, a micro-batch's F lasts F_q / B, its B
 * (T0_q − F_q) / B, and W lasts T_q − T0_q (what the all-reduces add on top of the backward they overlap). So a
 * single stage's timeline is B (F + B) + W = T_q: the single-stage simulation itself. */
#ifndef AP_SEARCH_GRAPH_PIPE_H
#define AP_SEARCH_GRAPH_PIPE_H

#include "plan/plan.h"
#include "search/graph/graph_plan.h"

typedef enum { GPIPE_F, GPIPE_B, GPIPE_W, GPIPE_SEND_ACT, GPIPE_SEND_GRAD } gpipe_kind;

/* One interval of the timeline. stage: the stage that runs it, for a send the sender (an activation goes from
 * stage to stage + 1, a gradient from stage to stage − 1); micro_batch: -1 for W. */
typedef struct {
  gpipe_kind kind;
  int stage;
  int64_t micro_batch;
  double start_s, end_s;
} gpipe_event;

/* One stage's durations. */
typedef struct {
  double fwd_s, bwd_s;        /* per micro-batch, on the stage's compute stream */
  double wsync_s;             /* once per iteration, after its last backward (the exposed weight-gradient sync) */
  double act_send_s;          /* per micro-batch: its activation to the next stage (0 for the last) */
  double grad_send_s;         /* per micro-batch: that activation's gradient back from the next stage */
} gpipe_stage;

/* A stage's time per micro-batch as the closed form counts it: F + B + W / n_micro + its sends both ways. */
AP_HIDDEN double gpipe_stage_per_micro_s(const gpipe_stage *s, double n_micro);

/* The durations of r's stages (r->n_stages of them, or its one stage on the whole mesh when it has fewer than
 * 2), from the op-level simulation of each stage's nodes (the file's comment) and its send/recv (half each
 * way); out holds GST_MAX_LAYERS entries. Returns the stage count; *n_sim_events counts the intra-op
 * simulation's events. AP_NOMEM from the simulator's arrays (in r's arena). */
AP_HIDDEN ap_status gpipe_stage_times(ap_ctx *ctx, const gplan_result *r, gpipe_stage *out, int *n_stages,
                                      int64_t *n_sim_events);

/* Plays st[0..n) over n_micro micro-batches under schedule kind (PLAN_SCHED_1F1B or PLAN_SCHED_GPIPE):
 * *end_s is when the last event ends; with events not NULL, *events gets every interval in the order they
 * were placed (free() it) and *n_events their count. AP_INVALID for another kind or n, n_micro < 1; AP_NOMEM. */
AP_HIDDEN ap_status gpipe_simulate(ap_ctx *ctx, const gpipe_stage *st, int n, int64_t n_micro, plan_schedule kind,
                                   gpipe_event **events, size_t *n_events, double *end_s);

#endif
