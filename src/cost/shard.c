/* How a plan shards the model (cost layer): the GEMM dtype of its precision, the compute_shard that compute.c
 * prices ops under, and the divisor of a tensor's bytes per device. layer.c and activations.c both read it. */
#include "cost/internal.h"
#include "plan/stack.h"

hw_dtype cost_gemm_dtype(plan_precision precision) {
  /* The matmuls run in the plan's precision; bf16 for anything else (plan.h: fp8 is fp8 GEMMs with bf16
   * elsewhere, Micikevicius et al. 2022; fp16 is mixed precision with fp16 GEMMs). */
  static const hw_dtype gemm[] = {[PLAN_PREC_BF16] = HW_DTYPE_BF16, [PLAN_PREC_FP16] = HW_DTYPE_FP16,
                                  [PLAN_PREC_FP8] = HW_DTYPE_FP8, [PLAN_PREC_FP32] = HW_DTYPE_FP32};
  _Static_assert(AP_COUNT(gemm) == PLAN_PREC_COUNT_, "precision table and plan_precision disagree");
  return (unsigned)precision < AP_COUNT(gemm) ? gemm[precision] : HW_DTYPE_BF16;
}

compute_shard cost_shard_of(const plan *p) {
  const plan_stack_info *st = plan_stack_get(p->stack); /* NULL when not resolved: fused attention */
  compute_shard sh = {.tp = p->tp, .cp = p->cp, .ep = p->ep, .etp = plan_etp(p),
                      .sequence_parallel = p->sequence_parallel && p->tp > 1, .gemm_dtype = cost_gemm_dtype(p->precision),
                      .attn_scores = st && st->attn_scores, .attn_sm80 = st && st->attn_sm80,
                      .dropout = st && st->dropout};
  if (st) {
    /* The traffic of the loss the plan runs: its stack's fused or unfused one (stack.c [MLM-ce] [ATen-ce]). */
    sh.loss_fwd_bytes = p->fused_loss ? st->loss.fused_fwd_bytes : st->loss.unfused_fwd_bytes;
    sh.loss_bwd_bytes = p->fused_loss ? st->loss.fused_bwd_bytes : st->loss.unfused_bwd_bytes;
  }
  return sh;
}

/* Sharding divisor of a saved tensor: cp for the sequence, tp when TP splits it or SP splits its sequence. */
double cost_tensor_divisor(const graph_tensor *t, const compute_shard *sh) {
  bool has_s = false;
  for (int i = 0; i < t->n_dims; i++) has_s |= t->dims[i] == DIM_S;
  double d = has_s ? (double)sh->cp : 1.0;
  if (t->tp_dim >= 0 || (sh->sequence_parallel && t->seq_parallel)) d *= (double)sh->tp;
  return d;
}
