/* A small seeded pseudo-random generator for the randomised searches (core layer): xoshiro256** seeded
 * through splitmix64, both from Blackman and Vigna, "Scrambled Linear Pseudorandom Number Generators", ACM
 * TOMS 47(4), 2021 (reference code at https://prng.di.unimi.it/). One state per search run, so that a run is
 * reproducible from its seed and distinct runs never share state. Not for cryptography. */
#ifndef AP_RNG_H
#define AP_RNG_H

#include <stdint.h>

#include "core/core.h"

typedef struct {
  uint64_t s[4];
} rng;

/* Seeds the state from one 64-bit seed (any value, 0 included). */
AP_HIDDEN void rng_seed(rng *r, uint64_t seed);
/* The next 64 random bits. */
AP_HIDDEN uint64_t rng_u64(rng *r);
/* A double uniform in [0, 1), from the top 53 bits. */
AP_HIDDEN double rng_uniform(rng *r);
/* An integer uniform in [0, n); n must be > 0 (Lemire's nearly-divisionless rejection keeps it unbiased). */
AP_HIDDEN uint64_t rng_below(rng *r, uint64_t n);

#endif
