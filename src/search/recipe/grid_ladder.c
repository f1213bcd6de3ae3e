/* The grid's ladder of memory savers (search layer): on one mesh, micro-batch size and pipeline option, the
 * ZeRO stages and recompute modes from the least saver up, stopping at the first that fits (full recompute's
 * layer count by bisection) or when a rung's time reaches the cutoff; and the most frugal plan of each stage
 * when nothing fits. grid.c's top comment gives the dominance argument; grid.c calls it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search/recipe/grid_internal.h"

/* ---- The ladder of memory savers --------------------------------------------------------------------------- */

static double bound_now(const grid *gr, const ladder_out *lo) {
  double c = search_cutoff_s(gr->sr);
  return lo->best_s < c ? lo->best_s : c;
}

static void note_fit(ladder_out *lo, const rung *r, double t) {
  lo->any_fit = true;
  if (t < lo->best_s) lo->best_s = t;
  if (lo->n_fit < MAX_FIT_RUNGS) {
    lo->fit[lo->n_fit] = *r;
    lo->fit_s[lo->n_fit++] = t;
  }
}

/* The recompute granularities in order of time, honouring --fix. */
int grid_rc_order(const grid *gr, plan_recompute *out) {
  if (fixes(gr, PLAN_F_RECOMPUTE)) {
    out[0] = gr->o->fixed.recompute;
    return 1;
  }
  if (fixes(gr, PLAN_F_RECOMPUTE_LAYERS) && gr->o->fixed.recompute_layers > 0) {
    out[0] = PLAN_RECOMPUTE_FULL;
    return 1;
  }
  if (gr->memory_objective) {
    out[0] = PLAN_RECOMPUTE_FULL;
    return 1;
  }
  int n = 0;
  out[n++] = PLAN_RECOMPUTE_NONE;
  if (gr->facts.n_attention_ops > 0) out[n++] = PLAN_RECOMPUTE_SELECTIVE;
  if (gr->facts.has_layers) out[n++] = PLAN_RECOMPUTE_OP;
  out[n++] = PLAN_RECOMPUTE_FULL;
  return n;
}

/* Full recompute at one ZeRO stage: the least k (layers recomputed per chunk) that fits, by bisection, since
 * memory falls and time grows with k. k_top is the most worth trying: every layer (k = 0) at the first stage,
 * one less than the least k that fitted at the stage before at a later one (the same k takes the same time
 * there). Costs k_top first: when it does not fit, no smaller k does. Returns the least fitting k (0 for
 * every layer), or -1 when none fits; *e_top receives k_top's evaluation. */
static int32_t full_rungs(grid *gr, plan *p, int32_t z, int32_t k_top, int32_t most, ladder_out *lo,
                          grid_eval *e_top) {
  rung r = {z, PLAN_RECOMPUTE_FULL, k_top >= most ? 0 : k_top};
  if (fixes(gr, PLAN_F_RECOMPUTE_LAYERS)) r.k = gr->o->fixed.recompute_layers;
  grid_set_rung(p, &r);
  *e_top = grid_evaluate(gr, p);
  if (!e_top->valid || !e_top->fits) return -1;
  note_fit(lo, &r, e_top->iter_s);
  if (fixes(gr, PLAN_F_RECOMPUTE_LAYERS) || gr->memory_objective) return r.k;
  int32_t lo_k = 1, hi_k = k_top < most ? k_top : most; /* hi_k fits */
  while (lo_k < hi_k && !gr->stop) {
    int32_t mid = lo_k + (hi_k - lo_k) / 2;
    rung m = {z, PLAN_RECOMPUTE_FULL, mid};
    grid_set_rung(p, &m);
    grid_eval e = grid_evaluate(gr, p);
    if (!e.valid) break;
    if (e.fits) {
      note_fit(lo, &m, e.iter_s);
      hi_k = mid;
    } else {
      if (e.iter_s >= bound_now(gr, lo)) break; /* more layers recompute only slower */
      lo_k = mid + 1;
    }
  }
  return hi_k >= most ? 0 : hi_k;
}

/* The most layers of one chunk (full recompute's largest k). */
static int32_t most_chunk_layers(const grid *gr, const plan *p) {
  int32_t layers[PLAN_MAX_CHUNKS];
  if (!plan_chunk_layers(p, gr->L, layers)) return 1;
  int32_t most = 1;
  for (int64_t c = 0; c < plan_n_chunks(p); c++)
    if (layers[c] > most) most = layers[c];
  return most;
}

/* Runs the ladder on p (mesh, micro-batch and pipeline set), from the first ZeRO stage whose states fit. A
 * rung without a parameter (none, selective, op) takes at least the time it took at the stage before (ZeRO 2
 * takes ZeRO 1's time, ZeRO 3 more), so it is not costed again when it fitted there or was already too slow;
 * full recompute looks only for fewer layers than fitted before. */
void grid_ladder(grid *gr, const grid_mesh *m, plan *p, ladder_out *lo) {
  memset(lo, 0, sizeof *lo);
  lo->best_s = INFINITY;
  lo->first_s = INFINITY;
  lo->frugal_unfit = true;
  plan_recompute rcs[PLAN_RECOMPUTE_COUNT_];
  int n_rc = grid_rc_order(gr, rcs);
  double t_prev[PLAN_RECOMPUTE_COUNT_] = {-1, -1, -1, -1};
  bool fit_prev[PLAN_RECOMPUTE_COUNT_] = {false, false, false, false};
  /* Per rung, lower bounds of its memory at ZeRO 2 and 3 from its last evaluation (0 = unknown); for full
   * recompute, of every layer recomputing. */
  double mem2_prev[PLAN_RECOMPUTE_COUNT_] = {0}, mem3_prev[PLAN_RECOMPUTE_COUNT_] = {0};
  int32_t most = most_chunk_layers(gr, p), k_top = most;
  for (int zi = m->zero_first; zi >= 0 && zi < gr->n_zeros && !gr->stop; zi++) {
    int32_t z = gr->zeros[zi];
    if (zi > m->zero_first && z >= 2 && !grid_zero_shards(m)) continue;
    bool frugal_known = false, frugal_fit = false;
    for (int ri = 0; ri < n_rc && !gr->stop; ri++) {
      bool full = rcs[ri] == PLAN_RECOMPUTE_FULL;
      if (full && k_top < 1) {
        frugal_known = frugal_fit = true; /* every layer fitted at the stage before, so it fits here */
        continue;
      }
      if (!full && !gr->memory_objective && t_prev[ri] >= 0 && (fit_prev[ri] || t_prev[ri] >= bound_now(gr, lo))) {
        if (ri == n_rc - 1) frugal_known = frugal_fit = true; /* unknown: assume it fits (no early stop) */
        continue;
      }
      /* Too big even with the sharding this stage adds: no need to cost it (nor, for full recompute of every
       * layer, any k). */
      double mem_lb = z == 2 ? mem2_prev[ri] : z >= 3 ? mem3_prev[ri] : 0;
      if (gr->chunk_bound_ok && (!full || k_top >= most) && mem_lb > gr->mem_bound_limit) {
        if (ri == n_rc - 1) frugal_known = true;
        continue;
      }
      grid_eval e;
      if (full) {
        int32_t k_tried = k_top;
        int32_t k = full_rungs(gr, p, z, k_top, most, lo, &e);
        if (k >= 0) k_top = (k == 0 ? most : k) - 1;
        if (e.valid && k_tried >= most) {
          mem2_prev[ri] = e.mem_z2_lb;
          mem3_prev[ri] = e.mem_z3_lb;
        }
      } else {
        rung r = {z, rcs[ri], 0};
        grid_set_rung(p, &r);
        e = grid_evaluate(gr, p);
        if (e.valid && e.fits) note_fit(lo, &r, e.iter_s);
        if (e.valid) {
          mem2_prev[ri] = e.mem_z2_lb;
          mem3_prev[ri] = e.mem_z3_lb;
        }
      }
      if (!e.valid) {
        if (ri == 0 && !lo->first_valid) {
          lo->frugal_unfit = false;
          return; /* the configuration is not valid */
        }
        continue;
      }
      t_prev[ri] = e.iter_s; /* unused for full recompute, whose fewer layers take less */
      fit_prev[ri] = e.fits;
      if (ri == n_rc - 1) {
        frugal_known = true;
        frugal_fit = frugal_fit || e.fits;
      }
      if (ri > 0) continue;
      if (!lo->first_valid) {
        lo->first_valid = true;
        lo->first_s = e.iter_s;
        lo->chunk_s = e.chunk_s;
        lo->chunk_w_s = e.chunk_w_s;
        lo->logits_bytes = e.logits_bytes;
      }
      if (gr->memory_objective) continue;
      if (e.fits) return; /* no later stage or saver is faster */
      if (e.iter_s >= bound_now(gr, lo)) {
        lo->frugal_unfit = false; /* every later rung is at least this slow */
        return;
      }
    }
    if (!frugal_known || frugal_fit) lo->frugal_unfit = false;
  }
  if (gr->stop) lo->frugal_unfit = false;
}

/* The most frugal plan of a mesh and micro-batch size at every ZeRO stage: whether any fits. Costs what the
 * ladder did not. */
bool grid_frugal_fits(grid *gr, const grid_mesh *m, plan *p) {
  plan_recompute rcs[PLAN_RECOMPUTE_COUNT_];
  int n_rc = grid_rc_order(gr, rcs);
  for (int zi = m->zero_first < 0 ? 0 : m->zero_first; zi < gr->n_zeros && !gr->stop; zi++) {
    if (zi > m->zero_first && gr->zeros[zi] >= 2 && !grid_zero_shards(m)) continue;
    rung r = {gr->zeros[zi], rcs[n_rc - 1], 0};
    if (r.rc == PLAN_RECOMPUTE_FULL && fixes(gr, PLAN_F_RECOMPUTE_LAYERS)) r.k = gr->o->fixed.recompute_layers;
    grid_set_rung(p, &r);
    grid_eval e = grid_evaluate(gr, p);
    if (!e.valid || e.fits) return true; /* invalid: no evidence, keep going */
  }
  return gr->stop;
}
