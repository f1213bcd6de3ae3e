/* A validate report's rows (report layer; validate.h): the accessors that validate.c, validate_band.c and the
 * calibration read and fill rows through, apart from validate.c so that validate_band.c, which validate.c calls,
 * calls nothing back in it. */
#include "report/validate_internal.h"

int64_t validate_report_n_rows(const validate_report *r) { return r->n_rows; }
const validate_row *validate_report_row(const validate_report *r, int64_t i) {
  return i >= 0 && i < r->n_rows ? &r->rows[i] : NULL;
}
validate_row *validate_report_row_mut(validate_report *r, int64_t i) { return i >= 0 && i < r->n_rows ? &r->rows[i] : NULL; }

const char *validate_report_strdup(validate_report *r, const char *s) { return arena_strdup(r->a, s); }
