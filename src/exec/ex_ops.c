/* The executor's primitives (exec layer; declarations and sources in ex_ops.h): GEMMs through OpenBLAS's
 * cblas_sgemm, norms, RoPE, causal attention and activations, each with its backward derived by hand. The
 * gradient check in tests/test_exec.c holds every one of them against finite differences. */
#include "exec/ex_ops.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#define BI(x) ((blasint)(x))

void exo_linear(int64_t T, int64_t out, int64_t in, const float *x, int64_t ldx, const float *W, int64_t ldw,
                const float *b, float *y, int64_t ldy, float beta) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, BI(T), BI(out), BI(in), 1.0f, x, BI(ldx), W, BI(ldw), beta, y,
              BI(ldy));
  if (b)
    for (int64_t t = 0; t < T; t++)
      for (int64_t o = 0; o < out; o++) y[t * ldy + o] += b[o];
}

void exo_linear_bwd(int64_t T, int64_t out, int64_t in, const float *x, int64_t ldx, const float *W, int64_t ldw,
                    const float *dy, int64_t ldy, float *dx, int64_t lddx, float beta, float *dW, float *db) {
  if (dx)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, BI(T), BI(in), BI(out), 1.0f, dy, BI(ldy), W, BI(ldw), beta, dx,
                BI(lddx));
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, BI(out), BI(in), BI(T), 1.0f, dy, BI(ldy), x, BI(ldx), 1.0f, dW,
              BI(ldw));
  if (db)
    for (int64_t t = 0; t < T; t++)
      for (int64_t o = 0; o < out; o++) db[o] += dy[t * ldy + o];
}

void exo_linear_fwd_bwd_input(int64_t T, int64_t out, int64_t in, const float *W, int64_t ldw, const float *dy,
                              int64_t ldy, float *dx, int64_t lddx, float beta, float *db) {
  if (dx)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, BI(T), BI(in), BI(out), 1.0f, dy, BI(ldy), W, BI(ldw), beta, dx,
                BI(lddx));
  if (db)
    for (int64_t t = 0; t < T; t++)
      for (int64_t o = 0; o < out; o++) db[o] += dy[t * ldy + o];
}

void exo_linear_wgrad(int64_t T, int64_t out, int64_t in, const float *x, int64_t ldx, const float *dy, int64_t ldy,
                      float *dW, int64_t ldw) {
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, BI(out), BI(in), BI(T), 1.0f, dy, BI(ldy), x, BI(ldx), 1.0f, dW,
              BI(ldw));
}

void exo_norm_fwd(bool layernorm, int64_t T, int64_t H, float eps, const float *x, const float *w, const float *b,
                  float *y, float *mu, float *rstd) {
  for (int64_t t = 0; t < T; t++) {
    const float *xr = x + t * H;
    double m = 0.0, v = 0.0;
    if (layernorm) {
      for (int64_t i = 0; i < H; i++) m += xr[i];
      m /= (double)H;
    }
    for (int64_t i = 0; i < H; i++) v += ((double)xr[i] - m) * ((double)xr[i] - m);
    float r = (float)(1.0 / sqrt(v / (double)H + (double)eps));
    if (mu) mu[t] = (float)m;
    rstd[t] = r;
    for (int64_t i = 0; i < H; i++) {
      float xh = (xr[i] - (float)m) * r;
      y[t * H + i] = xh * w[i] + (b ? b[i] : 0.0f);
    }
  }
}

void exo_norm_bwd(bool layernorm, int64_t T, int64_t H, const float *x, const float *w, const float *mu,
                  const float *rstd, const float *dy, float *dx, float *gw, float *gb) {
  for (int64_t t = 0; t < T; t++) {
    const float *xr = x + t * H, *dr = dy + t * H;
    float m = layernorm ? mu[t] : 0.0f, r = rstd[t];
    double s1 = 0.0, s2 = 0.0; /* mean(dŷ) and mean(dŷ·x̂), dŷ = dy·w */
    for (int64_t i = 0; i < H; i++) {
      float xh = (xr[i] - m) * r, g = dr[i] * w[i];
      s1 += g;
      s2 += (double)g * xh;
      gw[i] += dr[i] * xh;
      if (gb) gb[i] += dr[i];
    }
    s1 /= (double)H;
    s2 /= (double)H;
    for (int64_t i = 0; i < H; i++) {
      float xh = (xr[i] - m) * r, g = dr[i] * w[i];
      dx[t * H + i] = r * (g - (layernorm ? (float)s1 : 0.0f) - xh * (float)s2);
    }
  }
}

void exo_rope(float *qkv, int64_t ld, int64_t col, int64_t n_heads, int64_t hd, int64_t T, int64_t S, double theta,
              bool inverse) {
  exo_rope_pos(qkv, ld, col, n_heads, hd, T, S, NULL, theta, inverse);
}

void exo_rope_pos(float *qkv, int64_t ld, int64_t col, int64_t n_heads, int64_t hd, int64_t T, int64_t S,
                  const int64_t *positions, double theta, bool inverse) {
  int64_t half = hd / 2;
  for (int64_t t = 0; t < T; t++) {
    float pos = (float)(positions ? positions[t % S] : t % S);
    for (int64_t i = 0; i < half; i++) {
      /* inv_freq = 1 / θ^(2i/hd) and the angle pos·inv_freq in fp32, as LlamaRotaryEmbedding computes them. */
      float inv = (float)(1.0 / pow(theta, (double)(2 * i) / (double)hd));
      float ang = pos * inv, c = cosf(ang), s = inverse ? -sinf(ang) : sinf(ang);
      for (int64_t h = 0; h < n_heads; h++) {
        float *v = qkv + t * ld + col + h * hd;
        float a = v[i], b = v[i + half];
        v[i] = a * c - b * s;
        v[i + half] = b * c + a * s;
      }
    }
  }
}

void exo_attn_fwd(int64_t B, int64_t S, int64_t nh, int64_t nkv, int64_t hd, const float *qkv, float *P, float *out) {
  int64_t D = (nh + 2 * nkv) * hd, qd = nh * hd, grp = nh / nkv;
  float scale = 1.0f / sqrtf((float)hd);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < nh; h++) {
      const float *q = qkv + b * S * D + h * hd, *k = qkv + b * S * D + qd + (h / grp) * hd, *v = k + nkv * hd;
      float *p = P + (b * nh + h) * S * S;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, BI(S), BI(S), BI(hd), scale, q, BI(D), k, BI(D), 0.0f, p, BI(S));
      for (int64_t i = 0; i < S; i++) {
        float *row = p + i * S, mx = row[0];
        for (int64_t j = 1; j <= i; j++) mx = row[j] > mx ? row[j] : mx;
        double sum = 0.0;
        for (int64_t j = 0; j <= i; j++) {
          row[j] = expf(row[j] - mx);
          sum += row[j];
        }
        for (int64_t j = 0; j <= i; j++) row[j] = (float)(row[j] / sum);
        for (int64_t j = i + 1; j < S; j++) row[j] = 0.0f;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, BI(S), BI(hd), BI(S), 1.0f, p, BI(S), v, BI(D), 0.0f,
                  out + b * S * qd + h * hd, BI(qd));
    }
}

void exo_attn_bwd(int64_t B, int64_t S, int64_t nh, int64_t nkv, int64_t hd, const float *qkv, const float *P,
                  const float *dout, float *dqkv, float *tmp) {
  int64_t D = (nh + 2 * nkv) * hd, qd = nh * hd, grp = nh / nkv;
  float scale = 1.0f / sqrtf((float)hd);
  for (int64_t b = 0; b < B; b++) {
    for (int64_t t = 0; t < S; t++) memset(dqkv + (b * S + t) * D, 0, (size_t)D * sizeof(float));
    for (int64_t h = 0; h < nh; h++) {
      int64_t ko = qd + (h / grp) * hd, vo = ko + nkv * hd;
      const float *q = qkv + b * S * D + h * hd, *k = qkv + b * S * D + ko, *v = qkv + b * S * D + vo;
      const float *p = P + (b * nh + h) * S * S, *dO = dout + b * S * qd + h * hd;
      float *dq = dqkv + b * S * D + h * hd, *dk = dqkv + b * S * D + ko, *dv = dqkv + b * S * D + vo;
      /* dV += Pᵀ·dO; dP = dO·Vᵀ; dS = P ⊙ (dP − rowsum(dP ⊙ P)); dQ = dS·K·scale; dK += dSᵀ·Q·scale. */
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, BI(S), BI(hd), BI(S), 1.0f, p, BI(S), dO, BI(qd), 1.0f, dv, BI(D));
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, BI(S), BI(S), BI(hd), 1.0f, dO, BI(qd), v, BI(D), 0.0f, tmp, BI(S));
      for (int64_t i = 0; i < S; i++) {
        float *row = tmp + i * S;
        const float *pr = p + i * S;
        double dot = 0.0;
        for (int64_t j = 0; j <= i; j++) dot += (double)row[j] * pr[j];
        for (int64_t j = 0; j <= i; j++) row[j] = pr[j] * (row[j] - (float)dot);
        for (int64_t j = i + 1; j < S; j++) row[j] = 0.0f;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, BI(S), BI(hd), BI(S), scale, tmp, BI(S), k, BI(D), 1.0f, dq, BI(D));
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, BI(S), BI(hd), BI(S), scale, tmp, BI(S), q, BI(D), 1.0f, dk, BI(D));
    }
  }
}

void exo_attn_pos_fwd(int64_t B, int64_t Sq, int64_t Sk, const int64_t *qpos, int64_t nh, int64_t nkv, int64_t hd,
                      const float *qkv, int64_t D, const float *kv, float *P, float *out) {
  int64_t KW = 2 * nkv * hd, qd = nh * hd, grp = nh / nkv;
  float scale = 1.0f / sqrtf((float)hd);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < nh; h++) {
      const float *q = qkv + b * Sq * D + h * hd, *k = kv + b * Sk * KW + (h / grp) * hd, *v = k + nkv * hd;
      float *p = P + (b * nh + h) * Sq * Sk;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, BI(Sq), BI(Sk), BI(hd), scale, q, BI(D), k, BI(KW), 0.0f, p,
                  BI(Sk));
      for (int64_t i = 0; i < Sq; i++) {
        float *row = p + i * Sk, mx = row[0];
        int64_t last = qpos[i];
        for (int64_t j = 1; j <= last; j++) mx = row[j] > mx ? row[j] : mx;
        double sum = 0.0;
        for (int64_t j = 0; j <= last; j++) {
          row[j] = expf(row[j] - mx);
          sum += row[j];
        }
        for (int64_t j = 0; j <= last; j++) row[j] = (float)(row[j] / sum);
        for (int64_t j = last + 1; j < Sk; j++) row[j] = 0.0f;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, BI(Sq), BI(hd), BI(Sk), 1.0f, p, BI(Sk), v, BI(KW), 0.0f,
                  out + b * Sq * qd + h * hd, BI(qd));
    }
}

void exo_attn_pos_bwd(int64_t B, int64_t Sq, int64_t Sk, const int64_t *qpos, int64_t nh, int64_t nkv, int64_t hd,
                      const float *qkv, int64_t D, const float *kv, const float *P, const float *dout, float *dqkv,
                      float *dkv, float *tmp) {
  int64_t KW = 2 * nkv * hd, qd = nh * hd, grp = nh / nkv;
  float scale = 1.0f / sqrtf((float)hd);
  for (int64_t b = 0; b < B; b++) {
    for (int64_t t = 0; t < Sq; t++) memset(dqkv + (b * Sq + t) * D, 0, (size_t)qd * sizeof(float));
    for (int64_t h = 0; h < nh; h++) {
      int64_t ko = (h / grp) * hd;
      const float *q = qkv + b * Sq * D + h * hd, *k = kv + b * Sk * KW + ko, *v = k + nkv * hd;
      const float *p = P + (b * nh + h) * Sq * Sk, *dO = dout + b * Sq * qd + h * hd;
      float *dq = dqkv + b * Sq * D + h * hd, *dk = dkv + b * Sk * KW + ko, *dv = dk + nkv * hd;
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, BI(Sk), BI(hd), BI(Sq), 1.0f, p, BI(Sk), dO, BI(qd), 1.0f, dv,
                  BI(KW));
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, BI(Sq), BI(Sk), BI(hd), 1.0f, dO, BI(qd), v, BI(KW), 0.0f, tmp,
                  BI(Sk));
      for (int64_t i = 0; i < Sq; i++) {
        float *row = tmp + i * Sk;
        const float *pr = p + i * Sk;
        double dot = 0.0;
        for (int64_t j = 0; j <= qpos[i]; j++) dot += (double)row[j] * pr[j];
        for (int64_t j = 0; j <= qpos[i]; j++) row[j] = pr[j] * (row[j] - (float)dot);
        for (int64_t j = qpos[i] + 1; j < Sk; j++) row[j] = 0.0f;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, BI(Sq), BI(hd), BI(Sk), scale, tmp, BI(Sk), k, BI(KW), 1.0f,
                  dq, BI(D));
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, BI(Sk), BI(hd), BI(Sq), scale, tmp, BI(Sk), q, BI(D), 1.0f, dk,
                  BI(KW));
    }
  }
}

static float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

void exo_swiglu_fwd(int64_t T, int64_t F, const float *up, float *h) {
  for (int64_t t = 0; t < T; t++)
    for (int64_t i = 0; i < F; i++) {
      float g = up[t * 2 * F + i], u = up[t * 2 * F + F + i];
      h[t * F + i] = g * sigmoidf_(g) * u;
    }
}

void exo_swiglu_bwd(int64_t T, int64_t F, const float *up, const float *dh, float *dup) {
  for (int64_t t = 0; t < T; t++)
    for (int64_t i = 0; i < F; i++) {
      float g = up[t * 2 * F + i], u = up[t * 2 * F + F + i], s = sigmoidf_(g), d = dh[t * F + i];
      dup[t * 2 * F + i] = d * u * s * (1.0f + g * (1.0f - s));
      dup[t * 2 * F + F + i] = d * g * s;
    }
}

#define GELU_C 0.7978845608028654f /* √(2/π) */

void exo_gelu_fwd(int64_t n, const float *x, float *y) {
  for (int64_t i = 0; i < n; i++) {
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + tanhf(GELU_C * (v + 0.044715f * v * v * v)));
  }
}

void exo_gelu_bwd(int64_t n, const float *x, const float *dy, float *dx) {
  for (int64_t i = 0; i < n; i++) {
    float v = x[i], th = tanhf(GELU_C * (v + 0.044715f * v * v * v));
    float d = 0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * GELU_C * (1.0f + 3.0f * 0.044715f * v * v);
    dx[i] = dy[i] * d;
  }
}

double exo_xent(int64_t T, int64_t V, const float *logits, const int32_t *labels, double scale, float *dlog) {
  double loss = 0.0;
  for (int64_t t = 0; t < T; t++) {
    const float *l = logits + t * V;
    float mx = l[0];
    for (int64_t v = 1; v < V; v++) mx = l[v] > mx ? l[v] : mx;
    double sum = 0.0;
    for (int64_t v = 0; v < V; v++) sum += exp((double)l[v] - mx);
    double lse = mx + log(sum);
    loss += lse - l[labels[t]];
    /* ∂(scale·CE)/∂logit = scale·(softmax − one-hot); dlog may be logits itself (the fused loss). */
    float *dl = dlog + t * V;
    for (int64_t v = 0; v < V; v++) dl[v] = (float)(scale * exp((double)l[v] - lse));
    dl[labels[t]] -= (float)scale;
  }
  return loss;
}
