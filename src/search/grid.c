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
 *    costed only at the rungs where zb-h1 fits; with every layer alike and an even split, a shallower
 *    interleaving is no faster than a deeper one at its least saver;
 *  - micro-batch size: activations grow with it under every schedule, so once every option's most frugal plan
 *    fails to fit, no larger size is tried.
 * Order: every mesh is first probed once (smallest micro-batch, first schedule, least saver) and the meshes
 * are then explored fastest probe first, so that good plans come early and the cutoff bites. The order of
 * offers, hence the result, depends only on the inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost/bound.h"
#include "search/cands.h"
#include "search/search.h"

enum {
  MAX_OPTS = 80,       /* pipeline options of one micro-batch size */
  MAX_FIT_RUNGS = 16,  /* fitting rungs remembered for the 1F1B shadow */
};

/* TUNING: context parallelism splits the sequence into 2·cp chunks for ring attention; below 4,096 tokens per
 * rank the attention blocks get too small to hide the KV exchange (Megatron-LM's long-context recipes start cp
 * at 8k-token sequences with cp 2). */
static const int64_t CP_MIN_TOKENS = 4096;
/* TUNING: interleaving depths tried whatever the split; deeper ones only where they split the layers evenly
 * (published runs use 2-8, and deeper ones at one or two layers per chunk). */
static const int64_t VPP_ANY_MAX = 8;



static const plan_axis ORDER_DEFAULT[PLAN_N_ORDER] = {PLAN_AXIS_TP, PLAN_AXIS_CP, PLAN_AXIS_EP, PLAN_AXIS_DP,
                                                      PLAN_AXIS_PP};
static const plan_axis ORDER_PP_INNER[PLAN_N_ORDER] = {PLAN_AXIS_TP, PLAN_AXIS_CP, PLAN_AXIS_EP, PLAN_AXIS_PP,
                                                       PLAN_AXIS_DP};

/* What one evaluation told the grid. */
typedef struct {
  bool valid, fits;
  double iter_s, peak_bytes;
  /* The chunks' forward + backward time (S) and weight-gradient time (W) of one micro-batch, summed over all
   * chunks: the same under every schedule, depth and split of the mesh and micro-batch size, for its saver. */
  double chunk_s, chunk_w_s;
  /* Lower bounds of the peak memory of the same plan at ZeRO 2 and ZeRO 3 (plan.h: stage 2 also shards the
   * gradients, stage 3 also the parameters, over a data-parallel group of at most max(dp·cp, edp) ranks): the
   * peak rank's total less the part that sharding can remove. INFINITY when the plan's stage is not below. */
  double mem_z2_lb, mem_z3_lb;
  double logits_bytes; /* the largest rank's logits, which grow in proportion to the micro-batch */
} grid_eval;

/* One mesh: degrees and order, with its probe. */
typedef struct {
  int64_t tp, cp, pp, dp, ep, etp; /* etp as the plan stores it: 0 = tp */
  const plan_axis *order;
  int zero_first; /* index into the ZeRO list of the first stage whose model states fit; -1 when none does */
  int index;      /* enumeration order: the tie-breaker of the sort */
  bool probed;
  plan probe; /* the probe plan and its result, reused when the exploration reaches it */
  grid_eval probe_res;
} grid_mesh;

/* One pipeline option of a micro-batch size. */
typedef struct {
  plan_schedule schedule;
  int64_t vpp;
  bool shadow; /* 1F1B after zb-h1: costed only at zb-h1's fitting rungs */
} pipe_opt;

typedef struct {
  int32_t zero;
  plan_recompute rc;
  int32_t k;
} rung;

/* What one ladder of memory savers found. */
typedef struct {
  bool first_valid;
  double first_s;            /* the least saver's time */
  double chunk_s, chunk_w_s; /* and its chunk sums (grid_eval) */
  double logits_bytes;       /* and its logits (grid_eval) */
  bool any_fit;
  double best_s;
  bool frugal_unfit;     /* the most frugal rung of every ZeRO stage was costed and did not fit */
  int n_fit;
  rung fit[MAX_FIT_RUNGS]; /* the rungs that fitted, and their times */
  double fit_s[MAX_FIT_RUNGS];
} ladder_out;

typedef struct {
  search_run *sr;
  const search_opts *o;
  const cost_env *env;
  const graph *g;
  plan_model_facts facts;
  int64_t n, gbs, seq, L;
  double mem_bound_limit; /* the memory limit the model-state bound is held to: largest device × fraction */
  cost_param_counts params; /* parameters: split by tp, replicated, routed experts */
  bool memory_objective, chunk_bound_ok;
  bool uniform_layers; /* one layer block: every layer costs the same */
  int32_t zeros[4];
  int n_zeros;
  plan base;
  grid_mesh *meshes;
  int n_meshes, cap_meshes;
  const grid_mesh *memo; /* the mesh being explored: its probe answers without a second evaluation */
  cost_result cr;
  int64_t n_fit;
  bool stop;
  ap_status hard;
} grid;

static bool fixes(const grid *gr, plan_field_id f) { return search_space_fixes(search_space_of(gr->sr), f); }

/* ---- Evaluation ---------------------------------------------------------------------------------------- */

static grid_eval eval(grid *gr, const plan *p) {
  grid_eval e = {0};
  if (gr->stop) return e;
  if (gr->memo && gr->memo->probed && plan_equal(p, &gr->memo->probe)) return gr->memo->probe_res;
  ap_status st = search_offer(gr->sr, p, &gr->cr);
  if (st == AP_CANCELLED) gr->stop = true;
  if (st != AP_OK && st != AP_INVALID && st != AP_CANCELLED) {
    gr->hard = st;
    gr->stop = true;
  }
  if (search_should_stop(gr->sr)) gr->stop = true;
  if (st != AP_OK) return e;
  const cost_result *r = &gr->cr;
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

/* ---- Candidate lists ------------------------------------------------------------------------------------ */

static void tp_list(const grid *gr, cands *out) {
  out->n = 0;
  if (fixes(gr, PLAN_F_TP)) {
    cands_add(out, gr->o->fixed.tp);
    return;
  }
  cands all;
  cands_divisors(gr->n, &all);
  int64_t dom = hw_cluster_fast_domain(cost_env_cluster(gr->env));
  const plan_model_facts *f = &gr->facts;
  for (int i = 0; i < all.n; i++) {
    int64_t t = all.v[i];
    if (t > 1 && (!f->has_layers || !f->has_tp_ops || t > dom)) continue;
    if (t > 1 && f->n_attention_ops > 0 && (f->heads % t != 0 || f->kv_heads % t != 0)) continue;
    cands_add(out, t);
  }
}

static void cp_list(const grid *gr, int64_t tp, cands *out) {
  out->n = 0;
  if (fixes(gr, PLAN_F_CP)) {
    cands_add(out, gr->o->fixed.cp);
    return;
  }
  cands_add(out, 1);
  if (!gr->facts.has_layers || gr->facts.n_attention_ops == 0) return;
  for (int64_t c = 2; c <= gr->n / tp && gr->seq / c >= CP_MIN_TOKENS; c *= 2)
    if ((gr->n / tp) % c == 0 && gr->seq % (2 * c) == 0) cands_add(out, c);
}

static void pp_list(const grid *gr, int64_t room, cands *out) {
  out->n = 0;
  if (fixes(gr, PLAN_F_PP)) {
    cands_add(out, gr->o->fixed.pp);
    return;
  }
  if (fixes(gr, PLAN_F_DP)) {
    cands_add(out, gr->o->fixed.dp > 0 && room % gr->o->fixed.dp == 0 ? room / gr->o->fixed.dp : 1);
    return;
  }
  cands all;
  cands_divisors(room, &all);
  for (int i = 0; i < all.n; i++)
    if (all.v[i] <= gr->L && all.v[i] <= PLAN_MAX_CHUNKS) cands_add(out, all.v[i]);
}

static void ep_list(const grid *gr, int64_t dense, cands *out) {
  out->n = 0;
  if (fixes(gr, PLAN_F_EP) || gr->facts.n_experts <= 0) {
    cands_add(out, fixes(gr, PLAN_F_EP) ? gr->o->fixed.ep : 1);
    return;
  }
  cands all;
  cands_divisors(gr->facts.n_experts, &all);
  for (int i = 0; i < all.n; i++)
    if (dense % all.v[i] == 0) cands_add(out, all.v[i]);
}

/* The micro-batch sizes of a mesh, ascending. */
static void mbs_list(const grid *gr, int64_t dp, cands *out) {
  out->n = 0;
  if (fixes(gr, PLAN_F_MICRO_BATCH_SIZE)) {
    cands_add(out, gr->o->fixed.micro_batch_size);
    return;
  }
  if (gr->gbs % dp != 0) return;
  if (fixes(gr, PLAN_F_N_MICRO_BATCHES)) {
    int64_t m = gr->o->fixed.n_micro_batches;
    if (m > 0 && (gr->gbs / dp) % m == 0) cands_add(out, gr->gbs / dp / m);
    return;
  }
  cands_divisors(gr->gbs / dp, out);
  if (gr->memory_objective && out->n > 1) out->n = 1; /* memory grows with the micro-batch */
}

/* Whether zero stage z shards anything on this mesh (else it equals stage 1 with more memory). */
static bool zero_shards(const grid_mesh *m) {
  int64_t etp = m->etp > 0 ? m->etp : m->tp;
  int64_t edp = m->tp * m->cp * m->dp / (etp * m->ep);
  return m->dp * m->cp > 1 || edp > 1;
}

/* The model states' lower bound of the peak memory per device (cost/bound.c) for mesh m at ZeRO stage z. */
static double states_bound(const grid *gr, const grid_mesh *m, int32_t z) {
  /* Offloaded states leave device memory (cost/offload.c): no bound from them then. */
  if (gr->o->fixed.offload_optimizer != PLAN_OFFLOAD_NONE || gr->o->fixed.offload_param != PLAN_OFFLOAD_NONE) return 0;
  return cost_bound_states_bytes(gr->env, &gr->params, m->tp, m->cp, m->dp, m->pp, m->ep, m->etp, z);
}

static void add_mesh(grid *gr, const grid_mesh *m) {
  if (gr->n_meshes == gr->cap_meshes) {
    /* From the run's arena, doubling: the old array stays there until the run ends (at most as much again). */
    int cap = gr->cap_meshes ? 2 * gr->cap_meshes : 64;
    grid_mesh *grown = arena_alloc(search_arena(gr->sr), sizeof *grown * (size_t)cap);
    if (!grown) {
      gr->hard = AP_NOMEM;
      gr->stop = true;
      return;
    }
    if (gr->n_meshes) memcpy(grown, gr->meshes, sizeof *grown * (size_t)gr->n_meshes);
    gr->meshes = grown;
    gr->cap_meshes = cap;
  }
  grid_mesh *dst = &gr->meshes[gr->n_meshes];
  *dst = *m;
  dst->index = gr->n_meshes++;
  dst->zero_first = -1;
  for (int zi = 0; zi < gr->n_zeros; zi++)
    if (states_bound(gr, dst, gr->zeros[zi]) <= gr->mem_bound_limit) {
      dst->zero_first = zi;
      break;
    }
}

static void enum_meshes(grid *gr) {
  cands tps, cps, pps, eps;
  tp_list(gr, &tps);
  for (int ti = 0; ti < tps.n && !gr->stop; ti++) {
    int64_t tp = tps.v[ti];
    if (tp < 1 || gr->n % tp != 0) continue;
    cp_list(gr, tp, &cps);
    for (int ci = 0; ci < cps.n && !gr->stop; ci++) {
      int64_t cp = cps.v[ci];
      if (cp < 1 || gr->n % (tp * cp) != 0) continue;
      pp_list(gr, gr->n / (tp * cp), &pps);
      for (int pi = 0; pi < pps.n && !gr->stop; pi++) {
        int64_t pp = pps.v[pi];
        if (pp < 1 || gr->n % (tp * cp * pp) != 0) continue;
        int64_t dp = gr->n / (tp * cp * pp);
        if (fixes(gr, PLAN_F_DP) && dp != gr->o->fixed.dp) continue;
        if (gr->gbs % dp != 0) continue;
        ep_list(gr, tp * cp * dp, &eps);
        for (int ei = 0; ei < eps.n && !gr->stop; ei++) {
          int64_t ep = eps.v[ei];
          int64_t etps[2] = {0, 1};
          int n_etp = gr->facts.n_experts > 0 && tp > 1 ? 2 : 1;
          if (fixes(gr, PLAN_F_ETP)) {
            etps[0] = gr->o->fixed.etp;
            n_etp = 1;
          }
          for (int xi = 0; xi < n_etp && !gr->stop; xi++) {
            int64_t etp_v = etps[xi] > 0 ? etps[xi] : tp;
            if (ep < 1 || etp_v < 1 || (tp * cp * dp) % (etp_v * ep) != 0) continue;
            const plan_axis *orders[2] = {ORDER_DEFAULT, ORDER_PP_INNER};
            int n_orders = pp > 1 && dp > 1 ? 2 : 1;
            if (fixes(gr, PLAN_F_ORDER)) {
              orders[0] = gr->o->fixed.order;
              n_orders = 1;
            }
            for (int oi = 0; oi < n_orders; oi++) {
              /* Megatron numbers the expert mesh with pp outermost unless edp = dp (plan_validate). */
              if (orders[oi] == ORDER_PP_INNER && gr->facts.n_experts > 0 && etp_v * ep != tp * cp) continue;
              grid_mesh m = {.tp = tp, .cp = cp, .pp = pp, .dp = dp, .ep = ep, .etp = etps[xi], .order = orders[oi]};
              add_mesh(gr, &m);
            }
          }
        }
      }
    }
  }
}

/* ---- Plans ------------------------------------------------------------------------------------------------- */

static void set_mesh(const grid *gr, const grid_mesh *m, plan *p) {
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

static void set_mbs(plan *p, int64_t mbs) {
  p->micro_batch_size = mbs;
  int64_t per = mbs * p->dp;
  p->n_micro_batches = per > 0 && p->global_batch_size % per == 0 ? p->global_batch_size / per : 1;
}

/* The split of the layers into pp·vpp chunks (unless fixed): the even split, or, when there are more chunks
 * than layers but at most two more, Megatron's split that counts the embedding and the loss as a layer each
 * (complete.c's rule, so that a published 126-layer, 128-chunk plan is in the space). */
static void set_split(const grid *gr, plan *p) {
  if (fixes(gr, PLAN_F_STAGE_LAYERS)) return;
  p->n_stage_layers = 0;
  int64_t L = gr->L, c = plan_n_chunks(p);
  if (!gr->facts.has_layers || c <= L || c > L + 2 || c > PLAN_MAX_CHUNKS) return;
  if (!plan_split_even(L + 2, c, p->stage_layers)) return;
  p->stage_layers[0]--;
  p->stage_layers[c - 1]--;
  p->n_stage_layers = (int32_t)c;
}

static void set_pipe(const grid *gr, plan *p, const pipe_opt *po) {
  p->schedule = po->schedule;
  p->vpp = po->vpp;
  set_split(gr, p);
}

static void set_rung(plan *p, const rung *r) {
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
static int pipe_options(const grid *gr, int64_t pp, int64_t n_micro, pipe_opt *out) {
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
  return n;
}

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
static int rc_order(const grid *gr, plan_recompute *out) {
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
  set_rung(p, &r);
  *e_top = eval(gr, p);
  if (!e_top->valid || !e_top->fits) return -1;
  note_fit(lo, &r, e_top->iter_s);
  if (fixes(gr, PLAN_F_RECOMPUTE_LAYERS) || gr->memory_objective) return r.k;
  int32_t lo_k = 1, hi_k = k_top < most ? k_top : most; /* hi_k fits */
  while (lo_k < hi_k && !gr->stop) {
    int32_t mid = lo_k + (hi_k - lo_k) / 2;
    rung m = {z, PLAN_RECOMPUTE_FULL, mid};
    set_rung(p, &m);
    grid_eval e = eval(gr, p);
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
static void ladder(grid *gr, const grid_mesh *m, plan *p, ladder_out *lo) {
  memset(lo, 0, sizeof *lo);
  lo->best_s = INFINITY;
  lo->first_s = INFINITY;
  lo->frugal_unfit = true;
  plan_recompute rcs[PLAN_RECOMPUTE_COUNT_];
  int n_rc = rc_order(gr, rcs);
  double t_prev[PLAN_RECOMPUTE_COUNT_] = {-1, -1, -1, -1};
  bool fit_prev[PLAN_RECOMPUTE_COUNT_] = {false, false, false, false};
  /* Per rung, lower bounds of its memory at ZeRO 2 and 3 from its last evaluation (0 = unknown); for full
   * recompute, of every layer recomputing. */
  double mem2_prev[PLAN_RECOMPUTE_COUNT_] = {0}, mem3_prev[PLAN_RECOMPUTE_COUNT_] = {0};
  int32_t most = most_chunk_layers(gr, p), k_top = most;
  for (int zi = m->zero_first; zi >= 0 && zi < gr->n_zeros && !gr->stop; zi++) {
    int32_t z = gr->zeros[zi];
    if (zi > m->zero_first && z >= 2 && !zero_shards(m)) continue;
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
        set_rung(p, &r);
        e = eval(gr, p);
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
static bool frugal_fits(grid *gr, const grid_mesh *m, plan *p) {
  plan_recompute rcs[PLAN_RECOMPUTE_COUNT_];
  int n_rc = rc_order(gr, rcs);
  for (int zi = m->zero_first < 0 ? 0 : m->zero_first; zi < gr->n_zeros && !gr->stop; zi++) {
    if (zi > m->zero_first && gr->zeros[zi] >= 2 && !zero_shards(m)) continue;
    rung r = {gr->zeros[zi], rcs[n_rc - 1], 0};
    if (r.rc == PLAN_RECOMPUTE_FULL && fixes(gr, PLAN_F_RECOMPUTE_LAYERS)) r.k = gr->o->fixed.recompute_layers;
    set_rung(p, &r);
    grid_eval e = eval(gr, p);
    if (!e.valid || e.fits) return true; /* invalid: no evidence, keep going */
  }
  return gr->stop;
}

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
  mbs_list(gr, m->dp, &mbs);
  plan p;
  set_mesh(gr, m, &p);
  double logits_per_seq = 0; /* the logits of one sequence on the fullest rank, from the first evaluation */
  for (int bi = 0; bi < mbs.n && !gr->stop; bi++) {
    /* Logits grow with the micro-batch and no saver removes them: once they alone overflow, stop. */
    if (gr->chunk_bound_ok && logits_per_seq * (double)mbs.v[bi] > gr->mem_bound_limit) break;
    set_mbs(&p, mbs.v[bi]);
    pipe_opt opts[MAX_OPTS];
    int n_opts = pipe_options(gr, m->pp, p.n_micro_batches, opts);
    bool any_fit = false, all_unfit = true, have_sums = false;
    double S = 0, W = 0, m_d = (double)p.n_micro_batches, pp_d = (double)m->pp;
    ladder_out zb = {0};
    double even_floor_s = -1; /* the least saver's time at the last evenly split interleaving, deeper first */
    for (int oi = 0; oi < n_opts && !gr->stop; oi++) {
      set_pipe(gr, &p, &opts[oi]);
      /* Layers all alike and split evenly: every rank runs the same work at any depth v, so the iteration
       * takes m·max + (sum - max)/v plus the same synchronisation, less at every saver for a deeper v. A
       * shallower even depth is thus no faster than a deeper one at its least saver. */
      bool even = gr->uniform_layers && p.schedule == PLAN_SCHED_INTERLEAVED_1F1B && p.n_stage_layers == 0 &&
                  gr->L % plan_n_chunks(&p) == 0;
      if ((even && even_floor_s >= search_cutoff_s(gr->sr)) ||
          (have_sums && pipe_bound_s(&opts[oi], m_d, pp_d, S, W) >= search_cutoff_s(gr->sr))) {
        all_unfit = false;
        continue;
      }
      if (opts[oi].shadow) {
        /* 1F1B: the memory of zb-h1 and never faster; cost it where zb-h1 fits fast enough to rank. */
        for (int k = 0; k < zb.n_fit && !gr->stop; k++) {
          if (zb.fit_s[k] >= search_cutoff_s(gr->sr)) continue;
          set_rung(&p, &zb.fit[k]);
          eval(gr, &p);
        }
        continue;
      }
      ladder_out lo;
      ladder(gr, m, &p, &lo);
      if (opts[oi].schedule == PLAN_SCHED_ZB_H1) zb = lo;
      if (even && lo.first_valid) even_floor_s = lo.first_s;
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
  mbs_list(gr, m->dp, &mbs);
  if (mbs.n == 0) return;
  plan p;
  set_mesh(gr, m, &p);
  set_mbs(&p, mbs.v[0]);
  pipe_opt opts[MAX_OPTS];
  int n_opts = pipe_options(gr, m->pp, p.n_micro_batches, opts);
  plan_recompute rcs[PLAN_RECOMPUTE_COUNT_];
  rc_order(gr, rcs);
  rung r = {gr->zeros[m->zero_first], rcs[0], 0};
  if (r.rc == PLAN_RECOMPUTE_FULL && fixes(gr, PLAN_F_RECOMPUTE_LAYERS)) r.k = gr->o->fixed.recompute_layers;
  for (int oi = 0; oi < n_opts && !gr->stop; oi++) {
    if (opts[oi].shadow) continue;
    set_pipe(gr, &p, &opts[oi]);
    set_rung(&p, &r);
    grid_eval e = eval(gr, &p);
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
  int n_layer_blocks = 0;
  for (int bi = 0; bi < gr->g->n_blocks; bi++) n_layer_blocks += gr->g->blocks[bi].role == BLOCK_LAYER;
  gr->uniform_layers = n_layer_blocks == 1 && same_device;
  make_base(gr);
  if (fixes(gr, PLAN_F_ZERO_STAGE)) {
    gr->zeros[gr->n_zeros++] = gr->o->fixed.zero_stage;
  } else {
    gr->zeros[gr->n_zeros++] = 1;
    gr->zeros[gr->n_zeros++] = 2;
    gr->zeros[gr->n_zeros++] = 3;
  }

  enum_meshes(gr);
  if (gr->n_meshes == 0 && !gr->stop) {
    /* The fixed fields leave no mesh: offer the template so that validation says why. */
    plan p = gr->base;
    int64_t inner = p.tp * p.cp * p.pp;
    if (!fixes(gr, PLAN_F_DP) && inner > 0 && gr->n % inner == 0) p.dp = gr->n / inner;
    set_mbs(&p, p.micro_batch_size);
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
      mbs_list(gr, m->dp, &mbs);
      if (mbs.n == 0) continue;
      plan p;
      set_mesh(gr, m, &p);
      set_mbs(&p, mbs.v[0]);
      pipe_opt opts[MAX_OPTS];
      if (pipe_options(gr, m->pp, p.n_micro_batches, opts) == 0) continue;
      set_pipe(gr, &p, &opts[0]);
      grid_mesh all = *m;
      all.zero_first = 0; /* every stage, though the states bound rules them out */
      frugal_fits(gr, &all, &p);
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
