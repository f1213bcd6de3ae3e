/* Layer-wise DP (search layer): for a given mesh, schedule and split, how many layers of each pipeline chunk
 * use full recompute, chosen to minimise time with every rank within its memory limit: Galvatron's dynamic
 * programme over layers with memory as the knapsack weight (SURVEY.md §3.3), on the one per-layer choice the
 * plan type expresses (chunk_recompute_layers: the first k layers of chunk c recompute, the rest keep their
 * activations). It refines the best plans that earlier strategies kept: a plan that fits only with full
 * recompute of every layer usually fits with a fraction of them, and a 1F1B pipeline's first ranks, which
 * hold the most micro-batches in flight, need more recompute than its last.
 *
 * Why per rank: a rank's choice changes only its own time t_r = tf + tb and memory, and every schedule's closed
 * form (cost/schedule.c) grows with each t_r, so the least t_r that fits on every rank gives the least pipeline
 * time; the ranks are solved one by one.
 *
 * One rank: its chunks are the knapsack's items, each with options k = 0..n_c (the first k layers recompute),
 * costing the recompute time of those layers and saving their activation bytes (kept minus recomputed). The
 * paths are Pareto sets of (added time, saved bytes) over the chunks done so far, each point with its argmin for
 * backtracking; Galvatron discretises memory into MB and keeps f[v][s] for every budget v, and the Pareto set is
 * the same table with the memory axis kept exact. The transient working memory of a recomputed layer (its full
 * activations while it runs again) is a maximum rather than a sum, so the DP runs once for each bound W on it
 * (0 and every layer block's value), allowing in each chunk only the prefix of layers within W; the least time
 * over the bounds is exact, since each choice is also costed under its own maximum. The option that fits with
 * the least time wins; memory is memory_rank's (cost/memory.c) on the piecewise costs of cost/cost.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search/recipe/search.h"

/* Rounds of single-layer moves that refine an interleaved or ZB-V assignment (search_layer_dp). */
enum { LAYER_DP_CLIMB = 8 };

enum {
  /* TUNING: points one Pareto merge may produce before pruning. A rank of identical layers keeps at most
   * (layers + 1) points; 2^20 leaves room for models that mix a few layer blocks. */
  LAYER_DP_MAX_POINTS = 1 << 20,
};

/* A path: added recompute time and saved activation bytes after some chunks; prev indexes the previous
 * chunk's Pareto set and k is this chunk's choice. */
typedef struct {
  double dt, sv;
  int32_t prev, k;
} ldp_point;

static int cmp_point(const void *a, const void *b) {
  const ldp_point *x = a, *y = b;
  if (x->dt != y->dt) return x->dt < y->dt ? -1 : 1;
  if (x->sv != y->sv) return x->sv > y->sv ? -1 : 1;
  return 0;
}

/* One chunk of a rank: its first unit, layers, and per-prefix recompute time, savings and working bytes. */
typedef struct {
  int64_t chunk, first, n;
  double *dt, *sv, *work; /* [k] for the first k layers, k = 0..n */
} ldp_chunk;

/* The least added time for rank r's chunks under working bound W that fits limit; writes the choice to k_out
 * (indexed like ch) and returns the added time, or +inf. */
static double solve_rank(ap_ctx *ctx, arena *a, const cost_env *env, const plan *p, const rank_cost *r0, int r,
                         const ldp_chunk *ch, int n_ch, double W, double limit, int32_t *k_out, ap_status *st) {
  ldp_point **sets = arena_alloc(a, sizeof(ldp_point *) * (size_t)(n_ch + 1));
  int32_t *n_set = arena_alloc(a, sizeof(int32_t) * (size_t)(n_ch + 1));
  if (!sets || !n_set || !(sets[0] = arena_alloc(a, sizeof(ldp_point)))) {
    *st = ctx_fail(ctx, AP_NOMEM, "out of memory");
    return INFINITY;
  }
  sets[0][0] = (ldp_point){0, 0, -1, 0};
  n_set[0] = 1;
  for (int j = 0; j < n_ch; j++) {
    int64_t kmax = 0;
    while (kmax < ch[j].n && ch[j].work[kmax + 1] <= W) kmax++;
    double n_new = (double)n_set[j] * (double)(kmax + 1);
    if (n_new > LAYER_DP_MAX_POINTS) {
      *st = ctx_fail(ctx, AP_UNSUPPORTED, "layer DP: more than %d Pareto points", LAYER_DP_MAX_POINTS);
      return INFINITY;
    }
    ldp_point *next = arena_alloc(a, sizeof(ldp_point) * (size_t)n_new);
    if (!next) {
      *st = ctx_fail(ctx, AP_NOMEM, "out of memory");
      return INFINITY;
    }
    int32_t m = 0;
    for (int32_t q = 0; q < n_set[j]; q++)
      for (int64_t k = 0; k <= kmax; k++)
        next[m++] = (ldp_point){sets[j][q].dt + ch[j].dt[k], sets[j][q].sv + ch[j].sv[k], q, (int32_t)k};
    qsort(next, (size_t)m, sizeof *next, cmp_point);
    /* Keep the Pareto set: ascending time with strictly increasing savings. */
    int32_t kept = 0;
    for (int32_t q = 0; q < m; q++)
      if (kept == 0 || next[q].sv > next[kept - 1].sv) next[kept++] = next[q];
    sets[j + 1] = next;
    n_set[j + 1] = kept;
  }
  /* The fastest point that fits: memory falls as savings grow along the set. */
  rank_cost rc[COST_MAX_RANKS];
  double b = (double)p->micro_batch_size, s = (double)(p->seq_length > 0 ? p->seq_length : cost_env_graph(env)->default_seq);
  for (int32_t q = 0; q < n_set[n_ch]; q++) {
    const ldp_point *pt = &sets[n_ch][q];
    rc[r] = *r0;
    rc[r].act_bytes -= pt->sv;
    rc[r].working_bytes = fmax(rc[r].working_bytes, W);
    if (memory_rank(env, p, rc, r, b, s).total > limit) continue;
    int32_t at = q;
    for (int j = n_ch; j > 0; j--) {
      k_out[j - 1] = sets[j][at].k;
      at = sets[j][at].prev;
    }
    return pt->dt;
  }
  return INFINITY;
}

/* The closed-form pipeline time of plan q from the piecewise costs: what cost_estimate's pipeline_s will be. */
static double predict(const cost_env *env, const plan *q, const plan_groups *pg, layer_cost *const *lc_of_rank) {
  int32_t chunk_layers[PLAN_MAX_CHUNKS];
  if (!plan_chunk_layers(q, cost_env_n_layers(env), chunk_layers)) return INFINITY;
  rank_cost rc[COST_MAX_RANKS];
  memset(rc, 0, sizeof(rank_cost) * (size_t)q->pp);
  int64_t unit = 0;
  double ctf[PLAN_MAX_CHUNKS], ctb[PLAN_MAX_CHUNKS], ctw[PLAN_MAX_CHUNKS]; /* chunk times, as cost_estimate's */
  for (int64_t c = 0; c < plan_n_chunks(q); c++) {
    int r = (int)plan_chunk_rank(q, c);
    double tf0 = rc[r].tf, tb0 = rc[r].tb, tw0 = rc[r].tw;
    double act = 0;
    for (int64_t i = 0; i < chunk_layers[c]; i++, unit++)
      cost_rank_add_layer(env, q, &lc_of_rank[r][cost_env_unit_block(env)[unit]], plan_layer_recomputes(q, c, i), &rc[r], &act);
    ctf[c] = rc[r].tf - tf0;
    ctb[c] = rc[r].tb - tb0;
    ctw[c] = rc[r].tw - tw0;
    cost_rank_end_chunk(&rc[r], act);
  }
  for (int r = 0; r < q->pp; r++) {
    rank_cost extras;
    cost_rank_extras(env, q, pg, r, &extras);
    cost_rank_merge(&rc[r], &extras);
  }
  cost_time tmp;
  return schedule_pipeline_s(q, rc, (int)q->pp, ctf, ctb, ctw, &tmp);
}

ap_status search_layer_dp_choose(ap_ctx *ctx, arena *a, const cost_env *env, const plan *base, double mem_fraction,
                                 plan *out, double *pipeline_s) {
  ap_status st = plan_validate(ctx, base, cost_env_graph(env), cost_env_cluster(env)->n_devices, "layer DP");
  if (st) return st;
  plan p = *base;
  p.recompute = PLAN_RECOMPUTE_FULL;
  p.recompute_layers = 0;
  int64_t n_chunks = plan_n_chunks(&p);
  p.n_chunk_recompute = (int32_t)n_chunks;
  memset(p.chunk_recompute_layers, 0, sizeof p.chunk_recompute_layers);
  plan_groups pg;
  if ((st = cost_plan_groups(ctx, env, &p, &pg))) return st;
  int32_t chunk_layers[PLAN_MAX_CHUNKS];
  if (!plan_chunk_layers(&p, cost_env_n_layers(env), chunk_layers))
    return ctx_fail(ctx, AP_INVALID, "layer DP: cannot split the layers into %lld chunks", (long long)n_chunks);
  int64_t first[PLAN_MAX_CHUNKS];
  for (int64_t c = 0, u = 0; c < n_chunks; u += chunk_layers[c], c++) first[c] = u;
  const graph *g = cost_env_graph(env);
  double b = (double)p.micro_batch_size, s = (double)(p.seq_length > 0 ? p.seq_length : g->default_seq);

  layer_cost *by_group[HW_MAX_GROUPS] = {0};
  layer_cost *lc_of_rank[COST_MAX_RANKS];
  for (int r = 0; r < p.pp; r++) {
    double cap = 0;
    int grp = cost_rank_group(env, &p, r, &cap);
    if (!by_group[grp]) {
      if (!(by_group[grp] = arena_alloc(a, sizeof(layer_cost) * (size_t)g->n_blocks))) return ctx_fail(ctx, AP_NOMEM, "out of memory");
      for (int bi = 0; bi < g->n_blocks; bi++)
        if (!cost_env_facts(env)->has_layers || g->blocks[bi].role == BLOCK_LAYER)
          by_group[grp][bi] = cost_block_on(env, grp, &p, &pg, bi, b, s);
    }
    const layer_cost *lc = lc_of_rank[r] = by_group[grp];
    /* The rank with no layer recomputing, its chunks' prefix tables, and the bounds W on working bytes. */
    rank_cost r0 = {0};
    ldp_chunk ch[PLAN_MAX_CHUNKS];
    int n_ch = 0;
    double bounds[256];
    int n_bounds = 0;
    bounds[n_bounds++] = 0;
    for (int64_t c = 0; c < n_chunks; c++) {
      if (plan_chunk_rank(&p, c) != r) continue;
      ldp_chunk *C = &ch[n_ch++];
      C->chunk = c;
      C->first = first[c];
      C->n = chunk_layers[c];
      C->dt = arena_alloc(a, sizeof(double) * (size_t)(C->n + 1));
      C->sv = arena_alloc(a, sizeof(double) * (size_t)(C->n + 1));
      C->work = arena_alloc(a, sizeof(double) * (size_t)(C->n + 1));
      if (!C->dt || !C->sv || !C->work) return ctx_fail(ctx, AP_NOMEM, "out of memory");
      double act = 0;
      for (int64_t i = 0; i < C->n; i++) {
        const layer_cost *L = &lc[cost_env_unit_block(env)[C->first + i]];
        cost_rank_add_layer(env, &p, L, false, &r0, &act);
        C->dt[i + 1] = C->dt[i] + L->recompute_full_s;
        C->sv[i + 1] = C->sv[i] + (L->act_bytes[PLAN_RECOMPUTE_NONE] - L->act_bytes[PLAN_RECOMPUTE_FULL]);
        C->work[i + 1] = fmax(C->work[i], L->act_full_working_bytes);
        bool seen = false;
        for (int q = 0; q < n_bounds; q++) seen |= bounds[q] == L->act_full_working_bytes;
        if (!seen && n_bounds < (int)AP_COUNT(bounds)) bounds[n_bounds++] = L->act_full_working_bytes;
      }
      cost_rank_end_chunk(&r0, act);
    }
    rank_cost extras;
    cost_rank_extras(env, &p, &pg, r, &extras);
    cost_rank_merge(&r0, &extras);
    double best = INFINITY;
    int32_t k[PLAN_MAX_CHUNKS], best_k[PLAN_MAX_CHUNKS] = {0};
    for (int q = 0; q < n_bounds; q++) {
      st = AP_OK;
      double dt = solve_rank(ctx, a, env, &p, &r0, r, ch, n_ch, bounds[q], cap * mem_fraction, k, &st);
      if (st) return st;
      if (dt < best) {
        best = dt;
        memcpy(best_k, k, sizeof(int32_t) * (size_t)n_ch);
      }
    }
    if (!isfinite(best))
      return ctx_fail(ctx, AP_INFEASIBLE, "layer DP: pipeline rank %d does not fit even when every layer recomputes", r);
    for (int j = 0; j < n_ch; j++) p.chunk_recompute_layers[ch[j].chunk] = best_k[j];
  }
  double got = predict(env, &p, &pg, lc_of_rank);
  if (p.vpp > 1) {
    /* Interleaved and ZB-V also pay for chunks that differ within a round (cost/schedule.c), which the
     * per-rank DP does not see: move single recomputed layers between chunks of a rank, or drop one, while
     * that is faster and fits (at most LAYER_DP_CLIMB rounds). */
    cost_result *r = arena_alloc(a, sizeof *r);
    if (!r) return ctx_fail(ctx, AP_NOMEM, "out of memory");
    for (int it = 0; it < LAYER_DP_CLIMB; it++) {
      plan best_q = p;
      double best_t = got;
      for (int64_t from = 0; from < n_chunks; from++)
        for (int64_t to = -1; to < n_chunks; to++) {
          if (to == from || p.chunk_recompute_layers[from] == 0) continue;
          if (to >= 0 && (plan_chunk_rank(&p, to) != plan_chunk_rank(&p, from) ||
                          p.chunk_recompute_layers[to] >= chunk_layers[to]))
            continue;
          plan q = p;
          q.chunk_recompute_layers[from]--;
          if (to >= 0) q.chunk_recompute_layers[to]++;
          double tq = predict(env, &q, &pg, lc_of_rank);
          if (tq < best_t * (1 - 1e-12) && cost_estimate(ctx, env, &q, r) == AP_OK &&
              r->peak_mem_bytes <= mem_fraction * r->capacity_bytes) {
            best_t = tq;
            best_q = q;
          }
        }
      ctx_clear(ctx);
      if (!(best_t < got)) break;
      p = best_q;
      got = best_t;
    }
  }
  *out = p;
  if (pipeline_s) *pipeline_s = got;
  return AP_OK;
}

/* The plainest plan with the same costs: no recompute when no chunk recomputes, recompute_layers when every
 * chunk recomputes the same prefix (all of it: 0), the per-chunk list otherwise. Exporters to Megatron-LM and
 * DeepSpeed know the first two. */
static void canonical(const cost_env *env, plan *p) {
  int32_t layers[PLAN_MAX_CHUNKS];
  if (!plan_chunk_layers(p, cost_env_n_layers(env), layers)) return;
  int32_t most = 0;
  bool all = true;
  for (int32_t c = 0; c < p->n_chunk_recompute; c++) {
    most = p->chunk_recompute_layers[c] > most ? p->chunk_recompute_layers[c] : most;
    all &= p->chunk_recompute_layers[c] == layers[c];
  }
  bool uniform = true;
  for (int32_t c = 0; c < p->n_chunk_recompute; c++)
    uniform &= p->chunk_recompute_layers[c] == (layers[c] < most ? layers[c] : most);
  if (most == 0) {
    p->recompute = PLAN_RECOMPUTE_NONE;
    p->n_chunk_recompute = 0;
  } else if (all || uniform) {
    p->recompute_layers = all ? 0 : most;
    p->n_chunk_recompute = 0;
  }
  if (p->n_chunk_recompute == 0) memset(p->chunk_recompute_layers, 0, sizeof p->chunk_recompute_layers);
}

/* ---- The strategy ---- */

static bool layer_dp_applies(const search_run *sr) {
  const search_opts *o = search_options(sr);
  if (search_opts_fixes(o, PLAN_F_RECOMPUTE_LAYERS)) return false;
  if (search_opts_fixes(o, PLAN_F_RECOMPUTE) && o->fixed.recompute != PLAN_RECOMPUTE_FULL) return false;
  return cost_env_facts(search_env(sr))->has_layers;
}

/* One base of the ranked pool: full recompute chosen per chunk, offered when it differs from the base. */
static ap_status refine_one(search_run *sr, const search_result *base, void *user) {
  (void)user;
  const cost_env *env = search_env(sr);
  const search_opts *opts = search_options(sr);
  ap_ctx scratch;
  memset(&scratch, 0, sizeof scratch);
  plan q;
  ap_status st = search_layer_dp_choose(&scratch, search_arena(sr), env, &base->p, opts->max_mem_fraction, &q, NULL);
  if (st == AP_NOMEM) return st;
  if (st) return AP_OK;
  canonical(env, &q);
  if (!(search_opts_fixes(opts, PLAN_F_RECOMPUTE) && q.recompute != opts->fixed.recompute) && !plan_equal(&q, &base->p))
    st = search_offer(sr, &q, NULL);
  plan_free(&q);
  return st;
}

static ap_status layer_dp_run(search_run *sr) { return search_refine_best(sr, SEARCH_REFINE_K, refine_one, NULL); }

const search_strategy search_layer_dp = {
    .name = "layer-dp",
    .summary = "full recompute per pipeline chunk under each rank's memory limit (Galvatron-style layer DP)",
    .applies = layer_dp_applies,
    .run = layer_dp_run,
};
