/* The text of a JSON number (core layer): the shortest decimal, 15 to 17 significant digits, that reads back to
 * the same IEEE 754 double, in printf's %g layout. jx_sb_num (jsonx.c), the one JSON number writer, calls it.
 *
 * Why not snprintf("%.*g") and strtod in a loop: glibc's exact conversion costs about a microsecond per call,
 * and three tries with three strtod per number made `estimate --json` twice as slow as before it wrote full
 * precision. Here whole numbers below 10^15 are written as integers, and otherwise the digits come from one
 * long double product (64-bit significand: 11 bits beyond a double's); each candidate (the value rounded to
 * 15, 16, then 17 digits, ties to even) is accepted when it lies inside the interval of reals that round to x,
 * between the midpoints to x's neighbours. The product and the scaled midpoints carry a relative error of a
 * few 2^-64, under 0.05 in units of the 17th digit; a candidate within MARGIN of an end of the interval is
 * decided by strtod instead, and when no candidate passes (or x is subnormal), printf's exact conversion is
 * tried at 15, 16 and 17 digits. So the text always reads back exactly, and it is never longer than the
 * printf loop's (tests/test_jdoc.c checks both on random doubles). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonx.h"

/* Distance, in units of the last of 17 digits, below which the long double arithmetic cannot tell a candidate
 * inside the interval from one outside (its error is under 0.05 units; twice that, and more, for safety). */
#define MARGIN 0.25L

/* Writes digits (n of them, the first non-zero) times 10^(e10 - n + 1) in %g's layout: fixed notation when
 * -4 <= e10 < n, else d.ddde±XX; trailing zeros of the fraction dropped. */
static void layout(char *out, bool neg, const char *digits, int n, int e10) {
  const int precision = n;
  while (n > 1 && digits[n - 1] == '0') n--;
  char *o = out;
  if (neg) *o++ = '-';
  if (e10 >= -4 && e10 < precision) {
    if (e10 < 0) {
      *o++ = '0';
      *o++ = '.';
      for (int i = -1; i > e10; i--) *o++ = '0';
      memcpy(o, digits, (size_t)n);
      o += n;
    } else {
      for (int i = 0; i <= e10; i++) *o++ = i < n ? digits[i] : '0';
      if (n > e10 + 1) {
        *o++ = '.';
        memcpy(o, digits + e10 + 1, (size_t)(n - e10 - 1));
        o += n - e10 - 1;
      }
    }
    *o = '\0';
  } else {
    *o++ = digits[0];
    if (n > 1) {
      *o++ = '.';
      memcpy(o, digits + 1, (size_t)(n - 1));
      o += n - 1;
    }
    snprintf(o, 16, "e%c%02d", e10 < 0 ? '-' : '+', e10 < 0 ? -e10 : e10);
  }
}

/* Powers of ten exact in long double (5^27 < 2^64); others come from powl. */
static const long double pow10_table[] = {1e0L,  1e1L,  1e2L,  1e3L,  1e4L,  1e5L,  1e6L,  1e7L,  1e8L,  1e9L,
                                          1e10L, 1e11L, 1e12L, 1e13L, 1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L,
                                          1e20L, 1e21L, 1e22L, 1e23L, 1e24L, 1e25L, 1e26L, 1e27L};

static long double pow10l_(int k) {
  if (k >= 0 && k < (int)(sizeof pow10_table / sizeof pow10_table[0])) return pow10_table[k];
  if (k < 0 && -k < (int)(sizeof pow10_table / sizeof pow10_table[0])) return 1 / pow10_table[-k];
  return powl(10.0L, (long double)k);
}

static const uint64_t pow10_u64[] = {1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL,
                                     100000000ULL, 1000000000ULL, 10000000000ULL, 100000000000ULL,
                                     1000000000000ULL, 10000000000000ULL, 100000000000000ULL,
                                     1000000000000000ULL, 10000000000000000ULL, 100000000000000000ULL};

/* The fast path; false when it cannot decide (then the caller formats exactly). */
static bool shortest(double x, char *out) {
  double ax = fabs(x);
  if (!(ax >= DBL_MIN)) return false; /* subnormals: printf */
  int e10 = (int)floor(log10(ax));
  long double scale = pow10l_(16 - e10);
  long double m = (long double)ax * scale;
  if (m >= 1e17L) {
    e10++;
    scale /= 10;
    m = (long double)ax * scale;
  } else if (m < 1e16L) {
    e10--;
    scale *= 10;
    m = (long double)ax * scale;
  }
  /* The interval of reals that round to ax, scaled like m; the midpoints are exact in long double. */
  long double below = nextafter(ax, 0), above = nextafter(ax, INFINITY);
  if (isinf(above)) above = 2 * (long double)ax - below; /* DBL_MAX: reals from its upper midpoint on overflow */
  long double lo = (below + ax) / 2 * scale;
  long double hi = (above + ax) / 2 * scale;
  /* m = q17 + r exactly enough: the integer part and the fraction, so that the roundings below are integer
   * arithmetic (ties to even, as printf rounds). */
  uint64_t q17 = (uint64_t)m;
  long double r = m - (long double)q17;
  for (int n = 15; n <= 17; n++) {
    uint64_t unit = pow10_u64[17 - n];
    uint64_t d = q17 / unit;
    long double rem = (long double)(q17 % unit) + r, half = (long double)unit / 2;
    if (rem > half || (rem == half && (d & 1u))) d++;
    int e = e10;
    if (d >= pow10_u64[n]) { /* rounding carried into a new digit: 9.99… became 10.0… */
      d /= 10;
      e++;
    }
    long double c = (long double)d * (long double)unit * (e > e10 ? 10 : 1);
    bool inside = c > lo + MARGIN && c < hi - MARGIN;
    bool outside = c < lo - MARGIN || c > hi + MARGIN;
    if (outside) continue;
    char digits[24];
    uint64_t v = d;
    for (int i = n - 1; i >= 0; i--, v /= 10) digits[i] = (char)('0' + v % 10);
    layout(out, x < 0, digits, n, e);
    if (inside || strtod(out, NULL) == x) return true;
  }
  return false;
}

void jx_format_double(double x, char out[32]) {
  if (x == 0) {
    snprintf(out, 32, "%s", signbit(x) ? "-0" : "0");
    return;
  }
  /* Whole numbers below 10^15 (byte counts, token counts) are their own shortest text. */
  if (fabs(x) < 1e15 && x == (double)(int64_t)x) {
    char digits[24];
    int n = 0;
    for (uint64_t v = (uint64_t)(x < 0 ? -x : x); v; v /= 10) digits[n++] = (char)('0' + v % 10);
    char *o = out;
    if (x < 0) *o++ = '-';
    while (n) *o++ = digits[--n];
    *o = '\0';
    return;
  }
  if (shortest(x, out)) return;
  /* Subnormals and undecided cases (rare): printf's exact conversion, shortest length first. */
  for (int digits = 15; digits <= 17; digits++) {
    snprintf(out, 32, "%.*g", digits, x);
    if (strtod(out, NULL) == x) return;
  }
}
