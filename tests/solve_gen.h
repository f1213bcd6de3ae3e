/* Random solver problems for the solve tests (tests/test_solve.c, tests/test_solve_ilp.c): a generator that
 * keeps its own node-level arrays and writes the problem as a JSON file text, and a brute force that scores
 * choices from those arrays directly, independently of the library's reduction (problem_reduce.c), so that
 * the differential tests check the readers, the reduction and the solvers together. */
#ifndef AP_TESTS_SOLVE_GEN_H
#define AP_TESTS_SOLVE_GEN_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonx.h"
#include "core/rng.h"
#include "search/solve/problem.h"
#include "search/solve/solve.h"

enum { GEN_MAX_N = 64, GEN_MAX_S = 6, GEN_MAX_E = 256, GEN_MAX_T = 16 };

typedef struct {
  int n, n_s[GEN_MAX_N], follow[GEN_MAX_N];
  double cost[GEN_MAX_N][GEN_MAX_S], mem[GEN_MAX_N][GEN_MAX_S]; /* NAN = null */
  int n_e, ef[GEN_MAX_E], et[GEN_MAX_E];
  double ec[GEN_MAX_E][GEN_MAX_S][GEN_MAX_S];
  int n_a, aa[GEN_MAX_E], ab[GEN_MAX_E];
  int af[GEN_MAX_E][GEN_MAX_S][GEN_MAX_S];
  int n_t, tn[GEN_MAX_T], tnodes[GEN_MAX_T][GEN_MAX_N];
  bool budget, penalty;
  double budget_bytes, penalty_per_byte;
} gen_sp;

typedef struct {
  int n;
  int max_s;
  double p_follow, p_null, edges_per_node;
  int n_alias;
  bool mem, penalty;
  int shape; /* 0 DAG, 1 chain, 2 tree, 3 series-parallel (chains with diamonds) */
} gen_params;

static int gen_root(const gen_sp *g, int i) {
  while (g->follow[i] >= 0) i = g->follow[i];
  return i;
}

static double gen_num(rng *r, double p_null) {
  if (rng_uniform(r) < p_null) return NAN;
  return (double)rng_below(r, 1000) / 100.0; /* 0.00 .. 9.99 */
}

static void gen_add_edge(gen_sp *g, rng *r, int u, int v, double p_null) {
  if (g->n_e >= GEN_MAX_E) return;
  int e = g->n_e++;
  g->ef[e] = u, g->et[e] = v;
  for (int a = 0; a < g->n_s[u]; a++)
    for (int b = 0; b < g->n_s[v]; b++) g->ec[e][a][b] = a == b && rng_uniform(r) < 0.5 ? 0 : gen_num(r, p_null);
}

static void gen_sharding(gen_sp *g, const gen_params *gp, uint64_t seed) {
  rng r;
  rng_seed(&r, seed);
  memset(g, 0, sizeof *g);
  g->n = gp->n;
  for (int i = 0; i < g->n; i++) {
    g->follow[i] = -1;
    if (gp->shape == 0 && i > 0 && rng_uniform(&r) < gp->p_follow) {
      g->follow[i] = (int)rng_below(&r, (uint64_t)i); /* may itself be a follower: chains of follows */
      g->n_s[i] = g->n_s[g->follow[i]];
    } else {
      g->n_s[i] = 1 + (int)rng_below(&r, (uint64_t)gp->max_s);
    }
    for (int k = 0; k < g->n_s[i]; k++) {
      g->cost[i][k] = gen_num(&r, gp->p_null * 0.5);
      if (!isnan(g->cost[i][k])) g->cost[i][k] += gen_num(&r, 0); /* compute + communication */
      g->mem[i][k] = 100.0 * (double)(1 + rng_below(&r, 50));
    }
  }
  if (gp->shape == 0) {
    int n_e = (int)(gp->edges_per_node * g->n);
    for (int e = 0; e < n_e && g->n > 1; e++) {
      int v = 1 + (int)rng_below(&r, (uint64_t)(g->n - 1)), u = (int)rng_below(&r, (uint64_t)v);
      gen_add_edge(g, &r, u, v, gp->p_null);
    }
  } else if (gp->shape == 1) {
    for (int v = 1; v < g->n; v++) gen_add_edge(g, &r, v - 1, v, gp->p_null);
  } else if (gp->shape == 2) {
    for (int v = 1; v < g->n; v++) gen_add_edge(g, &r, (int)rng_below(&r, (uint64_t)v), v, gp->p_null);
  } else { /* a chain where every third node also gets a diamond: u -> v, u -> w, v -> x, w -> x */
    for (int v = 1; v < g->n; v++) {
      gen_add_edge(g, &r, v - 1, v, gp->p_null);
      if (v % 3 == 0 && v >= 2) gen_add_edge(g, &r, v - 2, v, gp->p_null); /* a parallel path around v-1 */
    }
  }
  for (int k = 0; k < gp->n_alias && g->n > 1 && g->n_a < GEN_MAX_E; k++) {
    int a = (int)rng_below(&r, (uint64_t)g->n), b = (int)rng_below(&r, (uint64_t)g->n);
    if (a == b) continue;
    int q = g->n_a++;
    g->aa[q] = a, g->ab[q] = b;
    for (int x = 0; x < g->n_s[a]; x++)
      for (int y = 0; y < g->n_s[b]; y++) g->af[q][x][y] = rng_uniform(&r) < 0.3;
  }
  if (gp->mem) {
    g->n_t = 1 + (int)rng_below(&r, 4);
    for (int t = 0; t < g->n_t; t++) {
      for (int i = 0; i < g->n; i++)
        if (rng_uniform(&r) < 0.5) g->tnodes[t][g->tn[t]++] = i;
    }
    /* A budget between the leanest and the average peak, so that it binds on some instances only. */
    double lo = 0, hi = 0;
    for (int t = 0; t < g->n_t; t++) {
      double l = 0, h = 0;
      for (int k = 0; k < g->tn[t]; k++) {
        int i = g->tnodes[t][k];
        double mn = INFINITY, mx = 0;
        for (int s = 0; s < g->n_s[i]; s++) mn = fmin(mn, g->mem[i][s]), mx = fmax(mx, g->mem[i][s]);
        l += mn, h += mx;
      }
      lo = fmax(lo, l), hi = fmax(hi, h);
    }
    g->budget = true;
    g->budget_bytes = lo + (hi - lo) * 0.5 * rng_uniform(&r);
    g->penalty = gp->penalty;
    g->penalty_per_byte = 0.01;
  }
}

static void gen_json_num(strbuf *sb, double x) {
  if (isnan(x)) sb_puts(sb, "null");
  else sb_printf(sb, "%.17g", x);
}

/* The problem as file text; the caller frees it. */
static char *gen_sharding_json(const gen_sp *g) {
  strbuf sb = {0};
  sb_puts(&sb, "{\"format\": \"autopar-sharding-problem/1\", \"nodes\": [");
  for (int i = 0; i < g->n; i++) {
    sb_printf(&sb, "%s{\"compute\": [", i ? ", " : "");
    /* Split the cost into compute and communication halves (a null stays null in compute). */
    for (int k = 0; k < g->n_s[i]; k++) {
      sb_puts(&sb, k ? ", " : "");
      gen_json_num(&sb, isnan(g->cost[i][k]) ? NAN : g->cost[i][k] * 0.25);
    }
    sb_puts(&sb, "], \"communication\": [");
    for (int k = 0; k < g->n_s[i]; k++) {
      sb_puts(&sb, k ? ", " : "");
      gen_json_num(&sb, isnan(g->cost[i][k]) ? 0 : g->cost[i][k] * 0.75);
    }
    sb_puts(&sb, "], \"memory_bytes\": [");
    for (int k = 0; k < g->n_s[i]; k++) {
      sb_puts(&sb, k ? ", " : "");
      gen_json_num(&sb, g->mem[i][k]);
    }
    sb_puts(&sb, "]");
    if (g->follow[i] >= 0) sb_printf(&sb, ", \"follow\": %d", g->follow[i]);
    sb_puts(&sb, "}");
  }
  sb_puts(&sb, "], \"edges\": [");
  for (int e = 0; e < g->n_e; e++) {
    sb_printf(&sb, "%s{\"from\": %d, \"to\": %d, \"cost\": [", e ? ", " : "", g->ef[e], g->et[e]);
    for (int a = 0; a < g->n_s[g->ef[e]]; a++) {
      sb_puts(&sb, a ? ", [" : "[");
      for (int b = 0; b < g->n_s[g->et[e]]; b++) {
        sb_puts(&sb, b ? ", " : "");
        gen_json_num(&sb, g->ec[e][a][b]);
      }
      sb_puts(&sb, "]");
    }
    sb_puts(&sb, "]}");
  }
  sb_puts(&sb, "], \"aliases\": [");
  for (int q = 0; q < g->n_a; q++) {
    sb_printf(&sb, "%s{\"a\": %d, \"b\": %d, \"forbidden\": [", q ? ", " : "", g->aa[q], g->ab[q]);
    for (int x = 0; x < g->n_s[g->aa[q]]; x++) {
      sb_puts(&sb, x ? ", [" : "[");
      for (int y = 0; y < g->n_s[g->ab[q]]; y++) sb_printf(&sb, "%s%d", y ? ", " : "", g->af[q][x][y]);
      sb_puts(&sb, "]");
    }
    sb_puts(&sb, "]}");
  }
  sb_puts(&sb, "], \"liveness\": [");
  for (int t = 0; t < g->n_t; t++) {
    sb_puts(&sb, t ? ", [" : "[");
    for (int k = 0; k < g->tn[t]; k++) sb_printf(&sb, "%s%d", k ? ", " : "", g->tnodes[t][k]);
    sb_puts(&sb, "]");
  }
  sb_puts(&sb, "]");
  if (g->budget) sb_printf(&sb, ", \"memory_budget_bytes\": %.17g", g->budget_bytes);
  if (g->penalty) sb_printf(&sb, ", \"overbudget_cost_per_byte\": %.17g", g->penalty_per_byte);
  sb_puts(&sb, "}");
  return sb_take(&sb);
}

/* Scores a node-level choice from the generator's arrays: false when infeasible. */
static bool gen_score(const gen_sp *g, const int *c, double *obj) {
  double o = 0;
  for (int i = 0; i < g->n; i++) {
    if (g->follow[i] >= 0 && c[i] != c[g->follow[i]]) return false;
    if (isnan(g->cost[i][c[i]]) || isnan(g->mem[i][c[i]])) return false;
    o += g->cost[i][c[i]];
  }
  for (int e = 0; e < g->n_e; e++) {
    double x = g->ec[e][c[g->ef[e]]][c[g->et[e]]];
    if (isnan(x)) return false;
    o += x;
  }
  for (int q = 0; q < g->n_a; q++)
    if (g->af[q][c[g->aa[q]]][c[g->ab[q]]]) return false;
  if (g->budget && g->n_t > 0) {
    double peak = 0;
    for (int t = 0; t < g->n_t; t++) {
      double m = 0;
      for (int k = 0; k < g->tn[t]; k++) m += g->mem[g->tnodes[t][k]][c[g->tnodes[t][k]]];
      peak = m > peak ? m : peak;
    }
    if (peak > g->budget_bytes) {
      if (!g->penalty) return false;
      o += g->penalty_per_byte * (peak - g->budget_bytes);
    }
  }
  *obj = o;
  return true;
}

/* The optimum by enumerating every leader's strategy; false when nothing is feasible. */
static bool gen_brute(const gen_sp *g, double *best_out) {
  int c[GEN_MAX_N] = {0}, leaders[GEN_MAX_N], n_l = 0;
  for (int i = 0; i < g->n; i++)
    if (g->follow[i] < 0) leaders[n_l++] = i;
  bool any = false;
  double best = INFINITY;
  for (;;) {
    for (int i = 0; i < g->n; i++) c[i] = c[gen_root(g, i)];
    double o;
    if (gen_score(g, c, &o) && o < best) best = o, any = true;
    int k = 0;
    for (; k < n_l; k++) {
      if (++c[leaders[k]] < g->n_s[leaders[k]]) break;
      c[leaders[k]] = 0;
    }
    if (k == n_l) break;
  }
  *best_out = best;
  return any;
}

/* Parses text as a sharding problem in arena a; fails the test on a reader error. */
static void gen_read(ap_ctx *ctx, arena *a, const char *text, sp_problem *p) {
  json_t *root = NULL;
  if (jx_parse(ctx, "gen.json", text, strlen(text), &root) != AP_OK) fail_msg("parse: %s", ap_ctx_error(ctx));
  ap_status st = sp_from_json(ctx, a, "gen.json", root, p);
  json_decref(root);
  if (st != AP_OK) fail_msg("read: %s", ap_ctx_error(ctx));
}

/* Node-level choice from a group-level one. */
static void gen_expand(const sp_problem *p, const int32_t *groups, int *nodes) {
  for (int32_t i = 0; i < p->n_nodes; i++) nodes[i] = groups[p->group_of[i]];
}

#endif
