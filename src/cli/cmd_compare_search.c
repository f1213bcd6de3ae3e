/* `autopar compare-search --model M --cluster C [--gbs N] [--seq S] [--time-budget S] [--evals N] [--seed N]
 * [--json] [--report OUT.html]` (cli layer): every search family on the same sharding problem against the
 * data-parallel and Megatron baselines; a thin client of ap_compare_search (docs/graph-plan.md). With --report
 * the document is built once and both printed (text rendered from it, ap_render) and drawn (ap_report_html). */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"

int cmd_compare_search(ap_ctx *ctx, int argc, char **argv) {
  bool json = false, help = false;
  const char *model = NULL, *cluster = NULL, *budget = NULL, *report = NULL;
  int64_t gbs = 64, seq = 0, seed = 1, evals = 0;
  cli_opt opts[] = {{"model", OPT_STRING, "an ONNX model (or any model file or preset)", &model},
                    {"cluster", OPT_STRING, "cluster preset, shorthand (h100-sxm:8, dgx-h100:4x8) or file", &cluster},
                    {cli_field_opt("global_batch_size"), OPT_INT, "global batch (default 64)", &gbs},
                    {cli_field_opt("seq_length"), OPT_INT, "sequence length; 8k = 8192 (default: the graph's)", &seq},
                    {"time-budget", OPT_STRING, "seconds each family may spend (default 5)", &budget},
                    {"evals", OPT_INT, "evaluations each heuristic may spend (default 20000)", &evals},
                    {"seed", OPT_INT, "seed of mcmc, mcts and rl (default 1)", &seed},
                    {"json", OPT_FLAG, "print autopar-compare-search/1 JSON (docs/json.md)", &json},
                    {"report", OPT_STRING, "also write an HTML report: the table and a chart (docs/report.md)", &report},
                    {"help", OPT_FLAG, "show this help", &help}};
  enum { N = sizeof opts / sizeof opts[0] };
  const char *pos[1];
  int n_pos;
  if (!cli_parse("compare-search", argc, argv, opts, N, pos, 0, &n_pos)) return EXIT_BAD_INPUT;
  if (help) {
    cli_usage("compare-search", "--model M --cluster C [--gbs N] [--time-budget S] [--seed N] [--json] [--report OUT.html]\n\n"
                                "Runs every search family (ilp, elim-dp, greedy, mcmc, mcts, rl, recursive) on the same "
                                "op-level\nsharding problem with the same budget and sets them beside pure data "
                                "parallelism and Megatron's\ncolumn/row sharding: best iteration time found, time to "
                                "reach it, evaluations, gap to the LP bound.",
              opts, N);
    return 0;
  }
  if (!model || !cluster) {
    fprintf(stderr, "autopar compare-search: --model and --cluster are required (see autopar compare-search --help)\n");
    return EXIT_BAD_INPUT;
  }
  ap_graph_plan_opts o;
  ap_graph_plan_opts_init(&o);
  o.global_batch_size = gbs;
  o.seq_length = seq;
  o.seed = (uint64_t)seed;
  o.max_evals = evals;
  if (!cli_parse_seconds("compare-search", "--time-budget", budget, &o.time_budget_s)) return EXIT_BAD_INPUT;
  ap_model *m = NULL;
  ap_cluster *c = NULL;
  char *out = NULL;
  ap_status st = ap_model_load(ctx, model, &m);
  if (!st) st = ap_cluster_load(ctx, cluster, &c);
  if (!st) st = ap_compare_search(ctx, m, c, &o, json || report ? AP_OUT_JSON : AP_OUT_TEXT, &out);
  if (!st && report) {
    ap_report_inputs in = {0};
    in.compare_search_json = out;
    st = cli_write_report(ctx, report, "compare-search", argc, argv, &in);
    char *text = NULL;
    if (!st && !json) {
      st = ap_render(ctx, out, NULL, NULL, AP_OUT_TEXT, &text);
      ap_free(out);
      out = text;
    }
  }
  if (!st && out) fputs(out, stdout);
  ap_free(out);
  int rc = st ? cli_fail(ctx, st) : 0;
  ap_cluster_free(c);
  ap_model_free(m);
  return rc;
}
