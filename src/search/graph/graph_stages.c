/* The inter-op pass of a general graph (search layer; graph_stages.h). Alpa, Zheng et al. 2022 §5
 * (alpa/pipeline_parallel/stage_construction.py: cluster_layers_and_slice_mesh, training_dp; SURVEY.md §3.1).
 *
 * Layers. The op sequence (node order, which every builder emits topologically) is cut into at most
 * GST_MAX_LAYERS layers of about equal training FLOP (Alpa's layer clustering balances FLOP, §5.2); each cut
 * lies within half a layer's FLOP of its ideal place, where a repeated layer of the export starts (its scope
 * index changes: such cuts make stage problems repeat, and the memo hit), then where the fewest activation
 * bytes cross, then nearest to the ideal place. A block repeated r times is one unit (never split inside).
 *
 * Submeshes (Alpa §5.2): (1, 2^k) inside one host, and (h, devices per host) for h = 1 .. hosts. Logical
 * meshes (configs): 0 = one axis of all the submesh's devices; 1 = [hosts, devices per host] on several
 * hosts, [2, d/2] inside one host (d >= 4); impossible elsewhere.
 *
 * Stage cost. For a range of layers on a submesh and config, the intra-op problem of the range's nodes (the
 * whole graph's problem on that mesh restricted to the range: edges from outside dropped; followers whose
 * leader lies outside follow the range's first member of their group instead, so that identical repeated
 * layers give byte-identical problems) is solved with the requested strategies; its objective, per
 * iteration at n_micro micro-batches of gbs / n_micro, divided by n_micro is the stage's time per
 * micro-batch (the once-per-iteration weight-gradient all-reduce amortised over the micro-batches), plus the
 * send/recv of the activations that cross the stage's end (forward) and of their gradients (backward): each
 * device sends its 1/n share, over the network when the submesh fills hosts or the next one cannot share its
 * host, else over the host's own link (COMM_SENDRECV of the cost model). With one stage the pipeline latency
 * Σ t + (B − 1) max t is the intra-op objective itself, so the pass never loses to today's single stage on
 * the same meshes. Memory: the chosen strategies' training state W and activations A of one micro-batch; under
 * 1F1B a stage followed by s stages holds s + 1 micro-batches (Narayanan et al. 2021 §2.2; Alpa's
 * max_n_succ_stages), so max_succ = floor((limit − W) / A) − 1, and a stage with W + A above the limit is
 * impossible. Identical stage problems (FNV-1a over their numbers) are solved once.
 *
 * Pruning (exact for beating a latency U in hand, the single stage's): Σ t + (B − 1) max t ≥ B · max t, so a
 * candidate with B · t ≥ U is in no better pipeline; t is bounded below by the sum over its nodes of their
 * cheapest strategy (resharding costs are never negative) over B plus its send/recv, and such candidates are
 * marked impossible without a solve. An exact strategy's optimum ends the strategy list of a candidate.
 *
 * The pieces that turn a stage into its price (the submeshes, the problem on a mesh, the range problem, the
 * description of a chosen stage, the pipeline latency) are exported (graph_stages.h): the reader of plan files
 * (graph_plan_read_stages.c) rebuilds a plan's stages with them, so that reading a plan gives its figures to the
 * bit. The stage times are the solvers' sp_eval scores, and the latency is summed in the DP's order. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/graph/graph_stages.h"

/* The reduction of a sharding problem to groups (problem.c). */
AP_HIDDEN ap_status sp_reduce(ap_ctx *ctx, sp_problem *p);

/* ---- layers ---- */

static double node_flop(const graph_problem *gp, int i, double b, double s) {
  const gp_node *nd = &gp->nodes[i];
  const graph_block *blk = &gp->g->blocks[nd->block];
  op_cost oc = graph_op_eval(blk, &blk->ops[nd->op], b, s);
  return nd->repeat * (oc.fwd_gemm_flop + oc.fwd_vector_flop + oc.dgrad_flop + oc.wgrad_flop);
}

typedef struct {
  int f, out, t;
  double bytes;
} span;

static int span_cmp(const void *x, const void *y) {
  const span *a = x, *b = y;
  if (a->f != b->f) return a->f < b->f ? -1 : 1;
  return (a->out > b->out) - (a->out < b->out);
}

/* cross[p] = bytes of the tensors produced before node p and read at or after it (one micro-batch); a tensor
 * read by several later ops crosses each cut up to its last reader once. */
ap_status gstage_crossing_bytes(const graph_problem *gp, double b, double s, double *cross) {
  int n = gp->n_nodes, m = 0;
  const graph *g = gp->g;
  span *sp = malloc((size_t)(g->n_edges > 0 ? g->n_edges : 1) * sizeof *sp);
  double *diff = calloc((size_t)n + 2, sizeof *diff);
  if (!sp || !diff) {
    free(sp), free(diff);
    return AP_NOMEM;
  }
  for (int ei = 0; ei < g->n_edges; ei++) {
    const graph_edge *e = &g->edges[ei];
    int f = gp_node_of(gp, e->from_block, e->from_op), t = gp_node_of(gp, e->to_block, e->to_op);
    if (t > f)
      sp[m++] = (span){f, e->from_out, t, graph_tensor_bytes(&g->blocks[e->from_block].tensors[e->from_tensor], b, s)};
  }
  qsort(sp, (size_t)m, sizeof *sp, span_cmp);
  for (int i = 0; i < m;) {
    int j = i, last = sp[i].t;
    while (j < m && sp[j].f == sp[i].f && sp[j].out == sp[i].out) last = sp[j].t > last ? sp[j].t : last, j++;
    diff[sp[i].f + 1] += sp[i].bytes;
    diff[last + 1] -= sp[i].bytes;
    i = j;
  }
  double run = 0;
  for (int p = 0; p <= n; p++) cross[p] = (run += diff[p]);
  free(sp), free(diff);
  return AP_OK;
}

/* Positions where a cut may go: between nodes of different blocks or inside a block run once. */
bool gstage_cut_ok(const graph_problem *gp, int p) {
  const gp_node *a = &gp->nodes[p - 1], *b = &gp->nodes[p];
  return a->block != b->block || gp->g->blocks[a->block].repeat == 1;
}

/* A hash of the digit runs of an op's name that index a module list ("/h.3/", "/block.2/layer.1/": a '.'
 * before, a '/' after): the layer indices an exporter names by (torch.onnx does). Ops of one repeated layer share it. */
static uint64_t scope_index(const graph_problem *gp, int i) {
  const gp_node *nd = &gp->nodes[i];
  const char *n = gp->g->blocks[nd->block].ops[nd->op].name;
  uint64_t h = 1469598103934665603ULL;
  for (const char *p = n ? n : ""; *p;) {
    if (*p < '0' || *p > '9') {
      p++;
      continue;
    }
    const char *q = p;
    while (*q >= '0' && *q <= '9') q++;
    if (*q == '/' && p > n && p[-1] == '.') /* a module list's index ("h.3/"), not a name's digit ("ln_2/") */
      for (const char *c = p; c <= q; c++) h = (h ^ (unsigned char)*c) * 1099511628211ULL;
    p = q;
  }
  return h;
}

static int make_layers(const graph_problem *gp, double b, double s, int max_layers, const double *cross,
                       int *first) {
  int n = gp->n_nodes;
  double *cum = malloc(((size_t)n + 1) * sizeof *cum);
  if (!cum) return -1;
  cum[0] = 0;
  for (int i = 0; i < n; i++) cum[i + 1] = cum[i] + node_flop(gp, i, b, s);
  double w = cum[n];
  int L = max_layers < n ? max_layers : n, k = 0;
  /* aligned[p]: p starts another repeated layer (or sublayer) by its scope: cuts there give stage problems that
   * repeat along the model, which the memo solves once */
  bool *aligned = malloc(((size_t)n + 1) * sizeof *aligned);
  if (!aligned) {
    free(cum);
    return -1;
  }
  for (int p = 1; p < n; p++) aligned[p] = scope_index(gp, p) != scope_index(gp, p - 1);
  first[k++] = 0;
  for (int c = 1; c < L && w > 0; c++) {
    double ideal = w * c / L, lo = w * (c - 0.5) / L, hi = w * (c + 0.5) / L;
    int best = -1;
    for (int p = first[k - 1] + 1; p < n; p++) {
      if (cum[p] < lo || !gstage_cut_ok(gp, p)) continue;
      if (cum[p] > hi) break;
      if (best < 0 || aligned[p] > aligned[best] ||
          (aligned[p] == aligned[best] &&
           (cross[p] < cross[best] || (cross[p] == cross[best] && fabs(cum[p] - ideal) < fabs(cum[best] - ideal)))))
        best = p;
    }
    if (best > first[k - 1] && best < n) first[k++] = best;
  }
  first[k] = n;
  free(cum);
  free(aligned);
  return k;
}

/* ---- stage problems ---- */

static int32_t root_of(const graph_problem *gp, int32_t i) {
  while (gp->sp.nodes[i].follow >= 0) i = gp->sp.nodes[i].follow;
  return i;
}

/* The problem of nodes lo..hi of gp (see the file's comment), in arena a. */
ap_status gstage_range_problem(ap_ctx *ctx, arena *a, const graph_problem *gp, int lo, int hi, double limit,
                               sp_problem *sp) {
  const sp_problem *w = &gp->sp;
  int n = hi - lo + 1;
  memset(sp, 0, sizeof *sp);
  sp->a = a;
  sp->file = w->file;
  sp->cost_unit_ms = w->cost_unit_ms;
  sp->n_nodes = n;
  sp->nodes = arena_alloc(a, (size_t)n * sizeof *sp->nodes);
  int32_t *lead = arena_alloc(a, (size_t)gp->n_nodes * sizeof *lead);
  if (!sp->nodes || !lead) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  for (int i = 0; i < gp->n_nodes; i++) lead[i] = -1;
  for (int k = 0; k < n; k++) {
    sp_node *d = &sp->nodes[k];
    *d = w->nodes[lo + k];
    int32_t r = root_of(gp, lo + k);
    if (lead[r] < 0) lead[r] = k, d->follow = -1;
    else d->follow = lead[r];
  }
  int ne = 0;
  for (int e = 0; e < w->n_edges; e++)
    if (w->edges[e].from >= lo && w->edges[e].from <= hi && w->edges[e].to >= lo && w->edges[e].to <= hi) ne++;
  sp->edges = arena_alloc(a, (size_t)(ne > 0 ? ne : 1) * sizeof *sp->edges);
  if (!sp->edges) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  for (int e = 0; e < w->n_edges; e++) {
    sp_edge x = w->edges[e];
    if (x.from < lo || x.from > hi || x.to < lo || x.to > hi) continue;
    x.from -= lo, x.to -= lo;
    sp->edges[sp->n_edges++] = x;
  }
  double worst = 0;
  for (int k = 0; k < n; k++) {
    double m = 0;
    for (int j = 0; j < sp->nodes[k].n_strategies; j++) m = fmax(m, sp->nodes[k].mem_bytes[j]);
    worst += m;
  }
  if (limit > 0 && worst > limit) { /* the budget of one micro-batch in flight, as graph_problem_build's */
    sp->has_budget = true;
    sp->budget_bytes = limit;
    sp->n_points = 1;
    sp->points = arena_alloc(a, sizeof *sp->points);
    int32_t *all = arena_alloc(a, (size_t)n * sizeof *all);
    if (!sp->points || !all) return ctx_fail(ctx, AP_NOMEM, "out of memory");
    for (int k = 0; k < n; k++) all[k] = k;
    sp->points[0] = (sp_point){n, all};
  }
  return sp_reduce(ctx, sp);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *c = p;
  for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ULL; /* FNV-1a, 64-bit (Fowler, Noll, Vo) */
  return h;
}

static uint64_t problem_hash(const sp_problem *sp, uint64_t mesh_key) {
  uint64_t h = fnv(14695981039346656037ULL, &mesh_key, sizeof mesh_key);
  for (int k = 0; k < sp->n_nodes; k++) {
    const sp_node *d = &sp->nodes[k];
    h = fnv(h, &d->n_strategies, sizeof d->n_strategies);
    h = fnv(h, &d->follow, sizeof d->follow);
    h = fnv(h, d->cost, (size_t)d->n_strategies * sizeof *d->cost);
    h = fnv(h, d->mem_bytes, (size_t)d->n_strategies * sizeof *d->mem_bytes);
  }
  for (int e = 0; e < sp->n_edges; e++) {
    const sp_edge *x = &sp->edges[e];
    h = fnv(h, &x->from, sizeof x->from);
    h = fnv(h, &x->to, sizeof x->to);
    size_t cells = (size_t)sp->nodes[x->from].n_strategies * (size_t)sp->nodes[x->to].n_strategies;
    h = fnv(h, x->cost, cells * sizeof *x->cost);
  }
  return fnv(h, &sp->has_budget, sizeof sp->has_budget);
}

typedef struct {
  uint64_t key;
  int n;
  double objective;
  int32_t *choice; /* per node of the range, NULL when infeasible */
} memo_entry;

typedef struct {
  memo_entry *e;
  int n, cap;
} memo;

/* One candidate stage's solved problem. */
typedef struct {
  double obj;        /* per iteration; NAN = impossible */
  int32_t *choice;   /* per node of the range */
  double w_bytes, a_bytes;
} cand;

/* Training state and one micro-batch's activations per device of nodes lo..hi under choice (per range node). */
static void range_mem(const graph_problem *gp, int lo, int hi, const int32_t *choice, double *w, double *act) {
  *w = *act = 0;
  for (int i = 0; i <= hi - lo; i++) {
    const gp_node *nd = &gp->nodes[lo + i];
    const shard_strategy *s = &nd->s[choice[i]];
    *w += nd->repeat * s->weight_mem_bytes;
    *act += nd->repeat * s->act_mem_bytes;
  }
}

/* A stage's time per micro-batch: its intra-op objective (per iteration) over the micro-batches, plus its
 * send/recv (the file's comment). */
static double stage_time_s(double objective_s, double n_micro, double send_s) { return objective_s / n_micro + send_s; }

/* Solves nodes lo..hi of gp with the strategies (the best objective kept), memoised. */
static ap_status solve_range(ap_ctx *ctx, arena *a, const graph_problem *gp, int lo, int hi, uint64_t mesh_key,
                             const gstage_opts *o, memo *mm, gstage_result *r, cand *out) {
  arena *t = arena_new();
  if (!t) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  sp_problem sp;
  ap_status st = gstage_range_problem(ctx, t, gp, lo, hi, o->mem_limit_bytes, &sp);
  out->obj = NAN;
  out->choice = NULL;
  if (st) goto done;
  uint64_t key = problem_hash(&sp, mesh_key);
  int n = hi - lo + 1;
  for (int k = 0; k < mm->n; k++)
    if (mm->e[k].key == key && mm->e[k].n == n) {
      out->obj = mm->e[k].objective;
      out->choice = mm->e[k].choice;
      r->n_memo_hits++;
      goto mem;
    }
  int32_t *gch = arena_alloc(t, (size_t)(sp.n_groups > 0 ? sp.n_groups : 1) * sizeof *gch);
  int32_t *best = arena_alloc(a, (size_t)n * sizeof *best);
  int32_t *full = arena_alloc(t, (size_t)gp->n_nodes * sizeof *full);
  if (!gch || !best || !full) {
    st = ctx_fail(ctx, AP_NOMEM, "out of memory");
    goto done;
  }
  for (int k = 0; k < o->n_strategies; k++) {
    const solve_strategy *ss = solve_strategy_find(o->strategies[k]);
    solve_opts so;
    solve_opts_init(&so);
    so.seed = o->seed;
    if (o->max_evals > 0) so.max_evals = o->max_evals;
    if (o->time_budget_s > 0) so.time_budget_s = o->time_budget_s;
    so.skip_lower_bound = true;
    sp_result sr = {.choice = gch};
    st = ss && ss->sharding ? ss->sharding(ctx, &sp, &so, &sr) : AP_UNSUPPORTED;
    if (st == AP_UNSUPPORTED) { /* elim-dp on a range that is not series-parallel */
      ctx_clear(ctx);
      st = AP_OK;
      continue;
    }
    if (st) goto done;
    r->n_stage_solves++;
    if (sr.status == SOLVE_INFEASIBLE) continue;
    for (int i = 0; i < n; i++) full[lo + i] = gch[sp.group_of[i]];
    double obj = gp_evaluate_range(gp, full, lo, hi).total_s; /* the weight sync's overlap counted */
    if (!(isnan(out->obj) || obj < out->obj)) continue;
    out->obj = obj;
    for (int i = 0; i < n; i++) best[i] = gch[sp.group_of[i]];
    out->choice = best;
    if (ss->exact && sr.status == SOLVE_OPTIMAL) break;
  }
  if (mm->n == mm->cap) {
    int cap = mm->cap ? 2 * mm->cap : 64;
    memo_entry *ne = arena_alloc(a, (size_t)cap * sizeof *ne);
    if (!ne) {
      st = ctx_fail(ctx, AP_NOMEM, "out of memory");
      goto done;
    }
    if (mm->n) memcpy(ne, mm->e, (size_t)mm->n * sizeof *ne);
    mm->e = ne, mm->cap = cap;
  }
  mm->e[mm->n++] = (memo_entry){key, n, out->obj, out->choice};
mem:
  out->w_bytes = out->a_bytes = 0;
  if (out->choice) range_mem(gp, lo, hi, out->choice, &out->w_bytes, &out->a_bytes);
done:
  arena_free(t);
  return st;
}

/* Σ over nodes lo..hi of their cheapest allowed strategy: a lower bound on the range's objective. */
static double range_bound(const graph_problem *gp, int lo, int hi) {
  double sum = 0;
  for (int i = lo; i <= hi; i++) {
    const sp_node *d = &gp->sp.nodes[i];
    double m = INFINITY;
    for (int k = 0; k < d->n_strategies; k++)
      if (!isnan(d->cost[k])) m = fmin(m, d->cost[k]);
    sum += isinf(m) ? 0 : m;
  }
  return sum;
}

/* ---- submeshes and meshes ---- */

int gstage_submeshes(const hw_cluster *c, gstage_submesh *out) {
  int64_t per = c->n_groups > 0 ? c->groups[0].devices_per_node : c->n_devices;
  if (per <= 0 || per > c->n_devices) per = c->n_devices;
  int64_t hosts = c->n_devices / per;
  int n = 0;
  for (int64_t d = 1; d < per && n < GST_MAX_SUBMESHES; d *= 2) out[n++] = (gstage_submesh){1, d, {{0}}};
  for (int64_t h = 1; h <= hosts && n < GST_MAX_SUBMESHES; h++) out[n++] = (gstage_submesh){h, per, {{0}}};
  for (int m = 0; m < n; m++) {
    gstage_submesh *s = &out[m];
    int64_t nd = s->hosts * s->per_host;
    s->shape[0][0] = 1, s->shape[0][1] = nd;
    if (s->hosts > 1) s->shape[1][0] = s->hosts, s->shape[1][1] = s->per_host;
    else if (nd >= 4) s->shape[1][0] = 2, s->shape[1][1] = nd / 2;
  }
  return n;
}

/* Per micro-batch send/recv of `bytes` (whole) out of a stage on submesh s. */
static ap_status send_s(ap_ctx *ctx, const hw_cluster *c, const gstage_submesh *s, double bytes, double *out) {
  int64_t per = c->n_groups > 0 ? c->groups[0].devices_per_node : c->n_devices;
  int64_t nd = s->hosts * s->per_host;
  *out = 0;
  if (bytes <= 0 || c->n_devices < 2) return AP_OK;
  int64_t stride = s->hosts == 1 && 2 * nd <= per ? nd : (per < c->n_devices ? per : nd);
  if (stride >= c->n_devices) stride = c->n_devices / 2;
  comm_group g;
  ap_status st = comm_group_from_cluster(ctx, c, stride, 2, 0, &g);
  if (st) return st;
  *out = 2 * comm_time_s(&g, COMM_SENDRECV, COMM_AUTO, bytes / (double)nd, NULL);
  return AP_OK;
}

ap_status gstage_mesh_problem(ap_ctx *ctx, arena *a, const graph *g, const hw_cluster *c, const compute_model *cm,
                              const int64_t *shape, double b, double s, double n_micro, double limit_bytes,
                              const int32_t *fix, shard_mesh *mesh, graph_problem *gp) {
  int n_axes = shape[0] > 1 ? 2 : 1;
  int64_t shp[2] = {n_axes == 2 ? shape[0] : shape[1], shape[1]};
  ap_status st = shard_mesh_init(ctx, c, n_axes, shp, mesh);
  if (st) return st;
  shard_env env = {cm, mesh, b, s, n_micro, 16.0, HW_DTYPE_BF16};
  gp_opts go = {true, limit_bytes, true, (int32_t *)fix};
  if ((st = graph_problem_build(ctx, a, g, &env, &go, gp))) return st;
  gp->fix = fix;
  gp->env.mesh = mesh;
  gp->mem_limit_bytes = limit_bytes;
  return AP_OK;
}

ap_status gstage_describe(ap_ctx *ctx, arena *a, const hw_cluster *c, const gstage_submesh *sm,
                          const graph_problem *gp, int lo, int hi, const int32_t *range_choice, double objective_s,
                          double next_bytes, double n_micro, gstage *y) {
  memset(y, 0, sizeof *y);
  y->first_node = lo;
  y->last_node = hi;
  y->hosts = sm->hosts;
  y->per_host = sm->per_host;
  y->mesh = *gp->env.mesh;
  y->gp = gp;
  y->choice = arena_alloc(a, (size_t)(gp->n_nodes > 0 ? gp->n_nodes : 1) * sizeof *y->choice);
  if (!y->choice) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  memset(y->choice, 0, (size_t)gp->n_nodes * sizeof *y->choice);
  memcpy(y->choice + lo, range_choice, (size_t)(hi - lo + 1) * sizeof *y->choice);
  ap_status st = send_s(ctx, c, sm, next_bytes, &y->send_s);
  if (st) return st;
  y->time_s = stage_time_s(objective_s, n_micro, y->send_s);
  range_mem(gp, lo, hi, range_choice, &y->weight_mem_bytes, &y->act_mem_bytes);
  return AP_OK;
}

double gstage_latency_s(const gstage *st, int n, double n_micro) {
  double sum = 0, mx = 0;
  for (int q = n - 1; q >= 0; q--) {
    sum = st[q].time_s + sum;
    mx = st[q].time_s > mx ? st[q].time_s : mx;
  }
  return sum + (n_micro - 1) * mx;
}

ap_status gstage_run(ap_ctx *ctx, arena *a, const graph *g, const hw_cluster *c, const compute_model *cm,
                     const gstage_opts *o, gstage_result *r) {
  memset(r, 0, sizeof *r);
  gstage_submesh sm[GST_MAX_SUBMESHES];
  int n_sm = gstage_submeshes(c, sm);
  double B = (double)o->n_micro, b = (double)o->gbs / B;
  /* the whole graph's problem on every submesh and config */
  graph_problem *gps = arena_alloc(a, (size_t)n_sm * GST_N_CONFIGS * sizeof *gps);
  shard_mesh *meshes = arena_alloc(a, (size_t)n_sm * GST_N_CONFIGS * sizeof *meshes);
  if (!gps || !meshes) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  bool *have = arena_alloc(a, (size_t)n_sm * GST_N_CONFIGS * sizeof *have);
  if (!have) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  ap_status st;
  for (int m = 0; m < n_sm; m++)
    for (int k = 0; k < GST_N_CONFIGS; k++) {
      int i = m * GST_N_CONFIGS + k;
      have[i] = false;
      if (sm[m].shape[k][1] == 0) continue;
      if ((st = gstage_mesh_problem(ctx, a, g, c, cm, sm[m].shape[k], b, o->s, B, o->mem_limit_bytes, NULL, &meshes[i],
                                    &gps[i])))
        return st;
      have[i] = true;
    }
  const graph_problem *gp0 = &gps[(n_sm - 1) * GST_N_CONFIGS];
  int N = gp0->n_nodes;
  if (N == 0) return AP_OK;
  double *cross = arena_alloc(a, ((size_t)N + 1) * sizeof *cross);
  if (!cross) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  if (gstage_crossing_bytes(gp0, b, o->s, cross)) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  int L = make_layers(gp0, b, o->s, o->max_layers > 0 ? o->max_layers : GST_MAX_LAYERS, cross, r->layer_first);
  if (L < 0) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  r->n_layers = L;
  /* the stage problem */
  stp_problem p = {0};
  p.a = a;
  p.file = g->name ? g->name : "graph";
  p.n_layers = L;
  p.n_devices = (int32_t)c->n_devices;
  p.n_micro_batches = (int32_t)o->n_micro;
  p.n_submeshes = n_sm;
  p.n_configs = GST_N_CONFIGS;
  p.submesh_size = arena_alloc(a, (size_t)n_sm * sizeof *p.submesh_size);
  size_t cells = (size_t)L * (size_t)L * (size_t)n_sm * GST_N_CONFIGS;
  p.cost = arena_alloc(a, cells * sizeof *p.cost);
  p.max_succ = arena_alloc(a, cells * sizeof *p.max_succ);
  cand *cands = arena_alloc(a, cells * sizeof *cands);
  if (!p.submesh_size || !p.cost || !p.max_succ || !cands) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  for (int m = 0; m < n_sm; m++) p.submesh_size[m] = (int32_t)(sm[m].hosts * sm[m].per_host);
  memo mm = {0};
  for (int i = 0; i < L; i++)
    for (int j = 0; j < L; j++)
      for (int m = 0; m < n_sm; m++)
        for (int k = 0; k < GST_N_CONFIGS; k++) {
          size_t e = stp_at(&p, i, j, m, k);
          p.cost[e] = NAN;
          p.max_succ[e] = -1;
          cands[e].choice = NULL;
          if (j < i || !have[m * GST_N_CONFIGS + k]) continue;
          const graph_problem *gp = &gps[m * GST_N_CONFIGS + k];
          uint64_t key = (uint64_t)(m * GST_N_CONFIGS + k);
          int lo = r->layer_first[i], hi = r->layer_first[j + 1] - 1;
          double snd = 0;
          if (j + 1 < L && (st = send_s(ctx, c, &sm[m], cross[r->layer_first[j + 1]], &snd))) return st;
          if (o->upper_s > 0 && B * (range_bound(gp, lo, hi) / B + snd) >= o->upper_s) {
            r->n_pruned++;
            continue;
          }
          if ((st = solve_range(ctx, a, gp, lo, hi, key, o, &mm, r, &cands[e]))) return st;
          if (isnan(cands[e].obj) || cands[e].w_bytes + cands[e].a_bytes > o->mem_limit_bytes) continue;
          p.cost[e] = stage_time_s(cands[e].obj, B, snd);
          double succ = cands[e].a_bytes > 0 ? floor((o->mem_limit_bytes - cands[e].w_bytes) / cands[e].a_bytes) - 1 : 1e9;
          p.max_succ[e] = (int32_t)fmin(succ, 1e9);
        }
  stp_stage *stages = arena_alloc(a, (size_t)L * sizeof *stages);
  if (!stages) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  stp_result sr = {.stages = stages};
  solve_opts so;
  solve_opts_init(&so);
  r->problem = p;
  if ((st = solve_inter_op(ctx, &p, &so, &sr))) return st;
  if (sr.status == SOLVE_INFEASIBLE) return AP_OK;
  r->found = true;
  r->status = sr.status;
  r->n_stages = sr.n_stages;
  for (int q = 0; q < sr.n_stages; q++) {
    const stp_stage *x = &stages[q];
    size_t e = stp_at(&p, x->first_layer, x->last_layer, x->submesh, x->config);
    int lo = r->layer_first[x->first_layer], hi = r->layer_first[x->last_layer + 1] - 1;
    double next = x->last_layer + 1 < L ? cross[hi + 1] : 0;
    if ((st = gstage_describe(ctx, a, c, &sm[x->submesh], &gps[x->submesh * GST_N_CONFIGS + x->config], lo, hi,
                              cands[e].choice, cands[e].obj, next, B, &r->stages[q])))
      return st;
    r->stages[q].in_flight = sr.n_stages - q; /* 1F1B: the stages after it, plus its own (Narayanan et al. 2021 §2.2) */
  }
  /* the DP's objective, recomputed from the stages as a reader of the plan computes it (the same bits) */
  r->objective_s = gstage_latency_s(r->stages, r->n_stages, B);
  return AP_OK;
}
