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
  return (cost_state_bytes){.weights = 2.0, .grads = g.grads, .optimizer = 12.0, .unsharded = g.unsharded + g.unsharded_pp,
                            .zero1_without_zero = g.zero1_without_zero};
}

bool cost_optimizer_sharded(const plan *p, const cost_state_bytes *sb) {
  return p->zero_stage >= 1 || sb->zero1_without_zero;
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
  return stack_mem(p, env->facts.has_layers).expandable_segments ? mt->expandable_reserve_fraction : mt->reserve_fraction;
}

int cost_nccl_comms(const plan *p, int r, const plan_stack_mem *sm, bool tied) {
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
  bool p2p_pairs = sm && sm->p2p_pairs, pp = p->pp > 1;
  plan_stack_groups grp = sm ? sm->groups : PLAN_GROUPS_PLAIN;
  int n = 1; /* the default group */
  if (grp == PLAN_GROUPS_MDS || (grp == PLAN_GROUPS_DS_PIPE && pp)) {
    /* DeepSpeed's pipeline engine (plan/stack.c [DS-groups]): the model's tensor-parallel group and the grid's
     * own groups, each a communicator of its own even over every rank: data-parallel, model (the replica's tp·pp
     * ranks: the norm's and overflow check's all-reduces), and with pp > 1 pipe (the loss broadcast), slice
     * (tp: the partitioned pipe tensors), the tied embedding's group on the first and last stage and a pair per
     * neighbour (send/recv); Megatron-DeepSpeed adds Megatron's own data- and pipeline-parallel groups
     * ([MDS-groups]); expert groups as below. */
    bool dp = p->dp * p->cp > 1;
    n += (p->tp > 1) + dp + (p->tp * p->pp > 1);
    if (pp) n += 1 + (p->tp > 1) + (r > 0) + (r < p->pp - 1) + (tied && (r == 0 || r == p->pp - 1));
    if (grp == PLAN_GROUPS_MDS) n += dp + pp;
    n += (p->ep > 1) + (p->ep > 1 && edp > 1);
    return n;
  }
  int64_t sizes[7] = {p->tp, p->cp, p->dp * p->cp, p->ep, p->ep > 1 ? edp : 1, 1, 1};
  if (pp && !p2p_pairs) sizes[5] = p->pp;
  if (pp && p2p_pairs && r > 0) sizes[5] = 2;
  if (pp && p2p_pairs && r < p->pp - 1) sizes[6] = 2;
  for (size_t k = 0; k < AP_COUNT(sizes); k++) n += sizes[k] > 1 && sizes[k] < world;
  return n;
}

/* Whether the model ties its embedding and its head (one op marked tied). */
static bool model_tied(const cost_env *env) {
  for (int bi = 0; bi < env->g->n_blocks; bi++)
    for (int k = 0; k < env->g->blocks[bi].n_ops; k++)
      if (env->g->blocks[bi].ops[k].tied) return true;
  return false;
}

int cost_rank_nccl_comms(const cost_env *env, const plan *p, int r) {
  plan_stack_mem sm = stack_mem(p, env->facts.has_layers);
  bool tied = sm.groups != PLAN_GROUPS_PLAIN && p->pp > 1 && (r == 0 || r == p->pp - 1) && model_tied(env);
  return cost_nccl_comms(p, r, &sm, tied);
}

/* The optimizer step's transient copies (plan/stack.c [DS-step] [DS-norm]): per parameter of the local ZeRO-1/2
 * partition, or the fp64 copy of the partition's largest gradient taken for the norm if larger; per local
 * parameter without ZeRO; none where the optimizer steps on fp32 gradients it keeps (zero1_without_zero) or
 * steps its ZeRO-3 shard in place. */
static double step_bytes(const plan *p, const plan_stack_mem *sm, const cost_state_bytes *sb, const rank_cost *R,
                         double local_shard) {
  if (p->zero_stage == 1 || p->zero_stage == 2)
    return fmax(sm->step_bytes_zero * local_shard, sm->norm_copy_bytes * fmin(R->param_max, local_shard));
  if (p->zero_stage == 0 && !sb->zero1_without_zero) return sm->step_bytes_nozero * (R->params_dense + R->params_expert);
  return 0;
}

/* A DeepSpeed optimizer's gradient-reduction buffers (plan/stack.c [DS-bucket]), 16-bit: ZeRO-2's bucket of
 * reduce_bucket_size elements (contiguous_gradients), two with overlap_comm (the plan's overlap_grad_reduce)
 * off the pipeline engine, which turns it off; ZeRO-1 the same where the stack keeps those settings at stage 1
 * (zero1_contiguous), else the flattened bucket of at most as many of the rank's gradients; without ZeRO the
 * engine's all-reduce flattens the same; none for an optimizer that reduces its flat fp32 accumulators in
 * place, or offloads. */
static double bucket_bytes(const plan *p, const plan_stack_mem *sm, const cost_state_bytes *sb, const rank_cost *R) {
  if (sm->bucket_elems <= 0 || p->offload_optimizer != PLAN_OFFLOAD_NONE || p->zero_stage >= 3) return 0;
  if (p->zero_stage == 0 && sb->zero1_without_zero) return 0;
  if (p->zero_stage == 0 || (p->zero_stage == 1 && !sm->zero1_contiguous))
    return 2.0 * fmin(sm->bucket_elems, R->params_dense + R->params_expert);
  return 2.0 * sm->bucket_elems * (p->overlap_grad_reduce && p->pp <= 1 ? 2.0 : 1.0);
}

/* The pipeline engine's buffers on rank r (plan/stack.c [DS-pipe-buf]): for each micro-batch in flight its stage
 * output until its backward, the rank's 1/tp share with tp > 1, and with tp 1 a copy of its received input
 * beside the one the forward runs on; and the receive buffers of the activations (every rank but the first)
 * and of the gradients (every rank but the last), the 1/tp share each, kept throughout. */
static double pipe_buffer_bytes(const cost_env *env, const plan *p, const plan_stack_mem *sm, int r, double b, double s) {
  if (!sm->pipe_buffers || p->pp <= 1) return 0;
  double one = cost_boundary_bytes(env, p, b, s, true), part = one / (double)p->tp;
  bool first = r == 0, last = r == p->pp - 1;
  double out = last ? 0 : part, in = !first && p->tp == 1 ? one : 0;
  return plan_schedule_in_flight_mb(p, r) * (out + in) + (first ? 0 : part) + (last ? 0 : part);
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
  bool w_shard = p->zero_stage >= 3, g_shard = p->zero_stage >= 2, o_shard = cost_optimizer_sharded(p, &sb);
  double dense_w = w_shard ? dense / n_dp : dense, exp_w = w_shard ? expert / n_edp : expert;
  double local_shard = o_shard ? dense / n_dp + expert / n_edp : dense + expert; /* parameters of the optimizer shard */
  mem.params = sb.weights * (dense_w + exp_w);
  mem.grads = sb.grads * (g_shard ? dense / n_dp + expert / n_edp : dense + expert) + sb.unsharded * (dense + expert);
  mem.optimizer = sb.optimizer * local_shard;
  mem.step = step_bytes(p, &sm, &sb, R, local_shard);
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
   * parameters of the layer in use and the one prefetched; a DeepSpeed optimizer's reduction buckets and
   * pipeline engine's buffers (above). */
  mem.buffers = (p->tp > 1 ? 2.0 * cost_boundary_bytes(env, p, b, s, false) : 0);
  if (p->zero_stage >= 3 && R->n_layers > 0) mem.buffers += 2.0 * sb.weights * (dense + expert) / (double)R->n_layers;
  mem.buffers += bucket_bytes(p, &sm, &sb, R) + pipe_buffer_bytes(env, p, &sm, r, b, s);
  mem.workspace = mt->overhead_bytes;
  /* The allocator's reserve grows with the bytes allocated and freed through the iteration (cost.h). */
  mem.reserve = cost_reserve_fraction(env, p) * (mem.activations + mem.logits + mem.buffers + mem.step);
  /* The CUDA context (a stack's measured eagerly loaded one in its place, stack.c [BS-ctx]) and NCCL's buffers. */
  mem.context = (sm.eager_context_bytes > 0 ? sm.eager_context_bytes : mt->context_bytes) +
                mt->comm_bytes * cost_rank_nccl_comms(env, p, r);
  mem.total = mem.params + mem.grads + mem.optimizer + mem.activations + mem.logits + mem.buffers + mem.step +
              mem.workspace + mem.reserve + mem.context;
  return mem;
}
