/* Greedy sharding propagation on sharding problem files (search layer; strategy "greedy"), after GSPMD (Xu
 * et al., "GSPMD: General and Scalable Parallelization for ML Computation Graphs", arXiv 2105.04663, §3.5:
 * user annotations on a few tensors are propagated to every other op along the graph's edges).
 *
 * Seeds are the user's annotations (`--annotate 'NODE=IDX;…'`: node NODE takes strategy IDX; an annotation on
 * a follower fixes its whole group). Without any, or for a part of the graph no annotation reaches, the seed
 * is the node whose cheapest allowed strategy is the cheapest of all (ties: the lower index). From the seeds,
 * the groups are visited breadth-first along edges and aliases; each takes the strategy that is locally
 * cheapest given the neighbours already decided (its own cost plus the resharding costs to them), among those
 * no decided neighbour forbids. Memory is not looked at; the result is scored in full at the end. */
#include <string.h>

#include "search/solve/solve.h"

/* The locally cheapest strategy of g given the decided neighbours (choice >= 0); -1 when all are forbidden. */
static int32_t local_best(const sp_problem *p, const int32_t *choice, int32_t g) {
  int32_t best = -1;
  double best_cost = INFINITY;
  for (int32_t k = 0; k < p->n_s[g]; k++) {
    double c = p->unary[g][k];
    for (int32_t q = p->adj_start[g]; q < p->adj_start[g + 1] && c < INFINITY; q++) {
      const sp_pair *e = &p->pairs[p->adj[q]];
      int32_t h = sp_pair_other(e, g);
      if (choice[h] >= 0) c += sp_pair_cost(p, e, g, k, choice[h]);
    }
    if (c < best_cost) best_cost = c, best = k;
  }
  return best;
}

ap_status solve_greedy(ap_ctx *ctx, const sp_problem *p, const solve_opts *o, sp_result *r) {
  int32_t G = p->n_groups;
  arena *a = arena_new();
  int32_t *choice = a ? arena_alloc(a, (size_t)G * sizeof *choice) : NULL;
  int32_t *queue = a ? arena_alloc(a, (size_t)G * sizeof *queue) : NULL;
  if (!choice || !queue) {
    arena_free(a);
    return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
  }
  for (int32_t g = 0; g < G; g++) choice[g] = -1;
  int32_t head = 0, tail = 0;
  if (o->annotate)
    for (int32_t i = 0; i < p->n_nodes; i++) {
      int32_t k = o->annotate[i], g = p->group_of[i];
      if (k < 0) continue;
      if (choice[g] >= 0 && choice[g] != k) {
        arena_free(a);
        return ctx_fail(ctx, AP_INVALID, "--annotate: node %d follows a node annotated with strategy %d, not %d", i,
                        choice[g], k);
      }
      if (choice[g] < 0) queue[tail++] = g;
      choice[g] = k;
    }
  for (int32_t n_done = 0; n_done < G;) {
    if (head == tail) { /* a new seed: the cheapest node still open */
      int32_t seed = -1, k_seed = 0;
      double best = INFINITY;
      for (int32_t g = 0; g < G; g++) {
        if (choice[g] >= 0) continue;
        for (int32_t k = 0; k < p->n_s[g]; k++)
          if (p->unary[g][k] < best || seed < 0) {
            if (p->unary[g][k] < best) best = p->unary[g][k];
            seed = g, k_seed = k;
          }
      }
      choice[seed] = k_seed;
      queue[tail++] = seed;
    }
    int32_t g = queue[head++];
    n_done++;
    for (int32_t q = p->adj_start[g]; q < p->adj_start[g + 1]; q++) {
      int32_t h = sp_pair_other(&p->pairs[p->adj[q]], g);
      if (choice[h] >= 0) continue;
      int32_t k = local_best(p, choice, h);
      choice[h] = k >= 0 ? k : 0; /* all forbidden: the final score says so */
      queue[tail++] = h;
    }
  }
  solve_budget b;
  solve_budget_start(&b, o);
  solve_budget_spend(&b);
  solve_finish_heuristic(p, choice, sp_eval(p, choice), &b, r);
  arena_free(a);
  return AP_OK;
}
