/* The order of pipeline work each rank follows (exec layer; ex_sched.c): the plan's fields the executor reads
 * (read in one place, rank.c) and the per-rank list of forward, backward and weight-gradient items, copied from
 * the shared schedule data (plan/schedule.h) the simulator reads. No MPI here, so the tests check the orders
 * directly.
 * Internal header: not installed, not part of the public API. */
#ifndef AP_EXEC_SCHED_H
#define AP_EXEC_SCHED_H

#include "exec/exec.h"
#include "plan/plan.h"

enum { RK_MAX_CHUNKS = 64 };

/* One item of a rank's pipeline work: the forward (F) or backward (B) of one micro-batch through one model
 * chunk. The shape is that of a schedule's per-rank timeline, so the order can come from shared schedule data. */
typedef enum { RK_F, RK_B, RK_W } rk_kind; /* W: the weight gradient of a split backward (zero bubble) */
typedef struct {
  rk_kind kind;
  int32_t mb, chunk; /* micro-batch 0 … n_mb-1; chunk in forward order 0 … pp·vpp-1 */
} rk_item;

/* What the executor takes from the plan, read in one place (rank.c rk_read_plan). */
typedef struct {
  int64_t dp, tp, pp, cp, ep, edp, etp, vpp, n_dev;
  int64_t mbs, n_mb, gbs, seq;
  int zero;
  int schedule; /* plan_schedule */
  const char *schedule_name;
  ex_recompute rc;
  bool fused_loss, sp; /* sp: sequence parallelism with tp > 1 */
  const char *precision;
  const char *recompute_name; /* plan_recompute_name */
  int64_t chunk_layers[RK_MAX_CHUNKS]; /* layers of each chunk in forward order */
  int64_t chunk_rank[RK_MAX_CHUNKS];   /* pipeline rank of each chunk */
  rk_item *order;                      /* every stage's work: stage r runs order[order_first[r] … order_first[r+1]-1] */
  int32_t order_first[RK_MAX_CHUNKS + 1];
} rk_plan;

/* Fills out->order and out->order_first from plan_schedule_build(p) (plan/schedule.h), the order the simulator
 * replays; fails as that does (AP_NOMEM, AP_INVALID) or AP_UNSUPPORTED above RK_MAX_CHUNKS stages. Free with
 * rk_schedule_free. */
AP_HIDDEN ap_status rk_schedule_fill(ap_ctx *ctx, const plan *p, rk_plan *out);
AP_HIDDEN void rk_schedule_free(rk_plan *p);

#endif
