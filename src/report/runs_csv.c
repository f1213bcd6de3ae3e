/* The RFC 4180 CSV reader and the runs.csv field getters (report layer); see runs_csv.h for the dialect.
 *
 * The reader makes one pass over the text with a small state machine per field. Unquoted text is copied to
 * the arena as it stands; quoted text is unescaped into a scratch buffer first. Lines are counted on every
 * LF (a CR LF pair is one line end; a lone CR also ends a line, as old Mac files do), inside quoted fields
 * too, so that a message about a later record still names the right line of the file. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "report/runs_csv.h"

/* TUNING: no table we read has more than a few hundred columns; the limit only guards against a runaway
 * header (a binary file read by mistake) costing memory for every record. */
enum { RUNS_MAX_COLS = 4096 };

/* A growable byte buffer for unescaping quoted fields. */
typedef struct {
  char *buf;
  size_t len, cap;
} scratch;

static bool scratch_put(scratch *s, char c) {
  if (s->len + 1 >= s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 256;
    char *p = realloc(s->buf, cap);
    if (!p) return false;
    s->buf = p;
    s->cap = cap;
  }
  s->buf[s->len++] = c;
  return true;
}

/* A growable array of fields (one record) or rows (the table), kept on the heap while parsing. */
typedef struct {
  runs_field *v;
  int n, cap;
} field_vec;

typedef struct {
  runs_row *v;
  int64_t n, cap;
} row_vec;

static bool field_push(field_vec *fv, runs_field f) {
  if (fv->n == fv->cap) {
    int cap = fv->cap ? fv->cap * 2 : 64;
    runs_field *p = realloc(fv->v, sizeof *p * (size_t)cap);
    if (!p) return false;
    fv->v = p;
    fv->cap = cap;
  }
  fv->v[fv->n++] = f;
  return true;
}

static bool row_push(row_vec *rv, runs_row r) {
  if (rv->n == rv->cap) {
    int64_t cap = rv->cap ? rv->cap * 2 : 256;
    runs_row *p = realloc(rv->v, sizeof *p * (size_t)cap);
    if (!p) return false;
    rv->v = p;
    rv->cap = cap;
  }
  rv->v[rv->n++] = r;
  return true;
}

/* The parser's position in the text. */
typedef struct {
  ap_ctx *ctx;
  const char *file, *text;
  size_t n, i;
  int64_t line;
  size_t line_start; /* offset of the current line's first byte */
  arena *a;
  scratch sc;
} cursor;

static int64_t col_of(const cursor *c, size_t offset) { return (int64_t)(offset - c->line_start) + 1; }

/* Describes the character at offset for a message: 'x', "end of line" or "end of file". */
static void describe_char(const cursor *c, size_t offset, char *out, size_t n) {
  if (offset >= c->n) snprintf(out, n, "the end of the file");
  else if (c->text[offset] == '\n' || c->text[offset] == '\r') snprintf(out, n, "the end of the line");
  else if ((unsigned char)c->text[offset] < 0x20) snprintf(out, n, "byte 0x%02x", (unsigned char)c->text[offset]);
  else snprintf(out, n, "'%c'", c->text[offset]);
}

/* Consumes a line end at the cursor (CR LF, LF or a lone CR) and starts a new line. */
static void eat_line_end(cursor *c) {
  if (c->text[c->i] == '\r' && c->i + 1 < c->n && c->text[c->i + 1] == '\n') c->i++;
  c->i++;
  c->line++;
  c->line_start = c->i;
}

static bool at_line_end(const cursor *c) { return c->i < c->n && (c->text[c->i] == '\n' || c->text[c->i] == '\r'); }

static char *arena_copy(arena *a, const char *s, size_t len) {
  char *p = arena_alloc(a, len + 1);
  if (p) memcpy(p, s, len);
  return p;
}

/* Parses one field at the cursor into *f; leaves the cursor on the separator, line end or end of file. */
static ap_status parse_field(cursor *c, runs_field *f) {
  f->line = c->line;
  f->col = col_of(c, c->i);
  if (c->i < c->n && c->text[c->i] == '"') {
    int64_t open_line = c->line, open_col = f->col;
    c->i++;
    c->sc.len = 0;
    for (;;) {
      if (c->i >= c->n)
        return ctx_fail(c->ctx, AP_PARSE,
                        "%s:%lld:%lld: unterminated quoted field: expected a closing '\"' before the end of the file",
                        c->file, (long long)open_line, (long long)open_col);
      char ch = c->text[c->i];
      if (ch == '\0')
        return ctx_fail(c->ctx, AP_PARSE, "%s:%lld:%lld: expected text, got a NUL byte", c->file, (long long)c->line,
                        (long long)col_of(c, c->i));
      if (ch == '"') {
        if (c->i + 1 < c->n && c->text[c->i + 1] == '"') {
          if (!scratch_put(&c->sc, '"')) return ctx_fail(c->ctx, AP_NOMEM, "%s: out of memory", c->file);
          c->i += 2;
          continue;
        }
        c->i++;
        break;
      }
      if (!scratch_put(&c->sc, ch)) return ctx_fail(c->ctx, AP_NOMEM, "%s: out of memory", c->file);
      if (ch == '\n' || (ch == '\r' && !(c->i + 1 < c->n && c->text[c->i + 1] == '\n'))) {
        c->i++;
        c->line++;
        c->line_start = c->i;
      } else {
        c->i++;
      }
    }
    if (c->i < c->n && c->text[c->i] != ',' && !at_line_end(c)) {
      char what[32];
      describe_char(c, c->i, what, sizeof what);
      return ctx_fail(c->ctx, AP_PARSE,
                      "%s:%lld:%lld: expected ',' or the end of the line after a closing quote, got %s (a quote "
                      "inside a quoted field is written \"\")",
                      c->file, (long long)c->line, (long long)col_of(c, c->i), what);
    }
    f->text = arena_copy(c->a, c->sc.buf ? c->sc.buf : "", c->sc.len);
  } else {
    size_t start = c->i;
    while (c->i < c->n && c->text[c->i] != ',' && !at_line_end(c)) {
      char ch = c->text[c->i];
      if (ch == '"')
        return ctx_fail(c->ctx, AP_PARSE,
                        "%s:%lld:%lld: expected a field without quotes or a quoted field, got '\"' inside an "
                        "unquoted field (quote the whole field and double the quote)",
                        c->file, (long long)c->line, (long long)col_of(c, c->i));
      if (ch == '\0')
        return ctx_fail(c->ctx, AP_PARSE, "%s:%lld:%lld: expected text, got a NUL byte", c->file, (long long)c->line,
                        (long long)col_of(c, c->i));
      c->i++;
    }
    f->text = arena_copy(c->a, c->text + start, c->i - start);
  }
  if (!f->text) return ctx_fail(c->ctx, AP_NOMEM, "%s: out of memory", c->file);
  return AP_OK;
}

/* Parses one record (the cursor is at its first byte, not on a blank line) into fv; consumes its line end. */
static ap_status parse_record(cursor *c, field_vec *fv) {
  fv->n = 0;
  for (;;) {
    runs_field f;
    ap_status st = parse_field(c, &f);
    if (st) return st;
    if (fv->n >= RUNS_MAX_COLS)
      return ctx_fail(c->ctx, AP_PARSE, "%s:%lld:%lld: expected at most %d fields in a record", c->file,
                      (long long)f.line, (long long)f.col, RUNS_MAX_COLS);
    if (!field_push(fv, f)) return ctx_fail(c->ctx, AP_NOMEM, "%s: out of memory", c->file);
    if (c->i < c->n && c->text[c->i] == ',') {
      c->i++;
      continue;
    }
    if (c->i < c->n) eat_line_end(c);
    return AP_OK;
  }
}

/* Trims blanks (spaces and tabs) from both ends of s into out (at most n-1 bytes). */
static void trim_copy(const char *s, char *out, size_t n) {
  while (*s == ' ' || *s == '\t') s++;
  size_t len = strlen(s);
  while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t')) len--;
  if (len >= n) len = n - 1;
  memcpy(out, s, len);
  out[len] = '\0';
}

static ap_status check_header(cursor *c, runs_table *t) {
  for (int k = 0; k < t->n_cols; k++) {
    runs_field *h = &t->header[k];
    char name[256];
    trim_copy(h->text, name, sizeof name);
    if (!*name)
      return ctx_fail(c->ctx, AP_PARSE, "%s:%lld:%lld: expected a column name in the header, got an empty field",
                      c->file, (long long)h->line, (long long)h->col);
    if (strcmp(name, h->text) != 0 && !(h->text = arena_strdup(c->a, name)))
      return ctx_fail(c->ctx, AP_NOMEM, "%s: out of memory", c->file);
    for (int j = 0; j < k; j++)
      if (strcmp(t->header[j].text, h->text) == 0)
        return ctx_fail(c->ctx, AP_PARSE, "%s:%lld:%lld: expected distinct column names, got \"%s\" again (first at column %lld)",
                        c->file, (long long)h->line, (long long)h->col, h->text, (long long)t->header[j].col);
  }
  return AP_OK;
}

/* At the start of a record, a line end right away means a blank line. */
static bool at_blank_line(const cursor *c) { return at_line_end(c); }

static ap_status parse_all(cursor *c, runs_table *t) {
  field_vec fv = {0};
  row_vec rv = {0};
  ap_status st = AP_OK;
  /* A UTF-8 byte-order mark, as spreadsheet exports write. */
  if (c->n >= 3 && memcmp(c->text, "\xEF\xBB\xBF", 3) == 0) c->i = c->line_start = 3;
  while (c->i < c->n && at_blank_line(c)) eat_line_end(c);
  if (c->i >= c->n) {
    st = ctx_fail(c->ctx, AP_PARSE, "%s:%lld:1: expected a header line of column names, got an empty file", c->file,
                  (long long)c->line);
    goto done;
  }
  if ((st = parse_record(c, &fv))) goto done;
  t->n_cols = fv.n;
  t->header = arena_alloc(c->a, sizeof *t->header * (size_t)fv.n);
  if (!t->header) {
    st = ctx_fail(c->ctx, AP_NOMEM, "%s: out of memory", c->file);
    goto done;
  }
  memcpy(t->header, fv.v, sizeof *t->header * (size_t)fv.n);
  if ((st = check_header(c, t))) goto done;
  while (c->i < c->n) {
    if (at_blank_line(c)) {
      eat_line_end(c);
      continue;
    }
    runs_row r = {.line = c->line};
    if ((st = parse_record(c, &fv))) goto done;
    if (fv.n != t->n_cols) {
      const runs_field *at = fv.n > t->n_cols ? &fv.v[t->n_cols] : &fv.v[fv.n - 1];
      st = ctx_fail(c->ctx, AP_PARSE, "%s:%lld:%lld: expected %d fields as in the header, got %d", c->file,
                    (long long)at->line, (long long)at->col, t->n_cols, fv.n);
      goto done;
    }
    r.fields = arena_alloc(c->a, sizeof *r.fields * (size_t)fv.n);
    if (!r.fields || !row_push(&rv, r)) {
      st = ctx_fail(c->ctx, AP_NOMEM, "%s: out of memory", c->file);
      goto done;
    }
    memcpy(r.fields, fv.v, sizeof *r.fields * (size_t)fv.n);
  }
  t->n_rows = rv.n;
  if (rv.n > 0) {
    t->rows = arena_alloc(c->a, sizeof *t->rows * (size_t)rv.n);
    if (!t->rows) {
      st = ctx_fail(c->ctx, AP_NOMEM, "%s: out of memory", c->file);
      goto done;
    }
    memcpy(t->rows, rv.v, sizeof *t->rows * (size_t)rv.n);
  }
done:
  free(fv.v);
  free(rv.v);
  return st;
}

ap_status runs_parse(ap_ctx *ctx, const char *file, const char *text, size_t n, runs_table **out) {
  *out = NULL;
  runs_table *t = calloc(1, sizeof *t);
  if (!t || !(t->a = arena_new())) {
    free(t);
    return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", file);
  }
  t->file = arena_strdup(t->a, file ? file : "csv");
  if (!t->file) {
    runs_free(t);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  cursor c = {.ctx = ctx, .file = t->file, .text = text, .n = n, .line = 1, .a = t->a};
  ap_status st = parse_all(&c, t);
  free(c.sc.buf);
  if (st) {
    runs_free(t);
    return st;
  }
  *out = t;
  return AP_OK;
}

ap_status runs_load(ap_ctx *ctx, const char *path, runs_table **out) {
  *out = NULL;
  char *text = NULL;
  size_t n = 0;
  ap_status st = util_read_file(ctx, path, &text, &n);
  if (st) return st;
  st = runs_parse(ctx, path, text, n, out);
  free(text);
  return st;
}

void runs_free(runs_table *t) {
  if (!t) return;
  arena_free(t->a);
  free(t);
}

int runs_col(const runs_table *t, const char *name) {
  for (int k = 0; k < t->n_cols; k++)
    if (strcmp(t->header[k].text, name) == 0) return k;
  return -1;
}

const char *runs_text(const runs_table *t, const runs_row *r, const char *name) {
  int col = runs_col(t, name);
  return col >= 0 ? r->fields[col].text : "";
}

ap_status runs_check_columns(ap_ctx *ctx, const runs_table *t) {
  static const char *const required[] = {"id",         "gpu", "num_gpus", "global_batch_size",
                                         "seq_length", "measured_tokens_per_s_per_gpu"};
  static const char *const arch[] = {"num_layers", "hidden_size", "num_attention_heads", "vocab_size"};
  for (size_t i = 0; i < AP_COUNT(required); i++)
    if (runs_col(t, required[i]) < 0)
      return ctx_fail(ctx, AP_PARSE, "%s:1:1: expected a column named \"%s\" in the header", t->file, required[i]);
  if (runs_col(t, "model_config") >= 0) return AP_OK;
  for (size_t i = 0; i < AP_COUNT(arch); i++)
    if (runs_col(t, arch[i]) < 0)
      return ctx_fail(ctx, AP_PARSE,
                      "%s:1:1: expected a column named \"model_config\" or the architecture columns (num_layers, "
                      "hidden_size, num_attention_heads, vocab_size); \"%s\" is missing",
                      t->file, arch[i]);
  return AP_OK;
}

static ap_status vfail_col(ap_ctx *ctx, const runs_table *t, const runs_row *r, int col, ap_status status,
                           const char *fmt, va_list ap) {
  char msg[768];
  vsnprintf(msg, sizeof msg, fmt, ap);
  if (col >= 0 && col < t->n_cols) {
    const runs_field *f = &r->fields[col];
    return ctx_fail(ctx, status, "%s:%lld:%lld: %s: %s", t->file, (long long)f->line, (long long)f->col,
                    t->header[col].text, msg);
  }
  return ctx_fail(ctx, status, "%s:%lld:1: %s", t->file, (long long)r->line, msg);
}

static ap_status fail_col(ap_ctx *ctx, const runs_table *t, const runs_row *r, int col, ap_status status,
                          const char *fmt, ...) AP_PRINTF(6, 7);
static ap_status fail_col(ap_ctx *ctx, const runs_table *t, const runs_row *r, int col, ap_status status,
                          const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ap_status st = vfail_col(ctx, t, r, col, status, fmt, ap);
  va_end(ap);
  return st;
}

ap_status runs_fail(ap_ctx *ctx, const runs_table *t, const runs_row *r, const char *name, ap_status status,
                    const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ap_status st = vfail_col(ctx, t, r, name ? runs_col(t, name) : -1, status, fmt, ap);
  va_end(ap);
  return st;
}

/* The trimmed text of a field into buf; false when it is empty (or the column is absent). */
static bool field_value(const runs_table *t, const runs_row *r, int col, char *buf, size_t n) {
  if (col < 0 || col >= t->n_cols) return false;
  trim_copy(r->fields[col].text, buf, n);
  return buf[0] != '\0';
}

/* Quotes a field's text for a message, shortened to keep the message one short line. */
static const char *quoted(const char *s, char *buf, size_t n) {
  snprintf(buf, n, "\"%.40s%s\"", s, strlen(s) > 40 ? "..." : "");
  for (char *p = buf; *p; p++)
    if (*p == '\n' || *p == '\r') *p = ' ';
  return buf;
}

static ap_status missing(ap_ctx *ctx, const runs_table *t, const runs_row *r, int col, const char *name,
                         const char *what) {
  if (col < 0) return fail_col(ctx, t, r, -1, AP_INVALID, "%s: expected %s, but the file has no such column", name, what);
  return fail_col(ctx, t, r, col, AP_INVALID, "expected %s, got an empty field", what);
}

ap_status runs_i64(ap_ctx *ctx, const runs_table *t, const runs_row *r, const char *name, bool required, int64_t min,
                   int64_t max, int64_t *out, bool *found) {
  char buf[128], q[64], what[96];
  int col = runs_col(t, name);
  if (found) *found = false;
  if (max == INT64_MAX) snprintf(what, sizeof what, "an integer >= %lld", (long long)min);
  else snprintf(what, sizeof what, "an integer in [%lld, %lld]", (long long)min, (long long)max);
  if (!field_value(t, r, col, buf, sizeof buf)) return required ? missing(ctx, t, r, col, name, what) : AP_OK;
  errno = 0;
  char *end = NULL;
  long long v = strtoll(buf, &end, 10);
  /* "8.0" is an integer written as a float; spreadsheets do that. */
  if (end && *end == '.') {
    char *p = end + 1;
    while (*p == '0') p++;
    if (*p == '\0') end = p;
  }
  if (errno || end == buf || *end || v < min || v > max)
    return fail_col(ctx, t, r, col, AP_INVALID, "expected %s, got %s", what, quoted(r->fields[col].text, q, sizeof q));
  *out = (int64_t)v;
  if (found) *found = true;
  return AP_OK;
}

ap_status runs_f64(ap_ctx *ctx, const runs_table *t, const runs_row *r, const char *name, bool required, double min,
                   double max, double *out, bool *found) {
  char buf[128], q[64], what[96];
  int col = runs_col(t, name);
  if (found) *found = false;
  if (isinf(max)) snprintf(what, sizeof what, "a number >= %g", min);
  else snprintf(what, sizeof what, "a number in [%g, %g]", min, max);
  if (!field_value(t, r, col, buf, sizeof buf)) return required ? missing(ctx, t, r, col, name, what) : AP_OK;
  /* Plain decimal notation only: strtod would also take "inf", "nan" and hexadecimal floats. */
  bool plain = true;
  for (const char *p = buf; *p; p++)
    if (!strchr("0123456789+-.eE", *p)) plain = false;
  errno = 0;
  char *end = NULL;
  double v = plain ? strtod(buf, &end) : NAN;
  if (!plain || errno || end == buf || *end || !isfinite(v) || v < min || v > max)
    return fail_col(ctx, t, r, col, AP_INVALID, "expected %s, got %s", what, quoted(r->fields[col].text, q, sizeof q));
  *out = v;
  if (found) *found = true;
  return AP_OK;
}

ap_status runs_enum(ap_ctx *ctx, const runs_table *t, const runs_row *r, const char *name, bool required,
                    const char *const *names, int n_names, int *out, bool *found) {
  char buf[128], q[64], list[256] = "";
  int col = runs_col(t, name);
  if (found) *found = false;
  for (int k = 0; k < n_names; k++) {
    size_t len = strlen(list);
    snprintf(list + len, sizeof list - len, "%s%s", k ? ", " : "", names[k]);
  }
  if (!field_value(t, r, col, buf, sizeof buf)) {
    if (!required) return AP_OK;
    char what[300];
    snprintf(what, sizeof what, "one of %s", list);
    return missing(ctx, t, r, col, name, what);
  }
  for (int k = 0; k < n_names; k++)
    if (strcmp(buf, names[k]) == 0) {
      *out = k;
      if (found) *found = true;
      return AP_OK;
    }
  return fail_col(ctx, t, r, col, AP_INVALID, "expected one of %s, got %s", list,
                   quoted(r->fields[col].text, q, sizeof q));
}

/* ---- Plan fields: the columns of the field table (plan_fields.c) ---- */

ap_status runs_plan_fields(ap_ctx *ctx, const runs_table *t, const runs_row *r, plan *p, unsigned *stated) {
  size_t n_fields;
  const plan_field *fields = plan_fields(&n_fields);
  for (size_t i = 0; i < n_fields; i++) {
    const plan_field *f = &fields[i];
    if (!f->csv) continue;
    bool required = (f->flags & PLAN_FF_PROBLEM) != 0, found = false;
    ap_status st = AP_OK;
    if (f->kind == PLAN_FK_INT || f->kind == PLAN_FK_BOOL) {
      int64_t v = 0;
      st = runs_i64(ctx, t, r, f->csv, required, f->min, f->max, &v, &found);
      if (!st && found) plan_field_set_int(p, f, v);
    } else if (f->kind == PLAN_FK_ENUM) {
      /* The value names, then the aliases' ("mxfp8" for fp8), each alias resolved to its value. */
      const char *names[32];
      int values[32], n = 0;
      for (int k = 0; k < f->n_names && n < 32; k++, n++) {
        names[n] = f->names[k];
        values[n] = k;
      }
      char buf[256], *save = NULL;
      snprintf(buf, sizeof buf, "%s", f->value_aliases);
      for (char *tok = strtok_r(buf, "|", &save); tok && n < 32; tok = strtok_r(NULL, "|", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) continue;
        *eq = '\0';
        int target = names_find(f->names, (size_t)f->n_names, eq + 1);
        if (target < 0) continue;
        names[n] = tok;
        values[n++] = target;
      }
      int k = 0;
      st = runs_enum(ctx, t, r, f->csv, required, names, n, &k, &found);
      if (!st && found) plan_field_set_int(p, f, values[k]);
    } else {
      return runs_fail(ctx, t, r, f->csv, AP_INTERNAL, "the runs.csv reader has no reader for this field kind");
    }
    if (st) return st;
    if (found && (f->flags & PLAN_FF_SEARCHED)) *stated |= 1u << f->id;
  }
  return AP_OK;
}
