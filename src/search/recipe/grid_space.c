/* The grid's candidate space (search layer): the lists of tp, cp, pp, ep and micro-batch sizes, and the meshes
 * they make (degrees, mesh order and the first ZeRO stage whose model states fit). grid.c's top comment gives
 * the space and the pruning; grid.c and grid_ladder.c call the three functions grid_internal.h names. */
#include <stdlib.h>
#include <string.h>

#include "plan/stack.h"
#include "search/recipe/grid_internal.h"

/* TUNING: context parallelism splits the sequence into 2·cp chunks for ring attention; below 4,096 tokens per
 * rank the attention blocks get too small to hide the KV exchange (Megatron-LM's long-context recipes start cp
 * at 8k-token sequences with cp 2). */
static const int64_t CP_MIN_TOKENS = 4096;

static const plan_axis ORDER_DEFAULT[PLAN_N_ORDER] = {PLAN_AXIS_TP, PLAN_AXIS_CP, PLAN_AXIS_EP, PLAN_AXIS_DP,
                                                      PLAN_AXIS_PP};
static const plan_axis ORDER_PP_INNER[PLAN_N_ORDER] = {PLAN_AXIS_TP, PLAN_AXIS_CP, PLAN_AXIS_EP, PLAN_AXIS_PP,
                                                       PLAN_AXIS_DP};

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
void grid_mbs_list(const grid *gr, int64_t dp, cands *out) {
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
bool grid_zero_shards(const grid_mesh *m) {
  int64_t etp = m->etp > 0 ? m->etp : m->tp;
  int64_t edp = m->tp * m->cp * m->dp / (etp * m->ep);
  return m->dp * m->cp > 1 || edp > 1;
}

/* The model states' lower bound of the peak memory per device (cost/bound.c) for mesh m at ZeRO stage z. */
static double states_bound(const grid *gr, const grid_mesh *m, int32_t z) {
  /* Offloaded states leave device memory (cost/offload.c): no bound from them then. */
  if (gr->o->fixed.offload_optimizer != PLAN_OFFLOAD_NONE || gr->o->fixed.offload_param != PLAN_OFFLOAD_NONE) return 0;
  /* A stack whose optimizer shards itself at stage 0 (plan/stack.h zero1_without_zero) is bounded as at 1. */
  plan q = gr->o->fixed;
  q.zero_stage = 0, q.pp = m->pp;
  bool z0_sharded = plan_stack_grads_on(&q, q.stack).zero1_without_zero;
  return cost_bound_states_bytes(gr->env, &gr->params, m->tp, m->cp, m->dp, m->pp, m->ep, m->etp, z, z0_sharded);
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

void grid_enum_meshes(grid *gr) {
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
