/* `autopar compare-clusters` (cli layer): plans one model on several clusters and ranks them by time and cost
 * to train (the library's ap_compare_clusters). */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"

int cmd_compare_clusters(ap_ctx *ctx, int argc, char **argv) {
  bool json = false, help = false;
  const char *model = NULL, *clusters = NULL, *tokens_s = NULL, *prices = NULL, *fix = NULL, *calibration = NULL;
  int64_t gbs = 0, seq = 0;
  cli_opt opts[] = {
      {"model", OPT_STRING, "preset name or path to a config.json / op-graph JSON", &model},
      {"clusters", OPT_STRING, "comma-separated clusters: presets, shorthands (h100:64) or files", &clusters},
      {cli_field_opt("global_batch_size"), OPT_INT, "global batch, sequences per iteration (required)", &gbs},
      {cli_field_opt("seq_length"), OPT_INT, "sequence length, tokens; 8k = 8192 (default: the model's pretraining context, printed)", &seq},
      {"tokens", OPT_STRING, "token budget to train on, e.g. 1T, 300B (default: per 10^9 tokens)", &tokens_s},
      {"price-per-gpu-hour", OPT_STRING, "price of one device-hour, or one per cluster comma-separated", &prices},
      {"fix", OPT_STRING, "hold plan fields fixed on every cluster (as plan --fix)", &fix},
      {"calibration", OPT_STRING, "cost-model constants from `autopar calibrate` (default: built in)", &calibration},
      {"json", OPT_FLAG, "print JSON (format autopar-compare-clusters/1, docs/json.md)", &json},
      {"help", OPT_FLAG, "show this help", &help},
  };
  enum { N_OPTS = sizeof opts / sizeof opts[0] };
  const char *pos[1];
  int n_pos;
  if (!cli_parse("compare-clusters", argc, argv, opts, N_OPTS, pos, 0, &n_pos)) return EXIT_BAD_INPUT;
  if (help) {
    cli_usage("compare-clusters",
              "--model M --clusters A,B,… --gbs N [--seq S] [--tokens N] [--price-per-gpu-hour P[,P…]] [--json]\n\n"
              "Plans the model on each cluster with the same batch and ranks the clusters by the time to train on\n"
              "the token budget (from the best plan's predicted throughput), the device-hours it takes and, with\n"
              "prices, the cost. A cluster on which nothing fits is listed last.",
              opts, N_OPTS);
    return 0;
  }
  if (!model || !clusters || gbs <= 0) {
    fprintf(stderr, "autopar compare-clusters: --model, --clusters and --gbs are required (see --help)\n");
    return EXIT_BAD_INPUT;
  }
  ap_status st = calibration ? ap_ctx_set_calibration(ctx, calibration) : AP_OK;
  ap_model *m = NULL;
  if (!st) st = ap_model_load(ctx, model, &m);
  char *out = NULL;
  if (!st) {
    ap_search_opts so;
    ap_search_opts_init(&so);
    so.global_batch_size = gbs;
    so.seq_length = seq;
    so.fix = fix;
    st = ap_compare_clusters(ctx, m, clusters, &so, tokens_s, prices, json ? AP_OUT_JSON : AP_OUT_TEXT, &out);
  }
  ap_model_free(m);
  if (st) {
    free(out);
    return cli_fail(ctx, st);
  }
  cli_print_free(out);
  return 0;
}
