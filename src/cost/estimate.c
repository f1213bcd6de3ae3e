/* Evaluating one plan (cost layer): per-layer compute, communication and activation costs from the model
 * graph, aggregated per pipeline rank, then the schedule, the data-parallel synchronisation and the optimizer
 * step on top. Each block (a run of identical layers) is costed once per plan and reused for its repeats. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost/calib.h"
#include "cost/internal.h"

memory_tuning memory_tuning_defaults(void) {
  return (memory_tuning){
      /* TUNING: cuBLAS/cuDNN workspaces and framework buffers inside the allocator: cuBLAS takes up to 32 MiB
       * of workspace per stream (CUDA toolkit docs, cublasSetWorkspace) and fused kernels keep a few more
       * buffers; 0.5 GiB. */
      .overhead_bytes = 0.5 * 1073741824.0,
      /* TUNING: the CUDA context takes about 0.5 GiB on Hopper and NCCL's channel buffers a few hundred MiB
       * (NCCL_BUFFSIZE 4 MiB per channel and peer); PyTorch's reserved-memory figure leaves both out. */
      .context_bytes = 0.75 * 1073741824.0,
      /* TUNING: the PyTorch caching allocator needs some slack above live bytes to place a new block; with
       * expandable segments it stays near 5% (PyTorch docs, "CUDA memory management"). */
      .fragmentation = 1.05,
      /* Megatron accumulates gradients in fp32 main_grad buffers (COSTMODEL.md §2.3: 18 = 2 + 4 + 12 bytes). */
      .grad_bytes_per_param = 4,
      /* TUNING: Megatron's fused vocab-parallel cross entropy (tensor_parallel/cross_entropy.py) works in place
       * on one fp32 copy of the 16-bit logits: 2 + 4 = 6 bytes per element. Other losses differ: flash-attn's
       * in-place cross entropy (llm-foundry's fused_crossentropy) keeps about the 2 bytes of the logits;
       * PyTorch's cross_entropy over logits upcast to fp32 (torchtitan, HF Transformers) holds at its backward
       * the log-softmax output, the incoming and the input gradient, 4 bytes each (aten
       * log_softmax_backward), 12 in all; a calibration file sets memory.loss_bytes_per_logit for such a stack
       * (docs/calibration.md). */
      .loss_bytes_per_logit = 6,
      /* TUNING: PyTorch's caching allocator rounds and caches blocks; reserved exceeds allocated by 5-20% in
       * published training runs (PyTorch docs, "CUDA memory management"). */
      .pool_fraction = 0.1,
  };
}

overlap_tuning overlap_tuning_defaults(void) {
  return (overlap_tuning){
      /* TUNING: Megatron's userbuffers TP overlap hides most of the all-gather/reduce-scatter behind the GEMMs
       * (Wang et al. 2023, "Overlap communication with dependent computation", ~80%). */
      .tp_overlap = 0.8,
      /* TUNING: bucketed gradient reduce-scatter overlaps the backward of the last micro-batch except its
       * last bucket (Megatron --overlap-grad-reduce, ddp bucket 40M parameters). */
      .dp_overlap = 0.9,
      /* TUNING: ZeRO-3 (FSDP FULL_SHARD) gathers each layer's parameters just before its forward and its
       * backward, every micro-batch: the gathers sit on the critical path of the layer they feed and prefetch
       * hides them one layer ahead only, while the NCCL kernels share SMs and HBM with the GEMMs (FSDP paper,
       * Zhao et al. 2023, §3.3 and §7.2: overlap is partial and falls with small per-layer compute); 0.7. */
      .zero3_overlap = 0.7,
      /* TUNING: ring attention sends the next KV block while computing on the current one (Liu et al. 2023,
       * Ring Attention §3); hidden when attention compute per step exceeds the transfer. */
      .cp_overlap = 0.9,
      /* TUNING: without dedicated A2A overlap the dispatch/combine all-to-alls are exposed. */
      .ep_overlap = 0.0,
      /* TUNING: Megatron overlaps pipeline send/recv with compute in the steady state (--overlap-p2p-comm). */
      .pp_overlap = 0.8,
  };
}

cost_tuning cost_tuning_defaults(void) {
  return (cost_tuning){compute_tuning_defaults(), comm_tuning_defaults(), memory_tuning_defaults(),
                       overlap_tuning_defaults()};
}

ap_status cost_env_new(ap_ctx *ctx, const ap_model *m, const ap_cluster *c, const cost_tuning *t, cost_env **out) {
  *out = NULL;
  cost_env *env = calloc(1, sizeof *env);
  if (!env || !(env->a = arena_new())) {
    free(env);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  env->model = m;
  env->g = model_graph(m);
  env->cluster = c;
  env->hc = hw_cluster_of(c);
  /* The calibration in force (--calibration, else the shipped one) when no tuning is given: its constants for
   * each node group's own device type. */
  cost_calib *cal = NULL;
  if (t) {
    env->tuning = *t;
  } else {
    cal = malloc(sizeof *cal);
    ap_status cst = cal ? calib_of_ctx(ctx, cal) : ctx_fail(ctx, AP_NOMEM, "out of memory");
    if (!cst) env->tuning = calib_tuning_for(cal, env->hc->groups[0].device.name);
    if (cst) {
      free(cal);
      cost_env_free(env);
      return cst;
    }
  }
  plan_model_facts_of(env->g, &env->facts);
  ap_status st = compute_model_init(ctx, env->a, &env->hc->groups[0].device, &env->tuning.compute, &env->cm);
  /* A compute model per node group, so that each pipeline rank is costed on its own device. */
  env->group_cm = st ? NULL : arena_alloc(env->a, sizeof(compute_model) * (size_t)env->hc->n_groups);
  if (!st && !env->group_cm) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  for (int gi = 0; !st && gi < env->hc->n_groups; gi++) {
    const hw_device *dev = &env->hc->groups[gi].device;
    compute_tuning ct = cal ? calib_tuning_for(cal, dev->name).compute : env->tuning.compute;
    if (gi == 0) env->group_cm[0] = env->cm;
    else st = compute_model_init(ctx, env->a, dev, &ct, &env->group_cm[gi]);
  }
  free(cal);
  if (st) {
    cost_env_free(env);
    return st;
  }
  /* Pipeline units: the repeats of layer blocks (or of every block for graphs without layers). */
  env->n_layers = env->facts.n_layers;
  env->memo = arena_alloc(env->a, sizeof *env->memo);
  env->unit_block = arena_alloc(env->a, sizeof(int) * (size_t)(env->n_layers > 0 ? env->n_layers : 1));
  if (!env->unit_block) {
    cost_env_free(env);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  int64_t u = 0;
  for (int i = 0; i < env->g->n_blocks; i++) {
    const graph_block *blk = &env->g->blocks[i];
    if (env->facts.has_layers && blk->role != BLOCK_LAYER) continue;
    for (int64_t r = 0; r < blk->repeat && u < env->n_layers; r++) env->unit_block[u++] = i;
  }
  *out = env;
  return AP_OK;
}

void cost_env_free(cost_env *env) {
  if (!env) return;
  arena_free(env->a);
  free(env);
}

void cost_env_set_tuning(cost_env *env, const cost_tuning *t) {
  env->tuning = *t;
  env->cm.tuning = t->compute;
  for (int gi = 0; gi < env->hc->n_groups; gi++) env->group_cm[gi].tuning = t->compute; /* */
}

const graph *cost_env_graph(const cost_env *env) { return env->g; }
const hw_cluster *cost_env_cluster(const cost_env *env) { return env->hc; }
const cost_tuning *cost_env_tuning(const cost_env *env) { return &env->tuning; }
const plan_model_facts *cost_env_facts(const cost_env *env) { return &env->facts; }
int64_t cost_env_n_layers(const cost_env *env) { return env->n_layers; }
const int *cost_env_unit_block(const cost_env *env) { return env->unit_block; }

/* comm_group_from_cluster through the environment's memo. */
static ap_status cached_group(ap_ctx *ctx, const cost_env *env, int64_t stride, int64_t size, comm_group *out) {
  group_memo *m = env->memo;
  for (int i = 0; m && i < m->n; i++)
    if (m->e[i].stride == stride && m->e[i].size == size) {
      *out = m->e[i].g;
      return AP_OK;
    }
  ap_status st = comm_group_from_cluster(ctx, env->hc, stride, size, 0, out);
  if (st || !m) return st;
  int slot = m->n < GROUP_MEMO_SIZE ? m->n++ : (m->next++ % GROUP_MEMO_SIZE);
  m->e[slot].stride = stride;
  m->e[slot].size = size;
  m->e[slot].g = *out;
  return AP_OK;
}

static ap_status axis_group(ap_ctx *ctx, const cost_env *env, const plan *p, unsigned axes, comm_group *out) {
  int64_t stride = 1, size = 1;
  if (!plan_axes_group(p, axes, &stride, &size)) {
    /* Axes that are not adjacent: cost the group as its largest member axis (a lower bound), noted in docs. */
    stride = 1;
    size = 1;
  }
  if (size <= 1) {
    *out = comm_group_flat(1, 1, 0, COMM_LINK_SCALE_UP);
    return AP_OK;
  }
  return cached_group(ctx, env, stride, size, out);
}

ap_status cost_plan_groups(ap_ctx *ctx, const cost_env *env, const plan *p, plan_groups *out) {
  ap_status st;
  const unsigned TP = 1u << PLAN_AXIS_TP, CP = 1u << PLAN_AXIS_CP, EP = 1u << PLAN_AXIS_EP, DP = 1u << PLAN_AXIS_DP,
                 EDP = 1u << PLAN_AXIS_EDP;
  if ((st = axis_group(ctx, env, p, TP, &out->tp)) || (st = axis_group(ctx, env, p, CP, &out->cp)) ||
      (st = axis_group(ctx, env, p, EP, &out->ep)) || (st = axis_group(ctx, env, p, DP | CP, &out->dp)) ||
      (st = axis_group(ctx, env, p, EDP, &out->edp)))
    return st;
  if (out->dp.n_ranks != p->dp * p->cp && p->dp * p->cp > 1) {
    if ((st = axis_group(ctx, env, p, DP, &out->dp))) return st;
  }
  /* Pipeline neighbours: two ranks one pipeline stride apart. */
  out->pp = comm_group_flat(1, 1, 0, COMM_LINK_SCALE_UP);
  if (p->pp > 1) {
    int64_t stride = plan_axis_stride(p, PLAN_AXIS_PP);
    if ((st = cached_group(ctx, env, stride, 2, &out->pp))) return st;
  }
  return AP_OK;
}

/* Sharding divisor of a saved tensor: cp for the sequence, tp when TP splits it or SP splits its sequence. */
static double tensor_divisor(const graph_tensor *t, const compute_shard *sh) {
  bool has_s = false;
  for (int i = 0; i < t->n_dims; i++) has_s |= t->dims[i] == DIM_S;
  double d = has_s ? (double)sh->cp : 1.0;
  if (t->tp_dim >= 0 || (sh->sequence_parallel && t->seq_parallel)) d *= (double)sh->tp;
  return d;
}

/* Whether per-op selective checkpointing keeps op i's output (torchtitan's selective_ac_option "op",
 * parallelize.py _custom_policy: the outputs of attention and of every matmul but each second one, counted
 * within the layer, are saved; every other op runs again in the backward pass). Router, dispatch and combine
 * are kept too: recomputing them would repeat the all-to-alls. *n_mm counts the matmuls seen so far. */
static bool op_policy_keeps(const graph_op *op, int *n_mm) {
  switch (op->kind) {
  case OP_MATMUL:
    return ++*n_mm % 2 == 1;
  case OP_ATTENTION:
  case OP_ROUTER:
  case OP_DISPATCH:
  case OP_COMBINE:
    return true;
  default:
    return false;
  }
}

/* The tensor marks saved_bytes works with: bit 1, saved; bit 2, some non-matmul op reads or saves it, so it is
 * kept in 16 bits (with fp8 GEMMs a tensor only matmuls read is kept in its fp8 copy, one byte per element:
 * NVIDIA Transformer Engine saves the quantised inputs for the weight-gradient GEMM); bit 4, an op of the block
 * produces it. Each marker sets bit 1 for its policy and returns the bytes of the dropout masks it keeps. */

/* No recompute, or selective: every op's saved tensors, except that selective recompute drops what the core
 * attention keeps for itself beyond its inputs q, k, v (the s×s scores and their masks, or flash attention's
 * statistics), as Megatron's core_attn recompute does (Korthikanti et al. 2022 §5). */
static double mark_saved(const graph_block *blk, const compute_shard *sh, double b, double s, bool selective,
                         unsigned char *mark) {
  double masks = 0;
  for (int i = 0; i < blk->n_ops; i++) {
    const graph_op *op = &blk->ops[i];
    bool sel = selective && op->kind == OP_ATTENTION;
    for (int k = 0; k < op->n_saved; k++) {
      int t = op->saved[k];
      if (sel && t != op->in[0] && t != op->in[1] && t != op->in[2]) continue;
      mark[t] |= (unsigned char)(1 | (op->kind == OP_MATMUL ? 0 : 2));
    }
    if (op->mask_of >= 0 && !sel)
      masks += graph_tensor_numel(&blk->tensors[op->mask_of], b, s) / tensor_divisor(&blk->tensors[op->mask_of], sh);
  }
  return masks;
}

/* Per-op selective checkpointing: the block input, the outputs of the kept ops (op_policy_keeps), and what a
 * kept op saves for itself that no op of the block produces (flash attention's softmax statistics, dropout
 * masks of kept ops). */
static double mark_op_policy(const graph_block *blk, const compute_shard *sh, double b, double s,
                             unsigned char *mark) {
  for (int i = 0; i < blk->n_ops; i++) {
    const graph_op *op = &blk->ops[i];
    if (op->out >= 0) mark[op->out] |= 4;
    if (op->kind != OP_MATMUL) {
      for (int k = 0; k < op->n_in; k++) mark[op->in[k]] |= 2;
      for (int k = 0; k < op->n_saved; k++) mark[op->saved[k]] |= 2;
    }
  }
  double masks = 0;
  int n_mm = 0;
  if (blk->input >= 0) mark[blk->input] |= 1;
  for (int i = 0; i < blk->n_ops; i++) {
    const graph_op *op = &blk->ops[i];
    if (!op_policy_keeps(op, &n_mm)) continue;
    if (op->out >= 0 && op->out != blk->output) mark[op->out] |= 1;
    for (int k = 0; k < op->n_saved; k++)
      if (!(mark[op->saved[k]] & 4)) mark[op->saved[k]] |= 1;
    if (op->mask_of >= 0)
      masks += graph_tensor_numel(&blk->tensors[op->mask_of], b, s) / tensor_divisor(&blk->tensors[op->mask_of], sh);
  }
  return masks;
}

/* Saved activation bytes of a block per micro-batch under a recompute policy (see plan.h). */
static double saved_bytes(const graph_block *blk, const compute_shard *sh, double b, double s, plan_recompute rc) {
  if (rc == PLAN_RECOMPUTE_FULL) {
    if (blk->input < 0) return 0;
    const graph_tensor *t = &blk->tensors[blk->input];
    return graph_tensor_bytes(t, b, s) / tensor_divisor(t, sh);
  }
  unsigned char mark_small[512];
  unsigned char *mark = blk->n_tensors <= 512 ? mark_small : calloc((size_t)blk->n_tensors, 1);
  if (!mark) return NAN;
  memset(mark, 0, blk->n_tensors <= 512 ? (size_t)blk->n_tensors : 0);
  double total = rc == PLAN_RECOMPUTE_OP ? mark_op_policy(blk, sh, b, s, mark)
                                         : mark_saved(blk, sh, b, s, rc == PLAN_RECOMPUTE_SELECTIVE, mark);
  bool fp8 = sh->gemm_dtype == HW_DTYPE_FP8;
  for (int t = 0; t < blk->n_tensors; t++) {
    if (!(mark[t] & 1)) continue;
    const graph_tensor *gt = &blk->tensors[t];
    double bytes = graph_tensor_bytes(gt, b, s);
    if (fp8 && !(mark[t] & 2) && dtype_bytes(gt->dt) == 2) bytes /= 2;
    total += bytes / tensor_divisor(gt, sh);
  }
  if (mark != mark_small) free(mark);
  return total;
}

static compute_shard shard_of(const plan *p) {
  compute_shard sh = {.tp = p->tp, .cp = p->cp, .ep = p->ep, .etp = plan_etp(p),
                      .sequence_parallel = p->sequence_parallel && p->tp > 1, .gemm_dtype = HW_DTYPE_BF16};
  if (p->precision == PLAN_PREC_FP8) sh.gemm_dtype = HW_DTYPE_FP8;
  if (p->precision == PLAN_PREC_FP16) sh.gemm_dtype = HW_DTYPE_FP16;
  return sh;
}

/* The compute model of node group g (the first group's for an index out of range). */
static const compute_model *group_model(const cost_env *env, int g) {
  return g > 0 && g < env->hc->n_groups ? &env->group_cm[g] : &env->cm;
}

/* Whether a node group's devices [first, first + n) hold any device of pipeline rank r, whose devices
 * are those d with (d / stride) mod pp = r. Steps a stride at a time, so at most pp + 1 steps find one. */
static bool group_holds_rank(int64_t first, int64_t n, int64_t stride, int64_t pp, int64_t r) {
  for (int64_t d = first; d < first + n;) {
    int64_t seg = d / stride;
    if (seg % pp == r) return true;
    d = (seg + 1) * stride;
  }
  return false;
}

int cost_rank_group(const cost_env *env, const plan *p, int64_t r, double *capacity_bytes) {
  const hw_cluster *hc = env->hc;
  int best = 0;
  double cap = (double)hc->groups[0].device.mem_bytes;
  int64_t stride = plan_axis_stride(p, PLAN_AXIS_PP);
  if (hc->n_groups > 1 && stride > 0 && p->pp > 0) {
    bool any = false;
    for (int gi = 0; gi < hc->n_groups; gi++) {
      const hw_node_group *g = &hc->groups[gi];
      if (!group_holds_rank(g->first_rank, g->n_devices, stride, p->pp, r)) continue;
      double peak = g->device.peak_flop_per_s[HW_DTYPE_BF16];
      if (!any || peak < hc->groups[best].device.peak_flop_per_s[HW_DTYPE_BF16]) best = gi;
      if (!any || (double)g->device.mem_bytes < cap) cap = (double)g->device.mem_bytes;
      any = true;
    }
  }
  if (capacity_bytes) *capacity_bytes = cap;
  return best;
}

layer_cost cost_block(const cost_env *env, const plan *p, const plan_groups *pg, int bi, double b, double s) {
  return cost_block_on(env, 0, p, pg, bi, b, s);
}

layer_cost cost_block_on(const cost_env *env, int group, const plan *p, const plan_groups *pg, int bi, double b,
                         double s) {
  const compute_model *cm = group_model(env, group);
  const graph_block *blk = &env->g->blocks[bi];
  const comm_tuning *ct = &env->tuning.comm;
  compute_shard sh = shard_of(p);
  layer_cost lc = {0};
  /* TP collectives (Shoeybi et al. 2019 §3): an all-reduce after each row-parallel matmul in the forward pass,
   * and one on the gradient of each distinct unsplit input of column-parallel matmuls in the backward pass
   * (q, k and v share one); with sequence parallelism each becomes a reduce-scatter plus an all-gather of the
   * same total volume (Korthikanti et al. 2022 §4.2.2), which a ring costs the same. */
  int n_fwd_ar = 0, n_bwd_ar = 0, n_mm = 0, n_op_recomputed = 0, n_attention = 0;
  int seen_in[64];
  int n_seen = 0;
  double ar_bytes = 0;
  for (int i = 0; i < blk->n_ops; i++) {
    const graph_op *op = &blk->ops[i];
    compute_op_time t = compute_op(cm, blk, op, b, s, &sh);
    lc.fwd_s += t.fwd_s;
    lc.bwd_s += t.bwd_s;
    lc.fwd_flop += t.fwd_flop;
    lc.bwd_flop += t.bwd_flop;
    op_cost c = graph_op_eval(blk, op, b, s);
    if (c.dgrad_flop + c.wgrad_flop > 0) lc.wgrad_s += t.bwd_s * c.wgrad_flop / (c.dgrad_flop + c.wgrad_flop);
    if (op->kind == OP_ATTENTION) {
      lc.attn_fwd_s += t.fwd_s;
      lc.attn_fwd_flop += t.fwd_flop;
      lc.recompute_sel_s += t.fwd_s;
    }
    if (!op_policy_keeps(op, &n_mm)) {
      lc.recompute_op_s += t.fwd_s;
      lc.recompute_op_flop += t.fwd_flop;
      n_op_recomputed++;
    }
    if (op->kind == OP_ATTENTION) n_attention++;
    int64_t params = graph_op_params(op);
    if (op->n_experts > 1) lc.params_expert += (double)params / (double)(p->ep * plan_etp(p));
    else lc.params_dense += op->tp_split ? (double)params / (double)p->tp : (double)params;
    if (p->tp > 1 && op->tp_split && op->n_experts == 1 &&
        (op->kind == OP_MATMUL || op->kind == OP_EMBEDDING)) {
      const graph_tensor *out = &blk->tensors[op->out];
      if (out->tp_dim < 0) {
        n_fwd_ar++;
        ar_bytes = fmax(ar_bytes, graph_tensor_bytes(out, b, s) / (double)p->cp);
      } else if (op->n_in > 0 && blk->tensors[op->in[0]].tp_dim < 0) {
        bool dup = false;
        for (int k = 0; k < n_seen; k++) dup |= seen_in[k] == op->in[0];
        if (!dup && n_seen < 64) {
          seen_in[n_seen++] = op->in[0];
          n_bwd_ar++;
          ar_bytes = fmax(ar_bytes, graph_tensor_bytes(&blk->tensors[op->in[0]], b, s) / (double)p->cp);
        }
      }
    }
    /* Context parallelism: ring attention passes each rank's K and V blocks around the ring, cp-1 steps forward
     * and the K, V and their gradients backward (Liu et al. 2023 §3; Megatron's p2p cp_comm_type). */
    if (op->kind == OP_ATTENTION && p->cp > 1) {
      double kv = (graph_tensor_bytes(&blk->tensors[op->in[1]], b, s) + graph_tensor_bytes(&blk->tensors[op->in[2]], b, s)) /
                  ((double)p->cp * (double)p->tp);
      lc.cp_comm_s += 3.0 * (double)(p->cp - 1) * comm_time_s(&pg->cp, COMM_SENDRECV, COMM_AUTO, kv, ct);
    }
    /* Expert parallelism: dispatch and combine are all-to-alls of the routed token copies, forward and backward
     * (Lepikhin et al. 2020, GShard §2.2). With fp8 GEMMs the tokens are quantised before the forward dispatch
     * and the gradients before the backward one, since the expert GEMMs take them in fp8 anyway: those two
     * carry one byte per element, both combines stay 16-bit (DeepSeek-V3 technical report 2024, §3.3.2). */
    if (op->kind == OP_DISPATCH && p->ep > 1) {
      const graph_tensor *out = &blk->tensors[op->out];
      double bytes = graph_tensor_bytes(out, b, s) / ((double)p->cp * (double)p->tp);
      double dispatch = sh.gemm_dtype == HW_DTYPE_FP8 ? bytes / 2.0 : bytes;
      int64_t k = out->n_dims >= 3 && out->dims[2] > 0 ? out->dims[2] : 1; /* [B, S, top_k, h] */
      lc.ep_comm_s += 2.0 * comm_dispatch_time_s(&pg->ep, dispatch, k, ct) + 2.0 * comm_dispatch_time_s(&pg->ep, bytes, k, ct);
    }
  }
  if (p->tp > 1 && ar_bytes > 0) {
    double one = comm_time_s(&pg->tp, COMM_ALLREDUCE, COMM_AUTO, ar_bytes, ct);
    lc.tp_comm_s = (double)(n_fwd_ar + n_bwd_ar) * one;
    /* Full recompute repeats the forward collectives (Calculon's needs_recomm, COSTMODEL.md §1.6). */
    lc.tp_recompute_comm_s = (double)n_fwd_ar * one;
  }
  /* The host issues the kernels while the GPU runs earlier ones: a layer takes the longer of its GPU time and
   * its issue time, one kernel per op forward and two backward (input and weight gradients). Small layers
   * (small models, small micro-batches, fine-grained experts) are issue-bound (the roofline of Williams et al.
   * 2009 with the host as a third resource). */
  double lat = cm->tuning.op_latency_s, issue_s = (double)blk->n_ops * lat;
  lc.fwd_s = fmax(lc.fwd_s, issue_s);
  if (2.0 * issue_s > lc.bwd_s && lc.bwd_s > 0) lc.wgrad_s *= 2.0 * issue_s / lc.bwd_s; /* its share stays */
  lc.bwd_s = fmax(lc.bwd_s, 2.0 * issue_s);
  lc.recompute_sel_s = fmax(lc.recompute_sel_s, (double)n_attention * lat);
  lc.recompute_op_s = fmax(lc.recompute_op_s, (double)n_op_recomputed * lat);
  lc.recompute_full_s = lc.fwd_s;
  for (int rc = 0; rc < PLAN_RECOMPUTE_COUNT_; rc++) lc.act_bytes[rc] = saved_bytes(blk, &sh, b, s, (plan_recompute)rc);
  lc.act_full_working_bytes = lc.act_bytes[PLAN_RECOMPUTE_NONE];
  return lc;
}

/* The layers of a chunk that pay full recompute (plan.h: the first recompute_layers of each chunk, all if 0, or
 * the chunk's own count when the plan lists chunk_recompute_layers). */
static bool layer_recomputes(const plan *p, int64_t chunk, int64_t index_in_chunk) {
  return plan_layer_recomputes(p, chunk, index_in_chunk);
}

/* The share of pipeline send/recv hidden behind compute. Megatron overlaps it only in the interleaved schedule
 * (--overlap-p2p-comm, forward_backward_pipelining_with_interleaving); its plain 1F1B and GPipe wait on each
 * blocking send/recv, as DeepSpeed's pipeline engine does; the zero-bubble schedules post them asynchronously
 * (Qi et al. 2024, §4). */
static double pp_hidden_fraction(const plan *p, const overlap_tuning *ov) {
  switch (p->schedule) {
  case PLAN_SCHED_INTERLEAVED_1F1B:
  case PLAN_SCHED_ZB_H1:
  case PLAN_SCHED_ZB_V:
    return ov->pp_overlap;
  default:
    return 0.0;
  }
}

static double exposed(double comm_s, double hide_s, double fraction) {
  double hidden = fmin(comm_s * fraction, hide_s);
  return comm_s - hidden;
}

ap_status cost_estimate(ap_ctx *ctx, const cost_env *env, const plan *p, cost_result *out) {
  memset(out, 0, sizeof *out);
  ap_status st = plan_validate(ctx, p, env->g, env->hc->n_devices, "plan");
  if (st) return st;
  /* The precision must run on every device type of the cluster (plan.h leaves this check to the cost model). */
  static const hw_dtype needs[] = {[PLAN_PREC_BF16] = HW_DTYPE_BF16, [PLAN_PREC_FP16] = HW_DTYPE_FP16,
                                   [PLAN_PREC_FP8] = HW_DTYPE_FP8};
  for (int gi = 0; gi < env->hc->n_groups; gi++) {
    const hw_device *d = &env->hc->groups[gi].device;
    if (d->peak_flop_per_s[needs[p->precision]] <= 0 || d->peak_flop_per_s[HW_DTYPE_BF16] <= 0)
      return ctx_fail(ctx, AP_UNSUPPORTED, "plan: precision %s needs %s%s support, which device %s does not state",
                      plan_precision_name(p->precision), hw_dtype_name(needs[p->precision]),
                      d->peak_flop_per_s[HW_DTYPE_BF16] <= 0 ? " and bf16" : "", d->name);
  }
  const graph *g = env->g;
  double b = (double)p->micro_batch_size;
  double s = (double)(p->seq_length > 0 ? p->seq_length : g->default_seq);
  plan_groups pg;
  if ((st = cost_plan_groups(ctx, env, p, &pg))) return st;
  const overlap_tuning *ov = &env->tuning.overlap;
  const comm_tuning *ct = &env->tuning.comm;

  int32_t chunk_layers[PLAN_MAX_CHUNKS];
  if (!plan_chunk_layers(p, env->n_layers, chunk_layers))
    return ctx_fail(ctx, AP_INVALID, "plan: cannot split %lld layers into %lld chunks", (long long)env->n_layers,
                    (long long)plan_n_chunks(p));
  layer_cost cache[256];
  bool have[256] = {0};
  int cache_group[256] = {0};
  if (g->n_blocks > 256) return ctx_fail(ctx, AP_UNSUPPORTED, "model: more than 256 distinct blocks");

  int n_ranks = (int)p->pp;
  /* Each pipeline rank's node group (its device) and memory capacity. */
  int rank_group[COST_MAX_RANKS];
  double rank_cap[COST_MAX_RANKS];
  for (int r = 0; r < n_ranks; r++) rank_group[r] = cost_rank_group(env, p, r, &rank_cap[r]);
  rank_cost rc[COST_MAX_RANKS];
  memset(rc, 0, sizeof(rank_cost) * (size_t)n_ranks);
  double rank_tp[COST_MAX_RANKS] = {0}, rank_cp[COST_MAX_RANKS] = {0}, rank_ep[COST_MAX_RANKS] = {0};
  double rank_fwd[COST_MAX_RANKS] = {0}, rank_bwd[COST_MAX_RANKS] = {0}, rank_rec[COST_MAX_RANKS] = {0};
  double hw_flop_mb = 0; /* hardware FLOP of one micro-batch over all ranks, per device of each rank */
  int64_t unit = 0;
  int64_t n_chunks = plan_n_chunks(p);
  for (int64_t c = 0; c < n_chunks; c++) {
    int r = (int)plan_chunk_rank(p, c);
    rank_cost *R = &rc[r];
    double chunk_act = 0, chunk_tf0 = R->tf, chunk_tb0 = R->tb, chunk_tw0 = R->tw;
    for (int64_t i = 0; i < chunk_layers[c]; i++, unit++) {
      int bi = env->unit_block[unit];
      if (!have[bi] || cache_group[bi] != rank_group[r]) {
        cache[bi] = cost_block_on(env, rank_group[r], p, &pg, bi, b, s);
        have[bi] = true;
        cache_group[bi] = rank_group[r];
      }
      const layer_cost *L = &cache[bi];
      bool full = layer_recomputes(p, c, i);
      layer_share sh = cost_rank_add_layer(env, p, L, full, R, &chunk_act);
      rank_fwd[r] += L->fwd_s;
      rank_bwd[r] += L->bwd_s;
      rank_rec[r] += sh.recompute_s;
      rank_tp[r] += sh.tp_exposed_s;
      rank_cp[r] += sh.cp_exposed_s;
      rank_ep[r] += sh.ep_exposed_s;
      double again = full                                     ? L->fwd_flop
                     : p->recompute == PLAN_RECOMPUTE_SELECTIVE ? L->attn_fwd_flop
                     : p->recompute == PLAN_RECOMPUTE_OP        ? L->recompute_op_flop
                                                                : 0;
      hw_flop_mb += (L->fwd_flop + again + L->bwd_flop) * (double)(p->tp * p->cp);
    }
    out->chunk_tf_s[c] = R->tf - chunk_tf0;
    out->chunk_tb_s[c] = R->tb - chunk_tb0;
    out->chunk_tw_s[c] = R->tw - chunk_tw0;
    R->act_bytes += chunk_act;
    R->act_chunk_bytes_max = fmax(R->act_chunk_bytes_max, chunk_act);
  }
  /* Non-layer blocks: the embedding with the first chunk's rank, the head with the last chunk's. */
  for (int bi = 0; bi < g->n_blocks; bi++) {
    const graph_block *blk = &g->blocks[bi];
    if (!env->facts.has_layers || blk->role == BLOCK_LAYER) continue;
    int r = (int)plan_chunk_rank(p, blk->role == BLOCK_HEAD ? n_chunks - 1 : 0);
    layer_cost L = cost_block_on(env, rank_group[r], p, &pg, bi, b, s);
    double tp_exp = L.tp_comm_s;
    rc[r].tf += L.fwd_s + tp_exp / 2;
    rc[r].tb += L.bwd_s + tp_exp / 2;
    rc[r].tw += L.wgrad_s;
    int64_t ch = blk->role == BLOCK_HEAD ? n_chunks - 1 : 0;
    out->chunk_tf_s[ch] += L.fwd_s + tp_exp / 2;
    out->chunk_tb_s[ch] += L.bwd_s + tp_exp / 2;
    out->chunk_tw_s[ch] += L.wgrad_s;
    rank_fwd[r] += L.fwd_s;
    rank_bwd[r] += L.bwd_s;
    rank_tp[r] += tp_exp;
    rc[r].act_bytes += L.act_bytes[PLAN_RECOMPUTE_NONE];
    rc[r].params_dense += L.params_dense * (double)blk->repeat;
    rc[r].has_embed |= blk->role == BLOCK_EMBED;
    rc[r].has_head |= blk->role == BLOCK_HEAD;
    hw_flop_mb += (L.fwd_flop + L.bwd_flop) * (double)(p->tp * p->cp);
  }
  /* Tied embeddings: with pp > 1 the last stage keeps its own copy of the table for the LM head (Megatron's
   * embedding group synchronises the two). */
  if (p->pp > 1)
    for (int bi = 0; bi < g->n_blocks; bi++)
      for (int k = 0; k < g->blocks[bi].n_ops; k++)
        if (g->blocks[bi].ops[k].tied) rc[(int)plan_chunk_rank(p, n_chunks - 1)].params_dense +=
              (double)(g->vocab_size * g->hidden_size) / (double)p->tp;

  /* Pipeline send/recv of one boundary activation [b, s/cp, h] (/tp with sequence parallelism). */
  double p2p_s = 0;
  if (p->pp > 1) {
    double bytes = b * s / (double)p->cp * (double)g->hidden_size * 2.0 /
                   ((p->sequence_parallel && p->tp > 1) ? (double)p->tp : 1.0);
    p2p_s = comm_time_s(&pg.pp, COMM_SENDRECV, COMM_AUTO, bytes, ct);
  }
  /* Each micro-batch crosses a rank boundary once per chunk boundary: v times per direction with interleaving
   * (every chunk hands on to the next rank), once otherwise (ZB-V turns around on the last rank). */
  double crossings = p->schedule == PLAN_SCHED_INTERLEAVED_1F1B ? (double)p->vpp : 1.0;
  for (int r = 0; r < n_ranks; r++) {
    rc[r].p2p_s = p2p_s;
    double exp_p2p = crossings * p2p_s * (1.0 - pp_hidden_fraction(p, ov));
    rc[r].tf += exp_p2p * (r > 0 || crossings > 1 ? 1 : 0);
    rc[r].tb += exp_p2p * (r < n_ranks - 1 || crossings > 1 ? 1 : 0);
  }
  out->p2p_s = p2p_s * (1.0 - pp_hidden_fraction(p, ov));
  double pipe_s = schedule_time_s(p, rc, n_ranks, &out->time);
  out->pipeline_s = pipe_s;
  /* The critical rank's breakdown: the slowest rank's share of compute and communication over m micro-batches;
   * the bubble is the rest of the pipeline time. */
  int crit = 0;
  for (int r = 1; r < n_ranks; r++)
    if (rc[r].tf + rc[r].tb > rc[crit].tf + rc[crit].tb) crit = r;
  double m = (double)p->n_micro_batches;
  out->time.forward = rank_fwd[crit] * m;
  out->time.backward = rank_bwd[crit] * m;
  out->time.recompute = rank_rec[crit] * m;
  out->time.tp_comm = rank_tp[crit] * m;
  out->time.cp_comm = rank_cp[crit] * m;
  out->time.ep_comm = rank_ep[crit] * m;
  out->time.pp_comm = crossings * p2p_s * (1.0 - pp_hidden_fraction(p, ov)) * m * (n_ranks > 1 ? 2 : 0);
  double busy = out->time.forward + out->time.backward + out->time.recompute + out->time.tp_comm +
                out->time.cp_comm + out->time.ep_comm + out->time.pp_comm;
  out->time.bubble = fmax(0, pipe_s - busy);

  /* Data-parallel synchronisation of the critical rank: gradients reduce-scattered (all-reduced without a
   * sharded optimizer) over dp·cp for dense and edp for expert parameters, parameters all-gathered after the
   * step (ZeRO §5; Megatron's distributed optimizer). ZeRO-3 gathers parameters for every micro-batch's forward
   * and backward and reduce-scatters gradients per micro-batch (FSDP). */
  double dp_exposed = 0, opt_params = 0;
  {
    const rank_cost *R = &rc[crit];
    double gb = env->tuning.memory.grad_bytes_per_param;
    double n_dp = (double)(p->dp * p->cp), n_edp = (double)plan_edp(p);
    double t_grad = 0, t_param = 0;
    comm_coll gcoll = p->zero_stage >= 1 ? COMM_REDUCE_SCATTER : COMM_ALLREDUCE;
    if (n_dp > 1) {
      t_grad += comm_time_s(&pg.dp, gcoll, COMM_AUTO, R->params_dense * gb, ct);
      if (p->zero_stage >= 1) t_param += comm_time_s(&pg.dp, COMM_ALLGATHER, COMM_AUTO, R->params_dense * 2.0, ct);
    }
    if (n_edp > 1 && R->params_expert > 0) {
      t_grad += comm_time_s(&pg.edp, gcoll, COMM_AUTO, R->params_expert * gb, ct);
      if (p->zero_stage >= 1) t_param += comm_time_s(&pg.edp, COMM_ALLGATHER, COMM_AUTO, R->params_expert * 2.0, ct);
    }
    if (p->zero_stage == 3) {
      /* Per micro-batch: gather for forward and for backward, reduce-scatter of gradients, each one collective
       * per layer (FSDP wraps every transformer block as a unit, Zhao et al. 2023 §3.2; DeepSpeed ZeRO-3
       * fetches per submodule), so the latency term counts once per layer. */
      double units = R->n_layers > 0 ? (double)R->n_layers : 1.0, u_grad = 0, u_param = 0;
      if (n_dp > 1) {
        u_grad += comm_time_s(&pg.dp, gcoll, COMM_AUTO, R->params_dense * gb / units, ct);
        u_param += comm_time_s(&pg.dp, COMM_ALLGATHER, COMM_AUTO, R->params_dense * 2.0 / units, ct);
      }
      if (n_edp > 1 && R->params_expert > 0) {
        u_grad += comm_time_s(&pg.edp, gcoll, COMM_AUTO, R->params_expert * gb / units, ct);
        u_param += comm_time_s(&pg.edp, COMM_ALLGATHER, COMM_AUTO, R->params_expert * 2.0 / units, ct);
      }
      double per_mb = units * (2 * u_param + u_grad);
      /* Gathers a layer waits on hide no better than the step's own collectives (the grid's pruning relies on
       * ZeRO-3 never beating ZeRO-2 on time). */
      dp_exposed = exposed(per_mb * m, (R->tf + R->tb) * m, fmin(ov->zero3_overlap, ov->dp_overlap));
    } else if (p->zero_stage == 2) {
      /* Sharded gradients cannot accumulate locally over micro-batches: every micro-batch's backward reduce-
       * scatters them (DeepSpeed stage 2, FSDP SHARD_GRAD_OP); parameters are gathered once per step. */
      dp_exposed = exposed(t_grad * m, R->tb * m, ov->dp_overlap);
      dp_exposed += p->overlap_param_gather ? exposed(t_param, R->tf, ov->dp_overlap) : t_param;
    } else {
      dp_exposed = p->overlap_grad_reduce ? exposed(t_grad, R->tb, ov->dp_overlap) : t_grad;
      dp_exposed += p->overlap_param_gather ? exposed(t_param, R->tf, ov->dp_overlap) : t_param;
    }
    bool shard = p->zero_stage >= 1;
    opt_params = R->params_dense / (shard && n_dp > 0 ? n_dp : 1) + R->params_expert / (shard && n_edp > 0 ? n_edp : 1);
  }
  out->time.dp_comm = dp_exposed;
  /* Adam step: read fp32 parameter, gradient, two moments; write parameter, moments and the 16-bit copy: about
   * 30 bytes per parameter of the local optimizer shard, memory-bound (Kingma & Ba 2015; ZeRO §3.1 layout). */
  out->time.optimizer = opt_params * 30.0 / (group_model(env, rank_group[crit])->device.mem_bw_Bps * env->tuning.compute.mem_eff);
  out->iter_s = pipe_s + out->time.dp_comm + out->time.optimizer;

  /* Memory per pipeline rank. */
  out->n_ranks = n_ranks;
  /* The peak rank is the one with the least headroom on its own device; on one device type, the
   * one with the most bytes. capacity_bytes is that rank's device memory. */
  out->capacity_bytes = rank_cap[0];
  out->peak_mem_bytes = 0;
  for (int r = 0; r < n_ranks; r++) {
    out->mem[r] = memory_rank(env, p, rc, r, b, s);
    bool fuller = rank_cap[r] == out->capacity_bytes
                      ? out->mem[r].total > out->peak_mem_bytes
                      : out->mem[r].total / rank_cap[r] > out->peak_mem_bytes / out->capacity_bytes;
    if (fuller) {
      out->peak_mem_bytes = out->mem[r].total;
      out->peak_rank = r;
      out->capacity_bytes = rank_cap[r];
    }
  }
  out->fits = out->peak_mem_bytes <= out->capacity_bytes;

  /* Throughput and FLOP conventions. */
  double n_dev = (double)plan_n_devices(p);
  out->tokens_per_iter = (double)p->global_batch_size * s;
  out->tokens_per_s = out->tokens_per_iter / out->iter_s;
  out->tokens_per_s_per_device = out->tokens_per_s / n_dev;
  double gemm_tok = graph_train_flop_per_seq(g, s, true) / s;
  double quad_tok = 0, embed_params = 0;
  for (int bi = 0; bi < g->n_blocks; bi++) {
    op_cost c = graph_block_eval(&g->blocks[bi], 1, s);
    quad_tok += 3.0 * c.attn_quadratic_flop / s * (double)g->blocks[bi].repeat;
    for (int k = 0; k < g->blocks[bi].n_ops; k++) {
      const graph_op *op = &g->blocks[bi].ops[k];
      if (op->kind == OP_EMBEDDING) {
        bool tied_table = false;
        for (int j = 0; j < g->n_blocks; j++)
          for (int q = 0; q < g->blocks[j].n_ops; q++) tied_table |= g->blocks[j].ops[q].tied;
        if (!(tied_table && strcmp(op->name, "token_embedding") == 0)) embed_params += (double)graph_op_params(op);
      }
    }
  }
  double attn_tok = 0;
  for (int bi = 0; bi < g->n_blocks; bi++)
    for (int k = 0; k < g->blocks[bi].n_ops; k++)
      if (g->blocks[bi].ops[k].kind == OP_ATTENTION) {
        op_cost c = graph_op_eval(&g->blocks[bi], &g->blocks[bi].ops[k], 1, s);
        attn_tok += 3.0 * c.fwd_gemm_flop / s * (double)g->blocks[bi].repeat;
      }
  /* PaLM Appendix B: 6·N (matmul parameters, active for MoE) + the attention term, no causal discount. */
  double palm_tok = 6.0 * ((double)graph_params_active(g) - embed_params) + attn_tok;
  out->flop_palm = palm_tok * out->tokens_per_iter;
  out->flop_megatron = (gemm_tok - 0.5 * quad_tok) * out->tokens_per_iter;
  out->flop_hardware = hw_flop_mb * m * (double)(p->dp);
  double peak = env->cm.device.peak_flop_per_s[HW_DTYPE_BF16];
  /* Node groups of different devices: the device-weighted mean peak. */
  for (int gi = 1; gi < env->hc->n_groups; gi++)
    if (env->hc->groups[gi].device.peak_flop_per_s[HW_DTYPE_BF16] != peak) {
      double sum = 0;
      for (int k = 0; k < env->hc->n_groups; k++)
        sum += env->hc->groups[k].device.peak_flop_per_s[HW_DTYPE_BF16] * (double)env->hc->groups[k].n_devices;
      peak = sum / (double)env->hc->n_devices;
      break;
    }
  out->mfu_palm = out->flop_palm / (out->iter_s * n_dev * peak);
  out->mfu_megatron = out->flop_megatron / (out->iter_s * n_dev * peak);
  out->hfu = out->flop_hardware / (out->iter_s * n_dev * peak);
  out->tflops_per_device_palm = out->flop_palm / (out->iter_s * n_dev) / 1e12;
  out->tflops_per_device_megatron = out->flop_megatron / (out->iter_s * n_dev) / 1e12;
  double comm = out->time.tp_comm + out->time.cp_comm + out->time.ep_comm + out->time.pp_comm + out->time.dp_comm;
  out->bound = !out->fits ? "memory"
               : out->time.bubble > comm && out->time.bubble > 0.15 * out->iter_s ? "bubble"
               : comm > 0.25 * out->iter_s ? "communication"
                                          : "compute";
  return AP_OK;
}

/* ---- Piecewise costs for the searches (internal.h): cost_estimate's accumulation above, one piece at a time,
 * so that a DP over pipeline splits (search/stage_dp.c, layer_dp.c, hetero.c) predicts the finished plan's
 * rank costs. Each mirrors the corresponding lines of cost_estimate; tests/test_stage_dp.c and
 * test_layer_dp.c check that the two agree. ---- */

layer_share cost_rank_add_layer(const cost_env *env, const plan *p, const layer_cost *L, bool full, rank_cost *R,
                                double *chunk_act_bytes) {
  const overlap_tuning *ov = &env->tuning.overlap;
  bool sel = p->recompute == PLAN_RECOMPUTE_SELECTIVE, op = p->recompute == PLAN_RECOMPUTE_OP;
  layer_share sh = {0};
  sh.recompute_s = full ? L->recompute_full_s : sel ? L->recompute_sel_s : op ? L->recompute_op_s : 0;
  plan_recompute pol = full ? PLAN_RECOMPUTE_FULL : (sel || op) ? p->recompute : PLAN_RECOMPUTE_NONE;
  /* A layer that recomputes repeats its forward TP collectives. */
  double tp_all = L->tp_comm_s + (full ? L->tp_recompute_comm_s : 0);
  sh.tp_exposed_s = p->tp_comm_overlap ? exposed(tp_all, L->fwd_s + L->bwd_s, ov->tp_overlap) : tp_all;
  sh.cp_exposed_s = exposed(L->cp_comm_s, 3 * L->attn_fwd_s, ov->cp_overlap);
  sh.ep_exposed_s = exposed(L->ep_comm_s, L->fwd_s + L->bwd_s, ov->ep_overlap);
  double comm = sh.tp_exposed_s + sh.cp_exposed_s + sh.ep_exposed_s;
  R->tf += L->fwd_s + comm / 3.0;
  R->tb += L->bwd_s + sh.recompute_s + 2.0 * comm / 3.0;
  R->tw += L->wgrad_s;
  *chunk_act_bytes += L->act_bytes[pol];
  if (full) R->working_bytes = fmax(R->working_bytes, L->act_full_working_bytes);
  /* Per-op checkpointing rebuilds one layer's dropped tensors at a time during the backward pass. */
  if (op) R->working_bytes = fmax(R->working_bytes, L->act_full_working_bytes - L->act_bytes[PLAN_RECOMPUTE_OP]);
  R->params_dense += L->params_dense;
  R->params_expert += L->params_expert;
  R->n_layers++;
  return sh;
}

void cost_rank_end_chunk(rank_cost *R, double chunk_act_bytes) {
  R->act_bytes += chunk_act_bytes;
  R->act_chunk_bytes_max = fmax(R->act_chunk_bytes_max, chunk_act_bytes);
}

void cost_rank_extras(const cost_env *env, const plan *p, const plan_groups *pg, int r, rank_cost *out) {
  memset(out, 0, sizeof *out);
  const graph *g = env->g;
  const overlap_tuning *ov = &env->tuning.overlap;
  double b = (double)p->micro_batch_size;
  double s = (double)(p->seq_length > 0 ? p->seq_length : g->default_seq);
  int64_t n_chunks = plan_n_chunks(p);
  int group = cost_rank_group(env, p, r, NULL);
  for (int bi = 0; bi < g->n_blocks; bi++) {
    const graph_block *blk = &g->blocks[bi];
    if (!env->facts.has_layers || blk->role == BLOCK_LAYER) continue;
    if (plan_chunk_rank(p, blk->role == BLOCK_HEAD ? n_chunks - 1 : 0) != r) continue;
    layer_cost L = cost_block_on(env, group, p, pg, bi, b, s);
    out->tf += L.fwd_s + L.tp_comm_s / 2;
    out->tb += L.bwd_s + L.tp_comm_s / 2;
    out->tw += L.wgrad_s;
    out->act_bytes += L.act_bytes[PLAN_RECOMPUTE_NONE];
    out->params_dense += L.params_dense * (double)blk->repeat;
    out->has_embed |= blk->role == BLOCK_EMBED;
    out->has_head |= blk->role == BLOCK_HEAD;
  }
  if (p->pp > 1 && plan_chunk_rank(p, n_chunks - 1) == r)
    for (int bi = 0; bi < g->n_blocks; bi++)
      for (int k = 0; k < g->blocks[bi].n_ops; k++)
        if (g->blocks[bi].ops[k].tied) out->params_dense += (double)(g->vocab_size * g->hidden_size) / (double)p->tp;
  if (p->pp > 1) {
    double bytes = b * s / (double)p->cp * (double)g->hidden_size * 2.0 /
                   ((p->sequence_parallel && p->tp > 1) ? (double)p->tp : 1.0);
    out->p2p_s = comm_time_s(&pg->pp, COMM_SENDRECV, COMM_AUTO, bytes, &env->tuning.comm);
    /* As in cost_estimate: v crossings per direction with interleaving, one otherwise. */
    double crossings = p->schedule == PLAN_SCHED_INTERLEAVED_1F1B ? (double)p->vpp : 1.0;
    double exp_p2p = crossings * out->p2p_s * (1.0 - pp_hidden_fraction(p, ov));
    out->tf += exp_p2p * (r > 0 || crossings > 1 ? 1 : 0);
    out->tb += exp_p2p * (r < p->pp - 1 || crossings > 1 ? 1 : 0);
  }
}

void cost_rank_merge(rank_cost *into, const rank_cost *from) {
  into->tf += from->tf;
  into->tb += from->tb;
  into->tw += from->tw;
  into->act_bytes += from->act_bytes;
  into->act_chunk_bytes_max = fmax(into->act_chunk_bytes_max, from->act_chunk_bytes_max);
  into->working_bytes = fmax(into->working_bytes, from->working_bytes);
  into->params_dense += from->params_dense;
  into->params_expert += from->params_expert;
  into->p2p_s = fmax(into->p2p_s, from->p2p_s);
  into->has_embed |= from->has_embed;
  into->has_head |= from->has_head;
}
