/* `autopar-rank --profile OUT.json [--quick]` (exec layer, rank program; launched by `autopar profile`): measures
 * this machine as the executor uses it, every rank at once (one OpenBLAS thread each), and writes a cluster file
 * (docs/formats.md) of world-size CPU devices whose device object carries its profile inline (the
 * autopar-profile/1 format of data/profiles/h200.json, docs/profile-format.md; dtype fp32):
 *  - GEMM y[m, n] = x[m, k]·W[n, k]ᵀ (cblas_sgemm, row-major, W transposed: a linear layer) at the shapes a
 *    transformer layer produces (qkv, attn_out, mlp_up, mlp_down, lm_head for a few hidden sizes and token
 *    counts); time is the slowest rank's median of the repetitions, since a step waits for the slowest rank;
 *  - memory bandwidth: memcpy of a buffer far above the caches, bytes = 2·size (read and write) per copy;
 *  - MPI collectives (all-reduce, all-gather, reduce-scatter, all-to-all, send/recv) for each group size used
 *    (2, 4, … and the world) at 4 KiB … 16 MiB with the caches as a step leaves them (time_coll): the measured
 *    points, which the executor's cost model interpolates, and the alpha-beta fit t = alpha + bytes/bw
 *    (fit_alpha_beta), which the cluster's link level takes.
 * A CPU has no datasheet figure here, so the profile's fp32 "peak" is its fastest measured GEMM and the
 * efficiencies are relative to it (stated in the file's peak_source). The device also states that rate as its
 * bf16 peak, since the executor runs all work in fp32 and the cost model rates some work (attention core,
 * router) and its precision check at bf16; the file's sources say so. The cluster's one link level takes the
 * world group's all-reduce fit as a ring (NCCL's ring: 2(n−1) steps, bus bytes 2(n−1)/n·bytes; NCCL
 * doc/PERFORMANCE.md "busBw"), so the cost model's all-reduce reproduces the measured one. */
#include <cblas.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "exec/rank.h"

enum { N_COLL = 5, MAX_SIZES = 8, MAX_GROUPS = 8 };
static const char *const coll_names[N_COLL] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"};

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median of n timings, then the slowest rank's (every rank calls it). The median, not the least: the
 * executor's iteration time is the median over steps (exec/rank.c), so the profile states the rate a step
 * meets, not the machine's best moment; with the least, 22 of 23 plans of bench/executor.py measured slower
 * than predicted, with the median both signs occur (docs/executor.md, "What separates measured from
 * predicted"). Compute and memcpy are timed in the thread's CPU time (rk_thread_cpu_s), so that a rank
 * preempted by another job is not charged for the wait; the collectives, whose cost is waiting, in wall time. */
static double slowest_median(double *t, int n, MPI_Comm comm) {
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  double med = t[n / 2], worst = 0;
  MPI_Allreduce(&med, &worst, 1, MPI_DOUBLE, MPI_MAX, comm);
  return worst;
}

static void fill(float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) x[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
}

/* One GEMM as the executor calls it: layout nt (forward y = x·Wᵀ), nn (input gradient dy·W) or tn (weight
 * gradient dyᵀ·x), C[m, n] from a k-deep product. */
typedef struct {
  const char *op, *layout;
  int64_t hidden, m, n, k;
} gemm_shape;

static void run_gemm(const gemm_shape *g, const float *a, const float *b, float *c) {
  bool ta = g->layout[0] == 't', tb = g->layout[1] == 't';
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)g->m, (int)g->n,
              (int)g->k, 1.0f, a, ta ? (int)g->m : (int)g->k, b, tb ? (int)g->k : (int)g->n, 0.0f, c, (int)g->n);
}

/* Times one GEMM shape: reps until about budget_s (at least 3), all ranks in step. */
static double time_gemm(const gemm_shape *g, double budget_s, int *reps_out) {
  float *x = malloc((size_t)(g->m * g->k) * sizeof *x), *w = malloc((size_t)(g->n * g->k) * sizeof *w),
        *y = malloc((size_t)(g->m * g->n) * sizeof *y);
  if (!x || !w || !y) {
    fprintf(stderr, "autopar-rank: out of memory for a %lldx%lldx%lld GEMM\n", (long long)g->m, (long long)g->n,
            (long long)g->k);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  fill(x, g->m * g->k);
  fill(w, g->n * g->k);
  double t0 = rk_thread_cpu_s();
  run_gemm(g, x, w, y); /* warm-up and probe */
  double probe = rk_thread_cpu_s() - t0, slow = 0;
  MPI_Allreduce(&probe, &slow, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  int reps = (int)(budget_s / (slow > 1e-6 ? slow : 1e-6));
  if (reps < 5) reps = 5;
  if (reps > 50) reps = 50;
  double t[50];
  for (int r = 0; r < reps; r++) {
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = rk_thread_cpu_s();
    run_gemm(g, x, w, y);
    t[r] = rk_thread_cpu_s() - t0;
  }
  free(x);
  free(w);
  free(y);
  *reps_out = reps;
  return slowest_median(t, reps, MPI_COMM_WORLD);
}

/* One collective of count floats (each rank's full buffer: the gathered result, the scattered input) over comm. */
static void run_coll(int kind, const float *a, float *b, int64_t count, MPI_Comm comm) {
  int me, n;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &n);
  int64_t part = count / n;
  switch (kind) {
  case 0: MPI_Allreduce(a, b, (int)count, MPI_FLOAT, MPI_SUM, comm); break;
  case 1: MPI_Allgather(a, (int)part, MPI_FLOAT, b, (int)part, MPI_FLOAT, comm); break;
  case 2: MPI_Reduce_scatter_block(a, b, (int)part, MPI_FLOAT, MPI_SUM, comm); break;
  case 3: MPI_Alltoall(a, (int)part, MPI_FLOAT, b, (int)part, MPI_FLOAT, comm); break;
  default: /* pairs (0,1), (2,3), …: one message each way, as a pipeline stage boundary sends */
    if ((me ^ 1) < n)
      MPI_Sendrecv(a, (int)count, MPI_FLOAT, me ^ 1, 7, b, (int)count, MPI_FLOAT, me ^ 1, 7, comm, MPI_STATUS_IGNORE);
  }
}

/* One collective of `bytes` (per rank's full buffer) over comm, timed reps times as a training step meets it
 * (the compute-interleaved pattern): before each repetition every rank writes its send buffer, as the kernel
 * that produced it does, and then writes `evict` (a buffer of several times the core's L2 cache, standing for
 * the GEMMs between two collectives of a step), so the collective reads and writes buffers that are not hot in
 * the caches, unlike a loop over one hot buffer (bench/exec_effects.py G: in a step a 1 MiB all-gather or
 * reduce-scatter took 1.5-3x the hot loop's time). The slowest rank's median of the repetitions. */
static double time_coll(int kind, int64_t bytes, MPI_Comm comm, int reps, char *evict, size_t evict_bytes) {
  int64_t count = bytes / 4;
  float *a = calloc((size_t)count + 1, sizeof *a), *b = calloc((size_t)count + 1, sizeof *b);
  if (!a || !b) MPI_Abort(MPI_COMM_WORLD, 1);
  double t[32];
  for (int r = 0; r <= reps; r++) { /* the first is a warm-up */
    for (int64_t i = 0; i < count; i++) a[i] = (float)(i & 1023) * 1e-3f + (float)r;
    memset(evict, r, evict_bytes);
    MPI_Barrier(comm);
    double t0 = MPI_Wtime();
    run_coll(kind, a, b, count, comm);
    if (r) t[r - 1] = MPI_Wtime() - t0;
  }
  free(a);
  free(b);
  return slowest_median(t, reps, comm);
}

/* The in-step time of one collective of `bytes` over comm: what a collective between two of a layer's GEMMs
 * costs (the compute-interleaved pattern). After a barrier every rank runs `reps` times a layer GEMM (the
 * shape g: the executor's q|k|v projection of bench/executor.py's model), writes the send buffer and calls the
 * collective; the time of the sequence less the rank's own GEMM and writing time, per collective, is what the
 * collective took in place, waits for a partner whose GEMM ran longer included (a step's ranks drift apart by
 * their kernels' jitter, and every blocking collective waits for the last); the slowest rank's, the least of
 * `trials` sequences. */
static double time_coll_in_step(int kind, int64_t bytes, MPI_Comm comm, int reps, int trials, const gemm_shape *g,
                                const float *gx, const float *gw, float *gy) {
  int64_t count = bytes / 4;
  float *a = calloc((size_t)count + 1, sizeof *a), *b = calloc((size_t)count + 1, sizeof *b);
  if (!a || !b) MPI_Abort(MPI_COMM_WORLD, 1);
  double best = INFINITY;
  for (int tr = 0; tr <= trials; tr++) { /* the first is a warm-up */
    double own = 0;
    MPI_Barrier(comm);
    double t0 = MPI_Wtime();
    for (int r = 0; r < reps; r++) {
      double c0 = MPI_Wtime();
      run_gemm(g, gx, gw, gy);
      for (int64_t i = 0; i < count; i++) a[i] = gy[i % (g->m * g->n)];
      own += MPI_Wtime() - c0;
      run_coll(kind, a, b, count, comm);
    }
    double mine = (MPI_Wtime() - t0 - own) / reps, worst = 0;
    MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, comm);
    if (tr) best = fmin(best, worst);
  }
  free(a);
  free(b);
  return best;
}

/* t = alpha + beta·bytes from n points (sizes ascending): the bandwidth 1/beta is the best measured throughput
 * bytes/t over the sizes of 64 KiB and more (each point is already the median of its repetitions), alpha the
 * least t − bytes·beta over all sizes, at least 1e-7 s. On a quiet machine this is the usual fit (the largest
 * size's throughput is the bandwidth less alpha's share); on a shared one, where a preempted repetition of a
 * large message takes a time slice, it keeps one slow point from setting the bandwidth. */
static void fit_alpha_beta(const double *bytes, const double *t, int n, double *alpha, double *beta) {
  double bw = 0;
  for (int i = 0; i < n; i++)
    if (bytes[i] >= 65536 || i == n - 1) bw = fmax(bw, bytes[i] / t[i]);
  *beta = 1.0 / bw;
  *alpha = INFINITY;
  for (int i = 0; i < n; i++) *alpha = fmin(*alpha, t[i] - bytes[i] * *beta);
  if (!(*alpha >= 1e-7)) *alpha = 1e-7;
}

int rk_profile_main(int argc, char **argv) {
  const char *out = NULL;
  bool quick = false;
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) quick = true;
    else if (!out) out = argv[i];
  }
  MPI_Init(&argc, &argv);
  int me, world;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (!out) {
    if (me == 0) fprintf(stderr, "autopar-rank: --profile: expected an output path\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  double base_rss = rk_profile_base_rss(), base_rss_max = 0;
  /* GEMM shapes of a layer (Llama-style: q, k, v fused as 3H with full heads; SwiGLU's gate and up fused as 2F
   * with F = 4H; a vocabulary of 2048), each in the three layouts a linear layer's forward, input gradient and
   * weight gradient call (ex_ops.c exo_linear, exo_linear_bwd). */
  static const int64_t hiddens[] = {128, 256, 512}, tokens[] = {128, 512, 1024};
  enum { MAX_SHAPES = 3 * 3 * 5 * 3 };
  static gemm_shape shapes[MAX_SHAPES];
  int ns = 0;
  for (size_t h = 0; h < AP_COUNT(hiddens); h++)
    for (size_t t = 0; t < AP_COUNT(tokens); t++) {
      if (quick && (h != 1 || t != 1)) continue;
      int64_t H = hiddens[h], T = tokens[t], F = 4 * H;
      const struct {
        const char *op;
        int64_t out, in;
      } lin[] = {{"qkv", 3 * H, H}, {"attn_out", H, H}, {"mlp_up", 2 * F, H}, {"mlp_down", H, F}, {"lm_head", 2048, H}};
      for (size_t l = 0; l < AP_COUNT(lin); l++) {
        shapes[ns++] = (gemm_shape){lin[l].op, "nt", H, T, lin[l].out, lin[l].in};
        shapes[ns++] = (gemm_shape){lin[l].op, "nn", H, T, lin[l].in, lin[l].out};
        shapes[ns++] = (gemm_shape){lin[l].op, "tn", H, lin[l].out, lin[l].in, T};
      }
    }
  static double gemm_t[MAX_SHAPES];
  static int gemm_reps[MAX_SHAPES];
  double peak = 0, budget = quick ? 0.005 : 0.02;
  for (int i = 0; i < ns; i++) {
    gemm_t[i] = time_gemm(&shapes[i], budget, &gemm_reps[i]);
    double rate = 2.0 * (double)(shapes[i].m * shapes[i].n * shapes[i].k) / gemm_t[i];
    if (rate > peak) peak = rate;
  }
  rk_kernels kern;
  rk_profile_kernels(quick, &kern);
  /* Memory: 64 MiB copies (far above any L3 of this class of machine), every rank at once. */
  int64_t buf_bytes = quick ? 16 << 20 : 64 << 20;
  char *src = malloc((size_t)buf_bytes), *dst = malloc((size_t)buf_bytes);
  if (!src || !dst) MPI_Abort(MPI_COMM_WORLD, 1);
  memset(src, 1, (size_t)buf_bytes);
  memset(dst, 0, (size_t)buf_bytes);
  double mt[8];
  int mreps = quick ? 3 : 7;
  for (int r = 0; r < mreps; r++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = rk_thread_cpu_s();
    memcpy(dst, src, (size_t)buf_bytes);
    mt[r] = rk_thread_cpu_s() - t0;
    src[r] = dst[buf_bytes - 1 - r]; /* keep the copy observable */
  }
  free(src);
  free(dst);
  double mem_t = slowest_median(mt, mreps, MPI_COMM_WORLD), mem_bw = 2.0 * (double)buf_bytes / mem_t;
  /* Collectives at group sizes 2, 4, … below the world, and the world. */
  int groups[MAX_GROUPS], ng = 0;
  for (int g = 2; g < world && ng < MAX_GROUPS - 1; g *= 2) groups[ng++] = g;
  if (world >= 2) groups[ng++] = world;
  /* Message sizes from a pipeline boundary's or a tensor-parallel gather's (64 KiB-4 MiB) to a whole model's
   * gradient at the step's end (16 MiB: past the caches, where a collective's rate drops 3-4x below its
   * in-cache rate); the cost model interpolates between them (exec_cpu.c coll_s). */
  static const int64_t sizes_full[] = {4096, 65536, 1 << 20, 4 << 20, 16 << 20}, sizes_quick[] = {4096, 1 << 20, 16 << 20};
  const int64_t *sizes = quick ? sizes_quick : sizes_full;
  int nsz = quick ? 3 : 5, creps = quick ? 3 : 7;
  long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  size_t evict_bytes = (size_t)(l2 > 0 ? 4 * l2 : 4 << 20); /* 4x the core's L2 (glibc sysconf; 4 MiB if unknown) */
  char *evict = malloc(evict_bytes);
  if (!evict) MPI_Abort(MPI_COMM_WORLD, 1);
  /* In-step times (time_coll_in_step) at the sizes of a layer's collectives, up to 4 MiB, after a q|k|v GEMM of
   * the GEMM table (hidden 256, 512 tokens: about 3 ms on this machine's cores). */
  const gemm_shape in_g = {"qkv", "nt", 256, 512, 768, 256};
  float *gx = malloc((size_t)(in_g.m * in_g.k) * sizeof *gx), *gw = malloc((size_t)(in_g.n * in_g.k) * sizeof *gw),
        *gy = malloc((size_t)(in_g.m * in_g.n) * sizeof *gy);
  if (!gx || !gw || !gy) MPI_Abort(MPI_COMM_WORLD, 1);
  fill(gx, in_g.m * in_g.k);
  fill(gw, in_g.n * in_g.k);
  int n_in = 0; /* the sizes timed in step: those up to 4 MiB */
  while (n_in < nsz && sizes[n_in] <= (4 << 20)) n_in++;
  static double cin[MAX_GROUPS][N_COLL][MAX_SIZES];
  double ct[MAX_GROUPS][N_COLL][MAX_SIZES], alpha[MAX_GROUPS][N_COLL], beta[MAX_GROUPS][N_COLL];
  for (int gi = 0; gi < ng; gi++) {
    MPI_Comm comm;
    MPI_Comm_split(MPI_COMM_WORLD, me < groups[gi] ? 0 : MPI_UNDEFINED, me, &comm);
    if (comm != MPI_COMM_NULL) {
      for (int c = 0; c < N_COLL; c++) {
        double xb[MAX_SIZES];
        for (int si = 0; si < nsz; si++) {
          ct[gi][c][si] = time_coll(c, sizes[si], comm, creps, evict, evict_bytes);
          if (si < n_in) cin[gi][c][si] = time_coll_in_step(c, sizes[si], comm, quick ? 4 : 8, quick ? 1 : 3, &in_g, gx, gw, gy);
          xb[si] = (double)sizes[si];
        }
        fit_alpha_beta(xb, ct[gi][c], nsz, &alpha[gi][c], &beta[gi][c]);
      }
      MPI_Comm_free(&comm);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  free(evict);
  free(gx);
  free(gw);
  free(gy);
  MPI_Allreduce(&base_rss, &base_rss_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  int rc = 0;
  if (me == 0) {
    strbuf f = {0}; /* the document, written whole through the one writer (util_write_file_atomic) */
    char host[128] = "?", date[32];
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    long long mem_total = pages > 0 && page > 0 ? (long long)pages * page : 1LL << 30;
    /* The link level from the world all-reduce fit, as a ring: time = 2(n−1)·a + 2(n−1)/n · bytes / bw. */
    int wi = ng - 1;
    double n = world, link_bw = world >= 2 ? 2.0 * (n - 1) / n / beta[wi][0] : 1e12,
           link_lat = world >= 2 ? alpha[wi][0] / (2.0 * (n - 1)) : 1e-6;
    sb_printf(&f, "{\n  \"name\": \"cpu-%dx\",\n  \"description\": \"this machine (%s) measured by autopar profile: %d CPU "
               "ranks, one OpenBLAS thread each, OpenMPI\",\n",
            world, host, world);
    sb_printf(&f, "  \"device\": {\n    \"name\": \"cpu-rank\",\n    \"vendor\": \"cpu\",\n    \"description\": \"one CPU "
               "core as an autopar-rank process sees it\",\n");
    sb_printf(&f, "    \"peak_flop_per_s\": {\"fp32\": %.6g, \"bf16\": %.6g},\n    \"mem_bytes\": %lld,\n    \"mem_bw_Bps\": "
               "%.6g,\n", peak, peak, mem_total / world, mem_bw);
    sb_printf(&f, "    \"sources\": {\"peak_flop_per_s\": \"fp32: the fastest GEMM measured by autopar profile (no datasheet "
               "figure); bf16: not a bf16 unit but the same fp32 rate, because the executor runs every plan in fp32, so "
               "the work the cost model rates at bf16 (attention core, router) runs at it\", \"mem_bytes\": \"physical memory / ranks\", \"mem_bw_Bps\": \"memcpy measured by autopar "
               "profile, every rank at once\"},\n");
    sb_printf(&f, "    \"profile\": {\n      \"format\": \"autopar-profile/1\",\n      \"device\": \"cpu-rank\",\n"
               "      \"device_name\": \"%s CPU core\",\n      \"source\": \"autopar profile (autopar-rank --profile) on "
               "%s, %s, %d ranks%s\",\n      \"date\": \"%s\",\n",
            host, host, date, world, quick ? ", --quick" : "", date);
    sb_printf(&f, "      \"peak_flop_per_s\": {\"fp32\": %.6g},\n      \"mem_bw_Bps\": %.6g,\n      \"peak_source\": \"the "
               "fastest measured GEMM of this profile (a CPU core has no datasheet figure here)\",\n",
            peak, mem_bw);
    sb_printf(&f, "      \"method\": {\"timing\": \"GEMMs, kernels and memcpy: the calling thread's CPU time "
               "(CLOCK_THREAD_CPUTIME_ID: the time on the core, which a shared machine's other jobs do not inflate), "
               "collectives: MPI_Wtime; all ranks at once after a barrier; the slowest rank's "
               "median of the repetitions\", \"gemm\": \"cblas_sgemm row-major y = x W^T, OpenBLAS, 1 thread per rank\", \"memory\": "
               "\"memcpy of %lld bytes, bytes = 2 x size\", \"comm\": \"OpenMPI collectives on MPI_COMM_WORLD "
               "subgroups, each repetition after every rank wrote its send buffer and %zu bytes (4x its L2 cache), as "
               "a step's kernels leave the caches; points: the slowest rank's median time per size; bw the best "
               "throughput of the sizes >= 64 KiB, alpha the least t - bytes/bw; in_step_points: per collective, "
               "the wall time of a sequence of (a 512x768x256 GEMM, writing the send buffer, the collective) less "
               "the rank's own GEMM and writing, the slowest rank's least of 3 sequences of 8\"},\n",
            (long long)buf_bytes, evict_bytes);
    sb_printf(&f, "      \"gemm\": [\n");
    for (int i = 0; i < ns; i++) {
      const gemm_shape *g = &shapes[i];
      double flop = 2.0 * (double)(g->m * g->n * g->k), rate = flop / gemm_t[i];
      sb_printf(&f, "        {\"dtype\": \"fp32\", \"op\": \"%s\", \"layout\": \"%s\", \"hidden\": %lld, \"tp\": 1, \"m\": "
                 "%lld, \"n\": %lld, \"k\": %lld, \"flop\": %.0f, \"time_s\": %.6g, \"flop_per_s\": %.6g, \"efficiency\": "
                 "%.6f, \"reps\": %d}%s\n",
              g->op, g->layout, (long long)g->hidden, (long long)g->m, (long long)g->n, (long long)g->k, flop, gemm_t[i], rate,
              rate / peak, gemm_reps[i], i + 1 < ns ? "," : "");
    }
    sb_printf(&f, "      ],\n      \"gemm_failures\": [],\n      \"memory\": [{\"kind\": \"copy\", \"buffer_bytes\": %lld, "
               "\"bytes\": %lld, \"time_s\": %.6g, \"bw_Bps\": %.6g, \"efficiency\": 1, \"reps\": %d}],\n",
            (long long)buf_bytes, (long long)(2 * buf_bytes), mem_t, mem_bw, mreps);
    sb_printf(&f, "      \"executor\": {\"method\": \"the executor's own kernels (autopar-rank rank_kern.c), every rank at "
               "once, the slowest rank's median of the repetitions, seconds per unit: norm per element of [T, H], swiglu and gelu per "
               "output element, rope per rotated element, attention per head x query x key at head dimension %d, xent "
               "per logit, adam per parameter, copy per byte in the caches; base_rss_bytes: the largest rank's "
               "resident set once MPI has communicated small messages and OpenBLAS has run\",\n", (int)EXEC_ATTN_HD);
    sb_printf(&f, "        \"norm_fwd_s\": %.6g, \"norm_bwd_s\": %.6g, \"swiglu_fwd_s\": %.6g, \"swiglu_bwd_s\": %.6g, "
               "\"gelu_fwd_s\": %.6g, \"gelu_bwd_s\": %.6g, \"rope_s\": %.6g,\n        \"attn_head_dim\": %d, "
               "\"attn_fwd_s\": %.6g, \"attn_bwd_s\": %.6g, \"xent_s\": %.6g, \"adam_s\": %.6g, \"copy_s\": %.6g, "
               "\"base_rss_bytes\": %.0f},\n",
            kern.norm_fwd_s, kern.norm_bwd_s, kern.swiglu_fwd_s, kern.swiglu_bwd_s, kern.gelu_fwd_s, kern.gelu_bwd_s,
            kern.rope_s, (int)EXEC_ATTN_HD, kern.attn_fwd_s, kern.attn_bwd_s, kern.xent_s, kern.adam_s, kern.copy_s,
            base_rss_max);
    sb_printf(&f, "      \"comm\": [\n");
    for (int gi = 0; gi < ng; gi++)
      for (int c = 0; c < N_COLL; c++) {
        sb_printf(&f, "        {\"op\": \"%s\", \"ranks\": %d, \"alpha_s\": %.6g, \"bw_Bps\": %.6g, \"points\": [", coll_names[c],
                groups[gi], alpha[gi][c], 1.0 / beta[gi][c]);
        for (int si = 0; si < nsz; si++)
          sb_printf(&f, "%s{\"bytes\": %lld, \"time_s\": %.6g}", si ? ", " : "", (long long)sizes[si], ct[gi][c][si]);
        sb_printf(&f, "], \"in_step_points\": [");
        for (int si = 0; si < n_in; si++)
          sb_printf(&f, "%s{\"bytes\": %lld, \"time_s\": %.6g}", si ? ", " : "", (long long)sizes[si], cin[gi][c][si]);
        sb_printf(&f, "]}%s\n", gi + 1 == ng && c + 1 == N_COLL ? "" : ",");
      }
    sb_printf(&f, "      ]\n    }\n  },\n  \"devices_per_node\": %d,\n  \"n_nodes\": 1,\n", world);
    sb_printf(&f, "  \"levels\": [{\"name\": \"shm\", \"bw_Bps\": %.6g, \"latency_s\": %.6g}],\n", link_bw, link_lat);
    sb_printf(&f, "  \"sources\": {\"levels\": \"the %d-rank all-reduce fit of autopar profile, read as a ring\"}\n}\n",
            world);
    char *text = sb_take(&f);
    ap_ctx *ctx = ap_ctx_new();
    if (!text || !ctx || util_write_file_atomic(ctx, out, text)) {
      fprintf(stderr, "autopar-rank: %s\n", ctx && text ? ap_ctx_error(ctx) : "out of memory writing the profile");
      rc = 2;
    }
    ap_ctx_free(ctx);
    free(text);
  }
  MPI_Finalize();
  return rc;
}
