/* The executor's elementwise and GEMM primitives with their hand-written backward passes (exec layer,
 * ex_ops.c): linear layers over cblas_sgemm, RMSNorm and LayerNorm, rotate-half RoPE, causal softmax
 * attention with grouped KV heads, SiLU and the tanh GELU. Every tensor is row-major fp32; T is the number of
 * token rows. Internal header: not installed, not part of the public API. */
#ifndef AP_EXEC_OPS_H
#define AP_EXEC_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"

/* y[T, out] (leading dimension ldy) = x[T, in] (ldx) · W[out, in]ᵀ (+ b) (beta: 0 overwrites, 1 adds). W's rows
 * are ldw apart (ldw = in for a whole matrix; larger for a block of columns, as a row-parallel slice is). */
AP_HIDDEN void exo_linear(int64_t T, int64_t out, int64_t in, const float *x, int64_t ldx, const float *W, int64_t ldw,
                          const float *b, float *y, int64_t ldy, float beta);
/* Backward of exo_linear: dx (+)= dy·W (beta as above; dx NULL skips), dW += dyᵀ·x (rows ldw apart), db += Σ dy
 * (db NULL skips). */
AP_HIDDEN void exo_linear_bwd(int64_t T, int64_t out, int64_t in, const float *x, int64_t ldx, const float *W,
                              int64_t ldw, const float *dy, int64_t ldy, float *dx, int64_t lddx, float beta, float *dW,
                              float *db);

/* The two halves of exo_linear_bwd, for a backward split into input and weight gradients (zero-bubble
 * schedules): dx (+)= dy·W with db += Σ dy; and dW += dyᵀ·x. */
AP_HIDDEN void exo_linear_fwd_bwd_input(int64_t T, int64_t out, int64_t in, const float *W, int64_t ldw,
                                        const float *dy, int64_t ldy, float *dx, int64_t lddx, float beta, float *db);
AP_HIDDEN void exo_linear_wgrad(int64_t T, int64_t out, int64_t in, const float *x, int64_t ldx, const float *dy,
                                int64_t ldy, float *dW, int64_t ldw);

/* RMSNorm (b NULL; Zhang and Sennrich 2019, transformers LlamaRMSNorm: x·rsqrt(mean(x²)+eps)·w) or LayerNorm
 * (b given; Ba et al. 2016). Saves mean (LayerNorm only) and rstd per row. */
AP_HIDDEN void exo_norm_fwd(bool layernorm, int64_t T, int64_t H, float eps, const float *x, const float *w, const float *b,
                  float *y, float *mu, float *rstd);
/* dx = ∂/∂x (written, not added); gw, gb accumulate. */
AP_HIDDEN void exo_norm_bwd(bool layernorm, int64_t T, int64_t H, const float *x, const float *w, const float *mu,
                  const float *rstd, const float *dy, float *dx, float *gw, float *gb);

/* Rotate-half RoPE (Su et al. 2021; transformers apply_rotary_pos_emb with rotate_half) on n_heads heads of hd
 * at column col of each row of qkv (leading dimension ld), position = row mod S. inverse applies the
 * transpose (the backward). */
AP_HIDDEN void exo_rope(float *qkv, int64_t ld, int64_t col, int64_t n_heads, int64_t hd, int64_t T, int64_t S, double theta,
              bool inverse);

/* Causal attention over B sequences of S tokens: q, k, v are nh, nkv, nkv heads of hd at columns 0, nh·hd,
 * (nh+nkv)·hd of qkv (leading dimension D); head h reads KV head h / (nh/nkv). P[B, nh, S, S] keeps the
 * probabilities; out[T, nh·hd]. */
AP_HIDDEN void exo_attn_fwd(int64_t B, int64_t S, int64_t nh, int64_t nkv, int64_t hd, const float *qkv, float *P, float *out);
/* The backward: dqkv (written) from dout; P as the forward left it; tmp holds S·S floats. */
AP_HIDDEN void exo_attn_bwd(int64_t B, int64_t S, int64_t nh, int64_t nkv, int64_t hd, const float *qkv, const float *P,
                  const float *dout, float *dqkv, float *tmp);

/* Context parallelism's attention (the all-gather form, Llama 3 paper §3.3.2): Sq local queries per sequence at
 * positions qpos[0 … Sq-1] (q: nh heads at column 0 of qkv, leading dimension D) against all Sk keys of the
 * sequence (k then v, nkv heads each, in kv, leading dimension KW = 2·nkv·hd, rows in position order), causal by
 * position. P[B, nh, Sq, Sk]; out[B·Sq, nh·hd]. The backward writes dq (the q columns of dqkv, leading dimension
 * D, the rest untouched) and adds into dkv [B·Sk, KW]; tmp holds Sq·Sk floats. */
AP_HIDDEN void exo_attn_pos_fwd(int64_t B, int64_t Sq, int64_t Sk, const int64_t *qpos, int64_t nh, int64_t nkv,
                                int64_t hd, const float *qkv, int64_t D, const float *kv, float *P, float *out);
AP_HIDDEN void exo_attn_pos_bwd(int64_t B, int64_t Sq, int64_t Sk, const int64_t *qpos, int64_t nh, int64_t nkv,
                                int64_t hd, const float *qkv, int64_t D, const float *kv, const float *P,
                                const float *dout, float *dqkv, float *dkv, float *tmp);
/* exo_rope with row t at position pos[t mod S] instead of t mod S. */
AP_HIDDEN void exo_rope_pos(float *qkv, int64_t ld, int64_t col, int64_t n_heads, int64_t hd, int64_t T, int64_t S,
                            const int64_t *pos, double theta, bool inverse);

/* SwiGLU on up[T, 2F] = [gate | up]: h = silu(gate)·up (Shazeer 2020). */
AP_HIDDEN void exo_swiglu_fwd(int64_t T, int64_t F, const float *up, float *h);
AP_HIDDEN void exo_swiglu_bwd(int64_t T, int64_t F, const float *up, const float *dh, float *dup);
/* GELU, tanh approximation (transformers NewGELUActivation, "gelu_new"; Hendrycks and Gimpel 2016 eq. 2). */
AP_HIDDEN void exo_gelu_fwd(int64_t n, const float *x, float *y);
AP_HIDDEN void exo_gelu_bwd(int64_t n, const float *x, const float *dy, float *dx);

/* Cross entropy of T rows of V logits against labels, summed (log-sum-exp in double); dlog[T, V] receives
 * scale·(softmax − one-hot), and may be logits itself (written over it: the fused loss). */
AP_HIDDEN double exo_xent(int64_t T, int64_t V, const float *logits, const int32_t *labels, double scale, float *dlog);

#endif
