/* `autopar solve FILE.json [--strategy S] [--time-budget S] [--evals N] [--seed N] [--annotate A] [--json]`
 * (cli layer): solves a sharding or stage problem file (docs/solve.md). A thin client of ap_solve_file; exit 1
 * when the problem (or the strategy's search) has no feasible solution, with the result still printed. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"

int cmd_solve(ap_ctx *ctx, int argc, char **argv) {
  bool json = false, help = false;
  const char *strategy = NULL, *budget = NULL, *annotate = NULL;
  int64_t seed = 1, evals = 0;
  cli_opt opts[] = {{"strategy", OPT_STRING, "the search family (default: ilp for sharding, inter-op for stage problems)", &strategy},
                    {"time-budget", OPT_STRING, "wall-clock limit in seconds (default 60)", &budget},
                    {"evals", OPT_INT, "objective evaluations a heuristic may spend (default 20000; none with --time-budget)", &evals},
                    {"seed", OPT_INT, "seed of mcmc, mcts and rl (default 1)", &seed},
                    {"annotate", OPT_STRING, "greedy's seeds: 'NODE=STRATEGY;NODE=STRATEGY' (indices)", &annotate},
                    {"json", OPT_FLAG, "print autopar-solve/1 JSON", &json},
                    {"help", OPT_FLAG, "show this help", &help}};
  enum { N = sizeof opts / sizeof opts[0] };
  const char *pos[1];
  int n_pos;
  if (!cli_parse("solve", argc, argv, opts, N, pos, 1, &n_pos)) return EXIT_BAD_INPUT;
  if (help) {
    cli_usage("solve", "FILE.json [--strategy S] [--time-budget S] [--evals N] [--seed N] [--json]\n\nSolves an "
                       "autopar-sharding-problem/1 or autopar-stage-problem/1 file (docs/solve.md).",
              opts, N);
    printf("\nstrategies:\n");
    const char *summary;
    for (size_t i = 0; ap_solve_strategy_name(i, &summary); i++)
      printf("  %-12s %s\n", ap_solve_strategy_name(i, NULL), summary);
    return 0;
  }
  if (n_pos != 1) {
    fprintf(stderr, "autopar solve: expected one problem file (usage: autopar solve FILE.json [--strategy S])\n");
    return EXIT_BAD_INPUT;
  }
  ap_solve_opts o;
  ap_solve_opts_init(&o);
  o.strategy = strategy;
  o.annotate = annotate;
  o.seed = (uint64_t)seed;
  o.max_evals = evals;
  if (!cli_parse_seconds("solve", "--time-budget", budget, &o.time_budget_s)) return EXIT_BAD_INPUT;
  char *out = NULL;
  ap_status st = ap_solve_file(ctx, pos[0], &o, json ? AP_OUT_JSON : AP_OUT_TEXT, &out);
  if (out) cli_print_free(out);
  if (st) return cli_fail(ctx, st);
  return 0;
}
