/* The grid strategy (search layer): every factorisation of the device count into tp·cp·pp·dp (with ep and
 * etp folded into tp·cp·dp for MoE) and the mesh order, and for each every discrete knob: micro-batch size,
 * schedule with its virtual stages, ZeRO stage and recompute. DESIGN.md "Search"; docs/planner.md.
 *
 * The candidate space (the same that tests/test_search.c enumerates by brute force):
 *  - tp: divisors of the device count up to the innermost link level's domain (one NVLink domain) that divide
 *    the attention heads and the KV heads; cp: 1 and powers of two while each rank keeps >= CP_MIN_TOKENS of
 *    the sequence; pp: divisors of devices/(tp·cp) up to the layer count; dp: the rest, which must divide the
 *    global batch; ep (MoE): divisors of the expert count with etp·ep dividing tp·cp·dp, etp in {tp, 1};
 *  - the mesh order: tp-cp-ep-dp-pp, and tp-cp-ep-pp-dp (pipeline inside data parallelism) when both pp and
 *    dp exceed 1 (with either of degree 1 the two orders number the ranks alike);
 *  - micro-batch size: every divisor of global_batch/dp, ascending;
 *  - schedule: 1f1b for pp = 1; for pp > 1 zb-h1, 1f1b, interleaved-1f1b with vpp from 2 to 8 and any vpp
 *    that splits the layers evenly or leaves an embedding-only and a head-only chunk (Megatron's split, below),
 *    and zb-v (vpp 2). GPipe is left out: it takes the time of 1F1B and holds every micro-batch;
 *  - sequence parallel on when tp > 1 (it only saves memory); precision bf16 unless fixed;
 *  - memory savers: ZeRO 1, 2, 3 (2 and 3 only where a data-parallel group shards something); recompute none,
 *    selective (core attention), op (per-op checkpointing), full on the first k layers of each chunk for every
 *    k. ZeRO 0 is left out:
 *    the distributed optimizer reduce-scatters the same gradient bytes and all-gathers half as many where
 *    plain data parallelism all-reduces them, so it is never slower and holds less.
 * Every fixed field (--fix) replaces its list with its one value.
 *
 * Pruning, each exact under the cost model (it never drops a plan that would enter the top_k; docs/planner.md
 * gives the reasoning, tests/test_search.c checks the grid against brute force):
 *  - memory: the model states alone (parameters, gradients and optimizer states under a ZeRO stage, averaged
 *    over the pipeline ranks, a lower bound of the peak rank) must fit, else that stage, or the whole mesh, is
 *    skipped; a rung that did not fit at one ZeRO stage is not costed at the next when even the sharding that
 *    stage adds (gradients at 2, parameters at 3) cannot bring it under the limit; once the logits alone (which
 *    grow with the micro-batch and which no saver removes) overflow, no larger micro-batch is tried;
 *  - time: per mesh and micro-batch size, the chunks' summed time S bounds every schedule from below through
 *    its closed form (cost_bound_pipeline_s, cost/bound.c, like every bound here), and an option, or the whole micro-batch size, whose bound reaches the
 *    cutoff (the top_k-th best time) is skipped. The model's FLOP over the devices' peak bounds the search;
 *  - dominance among memory savers: a saver never makes an iteration faster (recompute adds compute, ZeRO 3
 *    adds communication, ZeRO 2 takes ZeRO 1's time), so the ladder stops at the first rung that fits, full
 *    recompute's k is the least that fits (bisection: memory falls and time grows with k), and a rung whose
 *    time reaches the cutoff ends the ladder. 1F1B holds the memory of zb-h1 and is never faster, so it is
 *    costed only at the rungs where zb-h1 fits. (No rule orders the interleaving depths: a deeper one has the
 *    smaller bubble but sends once more per chunk, so either can be faster; tests/test_grid_vpp.c);
 *  - micro-batch size: activations grow with it under every schedule, so once every option's most frugal plan
 *    fails to fit, no larger size is tried.
 * Order: every mesh is first probed once (smallest micro-batch, first schedule, least saver) and the meshes
 * are then explored fastest probe first, so that good plans come early and the cutoff bites. The order of
 * offers, hence the result, depends only on the inputs.
 *
 * Files: grid_internal.h (the grid's state and the types below, shared by the four files), grid_space.c (the
 * candidate lists and the meshes), grid_plan.c (a choice made into a plan, and costing it), grid_ladder.c (the
 * ladder of memory savers on one mesh and micro-batch size), and this file (probing, exploring, the strategy).
 * Calls go one way: grid.c -> grid_ladder.c -> grid_plan.c, grid_space.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/stack.h"
#include "search/recipe/grid_internal.h"

/* ---- Exploring one mesh ------------------------------------------------------------------------------------ */

/* A lower bound of the iteration time of pipeline option po at m micro-batches over pp ranks, from the chunk
 * sums S and W of the mesh and micro-batch size (grid_eval): cost/bound.c, beside the closed form it bounds. */
static double pipe_bound_s(const pipe_opt *po, double m, double pp, double S, double W) {
  return cost_bound_pipeline_s(po->schedule, po->vpp, m, pp, S, W);
}

static void explore(grid *gr, grid_mesh *m) {
  if (m->zero_first < 0) return;
  gr->memo = m;
  cands mbs;
  grid_mbs_list(gr, m->dp, &mbs);
  plan p;
  grid_set_mesh(gr, m, &p);
  double logits_per_seq = 0; /* the logits of one sequence on the fullest rank, from the first evaluation */
  for (int bi = 0; bi < mbs.n && !gr->stop; bi++) {
    /* Logits grow with the micro-batch and no saver removes them: once they alone overflow, stop. */
    if (gr->chunk_bound_ok && logits_per_seq * (double)mbs.v[bi] > gr->mem_bound_limit) break;
    grid_set_mbs(&p, mbs.v[bi]);
    pipe_opt opts[MAX_OPTS];
    int n_opts = grid_pipe_options(gr, m->pp, p.n_micro_batches, opts);
    bool any_fit = false, all_unfit = true, have_sums = false;
    double S = 0, W = 0, m_d = (double)p.n_micro_batches, pp_d = (double)m->pp;
    ladder_out zb = {0};
    for (int oi = 0; oi < n_opts && !gr->stop; oi++) {
      grid_set_pipe(gr, &p, &opts[oi]);
      /* No rule ranks the interleaving depths against each other: a deeper one shrinks the bubble but sends
       * once more per chunk (plan_schedule_p2p_crossings), so where the sends are exposed a shallower depth can
       * be faster (tests/test_grid_vpp.c). Only the bound from the chunk sums prunes a depth. */
      if (have_sums && pipe_bound_s(&opts[oi], m_d, pp_d, S, W) >= search_cutoff_s(gr->sr)) {
        all_unfit = false;
        continue;
      }
      if (opts[oi].shadow) {
        /* 1F1B: the memory of zb-h1 and never faster; cost it where zb-h1 fits fast enough to rank. */
        for (int k = 0; k < zb.n_fit && !gr->stop; k++) {
          if (zb.fit_s[k] >= search_cutoff_s(gr->sr)) continue;
          grid_set_rung(&p, &zb.fit[k]);
          grid_evaluate(gr, &p);
        }
        continue;
      }
      ladder_out lo;
      grid_ladder(gr, m, &p, &lo);
      if (opts[oi].schedule == PLAN_SCHED_ZB_H1) zb = lo;
      any_fit |= lo.any_fit;
      all_unfit &= lo.frugal_unfit || !lo.first_valid;
      if (!have_sums && lo.first_valid && gr->chunk_bound_ok) {
        have_sums = true;
        S = lo.chunk_s;
        W = lo.chunk_w_s;
        if (logits_per_seq == 0) logits_per_seq = lo.logits_bytes / (double)mbs.v[bi];
        /* m·S/pp bounds every option and saver of this micro-batch size. */
        if (m_d * S / pp_d >= search_cutoff_s(gr->sr)) {
          all_unfit = false;
          break;
        }
      }
    }
    /* Every option's most frugal plan failed: a larger micro-batch holds more under each of them (the
     * interleaving depths need the micro-batch count to be a multiple of pp, so they count only when present). */
    if (!gr->stop && !any_fit && all_unfit && n_opts > 0 && (m->pp == 1 || p.n_micro_batches % m->pp == 0)) break;
  }
  gr->memo = NULL;
}

/* ---- Probing and ordering ------------------------------------------------------------------------------------ */

/* Costs one plan of the mesh: the smallest micro-batch, the first valid pipeline option, the least saver. */
static void probe(grid *gr, grid_mesh *m) {
  m->probed = false;
  m->probe_res = (grid_eval){0};
  if (m->zero_first < 0) return;
  cands mbs;
  grid_mbs_list(gr, m->dp, &mbs);
  if (mbs.n == 0) return;
  plan p;
  grid_set_mesh(gr, m, &p);
  grid_set_mbs(&p, mbs.v[0]);
  pipe_opt opts[MAX_OPTS];
  int n_opts = grid_pipe_options(gr, m->pp, p.n_micro_batches, opts);
  plan_recompute rcs[PLAN_RECOMPUTE_COUNT_];
  grid_rc_order(gr, rcs);
  rung r = {gr->zeros[m->zero_first], rcs[0], 0};
  if (r.rc == PLAN_RECOMPUTE_FULL && fixes(gr, PLAN_F_RECOMPUTE_LAYERS)) r.k = gr->o->fixed.recompute_layers;
  for (int oi = 0; oi < n_opts && !gr->stop; oi++) {
    if (opts[oi].shadow) continue;
    grid_set_pipe(gr, &p, &opts[oi]);
    grid_set_rung(&p, &r);
    grid_eval e = grid_evaluate(gr, &p);
    if (!e.valid) continue;
    m->probe = p;
    m->probe_res = e;
    m->probed = true;
    return;
  }
}

static int cmp_probe(const void *a, const void *b) {
  const grid_mesh *x = a, *y = b;
  double tx = x->probed ? x->probe_res.iter_s : INFINITY, ty = y->probed ? y->probe_res.iter_s : INFINITY;
  if (tx < ty) return -1;
  if (tx > ty) return 1;
  return (x->index > y->index) - (x->index < y->index);
}

/* ---- The strategy --------------------------------------------------------------------------------------------- */

/* The template of every plan: the fixed fields, the batch, bf16 unless the precision is fixed. */
static void make_base(grid *gr) {
  gr->base = gr->o->fixed;
  gr->base.global_batch_size = gr->gbs;
  gr->base.seq_length = gr->o->seq_length;
  if (!fixes(gr, PLAN_F_PRECISION)) gr->base.precision = PLAN_PREC_BF16;
  if (!fixes(gr, PLAN_F_STAGE_LAYERS)) gr->base.n_stage_layers = 0;
  gr->base.n_chunk_recompute = 0;
}

static bool grid_applies(const search_run *sr) {
  (void)sr;
  return true;
}

static ap_status grid_run(search_run *sr) {
  grid *gr = arena_alloc(search_arena(sr), sizeof *gr);
  if (!gr) return AP_NOMEM;
  gr->sr = sr;
  gr->o = search_options(sr);
  gr->env = search_env(sr);
  gr->g = cost_env_graph(gr->env);
  plan_model_facts_of(gr->g, &gr->facts);
  const hw_cluster *hc = cost_env_cluster(gr->env);
  gr->n = hc->n_devices;
  gr->gbs = gr->o->global_batch_size;
  gr->seq = gr->o->seq_length > 0 ? gr->o->seq_length : gr->g->default_seq;
  gr->L = gr->facts.n_layers > 0 ? gr->facts.n_layers : 1;
  gr->memory_objective = gr->o->objective == SEARCH_OBJ_MEMORY;
  double cap = 0;
  bool same_device = true;
  for (int gi = 0; gi < hc->n_groups; gi++) {
    if ((double)hc->groups[gi].device.mem_bytes > cap) cap = (double)hc->groups[gi].device.mem_bytes;
    same_device &= strcmp(hc->groups[gi].device.name, hc->groups[0].device.name) == 0;
  }
  gr->mem_bound_limit = cap * gr->o->max_mem_fraction;
  /* With node groups of different devices a chunk's time depends on the rank that runs it. */
  gr->chunk_bound_ok = same_device;
  cost_param_counts_of(gr->g, &gr->params);
  make_base(gr);
  if (fixes(gr, PLAN_F_ZERO_STAGE)) {
    gr->zeros[gr->n_zeros++] = gr->o->fixed.zero_stage;
  } else {
    /* The stages the plan's stack runs (plan/stack.h; all for a stack that names none). */
    const plan_stack_info *si = plan_stack_get(gr->o->fixed.stack);
    unsigned zmask = si ? si->zero | si->zero_with_pp : 0xEu;
    for (int32_t z = 1; z <= 3; z++)
      if (zmask >> z & 1u) gr->zeros[gr->n_zeros++] = z;
  }

  grid_enum_meshes(gr);
  if (gr->n_meshes == 0 && !gr->stop) {
    /* The fixed fields leave no mesh: offer the template so that validation says why. */
    plan p = gr->base;
    int64_t inner = p.tp * p.cp * p.pp;
    if (!fixes(gr, PLAN_F_DP) && inner > 0 && gr->n % inner == 0) p.dp = gr->n / inner;
    grid_set_mbs(&p, p.micro_batch_size);
    search_offer(sr, &p, NULL);
  }
  double bound = cost_bound_compute_s(gr->env, gr->base.precision, gr->gbs, gr->seq);
  /* Probe every mesh, then explore them fastest probe first. */
  for (int i = 0; i < gr->n_meshes && !gr->stop; i++) {
    probe(gr, &gr->meshes[i]);
    search_progress(sr, 0.2 * (i + 1) / gr->n_meshes);
  }
  if (!gr->stop && gr->n_meshes > 1) qsort(gr->meshes, (size_t)gr->n_meshes, sizeof gr->meshes[0], cmp_probe);
  for (int i = 0; i < gr->n_meshes && !gr->stop; i++) {
    if (bound >= search_cutoff_s(sr)) break; /* no plan can be faster than the devices' peak */
    if (!gr->meshes[i].probed) continue;
    explore(gr, &gr->meshes[i]);
    search_progress(sr, 0.2 + 0.8 * (i + 1) / gr->n_meshes);
  }
  /* Nothing fits: cost the most frugal plan of the meshes the states bound ruled out, so that the report can
   * show how far they are from fitting. */
  if (gr->n_fit == 0 && !gr->stop) {
    for (int i = 0; i < gr->n_meshes && !gr->stop; i++) {
      grid_mesh *m = &gr->meshes[i];
      if (m->zero_first >= 0) continue;
      cands mbs;
      grid_mbs_list(gr, m->dp, &mbs);
      if (mbs.n == 0) continue;
      plan p;
      grid_set_mesh(gr, m, &p);
      grid_set_mbs(&p, mbs.v[0]);
      pipe_opt opts[MAX_OPTS];
      if (grid_pipe_options(gr, m->pp, p.n_micro_batches, opts) == 0) continue;
      grid_set_pipe(gr, &p, &opts[0]);
      grid_mesh all = *m;
      all.zero_first = 0; /* every stage, though the states bound rules them out */
      grid_frugal_fits(gr, &all, &p);
    }
  }
  return gr->hard;
}

const search_strategy search_grid = {
    .name = "grid",
    .summary = "every factorisation of the devices and every discrete knob, pruned by memory and time bounds",
    .applies = grid_applies,
    .run = grid_run,
};
