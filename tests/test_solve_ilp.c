/* Tests of the intra-op ILP (src/search/solve/sharding_ilp.c, the "ilp" part; listed in mk/ilp.mk, so they run only
 * where the part is built): the ILP against brute force on random small sharding problems with followers
 * (chains of them included), aliases, null entries, memory budgets and the over-budget penalty; the LP bound
 * below the optimum; MCMC, MCTS and RL within 2% of the ILP's optimum on random problems of 20 to 50 nodes at
 * 20,000 evaluations; an "optimal" ILP result never beaten by a heuristic's feasible one (a regression instance
 * where CBC's preprocessing gave a wrong optimum, and 48 seeds of 20 to 50 nodes); and ap_solve_file's output for a feasible and an infeasible file. */
#include "testutil.h"

#include "solve_gen.h"

static ap_ctx *ilp_ctx(void) {
  ap_ctx *ctx = ap_ctx_new();
  assert_non_null(ctx);
  assert_int_equal(ap_ctx_add_part(ctx, ap_part_ilp()), AP_OK);
  return ctx;
}

/* An "optimal" ILP result is never beaten by a heuristic's feasible one (each heuristic's choice is scored by the
 * generator's own scorer in the callers that have budgets). */
static void ilp_not_beaten(const sp_result *ex, const sp_result *h, const char *name, uint64_t gen_seed) {
  if (ex->status == SOLVE_OPTIMAL && h->status == SOLVE_FEASIBLE &&
      h->objective < ex->objective - 1e-9 * (1 + fabs(ex->objective)))
    fail_msg("generator seed %d: %s finds %.17g, below the ILP's \"optimal\" %.17g (bound %.17g)", (int)gen_seed, name,
             h->objective, ex->objective, ex->lower_bound);
}

static void test_ilp_equals_brute_force(void **state) {
  (void)state;
  ap_ctx *ctx = ilp_ctx();
  /* followers, nulls, edges per node, aliases, memory (0 none, 1 hard budget, 2 penalty) */
  static const struct {
    double p_follow, p_null, epn;
    int n_alias, mem;
  } kinds[] = {{0, 0, 1.2, 0, 0},   {0.4, 0, 1.5, 0, 0}, {0.3, 0.15, 1.5, 2, 0},
               {0.3, 0.05, 1.5, 1, 1}, {0.4, 0.05, 2.0, 1, 2}, {0.5, 0.1, 1.0, 2, 1}};
  int n_feasible = 0, n_infeasible = 0, n_binding = 0;
  for (size_t k = 0; k < AP_COUNT(kinds); k++)
    for (uint64_t seed = 1; seed <= 50; seed++) {
      gen_params gp = {2 + (int)(seed % 8), 3, kinds[k].p_follow, kinds[k].p_null, kinds[k].epn, kinds[k].n_alias,
                       kinds[k].mem != 0, kinds[k].mem == 2, 0};
      static gen_sp g;
      gen_sharding(&g, &gp, seed * 101 + k);
      char *text = gen_sharding_json(&g);
      arena *a = arena_new();
      sp_problem p;
      gen_read(ctx, a, text, &p);
      int32_t choice[GEN_MAX_N];
      sp_result r = {SOLVE_INFEASIBLE, NAN, NAN, choice, 0, NULL, false};
      solve_opts o;
      solve_opts_init(&o);
      if (solve_ilp(ctx, &p, &o, &r) != AP_OK) fail_msg("kind %zu seed %d: %s", k, (int)seed, ap_ctx_error(ctx));
      double best;
      if (!gen_brute(&g, &best)) {
        if (r.status != SOLVE_INFEASIBLE)
          fail_msg("kind %zu seed %d: ILP says %g, brute force finds nothing feasible", k, (int)seed, r.objective);
        n_infeasible++;
      } else {
        if (r.status != SOLVE_OPTIMAL) fail_msg("kind %zu seed %d: status %d, brute force %g", k, (int)seed, r.status, best);
        assert_rel_close(r.objective, best, 1e-9);
        int nodes[GEN_MAX_N];
        double again;
        gen_expand(&p, choice, nodes);
        assert_true(gen_score(&g, nodes, &again));
        assert_rel_close(again, best, 1e-9);
        if (!(r.lower_bound <= best + 1e-7 * (1 + fabs(best))))
          fail_msg("kind %zu seed %d: LP bound %.17g above the optimum %.17g", k, (int)seed, r.lower_bound, best);
        n_feasible++;
        /* Does the budget bind (the unconstrained optimum breaks it)? Count, so the test knows it checks it. */
        if (g.budget && !g.penalty) {
          gen_sp loose = g;
          loose.budget = false;
          double free_best;
          if (gen_brute(&loose, &free_best) && free_best < best - 1e-9) n_binding++;
        }
      }
      arena_free(a);
      free(text);
    }
  if (n_feasible < 150 || n_infeasible < 5 || n_binding < 10)
    fail_msg("the random instances check too little: %d feasible, %d infeasible, %d with a binding budget", n_feasible,
             n_infeasible, n_binding);
  ap_ctx_free(ctx);
}

/* MCMC, MCTS and RL reach within 2% of the ILP's optimum on random DAG problems of 20 to 50 nodes (followers,
 * aliases and a few null entries, no memory budget) at 20,000 evaluations, seeded; where the ILP proves a
 * problem infeasible they find nothing feasible either. */
static void test_heuristics_within_2_percent_of_ilp(void **state) {
  (void)state;
  ap_ctx *ctx = ilp_ctx();
  struct {
    const char *name;
    ap_status (*fn)(ap_ctx *, const sp_problem *, const solve_opts *, sp_result *);
  } hs[] = {{"mcmc", solve_mcmc}, {"mcts", solve_mcts}, {"rl", solve_rl}};
  int n_checked = 0;
  for (uint64_t seed = 1; seed <= 8; seed++) {
    gen_params gp = {20 + 10 * (int)(seed % 4), 4, 0.2, 0.02, 1.5, 3, false, false, 0};
    static gen_sp g;
    gen_sharding(&g, &gp, 5000 + seed);
    char *text = gen_sharding_json(&g);
    arena *a = arena_new();
    sp_problem p;
    gen_read(ctx, a, text, &p);
    int32_t choice[GEN_MAX_N];
    solve_opts o;
    solve_opts_init(&o);
    o.time_budget_s = 0; /* the evaluation budget alone: reproducible */
    sp_result ex = {SOLVE_INFEASIBLE, NAN, NAN, choice, 0, NULL, false};
    if (solve_ilp(ctx, &p, &o, &ex) != AP_OK) fail_msg("%s", ap_ctx_error(ctx));
    for (size_t h = 0; h < AP_COUNT(hs); h++) {
      o.seed = seed;
      sp_result r = {SOLVE_INFEASIBLE, NAN, NAN, choice, 0, NULL, false};
      assert_int_equal(hs[h].fn(ctx, &p, &o, &r), AP_OK);
      if (ex.status == SOLVE_INFEASIBLE) {
        assert_int_equal(r.status, SOLVE_INFEASIBLE);
        continue;
      }
      if (r.status != SOLVE_FEASIBLE || r.objective > ex.objective * 1.02)
        fail_msg("%s on %d nodes: %.6g against the ILP's %.6g (status %d)", hs[h].name, gp.n, r.objective, ex.objective,
                 r.status);
      ilp_not_beaten(&ex, &r, hs[h].name, 5000 + seed);
    }
    n_checked += ex.status == SOLVE_OPTIMAL;
    arena_free(a);
    free(text);
  }
  if (n_checked < 5) fail_msg("only %d feasible instances", n_checked);
  ap_ctx_free(ctx);
}

/* MCMC, MCTS and RL reach within 2% of the ILP's optimum on random DAG problems of 20 to 50 nodes with a memory
 * budget over liveness sets, hard on odd seeds and an over-budget penalty on even ones, at 20,000 evaluations,
 * seeded. The budget binds on most of them (the ILP's optimum without it is cheaper), and every status is
 * honest: "feasible" only when the generator's own scorer (solve_gen.h, independent of sp_eval) accepts the
 * choice and gives the same objective, "infeasible" where the ILP proves it. */
static void test_heuristics_within_2_percent_of_ilp_with_budgets(void **state) {
  (void)state;
  ap_ctx *ctx = ilp_ctx();
  struct {
    const char *name;
    ap_status (*fn)(ap_ctx *, const sp_problem *, const solve_opts *, sp_result *);
  } hs[] = {{"mcmc", solve_mcmc}, {"mcts", solve_mcts}, {"rl", solve_rl}};
  int n_checked = 0, n_binding = 0, n_infeasible = 0, n_penalty = 0;
  for (uint64_t seed = 1; seed <= 16; seed++) {
    bool penalty = seed % 2 == 0;
    gen_params gp = {20 + 10 * (int)(seed % 4), 4, 0.2, 0.02, 1.5, 3, true, penalty, 0};
    static gen_sp g;
    gen_sharding(&g, &gp, 7000 + seed);
    char *text = gen_sharding_json(&g);
    arena *a = arena_new();
    sp_problem p;
    gen_read(ctx, a, text, &p);
    int32_t choice[GEN_MAX_N];
    solve_opts o;
    solve_opts_init(&o);
    o.time_budget_s = 0; /* the evaluation budget alone: reproducible */
    sp_result ex = {SOLVE_INFEASIBLE, NAN, NAN, choice, 0, NULL, false};
    if (solve_ilp(ctx, &p, &o, &ex) != AP_OK) fail_msg("%s", ap_ctx_error(ctx));
    if (ex.status == SOLVE_OPTIMAL) {
      sp_problem loose = p; /* the same problem without its budget */
      loose.mem_active = false;
      sp_result lr = {SOLVE_INFEASIBLE, NAN, NAN, choice, 0, NULL, false};
      if (solve_ilp(ctx, &loose, &o, &lr) != AP_OK) fail_msg("%s", ap_ctx_error(ctx));
      n_binding += lr.objective < ex.objective - 1e-9;
      n_checked++;
      n_penalty += penalty;
    } else {
      n_infeasible++;
    }
    for (size_t h = 0; h < AP_COUNT(hs); h++) {
      o.seed = seed;
      sp_result r = {SOLVE_INFEASIBLE, NAN, NAN, choice, 0, NULL, false};
      assert_int_equal(hs[h].fn(ctx, &p, &o, &r), AP_OK);
      assert_true(r.n_evals <= o.max_evals);
      int nodes[GEN_MAX_N];
      double again = NAN;
      gen_expand(&p, choice, nodes);
      bool ok = gen_score(&g, nodes, &again);
      if ((r.status == SOLVE_FEASIBLE) != ok)
        fail_msg("%s, seed %d: status %d but the choice is %s", hs[h].name, (int)seed, r.status, ok ? "feasible" : "infeasible");
      if (ex.status == SOLVE_INFEASIBLE) {
        assert_int_equal(r.status, SOLVE_INFEASIBLE);
        continue;
      }
      assert_rel_close(r.objective, again, 1e-9);
      if (r.status != SOLVE_FEASIBLE || r.objective > ex.objective * 1.02)
        fail_msg("%s on %d nodes with a %s budget: %.6g against the ILP's %.6g (status %d)", hs[h].name, gp.n,
                 penalty ? "penalty" : "hard", r.objective, ex.objective, r.status);
      ilp_not_beaten(&ex, &r, hs[h].name, 7000 + seed);
    }
    arena_free(a);
    free(text);
  }
  if (n_checked < 10 || n_binding < 8 || n_penalty < 4 || n_infeasible < 1)
    fail_msg("the instances check too little: %d solved, %d with a binding budget, %d with a penalty, %d infeasible",
             n_checked, n_binding, n_penalty, n_infeasible);
  ap_ctx_free(ctx);
}

/* Regression: on this generated problem (30 nodes, hard budget) CBC's integer preprocessing made the ILP report
 * 471.1 as optimal, while MCMC, MCTS and RL all find a feasible 467.63 (peak 39,900 of 40,271.6 bytes). The ILP
 * must now be at or below MCMC's choice, which the generator's own scorer accepts, and its own choice must score
 * the same there. */
static void test_ilp_regression_seed_7005(void **state) {
  (void)state;
  ap_ctx *ctx = ilp_ctx();
  gen_params gp = {30, 4, 0.2, 0.02, 1.5, 3, true, false, 0};
  static gen_sp g;
  gen_sharding(&g, &gp, 7005);
  char *text = gen_sharding_json(&g);
  arena *a = arena_new();
  sp_problem p;
  gen_read(ctx, a, text, &p);
  int32_t choice[GEN_MAX_N], hchoice[GEN_MAX_N];
  solve_opts o;
  solve_opts_init(&o);
  o.time_budget_s = 0;
  sp_result ex = {SOLVE_INFEASIBLE, NAN, NAN, choice, 0, NULL, false}, hr = {SOLVE_INFEASIBLE, NAN, NAN, hchoice, 0, NULL, false};
  if (solve_ilp(ctx, &p, &o, &ex) != AP_OK) fail_msg("%s", ap_ctx_error(ctx));
  assert_int_equal(solve_mcmc(ctx, &p, &o, &hr), AP_OK);
  int nodes[GEN_MAX_N];
  double ilp_again, mcmc_again;
  gen_expand(&p, choice, nodes);
  assert_true(gen_score(&g, nodes, &ilp_again));
  assert_rel_close(ex.objective, ilp_again, 1e-12);
  gen_expand(&p, hchoice, nodes);
  assert_true(gen_score(&g, nodes, &mcmc_again));
  assert_int_equal(ex.status, SOLVE_OPTIMAL);
  ilp_not_beaten(&ex, &hr, "mcmc", 7005);
  assert_true(ex.lower_bound <= ex.objective + 1e-9);
  arena_free(a);
  free(text);
  ap_ctx_free(ctx);
}

/* Differential, many seeds: on 48 random problems of 20 to 50 nodes (no budget, hard budgets, penalties in turn;
 * seeds 7001..7048 include the regression above) an "optimal" ILP result is never beaten by MCMC at 3,000
 * evaluations, nor by a single-group move of its own choice (every move scored by sp_eval). A wrong "optimal"
 * of the kind CBC's preprocessing gave fails here. */
static void test_ilp_never_beaten_many_seeds(void **state) {
  (void)state;
  ap_ctx *ctx = ilp_ctx();
  int n_optimal = 0;
  for (uint64_t seed = 7001; seed <= 7048; seed++) {
    int mem = (int)((seed + 1) % 3); /* 7005: a hard budget, as in the regression */
    gen_params gp = {20 + 10 * (int)(seed % 4), 4, 0.2, 0.02, 1.5, 3, mem != 0, mem == 2, 0};
    static gen_sp g;
    gen_sharding(&g, &gp, seed);
    char *text = gen_sharding_json(&g);
    arena *a = arena_new();
    sp_problem p;
    gen_read(ctx, a, text, &p);
    int32_t choice[GEN_MAX_N], hchoice[GEN_MAX_N];
    solve_opts o;
    solve_opts_init(&o);
    o.time_budget_s = 0;
    o.max_evals = 3000;
    o.seed = seed;
    sp_result ex = {SOLVE_INFEASIBLE, NAN, NAN, choice, 0, NULL, false}, hr = {SOLVE_INFEASIBLE, NAN, NAN, hchoice, 0, NULL, false};
    if (solve_ilp(ctx, &p, &o, &ex) != AP_OK) fail_msg("%s", ap_ctx_error(ctx));
    assert_int_equal(solve_mcmc(ctx, &p, &o, &hr), AP_OK);
    ilp_not_beaten(&ex, &hr, "mcmc", seed);
    if (ex.status == SOLVE_OPTIMAL) {
      n_optimal++;
      sp_score base = sp_eval(&p, choice);
      for (int32_t gi = 0; gi < p.n_groups; gi++) {
        int32_t keep = choice[gi];
        for (int32_t k = 0; k < p.n_s[gi]; k++) {
          choice[gi] = k;
          sp_score s = sp_eval(&p, choice);
          if (s.violation == 0 && s.objective < base.objective - 1e-9 * (1 + fabs(base.objective)))
            fail_msg("seed %d: moving group %d to %d gives %.17g, below the ILP's \"optimal\" %.17g", (int)seed, gi, k,
                     s.objective, base.objective);
        }
        choice[gi] = keep;
      }
    }
    arena_free(a);
    free(text);
  }
  if (n_optimal < 30) fail_msg("only %d of 48 instances solved to optimality", n_optimal);
  ap_ctx_free(ctx);
}

/* ap_solve_file: JSON with full-precision numbers, and an infeasible file exits as AP_INFEASIBLE with its
 * result still written and no choice. */
static void test_solve_file_output(void **state) {
  (void)state;
  ap_ctx *ctx = ilp_ctx();
  ap_solve_opts o;
  ap_solve_opts_init(&o);
  char *out = NULL;
  assert_int_equal(ap_solve_file(ctx, "examples/problems/mlp2-4dev.json", &o, AP_OUT_JSON, &out), AP_OK);
  json_error_t err;
  json_t *root = json_loads(out, 0, &err);
  assert_non_null(root);
  assert_string_equal(json_string_value(json_object_get(root, "format")), "autopar-solve/1");
  assert_string_equal(json_string_value(json_object_get(root, "status")), "optimal");
  assert_int_equal(json_array_size(json_object_get(root, "choice")), 4);
  double obj = json_number_value(json_object_get(root, "objective"));
  assert_true(json_number_value(json_object_get(root, "lower_bound")) <= obj + 1e-9);
  json_decref(root);
  ap_free(out);
  /* A budget below the leanest choice: infeasible. */
  const char *path = "build/tests/solve_infeasible.json";
  assert_int_equal(ap_write_file(ctx, path,
                                 "{\"format\": \"autopar-sharding-problem/1\", \"nodes\": [{\"compute\": [1, 2], "
                                 "\"communication\": [0, 0], \"memory_bytes\": [10, 20]}], \"liveness\": [[0]], "
                                 "\"memory_budget_bytes\": 5}"),
                   AP_OK);
  assert_int_equal(ap_solve_file(ctx, path, &o, AP_OUT_JSON, &out), AP_INFEASIBLE);
  assert_non_null(out);
  assert_non_null(strstr(out, "\"status\": \"infeasible\""));
  assert_null(strstr(out, "\"choice\""));
  ap_free(out);
  ap_ctx_free(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ilp_equals_brute_force),
      cmocka_unit_test(test_heuristics_within_2_percent_of_ilp),
      cmocka_unit_test(test_heuristics_within_2_percent_of_ilp_with_budgets),
      cmocka_unit_test(test_ilp_regression_seed_7005),
      cmocka_unit_test(test_ilp_never_beaten_many_seeds),
      cmocka_unit_test(test_solve_file_output),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
