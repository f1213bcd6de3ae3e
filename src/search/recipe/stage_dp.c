/* Stage DP (search layer): the split of a model's layers into the pipeline chunks of a given mesh and schedule
 * that minimises the iteration's pipeline time with every rank within its memory limit, by dynamic programming
 * over layers (PipeDream's partitioner and Alpa's inter-operator DP, SURVEY.md §3.1 and §3.4). It refines the
 * best plans that earlier strategies (grid, hetero) kept: the embedding on the first stage and the LM head on
 * the last make equal layer counts unequal stages, a layer count that pp does not divide leaves some stages a
 * layer more, and on node groups of different devices the faster stages should hold more layers. Uneven
 * stage_layers answer all three.
 *
 * The objective is the closed form of the schedule (cost/schedule.c) over the ranks' per-micro-batch times
 * t_r = tf + tb: sum_r t_r + (m - 1)·max_r t_r for gpipe and 1f1b; m·max + (sum - max)/v for interleaved-1f1b
 * with v chunks per rank; m·max + (sum - max) of z_r = max(0, t_r - 2·tw_r) for zb-h1, and of
 * z_r = max(0, t_r - 3·tw_r)/2 for zb-v. Each
 * is A·max_r t_r + B·(sum_r z_r, less max_r z_r for the last three). A maximum plus a sum does not decompose
 * over prefixes, so, as Alpa's training_dp does, the DP minimises the sum under a bound t_max on every stage,
 * and the bound runs over the sorted distinct stage times: the optimum is found when t_max equals the optimal
 * split's slowest stage. The scan starts at the least feasible bound (a binary search) and stops once
 * A·t_max + B·(the least sum under no bound) cannot beat the best found. "Less the largest z" is the least sum
 * over the choice of one stage left out of it, so the DP carries one bit more: whether a stage has been left
 * out yet. Memory enters as a per-stage constraint: a stage that would exceed its rank's limit is no option.
 *
 * The three kinds of object (search.h): the options are the stage tables t[r][i][k] and z[r][i][k], rank r
 * running layers [i, k) (+inf where it would not fit or may not be empty); the paths are g[e][r][k], the least
 * sum of the shares of ranks 0..r-1 covering layers [0, k) under the bound, with the argmin for backtracking;
 * the plan is the base with stage_layers set. Stage times come from the cost layer's piecewise costs
 * (cost/cost.h, piecewise section), the same sums cost_estimate makes, so the DP's prediction is the finished plan's
 * pipeline_s.
 *
 * With vpp > 1 (interleaved-1f1b, zb-v) a rank's chunks are not contiguous. The DP then requires every layer to
 * be of one block, so that a rank's cost depends only on how many layers it holds, gives rank r a count n_r
 * and spreads n_r over its v chunks as evenly as possible (its first n_r mod v chunks one more; a rank that
 * holds the first or the last chunk may leave it empty when it has fewer layers than chunks), then refines the
 * chunks by single-layer moves from that spread and from the same counts with the first and last chunk empty
 * (alt_split). Layers of several blocks (dense and MoE, full and windowed attention) are split exactly with
 * vpp = 1. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost/bound.h"
#include "search/recipe/search.h"

/* Rounds of single-layer moves that refine an interleaved or ZB-V split (search_stage_dp_split). */
enum { STAGE_DP_CLIMB = 8 };

enum {
  /* TUNING: entries of a stage table, pp·(L+1)² (pp·(L+1) with vpp > 1); 2^24 covers pp 64 over 500 layers,
   * beyond any published pipeline, and bounds one refinement to well under a second. */
  STAGE_DP_MAX_TABLE = 1 << 24,
  /* TUNING: bounds tried after the least feasible one. On one device type the sum of the stage times hardly
   * depends on the split, so the scan ends after a bound or two; on mixed node groups it takes a few dozen. */
  STAGE_DP_MAX_SCAN = 4096,
};

typedef struct {
  const cost_env *env;
  plan p; /* the base, with chunk_recompute_layers cleared */
  plan_groups pg;
  int pp, v;
  int64_t L;
  double b, s;
  /* The objective A·max_r t_r + B·(sum_r z_r, less max_r z_r when excl): see the file comment. */
  double A, B;
  bool excl, zb;
  double zb_w; /* weight-gradient multiples a zero-bubble rank's share drops: 2 (zb-h1), 3 (zb-v) */
  size_t w;          /* L + 1 */
  size_t row;        /* entries of one rank's stage table: w², or w with v > 1 */
  double *t, *z;     /* stage tables [r][i][k] (v = 1) or [r][0][n] (v > 1): time, and its share of the sum */
  /* Paths [e][r][k], e = whether a stage is already the excluded one (always 0 without excl): the least sum,
   * its sum of squared stage times (which breaks ties towards even stages), and the argmin's start i and
   * whether that stage was the excluded one. */
  double *g, *g2;
  int32_t *arg;
  unsigned char *arg_x;
  int32_t chunk_of[PLAN_MAX_CHUNKS]; /* [r·v + j]: the j-th chunk of rank r, in forward order */
  layer_cost *lc[HW_MAX_GROUPS];     /* per node group: the cost of one layer of each block, computed on demand */
  /* vpp > 1 (one block, no per-chunk recompute counts): per node group, what a chunk of n layers adds to its rank
   * (cost_rank_add_layer n times, then cost_rank_end_chunk), n = 0..L, computed on demand; and each rank's
   * group and non-layer extras. A split's pipeline time is then a merge per chunk (predict_sizes). */
  rank_cost *chunk_cost[HW_MAX_GROUPS];
  double grow_min_s, grow_max_s; /* the least and most one more layer adds to a chunk's tf + tb (chunk costs) */
  int grp_of[COST_MAX_RANKS];
  int rank_of[PLAN_MAX_CHUNKS]; /* [c]: the rank of chunk c (plan_chunk_rank) */
  struct split_state *split;    /* scratch for predict_sizes (vpp > 1) */
  rank_cost extras[COST_MAX_RANKS];
  rank_cost rc[COST_MAX_RANKS];      /* scratch for memory_rank, which reads rc[r] */
} stage_dp;

/* The cost of one layer of each block on node group grp's device. */
static layer_cost *layer_costs(stage_dp *d, arena *a, int grp) {
  if (d->lc[grp]) return d->lc[grp];
  const graph *g = cost_env_graph(d->env);
  layer_cost *lc = arena_alloc(a, sizeof *lc * (size_t)g->n_blocks);
  bool *used = arena_alloc(a, (size_t)g->n_blocks);
  if (!lc || !used) return NULL;
  for (int64_t u = 0; u < d->L; u++) used[cost_env_unit_block(d->env)[u]] = true;
  for (int bi = 0; bi < g->n_blocks; bi++)
    if (used[bi]) lc[bi] = cost_block_on(d->env, grp, &d->p, &d->pg, bi, d->b, d->s);
  return d->lc[grp] = lc;
}

/* Rank r with layers R (its extras not yet added): its time into *t and its share of the schedule's sum into
 * *z, both +inf when it exceeds limit_bytes. */
static void stage_eval(stage_dp *d, int r, rank_cost R, const rank_cost *extras, double limit_bytes, double *t,
                       double *z) {
  cost_rank_merge(&R, extras);
  d->rc[r] = R;
  cost_mem m = memory_rank(d->env, &d->p, d->rc, r, d->b, d->s);
  *t = *z = INFINITY;
  if (m.total > limit_bytes) return;
  *t = R.tf + R.tb;
  *z = d->zb ? fmax(0, *t - d->zb_w * R.tw) : *t;
}

/* How rank r's n layers spread over its v chunks: as evenly as possible (its first n mod v chunks one more),
 * and with fewer layers than chunks, one in each chunk that must hold one (all but a transformer's first and
 * last chunk) and the rest in the others. False when even that is short. */
static bool spread(const stage_dp *d, int r, int64_t n, int64_t *size) {
  int64_t n_chunks = (int64_t)d->pp * d->v, may_be_empty = 0;
  bool empty_ok[PLAN_MAX_CHUNKS];
  for (int j = 0; j < d->v; j++) {
    int64_t c = d->chunk_of[r * d->v + j];
    empty_ok[j] = cost_env_facts(d->env)->has_layers && (c == 0 || c == n_chunks - 1);
    may_be_empty += empty_ok[j];
    size[j] = n / d->v + (j < n % d->v ? 1 : 0);
  }
  if (n >= d->v) return true;
  int64_t left = n - (d->v - may_be_empty);
  if (left < 0) return false;
  for (int j = 0; j < d->v; j++) size[j] = !empty_ok[j] ? 1 : left > 0 ? (left--, 1) : 0;
  return true;
}

static const rank_cost *chunk_costs(stage_dp *d, arena *a, int grp);

/* Adds n layers to R as the chunks of rank r (spread), each from the chunk costs of the rank's node group;
 * false when they cannot be spread or out of memory. (vpp > 1 needs one block.) */
static bool add_spread(stage_dp *d, arena *a, int r, int64_t n, rank_cost *R) {
  int64_t size[PLAN_MAX_CHUNKS];
  const rank_cost *cc = chunk_costs(d, a, d->grp_of[r]);
  if (!cc || !spread(d, r, n, size)) return false;
  for (int j = 0; j < d->v; j++) {
    cost_rank_merge(R, &cc[size[j]]);
    R->n_layers += cc[size[j]].n_layers;
  }
  return true;
}

/* Fills the stage tables. */
static ap_status build_table(stage_dp *d, arena *a, double mem_fraction) {
  const cost_env *env = d->env;
  bool layers = cost_env_facts(env)->has_layers;
  for (int r = 0; r < d->pp; r++) {
    double cap = 0;
    int grp = cost_rank_group(env, &d->p, r, &cap);
    double limit = cap * mem_fraction;
    layer_cost *lc = layer_costs(d, a, grp);
    if (!lc) return AP_NOMEM;
    rank_cost extras;
    cost_rank_extras(env, &d->p, &d->pg, r, &extras);
    d->grp_of[r] = grp;
    d->extras[r] = extras;
    double *t = &d->t[(size_t)r * d->row], *z = &d->z[(size_t)r * d->row];
    for (size_t q = 0; q < d->row; q++) t[q] = z[q] = INFINITY;
    if (d->v > 1) {
      for (int64_t n = 0; n <= d->L; n++) {
        rank_cost R = {0};
        if (add_spread(d, a, r, n, &R)) stage_eval(d, r, R, &extras, limit, &t[n], &z[n]);
      }
      continue;
    }
    /* plan_validate: a transformer's first and last chunk may be empty (an embedding-only or head-only stage). */
    bool may_be_empty = layers && (r == 0 || r == d->pp - 1);
    for (int64_t i = 0; i <= d->L; i++) {
      rank_cost acc = {0};
      double act = 0;
      for (int64_t k = i; k <= d->L; k++) {
        if (k > i)
          cost_rank_add_layer(env, &d->p, &lc[cost_env_unit_block(env)[k - 1]], plan_layer_recomputes(&d->p, r, k - 1 - i), &acc,
                              &act);
        if (k == i && !may_be_empty) continue;
        rank_cost R = acc;
        cost_rank_end_chunk(&R, act);
        size_t q = (size_t)i * d->w + (size_t)k;
        stage_eval(d, r, R, &extras, limit, &t[q], &z[q]);
      }
    }
  }
  return AP_OK;
}

/* The index into rank r's tables of layers [i, k). */
static size_t stage_at(const stage_dp *d, int r, int64_t i, int64_t k) {
  size_t base = (size_t)r * d->row;
  return d->v > 1 ? base + (size_t)(k - i) : base + (size_t)i * d->w + (size_t)k;
}

/* Path arrays: state (e, r, k). */
static size_t path_at(const stage_dp *d, int e, int r, int64_t k) {
  return ((size_t)e * (size_t)(d->pp + 1) + (size_t)r) * d->w + (size_t)k;
}

/* The least sum of the stages' shares (less the excluded one's) of a split whose every stage takes at most
 * tmax, or +inf; fills the argmins. Sums within one part in 10^12 are equal (on one device type every split
 * has the same sum up to rounding), and then the smaller sum of squared stage times, the more even split,
 * wins. */
static double dp_run(stage_dp *d, double tmax) {
  int n_e = d->excl ? 2 : 1;
  for (int e = 0; e < n_e; e++)
    for (int64_t k = 0; k <= d->L; k++) d->g[path_at(d, e, 0, k)] = d->g2[path_at(d, e, 0, k)] = e == 0 && k == 0 ? 0 : INFINITY;
  for (int r = 0; r < d->pp; r++)
    for (int e = 0; e < n_e; e++)
      for (int64_t k = 0; k <= d->L; k++) {
        double best = INFINITY, best2 = INFINITY;
        int32_t at = -1;
        unsigned char x = 0;
        for (int64_t i = 0; i <= k; i++) {
          size_t q = stage_at(d, r, i, k);
          double t = d->t[q];
          if (!(t <= tmax)) continue;
          /* This stage counted (from state e), or, when a stage is to be excluded, this one (from state 0). */
          for (int xi = 0; xi <= e; xi++) {
            size_t from = path_at(d, e - xi, r, i);
            if (!isfinite(d->g[from])) continue;
            double sum = d->g[from] + (xi ? 0 : d->z[q]), sum2 = d->g2[from] + t * t, tol = 1e-12 * sum;
            if (sum < best - tol || (sum <= best + tol && sum2 < best2)) {
              best = sum;
              best2 = sum2;
              at = (int32_t)i;
              x = (unsigned char)xi;
            }
          }
        }
        size_t to = path_at(d, e, r + 1, k);
        d->g[to] = best;
        d->g2[to] = best2;
        d->arg[to] = at;
        d->arg_x[to] = x;
      }
  return d->g[path_at(d, n_e - 1, d->pp, d->L)];
}

/* Backtracks the last dp_run: n[r] layers for rank r; returns the slowest stage's time. */
static double backtrack(const stage_dp *d, int64_t *n) {
  int64_t k = d->L;
  int e = d->excl ? 1 : 0;
  double max = 0;
  for (int r = d->pp - 1; r >= 0; r--) {
    size_t at = path_at(d, e, r + 1, k);
    int64_t i = d->arg[at];
    n[r] = k - i;
    max = fmax(max, d->t[stage_at(d, r, i, k)]);
    e -= d->arg_x[at];
    k = i;
  }
  return max;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The plan's chunks from rank layer counts n (for v > 1 spread as add_spread does). */
static void set_split(const stage_dp *d, const int64_t *n, plan *out) {
  out->n_stage_layers = (int32_t)(d->pp * d->v);
  for (int r = 0; r < d->pp; r++) {
    int64_t size[PLAN_MAX_CHUNKS];
    spread(d, r, n[r], size);
    for (int j = 0; j < d->v; j++) out->stage_layers[d->chunk_of[r * d->v + j]] = (int32_t)size[j];
  }
}

/* The closed-form pipeline time of plan q (whose split is set) from the piecewise costs: what cost_estimate's
 * pipeline_s will be. */
static double predict(stage_dp *d, arena *a, const plan *q) {
  const cost_env *env = d->env;
  int32_t chunk_layers[PLAN_MAX_CHUNKS];
  if (!plan_chunk_layers(q, d->L, chunk_layers)) return INFINITY;
  rank_cost rc[COST_MAX_RANKS];
  memset(rc, 0, sizeof(rank_cost) * (size_t)d->pp);
  int64_t unit = 0;
  double ctf[PLAN_MAX_CHUNKS], ctb[PLAN_MAX_CHUNKS], ctw[PLAN_MAX_CHUNKS]; /* chunk times, as cost_estimate's */
  for (int64_t c = 0; c < plan_n_chunks(q); c++) {
    int r = (int)plan_chunk_rank(q, c);
    double tf0 = rc[r].tf, tb0 = rc[r].tb, tw0 = rc[r].tw;
    layer_cost *lc = layer_costs(d, a, cost_rank_group(env, q, r, NULL));
    if (!lc) return INFINITY;
    double act = 0;
    for (int64_t i = 0; i < chunk_layers[c]; i++, unit++)
      cost_rank_add_layer(env, q, &lc[cost_env_unit_block(env)[unit]], plan_layer_recomputes(q, c, i), &rc[r], &act);
    ctf[c] = rc[r].tf - tf0;
    ctb[c] = rc[r].tb - tb0;
    ctw[c] = rc[r].tw - tw0;
    cost_rank_end_chunk(&rc[r], act);
  }
  for (int r = 0; r < d->pp; r++) {
    rank_cost extras;
    cost_rank_extras(env, q, &d->pg, r, &extras);
    cost_rank_merge(&rc[r], &extras);
  }
  cost_time tmp;
  return schedule_pipeline_s(q, rc, d->pp, ctf, ctb, ctw, &tmp);
}

/* The chunk costs of node group grp (see stage_dp.chunk_cost), filled on first use. */
static const rank_cost *chunk_costs(stage_dp *d, arena *a, int grp) {
  if (d->chunk_cost[grp]) return d->chunk_cost[grp];
  layer_cost *lc = layer_costs(d, a, grp);
  rank_cost *cc = arena_alloc(a, sizeof *cc * d->w);
  if (!lc || !cc) return NULL;
  const layer_cost *L = &lc[cost_env_unit_block(d->env)[0]];
  rank_cost acc = {0};
  double act = 0;
  for (int64_t n = 0; n <= d->L; n++) {
    if (n > 0) cost_rank_add_layer(d->env, &d->p, L, plan_layer_recomputes(&d->p, 0, n - 1), &acc, &act);
    cc[n] = acc;
    cost_rank_end_chunk(&cc[n], act);
    if (n > 0) {
      double inc = (cc[n].tf + cc[n].tb) - (cc[n - 1].tf + cc[n - 1].tb);
      d->grow_min_s = fmin(d->grow_min_s, inc);
      d->grow_max_s = fmax(d->grow_max_s, inc);
    }
  }
  return d->chunk_cost[grp] = cc;
}

/* With vpp > 1: predict's figure for a split from the chunk costs, in merges per chunk rather than a pass over
 * every layer. A split's state (split_state) holds each chunk's size and times and each rank's cost; rank r's
 * cost is its chunks' costs merged in forward order, then its extras (rank_of_split), so a move of one layer
 * between two chunks rebuilds only their ranks' costs. (Merged per chunk, the sums round differently from
 * predict's layer by layer, within a part in 10^15; the same merges in the same order give the same bits
 * whichever ranks are rebuilt.) */
typedef struct split_state {
  int32_t size[PLAN_MAX_CHUNKS];
  double ctf[PLAN_MAX_CHUNKS], ctb[PLAN_MAX_CHUNKS], ctw[PLAN_MAX_CHUNKS];
  rank_cost rc[COST_MAX_RANKS];
} split_state;

/* Rank r's cost from the sizes of its chunks (and its chunk times into s); false for a size out of range. */
static bool rank_of_split(const stage_dp *d, split_state *s, int r) {
  const rank_cost *cc = d->chunk_cost[d->grp_of[r]];
  rank_cost R = {0};
  for (int j = 0; j < d->v; j++) {
    int32_t c = d->chunk_of[r * d->v + j], n = s->size[c];
    if (n < 0 || n > d->L) return false;
    const rank_cost *C = &cc[n];
    cost_rank_merge(&R, C);
    R.n_layers += C->n_layers;
    s->ctf[c] = C->tf;
    s->ctb[c] = C->tb;
    s->ctw[c] = C->tw;
  }
  cost_rank_merge(&R, &d->extras[r]);
  s->rc[r] = R;
  return true;
}

/* The state of the chunk sizes size[0..pp·v-1] (which need not sum to L); false when a size is out of range
 * or out of memory. */
static bool split_init(stage_dp *d, arena *a, const int32_t *size, split_state *s) {
  int64_t nc = (int64_t)d->pp * d->v;
  memcpy(s->size, size, sizeof(int32_t) * (size_t)nc);
  for (int r = 0; r < d->pp; r++)
    if (!chunk_costs(d, a, d->grp_of[r]) || !rank_of_split(d, s, r)) return false;
  return true;
}

/* The pipeline time of state s (schedule_pipeline_s, which adds the edges to the first and last chunk's times:
 * done here on copies of those two); with lb, also cost_bound_interleaved_s of the same split for one layer's
 * growth on one rank. */
static double split_time(const stage_dp *d, split_state *s, double *lb) {
  int64_t last = (int64_t)d->pp * d->v - 1;
  double keep[6] = {s->ctf[0], s->ctb[0], s->ctw[0], s->ctf[last], s->ctb[last], s->ctw[last]};
  cost_time tmp;
  double t = schedule_pipeline_s(&d->p, s->rc, d->pp, s->ctf, s->ctb, s->ctw, &tmp);
  if (lb) *lb = cost_bound_interleaved_s(&d->p, s->rc, d->pp, s->ctf, s->ctb, d->grow_min_s, d->grow_max_s);
  s->ctf[0] = keep[0], s->ctb[0] = keep[1], s->ctw[0] = keep[2];
  s->ctf[last] = keep[3], s->ctb[last] = keep[4], s->ctw[last] = keep[5];
  return t;
}

/* Chunk c of state s grows by delta layers (its rank's cost rebuilt); false when out of range. */
static bool split_move(const stage_dp *d, split_state *s, int64_t c, int delta) {
  s->size[c] += delta;
  return rank_of_split(d, s, d->rank_of[c]);
}

/* predict's figure for the chunk sizes size[0..pp·v-1] from the chunk costs (split_state). */
static double predict_sizes(stage_dp *d, arena *a, const int32_t *size) {
  split_state *s = d->split;
  return split_init(d, a, size, s) ? split_time(d, s, NULL) : INFINITY;
}

/* The split of rank counts n with every transformer's first and last chunk empty and each rank's other chunks
 * as even as possible (spread over them); false when that is no different from set_split's or leaves a middle
 * chunk empty. */
static bool alt_split(const stage_dp *d, const int64_t *n, plan *out) {
  if (!cost_env_facts(d->env)->has_layers) return false;
  int64_t n_chunks = (int64_t)d->pp * d->v;
  bool differs = false;
  out->n_stage_layers = (int32_t)n_chunks;
  for (int r = 0; r < d->pp; r++) {
    int64_t inner = 0;
    for (int j = 0; j < d->v; j++) {
      int64_t c = d->chunk_of[r * d->v + j];
      inner += c != 0 && c != n_chunks - 1;
    }
    if (inner == 0 || n[r] < inner) return false;
    for (int j = 0, k = 0; j < d->v; j++) {
      int64_t c = d->chunk_of[r * d->v + j];
      int32_t size = c == 0 || c == n_chunks - 1 ? 0 : (int32_t)(n[r] / inner + (k++ < n[r] % inner ? 1 : 0));
      differs |= size != out->stage_layers[c];
      out->stage_layers[c] = size;
    }
  }
  return differs;
}

/* Refines split *cur (pipeline time *t) by single-layer moves between chunks (vpp > 1). Interleaved and ZB-V
 * also pay for chunks that differ within a round (cost/schedule.c), which the
 * per-rank DP does not see: move single layers between chunks while that is faster and fits (at most
 * STAGE_DP_CLIMB rounds, the best move of each). With interleaving, a move out of chunk `from` is never
 * faster than cost_bound_interleaved_s of the split with that chunk one layer shorter and nothing added,
 * with one layer's growth on one rank (grow_min_s..grow_max_s; every group's chunk costs are filled by
 * split_init before the climb), so when that is no better than the best so far, no move out of `from` is
 * tried; the margin of 10^-13 covers the rounding of the bound's sums (a few parts in 10^16 each). A move
 * rebuilds only the two ranks it touches (split_move), which gives the bits a rebuild of every rank gives. */
static ap_status climb(stage_dp *d, ap_ctx *ctx, arena *a, const cost_env *env, double mem_fraction, plan *cur,
                       double *t) {
  int64_t nc = (int64_t)d->pp * d->v;
  cost_result *r = arena_alloc(a, sizeof *r);
  split_state *s = d->split; /* predict_sizes is done with it */
  if (!r) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  bool interleaved = d->p.schedule == PLAN_SCHED_INTERLEAVED_1F1B;
  for (int it = 0; it < STAGE_DP_CLIMB; it++) {
    int64_t best_from = -1, best_to = -1;
    double best_t = *t;
    if (!split_init(d, a, cur->stage_layers, s)) return ctx_fail(ctx, AP_NOMEM, "out of memory");
    for (int64_t from = 0; from < nc; from++) {
      if (s->size[from] == 0) continue;
      int rf = d->rank_of[from];
      split_move(d, s, from, -1);
      double lb = 0;
      if (interleaved) split_time(d, s, &lb);
      if (!(lb * (1 - 1e-13) >= best_t * (1 - 1e-12)))
        for (int64_t to = 0; to < nc; to++) {
          if (from == to) continue;
          int rt = d->rank_of[to];
          rank_cost keep_t = s->rc[rt];
          /* The pipeline time is the larger of schedule_time_s and schedule_lockstep_s (schedule_pipeline_s):
           * when the first, over the pp ranks, already loses, the second, over every chunk, is not needed. */
          double tq = INFINITY, beat = best_t * (1 - 1e-12);
          cost_time tmp;
          if (split_move(d, s, to, +1) && schedule_time_s(&d->p, s->rc, d->pp, &tmp) < beat) tq = split_time(d, s, NULL);
          if (tq < beat) {
            plan q = *cur;
            memcpy(q.stage_layers, s->size, sizeof(int32_t) * (size_t)nc);
            if (cost_estimate(ctx, env, &q, r) == AP_OK && r->peak_mem_bytes <= mem_fraction * r->capacity_bytes) {
              best_t = tq;
              best_from = from;
              best_to = to;
            }
          }
          /* Undo: the size, the rank's cost and the chunk's times (those of its rank's other chunks and of
           * the rank itself are unchanged, or rebuilt from the unchanged sizes when rt == rf). */
          s->size[to]--;
          if (rt == rf) rank_of_split(d, s, rt);
          else {
            s->rc[rt] = keep_t;
            s->ctf[to] = d->chunk_cost[d->grp_of[rt]][s->size[to]].tf;
            s->ctb[to] = d->chunk_cost[d->grp_of[rt]][s->size[to]].tb;
            s->ctw[to] = d->chunk_cost[d->grp_of[rt]][s->size[to]].tw;
          }
        }
      split_move(d, s, from, +1);
    }
    if (!(best_t < *t)) break;
    cur->stage_layers[best_from]--;
    cur->stage_layers[best_to]++;
    *t = best_t;
  }
  return AP_OK;
}

ap_status search_stage_dp_split(ap_ctx *ctx, arena *a, const cost_env *env, const plan *base, double mem_fraction,
                                plan *out, double *pipeline_s) {
  ap_status st = plan_validate(ctx, base, cost_env_graph(env), cost_env_cluster(env)->n_devices, "stage DP");
  if (st) return st;
  stage_dp *d = arena_alloc(a, sizeof *d);
  if (!d) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  d->env = env;
  d->p = *base;
  d->grow_min_s = INFINITY;
  d->grow_max_s = 0;
  if (d->p.n_chunk_recompute > 0) d->p.n_chunk_recompute = 0; /* counts per chunk belong to the old split */
  d->pp = (int)base->pp;
  d->v = (int)base->vpp;
  d->L = cost_env_n_layers(env);
  d->w = (size_t)d->L + 1;
  d->b = (double)base->micro_batch_size;
  d->s = (double)(base->seq_length > 0 ? base->seq_length : cost_env_graph(env)->default_seq);
  /* The closed forms of cost/schedule.c as A·max + B·(sum of z, less the largest when excl). */
  double m = (double)base->n_micro_batches;
  switch (base->schedule) {
  case PLAN_SCHED_GPIPE:
  case PLAN_SCHED_1F1B: /* sum + (m - 1)·max */
    d->A = m - 1;
    d->B = 1;
    break;
  case PLAN_SCHED_INTERLEAVED_1F1B: /* m·max + (sum - max)/v */
    d->A = m;
    d->B = 1.0 / d->v;
    d->excl = true;
    break;
  case PLAN_SCHED_ZB_H1: /* m·max + (sum - max) of z = max(0, t - 2·tw) */
  case PLAN_SCHED_ZB_V:  /* m·max + (sum - max) of z = max(0, t - 3·tw)/2 */
    d->A = m;
    d->B = base->schedule == PLAN_SCHED_ZB_V ? 0.5 : 1;
    d->zb_w = base->schedule == PLAN_SCHED_ZB_V ? 3 : 2;
    d->excl = d->zb = true;
    break;
  default:
    return ctx_fail(ctx, AP_UNSUPPORTED, "stage DP: schedule %d is not modelled", (int)base->schedule);
  }
  if (d->v > 1)
    for (int64_t u = 1; u < d->L; u++)
      if (cost_env_unit_block(env)[u] != cost_env_unit_block(env)[0])
        return ctx_fail(ctx, AP_UNSUPPORTED, "stage DP: interleaving needs layers of one block");
  d->row = d->v > 1 ? d->w : d->w * d->w;
  if ((double)d->pp * (double)d->row > STAGE_DP_MAX_TABLE)
    return ctx_fail(ctx, AP_UNSUPPORTED, "stage DP: %d stages over %lld layers exceed the table limit", d->pp,
                    (long long)d->L);
  int seen[COST_MAX_RANKS] = {0};
  for (int64_t c = 0; c < plan_n_chunks(base); c++) {
    int r = (int)plan_chunk_rank(base, c);
    d->rank_of[c] = r;
    d->chunk_of[r * d->v + seen[r]++] = (int32_t)c;
  }
  if ((st = cost_plan_groups(ctx, env, &d->p, &d->pg))) return st;
  size_t n_t = (size_t)d->pp * d->row, n_g = 2 * (size_t)(d->pp + 1) * d->w;
  d->t = arena_alloc(a, sizeof(double) * n_t);
  d->z = arena_alloc(a, sizeof(double) * n_t);
  d->g = arena_alloc(a, sizeof(double) * n_g);
  d->g2 = arena_alloc(a, sizeof(double) * n_g);
  d->arg = arena_alloc(a, sizeof(int32_t) * n_g);
  d->arg_x = arena_alloc(a, n_g);
  double *cand = arena_alloc(a, sizeof(double) * n_t);
  d->split = d->v > 1 ? arena_alloc(a, sizeof *d->split) : NULL;
  int64_t *n = arena_alloc(a, sizeof(int64_t) * (size_t)d->pp), *best_n = arena_alloc(a, sizeof(int64_t) * (size_t)d->pp);
  if (!d->t || !d->z || !d->g || !d->g2 || !d->arg || !d->arg_x || !cand || !n || !best_n || (d->v > 1 && !d->split))
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  if ((st = build_table(d, a, mem_fraction))) return ctx_fail(ctx, st, "out of memory");

  /* The candidate bounds: the distinct finite stage times, ascending. */
  size_t n_cand = 0;
  for (size_t q = 0; q < n_t; q++)
    if (isfinite(d->t[q])) cand[n_cand++] = d->t[q];
  qsort(cand, n_cand, sizeof *cand, cmp_double);
  size_t n_uniq = 0;
  for (size_t q = 0; q < n_cand; q++)
    if (n_uniq == 0 || cand[q] != cand[n_uniq - 1]) cand[n_uniq++] = cand[q];
  double least_sum = dp_run(d, INFINITY);
  if (!isfinite(least_sum))
    return ctx_fail(ctx, AP_INFEASIBLE, "stage DP: no split of %lld layers into %d stages fits in memory",
                    (long long)d->L, d->pp);
  /* The least feasible bound: feasibility grows with the bound, and the largest candidate is feasible. */
  size_t lo = 0, hi = n_uniq - 1;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (isfinite(dp_run(d, cand[mid]))) hi = mid;
    else lo = mid + 1;
  }
  double best = INFINITY;
  for (size_t j = lo, scanned = 0; j < n_uniq && scanned < STAGE_DP_MAX_SCAN; j++, scanned++) {
    if (d->A * cand[j] + d->B * least_sum >= best) break;
    double sum = dp_run(d, cand[j]);
    if (!isfinite(sum)) continue;
    double max = backtrack(d, n);
    double obj = d->A * max + d->B * sum;
    if (d->v > 1) { /* interleaved and ZB-V also pay for uneven chunks (cost/schedule.c): the exact figure */
      plan q = d->p;
      set_split(d, n, &q);
      obj = predict_sizes(d, a, q.stage_layers);
    }
    if (obj < best * (1 - 1e-12)) {
      best = obj;
      memcpy(best_n, n, sizeof(int64_t) * (size_t)d->pp);
    }
  }
  *out = d->p;
  set_split(d, best_n, out);
  double got = d->v > 1 ? predict_sizes(d, a, out->stage_layers) : predict(d, a, out);
  if (d->v > 1) {
    /* Two starting points: the DP's spread, and the same rank counts with every transformer's first and last
     * chunk left empty (alt_split): a heavy embedding or head may want its chunk empty even where its rank has
     * layers for it, and single-layer moves cannot cross the ridge between the two (moving a layer off the
     * boundary chunk alone unbalances the ranks). The faster that fits wins. */
    plan cur = *out;
    double t = got;
    if ((st = climb(d, ctx, a, env, mem_fraction, &cur, &t))) return st;
    plan alt = *out;
    if (alt_split(d, best_n, &alt)) {
      double t_alt = predict_sizes(d, a, alt.stage_layers);
      cost_result *r = arena_alloc(a, sizeof *r);
      if (!r) return ctx_fail(ctx, AP_NOMEM, "out of memory");
      if (t_alt < INFINITY && cost_estimate(ctx, env, &alt, r) == AP_OK && r->peak_mem_bytes <= mem_fraction * r->capacity_bytes) {
        if ((st = climb(d, ctx, a, env, mem_fraction, &alt, &t_alt))) return st;
        if (t_alt < t * (1 - 1e-12)) cur = alt, t = t_alt;
      }
    }
    *out = cur;
    got = t;
    ctx_clear(ctx);
  }
  if (pipeline_s) *pipeline_s = got;
  return AP_OK;
}

/* ---- The strategy ---- */

static bool stage_dp_applies(const search_run *sr) {
  return !search_opts_fixes(search_options(sr), PLAN_F_STAGE_LAYERS) && cost_env_n_layers(search_env(sr)) >= 2;
}

/* One base of the ranked pool: its split made optimal, offered when faster. */
static ap_status refine_one(search_run *sr, const search_result *base, void *user) {
  (void)user;
  if (plan_n_chunks(&base->p) < 2) return AP_OK;
  ap_ctx scratch;
  memset(&scratch, 0, sizeof scratch);
  plan q;
  double q_s = INFINITY;
  ap_status st = search_stage_dp_split(&scratch, search_arena(sr), search_env(sr), &base->p,
                                       search_options(sr)->max_mem_fraction, &q, &q_s);
  if (st == AP_NOMEM) return st;
  /* Only a faster split is news: the base's own split is among the DP's, so a tie is the base again. */
  if (st || !(q_s < base->r.pipeline_s * (1 - 1e-9))) return AP_OK;
  st = search_offer(sr, &q, NULL);
  plan_free(&q);
  return st;
}

static ap_status stage_dp_run(search_run *sr) { return search_refine_best(sr, SEARCH_REFINE_K, refine_one, NULL); }

const search_strategy search_stage_dp = {
    .name = "stage-dp",
    .summary = "optimal split of the layers into pipeline stages of the best meshes (PipeDream/Alpa inter-op DP)",
    .applies = stage_dp_applies,
    .run = stage_dp_run,
};
