/* `autopar validate FILE.csv [--json]` (cli layer): predicts every measured run of a CSV file and prints the
 * per-row errors and their summary. A thin client of ap_validate, which holds all the logic. */
#include <stdio.h>

#include "cli/cli.h"

int cmd_validate(ap_ctx *ctx, int argc, char **argv) {
  bool json = false, help = false, search = false;
  const char *file = NULL, *calibration = NULL, *cluster = NULL, *report = NULL, *stack = NULL, *cv = NULL;
  cli_opt opts[] = {{"json", OPT_FLAG, "print JSON (format autopar-validate/1: rows and summary, docs/json.md)", &json},
                    {"calibration", OPT_STRING, "cost-model constants from `autopar calibrate` (default: built in)", &calibration},
                    {"cluster", OPT_STRING, "one cluster for every row (e.g. from `autopar profile`); gpu is then a label", &cluster},
                    {"stack", OPT_STRING, "software stack of the rows whose stack column is empty (a row's own wins): "
                              "megatron-lm, megatron-bridge, nemo, megatron-deepspeed, torchtitan, llm-foundry, deepspeed, "
                              "autopar, any", &stack},
                    {"cv", OPT_STRING, "cross-validate: each group of rows (source, chip, release or stack) predicted by "
                              "constants fitted without it (calibrate's fit; about ten seconds a group)", &cv},
                    {"search", OPT_FLAG, "also plan every row: the planner's best plan and how it compares", &search},
                    {"report", OPT_STRING, "also write an HTML report: predicted against measured (docs/report.md)", &report},
                    {"help", OPT_FLAG, "show this help", &help}};
  enum { N_OPTS = sizeof opts / sizeof opts[0] };
  const char *pos[1];
  int n_pos;
  if (!cli_parse("validate", argc, argv, opts, N_OPTS, pos, 1, &n_pos)) return EXIT_BAD_INPUT;
  if (help) {
    cli_usage("validate", "FILE.csv [--json] [--search] [--cluster C] [--stack S] [--cv source|chip|release|stack] [--report OUT.html]\n\nPredicts every row of a table of measured training runs (the format of "
                          "shared/reference/runs.csv, see its README.md;\nmodel configs are read from the models/ "
                          "folder beside the file) and prints, per row, the predicted and measured\ntokens/s per GPU and "
                          "their error, then MAPE, median, worst row, rank correlation within model+gpu groups,\nOOM "
                          "agreement and memory error. Empty plan fields are chosen as the fastest plan under the cost "
                          "model\n(marked * in the plan column). With --search, the planner's best plan for each row's model, devices, global\n"
                          "batch, sequence length and precision is added (best_predicted_tokens_per_s_per_gpu and best_plan in\n"
                          "--json), with a summary of the rows where it matches or beats the row's plan. With --cv G, each group of\n"
                          "rows under G is predicted by constants fitted on the other groups only (out of sample), every row with\n"
                          "an error band from the other groups' residuals.",
              opts, N_OPTS);
    cli_notation(stdout);
    return 0;
  }
  if (n_pos == 1) file = pos[0];
  if (!file) {
    fprintf(stderr, "autopar validate: expected a CSV file of measured runs (usage: autopar validate FILE.csv [--json])\n");
    return EXIT_BAD_INPUT;
  }
  char *out = NULL;
  ap_status st = calibration ? ap_ctx_set_calibration(ctx, calibration) : AP_OK;
  /* With --report the document is made once and the text rendered from it (ap_render). */
  bool want_doc = json || report;
  if (!st && cv && (cluster || stack || search)) {
    fprintf(stderr, "autopar validate: --cv predicts each row on its own gpu and stack; it takes no --cluster, --stack or --search\n");
    return EXIT_BAD_INPUT;
  }
  if (!st && cv) st = ap_validate_cv(ctx, file, cv, want_doc ? AP_VALIDATE_JSON : 0, &out);
  else if (!st) st = ap_validate_stack(ctx, file, cluster, stack, (want_doc ? AP_VALIDATE_JSON : 0) | (search ? AP_VALIDATE_SEARCH : 0), &out);
  if (!st && report) {
    ap_report_inputs in = {0};
    in.validate_json = out;
    st = cli_write_report(ctx, report, "validate", argc, argv, &in);
  }
  if (!st && want_doc && !json) {
    char *doc = out;
    st = ap_render(ctx, doc, NULL, NULL, AP_OUT_TEXT, &out);
    ap_free(doc);
  }
  if (st) {
    ap_free(out);
    return cli_fail(ctx, st);
  }
  cli_print_free(out);
  return 0;
}
