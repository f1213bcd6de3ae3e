/* The reader of measured-run tables (report layer): an RFC 4180 CSV reader that turns a file into rows of
 * named string fields, plus the checks and typed getters that the runs.csv format needs
 * (../shared/reference/README.md). `autopar validate` (validate.c) is its client.
 *
 * The CSV dialect is RFC 4180: fields separated by commas, records by CRLF or LF; a field that starts with a
 * double quote runs to the matching closing quote and may hold commas, line breaks and doubled quotes ("").
 * A quote anywhere else, text after a closing quote, an unterminated quoted field or a record whose field
 * count differs from the header's is an error. Blank lines are skipped and a UTF-8 byte-order mark is
 * ignored. Columns are found by name from the header; unknown columns are kept but not interpreted, so the
 * format can grow without breaking old readers.
 *
 * Every error is one line naming the file, the line and the column (1-based, in bytes) of the offending
 * character or field, and what was expected: "runs.csv:12:45: num_gpus: expected an integer >= 1, got
 * \"eight\"".
 * Internal header: not installed, not part of the public API. */
#ifndef AP_REPORT_RUNS_CSV_H
#define AP_REPORT_RUNS_CSV_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"
#include "plan/plan.h"

/* One field: its text (unquoted, NUL-terminated, never NULL) and where it starts in the file. */
typedef struct {
  const char *text;
  int64_t line, col;
} runs_field;

/* One record: n_cols fields in header order. line is where the record starts. */
typedef struct {
  runs_field *fields;
  int64_t line;
} runs_row;

/* A parsed table. Everything in it lives in its arena and goes with runs_free. */
typedef struct {
  arena *a;
  const char *file; /* the name used in messages */
  int n_cols;
  runs_field *header; /* n_cols column names, as fields so that errors can point at them */
  int64_t n_rows;
  runs_row *rows;
} runs_table;

/* Parses CSV text held in memory (n bytes; NUL bytes are an error). file names the text in messages. On
 * success the caller frees *out with runs_free. */
AP_HIDDEN ap_status runs_parse(ap_ctx *ctx, const char *file, const char *text, size_t n, runs_table **out);
/* Reads and parses a file. The caller frees *out with runs_free. */
AP_HIDDEN ap_status runs_load(ap_ctx *ctx, const char *path, runs_table **out);
AP_HIDDEN void runs_free(runs_table *t);

/* The index of the column named name (exact match), or -1 when the header has none. */
AP_HIDDEN int runs_col(const runs_table *t, const char *name);
/* The text of the column called name in row r; "" when the file has no such column. Owned by the table. */
AP_HIDDEN const char *runs_text(const runs_table *t, const runs_row *r, const char *name);

/* Checks that the header has the columns that the runs.csv format requires: id, gpu, num_gpus,
 * global_batch_size, seq_length, measured_tokens_per_s_per_gpu, and either model_config or the architecture
 * columns (num_layers, hidden_size, num_attention_heads, vocab_size). AP_PARSE names the first missing one. */
AP_HIDDEN ap_status runs_check_columns(ap_ctx *ctx, const runs_table *t);

/* Typed getters for the field of column `name` in row r. An empty field (after trimming blanks), or a column the
 * file lacks, leaves *out untouched, sets *found (may be NULL) to false and is an error only when required.
 * Malformed or out-of-range text is always an error naming file:line:col, the column and the range. */
AP_HIDDEN ap_status runs_i64(ap_ctx *ctx, const runs_table *t, const runs_row *r, const char *name, bool required,
                             int64_t min, int64_t max, int64_t *out, bool *found);
AP_HIDDEN ap_status runs_f64(ap_ctx *ctx, const runs_table *t, const runs_row *r, const char *name, bool required,
                             double min, double max, double *out, bool *found);
/* A field that must be one of names[0..n_names-1] (exact match after trimming blanks): *out gets its index. */
AP_HIDDEN ap_status runs_enum(ap_ctx *ctx, const runs_table *t, const runs_row *r, const char *name, bool required,
                              const char *const *names, int n_names, int *out, bool *found);
/* Reads the plan fields that runs.csv has columns for (the csv column of the field table, plan_fields.c: the
 * batch, the degrees, micro_batch_size, sequence_parallel 0/1, recompute, zero_stage, precision) into p, which
 * the caller set to plan_defaults. The batch columns are required; an empty field of any other leaves p's value
 * and is "not stated"; a stated field sets its bit (1u << plan_field_id) in *stated. Bad text is an error
 * naming file:line:col and the column. */
AP_HIDDEN ap_status runs_plan_fields(ap_ctx *ctx, const runs_table *t, const runs_row *r, plan *p, unsigned *stated);
/* Records "file:line:col: name: message" for the field of column name and returns status; a NULL name, or a
 * column the file lacks, points at the start of the record ("file:line:1: message"). */
AP_HIDDEN ap_status runs_fail(ap_ctx *ctx, const runs_table *t, const runs_row *r, const char *name, ap_status status,
                              const char *fmt, ...) AP_PRINTF(6, 7);

#endif
