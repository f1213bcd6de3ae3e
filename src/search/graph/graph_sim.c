/* The event simulator of op-level plans, its delta simulation and FlexFlow's MCMC on it (search layer;
 * graph_sim.h describes the model). */
#include <math.h>
#include <string.h>

#include "core/rng.h"
#include "search/graph/graph_sim.h"
#include "search/solve/solve.h"

static double mult_of(const graph *g, const graph_edge *e) {
  if (e->carried) return (double)(g->blocks[e->from_block].repeat - 1);
  if (e->from_block == e->to_block) return (double)g->blocks[e->from_block].repeat;
  return 1;
}

ap_status gsim_init(ap_ctx *ctx, arena *a, const graph_problem *gp, gsim *s) {
  return gsim_init_range(ctx, a, gp, 0, gp->n_nodes - 1, s);
}

ap_status gsim_init_range(ap_ctx *ctx, arena *a, const graph_problem *gp, int lo, int hi, gsim *s) {
  memset(s, 0, sizeof *s);
  s->gp = gp;
  s->lo = lo, s->hi = hi;
  int n = s->n = gp->n_nodes, ne = gp->g->n_edges;
  size_t nn = (size_t)(n + 1);
  s->in_start = arena_alloc(a, nn * sizeof(int));
  s->out_start = arena_alloc(a, nn * sizeof(int));
  s->in_edge = arena_alloc(a, (size_t)(ne + 1) * sizeof(int));
  s->out_edge = arena_alloc(a, (size_t)(ne + 1) * sizeof(int));
  s->ready = arena_alloc(a, nn * sizeof(double));
  s->gdone = arena_alloc(a, nn * sizeof(double));
  s->comp_before = arena_alloc(a, nn * sizeof(double));
  s->comm_before = arena_alloc(a, nn * sizeof(double));
  if (!s->in_start || !s->out_start || !s->in_edge || !s->out_edge || !s->ready || !s->gdone || !s->comp_before ||
      !s->comm_before)
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  memset(s->in_start, 0, nn * sizeof(int));
  memset(s->out_start, 0, nn * sizeof(int));
  for (int e = 0; e < ne; e++) {
    const graph_edge *ed = &gp->g->edges[e];
    int f = gp_node_of(gp, ed->from_block, ed->from_op), t = gp_node_of(gp, ed->to_block, ed->to_op);
    if (f == t || ed->carried) continue; /* a repeat's hand-over to itself: inside the node's scaled time */
    if (f < lo || f > hi || t < lo || t > hi) continue; /* crosses the stage's ends */
    s->in_start[t + 1]++;
    s->out_start[f + 1]++;
  }
  for (int i = 0; i < n; i++) s->in_start[i + 1] += s->in_start[i], s->out_start[i + 1] += s->out_start[i];
  int *fi = arena_alloc(a, nn * sizeof(int)), *fo = arena_alloc(a, nn * sizeof(int));
  if (!fi || !fo) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  memcpy(fi, s->in_start, nn * sizeof(int));
  memcpy(fo, s->out_start, nn * sizeof(int));
  for (int e = 0; e < ne; e++) {
    const graph_edge *ed = &gp->g->edges[e];
    int f = gp_node_of(gp, ed->from_block, ed->from_op), t = gp_node_of(gp, ed->to_block, ed->to_op);
    if (f == t || ed->carried || f < lo || f > hi || t < lo || t > hi) continue;
    s->in_edge[fi[t]++] = e;
    s->out_edge[fo[f]++] = e;
  }
  return AP_OK;
}

/* Forward and backward resharding seconds of edge e between the chosen strategies. */
/* A transfer of dur_s on one communication stream that can start once its input is ready at ready_s: it
 * queues behind the stream's last transfer and returns when its data is there (ready_s when there is none). */
static double on_stream(double *stream_s, double ready_s, double dur_s) {
  if (dur_s <= 0) return ready_s;
  *stream_s = fmax(*stream_s, ready_s) + dur_s;
  return *stream_s;
}

static void edge_fb(const gsim *s, int e, const int32_t *ch, double *fwd, double *bwd) {
  const graph_problem *gp = s->gp;
  const graph_edge *ed = &gp->g->edges[e];
  int f = gp_node_of(gp, ed->from_block, ed->from_op), t = gp_node_of(gp, ed->to_block, ed->to_op);
  const shard_spec *a = &gp->nodes[f].s[ch[f]].out[ed->from_out], *b = &gp->nodes[t].s[ch[t]].in[ed->to_in];
  double m = mult_of(gp->g, ed);
  if (a->n_dims == b->n_dims) {
    double bytes = graph_tensor_bytes(&gp->g->blocks[ed->from_block].tensors[ed->from_tensor], gp->env.b, gp->env.s);
    shard_reshard_fb(&gp->env, bytes, a, b, NULL, NULL, fwd, bwd);
  } else {
    *fwd = gp_edge_reshard(gp, ed, ch[f], ch[t], NULL, NULL);
    *bwd = 0;
  }
  *fwd *= m;
  *bwd *= m;
}

static double run_from(gsim *s, const int32_t *ch, int first) {
  const graph_problem *gp = s->gp;
  int lo = s->lo, n = s->hi + 1; /* the nodes lo .. n - 1 */
  double comp = first < n ? s->comp_before[first] : 0, comm = first < n ? s->comm_before[first] : 0;
  if (first >= n && n > lo) comp = s->comp_before[n], comm = s->comm_before[n];
  int64_t ev = 0;
  for (int i = first; i < n; i++) {
    s->comp_before[i] = comp, s->comm_before[i] = comm;
    const gp_node *nd = &gp->nodes[i];
    const shard_strategy *st = &nd->s[ch[i]];
    double dep = 0;
    for (int q = s->in_start[i]; q < s->in_start[i + 1]; q++) {
      int e = s->in_edge[q];
      const graph_edge *ed = &gp->g->edges[e];
      int f = gp_node_of(gp, ed->from_block, ed->from_op);
      double fw, bw;
      edge_fb(s, e, ch, &fw, &bw);
      dep = fmax(dep, on_stream(&comm, s->ready[f], fw));
    }
    double start = fmax(comp, dep);
    comp = start + nd->repeat * st->compute_fwd_s;
    s->ready[i] = comp;
    if (st->fwd_comm_s > 0) {
      double cs = fmax(comm, comp);
      comm = cs + nd->repeat * st->fwd_comm_s;
      s->ready[i] = comm;
    }
    ev++;
  }
  s->comp_before[n] = comp, s->comm_before[n] = comm;
  /* Backward, in reverse. */
  double fwd_end = 0;
  for (int i = lo; i < n; i++) fwd_end = fmax(fwd_end, s->ready[i]);
  comp = fmax(comp, fwd_end);
  s->fwd_end_s = fwd_end;
  double bucket_s[4] = {0}, bucket_bytes[4] = {0};
  bool first_bucket[4] = {true, true, true, true};
  for (int i = n - 1; i >= lo; i--) {
    const gp_node *nd = &gp->nodes[i];
    const shard_strategy *st = &nd->s[ch[i]];
    double dep = s->out_start[i] == s->out_start[i + 1] ? fwd_end : 0;
    for (int q = s->out_start[i]; q < s->out_start[i + 1]; q++) {
      int e = s->out_edge[q];
      const graph_edge *ed = &gp->g->edges[e];
      int t = gp_node_of(gp, ed->to_block, ed->to_op);
      double fw, bw;
      edge_fb(s, e, ch, &fw, &bw);
      dep = fmax(dep, on_stream(&comm, s->gdone[t], bw));
    }
    double start = fmax(comp, dep);
    comp = start + nd->repeat * (st->compute_s - st->compute_fwd_s);
    s->gdone[i] = comp;
    if (st->bwd_comm_s > 0) {
      double cs = fmax(comm, comp);
      comm = cs + nd->repeat * st->bwd_comm_s;
      s->gdone[i] = comm;
    }
    if (st->wgrad_comm_s > 0 && !s->skip_wgrad) {
      /* DDP's buckets (shard.h SHARD_BUCKET_BYTES): the gradient joins the open bucket of its axes; a bucket
       * that is full is all-reduced once its last gradient is ready (the first at 1 MiB), overlapped with the
       * backward compute that follows. wgrad_comm_s is the op's share of its bucket's all-reduce. */
      int q = st->wgrad_mask & 3u;
      bucket_s[q] += nd->repeat * st->wgrad_comm_s;
      bucket_bytes[q] += nd->repeat * st->wgrad_bytes;
      if (bucket_bytes[q] >= (first_bucket[q] ? SHARD_FIRST_BUCKET_BYTES : SHARD_BUCKET_BYTES) || st->wgrad_bytes <= 0) {
        comm = fmax(comm, comp) + bucket_s[q];
        bucket_s[q] = bucket_bytes[q] = 0;
        first_bucket[q] = false;
      }
    }
    ev++;
  }
  for (int q = 0; q < 4; q++) /* the buckets left open at the end of the backward pass: the exposed tail */
    if (bucket_s[q] > 0) comm = fmax(comm, comp) + bucket_s[q];
  s->n_events = ev;
  return fmax(comp, comm);
}

double gsim_full(gsim *s, const int32_t *ch) {
  if (s->hi >= s->lo) s->comp_before[s->lo] = s->comm_before[s->lo] = 0;
  return run_from(s, ch, s->lo);
}

double gsim_delta(gsim *s, const int32_t *ch, int first) {
  if (first < s->lo) first = s->lo;
  if (first > s->hi + 1) first = s->hi + 1;
  return run_from(s, ch, first);
}

double gsim_mcmc(const graph_problem *gp, gsim *s, const int32_t *init, int64_t budget, double limit_s, double alpha,
                 uint64_t seed, int32_t *best, int64_t *n_evals, arena *a) {
  double t_start = solve_clock_s();
  const sp_problem *p = &gp->sp;
  int G = p->n_groups, n = gp->n_nodes;
  int32_t *cur = arena_alloc(a, (size_t)(G > 0 ? G : 1) * sizeof *cur);
  int32_t *nch = arena_alloc(a, (size_t)(n > 0 ? n : 1) * sizeof *nch);
  int *first_of = arena_alloc(a, (size_t)(G > 0 ? G : 1) * sizeof *first_of);
  if (!cur || !nch || !first_of) return INFINITY;
  for (int g = 0; g < G; g++) first_of[g] = n;
  for (int i = n - 1; i >= 0; i--) first_of[p->group_of[i]] = i;
  memcpy(cur, init, (size_t)G * sizeof *cur);
  memcpy(best, init, (size_t)G * sizeof *best);
  gp_node_choice(gp, cur, nch);
  double cur_t = gsim_full(s, nch), best_t = cur_t;
  int64_t evals = 1;
  int64_t reset = budget / 100;
  if (reset < 1) reset = 1;
  if (reset > 1000) reset = 1000;
  rng r;
  rng_seed(&r, seed);
  int64_t last_reset = 0;
  for (int64_t it = 0; it < budget && G > 0; it++) {
    if (limit_s > 0 && (it & 63) == 0 && solve_clock_s() - t_start >= limit_s) break;
    if (it - last_reset >= reset) {
      if (memcmp(cur, best, (size_t)G * sizeof *cur) != 0) {
        memcpy(cur, best, (size_t)G * sizeof *cur);
        gp_node_choice(gp, cur, nch);
        cur_t = gsim_full(s, nch);
        evals++;
      }
      last_reset = it;
    }
    int g = (int)rng_below(&r, (uint64_t)G);
    int k = (int)rng_below(&r, (uint64_t)p->n_s[g]);
    if (k == cur[g] || !sp_allowed(p, g, k)) continue;
    int old = cur[g];
    for (int i = 0; i < n; i++)
      if (p->group_of[i] == g) nch[i] = k;
    double t = gsim_delta(s, nch, first_of[g]);
    evals++;
    double diff_ms = 1e3 * (t - cur_t);
    if (t < cur_t || rng_uniform(&r) < exp(-alpha * diff_ms)) {
      cur[g] = k;
      cur_t = t;
      if (t < best_t) {
        best_t = t;
        memcpy(best, cur, (size_t)G * sizeof *cur);
      }
    } else {
      for (int i = 0; i < n; i++)
        if (p->group_of[i] == g) nch[i] = old;
      gsim_delta(s, nch, first_of[g]); /* back to the current choice's state */
    }
  }
  *n_evals = evals;
  return best_t;
}
