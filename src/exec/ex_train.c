/* The executor's optimizer and data (exec layer; declared in exec.h): PyTorch's AdamW over a range of the flat
 * parameter buffer, so that a ZeRO rank updates its shard with the same arithmetic as one process updates the
 * whole, and the token stream: a flat little-endian token file (nanoGPT's train.bin is uint16) read from the
 * start again past its end, or a seeded synthetic stream (docs/executor.md "Data"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"

void ex_adamw_step(const ex_model *m, const ex_adamw *o, int64_t t, float *w, const float *g, float *mom, float *var,
                   int64_t lo, int64_t hi) {
  double bc1 = 1.0 - pow(o->beta1, (double)t), bc2 = 1.0 - pow(o->beta2, (double)t);
  float step = (float)(o->lr / bc1), bc2_sqrt = (float)sqrt(bc2);
  float b1 = (float)o->beta1, b2 = (float)o->beta2, eps = (float)o->eps;
  for (int i = 0; i < m->n_t; i++) {
    const ex_tensor *tn = &m->t[i];
    int64_t a = tn->off > lo ? tn->off : lo, b = tn->off + tn->n < hi ? tn->off + tn->n : hi;
    float decay = tn->decay ? (float)(1.0 - o->lr * o->weight_decay) : 1.0f;
    for (int64_t k = a; k < b; k++) {
      w[k] *= decay;
      float *mk = &mom[k - lo], *vk = &var[k - lo];
      *mk = b1 * *mk + (1.0f - b1) * g[k];
      *vk = b2 * *vk + (1.0f - b2) * g[k] * g[k];
      float denom = sqrtf(*vk) / bc2_sqrt + eps;
      w[k] -= step * *mk / denom;
    }
  }
}

ap_status ex_data_open(ap_ctx *ctx, const char *path, int width, int64_t vocab, ex_data *out) {
  memset(out, 0, sizeof *out);
  out->vocab = vocab;
  char *bytes = NULL;
  size_t n = 0;
  ap_status st = util_read_file(ctx, path, &bytes, &n);
  if (st) return st;
  if (n % (size_t)width || n < 2 * (size_t)width) {
    free(bytes);
    return ctx_fail(ctx, AP_INVALID, "%s: %zu bytes is not a whole number (>= 2) of uint%d tokens", path, n, 8 * width);
  }
  out->n = (int64_t)(n / (size_t)width);
  out->tok = malloc((size_t)out->n * sizeof *out->tok);
  if (!out->tok) {
    free(bytes);
    return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", path);
  }
  const uint8_t *p = (const uint8_t *)bytes;
  for (int64_t i = 0; i < out->n; i++) {
    uint32_t v = width == 2 ? (uint32_t)(p[2 * i] | p[2 * i + 1] << 8)
                            : (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                                  (uint32_t)p[4 * i + 3] << 24;
    if (v >= (uint64_t)vocab) {
      free(bytes);
      ex_data_free(out);
      return ctx_fail(ctx, AP_INVALID, "%s: token %lld is %u, outside the model's vocabulary of %lld", path, (long long)i,
                      v, (long long)vocab);
    }
    out->tok[i] = v;
  }
  free(bytes);
  return AP_OK;
}

void ex_data_synthetic(uint64_t seed, int64_t vocab, ex_data *out) {
  memset(out, 0, sizeof *out);
  out->seed = seed;
  out->vocab = vocab;
}

void ex_data_free(ex_data *d) {
  free(d->tok);
  d->tok = NULL;
}

int32_t ex_data_token(const ex_data *d, int64_t k) {
  if (d->tok) return (int32_t)d->tok[k % d->n];
  /* Synthetic: token k is splitmix64 of (seed · 2⁶⁴/φ-step) + k, modulo the vocabulary. */
  uint64_t s = d->seed * 0xD1B54A32D192ED03ull + (uint64_t)k;
  return (int32_t)(ex_splitmix64(&s) % (uint64_t)d->vocab);
}

void ex_data_batch(const ex_data *d, int64_t t, int64_t gbs, int64_t j, int64_t seq, int32_t *in, int32_t *labels) {
  int64_t o = (t * gbs + j) * seq;
  for (int64_t i = 0; i < seq; i++) {
    in[i] = ex_data_token(d, o + i);
    labels[i] = ex_data_token(d, o + i + 1);
  }
}
