/* Memory per pipeline rank (cost layer): model states by sharding choice, activations saved for backward
 * times the micro-batches in flight for the schedule and the rank's position, the loss's logits, buffers and
 * fixed overhead. Activation bytes come from the graph's saved tensors (estimate.c), not from a formula; the
 * published closed forms are tests (tests/test_cost.c). */
#include <math.h>

#include "cost/internal.h"
#include "plan/stack.h"
#include "plan/schedule.h"

cost_state_bytes cost_state_bytes_per_param(const memory_tuning *mt) {
  /* ZeRO (Rajbhandari et al. 2020 §5.1; COSTMODEL.md §2.3): 16-bit weights, gradients at the narrowest width a
   * stack keeps (16-bit: DeepSpeed's fp16 optimizer, Megatron-Bridge's bf16 reduction), and fp32 master weights
   * plus Adam's two moments, 4 + 4 + 4. */
  return (cost_state_bytes){.weights = 2.0, .grads = fmin(mt->grad_bytes_per_param, 2.0), .optimizer = 12.0};
}

cost_state_bytes cost_state_bytes_plan(const memory_tuning *mt, const plan *p, bool transformer) {
  plan q = *p;
  if (q.stack == PLAN_STACK_DEFAULT) q.stack = plan_stack_default(transformer);
  /* autopar and any keep the cost model's own gradient width (memory.grad_bytes_per_param) */
  if (q.stack == PLAN_STACK_AUTOPAR || q.stack == PLAN_STACK_ANY)
    return (cost_state_bytes){.weights = 2.0, .grads = mt->grad_bytes_per_param, .optimizer = 12.0};
  plan_stack_grad_bytes g = plan_stack_grads(&q);
  return (cost_state_bytes){.weights = 2.0, .grads = g.grads, .optimizer = 12.0, .unsharded = g.unsharded + g.unsharded_pp};
}

double cost_state_bytes_zero(const cost_state_bytes *sb, int64_t zero_stage, double n_dp) {
  double n = n_dp > 0 ? n_dp : 1;
  return sb->weights * (zero_stage >= 3 ? 1 / n : 1) + sb->grads * (zero_stage >= 2 ? 1 / n : 1) +
         sb->optimizer * (zero_stage >= 1 ? 1 / n : 1);
}

double cost_optimizer_step_s(const cost_env *env, int group, double opt_params) {
  /* Adam step: read fp32 parameter, gradient, two moments; write parameter, moments and the 16-bit copy: about
   * 30 bytes per parameter of the local optimizer shard, memory-bound (Kingma & Ba 2015; ZeRO §3.1 layout). */
  return opt_params * COST_ADAM_STEP_BYTES_PER_PARAM /
         (cost_group_model(env, group)->device.mem_bw_Bps * env->tuning.compute.mem_eff);
}

cost_mem memory_rank(const cost_env *env, const plan *p, const rank_cost *rc, int r, double b, double s) {
  if (cost_exec_cpu_on(env, cost_rank_group(env, p, r, NULL), p)) return cost_exec_cpu_memory(env, p, rc, r, b, s);
  const rank_cost *R = &rc[r];
  const memory_tuning *mt = &env->tuning.memory;
  cost_mem mem = {0};
  double n_dp = (double)(p->dp * p->cp), n_edp = (double)plan_edp(p);
  if (n_edp < 1) n_edp = 1;
  double dense = R->params_dense, expert = R->params_expert;
  /* Model states (ZeRO, Rajbhandari et al. 2020 §5.1, with Megatron's fp32 gradient buffer: 2 + 4 + 12 bytes per
   * parameter unsharded; COSTMODEL.md §2.3). */
  cost_state_bytes sb = cost_state_bytes_plan(mt, p, env->facts.has_layers);
  bool w_shard = p->zero_stage >= 3, g_shard = p->zero_stage >= 2, o_shard = p->zero_stage >= 1;
  double dense_w = w_shard ? dense / n_dp : dense, exp_w = w_shard ? expert / n_edp : expert;
  mem.params = sb.weights * (dense_w + exp_w);
  mem.grads = sb.grads * (g_shard ? dense / n_dp + expert / n_edp : dense + expert) + sb.unsharded * (dense + expert);
  mem.optimizer = sb.optimizer * (o_shard ? dense / n_dp + expert / n_edp : dense + expert);
  /* Offload (offload.c): ZeRO-Offload keeps the optimizer states and the fp32 gradients on the host (Ren et al.
   * 2021 §4.1), ZeRO-Infinity the parameter shard (Rajbhandari et al. 2021 §5); the gathered layers stay in
   * the buffers below. */
  if (p->offload_optimizer != PLAN_OFFLOAD_NONE) mem.optimizer = 0, mem.grads = 0;
  if (p->offload_param != PLAN_OFFLOAD_NONE) mem.params = 0;
  /* The micro-batches in flight at the rank's peak: the schedule's rule (plan/schedule.h; COSTMODEL.md §2.2). */
  mem.activations = R->act_bytes * plan_schedule_in_flight_mb(p, r) + R->working_bytes;
  if (R->has_head) {
    /* The loss's working set over the vocabulary-parallel logits; the 16-bit logits themselves (2 bytes) are
     * among the head's saved activations. A fused in-place loss keeps only an fp32 log-sum-exp per token. */
    double tokens = b * s / (double)p->cp;
    mem.logits = p->fused_loss ? tokens * 4.0 : cost_logit_elems(env, p, b, s) * (mt->loss_bytes_per_logit - 2.0);
  }
  /* Buffers: the gathered (tensor-parallel) copy of one layer input and output; with ZeRO-3, the gathered
   * parameters of the layer in use and the one prefetched. */
  mem.buffers = (p->tp > 1 ? 2.0 * cost_boundary_bytes(env, p, b, s, false) : 0);
  if (p->zero_stage >= 3 && R->n_layers > 0) mem.buffers += 2.0 * sb.weights * (dense + expert) / (double)R->n_layers;
  mem.overhead = mt->overhead_bytes + mt->context_bytes;
  mem.total = mem.params + mem.grads + mem.optimizer + (mem.activations + mem.logits + mem.buffers) * mt->fragmentation +
              mem.overhead;
  return mem;
}
