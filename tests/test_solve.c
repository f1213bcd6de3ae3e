/* Tests of the problem-file solvers that need no optional part (src/search/solve/problem*.c, inter_op.c, elim_dp.c,
 * greedy.c, mcmc.c, mcts.c, rl.c, recursive.c, solve_api.c): the stage DP against brute force, the elimination
 * DP against brute force on chains, trees and series-parallel graphs, the heuristics within 2% of the exact
 * optimum on 50-node trees at 20,000 evaluations, the readers' messages on bad files, and the "ilp" strategy
 * without its part. The ILP's own tests are in test_solve_ilp.c (built with the part). */
#include "testutil.h"

#include "search/solve/tree_block.h"
#include "solve_gen.h"

/* ---- Stage problems ---- */

typedef struct {
  int L, N, B, M, C, sub[4][2];
  double cost[5][5][4][2]; /* NAN = null */
  int succ[5][5][4][2];    /* -1 = unbounded */
  bool has_succ;
} gen_stp;

static void gen_stage(gen_stp *g, uint64_t seed) {
  rng r;
  rng_seed(&r, seed);
  memset(g, 0, sizeof *g);
  g->L = 1 + (int)rng_below(&r, 5);
  g->N = 1 + (int)rng_below(&r, 6);
  g->B = 1 + (int)rng_below(&r, 8);
  g->M = 1 + (int)rng_below(&r, 4);
  g->C = 1 + (int)rng_below(&r, 2);
  static const int shapes[4][2] = {{1, 1}, {1, 2}, {2, 1}, {1, 3}};
  for (int m = 0; m < g->M; m++) g->sub[m][0] = shapes[m][0], g->sub[m][1] = shapes[m][1];
  g->has_succ = rng_uniform(&r) < 0.5;
  for (int i = 0; i < g->L; i++)
    for (int j = 0; j < g->L; j++)
      for (int m = 0; m < g->M; m++)
        for (int c = 0; c < g->C; c++) {
          g->cost[i][j][m][c] = j < i || rng_uniform(&r) < 0.2 ? NAN : (double)(1 + rng_below(&r, 400)) / 40.0;
          g->succ[i][j][m][c] = rng_uniform(&r) < 0.3 ? -1 : (int)rng_below(&r, 4);
        }
}

static char *gen_stage_json(const gen_stp *g) {
  strbuf sb = {0};
  sb_printf(&sb, "{\"format\": \"autopar-stage-problem/1\", \"n_layers\": %d, \"n_devices\": %d, \"n_micro_batches\": %d, "
                 "\"n_configs\": %d, \"submeshes\": [", g->L, g->N, g->B, g->C);
  for (int m = 0; m < g->M; m++) sb_printf(&sb, "%s[%d, %d]", m ? ", " : "", g->sub[m][0], g->sub[m][1]);
  for (int pass = 0; pass < (g->has_succ ? 2 : 1); pass++) {
    sb_printf(&sb, "], \"%s\": [", pass ? "max_succ_stages" : "stage_cost_s");
    for (int i = 0; i < g->L; i++) {
      sb_puts(&sb, i ? ", [" : "[");
      for (int j = 0; j < g->L; j++) {
        sb_puts(&sb, j ? ", [" : "[");
        for (int m = 0; m < g->M; m++) {
          sb_puts(&sb, m ? ", [" : "[");
          for (int c = 0; c < g->C; c++) {
            sb_puts(&sb, c ? ", " : "");
            if (pass == 0) gen_json_num(&sb, g->cost[i][j][m][c]);
            else if (g->succ[i][j][m][c] < 0) sb_puts(&sb, "null");
            else sb_printf(&sb, "%d", g->succ[i][j][m][c]);
          }
          sb_puts(&sb, "]");
        }
        sb_puts(&sb, "]");
      }
      sb_puts(&sb, "]");
    }
  }
  sb_puts(&sb, "]}");
  return sb_take(&sb);
}

/* Every sequence of stages from layer i on d devices, k stages so far (stack holds them). */
static void stage_brute(const gen_stp *g, int i, int d, int k, int (*stack)[3], double *best) {
  if (i == g->L) {
    if (d != 0) return;
    double sum = 0, mx = 0;
    int first = 0;
    for (int s = 0; s < k; s++) {
      int last = stack[s][0], m = stack[s][1], c = stack[s][2];
      double t = g->cost[first][last][m][c];
      if (g->has_succ && g->succ[first][last][m][c] >= 0 && k - 1 - s > g->succ[first][last][m][c]) return;
      sum += t, mx = fmax(mx, t);
      first = last + 1;
    }
    double obj = sum + (g->B - 1) * mx;
    if (obj < *best) *best = obj;
    return;
  }
  for (int j = i; j < g->L; j++)
    for (int m = 0; m < g->M; m++) {
      int size = g->sub[m][0] * g->sub[m][1];
      if (size > d) continue;
      for (int c = 0; c < g->C; c++) {
        if (isnan(g->cost[i][j][m][c])) continue;
        stack[k][0] = j, stack[k][1] = m, stack[k][2] = c;
        stage_brute(g, j + 1, d - size, k + 1, stack, best);
      }
    }
}

static void test_stage_dp_equals_brute_force(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  int n_feasible = 0;
  for (uint64_t seed = 1; seed <= 300; seed++) {
    gen_stp g;
    gen_stage(&g, seed);
    char *text = gen_stage_json(&g);
    json_t *root = NULL;
    assert_int_equal(jx_parse(ctx, "stage.json", text, strlen(text), &root), AP_OK);
    arena *a = arena_new();
    stp_problem p;
    if (stp_from_json(ctx, a, "stage.json", root, &p) != AP_OK) fail_msg("seed %d: %s", (int)seed, ap_ctx_error(ctx));
    stp_stage stages[8];
    stp_result r = {SOLVE_INFEASIBLE, NAN, NAN, 0, stages, 0};
    solve_opts o;
    solve_opts_init(&o);
    assert_int_equal(solve_inter_op(ctx, &p, &o, &r), AP_OK);
    int stack[8][3];
    double best = INFINITY;
    stage_brute(&g, 0, g.N, 0, stack, &best);
    if (isinf(best)) {
      if (r.status != SOLVE_INFEASIBLE) fail_msg("seed %d: DP found %g, brute force nothing", (int)seed, r.objective);
    } else {
      n_feasible++;
      if (r.status != SOLVE_OPTIMAL) fail_msg("seed %d: DP status %d, brute force %g", (int)seed, r.status, best);
      assert_rel_close(r.objective, best, 1e-12);
      /* The stages returned cover the layers in order on exactly n_devices and cost what the DP says. */
      double sum = 0, mx = 0;
      int next = 0, dev = 0;
      for (int s = 0; s < r.n_stages; s++) {
        assert_int_equal(r.stages[s].first_layer, next);
        double t = g.cost[r.stages[s].first_layer][r.stages[s].last_layer][r.stages[s].submesh][r.stages[s].config];
        if (isnan(t)) fail_msg("seed %d: the DP picked a null stage", (int)seed);
        sum += t, mx = fmax(mx, t);
        dev += g.sub[r.stages[s].submesh][0] * g.sub[r.stages[s].submesh][1];
        next = r.stages[s].last_layer + 1;
      }
      assert_int_equal(next, g.L);
      assert_int_equal(dev, g.N);
      assert_rel_close(sum + (g.B - 1) * mx, best, 1e-12);
    }
    arena_free(a);
    json_decref(root);
    free(text);
  }
  if (n_feasible < 100) fail_msg("only %d of 300 random stage problems were feasible: the test checks too little", n_feasible);
  ap_ctx_free(ctx);
}

/* ---- Sharding problems: the elimination DP, the heuristics ---- */

static sp_result run(ap_ctx *ctx, ap_status (*fn)(ap_ctx *, const sp_problem *, const solve_opts *, sp_result *),
                     const sp_problem *p, const solve_opts *o, int32_t *choice) {
  sp_result r = {SOLVE_INFEASIBLE, NAN, NAN, choice, 0, NULL, false};
  ap_status st = fn(ctx, p, o, &r);
  if (st != AP_OK) fail_msg("solve: %s", ap_ctx_error(ctx));
  return r;
}

static void test_elim_dp_equals_brute_force(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  int n_checked = 0;
  for (int shape = 1; shape <= 3; shape++)
    for (uint64_t seed = 1; seed <= 60; seed++) {
      gen_params gp = {2 + (int)(seed % 8), 3, 0, 0.15, 0, 0, false, false, shape};
      static gen_sp g;
      gen_sharding(&g, &gp, seed * 7 + (uint64_t)shape);
      char *text = gen_sharding_json(&g);
      arena *a = arena_new();
      sp_problem p;
      gen_read(ctx, a, text, &p);
      int32_t choice[GEN_MAX_N];
      solve_opts o;
      solve_opts_init(&o);
      sp_result r = run(ctx, solve_elim_dp, &p, &o, choice);
      double best;
      bool feasible = gen_brute(&g, &best);
      if (!feasible) {
        assert_int_equal(r.status, SOLVE_INFEASIBLE);
      } else {
        assert_int_equal(r.status, SOLVE_OPTIMAL);
        assert_rel_close(r.objective, best, 1e-9);
        int nodes[GEN_MAX_N];
        double o2;
        gen_expand(&p, choice, nodes);
        assert_true(gen_score(&g, nodes, &o2));
        assert_rel_close(o2, best, 1e-9);
        n_checked++;
      }
      arena_free(a);
      free(text);
    }
  if (n_checked < 100) fail_msg("only %d feasible instances", n_checked);
  ap_ctx_free(ctx);
}

/* A tree block is the exact best of its groups given the rest: on chain and tree problems (one tree holds every
 * group with a choice) it equals brute force; on DAGs its groups' pairs form a forest and the result is never
 * worse than where it started. */
static void test_tree_block_exact(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  int n_checked = 0;
  for (int shape = 0; shape <= 2; shape++)
    for (uint64_t seed = 1; seed <= 60; seed++) {
      gen_params gp = {2 + (int)(seed % 9), 4, shape ? 0.2 : 0, 0.15, 1.5, 0, false, false, shape};
      static gen_sp g;
      gen_sharding(&g, &gp, seed * 11 + (uint64_t)shape);
      char *text = gen_sharding_json(&g);
      arena *a = arena_new();
      sp_problem p;
      gen_read(ctx, a, text, &p);
      int32_t *n_allowed = NULL, **allowed = solve_allowed_lists(a, &p, &n_allowed), choice[GEN_MAX_N];
      bool any_empty = false;
      for (int32_t k = 0; k < p.n_groups; k++) {
        any_empty |= n_allowed[k] == 0;
        choice[k] = n_allowed[k] > 0 ? allowed[k][n_allowed[k] - 1] : 0; /* the dearest: room to improve */
      }
      tblock t;
      assert_true(tblock_init(&t, a, &p, allowed, n_allowed));
      rng rg;
      rng_seed(&rg, seed);
      sp_score before = sp_eval(&p, choice);
      tblock_best(&t, choice, &rg);
      int32_t n_inside = 0, n_movable = 0;
      for (int32_t k = 0; k < p.n_pairs; k++)
        n_inside += t.mark[p.pairs[k].g] == t.stamp && t.mark[p.pairs[k].h] == t.stamp;
      for (int32_t k = 0; k < p.n_groups; k++) n_movable += n_allowed[k] >= 2;
      assert_true(n_inside < t.n_block || t.n_block == 0); /* a forest */
      for (int32_t i = 0; i < t.n_block; i++) choice[t.order[i]] = t.best[t.order[i]];
      sp_score after = sp_eval(&p, choice);
      if (!any_empty && before.violation == 0) assert_true(after.violation == 0 && after.objective <= before.objective);
      double best;
      if (shape > 0 && !any_empty && gen_brute(&g, &best)) {
        assert_int_equal(t.n_block, n_movable); /* a tree's every group fits in one block */
        if (after.violation != 0) fail_msg("shape %d seed %d: the block is infeasible, brute force %g", shape, (int)seed, best);
        assert_rel_close(after.objective, best, 1e-9);
        n_checked++;
      }
      arena_free(a);
      free(text);
    }
  if (n_checked < 60) fail_msg("only %d feasible tree instances", n_checked);
  ap_ctx_free(ctx);
}

static void test_elim_dp_refuses_what_it_cannot_solve(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  /* K4: every node has three neighbours, not series-parallel. */
  const char *k4 = "{\"format\": \"autopar-sharding-problem/1\", \"nodes\": ["
                   "{\"compute\": [1, 2], \"communication\": [0, 0], \"memory_bytes\": [0, 0]},"
                   "{\"compute\": [1, 2], \"communication\": [0, 0], \"memory_bytes\": [0, 0]},"
                   "{\"compute\": [1, 2], \"communication\": [0, 0], \"memory_bytes\": [0, 0]},"
                   "{\"compute\": [1, 2], \"communication\": [0, 0], \"memory_bytes\": [0, 0]}], \"edges\": ["
                   "{\"from\": 0, \"to\": 1, \"cost\": [[0, 1], [1, 0]]}, {\"from\": 0, \"to\": 2, \"cost\": [[0, 1], [1, 0]]},"
                   "{\"from\": 0, \"to\": 3, \"cost\": [[0, 1], [1, 0]]}, {\"from\": 1, \"to\": 2, \"cost\": [[0, 1], [1, 0]]},"
                   "{\"from\": 1, \"to\": 3, \"cost\": [[0, 1], [1, 0]]}, {\"from\": 2, \"to\": 3, \"cost\": [[0, 1], [1, 0]]}]}";
  arena *a = arena_new();
  sp_problem p;
  gen_read(ctx, a, k4, &p);
  int32_t choice[4];
  sp_result r = {SOLVE_INFEASIBLE, NAN, NAN, choice, 0, NULL, false};
  solve_opts o;
  solve_opts_init(&o);
  assert_int_equal(solve_elim_dp(ctx, &p, &o, &r), AP_UNSUPPORTED);
  assert_error_contains(ctx, "not series-parallel");
  arena_free(a);
  ap_ctx_free(ctx);
}

/* MCMC, MCTS and RL reach within 2% of the exact optimum on 50-node trees at 20,000 evaluations. */
static void test_heuristics_within_2_percent_on_trees(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  struct {
    const char *name;
    ap_status (*fn)(ap_ctx *, const sp_problem *, const solve_opts *, sp_result *);
  } hs[] = {{"mcmc", solve_mcmc}, {"mcts", solve_mcts}, {"rl", solve_rl}, {"recursive", solve_recursive}};
  for (uint64_t seed = 1; seed <= 4; seed++) {
    gen_params gp = {20 + 10 * (int)seed, 4, 0, 0.02, 0, 0, false, false, seed % 2 ? 2 : 3};
    static gen_sp g;
    gen_sharding(&g, &gp, 1000 + seed);
    char *text = gen_sharding_json(&g);
    arena *a = arena_new();
    sp_problem p;
    gen_read(ctx, a, text, &p);
    int32_t choice[GEN_MAX_N];
    solve_opts o;
    solve_opts_init(&o);
    o.time_budget_s = 0; /* the evaluation budget alone, so that the result is reproducible */
    sp_result ex = run(ctx, solve_elim_dp, &p, &o, choice);
    assert_int_equal(ex.status, SOLVE_OPTIMAL);
    for (size_t h = 0; h < AP_COUNT(hs); h++) {
      o.seed = seed;
      sp_result r = run(ctx, hs[h].fn, &p, &o, choice);
      if (r.status != SOLVE_FEASIBLE || r.objective > ex.objective * 1.02 + 1e-9)
        fail_msg("%s on %d nodes: %g against the optimum %g (status %d)", hs[h].name, gp.n, r.objective,
                 ex.objective, r.status);
      assert_true(r.n_evals <= o.max_evals + 1);
      /* The same seed gives the same result. */
      int32_t again[GEN_MAX_N];
      sp_result r2 = run(ctx, hs[h].fn, &p, &o, again);
      assert_true(r2.objective == r.objective);
      assert_memory_equal(again, choice, (size_t)p.n_groups * sizeof *again);
    }
    arena_free(a);
    free(text);
  }
  ap_ctx_free(ctx);
}

static int stop_now(void *user, double fraction, const char *what) {
  (void)fraction, (void)what;
  ++*(int *)user;
  return 1;
}

/* The context's progress callback stops a heuristic at its first report (1,024 evaluations). */
static void test_progress_stops_a_heuristic(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  int calls = 0;
  ap_ctx_set_progress(ctx, stop_now, &calls);
  gen_params gp = {30, 4, 0, 0, 0, 0, false, false, 1};
  static gen_sp g;
  gen_sharding(&g, &gp, 77);
  char *text = gen_sharding_json(&g);
  arena *a = arena_new();
  sp_problem p;
  gen_read(ctx, a, text, &p);
  int32_t choice[GEN_MAX_N];
  solve_opts o;
  solve_opts_init(&o);
  o.progress = ctx;
  sp_result r = run(ctx, solve_mcmc, &p, &o, choice);
  assert_int_equal(calls, 1);
  assert_int_equal(r.n_evals, 1024);
  assert_int_equal(r.status, SOLVE_FEASIBLE);
  arena_free(a);
  free(text);
  ap_ctx_free(ctx);
}

/* Greedy propagation keeps the annotated strategies and the locally cheapest elsewhere. */
static void test_greedy_keeps_annotations(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  /* A chain 0 -> 1 -> 2: resharding is free only on equal strategies; node 1 alone prefers strategy 0. */
  const char *chain = "{\"format\": \"autopar-sharding-problem/1\", \"nodes\": ["
                      "{\"compute\": [1, 1], \"communication\": [0, 0], \"memory_bytes\": [0, 0]},"
                      "{\"compute\": [1, 1.5], \"communication\": [0, 0], \"memory_bytes\": [0, 0]},"
                      "{\"compute\": [1, 1], \"communication\": [0, 0], \"memory_bytes\": [0, 0]}], \"edges\": ["
                      "{\"from\": 0, \"to\": 1, \"cost\": [[0, 5], [5, 0]]}, {\"from\": 1, \"to\": 2, \"cost\": [[0, 5], [5, 0]]}]}";
  arena *a = arena_new();
  sp_problem p;
  gen_read(ctx, a, chain, &p);
  int32_t ann[3] = {1, -1, -1}, choice[3];
  solve_opts o;
  solve_opts_init(&o);
  sp_result r = run(ctx, solve_greedy, &p, &o, choice);
  assert_int_equal(choice[0], 0); /* from the cheapest node: all strategy 0 */
  assert_int_equal(choice[2], 0);
  assert_rel_close(r.objective, 3, 1e-12);
  o.annotate = ann;
  r = run(ctx, solve_greedy, &p, &o, choice);
  assert_int_equal(choice[0], 1); /* the annotation propagates along the chain */
  assert_int_equal(choice[1], 1);
  assert_int_equal(choice[2], 1);
  assert_rel_close(r.objective, 3.5, 1e-12);
  assert_int_equal(r.status, SOLVE_FEASIBLE);
  arena_free(a);
  ap_ctx_free(ctx);
}

/* Without the "ilp" part in the context, the ilp strategy fails naming the part. */
static void test_ilp_without_part(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  arena *a = arena_new();
  sp_problem p;
  gen_read(ctx, a, "{\"format\": \"autopar-sharding-problem/1\", \"nodes\": [{\"compute\": [1], \"communication\": [0], "
                   "\"memory_bytes\": [0]}]}", &p);
  int32_t choice[1];
  sp_result r = {SOLVE_INFEASIBLE, NAN, NAN, choice, 0, NULL, false};
  solve_opts o;
  solve_opts_init(&o);
  assert_int_equal(solve_ilp(ctx, &p, &o, &r), AP_UNSUPPORTED);
  assert_error_contains(ctx, "part \"ilp\"");
  arena_free(a);
  ap_ctx_free(ctx);
}

/* Bad files: one case per line, the text of the file and what the message must contain. */
static void test_reader_messages(void **state) {
  (void)state;
  static const struct {
    const char *json, *want;
  } cases[] = {
      {"[1]", "must be a JSON object"},
      {"{\"format\": \"autopar-sharding-problem/2\"}", "format: expected \"autopar-sharding-problem/1\""},
      {"{\"format\": \"autopar-sharding-problem/1\"}", "nodes: required field missing"},
      {"{\"format\": \"autopar-sharding-problem/1\", \"nodes\": [], \"x\": 1}", "x: unknown field"},
      {"{\"format\": \"autopar-sharding-problem/1\", \"nodes\": []}", "nodes: must list at least one node"},
      {"{\"format\": \"autopar-sharding-problem/1\", \"nodes\": [{\"compute\": [1, \"a\"], \"communication\": [0, 0], \"memory_bytes\": [0, 0]}]}",
       "nodes[0].compute[1]: must be a number in [0, 1e18] or null"},
      {"{\"format\": \"autopar-sharding-problem/1\", \"nodes\": [{\"compute\": [1, 2], \"communication\": [0], \"memory_bytes\": [0, 0]}]}",
       "nodes[0].communication: must have 2 entries"},
      {"{\"format\": \"autopar-sharding-problem/1\", \"nodes\": [{\"compute\": [1], \"communication\": [0], \"memory_bytes\": [-1]}]}",
       "nodes[0].memory_bytes[0]: must be a number in [0, 1e18] or null"},
      {"{\"format\": \"autopar-sharding-problem/1\", \"nodes\": [{\"compute\": [1], \"communication\": [0], \"memory_bytes\": [0], \"follow\": 3}]}",
       "nodes[0].follow: expected an integer in [0, 0], got 3"},
      {"{\"format\": \"autopar-sharding-problem/1\", \"nodes\": [{\"compute\": [1], \"communication\": [0], \"memory_bytes\": [0], \"follow\": 1},"
       "{\"compute\": [1, 2], \"communication\": [0, 0], \"memory_bytes\": [0, 0]}]}",
       "nodes[0].follow: node 0 has 1 strategies but the node it follows (1) has 2"},
      {"{\"format\": \"autopar-sharding-problem/1\", \"nodes\": [{\"compute\": [1], \"communication\": [0], \"memory_bytes\": [0], \"follow\": 1},"
       "{\"compute\": [1], \"communication\": [0], \"memory_bytes\": [0], \"follow\": 2}, {\"compute\": [1], \"communication\": [0], \"memory_bytes\": [0], \"follow\": 0}]}",
       "nodes[0].follow: the chain of follows from this node is a cycle"},
      {"{\"format\": \"autopar-sharding-problem/1\", \"nodes\": [{\"compute\": [1], \"communication\": [0], \"memory_bytes\": [0]},"
       "{\"compute\": [1, 2], \"communication\": [0, 0], \"memory_bytes\": [0, 0]}], \"edges\": [{\"from\": 0, \"to\": 1, \"cost\": [[1]]}]}",
       "edges[0].cost[0]: must be an array of 2 entries"},
      {"{\"format\": \"autopar-sharding-problem/1\", \"nodes\": [{\"compute\": [1], \"communication\": [0], \"memory_bytes\": [0]},"
       "{\"compute\": [1, 2], \"communication\": [0, 0], \"memory_bytes\": [0, 0]}], \"edges\": [{\"from\": 0, \"to\": 1, \"cost\": [[1, 2], [3, 4]]}]}",
       "edges[0].cost: must have 1 rows"},
      {"{\"format\": \"autopar-sharding-problem/1\", \"nodes\": [{\"compute\": [1], \"communication\": [0], \"memory_bytes\": [0]}], "
       "\"edges\": [{\"from\": 0, \"to\": 5, \"cost\": [[1]]}]}",
       "edges[0].to: expected an integer in [0, 0], got 5"},
      {"{\"format\": \"autopar-sharding-problem/1\", \"nodes\": [{\"compute\": [1], \"communication\": [0], \"memory_bytes\": [0]},"
       "{\"compute\": [1], \"communication\": [0], \"memory_bytes\": [0]}], \"aliases\": [{\"a\": 0, \"b\": 1, \"forbidden\": [[2]]}]}",
       "aliases[0].forbidden[0][0]: must be 0 or 1"},
      {"{\"format\": \"autopar-sharding-problem/1\", \"nodes\": [{\"compute\": [1], \"communication\": [0], \"memory_bytes\": [0]}], "
       "\"liveness\": [[0, 0]]}",
       "liveness[0][1]: lists a node already in this set"},
      {"{\"format\": \"autopar-sharding-problem/1\", \"nodes\": [{\"compute\": [1], \"communication\": [0], \"memory_bytes\": [0]}], "
       "\"overbudget_cost_per_byte\": 1}",
       "overbudget_cost_per_byte: needs memory_budget_bytes"},
      {"{\"format\": \"autopar-stage-problem/1\", \"n_layers\": 2, \"n_devices\": 1, \"n_micro_batches\": 1, \"n_configs\": 1, "
       "\"submeshes\": [[1, 1]], \"stage_cost_s\": [[[[1]], [[1]]], [[[1]]]]}",
       "stage_cost_s[1]: must be an array of 2 entries (one per last layer j)"},
      {"{\"format\": \"autopar-stage-problem/1\", \"n_layers\": 1, \"n_devices\": 1, \"n_micro_batches\": 1, \"n_configs\": 1, "
       "\"submeshes\": [[1, 0]], \"stage_cost_s\": [[[[1]]]]}",
       "submeshes[0]: must be [hosts, devices per host]"},
      {"{\"format\": \"autopar-stage-problem/1\", \"n_layers\": 1, \"n_devices\": 1, \"n_micro_batches\": 1, \"n_configs\": 1, "
       "\"submeshes\": [[1, 1]], \"stage_cost_s\": [[[[1]]]], \"max_succ_stages\": [[[[0.5]]]]}",
       "max_succ_stages[0][0][0][0]: must be an integer >= 0 or null"},
      {"{\"format\": \"autopar-stage-problem/1\", \"n_layers\": 0}", "n_layers: expected an integer in [1, 1024], got 0"},
  };
  ap_ctx *ctx = ap_ctx_new();
  for (size_t i = 0; i < AP_COUNT(cases); i++) {
    json_t *root = NULL;
    assert_int_equal(jx_parse(ctx, "p.json", cases[i].json, strlen(cases[i].json), &root), AP_OK);
    arena *a = arena_new();
    bool stage = strstr(cases[i].json, "stage-problem") != NULL;
    sp_problem p;
    stp_problem q;
    ap_status st = stage ? stp_from_json(ctx, a, "p.json", root, &q) : sp_from_json(ctx, a, "p.json", root, &p);
    if (st != AP_INVALID) fail_msg("case %zu: status %d, want AP_INVALID", i, (int)st);
    const char *m = ap_ctx_error(ctx);
    if (strncmp(m, "p.json: ", 8) != 0 || !strstr(m, cases[i].want))
      fail_msg("case %zu: \"%s\" does not name \"%s\"", i, m, cases[i].want);
    arena_free(a);
    json_decref(root);
  }
  ap_ctx_free(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stage_dp_equals_brute_force),
      cmocka_unit_test(test_elim_dp_equals_brute_force),
      cmocka_unit_test(test_elim_dp_refuses_what_it_cannot_solve),
      cmocka_unit_test(test_tree_block_exact),
      cmocka_unit_test(test_heuristics_within_2_percent_on_trees),
      cmocka_unit_test(test_progress_stops_a_heuristic),
      cmocka_unit_test(test_greedy_keeps_annotations),
      cmocka_unit_test(test_ilp_without_part),
      cmocka_unit_test(test_reader_messages),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
