/* libFuzzer target for the runs-table reader (src/report/runs_csv.c): bytes go to runs_parse, the in-memory
 * RFC 4180 reader. A table that reads is checked for the runs.csv columns, and every field of every row goes
 * through the typed getters (integer, number, enum) and runs_fail, so that the message code meets whatever
 * text the reader lets through. Seeds: fuzz/seeds/runs_csv/.
 * FUZZ_MAX_LEN: 2048 (fuzz-long: short inputs keep this slow reader at a useful rate) */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "report/runs_csv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const outcomes[] = {"ok", "oom"};

/* TUNING: each field costs seven getter calls, most of which fail and format a message; checking every field
 * of a table of a thousand one-byte fields ran this target at 1,500 inputs a second. Only the first this many
 * fields (row by row) go through the getters: every field is alike to them (the column is found by its
 * header name), and the reader itself still sees the whole input. */
enum { MAX_CHECKED_FIELDS = 32 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ap_ctx *ctx = ap_ctx_new();
  runs_table *t = NULL;
  if (ctx && runs_parse(ctx, "runs.csv", (const char *)data, size, &t) == AP_OK) {
    (void)runs_check_columns(ctx, t);
    int64_t budget = MAX_CHECKED_FIELDS;
    for (int64_t r = 0; r < t->n_rows && budget > 0; r++) {
      const runs_row *row = &t->rows[r];
      for (int k = 0; k < t->n_cols && budget > 0; k++, budget--) {
        const char *name = t->header[k].text;
        int64_t i = 0;
        double x = 0;
        int e = 0;
        bool found = false;
        (void)runs_i64(ctx, t, row, name, k % 2 == 0, 1, INT64_MAX, &i, &found);
        (void)runs_i64(ctx, t, row, name, false, -5, 5, &i, NULL);
        (void)runs_f64(ctx, t, row, name, k % 2 == 1, 0, INFINITY, &x, &found);
        (void)runs_f64(ctx, t, row, name, false, -1, 1, &x, NULL);
        (void)runs_enum(ctx, t, row, name, true, outcomes, 2, &e, &found);
        /* Header names are distinct (the reader checks), so every column is found where it stands. */
        if (runs_col(t, name) != k || runs_text(t, row, name) != row->fields[k].text) __builtin_trap();
      }
      (void)runs_i64(ctx, t, row, "no such column", true, 0, 1, &(int64_t){0}, NULL);
      (void)runs_fail(ctx, t, row, NULL, AP_INVALID, "row %lld", (long long)r);
      if (t->n_cols > 0) (void)runs_fail(ctx, t, row, t->header[0].text, AP_INVALID, "first field");
    }
    runs_free(t);
  }
  ap_ctx_free(ctx);
  return 0;
}
