/* `autopar estimate`: one plan's predicted time and memory (cli layer). Plan fields come from --plan FILE and
 * from flags, which override the file. --tokens N adds the time and cost to train (ap_render); --report FILE
 * writes the HTML report from the estimate document and a simulation of the plan (simulate: from its trace). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* An autopar-plan/2 plan: read against the model's graph, estimated or simulated (simulate --trace writes the
 * pipeline's timeline); --report writes the graph plan's report from the document read on this cluster
 * (ap_graph_plan_render), with the simulated timeline when simulated. The transformer options (plan flags,
 * --tokens, --price-per-gpu-hour) do not apply to it. */
static int run_graph_plan(ap_ctx *ctx, const char *cmd, const ap_model *m, const ap_cluster *c, const ap_plan *p,
                          const char *plan_path, bool simulate, bool json, const char *trace, const char *report,
                          bool other_options, int n_keys, const char *const *values, int argc, char **argv) {
  bool flags = other_options;
  for (int i = 0; i < n_keys; i++) flags = flags || values[i];
  if (flags) {
    fprintf(stderr, "autopar %s: an autopar-plan/2 plan (a general graph's op-level plan) takes only --model, --cluster, "
            "--plan, --json, --calibration, --report%s\n", cmd, simulate ? ", --trace and --max-events" : "");
    return EXIT_BAD_INPUT;
  }
  char *out = NULL;
  int fmt = json ? AP_OUT_JSON : AP_OUT_TEXT;
  ap_status st = simulate ? ap_graph_plan_simulate(ctx, m, c, p, trace, fmt, &out) : ap_graph_plan_estimate(ctx, m, c, p, fmt, &out);
  if (!st && report) {
    char *text = cli_read_file(plan_path), *doc = NULL, *tr = simulate ? cli_read_file(trace) : NULL;
    if (!text || (simulate && !tr)) {
      fprintf(stderr, "autopar %s: %s: cannot read it back for the report\n", cmd, text ? trace : plan_path);
      free(text);
      free(tr);
      ap_free(out);
      return EXIT_BAD_INPUT;
    }
    st = ap_graph_plan_render(ctx, m, c, text, AP_OUT_JSON, &doc);
    ap_report_inputs in = {0};
    in.search_json = doc;
    in.trace_json = tr;
    if (!st) st = cli_write_report(ctx, report, cmd, argc, argv, &in);
    ap_free(doc);
    free(text);
    free(tr);
  }
  if (st) {
    ap_free(out);
    return cli_fail(ctx, st);
  }
  cli_print_free(out);
  return 0;
}

/* Shared by estimate and simulate: trace_path is used by simulate only. */
static int run(ap_ctx *ctx, const char *cmd, int argc, char **argv, bool simulate) {
  bool json = false, help = false;
  const char *model = NULL, *cluster = NULL, *plan_path = NULL, *trace = NULL, *calibration = NULL;
  const char *report = NULL, *tokens = NULL, *price = NULL;
  int64_t max_events = 0;
  /* Plan fields, passed to ap_plan_set by their canonical key; each flag is the key with dashes, its aliases
   * the table's other spellings (ap_plan_key, cli_field_opt_name). */
  enum { N_PLAN_KEYS = 32 };
  const char *plan_keys[N_PLAN_KEYS], *plan_help[N_PLAN_KEYS];
  int n_keys = 0;
  while (n_keys < N_PLAN_KEYS && (plan_keys[n_keys] = ap_plan_key((size_t)n_keys, &plan_help[n_keys]))) n_keys++;
  const char *values[N_PLAN_KEYS] = {0};
  cli_opt opts[10 + N_PLAN_KEYS + 2];
  int n = 0;
  opts[n++] = (cli_opt){"model", OPT_STRING, "preset name or path to a config.json / op-graph JSON", &model};
  opts[n++] = (cli_opt){"cluster", OPT_STRING, "cluster preset, shorthand (h100:64, dgx-h100:8x8) or file", &cluster};
  opts[n++] = (cli_opt){"plan", OPT_STRING, "autopar JSON plan file (flags below override it)", &plan_path};
  opts[n++] = (cli_opt){"json", OPT_FLAG, simulate ? "print JSON (format autopar-simulate/1, docs/json.md)" : "print JSON (format autopar-estimate/1, docs/json.md)", &json};
  opts[n++] = (cli_opt){"calibration", OPT_STRING, "cost-model constants from `autopar calibrate` (default: built in)", &calibration};
  if (simulate) opts[n++] = (cli_opt){"trace", OPT_STRING, "write the timeline as a Chrome trace-event JSON file", &trace};
  if (simulate)
    opts[n++] = (cli_opt){"max-events", OPT_INT, "simulate at most N passes (default 1M; each is one trace event)", &max_events};
  opts[n++] = (cli_opt){"report", OPT_STRING, "also write an HTML report (docs/report.md)", &report};
  if (!simulate) {
    opts[n++] = (cli_opt){"tokens", OPT_STRING, "time and cost to train on this many tokens (1T, 300B, 2.5e11)", &tokens};
    opts[n++] = (cli_opt){"price-per-gpu-hour", OPT_STRING, "with --tokens: price of one device-hour, for the cost", &price};
  }
  for (int i = 0; i < n_keys; i++) opts[n++] = (cli_opt){cli_field_opt_name((size_t)i), OPT_STRING, plan_help[i], &values[i]};
  opts[n++] = (cli_opt){"help", OPT_FLAG, "show this help", &help};
  const char *pos[1];
  int n_pos;
  if (!cli_parse(cmd, argc, argv, opts, n, pos, 0, &n_pos)) return EXIT_BAD_INPUT;
  if (help) {
    cli_usage(cmd,
              simulate ? "--model M --cluster C [--plan FILE] [plan flags] --trace OUT.json [--json] [--report OUT.html]\n\n"
                         "Simulates the plan's pipeline schedule event by event and writes its timeline."
                       : "--model M --cluster C [--plan FILE] [--tp N --pp N ... --global-batch-size N --seq-length N] [--json]\n"
                         "            [--report OUT.html] [--tokens N [--price-per-gpu-hour X]]\n\n"
                         "Predicts one plan: iteration time and breakdown, tokens/s, MFU, memory per stage.",
              opts, n);
    cli_notation(stdout);
    return 0;
  }
  if (!model || !cluster) {
    fprintf(stderr, "autopar %s: --model and --cluster are required (see autopar %s --help)\n", cmd, cmd);
    return EXIT_BAD_INPUT;
  }
  if (simulate && report && !trace) {
    fprintf(stderr, "autopar simulate: --report needs --trace OUT.json (the timeline is drawn from the trace)\n");
    return EXIT_BAD_INPUT;
  }
  ap_model *m = NULL;
  ap_cluster *c = NULL;
  ap_plan *p = NULL;
  char *out = NULL;
  ap_status st = calibration ? ap_ctx_set_calibration(ctx, calibration) : AP_OK;
  if (!st && max_events) st = ap_ctx_set_simulate_limit(ctx, max_events);
  if (!st) st = ap_model_load(ctx, model, &m);
  if (!st) st = ap_cluster_load(ctx, cluster, &c);
  if (!st) st = plan_path ? ap_plan_load(ctx, plan_path, &p) : ap_plan_new(ctx, &p);
  if (!st && ap_plan_format(p) == 2) { /* an op-level plan of a general graph (docs/graph-plan.md) */
    int rc = run_graph_plan(ctx, cmd, m, c, p, plan_path, simulate, json, trace, report, tokens || price, n_keys, values,
                            argc, argv);
    ap_plan_free(p);
    ap_cluster_free(c);
    ap_model_free(m);
    return rc;
  }
  for (int i = 0; i < n_keys && !st; i++) {
    if (!values[i]) continue;
    /* By the flag's own spelling (ap_plan_set takes dashes too), so that a message names --micro-batch-size. */
    char flag[64];
    const char *names = cli_field_opt_name((size_t)i), *bar = strchr(names, '|');
    snprintf(flag, sizeof flag, "%.*s", (int)(bar ? (size_t)(bar - names) : strlen(names)), names);
    st = ap_plan_set(ctx, p, flag, values[i]);
  }
  bool want_doc = !simulate && (json || report || tokens || price);
  if (!st)
    st = simulate ? ap_simulate(ctx, m, c, p, trace, json ? AP_OUT_JSON : AP_OUT_TEXT, &out)
                  : ap_estimate(ctx, m, c, p, want_doc ? AP_OUT_JSON : AP_OUT_TEXT, &out);
  char *doc = NULL;
  if (!st && want_doc) {
    doc = out;
    out = NULL;
    st = ap_render(ctx, doc, tokens, price, json ? AP_OUT_JSON : AP_OUT_TEXT, &out);
  }
  bool unread = false;
  if (!st && report) {
    ap_report_inputs in = {0};
    char *tr = simulate ? cli_read_file(trace) : cli_simulate_trace(ctx, m, c, p);
    unread = simulate && !tr;
    in.estimate_json = doc;
    in.trace_json = tr;
    if (!unread) st = cli_write_report(ctx, report, cmd, argc, argv, &in);
    free(tr);
  }
  ap_free(doc);
  ap_plan_free(p);
  ap_cluster_free(c);
  ap_model_free(m);
  if (unread) {
    ap_free(out);
    fprintf(stderr, "autopar simulate: %s: cannot read the trace back for the report\n", trace);
    return EXIT_BAD_INPUT;
  }
  if (st) {
    ap_free(out);
    return cli_fail(ctx, st);
  }
  cli_print_free(out);
  return 0;
}

int cmd_estimate(ap_ctx *ctx, int argc, char **argv) { return run(ctx, "estimate", argc, argv, false); }
int cmd_simulate(ap_ctx *ctx, int argc, char **argv) { return run(ctx, "simulate", argc, argv, true); }
