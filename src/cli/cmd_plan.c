/* `autopar plan`: search for the fastest plans of a model on a cluster and explain them (cli layer; the search
 * and the explanation are the library's, ap_plan_search, docs/planner.md).
 *
 * Output: the explanation on stdout (text, or JSON with --json). With --export FORMAT the winner is also
 * written for a framework: to stdout, the explanation then going to stderr so that `autopar plan … --export
 * megatron > args.sh` captures the export alone; or, with -o FILE, atomically to FILE, the explanation staying
 * on stdout. Progress goes to stderr while a search runs past one second, and only when stderr is a terminal
 * (main installs it, progress.c). --report FILE writes the HTML report of the search, with an estimate and a
 * simulation of the winner (memory bars, timeline); --tokens N adds the time and cost to train (ap_render).
 * Exit status 1 when no plan fits (the closest plans are still printed), 2 on bad input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static bool parse_double(const char *name, const char *s, double *out) {
  if (!s) return true;
  char *end = NULL;
  double v = strtod(s, &end);
  if (end == s || *end) {
    fprintf(stderr, "autopar plan: %s: expected a number, got \"%s\"\n", name, s);
    return false;
  }
  *out = v;
  return true;
}

/* True when the op-level planner takes the request: an ONNX model (by its file name, the model is not loaded
 * yet), or a strategy list naming a sharding strategy of general graphs. */
static bool is_graph_plan(const char *model, const char *strategy) {
  size_t n = strlen(model);
  if (n > 5 && strcmp(model + n - 5, ".onnx") == 0) return true;
  static const char *const names[] = {"ilp", "elim-dp", "greedy", "mcmc", "mcts", "rl", "recursive"};
  for (const char *q = strategy; q && *q;) {
    const char *end = strchr(q, ',');
    size_t len = end ? (size_t)(end - q) : strlen(q);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
      if (strlen(names[i]) == len && strncmp(names[i], q, len) == 0) return true;
    q += len + (end ? 1 : 0);
  }
  return false;
}

/* `autopar plan` on a general graph: ap_graph_plan (docs/graph-plan.md). With --report the plan document
 * (autopar-plan/2) feeds the report, and the text, when shown, is rendered from that document
 * (ap_graph_plan_render), so that the search runs once. */
static int graph_plan(ap_ctx *ctx, const char *model, const char *cluster, int64_t gbs, int64_t seq, bool json,
                      const char *strategy, const char *annotate, const char *mem_frac, const char *budget,
                      const char *report, const char *export_format, const char *output, int argc, char **argv) {
  if (export_format && strcmp(export_format, "json") != 0) {
    fprintf(stderr, "autopar plan: --export %s: an op-level plan of a general graph exports as json only (the "
                    "autopar-plan/2 document that `autopar run` takes)\n", export_format);
    return EXIT_BAD_INPUT;
  }
  ap_graph_plan_opts o;
  ap_graph_plan_opts_init(&o);
  o.global_batch_size = gbs;
  o.seq_length = seq;
  o.strategies = strategy;
  o.annotate = annotate;
  if (!parse_double("--max-mem-fraction", mem_frac, &o.max_mem_fraction) ||
      !parse_double("--time-budget", budget, &o.time_budget_s))
    return EXIT_BAD_INPUT;
  ap_model *m = NULL;
  ap_cluster *c = NULL;
  char *out = NULL;
  ap_status st = ap_model_load(ctx, model, &m);
  if (!st) st = ap_cluster_load(ctx, cluster, &c);
  if (!st) st = ap_graph_plan(ctx, m, c, &o, json || report || export_format ? AP_OUT_JSON : AP_OUT_TEXT, &out);
  /* --export json: the plan/2 document to -o FILE (atomically) and the explanation to stdout, or the document
   * to stdout and the explanation to stderr, as for transformer plans. */
  if (!st && export_format) {
    char *text = NULL;
    if (output) st = ap_write_file(ctx, output, out);
    if (!st && !json) st = ap_graph_plan_render(ctx, m, c, out, AP_OUT_TEXT, &text);
    if (!st && report) {
      ap_report_inputs in = {0};
      in.search_json = out;
      st = cli_write_report(ctx, report, "plan", argc, argv, &in);
    }
    if (!st) {
      if (output) fputs(json ? out : text, stdout);
      else {
        fputs(json ? out : text, stderr);
        fputs(out, stdout);
      }
    }
    ap_free(text);
    ap_free(out);
    out = NULL;
  }
  if (!st && report && out) {
    ap_report_inputs in = {0};
    in.search_json = out;
    st = cli_write_report(ctx, report, "plan", argc, argv, &in);
    if (!st && !json) { /* the text of the same document, without a second search */
      char *text = NULL;
      st = ap_graph_plan_render(ctx, m, c, out, AP_OUT_TEXT, &text);
      ap_free(out);
      out = text;
    }
  }
  if (out) fputs(out, stdout);
  ap_free(out);
  int rc = st ? cli_fail(ctx, st) : 0;
  ap_cluster_free(c);
  ap_model_free(m);
  return rc;
}

int cmd_plan(ap_ctx *ctx, int argc, char **argv) {
  bool json = false, help = false;
  const char *model = NULL, *cluster = NULL, *fix = NULL, *objective = NULL, *mem_frac = NULL, *budget = NULL;
  const char *calibration = NULL, *export_format = NULL, *output = NULL, *compare = NULL, *strategy = NULL;
  const char *stack = NULL;
  const char *report = NULL, *tokens = NULL, *price = NULL, *annotate = NULL;
  int64_t gbs = 0, seq = 0, top = 3;
  char export_help[256] = "also write the winner (stdout) in one of: ";
  cli_export_formats(export_help + strlen(export_help), sizeof export_help - strlen(export_help), ", ");
  cli_opt opts[] = {
      {"model", OPT_STRING, "preset name or path to a config.json / op-graph JSON", &model},
      {"cluster", OPT_STRING, "cluster preset, shorthand (h100:64, dgx-h100:8x8) or file", &cluster},
      {cli_field_opt("global_batch_size"), OPT_INT, "global batch, sequences per iteration (required)", &gbs},
      {cli_field_opt("seq_length"), OPT_INT, "sequence length, tokens; 8k = 8192 (default: the model's pretraining context, printed)", &seq},
      {"top", OPT_INT, "plans to show, best first (default 3)", &top},
      {"json", OPT_FLAG, "print JSON (format autopar-search/2, docs/json.md)", &json},
      {"fix", OPT_STRING, "hold plan fields fixed: tp=8,pp=4,schedule=1f1b (keys of estimate's flags)", &fix},
      {"objective", OPT_STRING, "throughput (default) or memory (least peak memory, then fastest)", &objective},
      {"max-mem-fraction", OPT_STRING, "share of device memory a plan may use, in (0, 1] (default 1)", &mem_frac},
      {"time-budget", OPT_STRING, "stop searching after this many seconds (default: none)", &budget},
      {"stack", OPT_STRING, "software stack that runs the plan: megatron-lm (default), megatron-bridge, nemo, "
                            "megatron-deepspeed, torchtitan, llm-foundry, deepspeed, autopar, any", &stack},
      {"strategy", OPT_STRING, "search strategies to run, comma-separated (default: all that apply)", &strategy},
      {"annotate", OPT_STRING, "general graphs: output specs to keep, 'op=S0,R;op2=R,S1' (greedy's seeds)", &annotate},
      {"calibration", OPT_STRING, "cost-model constants from `autopar calibrate` (default: built in)", &calibration},
      {"compare", OPT_STRING, "an autopar JSON plan to set beside the winner, breakdowns side by side", &compare},
      {"export", OPT_STRING, export_help, &export_format},
      {"output", OPT_STRING, "with --export: write the export to this file (atomically); also -o FILE", &output},
      {"report", OPT_STRING, "also write an HTML report of the search (docs/report.md)", &report},
      {"tokens", OPT_STRING, "time and cost to train the winner on this many tokens (1T, 300B, 2.5e11)", &tokens},
      {"price-per-gpu-hour", OPT_STRING, "with --tokens: price of one device-hour, for the cost", &price},
      {"help", OPT_FLAG, "show this help", &help},
  };
  enum { N_OPTS = sizeof opts / sizeof opts[0] };
  const char *pos[1];
  int n_pos;
  if (!cli_parse("plan", argc, argv, opts, N_OPTS, pos, 0, &n_pos)) return EXIT_BAD_INPUT;
  if (help) {
    cli_usage("plan",
              "--model M --cluster C --global-batch-size N [--seq-length S] [--top K] [--json] [--fix tp=8,pp=4,…]\n"
              "            [--objective throughput|memory] [--max-mem-fraction F] [--time-budget SECONDS]\n"
              "            [--calibration FILE] [--compare PLAN.json] [--export FORMAT [-o FILE]] [--report OUT.html]\n"
              "            [--tokens N [--price-per-gpu-hour X]] [--quiet]\n\n"
              "Searches data, tensor (+ sequence), pipeline, context and expert parallelism, ZeRO stages, recompute,\n"
              "micro-batch size, virtual stages and schedule, and the rank order for the fastest plans that fit in\n"
              "device memory, and explains the best: iteration time, tokens/s, MFU, time breakdown, what bounds it,\n"
              "memory per stage, and what each runner-up loses on. Exit status 1 when nothing fits: the closest\n"
              "plans are shown with what would make them fit. With --export the winner goes to stdout and the\n"
              "explanation to stderr, or with -o FILE the export to FILE and the explanation to stdout.",
              opts, N_OPTS);
    cli_notation(stdout);
    return 0;
  }
  if (!model || !cluster || gbs <= 0) {
    fprintf(stderr, "autopar plan: --model, --cluster and --global-batch-size (--gbs) are required (see autopar plan --help)\n");
    return EXIT_BAD_INPUT;
  }
  if (output && !export_format) {
    fprintf(stderr, "autopar plan: -o/--output needs --export FORMAT\n");
    return EXIT_BAD_INPUT;
  }
  if (is_graph_plan(model, strategy)) return graph_plan(ctx, model, cluster, gbs, seq, json, strategy, annotate, mem_frac, budget, report, export_format, output, argc, argv);
  if (annotate) {
    fprintf(stderr, "autopar plan: --annotate applies to general graphs (an ONNX model or --strategy ilp, mcmc, ...)\n");
    return EXIT_BAD_INPUT;
  }
  ap_search_opts so;
  ap_search_opts_init(&so);
  so.global_batch_size = gbs;
  so.seq_length = seq;
  so.top_k = (int)top;
  so.objective = objective;
  so.fix = fix;
  so.strategies = strategy;
  so.export_format = export_format;
  so.stack = stack;
  if (!parse_double("--max-mem-fraction", mem_frac, &so.max_mem_fraction) ||
      !parse_double("--time-budget", budget, &so.time_budget_s))
    return EXIT_BAD_INPUT;

  ap_model *m = NULL;
  ap_cluster *c = NULL;
  ap_plan *cmp = NULL, *best = NULL;
  char *out = NULL, *exported = NULL;
  /* The files it will write were checked by cli_parse, before the search: nothing is printed when one fails. */
  ap_status st = calibration ? ap_ctx_set_calibration(ctx, calibration) : AP_OK;
  if (!st) st = ap_model_load(ctx, model, &m);
  if (!st) st = ap_cluster_load(ctx, cluster, &c);
  if (!st && compare) st = ap_plan_load(ctx, compare, &cmp);
  so.compare = cmp;
  /* The document first when it is wanted whole (--json, --report) or with more added (--tokens); the text
   * is then rendered from it. */
  bool want_doc = json || report || tokens || price;
  if (!st) st = ap_plan_search(ctx, m, c, &so, want_doc ? AP_OUT_JSON : AP_OUT_TEXT, &out, &best);
  char *doc = NULL;
  if ((!st || st == AP_INFEASIBLE) && want_doc && out) {
    ap_status sst = st;
    char *shown = NULL;
    if ((st = ap_render(ctx, out, tokens, price, json ? AP_OUT_JSON : AP_OUT_TEXT, &shown))) {
      ap_free(out);
      out = NULL;
    } else {
      doc = out;
      out = shown;
      st = sst;
    }
  }
  if (doc && report) {
    ap_status sst = st;
    char *est = NULL, *trace = NULL;
    if (best && ap_estimate(ctx, m, c, best, AP_OUT_JSON, &est)) est = NULL;
    if (best) trace = cli_simulate_trace(ctx, m, c, best);
    ap_report_inputs in = {0};
    /* With --tokens the report draws the document with its train object and warnings, as --json prints it. */
    char *trained = NULL;
    if (tokens && ap_render(ctx, doc, tokens, price, AP_OUT_JSON, &trained)) trained = NULL;
    in.search_json = trained ? trained : doc;
    in.estimate_json = est;
    in.trace_json = trace;
    ap_status rst = cli_write_report(ctx, report, "plan", argc, argv, &in);
    ap_free(trained);
    ap_free(est);
    free(trace);
    st = rst ? rst : sst;
  }
  ap_free(doc);
  if (!st && export_format) {
    ap_status est = ap_export(ctx, m, best, export_format, &exported);
    if (!est && output) est = ap_write_file(ctx, output, exported);
    st = est;
  }
  /* The explanation goes to stderr when the export takes stdout. */
  if (out) {
    fputs(out, export_format && !output ? stderr : stdout);
    ap_free(out);
  }
  int rc = 0;
  if (st) {
    rc = cli_fail(ctx, st);
  } else if (exported && !output) {
    fputs(exported, stdout);
  }
  ap_free(exported);
  ap_plan_free(best);
  ap_plan_free(cmp);
  ap_cluster_free(c);
  ap_model_free(m);
  return rc;
}
