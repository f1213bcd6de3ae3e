/* Monte Carlo tree search on sharding problem files (search layer; strategy "mcts"): UCT (Kocsis &
 * Szepesvári, "Bandit based Monte-Carlo Planning", ECML 2006) over per-node decisions.
 *
 * Depth d of the tree decides the strategy of group d (groups in file order, which files give in topological
 * order). An iteration selects children by UCB1, value/visits + c·sqrt(ln N_parent / visits) with c = 1/√2
 * (the constant of Kocsis & Szepesvári for rewards in [0, 1]), expands one untried strategy (cheapest first),
 * and completes the rest of the choice with a rollout policy: each later group takes, with probability 0.8,
 * the strategy that is locally cheapest given the groups already set (its cost plus resharding to them), else
 * a random allowed one. The complete choice is scored; the reward is its objective rescaled to [0, 1] between
 * the worst and the best feasible objectives seen so far (0 for an infeasible choice), backed up along the
 * path. The budget is shared out over the decisions: after its share, the root's child on the best choice
 * found so far is committed and becomes the new root (so the tree never needs more nodes than evaluations).
 * The best choice any rollout reached is the result, after a local descent (descent.h) on the tenth of the
 * budget kept for it. Seeded: the same seed and budget give the same result.
 * With a memory budget (mem_guide.h) the tree path and the rollout keep a bound on the peak of any completion:
 * under a hard budget a rollout takes only strategies whose leanest completion still fits (while any does),
 * under a penalty it adds the penalty on that bound's growth, and each rollout prices the bytes a strategy
 * takes above its group's leanest at one of a few multiples of the balancing price, picked by a UCB1 bandit on
 * the rollouts' rewards, so that the budget is spread over the groups rather than spent on the first ones. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search/solve/descent.h"
#include "search/solve/mem_guide.h"

/* TUNING: the memory prices a rollout may take, in units of the balancing price (mem_guide.h). */
enum { N_ARMS = 5 };
static const double ARM_PRICE[N_ARMS] = {0, 0.5, 1, 2, 4};

typedef struct {
  int32_t parent, first_child, next_sibling, action, n_expanded;
  double visits, value;
} tnode;

typedef struct {
  tnode *v;
  int32_t n, cap;
} tpool;

static int32_t tnew(tpool *t, int32_t parent, int32_t action) {
  if (t->n == t->cap) {
    int32_t cap = t->cap ? 2 * t->cap : 1024;
    tnode *n = realloc(t->v, (size_t)cap * sizeof *n);
    if (!n) return -1;
    t->v = n;
    t->cap = cap;
  }
  t->v[t->n] = (tnode){parent, -1, -1, action, 0, 0, 0};
  return t->n++;
}

static bool has_child(const tpool *t, int32_t node, int32_t action) {
  for (int32_t c = t->v[node].first_child; c >= 0; c = t->v[c].next_sibling)
    if (t->v[c].action == action) return true;
  return false;
}

/* The local cost of strategy k for group d given groups 0..d-1 set in state: its own cost, the resharding to
 * the groups set, one step of look-ahead to those still open (the best each can do against k), and what the
 * memory guide says k does to the budget (INFINITY under a hard budget that its leanest completion breaks). */
static double local_cost(const sp_problem *p, const mem_guide *mg, const int32_t *state, int32_t d, int32_t k,
                         int32_t *const *allowed, const int32_t *n_allowed, double cap) {
  double c = p->unary[d][k] + mg_extra_cost(mg, d, k);
  for (int32_t q = p->adj_start[d]; q < p->adj_start[d + 1] && c < cap; q++) {
    const sp_pair *e = &p->pairs[p->adj[q]];
    int32_t h = sp_pair_other(e, d);
    if (h < d) {
      c += sp_pair_cost(p, e, d, k, state[h]);
    } else {
      double m = INFINITY;
      for (int32_t j = 0; j < n_allowed[h]; j++) m = fmin(m, sp_pair_cost(p, e, d, k, allowed[h][j]) + p->unary[h][allowed[h][j]]);
      c += m;
    }
  }
  return c;
}

/* The rollout policy for group d, given groups 0..d-1 set in state (and in the memory guide). Under a hard
 * budget it takes only strategies whose leanest completion fits, while any does (the one of least excess
 * otherwise): a rollout that the budget would reject in the end carries no information about the costs. */
static int32_t rollout_pick(const sp_problem *p, const mem_guide *mg, const int32_t *state, int32_t d,
                            int32_t *const *allowed, const int32_t *n_allowed, rng *rg, int32_t *fits) {
  if (n_allowed[d] == 0) return 0;
  int32_t n_fit = 0, least = allowed[d][0];
  double least_over = INFINITY;
  for (int32_t i = 0; i < n_allowed[d]; i++) {
    double over = mg->active && !p->has_penalty ? mg_excess_bytes(mg, d, allowed[d][i]) : 0;
    if (over <= 0) fits[n_fit++] = allowed[d][i];
    else if (over < least_over) least_over = over, least = allowed[d][i];
  }
  if (n_fit == 0) return least;
  /* TUNING: 0.2 random moves keep rollouts from the same prefix apart; greedy ones make them good. */
  if (rng_uniform(rg) < 0.2) return fits[rng_below(rg, (uint64_t)n_fit)];
  int32_t best = fits[0];
  double best_cost = INFINITY;
  for (int32_t i = 0; i < n_fit; i++) {
    double c = local_cost(p, mg, state, d, fits[i], allowed, n_allowed, best_cost);
    if (c < best_cost) best_cost = c, best = fits[i];
  }
  return best;
}

ap_status solve_mcts(ap_ctx *ctx, const sp_problem *p, const solve_opts *o, sp_result *r) {
  int32_t G = p->n_groups;
  arena *a = arena_new();
  int32_t *n_allowed = NULL;
  int32_t **allowed = a ? solve_allowed_lists(a, p, &n_allowed) : NULL;
  int32_t *state = a ? arena_alloc(a, (size_t)G * sizeof *state) : NULL;
  int32_t *prefix = a ? arena_alloc(a, (size_t)G * sizeof *prefix) : NULL;
  int32_t *best = a ? arena_alloc(a, (size_t)G * sizeof *best) : NULL;
  int32_t max_s = 1;
  for (int32_t g = 0; g < G; g++) max_s = p->n_s[g] > max_s ? p->n_s[g] : max_s;
  int32_t *fits = a ? arena_alloc(a, (size_t)max_s * sizeof *fits) : NULL;
  mem_guide mg;
  bool mg_ok = allowed && mg_init(&mg, a, p, allowed, n_allowed);
  tpool t = {NULL, 0, 0};
  int32_t root = -1;
  if (!allowed || !state || !prefix || !best || !fits || !mg_ok || (root = tnew(&t, -1, -1)) < 0) {
    free(t.v);
    arena_free(a);
    return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
  }
  rng rg;
  rng_seed(&rg, o->seed);
  solve_budget b;
  solve_budget_start(&b, o);
  solve_reserve reserve;
  solve_budget_reserve(&b, &reserve);
  sp_score best_s = {INFINITY, INFINITY, 0};
  double lo = INFINITY, hi = -INFINITY;
  const double c_uct = 0.70710678118654752;
  double arm_n[N_ARMS] = {0}, arm_v[N_ARMS] = {0}, arm_n_total = 0;
  bool out = false, oom = false;
  for (int32_t root_depth = 0; root_depth < G && !out && !oom; root_depth++) {
    int64_t left = b.max_evals > 0 ? b.max_evals - b.n_evals : 1000 * (int64_t)(G - root_depth);
    int64_t share = left / (G - root_depth);
    if (share < 1) share = 1;
    for (int64_t it = 0; it < share && !out; it++) {
      int32_t node = root, d = root_depth;
      memcpy(state, prefix, (size_t)root_depth * sizeof *state);
      mg_reset(&mg);
      /* TUNING: half the rollouts price memory at a random fraction of up to twice the balancing price, so
       * that some spread the budget over the groups instead of spending it on the first ones. */
      /* The rollout's memory price: one arm of a UCB1 bandit over multiples of the balancing price, rewarded
       * like the tree (a rollout that spends the budget on the first groups scores worse than one that
       * spreads it; which spread is best depends on the problem, so the search learns it). */
      int32_t arm = 0;
      if (mg.active) {
        double best_ucb = -INFINITY, ln_n = log(arm_n_total > 1 ? arm_n_total : 1);
        for (int32_t q = 0; q < N_ARMS; q++) {
          double ucb = arm_n[q] > 0 ? arm_v[q] / arm_n[q] + c_uct * sqrt(ln_n / arm_n[q]) : INFINITY;
          if (ucb > best_ucb) best_ucb = ucb, arm = q;
        }
      }
      mg.price = ARM_PRICE[arm] * mg.unit_price;
      for (int32_t q = 0; q < root_depth; q++) mg_set(&mg, q, state[q]);
      while (d < G) { /* selection and one expansion */
        tnode *nd = &t.v[node];
        if (n_allowed[d] == 0) {
          state[d++] = 0;
          continue; /* no choice to make: the score will say infeasible */
        }
        while (nd->n_expanded < n_allowed[d] && has_child(&t, node, allowed[d][nd->n_expanded])) nd->n_expanded++;
        if (nd->n_expanded < n_allowed[d]) {
          int32_t action = allowed[d][nd->n_expanded];
          int32_t child = tnew(&t, node, action);
          if (child < 0) {
            oom = true;
            break;
          }
          nd = &t.v[node]; /* the pool may have moved */
          nd->n_expanded++;
          t.v[child].next_sibling = nd->first_child;
          nd->first_child = child;
          node = child;
          mg_set(&mg, d, action);
          state[d++] = action;
          break;
        }
        int32_t pick = -1;
        double best_ucb = -INFINITY, ln_n = log(nd->visits > 1 ? nd->visits : 1);
        for (int32_t c = nd->first_child; c >= 0; c = t.v[c].next_sibling) {
          double ucb = t.v[c].value / t.v[c].visits + c_uct * sqrt(ln_n / t.v[c].visits);
          if (ucb > best_ucb) best_ucb = ucb, pick = c;
        }
        node = pick;
        mg_set(&mg, d, t.v[pick].action);
        state[d++] = t.v[pick].action;
      }
      if (oom) break;
      for (; d < G; d++) {
        state[d] = rollout_pick(p, &mg, state, d, allowed, n_allowed, &rg, fits);
        mg_set(&mg, d, state[d]);
      }
      sp_score s = sp_eval(p, state);
      out = solve_budget_spend(&b);
      if (sp_better(s, best_s)) {
        best_s = s;
        memcpy(best, state, (size_t)G * sizeof *best);
      }
      double reward = 0;
      if (s.violation == 0) {
        if (s.objective < lo) lo = s.objective;
        if (s.objective > hi) hi = s.objective;
        reward = hi > lo ? (hi - s.objective) / (hi - lo) : 1;
      }
      arm_n[arm] += 1, arm_v[arm] += reward, arm_n_total += 1;
      for (int32_t v = node; v >= 0; v = t.v[v].parent) {
        t.v[v].visits += 1;
        t.v[v].value += reward;
      }
    }
    /* Commit the root's child on the best choice found so far (single-player MCTS keeps the best sequence
     * rather than the most visited move: Schadd et al., "Single-Player Monte-Carlo Tree Search", CG 2008),
     * creating it when that choice came from a rollout below the tree. */
    if (n_allowed[root_depth] == 0 || isinf(best_s.violation)) {
      prefix[root_depth] = n_allowed[root_depth] ? allowed[root_depth][0] : 0;
      continue; /* no choice at this depth (the tree skips it), or no iteration ran */
    }
    int32_t pick = -1;
    for (int32_t c = t.v[root].first_child; c >= 0 && pick < 0; c = t.v[c].next_sibling)
      if (t.v[c].action == best[root_depth]) pick = c;
    if (pick < 0) {
      if ((pick = tnew(&t, root, best[root_depth])) < 0) {
        oom = true;
        break;
      }
      t.v[pick].next_sibling = t.v[root].first_child; /* expansion skips actions that have a child */
      t.v[root].first_child = pick;
      t.v[pick].visits = 1; /* never read as 0 by UCB */
    }
    prefix[root_depth] = best[root_depth];
    root = pick;
  }
  free(t.v);
  if (oom) {
    arena_free(a);
    return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
  }
  if (isinf(best_s.violation)) { /* no iteration ran (an empty budget): score the committed prefix */
    for (int32_t g = 0; g < G; g++) best[g] = n_allowed[g] ? allowed[g][0] : 0;
    best_s = sp_eval(p, best);
  }
  solve_budget_release(&b, &reserve);
  solve_descend(p, allowed, n_allowed, best, &best_s, &b);
  solve_finish_heuristic(p, best, best_s, &b, r);
  arena_free(a);
  return AP_OK;
}
