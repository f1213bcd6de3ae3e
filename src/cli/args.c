/* Option parsing and error printing for the CLI (cli layer). cli_parse prints one line and returns false on
 * bad arguments, never exits, so that fuzz/fuzz_cli_opts.c drives it directly. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"

/* A decimal integer with an optional k, M or G suffix (10^3, 10^6, 10^9); false on anything else or on
 * overflow. */
static bool parse_count(const char *s, int64_t *out) {
  if (!s || *s < '0' || *s > '9') return false;
  errno = 0;
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (errno) return false;
  long long mul = *end == 'k' || *end == 'K' ? 1000 : *end == 'M' ? 1000000 : *end == 'G' ? 1000000000 : 1;
  if (mul > 1) end++;
  if (*end || v > INT64_MAX / mul) return false;
  *out = v * mul;
  return true;
}

/* ---- Plan fields as options: the field table's spellings (ap_plan_key) ---- */

/* True when a and b are equal with '-' and '_' the same. */
static bool same_key(const char *a, size_t na, const char *b, size_t nb) {
  if (na != nb) return false;
  for (size_t i = 0; i < na; i++)
    if ((a[i] == '_' ? '-' : a[i]) != (b[i] == '_' ? '-' : b[i])) return false;
  return true;
}

/* The option names of each plan field, "micro-batch-size|mbs": built once from the table (the CLI is one
 * thread; fuzz/fuzz_cli_opts.c calls cli_parse from one thread too). */
enum { MAX_FIELDS = 64, FIELD_NAME_MAX = 256 };
static char field_names[MAX_FIELDS][FIELD_NAME_MAX];
static size_t n_field_names;

static void build_field_names(void) {
  if (n_field_names) return;
  const char *key;
  for (size_t i = 0; i < MAX_FIELDS && (key = ap_plan_key(i, NULL)); i++) {
    char *out = field_names[i];
    snprintf(out, FIELD_NAME_MAX, "%s%s%s", key, *ap_plan_key_aliases(i) ? "|" : "", ap_plan_key_aliases(i));
    for (char *c = out; *c; c++)
      if (*c == '_') *c = '-';
    n_field_names = i + 1;
  }
}

const char *cli_field_opt_name(size_t i) {
  build_field_names();
  return i < n_field_names ? field_names[i] : NULL;
}

/* True when word (length n) is one of the '|'-separated names, '-' and '_' alike. */
static bool names_have(const char *names, const char *word, size_t n) {
  for (const char *q = names; *q;) {
    const char *bar = strchr(q, '|');
    size_t len = bar ? (size_t)(bar - q) : strlen(q);
    if (same_key(q, len, word, n)) return true;
    q += len + (bar ? 1 : 0);
  }
  return false;
}

/* The index of the plan field one of whose spellings is one of names' ("gbs", "seq|x"); -1 when none. */
static int field_index(const char *names) {
  build_field_names();
  for (const char *q = names; *q;) {
    const char *bar = strchr(q, '|');
    size_t len = bar ? (size_t)(bar - q) : strlen(q);
    for (size_t i = 0; i < n_field_names; i++)
      if (names_have(field_names[i], q, len)) return (int)i;
    q += len + (bar ? 1 : 0);
  }
  return -1;
}

const char *cli_field_opt(const char *key) {
  int i = field_index(key);
  return i >= 0 ? field_names[i] : NULL;
}

/* The range of the integer options that are not plan fields (those take the field table's range): one rule,
 * every integer option is checked against its range before use. A name missing here is refused at parse
 * time (tests/cli.sh runs every command's --help, which parses nothing, and one bad value per option). */
static const struct {
  const char *name;
  int64_t min, max;
} int_ranges[] = {
    {"top", 1, 1000},                 /* plans shown: more is a listing, not an explanation */
    {"evals", 1, (int64_t)1 << 40},   /* objective evaluations: PLAN_MAX_COUNT's bound on counts */
    {"seed", 0, INT64_MAX},           /* any 64-bit seed (rng.h streams take a uint64_t) */
    {"max-events", 1, (int64_t)1 << 40},
    {"ranks", 1, 4096},               /* MPI ranks on one machine: TUNING, far above any host's cores */
};

static bool int_range(const char *names, int64_t *min, int64_t *max) {
  int fi = field_index(names);
  if (fi >= 0) return ap_plan_key_range((size_t)fi, min, max) != 0;
  const char *bar = strchr(names, '|');
  size_t len = bar ? (size_t)(bar - names) : strlen(names);
  for (size_t i = 0; i < sizeof int_ranges / sizeof int_ranges[0]; i++)
    if (same_key(int_ranges[i].name, strlen(int_ranges[i].name), names, len)) {
      *min = int_ranges[i].min;
      *max = int_ranges[i].max;
      return true;
    }
  return false;
}

/* Outputs are the options of output_names; every other string option and every positional argument that
 * names an existing file is an input. An output that is the same file as an input (same device and inode,
 * whatever the spelling) would destroy that input: refused. Every output is then checked with
 * ap_check_writable, so that one that cannot be written (a missing folder, no permission, a read-only file
 * system, a directory, a FIFO without write permission) fails before the command's work, not after it. */
/* Where cli_parse's one-line errors go: stderr, or what cli_set_error_stream chose (the fuzz target's sink). */
static FILE *err_to;
static FILE *err_stream(void) { return err_to ? err_to : stderr; }
void cli_set_error_stream(FILE *f) { err_to = f; }
static bool no_write_checks;
void cli_set_write_checks(bool on) { no_write_checks = !on; }

/* The options that name a file the command writes: -o, a trace, an HTML report, trained weights, a runs table
 * appended to. */
static const char *const output_names[] = {"output", "trace", "report", "save", "record"};

static bool is_output(const cli_opt *o) {
  for (size_t i = 0; i < sizeof output_names / sizeof output_names[0]; i++)
    if (strcmp(o->name, output_names[i]) == 0) return true;
  return false;
}

static bool same_file(const char *a, const char *b) {
  struct stat sa, sb;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino &&
         S_ISREG(sa.st_mode);
}

/* True when the command's --help flag is set (it writes nothing, so its outputs are not checked). */
static bool help_asked(const cli_opt *opts, int n_opts) {
  for (int k = 0; k < n_opts; k++)
    if (opts[k].kind == OPT_FLAG && strcmp(opts[k].name, "help") == 0 && *(const bool *)opts[k].target) return true;
  return false;
}

static bool outputs_writable(const char *cmd, const cli_opt *opts, int n_opts) {
  ap_ctx *ctx = NULL;
  bool ok = true;
  for (int k = 0; k < n_opts && ok; k++) {
    if (opts[k].kind != OPT_STRING || !is_output(&opts[k])) continue;
    const char *out = *(const char *const *)opts[k].target;
    if (!out) continue;
    if (!ctx && !(ctx = ap_ctx_new())) {
      fprintf(err_stream(), "autopar %s: out of memory\n", cmd);
      return false;
    }
    if (ap_check_writable(ctx, out) != AP_OK) {
      fprintf(err_stream(), "autopar %s: --%s: %s\n", cmd, opts[k].name, ap_ctx_error(ctx));
      ok = false;
    }
  }
  ap_ctx_free(ctx);
  return ok;
}

static bool check_outputs(const char *cmd, const cli_opt *opts, int n_opts, const char **positional, int n_pos) {
  for (int k = 0; k < n_opts; k++) {
    if (opts[k].kind != OPT_STRING || !is_output(&opts[k])) continue;
    const char *out = *(const char *const *)opts[k].target;
    if (!out) continue;
    for (int j = 0; j < n_opts; j++) {
      if (j == k || opts[j].kind != OPT_STRING) continue;
      const char *in = *(const char *const *)opts[j].target;
      if (in && same_file(out, in)) {
        fprintf(err_stream(), "autopar %s: --%s %s is also the input --%s; refusing to overwrite an input\n", cmd,
                opts[k].name, out, opts[j].name);
        return false;
      }
    }
    for (int j = 0; j < n_pos; j++) {
      if (same_file(out, positional[j])) {
        fprintf(err_stream(), "autopar %s: --%s %s is also the input %s; refusing to overwrite an input\n", cmd,
                opts[k].name, out, positional[j]);
        return false;
      }
    }
  }
  return no_write_checks || help_asked(opts, n_opts) || outputs_writable(cmd, opts, n_opts);
}

bool cli_parse(const char *cmd, int argc, char **argv, const cli_opt *opts, int n_opts, const char **positional,
               int n_pos_max, int *n_pos) {
  *n_pos = 0;
  bool seen[128] = {false}; /* options given so far (a second one is an error, not a silent override) */
  if (n_opts > (int)(sizeof seen / sizeof seen[0])) {
    fprintf(err_stream(), "autopar %s: too many options\n", cmd);
    return false;
  }
  for (int i = 0; i < argc; i++) {
    const char *arg = argv[i];
    /* "-o FILE" is the one short option, the usual spelling of --output FILE. */
    bool short_o = strcmp(arg, "-o") == 0;
    if (short_o) arg = "--output";
    if (strncmp(arg, "--", 2) != 0 || strcmp(arg, "--") == 0) {
      if (*n_pos >= n_pos_max) {
        fprintf(err_stream(), "autopar %s: unexpected argument \"%s\" (see autopar %s --help)\n", cmd, arg, cmd);
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
    int o_index = -1;
    for (int k = 0; k < n_opts && !o; k++)
      if (names_have(opts[k].name, name + 2, strlen(name + 2))) o = &opts[k], o_index = k;
    if (!o) {
      fprintf(err_stream(), "autopar %s: unknown option %s (see autopar %s --help)\n", cmd, name, cmd);
      return false;
    }
    if (seen[o_index] && strcmp(name, "--help") != 0) {
      fprintf(err_stream(), "autopar %s: option %s given twice; give it once\n", cmd, name);
      return false;
    }
    seen[o_index] = true;
    if (o->kind == OPT_FLAG) {
      if (eq) {
        fprintf(err_stream(), "autopar %s: option %s takes no value\n", cmd, name);
        return false;
      }
      *(bool *)o->target = true;
      continue;
    }
    const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
    if (!val) {
      fprintf(err_stream(), "autopar %s: option %s needs a value\n", cmd, name);
      return false;
    }
    if (o->kind == OPT_STRING) {
      if (!*val) {
        fprintf(err_stream(), "autopar %s: option %s%s: expected a value, got an empty string\n", cmd, short_o ? "-o/" : "",
                name);
        return false;
      }
      *(const char **)o->target = val;
    } else {
      int64_t v = 0, min = 0, max = 0;
      if (!int_range(o->name, &min, &max)) {
        fprintf(err_stream(), "autopar %s: option %s has no range (src/cli/args.c int_ranges)\n", cmd, name);
        return false;
      }
      if (!parse_count(val, &v) || v < min || v > max) {
        /* A plan field typed by an alias also names its canonical key ("--gbs (global_batch_size)"). */
        int fi = field_index(o->name);
        const char *key = fi >= 0 ? ap_plan_key((size_t)fi, NULL) : NULL;
        bool alias = key && !same_key(key, strlen(key), name + 2, strlen(name + 2));
        fprintf(err_stream(), "autopar %s: option %s%s%s%s: expected an integer in [%lld, %lld], got \"%s\"\n", cmd, name,
                alias ? " (" : "", alias ? key : "", alias ? ")" : "", (long long)min, (long long)max, val);
        return false;
      }
      *(int64_t *)o->target = v;
    }
  }
  return check_outputs(cmd, opts, n_opts, positional, *n_pos);
}

void cli_usage(const char *cmd, const char *synopsis, const cli_opt *opts, int n_opts) {
  printf("usage: autopar %s %s\n\noptions:\n", cmd, synopsis);
  for (int k = 0; k < n_opts; k++) {
    /* The first name is the option's; the others (after '|') are aliases, listed after the help. */
    const char *names = opts[k].name, *bar = strchr(names, '|');
    char left[96], also[FIELD_NAME_MAX * 2] = "";
    snprintf(left, sizeof left, "--%.*s%s", (int)(bar ? (size_t)(bar - names) : strlen(names)), names,
             opts[k].kind == OPT_FLAG ? "" : opts[k].kind == OPT_INT ? " N" : " VALUE");
    for (const char *q = bar; q; q = strchr(q + 1, '|')) {
      const char *next = strchr(q + 1, '|');
      size_t len = next ? (size_t)(next - q - 1) : strlen(q + 1), at = strlen(also);
      snprintf(also + at, sizeof also - at, "%s--%.*s", at ? ", " : " (also ", (int)len, q + 1);
    }
    if (*also) snprintf(also + strlen(also), sizeof also - strlen(also), ")");
    /* Two spaces at least between an option and its help, so that tools/mkman.sh can tell them apart. */
    printf("  %-24s%s%s%s\n", left, strlen(left) >= 24 ? "  " : " ", opts[k].help, also);
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

bool cli_parse_seconds(const char *cmd, const char *name, const char *s, double *out) {
  if (!s) return true;
  char *end = NULL;
  double v = strtod(s, &end);
  if (end == s || *end || !(v > 0) || v > 1e9) {
    fprintf(stderr, "autopar %s: %s: expected a number of seconds > 0, got \"%s\"\n", cmd, name, s);
    return false;
  }
  *out = v;
  return true;
}
