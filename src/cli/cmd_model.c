/* Subcommands about models and clusters: `models`, `clusters`, `describe` (cli layer). */
#include <stdio.h>

#include "cli/cli.h"

int cmd_models(ap_ctx *ctx, int argc, char **argv) {
  bool json = false, help = false;
  cli_opt opts[] = {{"json", OPT_FLAG, "print JSON (format autopar-models/1, docs/json.md)", &json},
                    {"help", OPT_FLAG, "show this help", &help}};
  const char *pos[1];
  int n_pos;
  if (!cli_parse("models", argc, argv, opts, 2, pos, 0, &n_pos)) return EXIT_BAD_INPUT;
  if (help) {
    cli_usage("models", "[--json]\n\nLists the built-in model presets with their parameter counts.", opts, 2);
    return 0;
  }
  char *out = NULL;
  ap_status st = json ? ap_models_list_json(ctx, &out) : ap_models_list_text(ctx, &out);
  if (st) return cli_fail(ctx, st);
  cli_print_free(out);
  return 0;
}

int cmd_clusters(ap_ctx *ctx, int argc, char **argv) {
  bool json = false, help = false;
  const char *show = NULL;
  cli_opt opts[] = {{"json", OPT_FLAG, "print JSON (format autopar-clusters/1, docs/json.md)", &json},
                    {"show", OPT_STRING, "describe one cluster (a preset, a shorthand such as h100:64, or a file); with "
                                         "--json as a cluster file (autopar-cluster/1)", &show},
                    {"help", OPT_FLAG, "show this help", &help}};
  const char *pos[1];
  int n_pos;
  if (!cli_parse("clusters", argc, argv, opts, 3, pos, 0, &n_pos)) return EXIT_BAD_INPUT;
  if (help) {
    cli_usage("clusters", "[--json] [--show SPEC]\n\nLists the built-in cluster presets, or describes one (text; --json: the "
              "cluster file autopar-cluster/1, or the list as autopar-clusters/1).", opts, 3);
    return 0;
  }
  char *out = NULL;
  ap_status st;
  if (show) {
    ap_cluster *c = NULL;
    st = ap_cluster_load(ctx, show, &c);
    if (!st) st = json ? ap_cluster_describe_json(ctx, c, &out) : ap_cluster_describe_text(ctx, c, &out);
    ap_cluster_free(c);
  } else {
    st = json ? ap_clusters_list_json(ctx, &out) : ap_clusters_list_text(ctx, &out);
  }
  if (st) return cli_fail(ctx, st);
  cli_print_free(out);
  return 0;
}

int cmd_describe(ap_ctx *ctx, int argc, char **argv) {
  bool json = false, help = false, sharding = false;
  const char *model = NULL, *cluster = NULL;
  int64_t seq = 0, gbs = 64;
  cli_opt opts[] = {{"model", OPT_STRING, "preset name or path to a config.json / op-graph JSON", &model},
                    {cli_field_opt("seq_length"), OPT_INT, "sequence length in tokens; 8k = 8192 (default: the model's pretraining context)", &seq},
                    {"json", OPT_FLAG, "print JSON (format autopar-describe/1, docs/json.md)", &json},
                    {"sharding", OPT_FLAG, "list each op's legal sharding strategies on --cluster's mesh", &sharding},
                    {"cluster", OPT_STRING, "with --sharding: the cluster whose mesh to use (default h100-sxm:8)", &cluster},
                    {cli_field_opt("global_batch_size"), OPT_INT, "with --sharding: the global batch (default 64)", &gbs},
                    {"help", OPT_FLAG, "show this help", &help}};
  enum { N_OPTS = sizeof opts / sizeof opts[0] };
  const char *pos[1];
  int n_pos;
  if (!cli_parse("describe", argc, argv, opts, N_OPTS, pos, 1, &n_pos)) return EXIT_BAD_INPUT;
  if (help) {
    cli_usage("describe", "--model M [--seq S] [--json] [--sharding [--cluster C] [--gbs N]]\n\nParameters (total "
                          "and active), a per-block breakdown and FLOP per token; with --sharding each op's legal\n"
                          "sharding strategies (output, weight and input specs, pending sums, time and memory).",
              opts, N_OPTS);
    return 0;
  }
  if (sharding) {
    if (!model && n_pos == 1) model = pos[0];
    if (!model) {
      fprintf(stderr, "autopar describe: --model is required\n");
      return EXIT_BAD_INPUT;
    }
    ap_graph_plan_opts o;
    ap_graph_plan_opts_init(&o);
    o.global_batch_size = gbs;
    o.seq_length = seq;
    ap_model *m = NULL;
    ap_cluster *c = NULL;
    char *out = NULL;
    ap_status st = ap_model_load(ctx, model, &m);
    if (!st) st = ap_cluster_load(ctx, cluster ? cluster : "h100-sxm:8", &c);
    if (!st) st = ap_describe_sharding(ctx, m, c, &o, json ? AP_OUT_JSON : AP_OUT_TEXT, &out);
    ap_cluster_free(c);
    ap_model_free(m);
    if (st) return cli_fail(ctx, st);
    cli_print_free(out);
    return 0;
  }
  if (model && n_pos == 1) {
    fprintf(stderr, "autopar describe: unexpected argument \"%s\" besides --model %s\n", pos[0], model);
    return EXIT_BAD_INPUT;
  }
  if (!model && n_pos == 1) model = pos[0];
  if (!model) {
    fprintf(stderr, "autopar describe: --model is required (a preset name or a path; see autopar models)\n");
    return EXIT_BAD_INPUT;
  }
  ap_model *m = NULL;
  ap_status st = ap_model_load(ctx, model, &m);
  char *out = NULL;
  if (!st) st = json ? ap_model_describe_json(ctx, m, seq, &out) : ap_model_describe_text(ctx, m, seq, &out);
  ap_model_free(m);
  if (st) return cli_fail(ctx, st);
  cli_print_free(out);
  return 0;
}
