/* The reference training executor (exec layer, the optional build part "exec", mk/exec.mk): a decoder-only
 * transformer of the Llama family (RMSNorm, rotary attention with grouped KV heads, SwiGLU, optionally a
 * top-k MoE MLP in Mixtral's layout) or of the GPT-2 family (LayerNorm, learned positions, tanh GELU), in
 * fp32 on OpenBLAS, forward and backward by hand, mean token cross entropy and PyTorch's AdamW. The rank
 * program bin/autopar-rank (rank.c) runs it under MPI following a plan; `autopar run` (src/cli/cmd_run.c)
 * launches that program through mpirun. docs/executor.md documents the numerics, the initialisation, the data
 * stream and which plan kinds are proven equal to one process.
 *
 * Parameters live in one flat fp32 buffer in a fixed order (ex_model_build); each tensor is in Hugging Face's
 * [out, in] layout, so y = x·Wᵀ. Where HF stores separate projections that one GEMM computes (Llama's q, k, v;
 * gate and up), they are consecutive in the buffer and form one [Σout, in] matrix.
 * Internal header: not installed, not part of the public API. */
#ifndef AP_EXEC_H
#define AP_EXEC_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"
#include "model/transformer.h"

typedef enum { EX_LLAMA, EX_GPT2 } ex_family;

enum { EX_MAX_LAYERS = 256, EX_MAX_EXPERTS = 64, EX_NAME_MAX = 96 };

typedef struct {
  ex_family family;
  int64_t V, H, L, nh, nkv, hd, F, P; /* vocab, hidden, layers, heads, KV heads, head dim, MLP width, positions */
  int64_t E, K;                       /* routed experts (0 = dense) and experts per token */
  bool tied;
  float eps;
  double rope_theta;
} ex_cfg;

/* One parameter tensor: its HF name, its shape in the buffer ([out, in] for matrices), where it starts in the flat buffer, and
 * whether AdamW decays it (tensors of 2+ dimensions). conv1d: HF stores it [in, out] (GPT-2's Conv1D);
 * the buffer holds the transpose. */
typedef struct {
  char name[EX_NAME_MAX];
  int n_dims;
  int64_t shape[2];
  int64_t off, n;
  bool decay, conv1d;
  int layer; /* -1 for the embedding, positions, final norm and head */
} ex_tensor;

/* Offsets into the flat buffer of one layer's tensors (-1 when absent). qkv: [(nh+2·nkv)·hd, H]; up: Llama's
 * [gate; up] [2F, H] or GPT-2's c_fc [F, H]; down [H, F]. Experts: e13 [2F, H] and e2 [H, F] per expert. */
typedef struct {
  int64_t n1w, n1b, qkv, bqkv, o, bo, n2w, n2b, up, bup, down, bdown, router;
  int64_t e13[EX_MAX_EXPERTS], e2[EX_MAX_EXPERTS];
} ex_layer_w;

typedef struct {
  ex_cfg c;
  ex_tensor *t;
  int n_t;
  int64_t n_params;
  ex_layer_w lw[EX_MAX_LAYERS];
  int64_t emb, pos, nfw, nfb, head; /* head == emb when tied */
} ex_model;

/* ---- The model (ex_model.c) ---- */
/* Reads the model spec (a preset name or an HF config path, resolved as ap_model_load does) into a config;
 * AP_UNSUPPORTED names the field when the model is outside the Llama and GPT-2 families. */
AP_HIDDEN ap_status ex_cfg_load(ap_ctx *ctx, const char *spec, ex_cfg *out);
/* Lays out the parameter table; the caller frees m with ex_model_free. */
AP_HIDDEN ap_status ex_model_build(ap_ctx *ctx, const ex_cfg *c, ex_model *m);
AP_HIDDEN void ex_model_free(ex_model *m);
/* The documented seeded initialisation (docs/executor.md "Initialisation") into w (n_params floats). */
AP_HIDDEN void ex_init(const ex_model *m, uint64_t seed, float *w);
/* Loads w from a safetensors file with HF names; every parameter must be present with its HF shape. */
AP_HIDDEN ap_status ex_load(ap_ctx *ctx, const ex_model *m, const char *path, float *w);
/* Writes w with HF names (a tied head once). */
AP_HIDDEN ap_status ex_save(ap_ctx *ctx, const ex_model *m, const char *path, const float *w);

/* ---- Forward and backward (ex_layer.c, ex_moe.c) ---- */
/* What a layer keeps for its backward. Which buffers stay between forward and backward is the recompute
 * policy's business (ex_recompute); the numbers are the same either way. */
typedef enum { EX_RC_NONE, EX_RC_SELECTIVE, EX_RC_OP, EX_RC_FULL } ex_recompute;

typedef struct ex_act ex_act; /* one layer's saved activations for one micro-batch */

/* Tensor parallelism of a layer (Shoeybi et al. 2019 §3, Megatron-LM's ColumnParallelLinear/RowParallelLinear):
 * rank `rank` of `size` holds heads [rank·nh/size, …) and KV heads likewise (q, k, v and the MLP's first matmul
 * split by output rows, the attention output and the MLP's last matmul by input columns). Without sequence
 * parallelism a layer's input and output are whole on every rank and the row-parallel outputs are all-reduced;
 * with it (Korthikanti et al. 2022 §4.2.2) they are this rank's slice of every sequence, positions
 * [rank·S/size, …), all-gathered before the column-parallel matmuls and reduce-scattered after the row-parallel
 * ones. The communication is the host's (callbacks), so this layer links no MPI. g_repl receives the gradients
 * of the parameters every rank computes whole (norms and row-parallel biases without sequence parallelism), so
 * that the host can keep one copy; NULL means g. A NULL ex_tp is one rank. */
typedef struct {
  int rank, size;
  bool sp;
  void *user;
  void (*all_reduce)(void *user, float *buf, int64_t n);
  void (*all_gather_seq)(void *user, const float *loc, float *full, int64_t B, int64_t S, int64_t H);
  void (*reduce_scatter_seq)(void *user, const float *full, float *loc, int64_t B, int64_t S, int64_t H);
  float *g_repl;
  /* Expert tensor parallelism 1 under tp > 1 (etp = 1): the MoE MLP runs whole experts on the rank's own rows. */
  bool expert_whole;
  /* Expert tensor parallelism 1 < etp < tp (etp_size ranks, this one etp_rank; ex_moe.c): the MoE MLP gathers the
   * rows of its etp group and runs its 1/etp share of every expert's width over them. etp_gather puts every
   * group rank's n floats into full in rank order; etp_all_reduce sums n floats over the group; etp_reduce_scatter
   * sums the group's full [etp·n] and returns this rank's n. etp_size 0 or 1: not this mode. */
  int etp_rank, etp_size;
  void (*etp_gather)(void *user, const float *loc, float *full, int64_t n);
  void (*etp_all_reduce)(void *user, float *buf, int64_t n);
  void (*etp_reduce_scatter)(void *user, const float *full, float *loc, int64_t n);
  /* Expert parallelism (ex_moe.c): this rank's place in its ep group (size 0 or 1: none) and the all-to-alls:
   * ep_counts sends n int64 to every rank and receives n from each; ep_rows sends send_rows[d] rows of H floats
   * to rank d and receives recv_rows[s] from rank s, both in rank order. */
  int ep_rank, ep_size;
  /* Context parallelism (all-gather form): this rank's S local positions of each sequence are cp_pos[0 … S-1]
   * of the cp_size·S; cp_gather puts every rank's [B, S, W] rows into position order [B, cp_size·S, W];
   * cp_reduce_scatter sums such a whole-sequence tensor over the group and returns this rank's rows. */
  int cp_rank, cp_size;
  const int64_t *cp_pos;
  void (*cp_gather)(void *user, const float *loc, float *full, int64_t B, int64_t S, int64_t W);
  void (*cp_reduce_scatter)(void *user, const float *full, float *loc, int64_t B, int64_t S, int64_t W);
  void (*ep_counts)(void *user, const int64_t *send, int64_t *recv, int64_t n);
  void (*ep_rows)(void *user, const float *send, const int64_t *send_rows, float *recv, const int64_t *recv_rows,
                  int64_t H);
} ex_tp;

/* x in, y out: [B·S, H], or this rank's [B·S/size, H] under sequence parallelism; positions 0 … S-1 within each
 * of the B sequences. Returns NULL on out of memory. */
AP_HIDDEN ex_act *ex_layer_fwd(const ex_model *m, int layer, const float *w, const float *x, float *y, int64_t B,
                               int64_t S, ex_recompute rc, const ex_tp *tp);
/* dy in; dx out (may alias dy); accumulates the layer's parameter gradients into g. Frees a. Returns false
 * on out of memory. */
AP_HIDDEN bool ex_layer_bwd(const ex_model *m, const float *w, float *g, ex_act *a, const float *dy, float *dx);
/* The backward split in two, as the zero-bubble schedules run it (Qi et al. 2024 §2): the input gradient and
 * the norms' and biases' gradients now, keeping a; then the weight-gradient GEMMs, which frees a. Their sum is
 * ex_layer_bwd's. */
AP_HIDDEN bool ex_layer_bwd_input(const ex_model *m, const float *w, float *g, ex_act *a, const float *dy, float *dx);
AP_HIDDEN void ex_layer_bwd_weight(ex_act *a);
AP_HIDDEN void ex_act_free(ex_act *a);
/* Bytes a holds now. */
AP_HIDDEN size_t ex_act_bytes(const ex_act *a);

/* Embedding: x[t] = emb[tok[t]] (+ pos[s] for GPT-2). Its backward accumulates dx into g. */
AP_HIDDEN void ex_embed_fwd(const ex_model *m, const float *w, const int32_t *tok, int64_t B, int64_t S, float *x);
AP_HIDDEN void ex_embed_bwd(const ex_model *m, float *g, const int32_t *tok, int64_t B, int64_t S, const float *dx);
/* Final norm, head and cross entropy against labels: returns the sum of the token losses, and writes dx, the
 * gradient of (that sum · scale) with respect to x, accumulating the head's and norm's gradients into g.
 * fused: the logits' gradient overwrites the logits in place (one [T, V] buffer instead of two). */
AP_HIDDEN double ex_head_loss(const ex_model *m, const float *w, float *g, const float *x, const int32_t *labels,
                              int64_t T, double scale, bool fused, float *dx);

/* One micro-batch of B sequences of S tokens through the whole model (ex_step.c): returns the sum of its token
 * losses (-1 on out of memory) and accumulates the gradient of (that sum · scale) into g. */
AP_HIDDEN double ex_fwd_bwd(const ex_model *m, const float *w, float *g, const int32_t *in, const int32_t *labels,
                            int64_t B, int64_t S, double scale, ex_recompute rc, bool fused);

/* ---- Optimizer and data (ex_train.c) ---- */
typedef struct {
  double lr, beta1, beta2, eps, weight_decay;
} ex_adamw;
/* torch.optim.AdamW (torch/optim/adamw.py, _single_tensor_adamw at v2.3): p ← p·(1 − lr·wd);
 * m ← β1·m + (1−β1)·g; v ← β2·v + (1−β2)·g²; p ← p − lr/(1−β1ᵗ) · m / (√v/√(1−β2ᵗ) + eps). Over elements
 * [lo, hi) of the flat buffer (w and g indexed absolutely; mom and var hold the hi − lo states of those
 * elements); decay per element from the tensor table; step t counts from 1. */
AP_HIDDEN void ex_adamw_step(const ex_model *m, const ex_adamw *o, int64_t t, float *w, const float *g, float *mom,
                             float *var, int64_t lo, int64_t hi);

typedef struct {
  uint32_t *tok; /* NULL: the synthetic stream */
  int64_t n;
  uint64_t seed;
  int64_t vocab;
} ex_data;
/* Reads a flat little-endian token file of uint16 (width 2) or uint32 (width 4); every token must be < vocab. */
AP_HIDDEN ap_status ex_data_open(ap_ctx *ctx, const char *path, int width, int64_t vocab, ex_data *out);
AP_HIDDEN void ex_data_synthetic(uint64_t seed, int64_t vocab, ex_data *out);
AP_HIDDEN void ex_data_free(ex_data *d);
/* Token k of the stream (the file read from the start again past its end). */
AP_HIDDEN int32_t ex_data_token(const ex_data *d, int64_t k);
/* Sequence j of step t (0-based) with seq tokens: inputs tokens[o … o+seq−1], labels tokens[o+1 … o+seq],
 * o = (t·gbs + j)·seq. */
AP_HIDDEN void ex_data_batch(const ex_data *d, int64_t t, int64_t gbs, int64_t j, int64_t seq, int32_t *in,
                             int32_t *labels);

/* A 64-bit mixing step (splitmix64, Steele et al. 2014, "Fast splittable pseudorandom number generators"). */
AP_HIDDEN uint64_t ex_splitmix64(uint64_t *state);

#endif
