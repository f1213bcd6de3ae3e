/* The executor's own non-GEMM kernels, timed for `autopar profile` (exec layer, rank program; called by
 * rank_prof.c): what the cost model of the stack `autopar` on a CPU device (src/cost/exec_cpu.c) needs besides
 * the GEMM table and the collectives' alpha-beta fits. Each kernel is the executor's real function (ex_ops.c,
 * ex_train.c), run by every rank at once as a training step runs them (one OpenBLAS thread each), timed as the
 * slowest rank's median of the repetitions in the thread's CPU time (rk_thread_cpu_s), and reported per unit of
 * work:
 *  - RMSNorm forward and backward, per element of [T, H]; SwiGLU and the tanh GELU forward and backward, per
 *    element of their output; rotate-half RoPE, per rotated element of q and k;
 *  - causal attention (the executor's per-head GEMMs and softmax, probabilities kept), forward and backward, per
 *    head·query·key at head dimension EXEC_ATTN_HD (the only head dimension the sweep uses);
 *  - the cross entropy over the logits (log-sum-exp and its gradient), per logit;
 *  - the AdamW step, per parameter (far above the caches, as a whole model's state is);
 *  - memcpy of a buffer in the caches (the sequence gathers' rearranging and the residual adds), per byte.
 * And the process's resident set (rk_profile_rss_bytes) once OpenBLAS has run a GEMM and MPI has passed small
 * messages of each collective: the base RSS every rank of a run carries besides its own buffers. */
#include <cblas.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "exec/ex_ops.h"
#include "exec/rank.h"

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Which kernel one timing runs; every buffer is set up once. */
typedef enum { K_NORM_F, K_NORM_B, K_SWIGLU_F, K_SWIGLU_B, K_GELU_F, K_GELU_B, K_ROPE, K_ATTN_F, K_ATTN_B, K_XENT,
               K_ADAM, K_COPY } kern;

typedef struct {
  int64_t T, H, F, S, B, nh, nkv, hd, V, n_adam, copy_bytes;
  float *x, *y, *w, *dy, *dx, *gw, *mu, *r, *up, *h, *dup, *qkv, *P, *att, *dqkv, *tmp, *logits, *dlog, *pw, *pg,
      *pm, *pv;
  char *c0, *c1;
  int32_t *labels;
  ex_model am;
  ex_tensor at;
} kbufs;

static void run_kern(kbufs *k, kern which) {
  switch (which) {
  case K_NORM_F: exo_norm_fwd(false, k->T, k->H, 1e-5f, k->x, k->w, NULL, k->y, k->mu, k->r); break;
  case K_NORM_B: exo_norm_bwd(false, k->T, k->H, k->x, k->w, k->mu, k->r, k->dy, k->dx, k->gw, NULL); break;
  case K_SWIGLU_F: exo_swiglu_fwd(k->T, k->F, k->up, k->h); break;
  case K_SWIGLU_B: exo_swiglu_bwd(k->T, k->F, k->up, k->h, k->dup); break;
  case K_GELU_F: exo_gelu_fwd(k->T * k->F, k->up, k->h); break;
  case K_GELU_B: exo_gelu_bwd(k->T * k->F, k->up, k->h, k->dup); break;
  case K_ROPE: exo_rope(k->qkv, (k->nh + 2 * k->nkv) * k->hd, 0, k->nh + k->nkv, k->hd, k->B * k->S, k->S, 1e4, false); break;
  case K_ATTN_F: exo_attn_fwd(k->B, k->S, k->nh, k->nkv, k->hd, k->qkv, k->P, k->att); break;
  case K_ATTN_B: exo_attn_bwd(k->B, k->S, k->nh, k->nkv, k->hd, k->qkv, k->P, k->att, k->dqkv, k->tmp); break;
  case K_XENT: (void)exo_xent(k->T, k->V, k->logits, k->labels, 1e-3, k->dlog); break;
  case K_ADAM: {
    ex_adamw o = {3e-4, 0.9, 0.95, 1e-8, 0.1};
    ex_adamw_step(&k->am, &o, 1, k->pw, k->pg, k->pm, k->pv, 0, k->n_adam);
    break;
  }
  case K_COPY: memcpy(k->c1, k->c0, (size_t)k->copy_bytes); break;
  }
}

/* Seconds of one run of the kernel: reps runs after a warm-up, every rank in step; the slowest rank's median. */
static double time_kern(kbufs *k, kern which, int reps) {
  double t[16];
  if (reps > 16) reps = 16;
  run_kern(k, which);
  for (int i = 0; i < reps; i++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = rk_thread_cpu_s();
    run_kern(k, which);
    t[i] = rk_thread_cpu_s() - t0;
  }
  qsort(t, (size_t)reps, sizeof *t, cmp_d);
  double med = t[reps / 2], worst = 0; /* the median, as rank_prof.c's slowest_median */
  MPI_Allreduce(&med, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

static float *fl(int64_t n, float v) {
  float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
  if (!p) MPI_Abort(MPI_COMM_WORLD, 1);
  for (int64_t i = 0; i < n; i++) p[i] = v + (float)((i * 2654435761u) % 1000) * 1e-4f;
  return p;
}

double rk_thread_cpu_s(void) {
  struct timespec ts;
  return clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0 ? (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec : 0.0;
}

/* The resident set of this process now, bytes (/proc/self/statm's second field). */
double rk_profile_rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages_total = 0, pages_res = 0;
  if (f) {
    if (fscanf(f, "%ld %ld", &pages_total, &pages_res) != 2) pages_res = 0;
    fclose(f);
  }
  return (double)pages_res * (double)sysconf(_SC_PAGESIZE);
}

double rk_profile_base_rss(void) {
  /* OpenBLAS allocates its work buffers at the first GEMM; a training step's GEMMs are of this order. */
  int64_t n = 512;
  float *a = fl(n * n, 0.1f), *b = fl(n * n, 0.2f), *c = fl(n * n, 0.0f);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)n, (int)n, 1.0f, a, (int)n, b, (int)n, 0.0f, c, (int)n);
  free(a);
  free(b);
  free(c);
  /* MPI's shared-memory queues, as a run's first collectives and sends touch them (small messages: no heap
   * buffer of this profile stays behind to be counted) */
  static float sb[4096], rb[4096];
  int n_ranks = 1, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n_ranks);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  int part = 4096 / n_ranks;
  MPI_Allreduce(sb, rb, 4096, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allgather(sb, part, MPI_FLOAT, rb, part, MPI_FLOAT, MPI_COMM_WORLD);
  MPI_Alltoall(sb, part, MPI_FLOAT, rb, part, MPI_FLOAT, MPI_COMM_WORLD);
  if ((me ^ 1) < n_ranks)
    MPI_Sendrecv(sb, 4096, MPI_FLOAT, me ^ 1, 3, rb, 4096, MPI_FLOAT, me ^ 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  return rk_profile_rss_bytes();
}

void rk_profile_kernels(bool quick, rk_kernels *out) {
  kbufs k = {.T = 512, .H = 256, .F = 688, .S = 128, .B = 2, .nh = 4, .nkv = 2, .hd = EXEC_ATTN_HD, .V = 2048,
             .n_adam = quick ? 1 << 20 : 4 << 20, .copy_bytes = 256 << 10};
  int64_t D = (k.nh + 2 * k.nkv) * k.hd, TF = k.T * k.F;
  k.x = fl(k.T * k.H, 0.3f), k.y = fl(k.T * k.H, 0), k.w = fl(k.H, 1), k.dy = fl(k.T * k.H, 0.01f);
  k.dx = fl(k.T * k.H, 0), k.gw = fl(k.H, 0), k.mu = fl(k.T, 0), k.r = fl(k.T, 1);
  k.up = fl(2 * TF, 0.2f), k.h = fl(TF, 0.1f), k.dup = fl(2 * TF, 0);
  k.qkv = fl(k.B * k.S * D, 0.1f), k.P = fl(k.B * k.nh * k.S * k.S, 0), k.att = fl(k.B * k.S * k.nh * k.hd, 0.01f);
  k.dqkv = fl(k.B * k.S * D, 0), k.tmp = fl(k.S * k.S, 0);
  k.logits = fl(k.T * k.V, 0.1f), k.dlog = fl(k.T * k.V, 0);
  k.labels = malloc((size_t)k.T * sizeof *k.labels);
  k.pw = fl(k.n_adam, 0.1f), k.pg = fl(k.n_adam, 0.01f), k.pm = fl(k.n_adam, 0), k.pv = fl(k.n_adam, 0);
  /* Source and destination in one block, the destination 2 KiB past a page boundary from the source's offset:
   * two blocks malloc'd one after the other lie (size + 16) bytes apart, and on this machine (AMD EPYC, glibc's
   * rep-movsb memcpy) a copy whose destination is 16 bytes past the source modulo 4096 runs 10x slower
   * (bench/exec_effects.py H: 90 us against 8.5 us for 256 KiB), which the executor's copies between
   * separately allocated buffers rarely meet. */
  k.c0 = malloc((size_t)(2 * k.copy_bytes + 8192)), k.c1 = k.c0 ? k.c0 + k.copy_bytes + 4096 + 2048 : NULL;
  if (!k.labels || !k.c0) MPI_Abort(MPI_COMM_WORLD, 1);
  for (int64_t i = 0; i < k.T; i++) k.labels[i] = (int32_t)((i * 7) % k.V);
  memset(k.c0, 1, (size_t)k.copy_bytes);
  memset(k.c1, 0, (size_t)k.copy_bytes);
  k.at = (ex_tensor){.off = 0, .n = k.n_adam, .decay = true};
  k.am.t = &k.at;
  k.am.n_t = 1;
  int reps = quick ? 3 : 9;
  double th = (double)(k.T * k.H), tf = (double)TF, hq = (double)(k.B * k.nh * k.S * k.S);
  out->norm_fwd_s = time_kern(&k, K_NORM_F, reps) / th;
  out->norm_bwd_s = time_kern(&k, K_NORM_B, reps) / th;
  out->swiglu_fwd_s = time_kern(&k, K_SWIGLU_F, reps) / tf;
  out->swiglu_bwd_s = time_kern(&k, K_SWIGLU_B, reps) / tf;
  out->gelu_fwd_s = time_kern(&k, K_GELU_F, reps) / tf;
  out->gelu_bwd_s = time_kern(&k, K_GELU_B, reps) / tf;
  out->rope_s = time_kern(&k, K_ROPE, reps) / (double)(k.B * k.S * (k.nh + k.nkv) * k.hd);
  out->attn_fwd_s = time_kern(&k, K_ATTN_F, reps) / hq;
  out->attn_bwd_s = time_kern(&k, K_ATTN_B, reps) / hq;
  out->xent_s = time_kern(&k, K_XENT, reps) / (double)(k.T * k.V);
  out->adam_s = time_kern(&k, K_ADAM, quick ? 3 : 5) / (double)k.n_adam;
  out->copy_s = time_kern(&k, K_COPY, reps) / (double)k.copy_bytes;
  float *all[] = {k.x, k.y, k.w, k.dy, k.dx, k.gw, k.mu, k.r, k.up, k.h, k.dup, k.qkv, k.P, k.att, k.dqkv, k.tmp,
                  k.logits, k.dlog, k.pw, k.pg, k.pm, k.pv};
  for (size_t i = 0; i < AP_COUNT(all); i++) free(all[i]);
  free(k.labels);
  free(k.c0);
}
