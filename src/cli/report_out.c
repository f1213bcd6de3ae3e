/* --report FILE and --tokens for the commands (cli layer): the pieces every command shares to write its HTML
 * report from the documents it prints with --json (ap_report_html, docs/report.md), to simulate a plan for
 * the report's timeline, and to render a document with the time and cost to train added (ap_render). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"

char *cli_read_file(const char *path) {
  /* Non-blocking, and a regular file only: a FIFO or a device named as a file is never read (it could block). */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return NULL;
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  char *s = malloc(cap);
  bool bad = false;
  while (s && !bad) {
    ssize_t got = read(fd, s + n, cap - n - 1);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) bad = true;
    if (got <= 0) break;
    n += (size_t)got;
    if (n + 1 == cap) {
      char *t = realloc(s, cap *= 2);
      if (!t) free(s);
      s = t;
    }
  }
  close(fd);
  if (!s || bad) {
    free(s);
    return NULL;
  }
  s[n] = '\0';
  return s;
}

char *cli_simulate_trace(ap_ctx *ctx, const ap_model *m, const ap_cluster *c, ap_plan *p) {
  /* The trace goes to a folder of this process's own (mkdtemp: mode 0700, a random name), never to a name
   * beside the report that another user could have planted a link at. */
  const char *tmpdir = getenv("TMPDIR");
  char dir[512], tmp[600];
  snprintf(dir, sizeof dir, "%s/autopar-trace.XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
  if (!mkdtemp(dir)) {
    fprintf(stderr, "autopar: warning: the report has no timeline: %s: %s\n", dir, strerror(errno));
    return NULL;
  }
  snprintf(tmp, sizeof tmp, "%s/trace.json", dir);
  char *summary = NULL, *trace = NULL;
  ap_status st = ap_simulate(ctx, m, c, p, tmp, AP_OUT_JSON, &summary);
  ap_free(summary);
  if (st) {
    fprintf(stderr, "autopar: warning: the report has no timeline: %s\n", ap_ctx_error(ctx));
  } else {
    trace = cli_read_file(tmp);
    if (!trace) fprintf(stderr, "autopar: warning: the report has no timeline: cannot read the trace back\n");
  }
  unlink(tmp);
  rmdir(dir);
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
