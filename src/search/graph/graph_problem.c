/* Building a sharding problem from a model graph (search layer; graph_problem.h says what it holds). The
 * formulation is Alpa's intra-op ILP (Zheng et al. 2022 §4.2; alpa/shard_parallel/auto_sharding.py,
 * SURVEY.md §3.1): per-node strategy costs, resharding matrices on edges, followers and a memory budget over
 * liveness sets. Followers are Alpa's merged nodes (auto_sharding's s_follow): an elementwise op or a view
 * with one produced operand takes, for each strategy of its operand's producer, its own strategy that reads
 * that producer's output spec unchanged; when some producer strategy has no such match, the op stays a node
 * of its own. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search/graph/graph_problem.h"

/* The reduction of a sharding problem to groups, defined in problem.c (e-solve's reader calls it too). */
AP_HIDDEN ap_status sp_reduce(ap_ctx *ctx, sp_problem *p);

static const shard_spec *in_spec(const shard_strategy *s, int to_in) { return &s->in[to_in]; }
static const shard_spec *out_spec(const shard_strategy *s, int from_out) { return &s->out[from_out]; }

double gp_edge_reshard(const graph_problem *gp, const graph_edge *e, int32_t kf, int32_t kt, shard_comm *comm,
                       int *n_comm) {
  const graph_block *fb = &gp->g->blocks[e->from_block];
  const gp_node *nf = &gp->nodes[gp_node_of(gp, e->from_block, e->from_op)];
  const gp_node *nt = &gp->nodes[gp_node_of(gp, e->to_block, e->to_op)];
  const shard_spec *a = out_spec(&nf->s[kf], e->from_out), *b = in_spec(&nt->s[kt], e->to_in);
  double bytes = graph_tensor_bytes(&fb->tensors[e->from_tensor], gp->env.b, gp->env.s);
  if (a->n_dims == b->n_dims) return shard_reshard_s(&gp->env, bytes, a, b, comm, n_comm);
  /* Different ranks across a block boundary: gather whole, then slice. */
  shard_spec r1 = {a->n_dims, {0}}, r2 = {b->n_dims, {0}};
  int n1 = 0, n2 = 0;
  double t = shard_reshard_s(&gp->env, bytes, a, &r1, comm, &n1);
  t += shard_reshard_s(&gp->env, bytes, &r2, b, comm ? comm + n1 : NULL, &n2);
  if (n_comm) *n_comm = n1 + n2;
  return t;
}

/* How many times an edge runs per iteration. */
static double edge_mult(const graph *g, const graph_edge *e) {
  if (e->carried) return (double)(g->blocks[e->from_block].repeat - 1);
  if (e->from_block == e->to_block) return (double)g->blocks[e->from_block].repeat;
  return 1;
}

/* Makes node i a follower of node p (through edge e) when each of p's strategies has a match in i's. */
static bool try_follow(graph_problem *gp, arena *a, int i, int p, const graph_edge *e) {
  gp_node *ni = &gp->nodes[i], *np = &gp->nodes[p];
  shard_strategy *al = arena_alloc(a, (size_t)np->n_s * sizeof *al);
  if (!al) return false;
  for (int k = 0; k < np->n_s; k++) {
    const shard_spec *want = out_spec(&np->s[k], e->from_out);
    int best = -1;
    for (int j = 0; j < ni->n_s; j++) {
      if (!shard_spec_equal(in_spec(&ni->s[j], e->to_in), want)) continue;
      if (best < 0 || ni->s[j].compute_s + ni->s[j].comm_s < ni->s[best].compute_s + ni->s[best].comm_s) best = j;
    }
    if (best < 0) return false;
    al[k] = ni->s[best];
  }
  ni->s = al;
  ni->n_s = np->n_s;
  ni->follow = p;
  return true;
}

/* The layer-free key of an op: its name with every digit run that ends a scope ("/h.3/", "/layer_3/") replaced
 * by '#', then its kind, source type and output shape. Ops of one key are the same op of identical repeated
 * layers (an exporter names layer i's ops by its scope, as torch.onnx does). */
static char *repeat_key(arena *a, const graph_block *blk, const graph_op *op, const gp_node *nd) {
  strbuf sb = {0};
  const char *n = op->name ? op->name : "";
  for (const char *p = n; *p;) {
    if (*p >= '0' && *p <= '9') {
      const char *q = p;
      while (*q >= '0' && *q <= '9') q++;
      if (*q == '/') sb_puts(&sb, "#");
      else sb_printf(&sb, "%.*s", (int)(q - p), p);
      p = q;
    } else {
      sb_printf(&sb, "%c", *p++);
    }
  }
  const graph_tensor *t = &blk->tensors[op->out];
  sb_printf(&sb, "|%d|%s|%d|", (int)op->kind, op->op_type ? op->op_type : "", nd->n_s);
  for (int i = 0; i < t->n_dims; i++) sb_printf(&sb, "%lld,", (long long)t->dims[i]);
  char *r = sb.buf ? arena_strdup(a, sb.buf) : NULL;
  sb_free(&sb);
  return r;
}

typedef struct {
  const char *key;
  int node;
} keyed;

static int keyed_cmp(const void *x, const void *y) {
  const keyed *a = x, *b = y;
  int c = strcmp(a->key, b->key);
  return c ? c : (a->node > b->node) - (a->node < b->node);
}

/* Ties the ops of identical repeated layers: each becomes a follower of the first op of its key (same strategy
 * list, so the same index means the same specs). */
static ap_status tie_repeats(ap_ctx *ctx, graph_problem *gp, arena *a, const gp_opts *o) {
  int n = gp->n_nodes, m = 0;
  keyed *ks = arena_alloc(a, (size_t)(n > 0 ? n : 1) * sizeof *ks);
  if (!ks) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  for (int i = 0; i < n; i++) {
    gp_node *nd = &gp->nodes[i];
    if (nd->follow >= 0 || nd->n_s <= 1 || (o->fix && o->fix[i] >= 0)) continue;
    const graph_block *blk = &gp->g->blocks[nd->block];
    char *k = repeat_key(a, blk, &blk->ops[nd->op], nd);
    if (!k) return ctx_fail(ctx, AP_NOMEM, "out of memory");
    if (!strchr(k, '#')) continue;
    ks[m++] = (keyed){k, i};
  }
  qsort(ks, (size_t)m, sizeof *ks, keyed_cmp);
  for (int i = 1; i < m; i++) {
    int lead = -1;
    for (int j = i - 1; j >= 0 && strcmp(ks[j].key, ks[i].key) == 0; j--) lead = ks[j].node;
    if (lead < 0) continue;
    gp_node *nd = &gp->nodes[ks[i].node], *ld = &gp->nodes[lead];
    bool same = nd->n_s == ld->n_s;
    for (int k = 0; same && k < nd->n_s; k++) same = shard_spec_equal(&nd->s[k].out[0], &ld->s[k].out[0]);
    if (!same) continue;
    nd->follow = lead;
    gp->n_tied++;
  }
  return AP_OK;
}

static bool follower_kind(const graph_op *op) {
  return op->kind == OP_ELEMENTWISE || op->is_view;
}

ap_status graph_problem_build(ap_ctx *ctx, arena *a, const graph *g, const shard_env *env, const gp_opts *o,
                              graph_problem *gp) {
  memset(gp, 0, sizeof *gp);
  gp->a = a;
  gp->g = g;
  gp->env = *env;
  gp->block_base = arena_alloc(a, (size_t)(g->n_blocks + 1) * sizeof *gp->block_base);
  if (!gp->block_base) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  int n = 0;
  for (int bi = 0; bi < g->n_blocks; bi++) {
    gp->block_base[bi] = n;
    n += g->blocks[bi].n_ops;
  }
  gp->block_base[g->n_blocks] = n;
  gp->n_nodes = n;
  gp->nodes = arena_alloc(a, (size_t)(n > 0 ? n : 1) * sizeof *gp->nodes);
  int cap = shard_max_strategies(env->mesh->n_axes);
  shard_strategy *tmp = arena_alloc(a, (size_t)cap * sizeof *tmp);
  if (!gp->nodes || !tmp) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  for (int bi = 0; bi < g->n_blocks; bi++) {
    const graph_block *blk = &g->blocks[bi];
    for (int oi = 0; oi < blk->n_ops; oi++) {
      gp_node *nd = &gp->nodes[gp->block_base[bi] + oi];
      int k = shard_enumerate(env, blk, &blk->ops[oi], tmp, cap);
      nd->block = bi;
      nd->op = oi;
      nd->n_s = k;
      nd->follow = -1;
      nd->repeat = (double)blk->repeat;
      nd->s = arena_alloc(a, (size_t)k * sizeof *nd->s);
      if (!nd->s) return ctx_fail(ctx, AP_NOMEM, "out of memory");
      memcpy(nd->s, tmp, (size_t)k * sizeof *tmp);
    }
  }
  /* Followers: an op whose only produced operand comes from an op of its own block. */
  if (o->merge_followers) {
    int *n_prod = arena_alloc(a, (size_t)(n > 0 ? n : 1) * sizeof *n_prod);
    int *edge_of = arena_alloc(a, (size_t)(n > 0 ? n : 1) * sizeof *edge_of);
    if (!n_prod || !edge_of) return ctx_fail(ctx, AP_NOMEM, "out of memory");
    memset(n_prod, 0, (size_t)n * sizeof *n_prod);
    for (int ei = 0; ei < g->n_edges; ei++) {
      const graph_edge *e = &g->edges[ei];
      int t = gp_node_of(gp, e->to_block, e->to_op);
      n_prod[t]++;
      edge_of[t] = ei;
    }
    for (int i = 0; i < n; i++) {
      const gp_node *nd = &gp->nodes[i];
      const graph_op *op = &g->blocks[nd->block].ops[nd->op];
      if (n_prod[i] != 1 || !follower_kind(op) || (o->fix && o->fix[i] >= 0)) continue;
      const graph_edge *e = &g->edges[edge_of[i]];
      if (e->carried || e->from_block != e->to_block) continue;
      int p = gp_node_of(gp, e->from_block, e->from_op);
      if (o->fix && o->fix[p] >= 0) continue;
      if (try_follow(gp, a, i, p, e)) gp->n_followers++;
    }
  }
  /* The parts of a packed projection share one strategy (graph.h packed_with): their strategy lists are the
   * same (same shapes), so the same index means the same specs. */
  for (int i = 0; i < n; i++) {
    gp_node *nd = &gp->nodes[i];
    const graph_op *op = &g->blocks[nd->block].ops[nd->op];
    if (op->packed_with <= 0 || nd->follow >= 0 || (o->fix && o->fix[i] >= 0)) continue;
    int lead = gp->block_base[nd->block] + op->packed_with - 1;
    gp_node *ld = &gp->nodes[lead];
    bool same = lead != i && nd->n_s == ld->n_s;
    for (int k = 0; same && k < nd->n_s; k++) same = shard_spec_equal(&nd->s[k].out[0], &ld->s[k].out[0]);
    if (same) nd->follow = lead;
  }
  if (o->tie_repeats) {
    ap_status st = tie_repeats(ctx, gp, a, o);
    if (st) return st;
  }
  /* The sp_problem. */
  sp_problem *sp = &gp->sp;
  sp->a = a;
  sp->file = g->name ? g->name : "graph";
  sp->cost_unit_ms = 1e3; /* costs in seconds */
  sp->n_nodes = n;
  sp->nodes = arena_alloc(a, (size_t)(n > 0 ? n : 1) * sizeof *sp->nodes);
  sp->edges = arena_alloc(a, (size_t)(g->n_edges > 0 ? g->n_edges : 1) * sizeof *sp->edges);
  if (!sp->nodes || !sp->edges) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  for (int i = 0; i < n; i++) {
    const gp_node *nd = &gp->nodes[i];
    sp_node *s = &sp->nodes[i];
    s->n_strategies = nd->n_s;
    s->follow = nd->follow;
    s->cost = arena_alloc(a, (size_t)nd->n_s * sizeof *s->cost);
    s->mem_bytes = arena_alloc(a, (size_t)nd->n_s * sizeof *s->mem_bytes);
    if (!s->cost || !s->mem_bytes) return ctx_fail(ctx, AP_NOMEM, "out of memory");
    for (int k = 0; k < nd->n_s; k++) {
      bool fixed_out = o->fix && o->fix[i] >= 0 && o->fix[i] != k;
      s->cost[k] = fixed_out ? NAN : nd->repeat * (nd->s[k].compute_s + nd->s[k].comm_s);
      s->mem_bytes[k] = nd->repeat * (nd->s[k].weight_mem_bytes + nd->s[k].act_mem_bytes);
    }
  }
  for (int ei = 0; ei < g->n_edges; ei++) {
    const graph_edge *e = &g->edges[ei];
    int f = gp_node_of(gp, e->from_block, e->from_op), t = gp_node_of(gp, e->to_block, e->to_op);
    if (f == t) continue; /* a repeated block whose output op feeds its own input op: the same strategy */
    double mult = edge_mult(g, e);
    sp_edge *se = &sp->edges[sp->n_edges++];
    se->from = f;
    se->to = t;
    int nf = gp->nodes[f].n_s, nt = gp->nodes[t].n_s;
    se->cost = arena_alloc(a, (size_t)nf * (size_t)nt * sizeof *se->cost);
    if (!se->cost) return ctx_fail(ctx, AP_NOMEM, "out of memory");
    for (int kf = 0; kf < nf; kf++)
      for (int kt = 0; kt < nt; kt++) se->cost[(size_t)kf * (size_t)nt + (size_t)kt] = mult * gp_edge_reshard(gp, e, kf, kt, NULL, NULL);
  }
  /* The budget binds only when the most memory-hungry choice of every op would not fit; otherwise it is left
   * out, so that strategies without memory constraints (elim-dp) apply too. */
  double worst = 0;
  for (int i = 0; i < n; i++) {
    double m = 0;
    for (int k = 0; k < sp->nodes[i].n_strategies; k++) m = fmax(m, sp->nodes[i].mem_bytes[k]);
    worst += m;
  }
  if (o->mem_budget_bytes > 0 && n > 0 && worst > o->mem_budget_bytes) {
    sp->has_budget = true;
    sp->budget_bytes = o->mem_budget_bytes;
    sp->n_points = 1;
    sp->points = arena_alloc(a, sizeof *sp->points);
    int32_t *all = arena_alloc(a, (size_t)n * sizeof *all);
    if (!sp->points || !all) return ctx_fail(ctx, AP_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) all[i] = i;
    sp->points[0] = (sp_point){n, all};
  }
  return sp_reduce(ctx, sp);
}

void gp_node_choice(const graph_problem *gp, const int32_t *group_choice, int32_t *node_choice) {
  for (int i = 0; i < gp->n_nodes; i++) node_choice[i] = group_choice[gp->sp.group_of[i]];
}

gp_breakdown gp_evaluate(const graph_problem *gp, const int32_t *ch) {
  return gp_evaluate_range(gp, ch, 0, gp->n_nodes - 1);
}

double gp_wgrad_exposed_s(const graph_problem *gp, const int32_t *ch, int lo, int hi, double *total_s) {
  /* The backward pass as the simulator plays it (graph_sim.c) along the op order: each op's backward compute,
   * then its input-gradient sums on the communication stream, which the next op waits for; the buckets share
   * that stream (FIFO). Without the weight sync it would end at t0. */
  double comp = 0, comm = 0, t0 = 0, bucket_s[4] = {0}, bucket_bytes[4] = {0}, all = 0;
  bool first[4] = {true, true, true, true};
  for (int i = hi; i >= lo; i--) {
    const gp_node *nd = &gp->nodes[i];
    const shard_strategy *s = &nd->s[ch[i]];
    double bwd = nd->repeat * (s->compute_s - s->compute_fwd_s), red = nd->repeat * s->bwd_comm_s;
    t0 += bwd + red;
    comp += bwd;
    if (red > 0) comm = fmax(comm, comp) + red, comp = comm;
    if (s->wgrad_comm_s <= 0) continue;
    int q = s->wgrad_mask & 3u;
    all += nd->repeat * s->wgrad_comm_s;
    bucket_s[q] += nd->repeat * s->wgrad_comm_s;
    bucket_bytes[q] += nd->repeat * s->wgrad_bytes;
    if (bucket_bytes[q] >= (first[q] ? SHARD_FIRST_BUCKET_BYTES : SHARD_BUCKET_BYTES) || s->wgrad_bytes <= 0) {
      comm = fmax(comm, comp) + bucket_s[q];
      bucket_s[q] = bucket_bytes[q] = 0;
      first[q] = false;
    }
  }
  for (int q = 0; q < 4; q++)
    if (bucket_s[q] > 0) comm = fmax(comm, comp) + bucket_s[q];
  if (total_s) *total_s = all;
  return fmax(0, fmax(comp, comm) - t0);
}

gp_breakdown gp_evaluate_range(const graph_problem *gp, const int32_t *ch, int lo, int hi) {
  gp_breakdown r = {0};
  for (int i = lo; i <= hi; i++) {
    const gp_node *nd = &gp->nodes[i];
    const shard_strategy *s = &nd->s[ch[i]];
    r.compute_s += nd->repeat * s->compute_s;
    r.op_comm_s += nd->repeat * (s->comm_s - s->wgrad_comm_s);
    r.mem_bytes += nd->repeat * (s->weight_mem_bytes + s->act_mem_bytes);
  }
  r.op_comm_s += gp_wgrad_exposed_s(gp, ch, lo, hi, NULL);
  for (int ei = 0; ei < gp->g->n_edges; ei++) {
    const graph_edge *e = &gp->g->edges[ei];
    int f = gp_node_of(gp, e->from_block, e->from_op), t = gp_node_of(gp, e->to_block, e->to_op);
    if (f == t || f < lo || f > hi || t < lo || t > hi) continue;
    r.reshard_s += edge_mult(gp->g, e) * gp_edge_reshard(gp, e, ch[f], ch[t], NULL, NULL);
  }
  r.total_s = r.compute_s + r.op_comm_s + r.reshard_s;
  return r;
}
