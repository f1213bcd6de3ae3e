/* Memory per pipeline rank (cost layer): model states by sharding choice, activations saved for backward
 * times the micro-batches in flight for the schedule and the rank's position, the loss's logits, buffers, the
 * optimizer step's transient copies, library workspaces, the caching allocator's reserve and the CUDA context.
 * The parts add up to the total (what nvidia-smi shows at the rank's peak), which the fit test and the OOM
 * verdict use. Activation bytes come from the graph's saved tensors (estimate.c), not from a formula; the
 * published closed forms are tests (tests/test_cost.c). What a stack allocates beyond the states is the stack
 * table's (plan/stack.h, plan_stack_mem), each fact with its source. */
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
  plan_stack st = p->stack == PLAN_STACK_DEFAULT ? plan_stack_default(transformer) : p->stack;
  /* autopar and any keep the cost model's own gradient width (memory.grad_bytes_per_param) */
  if (st == PLAN_STACK_AUTOPAR || st == PLAN_STACK_ANY)
    return (cost_state_bytes){.weights = 2.0, .grads = mt->grad_bytes_per_param, .optimizer = 12.0};
  plan_stack_grad_bytes g = plan_stack_grads_on(p, st);
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

/* The stack's memory mechanisms for plan p (none for a plan on autopar or any). */
static plan_stack_mem stack_mem(const plan *p, bool transformer) {
  plan_stack st = p->stack == PLAN_STACK_DEFAULT ? plan_stack_default(transformer) : p->stack;
  const plan_stack_info *info = plan_stack_get(st);
  return info ? info->mem : (plan_stack_mem){0};
}

double cost_reserve_fraction(const cost_env *env, const plan *p) {
  const memory_tuning *mt = &env->tuning.memory;
  return mt->reserve_fraction * (stack_mem(p, env->facts.has_layers).expandable_segments ? mt->expandable_factor : 1.0);
}

int cost_nccl_comms(const plan *p, int r, bool p2p_pairs) {
  /* PyTorch's ProcessGroupNCCL (pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, commit not
   * pinned) creates a communicator per process group on its first collective, and for send/recv one per pair of
   * peers (getKeySendRecv: the key "low:high"); each has its own buffers (tuning.c memory.comm_bytes,
   * NVIDIA/nccl#864, #964). A rank holds one per parallel group of more than one rank it communicates in:
   * tensor, context, the data-parallel gradient group (dp·cp), expert and expert-data parallel; for the
   * pipeline, one per neighbour where the stack sends one tensor at a time (plan_stack_mem.p2p_pairs), else the
   * pipeline group's one; and the default group of torch.distributed.init_process_group, which every launch
   * makes and whose barrier is a collective. A group over every rank is taken to be that default group (FSDP
   * and DDP without a process group, a one-dimensional DeviceMesh), not a second communicator. */
  int64_t world = p->tp * p->pp * p->dp * p->cp, edp = plan_edp(p);
  if (world <= 1) return 0;
  int64_t sizes[7] = {p->tp, p->cp, p->dp * p->cp, p->ep, p->ep > 1 ? edp : 1, 1, 1};
  if (p->pp > 1 && !p2p_pairs) sizes[5] = p->pp;
  if (p->pp > 1 && p2p_pairs && r > 0) sizes[5] = 2;
  if (p->pp > 1 && p2p_pairs && r < p->pp - 1) sizes[6] = 2;
  int n = 1; /* the default group */
  for (size_t k = 0; k < AP_COUNT(sizes); k++) n += sizes[k] > 1 && sizes[k] < world;
  return n;
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
  plan_stack_mem sm = stack_mem(p, env->facts.has_layers);
  bool w_shard = p->zero_stage >= 3, g_shard = p->zero_stage >= 2, o_shard = p->zero_stage >= 1;
  double dense_w = w_shard ? dense / n_dp : dense, exp_w = w_shard ? expert / n_edp : expert;
  double local_shard = o_shard ? dense / n_dp + expert / n_edp : dense + expert; /* parameters of the optimizer shard */
  mem.params = sb.weights * (dense_w + exp_w);
  mem.grads = sb.grads * (g_shard ? dense / n_dp + expert / n_edp : dense + expert) + sb.unsharded * (dense + expert);
  mem.optimizer = sb.optimizer * local_shard;
  /* The optimizer step's copies of the gradients it updates (stack.c [DS-step]): per parameter of the local
   * ZeRO-1/2 partition, or of the whole rank without ZeRO; ZeRO-3 steps on its shard in place. */
  if (p->zero_stage == 1 || p->zero_stage == 2) mem.step = sm.step_bytes_zero * local_shard;
  else if (p->zero_stage == 0) mem.step = sm.step_bytes_nozero * (dense + expert);
  /* Offload (offload.c): ZeRO-Offload keeps the optimizer states and the fp32 gradients on the host (Ren et al.
   * 2021 §4.1), ZeRO-Infinity the parameter shard (Rajbhandari et al. 2021 §5); the gathered layers stay in
   * the buffers below. */
  if (p->offload_optimizer != PLAN_OFFLOAD_NONE) mem.optimizer = 0, mem.grads = 0, mem.step = 0;
  if (p->offload_param != PLAN_OFFLOAD_NONE) mem.params = 0;
  /* The micro-batches in flight at the rank's peak: the schedule's rule (plan/schedule.h; COSTMODEL.md §2.2). */
  mem.activations = R->act_bytes * plan_schedule_in_flight_mb(p, r) + R->working_bytes;
  if (R->has_head) {
    /* The loss's working set over the vocabulary-parallel logits of one micro-batch, beyond the 16-bit logits
     * themselves (2 bytes per element, among the head's saved activations): (bytes per logit − 2) · elements.
     * The unfused loss's bytes are the stack's (stack.c [MLM-ce] [TT-loss] [ATen-ce]) or the cost model's
     * memory.loss_bytes_per_logit; a fused loss's are its own (plan_stack_loss: flash-attn's 4 [FA-ce], 2 in
     * place, 0 the unfused loss's: Megatron's native fusion keeps the same fp32 copy [MLM-fce]), plus an fp32
     * log-sum-exp per token. */
    double tokens = b * s / (double)p->cp, elems = cost_logit_elems(env, p, b, s);
    double loss_bytes = sm.loss_bytes_per_logit > 0 ? sm.loss_bytes_per_logit : mt->loss_bytes_per_logit;
    const plan_stack_info *si = plan_stack_get(p->stack == PLAN_STACK_DEFAULT ? plan_stack_default(env->facts.has_layers) : p->stack);
    int chunks = p->fused_loss && si ? si->loss.fused_chunks : 0;
    if (chunks > 0) {
      /* A chunked loss (stack.c [TT-chunk]): one slice of the unfused loss's working set at a time, no logits
       * saved for the backward pass (the head's 16-bit logits leave the activations of every micro-batch in
       * flight), and an fp32 gradient of the head's input, replicated over tensor parallelism. */
      double saved = 2.0 * elems * (double)plan_schedule_in_flight_mb(p, r);
      mem.activations = fmax(0, mem.activations - saved);
      mem.logits = elems * loss_bytes / chunks + 4.0 * tokens * (double)env->g->hidden_size;
    } else {
      if (p->fused_loss) {
        double fb = si ? si->loss.fused_bytes_per_logit : 2.0;
        loss_bytes = (fb > 0 ? fb : loss_bytes);
      }
      mem.logits = elems * (loss_bytes - 2.0) + (p->fused_loss ? tokens * 4.0 : 0);
    }
  }
  /* Buffers: the gathered (tensor-parallel) copy of one layer input and output; with ZeRO-3, the gathered
   * parameters of the layer in use and the one prefetched; a ZeRO-1/2 optimizer's reduction bucket of 16-bit
   * gradients (stack.c [DS-bucket]). */
  mem.buffers = (p->tp > 1 ? 2.0 * cost_boundary_bytes(env, p, b, s, false) : 0);
  if (p->zero_stage >= 3 && R->n_layers > 0) mem.buffers += 2.0 * sb.weights * (dense + expert) / (double)R->n_layers;
  if ((p->zero_stage == 1 || p->zero_stage == 2) && p->offload_optimizer == PLAN_OFFLOAD_NONE)
    mem.buffers += sm.bucket_elems * 2.0;
  mem.workspace = mt->overhead_bytes;
  /* The allocator's reserve grows with the bytes allocated and freed through the iteration (cost.h). */
  mem.reserve = cost_reserve_fraction(env, p) * (mem.activations + mem.logits + mem.buffers + mem.step);
  mem.context = mt->context_bytes + sm.eager_context_bytes + mt->comm_bytes * cost_nccl_comms(p, r, sm.p2p_pairs);
  mem.total = mem.params + mem.grads + mem.optimizer + mem.activations + mem.logits + mem.buffers + mem.step +
              mem.workspace + mem.reserve + mem.context;
  return mem;
}
