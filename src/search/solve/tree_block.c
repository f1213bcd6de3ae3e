/* Tree-block moves (search layer; tree_block.h): a random induced forest of the group graph set to its exact
 * best given the other groups by min-sum message passing (blocks after Hamze & de Freitas, UAI 2004). */
#include <string.h>

#include "search/solve/tree_block.h"

bool tblock_init(tblock *t, arena *a, const sp_problem *p, int32_t *const *allowed, const int32_t *n_allowed) {
  memset(t, 0, sizeof *t);
  int32_t G = p->n_groups, max_n = 1;
  for (int32_t g = 0; g < G; g++) max_n = n_allowed[g] > max_n ? n_allowed[g] : max_n;
  size_t n = (size_t)(G > 0 ? G : 1);
  t->p = p;
  t->allowed = allowed;
  t->n_allowed = n_allowed;
  t->order = arena_alloc(a, n * sizeof *t->order);
  t->parent = arena_alloc(a, n * sizeof *t->parent);
  t->up_pair = arena_alloc(a, n * sizeof *t->up_pair);
  t->mark = arena_alloc(a, n * sizeof *t->mark);
  t->uf = arena_alloc(a, n * sizeof *t->uf);
  t->perm = arena_alloc(a, n * sizeof *t->perm);
  t->queue = arena_alloc(a, n * sizeof *t->queue);
  t->best = arena_alloc(a, n * sizeof *t->best);
  t->cost = arena_alloc(a, n * sizeof *t->cost);
  t->msg = arena_alloc(a, (size_t)max_n * sizeof *t->msg);
  if (!t->order || !t->parent || !t->up_pair || !t->mark || !t->uf || !t->perm || !t->queue || !t->best ||
      !t->cost || !t->msg)
    return false;
  for (int32_t g = 0; g < G; g++) {
    t->mark[g] = 0;
    t->cost[g] = arena_alloc(a, (size_t)(n_allowed[g] > 0 ? n_allowed[g] : 1) * sizeof **t->cost);
    if (!t->cost[g]) return false;
  }
  return true;
}

static int32_t uf_find(int32_t *uf, int32_t g) {
  while (uf[g] != g) g = uf[g] = uf[uf[g]];
  return g;
}

/* A random maximal induced forest of the movable groups, rooted: t->order (parents first), parent, up_pair. */
static void pick_forest(tblock *t, rng *rg) {
  const sp_problem *p = t->p;
  int32_t G = p->n_groups, n = 0;
  if (++t->stamp == 0) {
    memset(t->mark, 0, (size_t)G * sizeof *t->mark);
    t->stamp = 1;
  }
  for (int32_t g = 0; g < G; g++)
    if (t->n_allowed[g] >= 2) t->perm[n++] = g;
  for (int32_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
    int32_t j = (int32_t)rng_below(rg, (uint64_t)i + 1), x = t->perm[i];
    t->perm[i] = t->perm[j], t->perm[j] = x;
  }
  int32_t roots[64];
  for (int32_t i = 0; i < n; i++) {
    int32_t g = t->perm[i], n_roots = 0;
    bool ok = true;
    for (int32_t q = p->adj_start[g]; q < p->adj_start[g + 1] && ok; q++) {
      int32_t h = sp_pair_other(&p->pairs[p->adj[q]], g);
      if (t->mark[h] != t->stamp) continue;
      int32_t r = uf_find(t->uf, h);
      for (int32_t k = 0; k < n_roots && ok; k++) ok = roots[k] != r;
      if (ok && n_roots < (int32_t)(sizeof roots / sizeof *roots)) roots[n_roots++] = r;
      else ok = false; /* a cycle (or more neighbours in the block than tracked) */
    }
    if (!ok) continue;
    t->mark[g] = t->stamp;
    t->uf[g] = g;
    t->parent[g] = -2; /* in the block, not yet reached */
    for (int32_t k = 0; k < n_roots; k++) t->uf[roots[k]] = g;
  }
  t->n_block = 0;
  for (int32_t i = 0; i < n; i++) { /* breadth first from each tree's first group */
    int32_t r = t->perm[i];
    if (t->mark[r] != t->stamp || t->parent[r] != -2) continue;
    t->parent[r] = -1;
    int32_t head = 0, tail = 0;
    t->queue[tail++] = r;
    while (head < tail) {
      int32_t g = t->queue[head++];
      t->order[t->n_block++] = g;
      for (int32_t q = p->adj_start[g]; q < p->adj_start[g + 1]; q++) {
        int32_t h = sp_pair_other(&p->pairs[p->adj[q]], g);
        if (t->mark[h] != t->stamp || t->parent[h] != -2) continue;
        t->parent[h] = g;
        t->up_pair[h] = p->adj[q];
        t->queue[tail++] = h;
      }
    }
  }
}

/* The index of the least entry of x[0..n) (keep on a tie), -1 when every entry is infinite. */
static int32_t least(const double *x, int32_t n, int32_t keep) {
  int32_t arg = -1;
  for (int32_t i = 0; i < n; i++)
    if (x[i] < INFINITY && (arg < 0 || x[i] < x[arg] || (x[i] == x[arg] && i == keep))) arg = i;
  return arg;
}

void tblock_best(tblock *t, const int32_t *choice, rng *rg) {
  const sp_problem *p = t->p;
  pick_forest(t, rg);
  /* Each group's own terms: its cost and the pairs to groups outside the block. */
  for (int32_t b = 0; b < t->n_block; b++) {
    int32_t g = t->order[b];
    for (int32_t i = 0; i < t->n_allowed[g]; i++) {
      int32_t k = t->allowed[g][i];
      double e = p->unary[g][k];
      for (int32_t q = p->adj_start[g]; q < p->adj_start[g + 1] && e < INFINITY; q++) {
        const sp_pair *pr = &p->pairs[p->adj[q]];
        int32_t h = sp_pair_other(pr, g);
        if (t->mark[h] != t->stamp) e += sp_pair_cost(p, pr, g, k, choice[h]);
      }
      t->cost[g][i] = e;
    }
  }
  /* Upward: each group's message to its parent (its subtree's least cost per parent strategy), children first. */
  for (int32_t b = t->n_block - 1; b >= 0; b--) {
    int32_t c = t->order[b], par = t->parent[c];
    if (par < 0) continue;
    const sp_pair *pr = &p->pairs[t->up_pair[c]];
    int32_t nc = t->n_allowed[c];
    for (int32_t j = 0; j < t->n_allowed[par]; j++) {
      int32_t kp = t->allowed[par][j];
      double m = INFINITY;
      for (int32_t i = 0; i < nc; i++) m = fmin(m, t->cost[c][i] + sp_pair_cost(p, pr, c, t->allowed[c][i], kp));
      t->cost[par][j] += m;
    }
  }
  /* Downward: each root at its least, each child at its least given its parent's. */
  for (int32_t b = 0; b < t->n_block; b++) {
    int32_t g = t->order[b], par = t->parent[g], n = t->n_allowed[g], keep = -1;
    for (int32_t i = 0; i < n; i++) {
      t->msg[i] = t->cost[g][i];
      if (par >= 0) t->msg[i] += sp_pair_cost(p, &p->pairs[t->up_pair[g]], g, t->allowed[g][i], t->best[par]);
      if (t->allowed[g][i] == choice[g]) keep = i;
    }
    int32_t i = least(t->msg, n, keep);
    t->best[g] = i >= 0 ? t->allowed[g][i] : choice[g];
  }
}
