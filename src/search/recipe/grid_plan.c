/* A grid choice made into a plan, and costing it (search layer): the template set to a mesh, a micro-batch
 * size, a pipeline option (schedule, virtual stages, layer split) and a memory-saver rung; the pipeline options
 * of a mesh and micro-batch size; and grid_evaluate, which offers a plan to the search and keeps what the grid
 * needs of its cost. grid.c and grid_ladder.c call it; it calls no other grid file. */
#include <math.h>
#include <string.h>

#include "plan/stack.h"
#include "search/recipe/grid_internal.h"

/* TUNING: interleaving depths tried whatever the split; deeper ones only where they split the layers evenly
 * (published runs use 2-8, and deeper ones at one or two layers per chunk). */
static const int64_t VPP_ANY_MAX = 8;

/* ---- Evaluation ---------------------------------------------------------------------------------------- */

grid_eval grid_evaluate(grid *gr, const plan *p) {
  grid_eval e = {0};
  if (gr->stop) return e;
  if (gr->memo && gr->memo->probed && plan_equal(p, &gr->memo->probe)) return gr->memo->probe_res;
  ap_status st = search_offer(gr->sr, p, NULL);
  if (st == AP_CANCELLED) gr->stop = true;
  if (st != AP_OK && st != AP_INVALID && st != AP_CANCELLED) {
    gr->hard = st;
    gr->stop = true;
  }
  if (search_should_stop(gr->sr)) gr->stop = true;
  if (st != AP_OK) return e;
  const cost_result *r = search_offered_cost(gr->sr);
  e.valid = true;
  e.fits = r->fits;
  e.iter_s = r->iter_s;
  e.peak_bytes = r->peak_mem_bytes;
  for (int64_t c = 0; c < plan_n_chunks(p) && c < PLAN_MAX_CHUNKS; c++) {
    e.chunk_s += r->chunk_tf_s[c] + r->chunk_tb_s[c];
    e.chunk_w_s += r->chunk_tw_s[c];
  }
  cost_bound_mem_at_zero(p, r, &e.mem_z2_lb, &e.mem_z3_lb);
  for (int i = 0; i < r->n_ranks && i < COST_MAX_RANKS; i++) e.logits_bytes = fmax(e.logits_bytes, r->mem[i].logits);
  if (e.fits) gr->n_fit++;
  return e;
}

/* ---- Plans ------------------------------------------------------------------------------------------------- */

void grid_set_mesh(const grid *gr, const grid_mesh *m, plan *p) {
  *p = gr->base;
  p->tp = m->tp;
  p->cp = m->cp;
  p->pp = m->pp;
  p->dp = m->dp;
  p->ep = m->ep;
  p->etp = m->etp;
  memcpy(p->order, m->order, sizeof p->order);
  if (!fixes(gr, PLAN_F_SEQUENCE_PARALLEL)) p->sequence_parallel = m->tp > 1;
  /* TP communication overlap needs sequence parallelism and never slows an iteration down (complete.c). */
  p->tp_comm_overlap = p->sequence_parallel && m->tp > 1;
}

void grid_set_mbs(plan *p, int64_t mbs) {
  p->micro_batch_size = mbs;
  int64_t per = mbs * p->dp;
  p->n_micro_batches = per > 0 && p->global_batch_size % per == 0 ? p->global_batch_size / per : 1;
}

/* The split of the layers into pp·vpp chunks (unless fixed): the default split (plan_split_default: even, or
 * with one or two chunks more than layers Megatron's embedding and loss accounting, so that a published
 * 126-layer, 128-chunk plan is in the space), stated in the plan when it is the latter. */
static void set_split(const grid *gr, plan *p) {
  if (fixes(gr, PLAN_F_STAGE_LAYERS)) return;
  if (gr->facts.has_layers) plan_state_split(p, gr->L);
  else p->n_stage_layers = 0;
}

void grid_set_pipe(const grid *gr, plan *p, const pipe_opt *po) {
  p->schedule = po->schedule;
  p->vpp = po->vpp;
  set_split(gr, p);
}

void grid_set_rung(plan *p, const rung *r) {
  p->zero_stage = r->zero;
  p->recompute = r->rc;
  p->recompute_layers = r->rc == PLAN_RECOMPUTE_FULL ? r->k : 0;
  p->n_chunk_recompute = 0;
}

/* Whether interleaving pp ranks vpp deep is in the space (see the header). */
static bool vpp_in_space(const grid *gr, int64_t pp, int64_t v) {
  int64_t c = pp * v, L = gr->L;
  if (c > PLAN_MAX_CHUNKS) return false;
  if (c <= L) return v <= VPP_ANY_MAX || L % c == 0;
  return gr->facts.has_layers && c <= L + 2;
}

/* The pipeline options of a mesh at n_micro micro-batches, most promising first. */
int grid_pipe_options(const grid *gr, int64_t pp, int64_t n_micro, pipe_opt *out) {
  int n = 0;
  const plan *f = &gr->o->fixed;
  bool fix_s = fixes(gr, PLAN_F_SCHEDULE), fix_v = fixes(gr, PLAN_F_VPP);
  if (fix_s && f->schedule != PLAN_SCHED_INTERLEAVED_1F1B) {
    out[n++] = (pipe_opt){f->schedule, fix_v ? f->vpp : f->schedule == PLAN_SCHED_ZB_V ? 2 : 1, false};
    return n;
  }
  if (!fix_s && pp == 1) {
    out[n++] = (pipe_opt){PLAN_SCHED_1F1B, fix_v ? f->vpp : 1, false};
    return n;
  }
  if (!fix_s && (!fix_v || f->vpp == 1)) {
    out[n++] = (pipe_opt){PLAN_SCHED_ZB_H1, 1, false};
    out[n++] = (pipe_opt){PLAN_SCHED_1F1B, 1, true};
  }
  if (fix_v && f->vpp >= 2) {
    out[n++] = (pipe_opt){PLAN_SCHED_INTERLEAVED_1F1B, f->vpp, false};
  } else if (!fix_v && n_micro % pp == 0) {
    for (int64_t v = (PLAN_MAX_CHUNKS / pp < gr->L + 2 ? PLAN_MAX_CHUNKS / pp : gr->L + 2); v >= 2 && n < MAX_OPTS - 1; v--)
      if (vpp_in_space(gr, pp, v)) out[n++] = (pipe_opt){PLAN_SCHED_INTERLEAVED_1F1B, v, false};
  }
  if (!fix_s && (!fix_v || f->vpp == 2) && 2 * pp <= gr->L + 2 && n < MAX_OPTS)
    out[n++] = (pipe_opt){PLAN_SCHED_ZB_V, 2, false};
  /* Only the schedules the plan's stack runs (plan/stack.h); without ZB-H1, 1F1B is costed in its own right. */
  const plan_stack_info *si = plan_stack_get(f->stack);
  if (!si) return n;
  int kept = 0;
  bool zb_h1 = si->schedules >> PLAN_SCHED_ZB_H1 & 1u;
  for (int i = 0; i < n; i++) {
    if (!(si->schedules >> out[i].schedule & 1u)) continue;
    out[kept] = out[i];
    if (!zb_h1 && out[kept].schedule == PLAN_SCHED_1F1B) out[kept].shadow = false;
    kept++;
  }
  return kept;
}
