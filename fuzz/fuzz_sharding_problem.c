/* libFuzzer target for the sharding-problem reader (src/search/solve/problem.c, problem_reduce.c): bytes go through
 * jx_parse and sp_from_json; a problem that reads is scored on two choices (all first strategies, all last)
 * with sp_eval and solved by the greedy strategy, whose choice must score the same objective it reports, so
 * that the reduction's tables meet whatever the reader accepts. Seeds: fuzz/seeds/sharding_problem/. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonx.h"
#include "search/solve/solve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ap_ctx *ctx = ap_ctx_new();
  arena *a = arena_new();
  json_t *root = NULL;
  if (ctx && a && jx_parse(ctx, "p.json", (const char *)data, size, &root) == AP_OK) {
    sp_problem p;
    if (sp_from_json(ctx, a, "p.json", root, &p) == AP_OK) {
      int32_t *c = arena_alloc(a, (size_t)p.n_groups * sizeof *c);
      if (c) {
        (void)sp_eval(&p, c);
        for (int32_t g = 0; g < p.n_groups; g++) c[g] = p.n_s[g] - 1;
        (void)sp_eval(&p, c);
        solve_opts o;
        solve_opts_init(&o);
        sp_result r = {SOLVE_INFEASIBLE, 0, 0, c, 0};
        if (solve_greedy(ctx, &p, &o, &r) != AP_OK) __builtin_trap();
        sp_score s = sp_eval(&p, c);
        if ((s.violation > 0) != (r.status == SOLVE_INFEASIBLE)) __builtin_trap();
        if (r.status != SOLVE_INFEASIBLE && s.objective != r.objective) __builtin_trap();
      }
    }
    json_decref(root);
  }
  arena_free(a);
  ap_ctx_free(ctx);
  return 0;
}
