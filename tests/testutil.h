/* Shared test helpers: cmocka, plus asserts that print both values and helpers to load models and check
 * error messages. Tests may reach module internals (DESIGN.md "Who may include whom"). */
#ifndef AP_TESTUTIL_H
#define AP_TESTUTIL_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "autopar.h"

/* Relative closeness with both values printed on failure. */
#define assert_rel_close(got, want, tol)                                                                     \
  do {                                                                                                       \
    double g_ = (double)(got), w_ = (double)(want);                                                          \
    double e_ = fabs(g_ - w_) / (fabs(w_) > 0 ? fabs(w_) : 1.0);                                             \
    if (!(e_ <= (tol))) fail_msg("%s = %.12g, want %.12g (relative error %.3g > %.3g)", #got, g_, w_, e_, (double)(tol)); \
  } while (0)

/* The context's error message contains `needle`. */
#define assert_error_contains(ctx, needle)                                                                   \
  do {                                                                                                       \
    const char *m_ = ap_ctx_error(ctx);                                                                      \
    if (!strstr(m_, (needle))) fail_msg("error \"%s\" does not contain \"%s\"", m_, (needle));               \
  } while (0)

/* The folder of shared reference data (../shared/reference from the repository root), or NULL. */
static inline const char *test_reference_dir(void) {
  static const char *const cands[] = {"../shared/reference", "shared/reference"};
  for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++) {
    char p[256];
    snprintf(p, sizeof p, "%s/models/INDEX.csv", cands[i]);
    FILE *f = fopen(p, "r");
    if (f) {
      fclose(f);
      return cands[i];
    }
  }
  return NULL;
}

#endif
