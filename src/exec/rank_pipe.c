/* One training step of one rank under the plan's pipeline schedule (exec layer, rank program). The rank walks
 * its order of work (ex_sched.c, the shared schedule data of plan/schedule.h): a forward item takes its chunk's input from the embedding (chunk 0) or from
 * the previous chunk's rank, runs the chunk's layers, and sends the output on, or, on the last chunk, computes
 * the loss head and keeps its gradient; a backward item takes the gradient from the next chunk (or the loss),
 * runs the layers' backward, and sends the input gradient back, or, on chunk 0, finishes in the embedding.
 * Activations are sent with MPI_Isend and received with blocking MPI_Recv matched by tag (micro-batch, chunk,
 * direction), so every schedule whose order respects its dependencies runs without deadlock; a chunk whose
 * neighbour lives on the same rank (zb-v's turn) hands over through a local mailbox. With pp = 1 this is the
 * plain gradient-accumulation loop over micro-batches. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/rank.h"
#include "plan/plan.h"

typedef struct {
  int tag;
  float *buf;
} mail;

typedef struct {
  rk_state *s;
  int64_t T, T_act, H, S; /* tokens of a micro-batch; of the activations between chunks (T/tp under SP, T/cp) */
  int64_t S_layer;        /* the sequence length a layer sees: seq, or this rank's seq/cp */
  ex_act ***acts;  /* [mb · n_chunks + chunk] → array of the chunk's layer activations */
  float **dhead;   /* [mb]: the loss head's gradient w.r.t. the last chunk's output */
  MPI_Request *req;
  float **sendbuf;
  int n_req, cap_req;
  mail box[2 * RK_MAX_CHUNKS];
  int n_box;
  int64_t n_chunks;
  bool split; /* the schedule splits backwards into B and W items */
  int32_t *lab_loc; /* context parallel: this rank's labels */
  char *msg;        /* the step's message when an item fails; said: an item wrote it (else the caller's) */
  size_t n_msg;
  bool said;
} step_ctx;

static int tag_of(int64_t mb, int64_t chunk, int dir, int64_t n_chunks) { return (int)((mb * n_chunks + chunk) * 2 + dir); }

/* Sends buf (T·H floats, handed over) to the rank of chunk dst; dir 0 activations, 1 gradients. */
static bool send_to(step_ctx *c, float *buf, int64_t mb, int64_t dst, int dir) {
  int tag = tag_of(mb, dst, dir, c->n_chunks);
  int peer = (int)c->s->p.chunk_rank[dst];
  if (peer == c->s->pp_rank) {
    if (c->n_box == (int)AP_COUNT(c->box)) return false;
    c->box[c->n_box++] = (mail){tag, buf};
    return true;
  }
  if (c->n_req == c->cap_req) {
    int cap = c->cap_req ? 2 * c->cap_req : 16;
    MPI_Request *r = realloc(c->req, (size_t)cap * sizeof *r);
    if (r) c->req = r;
    float **b = realloc(c->sendbuf, (size_t)cap * sizeof *b);
    if (b) c->sendbuf = b;
    if (!r || !b) return false;
    c->cap_req = cap;
  }
  c->sendbuf[c->n_req] = buf;
  MPI_Isend(buf, (int)(c->T_act * c->H), MPI_FLOAT, peer, tag, c->s->pp_comm, &c->req[c->n_req]);
  c->n_req++;
  return true;
}

/* Receives the T·H floats for chunk `chunk` (dir as above) from the rank of src; the caller frees them. */
static float *recv_from(step_ctx *c, int64_t mb, int64_t chunk, int64_t src, int dir) {
  int tag = tag_of(mb, chunk, dir, c->n_chunks);
  int peer = (int)c->s->p.chunk_rank[src];
  if (peer == c->s->pp_rank) {
    for (int i = 0; i < c->n_box; i++)
      if (c->box[i].tag == tag) {
        float *b = c->box[i].buf;
        c->box[i] = c->box[--c->n_box];
        return b;
      }
    return NULL; /* the schedule consumed before it produced */
  }
  float *b = malloc((size_t)(c->T * c->H) * sizeof *b); /* room for a whole micro-batch: the forward reuses it */
  double t0 = rk_tally_begin(c->s, c->s->pp_comm, false);
  if (b) MPI_Recv(b, (int)(c->T_act * c->H), MPI_FLOAT, peer, tag, c->s->pp_comm, MPI_STATUS_IGNORE);
  if (b) rk_tally_add(c->s, RK_AT_PIPE, RK_OP_SENDRECV, 4.0 * (double)(c->T_act * c->H), t0);
  return b;
}

/* Under context parallelism: the row of the whole micro-batch [B·seq] that local row i holds. */
static int64_t cp_row(const step_ctx *c, int64_t i) {
  int64_t sl = c->S_layer;
  return (i / sl) * c->S + c->s->cp_pos[i % sl];
}

/* The tokens and labels of micro-batch mb of this data-parallel rank at step t. */
static void tokens(const rk_state *s, int64_t t, int64_t mb, int32_t *in, int32_t *lab) {
  const rk_plan *p = &s->p;
  for (int64_t i = 0; i < p->mbs; i++) {
    int64_t j = (int64_t)s->dp_rank * p->mbs * p->n_mb + mb * p->mbs + i;
    ex_data_batch(&s->data, t, p->gbs, j, p->seq, in + i * p->seq, lab + i * p->seq);
  }
}

/* Under sequence parallelism: this rank's positions of every sequence, from full [B, S, H] into loc. */
static void slice_seq(const rk_state *s, const float *full, float *loc, int64_t B, int64_t S, int64_t H) {
  int64_t t = s->tp.size, Sl = S / t;
  for (int64_t b = 0; b < B; b++)
    memcpy(loc + b * Sl * H, full + (b * S + (int64_t)s->tp_rank * Sl) * H, (size_t)(Sl * H) * sizeof *loc);
}

/* The embedding and the loss head run whole on every tensor-parallel rank (the input replicated, or gathered
 * under sequence parallelism); the gradients of rank 0 are kept, the others' go to scratch. */
static float *whole_grads(const rk_state *s) { return s->tp_rank == 0 ? s->g : s->scratch; }

static bool run_forward(step_ctx *c, int64_t t, int64_t mb, int64_t chunk, int32_t *in, int32_t *lab, double *loss) {
  rk_state *s = c->s;
  const rk_plan *p = &s->p;
  bool sp = s->tp.sp && s->tp.size > 1;
  int64_t n = c->T_act * c->H, nfull = c->T * c->H;
  float *x = chunk == 0 ? malloc((size_t)nfull * sizeof *x) : recv_from(c, mb, chunk, chunk - 1, 0);
  float *y = malloc((size_t)nfull * sizeof *y);
  if (!x || !y) {
    free(x);
    free(y);
    return false;
  }
  if (chunk == 0 || chunk == c->n_chunks - 1) tokens(s, t, mb, in, lab);
  if (chunk == 0) {
    /* The embedding of the whole micro-batch; this rank keeps its context-parallel positions (in the layout's
     * order), then, under sequence parallelism, its tensor-parallel share of each (cp-local) sequence. */
    ex_embed_fwd(&s->m, s->w, in, p->mbs, p->seq, y);
    if (p->cp > 1) {
      int64_t rows = p->mbs * c->S_layer;
      for (int64_t i = 0; i < rows; i++) memcpy(x + i * c->H, y + cp_row(c, i) * c->H, (size_t)c->H * sizeof *x);
      if (sp) {
        memcpy(y, x, (size_t)(rows * c->H) * sizeof *y);
        slice_seq(s, y, x, p->mbs, c->S_layer, c->H);
      }
    } else if (sp) {
      slice_seq(s, y, x, p->mbs, p->seq, c->H);
    } else {
      memcpy(x, y, (size_t)n * sizeof *x);
    }
  }
  int64_t nl = p->chunk_layers[chunk];
  ex_act **acts = calloc((size_t)(nl ? nl : 1), sizeof *acts);
  bool ok = acts != NULL;
  for (int64_t i = 0; i < nl && ok; i++) {
    acts[i] = ex_layer_fwd(&s->m, (int)(s->chunk_l0[chunk] + i), s->w, x, y, p->mbs, c->S_layer, p->rc, &s->tp);
    ok = acts[i] != NULL;
    float *tmp = x;
    x = y;
    y = tmp;
  }
  c->acts[mb * c->n_chunks + chunk] = acts;
  if (ok && chunk == c->n_chunks - 1) {
    double scale = 1.0 / ((double)p->gbs * (double)p->seq);
    float *xf = x, *df = malloc((size_t)nfull * sizeof *df);
    if (sp && df) {
      s->tp.all_gather_seq(s->tp.user, x, y, p->mbs, c->S_layer, c->H);
      xf = y;
    }
    int64_t rows = c->T;
    if (p->cp > 1) { /* this rank's tokens only: their labels, in the layout's order */
      rows = p->mbs * c->S_layer;
      for (int64_t i = 0; i < rows; i++) c->lab_loc[i] = lab[cp_row(c, i)];
    }
    double l = df ? ex_head_loss(&s->m, s->w, whole_grads(s), xf, p->cp > 1 ? c->lab_loc : lab, rows, scale,
                                 p->fused_loss, df)
                  : NAN;
    ok = df != NULL; /* NaN without df: out of memory */
    if (ok && !isfinite(l)) {
      snprintf(c->msg, c->n_msg, "step %lld: the loss of micro-batch %lld is %s: the weights or the gradients are no "
               "longer finite (a learning rate too high for the model, or --init weights out of range)",
               (long long)t + 1, (long long)mb, isnan(l) ? "NaN" : "infinite");
      c->said = true;
      ok = false;
    }
    if (s->tp_rank == 0) *loss += l;
    if (ok && sp) slice_seq(s, df, x, p->mbs, c->S_layer, c->H);
    if (ok && !sp) memcpy(x, df, (size_t)n * sizeof *x);
    free(df);
    c->dhead[mb] = x;
  } else if (ok) {
    ok = send_to(c, x, mb, chunk + 1, 0);
    if (!ok) free(x);
  } else {
    free(x);
  }
  free(y);
  return ok;
}

static bool run_backward(step_ctx *c, int64_t t, int64_t mb, int64_t chunk, int32_t *in, int32_t *lab) {
  rk_state *s = c->s;
  const rk_plan *p = &s->p;
  float *d;
  if (chunk == c->n_chunks - 1) {
    d = c->dhead[mb];
    c->dhead[mb] = NULL;
  } else {
    d = recv_from(c, mb, chunk, chunk + 1, 1);
  }
  ex_act **acts = c->acts[mb * c->n_chunks + chunk];
  bool ok = d && acts;
  int64_t nl = p->chunk_layers[chunk];
  if (c->split) { /* B now, W later (run_weight): the activations stay */
    for (int64_t i = nl - 1; i >= 0 && ok; i--) ok = ex_layer_bwd_input(&s->m, s->w, s->g, acts[i], d, d);
  } else {
    c->acts[mb * c->n_chunks + chunk] = NULL;
    for (int64_t i = nl - 1; i >= 0 && ok; i--) {
      ok = ex_layer_bwd(&s->m, s->w, s->g, acts[i], d, d);
      acts[i] = NULL;
    }
    for (int64_t i = 0; i < nl && acts; i++) ex_act_free(acts[i]);
    free(acts);
  }
  if (!ok) {
    free(d);
    return false;
  }
  if (chunk == 0) {
    tokens(s, t, mb, in, lab);
    bool sp = s->tp.sp && s->tp.size > 1;
    float *df = sp || p->cp > 1 ? calloc((size_t)(c->T * c->H), sizeof *df) : d;
    if (!df) {
      free(d);
      return false;
    }
    if (sp && p->cp > 1) { /* the tensor-parallel shares of this rank's cp-local sequences, then their rows */
      int64_t rows = p->mbs * c->S_layer;
      float *g = malloc((size_t)(rows * c->H) * sizeof *g);
      if (!g) {
        free(df);
        free(d);
        return false;
      }
      s->tp.all_gather_seq(s->tp.user, d, g, p->mbs, c->S_layer, c->H);
      for (int64_t i = 0; i < rows; i++) memcpy(df + cp_row(c, i) * c->H, g + i * c->H, (size_t)c->H * sizeof *df);
      free(g);
    } else if (sp) {
      s->tp.all_gather_seq(s->tp.user, d, df, p->mbs, p->seq, c->H);
    } else if (p->cp > 1) { /* this rank's rows; the others' embedding gradients come from their ranks */
      for (int64_t i = 0; i < c->T_act; i++) memcpy(df + cp_row(c, i) * c->H, d + i * c->H, (size_t)c->H * sizeof *df);
    }
    ex_embed_bwd(&s->m, whole_grads(s), in, p->mbs, p->seq, df);
    if (df != d) free(df);
    free(d);
    return true;
  }
  ok = send_to(c, d, mb, chunk - 1, 1);
  if (!ok) free(d);
  return ok;
}

/* The weight gradients of a split backward. */
static bool run_weight(step_ctx *c, int64_t mb, int64_t chunk) {
  ex_act **acts = c->acts[mb * c->n_chunks + chunk];
  if (!acts) return false;
  c->acts[mb * c->n_chunks + chunk] = NULL;
  for (int64_t i = 0; i < c->s->p.chunk_layers[chunk]; i++) ex_layer_bwd_weight(acts[i]);
  free(acts);
  return true;
}

double rk_pipeline_step(rk_state *s, int64_t t, char *msg, size_t n_msg) {
  const rk_plan *p = &s->p;
  step_ctx c = {0};
  c.s = s;
  c.msg = msg;
  c.n_msg = n_msg;
  c.S = p->seq;
  c.T = p->mbs * p->seq;
  c.T_act = c.T / p->cp / (s->tp.sp && s->tp.size > 1 ? s->tp.size : 1);
  c.S_layer = p->seq / p->cp;
  c.H = s->m.c.H;
  c.n_chunks = p->pp * p->vpp;
  c.split = p->schedule == PLAN_SCHED_ZB_H1 || p->schedule == PLAN_SCHED_ZB_V;
  const rk_item *items = p->order + p->order_first[s->pp_rank];
  int n = p->order_first[s->pp_rank + 1] - p->order_first[s->pp_rank];
  c.acts = calloc((size_t)(p->n_mb * c.n_chunks), sizeof *c.acts);
  c.dhead = calloc((size_t)p->n_mb, sizeof *c.dhead);
  int32_t *in = malloc((size_t)c.T * sizeof *in), *lab = malloc((size_t)c.T * sizeof *lab);
  c.lab_loc = malloc((size_t)c.T * sizeof *c.lab_loc);
  double loss = 0.0;
  bool ok = c.acts && c.dhead && in && lab && c.lab_loc;
  if (!ok) snprintf(msg, n_msg, "out of memory");
  for (int i = 0; i < n && ok; i++) {
    const rk_item *it = &items[i];
    double w0 = MPI_Wtime(), c0 = rk_thread_cpu_s();
    ok = it->kind == RK_F   ? run_forward(&c, t, it->mb, it->chunk, in, lab, &loss)
         : it->kind == RK_B ? run_backward(&c, t, it->mb, it->chunk, in, lab)
                            : run_weight(&c, it->mb, it->chunk);
    int k = it->kind == RK_F ? 0 : it->kind == RK_B ? 1 : 2;
    if (s->tallying) s->pass_s[k] += MPI_Wtime() - w0, s->pass_cpu_s[k] += rk_thread_cpu_s() - c0;
    if (!ok && !c.said)
      snprintf(msg, n_msg, "step %lld: %s of micro-batch %d on chunk %d failed (out of memory or a schedule that "
               "consumes before it produces)", (long long)t + 1,
               it->kind == RK_F ? "forward" : it->kind == RK_B ? "backward" : "weight gradient", it->mb, it->chunk);
  }
  if (c.n_req) MPI_Waitall(c.n_req, c.req, MPI_STATUSES_IGNORE);
  for (int i = 0; i < c.n_req; i++) free(c.sendbuf[i]);
  for (int i = 0; i < c.n_box; i++) free(c.box[i].buf);
  for (int64_t i = 0; c.acts && i < p->n_mb * c.n_chunks; i++) {
    ex_act **acts = c.acts[i];
    int64_t ch = i % c.n_chunks;
    for (int64_t k = 0; acts && k < p->chunk_layers[ch]; k++) ex_act_free(acts[k]);
    free(acts);
  }
  for (int64_t i = 0; c.dhead && i < p->n_mb; i++) free(c.dhead[i]);
  free(c.req);
  free(c.sendbuf);
  free(c.acts);
  free(c.dhead);
  free(in);
  free(lab);
  free(c.lab_loc);
  return ok ? loss : -1.0;
}
