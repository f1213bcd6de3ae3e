/* `autopar export`: a plan file written as a Megatron-LM launch command, a DeepSpeed config, a torchtitan
 * Python config (current) or TOML job config (v0.2.x), or autopar's own JSON (cli layer; the exporters are the
 * library's, docs/exports.md). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

void cli_export_formats(char *out, size_t n, const char *sep) {
  const char *name;
  if (n) out[0] = '\0';
  for (size_t i = 0; (name = ap_export_format(i, NULL)); i++) {
    size_t at = strlen(out);
    snprintf(out + at, n - at, "%s%s", i ? sep : "", name);
  }
}

int cmd_export(ap_ctx *ctx, int argc, char **argv) {
  bool help = false;
  const char *plan_path = NULL, *model = NULL, *format = NULL, *output = NULL;
  char format_help[256] = "one of: ";
  cli_export_formats(format_help + strlen(format_help), sizeof format_help - strlen(format_help), ", ");
  cli_opt opts[] = {
      {"plan", OPT_STRING, "autopar JSON plan file (docs/plan-format.md)", &plan_path},
      {"model", OPT_STRING, "preset name or path (default: the plan's \"model\" field)", &model},
      {"format", OPT_STRING, format_help, &format},
      {"output", OPT_STRING, "write to this file (atomically) instead of stdout; also -o FILE", &output},
      {"help", OPT_FLAG, "show this help", &help},
  };
  enum { N_OPTS = sizeof opts / sizeof opts[0] };
  const char *pos[1];
  int n_pos;
  if (!cli_parse("export", argc, argv, opts, N_OPTS, pos, 0, &n_pos)) return EXIT_BAD_INPUT;
  if (help) {
    /* The formats and what each writes: the export module's table (ap_export_format). */
    char synopsis[1024] = "--plan FILE --format F [--model M] [-o FILE]\n\nWrites a plan for a training framework:\n";
    const char *name, *summary;
    for (size_t i = 0; (name = ap_export_format(i, &summary)); i++) {
      size_t at = strlen(synopsis);
      snprintf(synopsis + at, sizeof synopsis - at, "  %-16s %s\n", name, summary);
    }
    size_t at = strlen(synopsis);
    snprintf(synopsis + at, sizeof synopsis - at, "Each export names the framework version it targets (docs/exports.md).");
    cli_usage("export", synopsis, opts, N_OPTS);
    return 0;
  }
  if (!plan_path || !format) {
    fprintf(stderr, "autopar export: --plan and --format are required (see autopar export --help)\n");
    return EXIT_BAD_INPUT;
  }
  ap_plan *p = NULL;
  ap_model *m = NULL;
  char *text = NULL;
  ap_status st = ap_plan_load(ctx, plan_path, &p);
  bool graph_plan = !st && ap_plan_format(p) == 2; /* an op-level plan: read against its graph, written as JSON */
  if (graph_plan && strcmp(format, "json") != 0) {
    fprintf(stderr, "autopar export: %s: an autopar-plan/2 plan (a general graph's op-level plan) exports as json "
            "only, not %s\n", plan_path, format);
    ap_plan_free(p);
    return EXIT_BAD_INPUT;
  }
  if (!st && model) st = ap_model_load(ctx, model, &m);
  if (!st) st = graph_plan ? ap_graph_plan_export(ctx, m, p, &text) : ap_export(ctx, m, p, format, &text);
  if (!st && output) st = ap_write_file(ctx, output, text);
  ap_model_free(m);
  ap_plan_free(p);
  if (st) {
    ap_free(text);
    return cli_fail(ctx, st);
  }
  if (output) ap_free(text);
  else cli_print_free(text);
  return 0;
}
