/* Option parsing and error printing for the CLI (cli layer). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* A strictly positive decimal integer with an optional k, M or G suffix (10^3, 10^6, 10^9). */
static bool parse_count(const char *s, int64_t *out) {
  if (!s || *s < '0' || *s > '9') return false;
  errno = 0;
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (errno || v <= 0) return false;
  long long mul = *end == 'k' || *end == 'K' ? 1000 : *end == 'M' ? 1000000 : *end == 'G' ? 1000000000 : 1;
  if (mul > 1) end++;
  if (*end || v > INT64_MAX / mul) return false;
  *out = v * mul;
  return true;
}

bool cli_parse(const char *cmd, int argc, char **argv, const cli_opt *opts, int n_opts, const char **positional,
               int n_pos_max, int *n_pos) {
  *n_pos = 0;
  for (int i = 0; i < argc; i++) {
    const char *arg = argv[i];
    /* "-o FILE" is the one short option, the usual spelling of --output FILE. */
    if (strcmp(arg, "-o") == 0) arg = "--output";
    if (strncmp(arg, "--", 2) != 0 || strcmp(arg, "--") == 0) {
      if (*n_pos >= n_pos_max) {
        fprintf(stderr, "autopar %s: unexpected argument \"%s\" (see autopar %s --help)\n", cmd, arg, cmd);
        return false;
      }
      positional[(*n_pos)++] = arg;
      continue;
    }
    /* Accept --name=value as well as --name value. */
    char name[64];
    const char *eq = strchr(arg, '=');
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    if (len >= sizeof name) len = sizeof name - 1;
    memcpy(name, arg, len);
    name[len] = '\0';
    const cli_opt *o = NULL;
    for (int k = 0; k < n_opts; k++)
      if (strcmp(opts[k].name, name + 2) == 0) o = &opts[k];
    if (!o) {
      fprintf(stderr, "autopar %s: unknown option %s (see autopar %s --help)\n", cmd, name, cmd);
      return false;
    }
    if (o->kind == OPT_FLAG) {
      if (eq) {
        fprintf(stderr, "autopar %s: option %s takes no value\n", cmd, name);
        return false;
      }
      *(bool *)o->target = true;
      continue;
    }
    const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
    if (!val) {
      fprintf(stderr, "autopar %s: option %s needs a value\n", cmd, name);
      return false;
    }
    if (o->kind == OPT_STRING) {
      *(const char **)o->target = val;
    } else if (!parse_count(val, (int64_t *)o->target)) {
      fprintf(stderr, "autopar %s: option %s: expected a positive integer, got \"%s\"\n", cmd, name, val);
      return false;
    }
  }
  return true;
}

void cli_usage(const char *cmd, const char *synopsis, const cli_opt *opts, int n_opts) {
  printf("usage: autopar %s %s\n\noptions:\n", cmd, synopsis);
  for (int k = 0; k < n_opts; k++) {
    char left[64];
    snprintf(left, sizeof left, "--%s%s", opts[k].name,
             opts[k].kind == OPT_FLAG ? "" : opts[k].kind == OPT_INT ? " N" : " VALUE");
    printf("  %-24s %s\n", left, opts[k].help);
  }
}

int cli_fail(ap_ctx *ctx, ap_status st) {
  const char *msg = ap_ctx_error(ctx);
  cli_progress_clear();
  fprintf(stderr, "autopar: %s\n", *msg ? msg : ap_status_str(st));
  switch (st) {
  case AP_OK:
    return EXIT_OK_;
  case AP_INFEASIBLE:
    return EXIT_INFEASIBLE;
  case AP_NOMEM:
  case AP_INTERNAL:
    return EXIT_INTERNAL;
  default:
    return EXIT_BAD_INPUT;
  }
}

void cli_print_free(char *s) {
  if (s) fputs(s, stdout);
  ap_free(s);
}
