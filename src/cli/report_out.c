/* --report FILE and --tokens for the commands (cli layer): the pieces every command shares to write its HTML
 * report from the documents it prints with --json (ap_report_html, docs/report.md), to simulate a plan for
 * the report's timeline, and to render a document with the time and cost to train added (ap_render). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

char *cli_read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *s = malloc(cap);
  while (s) {
    size_t got = fread(s + n, 1, cap - n - 1, f);
    n += got;
    if (n + 1 < cap) break;
    char *t = realloc(s, cap *= 2);
    if (!t) free(s);
    s = t;
  }
  bool bad = ferror(f) != 0;
  fclose(f);
  if (!s || bad) {
    free(s);
    return NULL;
  }
  s[n] = '\0';
  return s;
}

char *cli_simulate_trace(ap_ctx *ctx, const ap_model *m, const ap_cluster *c, ap_plan *p, const char *near_path) {
  size_t n = strlen(near_path) + 16;
  char *tmp = malloc(n);
  if (!tmp) return NULL;
  snprintf(tmp, n, "%s.trace.tmp", near_path);
  char *summary = NULL, *trace = NULL;
  ap_status st = ap_simulate(ctx, m, c, p, tmp, AP_OUT_JSON, &summary);
  ap_free(summary);
  if (st == AP_IO) {
    /* The report's folder cannot be written: writing the report itself fails next and says so. */
  } else if (st) {
    fprintf(stderr, "autopar: warning: the report has no timeline: %s\n", ap_ctx_error(ctx));
  } else {
    trace = cli_read_file(tmp);
    remove(tmp);
    if (!trace) fprintf(stderr, "autopar: warning: the report has no timeline: cannot read the trace back\n");
  }
  free(tmp);
  return trace;
}

ap_status cli_write_report(ap_ctx *ctx, const char *path, const char *cmd, int argc, char **argv,
                           ap_report_inputs *in) {
  /* The command line under the heading: "autopar CMD ARGS…" */
  size_t n = strlen(cmd) + 16;
  for (int i = 0; i < argc; i++) n += strlen(argv[i]) + 1;
  char *line = malloc(n), title[256];
  if (line) {
    snprintf(line, n, "autopar %s", cmd);
    for (int i = 0; i < argc; i++) {
      strcat(line, " ");
      strcat(line, argv[i]);
    }
  }
  snprintf(title, sizeof title, "autopar %s", cmd);
  in->title = title;
  in->command = line;
  ap_status st = ap_report_html(ctx, in, path);
  free(line);
  return st;
}
