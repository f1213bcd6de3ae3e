/* The order of pipeline work each rank follows (exec layer; ex_sched.h). There is one home for a schedule:
 * plan_schedule_build (src/plan/schedule.{c,h}), the per-stage lists of F, B and W passes that the event-driven
 * simulator (cost/sim.c) replays with the plan's costs. This file only copies those lists into the executor's
 * item type, so a rank runs exactly the order whose time the simulator predicts. The lists run without deadlock
 * in the executor: each is the order of a stage in a complete timeline in which every pass starts after its
 * inputs (schedule.h), and the executor's sends do not block (rank_pipe.c), so a rank waits only on a pass that
 * an earlier point of that timeline produced; tests/test_exec.c runs every kind's lists together to check it. */
#include <stdlib.h>
#include <string.h>

#include "exec/ex_sched.h"
#include "plan/schedule.h"

ap_status rk_schedule_fill(ap_ctx *ctx, const plan *p, rk_plan *out) {
  plan_schedule_order o;
  ap_status st = plan_schedule_build(ctx, p, &o);
  if (st) return st;
  if (o.n_stages > RK_MAX_CHUNKS) {
    plan_schedule_free(&o);
    return ctx_fail(ctx, AP_UNSUPPORTED, "pipeline: pp %lld above the executor's %d stages", (long long)o.n_stages,
                    RK_MAX_CHUNKS);
  }
  out->order = malloc((o.n_items ? o.n_items : 1) * sizeof *out->order);
  if (!out->order) {
    plan_schedule_free(&o);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  for (size_t i = 0; i < o.n_items; i++) {
    const sched_item *it = &o.items[i];
    rk_kind k = it->pass == SCHED_F ? RK_F : it->pass == SCHED_B ? RK_B : RK_W;
    out->order[i] = (rk_item){k, (int32_t)it->micro_batch, it->chunk};
  }
  for (int64_t r = 0; r <= o.n_stages; r++) out->order_first[r] = (int32_t)o.first[r];
  plan_schedule_free(&o);
  return AP_OK;
}

void rk_schedule_free(rk_plan *p) {
  free(p->order);
  p->order = NULL;
}
