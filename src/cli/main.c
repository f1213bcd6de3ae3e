/* autopar's command-line entry point (cli layer): dispatches to one function per subcommand through a table,
 * installs the log callback, and maps statuses to exit codes. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

typedef struct {
  const char *name;
  int (*run)(ap_ctx *ctx, int argc, char **argv);
  const char *summary;
} subcommand;

static const subcommand subcommands[] = {
    {"plan", cmd_plan, "search for the fastest plans that fit, and explain them"},
    {"estimate", cmd_estimate, "predict one plan's iteration time, throughput, MFU and memory per stage"},
    {"simulate", cmd_simulate, "simulate a plan's pipeline schedule and write a Chrome/Perfetto trace"},
    {"validate", cmd_validate, "predict measured runs from a CSV file and report the errors"},
    {"export", cmd_export, "write a plan as Megatron-LM arguments, a DeepSpeed or torchtitan config, or JSON"},
    {"calibrate", cmd_calibrate, "fit the cost model's constants to measured runs"},
    {"profile", cmd_profile, "measure this machine (GEMM, memory, MPI) into a cluster file of CPU ranks"},
    {"run", cmd_run, "train a model under a plan for real (reference executor on MPI, fp32)"},
    {"describe", cmd_describe, "parameters, per-block breakdown and FLOP per token of a model"},
    {"models", cmd_models, "list the built-in model presets"},
    {"clusters", cmd_clusters, "list the built-in cluster presets, or describe one"},
    {"solve", cmd_solve, "solve a sharding or stage problem file with one search family (docs/solve.md)"},
    {"compare-search", cmd_compare_search, "every search family on one general graph against data-parallel and Megatron baselines"},
    {"compare-clusters", cmd_compare_clusters, "plan a model on several clusters and rank them by time and cost"},
};

static void log_to_stderr(void *user, ap_log_level level, const char *msg) {
  (void)user;
  static const char *const names[] = {"error", "warning", "info", "debug"};
  cli_progress_clear();
  fprintf(stderr, "autopar: %s: %s\n", names[level], msg);
}

void cli_notation(FILE *f) {
  fputs("\nnotation (plan summaries in text output; --json writes the same plan in full, docs/json.md):\n"
        "  tp 8, pp 4, dp 2   tensor-, pipeline- and data-parallel degrees; cp context-parallel, ep/etp expert-\n"
        "                     and expert-tensor-parallel degrees; (order tp-cp-ep-dp-pp) a non-default rank order\n"
        "  mbs 1 x 64         micro-batch size 1 (sequences per micro-batch), 64 micro-batches per iteration\n"
        "  1f1b, gpipe        pipeline schedules: one-forward-one-backward (PipeDream-Flush), GPipe\n"
        "  interleaved-1f1b   1f1b over vpp virtual stages per rank (Megatron-LM's interleaved schedule)\n"
        "  zb-h1, zb-v        zero-bubble schedules H1 and V (Qi et al. 2024)\n"
        "  vpp 5, [20,20,…]   virtual pipeline stages per rank; layers of each pipeline chunk when stated\n"
        "  sp                 sequence parallelism on (with tp)\n"
        "  recompute X        activation recomputation: none, selective (core attention), op (torchtitan's per-op),\n"
        "                     full (whole layers; \"(k layers per chunk)\": only the first k of each chunk)\n"
        "  ZeRO N             optimizer sharding: 1 optimizer states, 2 and gradients, 3 and parameters\n"
        "  (grid)             the search strategy that found the plan: grid, stage-dp, layer-dp or hetero\n"
        "  tp8 pp1 dp8 mbs4 vpp1 sp0 rc=none z1\n"
        "                     validate's compact form of the same fields (rc=full/k: the first k layers);\n"
        "                     * after a field: chosen by autopar (the row left it empty), not stated\n",
        f);
}

static void usage(FILE *f) {
  fprintf(f, "autopar %s: finds the fastest way to train a model on a cluster\n\nusage: autopar COMMAND [OPTIONS]\n\n",
          AP_VERSION_STRING);
  fprintf(f, "commands:\n");
  for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
    fprintf(f, "  %-12s %s\n", subcommands[i].name, subcommands[i].summary);
  fprintf(f, "\noptions:\n  %-12s %s\n  %-12s %s\n  %-12s %s\n", "--help", "show this help (also -h, help)",
          "--version", "print the version", "--quiet",
          "after the command, anywhere: no progress bar on stderr (drawn only on a terminal)");
  fprintf(f, "\nRun `autopar COMMAND --help` for a command's options. Every --json output is one document with a\n"
             "\"format\" tag (\"autopar-estimate/1\", \"autopar-search/2\", ...), documented key by key in docs/json.md.\n");
  cli_notation(f);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "autopar: missing command (usage: autopar COMMAND [OPTIONS]; see autopar --help)\n");
    return EXIT_BAD_INPUT;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
    usage(stdout);
    return 0;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("autopar %s\n", AP_VERSION_STRING);
    return 0;
  }
  for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++) {
    if (strcmp(argv[1], subcommands[i].name) != 0) continue;
    ap_ctx *ctx = ap_ctx_new();
    if (!ctx) {
      fprintf(stderr, "autopar: out of memory\n");
      return EXIT_INTERNAL;
    }
    ap_ctx_set_log(ctx, log_to_stderr, NULL, AP_LOG_WARN);
    if (cli_add_parts(ctx) != AP_OK) {
      fprintf(stderr, "autopar: %s\n", ap_ctx_error(ctx));
      ap_ctx_free(ctx);
      return EXIT_INTERNAL;
    }
    /* --quiet is every command's: taken out before the command parses its options. */
    bool quiet = false;
    int n_args = 0;
    for (int k = 2; k < argc; k++) {
      if (strcmp(argv[k], "--quiet") == 0) quiet = true;
      else argv[2 + n_args++] = argv[k];
    }
    cli_progress_begin(ctx, subcommands[i].name, strcmp(subcommands[i].name, "plan") == 0 ? 1.0 : 0.0, quiet);
    int rc = subcommands[i].run(ctx, n_args, argv + 2);
    cli_progress_end(ctx);
    ap_ctx_free(ctx);
    fflush(stdout);
    if (ferror(stdout)) {
      fprintf(stderr, "autopar: error writing output\n");
      return EXIT_INTERNAL;
    }
    return rc;
  }
  fprintf(stderr, "autopar: unknown command \"%s\" (see autopar --help)\n", argv[1]);
  return EXIT_BAD_INPUT;
}
