/* MCMC over per-node strategies on sharding problems (search layer; strategy "mcmc"), after FlexFlow's search
 * loop (flexflow/FlexFlow src/runtime/model.cc at 0080fd4, FFModel::optimize, rewrite and propagate, and the
 * FFModel constants of its model.h; SURVEY.md §3.2, NOTES.md "FlexFlow's MCMC"). A move is one of three:
 *  - with probability BLOCK_CHANCE a tree block (tree_block.h): a random induced forest of groups set to its
 *    exact best given the rest (never worse, memory aside);
 *  - else a single-group move: one random group (a node and its followers) takes another allowed strategy,
 *    drawn from the Metropolised Gibbs proposal (Liu, "Peskun's theorem and a modified discrete-state Gibbs
 *    sampler", Biometrika 83(3), 1996): q(k) ∝ exp(-alpha·E_g(k)) over the strategies other than the current
 *    one, E_g(k) the group's own cost plus the resharding to its neighbours as they are, accepted with the
 *    Metropolis-Hastings ratio min(1, exp(-alpha·(Δ - ΔE_g))·Z_old/Z_new) (Z_x the proposal's normaliser
 *    without x; Δ the whole objective's change, which differs from ΔE_g only by a memory penalty). FlexFlow
 *    draws uniformly; over a 2-axis mesh's 10 to 25 strategies per group that mostly proposes layouts that
 *    clash with the neighbours' and are rejected;
 *  - and with probability PROPAGATION_CHANCE (0.25) the single move goes on as FlexFlow's propagation walk:
 *    step to a neighbour not yet visited, give it the strategy that fits best the one just set (its own cost
 *    plus that edge's resharding: FlexFlow copies the config along the edge, and a problem's strategy indices
 *    mean nothing across nodes), and go on from there with probability CONTINUE_PROPAGATION_CHANCE (0.75).
 *    Accepted by plain Metropolis on Δ, as FlexFlow accepts every rewrite.
 * Acceptance exp(-alpha · Δ) with alpha = 1.2 (FlexFlow's searchAlpha at HEAD) per millisecond: FlexFlow's
 * simulator times are ms (its bandwidths are "B/ms", src/runtime/simulator.cc), so Δ is taken in ms through
 * the problem's cost_unit_ms (1000 for the graph planner's problems, whose costs are seconds; 1 for problem
 * files, read as ms). Scoring seconds at 1.2 per unit accepted nearly every worse move (exp(-0.0012) ≈ 1).
 * The chain goes back to the best state every tenth of the budget (FlexFlow: every hundredth, at most 1000
 * moves; see the TUNING note) and starts from each group's cheapest allowed strategy (FlexFlow starts from data
 * parallelism, which a problem file does not name).
 * Delta evaluation: the chain keeps the current state's score in parts (the finite sum of its cost terms, the
 * count of forbidden ones, the memory of every program point) and a move updates them from the changed groups'
 * own terms only, one group at a time (so that a walk's or a block's changes sum exactly). Every scored move
 * counts as one evaluation against the budget, as a full sp_eval does for the other families (the budget means
 * the same for all; a block move's dynamic programming, like an MCTS rollout's local look-ups, is not an
 * evaluation). The best state is scored in full at the end.
 * A state that breaks a constraint (a forbidden pair, a hard memory budget) is compared by how much it breaks
 * first: a move that reduces the violation is accepted, one that increases it is rejected, and Metropolis
 * applies between states of equal violation, so the chain walks out of infeasible regions. A tenth of the
 * budget is kept for a local descent from the best state (descent.h), as MCTS and RL end. */
#include <string.h>

#include "search/solve/descent.h"
#include "search/solve/tree_block.h"

/* FlexFlow's FFModel::PROPAGATION_CHANCE and CONTINUE_PROPAGATION_CHANCE (include/flexflow/model.h). */
static const double PROPAGATION_CHANCE = 0.25, CONTINUE_PROPAGATION_CHANCE = 0.75;
/* TUNING: one move in 20 is a tree block (tree_block.h): on the shipped ONNX models over 2-axis meshes it took
 * MCMC from 10-31% above the ILP on a third of the meshes to the optimum on 39 of 40 (bench/search.txt, seed 2);
 * one in 10 or 4 did no better and costs more CPU per move. */
static const double BLOCK_CHANCE = 0.05;

/* The chain's state: the choice and its score in parts. */
typedef struct {
  const sp_problem *p;
  int32_t *cur;
  double sum;       /* finite cost terms */
  int64_t n_bad;    /* forbidden terms picked */
  double *mem;      /* per program point (mem_active) */
  int32_t *mem_start; /* CSR per group over (point, term) */
  int32_t *mem_point;
  const double **mem_term;
} chain;

/* Group g's own terms at strategy k with its neighbours as in c->cur: its cost and its incident pairs. */
static void local_terms(const chain *c, int32_t g, int32_t k, double *sum, int64_t *n_bad) {
  const sp_problem *p = c->p;
  double s = 0, u = p->unary[g][k];
  int64_t nb = 0;
  if (isinf(u)) nb++;
  else s += u;
  for (int32_t q = p->adj_start[g]; q < p->adj_start[g + 1]; q++) {
    const sp_pair *e = &p->pairs[p->adj[q]];
    double x = sp_pair_cost(p, e, g, k, c->cur[sp_pair_other(e, g)]);
    if (isinf(x)) nb++;
    else s += x;
  }
  *sum = s;
  *n_bad = nb;
}

/* Sets group g to k, updating the score's parts. */
static void chain_set(chain *c, int32_t g, int32_t k) {
  int32_t old = c->cur[g];
  if (old == k) return;
  double s0, s1;
  int64_t b0, b1;
  local_terms(c, g, old, &s0, &b0);
  local_terms(c, g, k, &s1, &b1);
  c->sum += s1 - s0;
  c->n_bad += b1 - b0;
  for (int32_t q = c->mem_start ? c->mem_start[g] : 0; c->mem_start && q < c->mem_start[g + 1]; q++)
    c->mem[c->mem_point[q]] += c->mem_term[q][k] - c->mem_term[q][old];
  c->cur[g] = k;
}

/* The score of the state from its parts, as sp_eval computes it. */
static sp_score chain_score(const chain *c) {
  const sp_problem *p = c->p;
  sp_score r = {c->sum, (double)c->n_bad, 0};
  if (p->mem_active) {
    for (int32_t t = 0; t < p->n_points; t++)
      if (c->mem[t] > r.peak_bytes) r.peak_bytes = c->mem[t];
    double over = r.peak_bytes - p->budget_bytes;
    if (over > 0) {
      if (p->has_penalty) r.objective += p->penalty_per_byte * over;
      else r.violation += over / (p->budget_bytes > 1 ? p->budget_bytes : 1);
    }
  }
  return r;
}

/* Recomputes the parts from scratch (at the start and at each reset, so that rounding never accumulates). */
static void chain_sync(chain *c) {
  const sp_problem *p = c->p;
  c->sum = 0;
  c->n_bad = 0;
  for (int32_t g = 0; g < p->n_groups; g++) {
    double u = p->unary[g][c->cur[g]];
    if (isinf(u)) c->n_bad++;
    else c->sum += u;
  }
  for (int32_t e = 0; e < p->n_pairs; e++) {
    const sp_pair *t = &p->pairs[e];
    double x = t->cost[(size_t)c->cur[t->g] * (size_t)p->n_s[t->h] + (size_t)c->cur[t->h]];
    if (isinf(x)) c->n_bad++;
    else c->sum += x;
  }
  if (p->mem_active)
    for (int32_t t = 0; t < p->n_points; t++) {
      c->mem[t] = 0;
      for (int32_t k = 0; k < p->mem[t].n_terms; k++) c->mem[t] += p->mem[t].terms[k].mem_bytes[c->cur[p->mem[t].terms[k].g]];
    }
}

/* The memory terms per group (CSR), for chain_set. */
static bool chain_init(chain *c, arena *a, const sp_problem *p, int32_t *cur) {
  memset(c, 0, sizeof *c);
  c->p = p;
  c->cur = cur;
  if (!p->mem_active) return true;
  int32_t n = 0;
  for (int32_t t = 0; t < p->n_points; t++) n += p->mem[t].n_terms;
  c->mem = arena_alloc(a, (size_t)p->n_points * sizeof *c->mem);
  c->mem_start = arena_alloc(a, ((size_t)p->n_groups + 1) * sizeof *c->mem_start);
  c->mem_point = arena_alloc(a, ((size_t)n + 1) * sizeof *c->mem_point);
  c->mem_term = arena_alloc(a, ((size_t)n + 1) * sizeof *c->mem_term);
  if (!c->mem || !c->mem_start || !c->mem_point || !c->mem_term) return false;
  memset(c->mem_start, 0, ((size_t)p->n_groups + 1) * sizeof *c->mem_start);
  for (int32_t t = 0; t < p->n_points; t++)
    for (int32_t k = 0; k < p->mem[t].n_terms; k++) c->mem_start[p->mem[t].terms[k].g + 1]++;
  for (int32_t g = 0; g < p->n_groups; g++) c->mem_start[g + 1] += c->mem_start[g];
  int32_t *fill = arena_alloc(a, ((size_t)p->n_groups + 1) * sizeof *fill);
  if (!fill) return false;
  memcpy(fill, c->mem_start, (size_t)p->n_groups * sizeof *fill);
  for (int32_t t = 0; t < p->n_points; t++)
    for (int32_t k = 0; k < p->mem[t].n_terms; k++) {
      int32_t at = fill[p->mem[t].terms[k].g]++;
      c->mem_point[at] = t;
      c->mem_term[at] = p->mem[t].terms[k].mem_bytes;
    }
  return true;
}

/* The Metropolised Gibbs weights of group g's allowed strategies with its neighbours as they are:
 * w[i] = exp(-alpha_ms · unit_ms · (E_g(allowed[g][i]) - least)), over the strategies with the fewest forbidden
 * terms (the others get 0); energy[i] is E_g, *fit the index of the least energy among them. Returns the sum. */
static double proposal_weights(const chain *c, int32_t g, int32_t *const *allowed, const int32_t *n_allowed,
                               double alpha_unit, double *energy, int64_t *n_bad, double *w, int32_t *fit) {
  int32_t n = n_allowed[g];
  *fit = 0;
  for (int32_t i = 0; i < n; i++) {
    local_terms(c, g, allowed[g][i], &energy[i], &n_bad[i]);
    if (n_bad[i] < n_bad[*fit] || (n_bad[i] == n_bad[*fit] && energy[i] < energy[*fit])) *fit = i;
  }
  double z = 0;
  for (int32_t i = 0; i < n; i++) {
    w[i] = n_bad[i] == n_bad[*fit] ? exp(-alpha_unit * (energy[i] - energy[*fit])) : 0;
    z += w[i];
  }
  return z;
}

ap_status solve_mcmc(ap_ctx *ctx, const sp_problem *p, const solve_opts *o, sp_result *r) {
  int32_t G = p->n_groups;
  arena *a = arena_new();
  int32_t *n_allowed = NULL;
  int32_t **allowed = a ? solve_allowed_lists(a, p, &n_allowed) : NULL;
  int32_t max_n = 1;
  for (int32_t g = 0; allowed && g < G; g++) max_n = n_allowed[g] > max_n ? n_allowed[g] : max_n;
  int32_t *cur = a ? arena_alloc(a, (size_t)G * sizeof *cur) : NULL;
  int32_t *best = a ? arena_alloc(a, (size_t)G * sizeof *best) : NULL;
  int32_t *movable = a ? arena_alloc(a, (size_t)G * sizeof *movable) : NULL;
  int32_t *undo_g = a ? arena_alloc(a, (size_t)G * sizeof *undo_g) : NULL;
  int32_t *undo_k = a ? arena_alloc(a, (size_t)G * sizeof *undo_k) : NULL;
  uint32_t *seen = a ? arena_alloc(a, (size_t)G * sizeof *seen) : NULL;
  int32_t *nbr = a ? arena_alloc(a, ((size_t)G + 1) * sizeof *nbr) : NULL;
  double *energy = a ? arena_alloc(a, (size_t)max_n * sizeof *energy) : NULL;
  double *w = a ? arena_alloc(a, (size_t)max_n * sizeof *w) : NULL;
  int64_t *n_bad = a ? arena_alloc(a, (size_t)max_n * sizeof *n_bad) : NULL;
  chain c;
  tblock tb;
  if (!allowed || !cur || !best || !movable || !undo_g || !undo_k || !seen || !nbr || !energy || !w || !n_bad ||
      !chain_init(&c, a, p, cur) || !tblock_init(&tb, a, p, allowed, n_allowed)) {
    arena_free(a);
    return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
  }
  int32_t n_movable = 0;
  for (int32_t g = 0; g < G; g++) {
    cur[g] = n_allowed[g] > 0 ? allowed[g][0] : 0;
    seen[g] = 0;
    if (n_allowed[g] >= 2) movable[n_movable++] = g;
  }
  /* alpha per ms, times ms per cost unit: per cost unit */
  double au = o->mcmc_alpha * (p->cost_unit_ms > 0 ? p->cost_unit_ms : 1);
  rng rg;
  rng_seed(&rg, o->seed);
  solve_budget b;
  solve_budget_start(&b, o);
  solve_reserve reserve;
  solve_budget_reserve(&b, &reserve);
  chain_sync(&c);
  sp_score cur_s = chain_score(&c), best_s = cur_s;
  memcpy(best, cur, (size_t)G * sizeof *best);
  bool out = solve_budget_spend(&b);
  /* TUNING: back to the best every tenth of the budget (with only a time budget, every 2000 moves). FlexFlow's
   * span, clamp(budget / 100, 1, 1000), cut the chain back before it crossed from one basin to another: on
   * GPT-2 over dgx-h100:4x8's [4, 8] mesh, where the batch split moves from one mesh axis to the other, 3 of 6
   * seeds ended 31-44% above the optimum with it and 1 of 8 with a tenth (bench/search.txt). */
  int64_t span = o->max_evals > 0 ? o->max_evals / 10 : 2000;
  if (span < 1) span = 1;
  int64_t last_reset = 0;
  uint32_t stamp = 0;
  for (int64_t iter = 1; !out && n_movable > 0; iter++) {
    if (iter - last_reset >= span) {
      memcpy(cur, best, (size_t)G * sizeof *cur);
      chain_sync(&c);
      cur_s = chain_score(&c);
      last_reset = iter;
    }
    /* A tree-block move, or FlexFlow's single move or propagation walk. */
    double sum0 = c.sum, log_q = 0;
    int32_t n_undo = 0;
    bool walk = false, mh = true;
    if (rng_uniform(&rg) < BLOCK_CHANCE) {
      tblock_best(&tb, cur, &rg);
      mh = false; /* never worse but for memory: Metropolis on the whole change */
      for (int32_t i = 0; i < tb.n_block; i++) {
        int32_t h = tb.order[i];
        if (tb.best[h] == cur[h]) continue;
        undo_g[n_undo] = h, undo_k[n_undo++] = cur[h];
        chain_set(&c, h, tb.best[h]);
      }
    } else {
      /* The first group: a Metropolised Gibbs draw among its other strategies. */
      int32_t g = movable[rng_below(&rg, (uint64_t)n_movable)], old = cur[g], old_i = 0;
      int32_t fit;
      double z = proposal_weights(&c, g, allowed, n_allowed, au, energy, n_bad, w, &fit);
      for (int32_t i = 0; i < n_allowed[g]; i++)
        if (allowed[g][i] == old) old_i = i;
      double z_wo_old = z - w[old_i];
      int32_t pick = -1;
      bool gibbs = z_wo_old > 0 && w[old_i] > 0;
      if (z_wo_old > 0) {
        double u = rng_uniform(&rg) * z_wo_old, acc = 0;
        for (int32_t i = 0; i < n_allowed[g] && pick < 0; i++)
          if (i != old_i && w[i] > 0 && (acc += w[i]) >= u) pick = i;
        for (int32_t i = n_allowed[g] - 1; pick < 0 && i >= 0; i--)
          if (i != old_i && w[i] > 0) pick = i; /* rounding at the top end */
      } else { /* every other strategy breaks more than the current one: uniform, as FlexFlow proposes */
        pick = (int32_t)rng_below(&rg, (uint64_t)(n_allowed[g] - 1));
        if (pick >= old_i) pick++;
      }
      /* Metropolis-Hastings for the Gibbs proposal: log q(old | new) / q(new | old) = alpha·ΔE_g + log Z_old/Z_new
       * (the alpha·ΔE_g part is added at the acceptance, from the score's parts) */
      if (gibbs) log_q = log(z_wo_old / (z - w[pick]));
      undo_g[n_undo] = g, undo_k[n_undo++] = old;
      chain_set(&c, g, allowed[g][pick]);
      walk = rng_uniform(&rg) < PROPAGATION_CHANCE;
      mh = gibbs && !walk;
      if (walk) { /* FlexFlow's propagate: on along edges to groups not yet visited */
        if (++stamp == 0) {
          memset(seen, 0, (size_t)G * sizeof *seen);
          stamp = 1;
        }
        seen[g] = stamp;
        int32_t at = g;
        do {
          int32_t n_nbr = 0;
          for (int32_t q = p->adj_start[at]; q < p->adj_start[at + 1]; q++) {
            int32_t h = sp_pair_other(&p->pairs[p->adj[q]], at);
            if (seen[h] != stamp && n_allowed[h] >= 2) nbr[n_nbr++] = h;
          }
          if (n_nbr == 0) break;
          int32_t h = nbr[rng_below(&rg, (uint64_t)n_nbr)];
          seen[h] = stamp;
          /* the strategy of h that fits best the one just set at `at`: its own cost plus the edge's resharding */
          int32_t fit_h = allowed[h][0];
          double fit_c = INFINITY;
          const sp_pair *e = NULL;
          for (int32_t q = p->adj_start[h]; q < p->adj_start[h + 1] && !e; q++)
            if (sp_pair_other(&p->pairs[p->adj[q]], h) == at) e = &p->pairs[p->adj[q]];
          for (int32_t i = 0; i < n_allowed[h]; i++) {
            double x = p->unary[h][allowed[h][i]] + sp_pair_cost(p, e, h, allowed[h][i], cur[at]);
            if (x < fit_c) fit_c = x, fit_h = allowed[h][i];
          }
          undo_g[n_undo] = h, undo_k[n_undo++] = cur[h];
          chain_set(&c, h, fit_h);
          at = h;
        } while (rng_uniform(&rg) < CONTINUE_PROPAGATION_CHANCE);
      }
    }
    sp_score s = chain_score(&c);
    out = solve_budget_spend(&b);
    if (sp_better(s, best_s)) {
      best_s = s;
      memcpy(best, cur, (size_t)G * sizeof *best);
    }
    bool accept;
    double d = au * (s.objective - cur_s.objective);
    if (s.violation != cur_s.violation) accept = s.violation < cur_s.violation;
    else if (!mh) accept = d <= 0 || rng_uniform(&rg) < exp(-d);
    else { /* an exact or Metropolised conditional draw: only the terms it left out (memory) and log_q decide */
      double x = -(d - au * (c.sum - sum0)) + log_q;
      accept = x >= 0 || log(rng_uniform(&rg)) < x;
    }
    if (accept) cur_s = s;
    else
      while (n_undo > 0) n_undo--, chain_set(&c, undo_g[n_undo], undo_k[n_undo]);
  }
  solve_budget_release(&b, &reserve);
  best_s = sp_eval(p, best); /* the best state scored in full (not a new evaluation) */
  solve_descend(p, allowed, n_allowed, best, &best_s, &b);
  solve_finish_heuristic(p, best, best_s, &b, r);
  arena_free(a);
  return AP_OK;
}
