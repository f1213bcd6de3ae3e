/* Checks of exported text against the frameworks' own definitions, for tests/test_export.c: the table that
 * tools/framework_args/extract.py extracted from Megatron-LM, DeepSpeed and torchtitan at stated commits
 * (tests/data/framework_args.tsv) says which flags and keys exist and what type each value has; the parsers
 * here read each export format back (a torchrun command line, a DeepSpeed JSON config, a torchtitan Python
 * config module, a torchtitan TOML job config) and fail the test on any flag or key the framework does not
 * define, any value that does not parse as its type or is not one of its choices. Static functions: include
 * once, after testutil.h. */
#ifndef AP_TESTS_EXPORT_CHECK_H
#define AP_TESTS_EXPORT_CHECK_H

#include <ctype.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- The table ---- */

enum { FA_MAX_ROWS = 2048 };
typedef struct {
  char fw[20], name[96], type[256], choices[256];
} fa_row;
static fa_row fa_rows[FA_MAX_ROWS];
static int fa_n;

static void fa_load(void) {
  if (fa_n) return;
  FILE *f = fopen("tests/data/framework_args.tsv", "r");
  if (!f) fail_msg("tests/data/framework_args.tsv: cannot open (run from the repository root)");
  char line[1024];
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#' || line[0] == '\n') continue;
    line[strcspn(line, "\n")] = '\0';
    if (fa_n == FA_MAX_ROWS) fail_msg("framework_args.tsv: more than %d rows", FA_MAX_ROWS);
    fa_row *r = &fa_rows[fa_n];
    memset(r, 0, sizeof *r);
    char *cols[4] = {0};
    int n = 0;
    for (char *c = line; c && n < 4; n++) {
      cols[n] = c;
      c = strchr(c, '\t');
      if (c) *c++ = '\0';
    }
    if (n < 3) fail_msg("framework_args.tsv: a row with %d columns", n);
    snprintf(r->fw, sizeof r->fw, "%s", cols[0]);
    snprintf(r->name, sizeof r->name, "%s", cols[1]);
    snprintf(r->type, sizeof r->type, "%s", cols[2]);
    if (cols[3]) snprintf(r->choices, sizeof r->choices, "%s", cols[3]);
    fa_n++;
  }
  fclose(f);
  if (fa_n < 500) fail_msg("framework_args.tsv: only %d rows", fa_n);
}

static const fa_row *fa_find(const char *fw, const char *name) {
  fa_load();
  for (int i = 0; i < fa_n; i++)
    if (strcmp(fa_rows[i].fw, fw) == 0 && strcmp(fa_rows[i].name, name) == 0) return &fa_rows[i];
  return NULL;
}

static bool parses_int(const char *v) {
  char *end;
  if (!*v) return false;
  (void)strtoll(v, &end, 10);
  return *end == '\0';
}

static bool parses_float(const char *v) {
  char *end;
  if (!*v) return false;
  (void)strtod(v, &end);
  return *end == '\0';
}

static bool in_choices(const char *choices, const char *v) {
  if (!choices[0]) return true;
  size_t n = strlen(v);
  for (const char *c = choices; *c;) {
    size_t m = strcspn(c, ",");
    if (m == n && strncmp(c, v, n) == 0) return true;
    c += m + (c[m] == ',');
  }
  return false;
}

/* One scalar value of a table type (int, float, str, custom:…), unquoted. */
static bool value_fits(const fa_row *r, const char *v) {
  char base[256];
  snprintf(base, sizeof base, "%s", r->type);
  size_t n = strlen(base);
  if (n && (base[n - 1] == '+' || base[n - 1] == '?')) base[n - 1] = '\0';
  if (strcmp(base, "int") == 0) return parses_int(v) && in_choices(r->choices, v);
  if (strcmp(base, "float") == 0) return parses_float(v);
  if (strcmp(base, "custom:tuple_type") == 0) {
    char buf[320];
    snprintf(buf, sizeof buf, "%.300s", v);
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ","))
      if (!parses_int(t)) return false;
    return true;
  }
  return *v && in_choices(r->choices, v);
}

/* ---- Megatron-LM: a torchrun line, then "--flag [value]" lines ---- */

enum { MAX_FLAGS = 128 };
typedef struct {
  int n;
  char flag[MAX_FLAGS][64];
  char value[MAX_FLAGS][320]; /* "" for a flag without a value; quotes removed */
  int64_t nnodes, nproc;
} mflags;

/* Parses an export: comment lines, one launcher line "torchrun … pretrain_gpt.py \", then "--flag [value]"
 * lines, each but the last ending in " \". Fails on anything else and on a flag given twice. */
static void parse_megatron(const char *text, mflags *out) {
  memset(out, 0, sizeof *out);
  const char *line = text;
  bool launched = false, last_continued = true;
  while (*line) {
    const char *end = strchr(line, '\n');
    if (!end) fail_msg("export does not end in a newline: %s", text);
    size_t len = (size_t)(end - line);
    char buf[1024];
    if (len >= sizeof buf) fail_msg("line too long: %.80s", line);
    memcpy(buf, line, len);
    buf[len] = '\0';
    line = end + 1;
    if (buf[0] == '#') {
      if (launched) fail_msg("comment after the launcher: %s", buf);
      continue;
    }
    if (!last_continued) fail_msg("a line follows one without a continuation: %s", buf);
    last_continued = len >= 2 && strcmp(buf + len - 2, " \\") == 0;
    if (last_continued) buf[len - 2] = '\0';
    if (!launched) {
      if (strncmp(buf, "torchrun ", 9) != 0 || !strstr(buf, " pretrain_gpt.py"))
        fail_msg("the first command line is not \"torchrun … pretrain_gpt.py\": %s", buf);
      const char *nn = strstr(buf, "--nnodes "), *np = strstr(buf, "--nproc-per-node ");
      if (!nn || !np) fail_msg("torchrun without --nnodes or --nproc-per-node: %s", buf);
      out->nnodes = strtoll(nn + 9, NULL, 10);
      out->nproc = strtoll(np + 17, NULL, 10);
      launched = true;
      continue;
    }
    if (strncmp(buf, "--", 2) != 0) fail_msg("not a flag line: \"%s\"", buf);
    if (out->n == MAX_FLAGS) fail_msg("too many flags");
    char *sp = strchr(buf, ' ');
    if (sp) *sp = '\0';
    for (int i = 0; i < out->n; i++)
      if (strcmp(out->flag[i], buf) == 0) fail_msg("flag %s given twice", buf);
    const char *v = sp ? sp + 1 : "";
    size_t vl = strlen(v);
    if (vl >= 2 && v[0] == '\'' && v[vl - 1] == '\'') {
      v++;
      vl -= 2;
    } else if (strpbrk(v, "()[]*|$;&<>'\"`\\")) {
      fail_msg("%s %s: a value bash would not pass as it is (quote it):\n%s", buf, v, text);
    }
    if (strlen(buf) >= sizeof out->flag[0] || vl >= sizeof out->value[0]) fail_msg("flag or value too long: %s", buf);
    memcpy(out->flag[out->n], buf, strlen(buf) + 1);
    memcpy(out->value[out->n], v, vl);
    out->value[out->n][vl] = '\0';
    out->n++;
  }
  if (!launched || last_continued) fail_msg("no launcher, or the last line ends in a continuation: %s", text);
  if (out->n == 0) fail_msg("no flags: %s", text);
}

/* Every flag is one Megatron-LM defines, with a value of its type (none for a flag, one or more separated by
 * spaces for a list). */
static void megatron_against_table(const mflags *m, const char *text) {
  for (int i = 0; i < m->n; i++) {
    const fa_row *r = fa_find("megatron", m->flag[i]);
    if (!r) fail_msg("%s is not a Megatron-LM argument (framework_args.tsv):\n%s", m->flag[i], text);
    const char *v = m->value[i];
    bool flag = strcmp(r->type, "flag") == 0;
    if (flag != (*v == '\0')) fail_msg("%s %s a value, and Megatron's is %s:\n%s", m->flag[i], *v ? "has" : "lacks", r->type, text);
    if (flag) continue;
    size_t n = strlen(r->type);
    bool list = r->type[n - 1] == '+';
    char buf[320];
    snprintf(buf, sizeof buf, "%s", v);
    int count = 0;
    for (char *t = list ? strtok(buf, " ") : buf; t; t = list ? strtok(NULL, " ") : NULL, count++)
      if (!value_fits(r, t)) fail_msg("%s %s: not a %s%s%s:\n%s", m->flag[i], t, r->type, r->choices[0] ? " in " : "", r->choices, text);
    if (!list && strchr(v, ' ')) fail_msg("%s takes one value, got \"%s\"", m->flag[i], v);
  }
}

static const char *mg_get(const mflags *m, const char *flag) {
  for (int i = 0; i < m->n; i++)
    if (strcmp(m->flag[i], flag) == 0) return m->value[i];
  return NULL;
}

static int64_t mg_int(const mflags *m, const char *flag, int64_t dflt) {
  const char *v = mg_get(m, flag);
  return v ? strtoll(v, NULL, 10) : dflt;
}

/* Expands a python-list pattern "([0]*3+[1]*58)" into 0/1 values (Megatron's moe_freq_type form); returns
 * the count, or -1 when the text is not of that form. */
static int expand_pattern(const char *v, int *out, int cap) {
  int n = 0;
  const char *c = v;
  if (*c == '(') c++;
  while (*c && *c != ')') {
    int bit, times, used;
    if (sscanf(c, "[%d]*%d%n", &bit, &times, &used) != 2 || (bit != 0 && bit != 1) || times < 1) return -1;
    for (int i = 0; i < times && n < cap; i++) out[n++] = bit;
    c += used;
    if (*c == '+') c++;
  }
  return n;
}

/* The layers of each chunk from --pipeline-model-parallel-layout ("E|t*4|t*3,mL": stages split by "|", x*n
 * repeats, commas cosmetic; pipeline_parallel_layer_layout.py), the chunk count in *n; checks E first and L
 * last exactly once, and the MTP layers m in the last stage. */
static void layout_split(const char *v, int64_t *out, int64_t *n, int64_t mtp, const char *text) {
  *n = 0;
  int64_t e = 0, l = 0, m = 0;
  out[0] = 0;
  for (const char *c = v; *c; c++) {
    if (*c == ',') continue;
    if (*c == '|') {
      out[++*n] = 0;
      continue;
    }
    int64_t times = 1;
    if (c[1] == '*') times = strtoll(c + 2, NULL, 10);
    if (*c == 't') out[*n] += times;
    else if (*c == 'E') e += times;
    else if (*c == 'L') l += times;
    else if (*c == 'm') m += times;
    else fail_msg("layout character %c:\n%s", *c, text);
    if (c[1] == '*') {
      c += 2;
      while (isdigit((unsigned char)c[1])) c++;
    }
  }
  (*n)++;
  if (e != 1 || l != 1 || m != mtp || v[0] != 'E' || v[strlen(v) - 1] != 'L')
    fail_msg("layout %s: E first, L last, each once, and %lld MTP layers expected:\n%s", v, (long long)mtp, text);
}

/* ---- DeepSpeed: every key at every level it checks ---- */

static void deepspeed_object(json_t *obj, const char *prefix, const char *text) {
  const char *key;
  json_t *v;
  json_object_foreach(obj, key, v) {
    if (!prefix[0] && strcmp(key, "autopar") == 0) continue; /* ignored by DeepSpeed, documented */
    char name[256];
    snprintf(name, sizeof name, "%.120s%.120s", prefix, key);
    const fa_row *r = fa_find("deepspeed", name);
    if (!r) fail_msg("DeepSpeed has no key %s (framework_args.tsv):\n%s", name, text);
    bool ok = strcmp(r->type, "any") == 0 || (strcmp(r->type, "object") == 0 && json_is_object(v)) ||
              (strcmp(r->type, "bool") == 0 && json_is_boolean(v)) ||
              (strcmp(r->type, "int") == 0 && json_is_integer(v)) ||
              (strcmp(r->type, "float") == 0 && json_is_number(v)) || (strcmp(r->type, "str") == 0 && json_is_string(v));
    if (!ok) fail_msg("DeepSpeed key %s: not a %s:\n%s", name, r->type, text);
    if (json_is_integer(v) && r->choices[0]) {
      char num[32];
      snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
      if (!in_choices(r->choices, num)) fail_msg("DeepSpeed key %s = %s: not in %s", name, num, r->choices);
    }
    if (json_is_object(v)) {
      char sub[260];
      snprintf(sub, sizeof sub, "%.250s.", name);
      deepspeed_object(v, sub, text);
    }
  }
}

/* ---- torchtitan: "key = value" of a TOML section or "config.a.b = value" of the Python form ---- */

/* Whether v is a value of table type t: int, float, bool (TOML true/false or Python True/False), str ("…",
 * in the choices), list:str / list:list:str ([…]); "any" and "object" take anything. */
static bool tt_value_fits(const fa_row *r, const char *v, bool python) {
  const char *t = r->type;
  if (strcmp(t, "any") == 0 || strcmp(t, "object") == 0) return true;
  if (strcmp(t, "int") == 0) return parses_int(v);
  if (strcmp(t, "float") == 0) return parses_float(v);
  if (strcmp(t, "bool") == 0) return python ? strcmp(v, "True") == 0 || strcmp(v, "False") == 0
                                            : strcmp(v, "true") == 0 || strcmp(v, "false") == 0;
  if (strcmp(t, "str") == 0) {
    size_t n = strlen(v);
    if (n < 2 || v[0] != '"' || v[n - 1] != '"') return false;
    char inner[256];
    snprintf(inner, sizeof inner, "%.*s", (int)(n - 2 < 250 ? n - 2 : 250), v + 1);
    return in_choices(r->choices, inner);
  }
  if (strncmp(t, "list:", 5) == 0) return v[0] == '[';
  return false;
}

#endif
