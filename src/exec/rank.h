/* The rank program's shared state (exec layer, bin/autopar-rank): what every rank knows about the run, its
 * place in the plan's device mesh, and the pieces rank.c (setup, the step loop, the result) and rank_pipe.c
 * (one training step under the plan's pipeline schedule) share; ex_sched.h has the order of pipeline work. Only this program links MPI.
 * Internal header: not installed, not part of the public API. */
#ifndef AP_EXEC_RANK_H
#define AP_EXEC_RANK_H

#include <mpi.h>

#include "exec/ex_sched.h"
#include "exec/exec.h"

/* Wall time inside the step's MPI calls, a diagnostic of `run --json` ("mpi"): by where the call is (the
 * layers' tp, cp and ep collectives; the pipeline's receives and send completions; the step's end) and by
 * collective, summed over the steps after the first. bytes as the cost model counts them (exec_cpu.c coll_s:
 * the gathered result, the scattered input, a rank's all-to-all send buffer, one message). */
enum { RK_AT_LAYER, RK_AT_PIPE, RK_AT_STEP, RK_AT_N };
enum { RK_OP_ALLREDUCE, RK_OP_ALLGATHER, RK_OP_REDUCE_SCATTER, RK_OP_ALLTOALL, RK_OP_SENDRECV, RK_OP_SKEW, RK_OP_N };
typedef struct {
  double calls, bytes, time_s;
} rk_tally;

typedef struct {
  ex_model m;
  rk_plan p;
  ex_data data;
  ex_adamw opt;
  int rank, world;
  int pp_rank, dp_rank, tp_rank, cp_rank;
  int red_rank, red_size; /* place in the gradient-reduction (and ZeRO) group dp·cp, dp_comm */
  MPI_Comm dp_comm, pp_comm, tp_comm, ep_comm, cp_comm, etp_comm;
  int64_t *cp_pos;        /* this rank's positions of each sequence under context parallelism (seq/cp of them) */
  ex_tp tp;       /* this rank's tensor-parallel share and its communication (tp_comm) */
  float *scratch; /* n_params floats: gradients of what every tensor-parallel rank computes whole, kept from rank 0 */
  int64_t lo, hi;          /* this rank's parameter range [lo, hi) of the flat buffer */
  int64_t shard_lo, shard_hi; /* the range whose optimizer state this rank holds (ZeRO >= 1), else [lo, hi) */
  float *w, *g, *mom, *var;   /* mom and var cover [shard_lo, shard_hi) */
  int64_t chunk_l0[RK_MAX_CHUNKS]; /* first layer of each chunk */
  bool tallying, tally_on, skew_barrier; /* after the first step; this call; AUTOPAR_MPI_SKEW */
  double skew_s, minflt; /* the skew barrier's wait in this call; minor page faults of the tallied steps */
  double pass_s[3], pass_cpu_s[3]; /* wall and thread CPU time in forward, backward and weight-gradient passes */
  rk_tally tally[RK_AT_N][RK_OP_N];
} rk_state;

/* Around one MPI call on comm: t0 = rk_tally_begin(s, comm), the call, rk_tally_add(s, at, op, bytes, t0)
 * (rank.c); a group of one rank is not tallied. */
double rk_tally_begin(rk_state *s, MPI_Comm comm, bool collective);
void rk_tally_add(rk_state *s, int at, int op, double bytes, double t0);

/* `autopar-rank --profile OUT.json [--quick]` (rank_prof.c): measures the machine and writes a cluster file. */
int rk_profile_main(int argc, char **argv);

/* The executor's non-GEMM kernels as `autopar profile` times them (rank_kern.c), seconds per unit of work (see
 * there): the profile's "executor" object, which src/cost/exec_cpu.c reads. Attention is per head·query·key at
 * head dimension EXEC_ATTN_HD. */
enum { EXEC_ATTN_HD = 64 };
typedef struct {
  double norm_fwd_s, norm_bwd_s, swiglu_fwd_s, swiglu_bwd_s, gelu_fwd_s, gelu_bwd_s, rope_s, attn_fwd_s, attn_bwd_s,
      xent_s, adam_s, copy_s;
} rk_kernels;
void rk_profile_kernels(bool quick, rk_kernels *out);
/* The calling thread's CPU time, seconds (rank_kern.c): what the profile times compute in. */
double rk_thread_cpu_s(void);
/* The resident bytes of this process once OpenBLAS has run a GEMM and MPI small messages, and now (rank_kern.c). */
double rk_profile_base_rss(void);
double rk_profile_rss_bytes(void);

/* Tensor-parallel communication over s->tp_comm (rank.c), the callbacks of ex_tp. */
void rk_tp_all_reduce(void *user, float *buf, int64_t n);
void rk_tp_all_gather_seq(void *user, const float *loc, float *full, int64_t B, int64_t S, int64_t H);
void rk_tp_reduce_scatter_seq(void *user, const float *full, float *loc, int64_t B, int64_t S, int64_t H);

/* Expert-parallel all-to-alls over s->ep_comm (rank.c), the ep callbacks of ex_tp. */
void rk_ep_counts(void *user, const int64_t *send, int64_t *recv, int64_t n);
void rk_ep_rows(void *user, const float *send, const int64_t *send_rows, float *recv, const int64_t *recv_rows, int64_t H);

/* Context parallelism (rank.c): rank r's positions (seq/cp), and the gather and reduce-scatter callbacks. */
void rk_cp_positions(const rk_state *s, int r, int64_t *pos);
void rk_cp_gather(void *user, const float *loc, float *full, int64_t B, int64_t S, int64_t W);
void rk_cp_reduce_scatter(void *user, const float *full, float *loc, int64_t B, int64_t S, int64_t W);

/* One training step t (0-based): forward and backward of every micro-batch this rank takes part in under the
 * schedule, gradients accumulated into s->g. Returns the sum of the token losses this rank computed (last
 * pipeline stage only; 0 elsewhere), or a negative value on failure with msg filled. */
double rk_pipeline_step(rk_state *s, int64_t t, char *msg, size_t n_msg);

/* The rank program's fatal error (rank.c, also the graph runtime's grank.c): one line "autopar-rank: MSG" on
 * stderr and exit(code); once rk_mpi_started, "autopar-rank: rank R: MSG" and MPI_Abort(code). */
void rk_die(int code, const char *fmt, ...) AP_PRINTF(2, 3);
void rk_mpi_started(int rank);

#endif
