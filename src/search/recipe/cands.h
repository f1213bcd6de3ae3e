/* Candidate value lists shared by the enumerating searches (search layer): a small ordered set of integers in
 * the order values were added (the usual choice first, so that ties go to it), and the divisors of a count.
 * Internal header: not installed, not part of the public API. */
#ifndef AP_SEARCH_CANDS_H
#define AP_SEARCH_CANDS_H

#include <stdint.h>

/* Values one list may hold: more divisors than any batch or device count the planner sees has (numbers below
 * 2^40 have at most 6,720 divisors, but batch and device counts here stay below 2^23, with at most 512). */
enum { CANDS_MAX = 512 };

typedef struct {
  int64_t v[CANDS_MAX];
  int n;
} cands;

/* Appends v unless it is already listed (or the list is full). */
static inline void cands_add(cands *l, int64_t v) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] == v) return;
  if (l->n < CANDS_MAX) l->v[l->n++] = v;
}

/* The divisors of x >= 1 in increasing order. */
static inline void cands_divisors(int64_t x, cands *out) {
  out->n = 0;
  cands high = {.n = 0};
  for (int64_t d = 1; d * d <= x; d++)
    if (x % d == 0) {
      cands_add(out, d);
      if (d != x / d) cands_add(&high, x / d);
    }
  for (int i = high.n - 1; i >= 0; i--) cands_add(out, high.v[i]);
}

#endif
