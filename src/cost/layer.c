/* The cost of one layer (cost layer): compute, tensor-, context- and expert-parallel communication, recompute,
 * saved activations and parameters of one block repeat for one micro-batch on one device of its pipeline rank,
 * from the ops of the graph (compute.c prices each op, comm.c each collective, activations.c the saved bytes).
 * rank.c adds layers to pipeline ranks; estimate.c calls it once per distinct block and device type. */
#include <math.h>

#include "cost/internal.h"
#include "plan/stack.h"

/* Whether plan p's stack waits on the tokens per expert in every MoE forward (plan_stack_info.moe_host_sync). */
static bool cost_stack_moe_host_sync(const cost_env *env, const plan *p) {
  const plan_stack_info *st =
      plan_stack_get(p->stack == PLAN_STACK_DEFAULT ? plan_stack_default(env->facts.has_layers) : p->stack);
  return st && st->moe_host_sync;
}

layer_cost cost_block(const cost_env *env, const plan *p, const plan_groups *pg, int bi, double b, double s) {
  return cost_block_on(env, 0, p, pg, bi, b, s);
}

layer_cost cost_block_on(const cost_env *env, int group, const plan *p, const plan_groups *pg, int bi, double b,
                         double s) {
  const compute_model *cm = cost_group_model(env, group);
  const graph_block *blk = &env->g->blocks[bi];
  if (cost_exec_cpu_on(env, group, p)) return cost_exec_cpu_block(env, group, p, blk, b, s); /* exec_cpu.c */
  const comm_tuning *ct = &env->tuning.comm;
  compute_shard sh = cost_shard_of(p);
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
    if (!cost_op_policy_keeps(op, &n_mm)) {
      lc.recompute_op_s += t.fwd_s;
      lc.recompute_op_flop += t.fwd_flop;
      n_op_recomputed++;
    }
    if (op->kind == OP_ATTENTION) n_attention++;
    int64_t params = graph_op_params(op);
    if (op->n_experts > 1) {
      lc.params_expert += (double)params / (double)(p->ep * plan_etp(p));
      lc.param_max = fmax(lc.param_max, (double)params / (double)(op->n_experts * plan_etp(p)));
    } else {
      lc.params_dense += op->tp_split ? (double)params / (double)p->tp : (double)params;
      lc.param_max = fmax(lc.param_max, op->tp_split ? (double)params / (double)p->tp : (double)params);
    }
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
  /* A MoE layer of a stack that waits on the tokens per expert in every forward (plan/stack.c [MLM-moe-sync])
   * starts each layer with an empty GPU queue: the layer cannot take less than the host's time to issue it,
   * moe_host_s forward and backward (tuning.c), split as the kernels are (one forward, two backward). */
  if (blk->is_moe && cost_stack_moe_host_sync(env, p)) {
    double h = cm->tuning.moe_host_s;
    lc.fwd_s = fmax(lc.fwd_s, h / 3.0);
    if (2.0 * h / 3.0 > lc.bwd_s && lc.bwd_s > 0) lc.wgrad_s *= 2.0 * h / 3.0 / lc.bwd_s;
    lc.bwd_s = fmax(lc.bwd_s, 2.0 * h / 3.0);
  }
  lc.recompute_sel_s = fmax(lc.recompute_sel_s, (double)n_attention * lat);
  lc.recompute_op_s = fmax(lc.recompute_op_s, (double)n_op_recomputed * lat);
  lc.recompute_full_s = lc.fwd_s;
  for (int rc = 0; rc < PLAN_RECOMPUTE_COUNT_; rc++) lc.act_bytes[rc] = cost_saved_bytes(blk, &sh, b, s, (plan_recompute)rc);
  lc.act_full_working_bytes = lc.act_bytes[PLAN_RECOMPUTE_NONE];
  return lc;
}
