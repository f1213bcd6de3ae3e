/* A layer's saved activations (exec layer), shared by the dense layer (ex_layer.c) and the MoE MLP (ex_moe.c).
 * Shapes: T = B·S tokens; T_loc = T/size under sequence parallelism, else T; local sizes (nhl, nkvl, Fl) are
 * this tensor-parallel rank's share. Internal header: not installed, not part of the public API. */
#ifndef AP_EXEC_ACT_H
#define AP_EXEC_ACT_H

#include "exec/exec.h"

/* A weight-gradient GEMM put off by a split backward (dW += dyᵀ·x, dW's rows ldw apart): the zero-bubble
 * schedules' W pass (Qi et al. 2024 §2). dy is a copy [T, out]; x stays in the activations until it runs. */
typedef struct {
  int64_t T, out, in, ldx, ldw;
  const float *x;
  float *dy, *dW;
} ex_wrec;

enum { EX_MAX_WREC = 8 };

struct ex_act {
  int layer;
  int64_t B, S, T, T_loc;
  ex_recompute rc;
  ex_tp tp;
  float *x;              /* the input [T_loc, H] (always kept) */
  float *a, *mu1, *r1;   /* Norm1 output [T_loc, H] and its statistics */
  float *a_full;         /* Norm1 output gathered to [T, H] (sequence parallel), else NULL (a is whole) */
  float *qkv, *P, *att;  /* local q, k, v [T, Dl] after RoPE; probabilities [B, nhl, S, S]; [T, nhl·hd] */
  float *kvf;            /* context parallel: k and v of the whole sequence [B·S·cp, 2·nkvl·hd] */
  float *xmid;           /* x + attention [T_loc, H] */
  float *m, *mu2, *r2, *m_full;
  float *up, *hact;      /* dense MLP: first matmul's output [T, 2Fl or Fl], activation [T, Fl] */
  /* MoE: router probabilities [T, E], the chosen experts and weights [T, K]; the routed rows in send order
   * (order: slot t·K + k of each row; yrow: the expert outputs that came back); rows per (rank, local expert)
   * sent and received; per local expert the rows it received and its activations. */
  float *probs, *wt;
  int32_t *sel, *order;
  float *yrow;
  int64_t *cnt_send, *cnt_recv;
  int64_t n_e[EX_MAX_EXPERTS];
  float *x_e[EX_MAX_EXPERTS], *up_e[EX_MAX_EXPERTS], *h_e[EX_MAX_EXPERTS];
  size_t bytes;
  bool defer; /* the backward records weight gradients in wrec instead of computing them */
  ex_wrec wrec[EX_MAX_WREC];
  int n_wrec;
};

/* The MoE MLP (ex_moe.c): out[T, H] from a->m; its backward writes dm[T, H] from dout. */
AP_HIDDEN bool ex_moe_fwd(const ex_model *md, const ex_layer_w *lw, const float *w, ex_act *a, float *out);
AP_HIDDEN bool ex_moe_bwd(const ex_model *md, const ex_layer_w *lw, const float *w, float *g, ex_act *a,
                          const float *dout, float *dm);
/* Frees the MoE tensors of a. */
AP_HIDDEN void ex_moe_free(ex_act *a, const ex_cfg *c);
/* The MoE MLP's rows gathered as its mode needs (ex_moe.c); false when it needs none (full is left alone). */
AP_HIDDEN bool ex_moe_gather(const ex_act *a, int64_t H, const float *loc, float *full);

#endif
