/* The reduced form of a sharding problem and its objective (search layer; types in problem.h).
 *
 * Followers share their leader's strategy (Alpa's s_follow), so every solver decides one variable vector per
 * *group* (a leader and all nodes that follow it, transitively). The reduction merges, once and for all:
 *  - the node costs of a group's members into one unary cost per strategy; a strategy is forbidden
 *    (INFINITY) when any member forbids it (a null cost or memory entry);
 *  - an edge or alias inside one group into its diagonal (both ends take the same index);
 *  - all edges and aliases between the same two groups into one pair table, forbidden entries INFINITY;
 *  - the memory of a program point's nodes per group into one term, so that a follower and its leader alive
 *    at the same point give one coefficient per column, as the ILP needs (NOTES.md "ILP through CBC's C
 *    API": duplicate coefficients make CBC return a wrong optimum).
 * INFINITY here is a marker read by the solvers (the ILP turns it into a column fixed to 0); it never enters a
 * solver as a cost. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search/solve/problem.h"

AP_HIDDEN ap_status sp_reduce(ap_ctx *ctx, sp_problem *p);

typedef struct {
  int32_t g, h; /* g < h */
  int32_t kind; /* 0 edge, 1 alias */
  int32_t index;
} contrib;

static int contrib_cmp(const void *x, const void *y) {
  const contrib *a = x, *b = y;
  if (a->g != b->g) return a->g < b->g ? -1 : 1;
  if (a->h != b->h) return a->h < b->h ? -1 : 1;
  if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
  return (a->index > b->index) - (a->index < b->index);
}

static int32_t root_of(const sp_problem *p, int32_t i) {
  while (p->nodes[i].follow >= 0) i = p->nodes[i].follow;
  return i;
}

/* Adds a node-level matrix (rows = strategies of node u, cols = of node v) into pair table t whose rows are
 * group g's strategies; flip when u is on the h side. NAN entries and alias bits become INFINITY. */
static void add_into(const sp_problem *p, sp_pair *t, bool flip, const double *cost, const uint8_t *bits) {
  int32_t ng = p->n_s[t->g], nh = p->n_s[t->h];
  for (int32_t a = 0; a < ng; a++)
    for (int32_t b = 0; b < nh; b++) {
      size_t src = flip ? (size_t)b * (size_t)ng + (size_t)a : (size_t)a * (size_t)nh + (size_t)b;
      double *dst = &t->cost[(size_t)a * (size_t)nh + (size_t)b];
      if (bits ? bits[src] != 0 : isnan(cost[src])) *dst = INFINITY;
      else if (!bits) *dst += cost[src];
    }
}

ap_status sp_reduce(ap_ctx *ctx, sp_problem *p) {
  arena *a = p->a;
  int32_t n = p->n_nodes;
  p->group_of = arena_alloc(a, (size_t)n * sizeof(int32_t));
  p->leader = arena_alloc(a, (size_t)n * sizeof(int32_t));
  p->n_s = arena_alloc(a, (size_t)n * sizeof(int32_t));
  p->unary = arena_alloc(a, (size_t)n * sizeof(double *));
  if (!p->group_of || !p->leader || !p->n_s || !p->unary) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
  int32_t *group_of_root = p->group_of; /* first pass: leaders get their group index */
  for (int32_t i = 0; i < n; i++)
    if (p->nodes[i].follow < 0) {
      int32_t g = p->n_groups++;
      p->leader[g] = i;
      p->n_s[g] = p->nodes[i].n_strategies;
      p->unary[g] = arena_alloc(a, (size_t)p->n_s[g] * sizeof(double));
      if (!p->unary[g]) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
      group_of_root[i] = g;
    }
  for (int32_t i = 0; i < n; i++)
    if (p->nodes[i].follow >= 0) p->group_of[i] = group_of_root[root_of(p, i)];
  for (int32_t i = 0; i < n; i++) {
    const sp_node *nd = &p->nodes[i];
    double *u = p->unary[p->group_of[i]];
    for (int32_t k = 0; k < nd->n_strategies; k++)
      u[k] = (isnan(nd->cost[k]) || isnan(nd->mem_bytes[k])) ? INFINITY : u[k] + nd->cost[k];
  }
  /* Edges and aliases: inside one group onto the diagonal, between groups into sorted contributions. */
  size_t n_contrib = 0;
  contrib *cs = malloc(((size_t)p->n_edges + (size_t)p->n_aliases + 1) * sizeof *cs);
  if (!cs) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
  for (int32_t e = 0; e < p->n_edges + p->n_aliases; e++) {
    bool alias = e >= p->n_edges;
    int32_t u = alias ? p->aliases[e - p->n_edges].a : p->edges[e].from;
    int32_t v = alias ? p->aliases[e - p->n_edges].b : p->edges[e].to;
    int32_t gu = p->group_of[u], gv = p->group_of[v], ns = p->nodes[v].n_strategies;
    if (gu == gv) {
      double *un = p->unary[gu];
      for (int32_t k = 0; k < p->n_s[gu]; k++) {
        size_t d = (size_t)k * (size_t)ns + (size_t)k;
        if (alias ? p->aliases[e - p->n_edges].forbidden[d] != 0 : isnan(p->edges[e].cost[d])) un[k] = INFINITY;
        else if (!alias) un[k] += p->edges[e].cost[d];
      }
      continue;
    }
    cs[n_contrib++] = (contrib){gu < gv ? gu : gv, gu < gv ? gv : gu, alias ? 1 : 0, alias ? e - p->n_edges : e};
  }
  qsort(cs, n_contrib, sizeof *cs, contrib_cmp);
  p->pairs = arena_alloc(a, (n_contrib + 1) * sizeof *p->pairs);
  if (!p->pairs) {
    free(cs);
    return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
  }
  for (size_t c = 0; c < n_contrib; c++) {
    if (c == 0 || cs[c].g != cs[c - 1].g || cs[c].h != cs[c - 1].h) {
      sp_pair *t = &p->pairs[p->n_pairs++];
      t->g = cs[c].g;
      t->h = cs[c].h;
      t->cost = arena_alloc(a, (size_t)p->n_s[t->g] * (size_t)p->n_s[t->h] * sizeof(double));
      if (!t->cost) {
        free(cs);
        return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
      }
    }
    sp_pair *t = &p->pairs[p->n_pairs - 1];
    int32_t u = cs[c].kind ? p->aliases[cs[c].index].a : p->edges[cs[c].index].from;
    bool flip = p->group_of[u] != t->g;
    if (cs[c].kind) add_into(p, t, flip, NULL, p->aliases[cs[c].index].forbidden);
    else add_into(p, t, flip, p->edges[cs[c].index].cost, NULL);
  }
  free(cs);
  /* Adjacency of groups through pairs (CSR). */
  p->adj_start = arena_alloc(a, ((size_t)p->n_groups + 1) * sizeof(int32_t));
  p->adj = arena_alloc(a, ((size_t)p->n_pairs * 2 + 1) * sizeof(int32_t));
  int32_t *fill = arena_alloc(a, ((size_t)p->n_groups + 1) * sizeof(int32_t));
  if (!p->adj_start || !p->adj || !fill) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
  for (int32_t e = 0; e < p->n_pairs; e++) {
    p->adj_start[p->pairs[e].g + 1]++;
    p->adj_start[p->pairs[e].h + 1]++;
  }
  for (int32_t g = 0; g < p->n_groups; g++) p->adj_start[g + 1] += p->adj_start[g];
  for (int32_t e = 0; e < p->n_pairs; e++) {
    p->adj[p->adj_start[p->pairs[e].g] + fill[p->pairs[e].g]++] = e;
    p->adj[p->adj_start[p->pairs[e].h] + fill[p->pairs[e].h]++] = e;
  }
  /* Memory terms per program point, merged per group. */
  p->mem_active = p->has_budget && p->n_points > 0;
  if (!p->mem_active) return AP_OK;
  p->mem = arena_alloc(a, (size_t)p->n_points * sizeof *p->mem);
  int32_t *term_of = arena_alloc(a, (size_t)p->n_groups * sizeof(int32_t));
  int32_t *stamp = arena_alloc(a, (size_t)p->n_groups * sizeof(int32_t));
  if (!p->mem || !term_of || !stamp) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
  for (int32_t t = 0; t < p->n_points; t++) {
    const sp_point *pt = &p->points[t];
    sp_mempoint *mp = &p->mem[t];
    mp->terms = arena_alloc(a, ((size_t)pt->n + 1) * sizeof *mp->terms);
    if (!mp->terms) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
    for (int32_t k = 0; k < pt->n; k++) {
      int32_t i = pt->nodes[k], g = p->group_of[i];
      if (stamp[g] != t + 1) {
        stamp[g] = t + 1;
        term_of[g] = mp->n_terms;
        sp_memterm *tm = &mp->terms[mp->n_terms++];
        tm->g = g;
        tm->mem_bytes = arena_alloc(a, (size_t)p->n_s[g] * sizeof(double));
        if (!tm->mem_bytes) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
      }
      double *m = mp->terms[term_of[g]].mem_bytes;
      for (int32_t s = 0; s < p->n_s[g]; s++)
        if (!isnan(p->nodes[i].mem_bytes[s])) m[s] += p->nodes[i].mem_bytes[s]; /* null: strategy forbidden */
    }
  }
  return AP_OK;
}

sp_score sp_eval(const sp_problem *p, const int32_t *choice) {
  sp_score r = {0, 0, 0};
  for (int32_t g = 0; g < p->n_groups; g++) {
    double u = p->unary[g][choice[g]];
    if (isinf(u)) r.violation += 1;
    else r.objective += u;
  }
  for (int32_t e = 0; e < p->n_pairs; e++) {
    const sp_pair *t = &p->pairs[e];
    double c = t->cost[(size_t)choice[t->g] * (size_t)p->n_s[t->h] + (size_t)choice[t->h]];
    if (isinf(c)) r.violation += 1;
    else r.objective += c;
  }
  if (p->mem_active) {
    for (int32_t t = 0; t < p->n_points; t++) {
      double m = 0;
      for (int32_t k = 0; k < p->mem[t].n_terms; k++) m += p->mem[t].terms[k].mem_bytes[choice[p->mem[t].terms[k].g]];
      if (m > r.peak_bytes) r.peak_bytes = m;
    }
    double over = r.peak_bytes - p->budget_bytes;
    if (over > 0) {
      if (p->has_penalty) r.objective += p->penalty_per_byte * over;
      else r.violation += over / (p->budget_bytes > 1 ? p->budget_bytes : 1);
    }
  }
  return r;
}

bool sp_better(sp_score a, sp_score b) {
  if (a.violation != b.violation) return a.violation < b.violation;
  return a.objective < b.objective;
}
