/* xoshiro256** with splitmix64 seeding (core layer); see rng.h for the source. The constants and rotations
 * are those of the published generators (Blackman & Vigna 2021, Sec. 4 and the splitmix64 seeding they
 * recommend); written from the paper's description. */
#include "core/rng.h"

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* splitmix64 (Steele, Lea & Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014): one
 * step, used only to spread a single seed over the four state words. */
static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void rng_seed(rng *r, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

uint64_t rng_u64(rng *r) {
  uint64_t *s = r->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

double rng_uniform(rng *r) { return (double)(rng_u64(r) >> 11) * 0x1.0p-53; }

/* Lemire, "Fast random integer generation in an interval", ACM TOMACS 29(1), 2019, Algorithm 5. */
uint64_t rng_below(rng *r, uint64_t n) {
  unsigned __int128 m = (unsigned __int128)rng_u64(r) * n;
  uint64_t low = (uint64_t)m;
  if (low < n) {
    uint64_t threshold = (0 - n) % n;
    while (low < threshold) {
      m = (unsigned __int128)rng_u64(r) * n;
      low = (uint64_t)m;
    }
  }
  return (uint64_t)(m >> 64);
}
