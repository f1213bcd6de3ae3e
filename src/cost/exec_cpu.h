/* The cost model of the stack `autopar` (the reference executor, src/exec/) on a CPU device measured by
 * `autopar profile` (cost layer, exec_cpu.c). Where a plan's stack is autopar and its device's profile carries
 * the executor's kernels (the profile's "executor" object), the layer, pipeline-send, synchronisation,
 * optimizer and memory pieces of the cost model are the executor's own: what its code does, priced with the
 * profile's measured GEMM table by shape and layout, its per-unit kernel times, the collectives' measured
 * times by message size, isolated and in step (their alpha-beta fits where a profile has no points), and the
 * process's base resident set (docs/executor.md "Cost model"). The aggregation stays estimate.c's (a pipeline
 * plan's time the simulator's replay of its lists), so searches and the simulator see the same chunk times. */
#ifndef AP_COST_EXEC_CPU_H
#define AP_COST_EXEC_CPU_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"

enum { EXEC_CPU_MAX_GEMM = 256, EXEC_CPU_MAX_COMM = 48, EXEC_CPU_MAX_POINTS = 8 };
typedef enum { EXEC_COLL_ALLREDUCE, EXEC_COLL_ALLGATHER, EXEC_COLL_REDUCE_SCATTER, EXEC_COLL_ALLTOALL, EXEC_COLL_SENDRECV,
               EXEC_COLL_COUNT_ } exec_coll;
/* GEMM layouts as cblas_sgemm is called (row-major): y = x·Wᵀ (forward), dx = dy·W (input gradient),
 * dW = dyᵀ·x (weight gradient). */
typedef enum { EXEC_NT, EXEC_NN, EXEC_TN, EXEC_LAYOUT_COUNT_ } exec_layout;

/* What `autopar profile` measured for the executor (seconds per unit; rank_kern.c names the units). */
typedef struct {
  bool present;
  double norm_fwd_s, norm_bwd_s, swiglu_fwd_s, swiglu_bwd_s, gelu_fwd_s, gelu_bwd_s, rope_s, attn_fwd_s, attn_bwd_s,
      xent_s, adam_s, copy_s, base_rss_bytes, attn_head_dim;
  int n_gemm;
  struct {
    exec_layout layout;
    double log_m, log_n, log_k, s_per_flop;
  } gemm[EXEC_CPU_MAX_GEMM];
  int n_comm;
  struct {
    exec_coll op;
    int64_t ranks;
    double alpha_s, bw_Bps;
    int n_points; /* the measured sizes, ascending, times made non-decreasing; 0: the fit alone */
    double bytes[EXEC_CPU_MAX_POINTS], time_s[EXEC_CPU_MAX_POINTS];
    int n_in_step; /* in_step_points: the same collective between a layer's GEMMs (rank_prof.c), ascending */
    double in_bytes[EXEC_CPU_MAX_POINTS], in_time_s[EXEC_CPU_MAX_POINTS];
  } comm[EXEC_CPU_MAX_COMM];
} exec_cpu_profile;

/* Reads the "executor" object, the GEMM table's layouts and the "comm" fits of a parsed autopar-profile/1
 * root (a json_t *) into out; a profile without "executor" leaves out->present false (not an error). */
AP_HIDDEN ap_status exec_cpu_profile_parse(ap_ctx *ctx, const char *file, const void *root, exec_cpu_profile *out);

/* Seconds of one cblas_sgemm of m×n×k in that layout on the profiled core (the measured table by shape). */
AP_HIDDEN double exec_cpu_gemm_s(const exec_cpu_profile *x, exec_layout lay, double m, double n, double k);
/* Seconds of one MPI collective over `ranks` ranks of a buffer of `bytes` as the profile measured it: isolated,
 * or in_step, between two kernels of a pass (its in_step_points excess added). */
AP_HIDDEN double exec_cpu_coll_s(const exec_cpu_profile *x, exec_coll op, int64_t ranks, double bytes, bool in_step);

#endif
