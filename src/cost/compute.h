/* The compute part of the cost model (cost layer): how long one op takes on one device, given how the plan
 * shards it. DESIGN.md "Cost model": time = FLOP / (peak × efficiency(op kind, shape)), bounded below by
 * bytes / memory bandwidth (the roofline of Williams, Waterman & Patterson 2009). GEMM efficiency comes from a
 * measured profile of the device (data/profiles/<device>.json, docs/profile-format.md) when there is one, and
 * otherwise from a documented shape curve; each tunable constant sits in compute_tuning, with its reason in
 * the cost model's table of constants (tuning.c). */
#ifndef AP_COST_COMPUTE_H
#define AP_COST_COMPUTE_H

#include "cost/exec_cpu.h"
#include "hw/hw.h"
#include "model/graph.h"

/* Tunable constants of one device type. Every field is dimensionless or carries its unit in its name. */
typedef struct {
  double gemm_eff_max;     /* fraction of dense peak that large, well-shaped GEMMs reach */
  double gemm_dim_half;    /* GEMM dimension (elements) at which the shape factor of that dimension is 1/2 */
  double attn_fwd_eff;     /* fraction of peak that fused (flash) attention reaches in the forward pass */
  double attn_bwd_eff;     /* the same for its backward pass */
  double mem_eff;          /* fraction of memory bandwidth that memory-bound kernels reach */
  double fp8_gemm_speedup; /* GEMM speed in fp8 relative to bf16 at the same shape (casts costed apart) */
  double moe_gemm_factor;  /* efficiency of grouped expert GEMMs relative to a dense GEMM of the same shape */
  double op_latency_s;     /* host time to issue one kernel: a layer is never faster than its kernels' issue */
  double gemm_fixed_s;     /* device time of one GEMM kernel besides its FLOPs (launch gap, prologue, epilogue) */
  double moe_host_s;       /* host time to issue one MoE layer, forward and backward, for one micro-batch, on
                            * stacks whose MoE layers wait on the tokens per expert (plan_stack_info.moe_host_sync) */
} compute_tuning;

/* Defaults for a device with no fitted constants; their sources are in the table of tuning.c. */
AP_HIDDEN compute_tuning compute_tuning_defaults(void);

/* One measured GEMM of a profile. */
typedef struct {
  double log_m, log_n, log_k; /* natural logarithms of the dimensions */
  double eff;                 /* measured fraction of the dtype's dense peak */
} compute_gemm_point;

/* The compute model of one device type: its peaks, its constants, and its measured GEMM table if any. */
typedef struct {
  hw_device device;
  compute_tuning tuning;
  int n_points[HW_DTYPE_COUNT];
  compute_gemm_point *points[HW_DTYPE_COUNT]; /* arena-owned; NULL when no profile */
  const char *profile_source;                 /* "" when no profile */
  const exec_cpu_profile *exec;               /* the executor's kernels (exec_cpu.h); NULL when not profiled */
} compute_model;

/* Builds the compute model of a device; loads data/profiles/<device name>.json from the embedded data when it
 * exists. Memory comes from arena a. */
AP_HIDDEN ap_status compute_model_init(ap_ctx *ctx, arena *a, const hw_device *dev, const compute_tuning *t,
                                       compute_model *out);

/* Reads a profile (docs/profile-format.md) into cm's GEMM tables; file names the text in errors. */
AP_HIDDEN ap_status compute_profile_parse(ap_ctx *ctx, arena *a, const char *file, const char *text, size_t n,
                                          compute_model *cm);

/* Fraction of the dtype's dense peak that an m×k by k×n GEMM reaches on this device. */
AP_HIDDEN double compute_gemm_eff(const compute_model *cm, hw_dtype dt, double m, double n, double k);

/* How a plan splits one op over devices. */
typedef struct {
  int64_t tp, cp;       /* tensor- and context-parallel degrees */
  int64_t ep, etp;      /* expert-parallel degree and expert tensor-parallel degree (0 = tp) */
  bool sequence_parallel;
  hw_dtype gemm_dtype;  /* bf16, fp16 or fp8 matmuls */
  bool attn_scores;     /* unfused attention: the s×s scores go through device memory (plan/stack.h) */
  bool attn_sm80;       /* FlashAttention-2 (Ampere instructions) rather than the chip's native kernel */
  bool dropout;         /* the stack runs dropout: 1-byte masks beside the saved activations (plan/stack.h) */
  /* Device-memory bytes the plan's loss moves per logit element of the device, forward and backward
   * (plan/stack.h plan_stack_loss); 0: the loss op's own traffic (model/graph.c). */
  double loss_fwd_bytes, loss_bwd_bytes;
} compute_shard;

/* The per-device work and time of one op for one micro-batch of b sequences of s tokens. */
typedef struct {
  double fwd_flop, bwd_flop;   /* per device */
  double fwd_s, bwd_s;         /* dgrad + wgrad */
  double fwd_bytes, bwd_bytes; /* device-memory traffic per device */
} compute_op_time;

AP_HIDDEN compute_op_time compute_op(const compute_model *cm, const graph_block *blk, const graph_op *op, double b,
                                     double s, const compute_shard *sh);
/* An op of a general graph as the graph executor (src/exec/graph/) runs it on a CPU core measured by `autopar
 * profile` (exec_graph_cpu.c): true and *out filled when cm's profile carries the executor's kernels, false
 * (out untouched) otherwise, where compute_op's device model applies. */
AP_HIDDEN bool compute_op_exec_graph(const compute_model *cm, const graph_block *blk, const graph_op *op, double b,
                                     double s, compute_op_time *out);
/* The sharding divisor of an op's work under a plan (tp for split ops, ×cp always). */
AP_HIDDEN double compute_op_divisor(const graph_block *blk, const graph_op *op, const compute_shard *sh);

#endif
