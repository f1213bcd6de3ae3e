/* Evaluating one plan (cost layer): the whole-plan aggregation. Each pipeline rank is built from the pieces of
 * rank.c (its chunks' layers, costed once per distinct block and device type by layer.c, then its non-layer
 * blocks and pipeline sends), exactly as the searches that build a split piece by piece build it; on top come
 * the schedule (schedule.c), the data-parallel synchronisation and the optimizer step, memory per rank
 * (memory.c), throughput and the FLOP conventions (flops.c). */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "cost/internal.h"
#include "plan/stack.h"

/* Data-parallel synchronisation of rank R, exposed seconds per iteration: gradients reduce-scattered
 * (all-reduced without a sharded optimizer) over dp·cp for dense and edp for expert parameters, parameters
 * all-gathered after the step (ZeRO §5; Megatron's distributed optimizer). ZeRO-3 gathers parameters for every
 * micro-batch's forward and backward and reduce-scatters gradients per micro-batch (FSDP). *opt_params receives
 * the parameters of R's local optimizer shard. */
static double dp_sync_s(const cost_env *env, const plan *p, const plan_groups *pg, const rank_cost *R,
                        double *opt_params) {
  const overlap_tuning *ov = &env->tuning.overlap;
  const comm_tuning *ct = &env->tuning.comm;
  cost_state_bytes sb = cost_state_bytes_plan(&env->tuning.memory, p, env->facts.has_layers);
  /* An optimizer that shards itself without ZeRO all-reduces its fp32 accumulators and gathers the weights
   * after its step (plan/stack.c [DS-bf16]). */
  bool shard = cost_optimizer_sharded(p, &sb);
  double gb = sb.zero1_without_zero ? sb.unsharded : sb.grads, wb = sb.weights, m = (double)p->n_micro_batches;
  double n_dp = (double)(p->dp * p->cp), n_edp = (double)plan_edp(p);
  double t_grad = 0, t_param = 0, dp_exposed = 0;
  comm_coll gcoll = p->zero_stage >= 1 ? COMM_REDUCE_SCATTER : COMM_ALLREDUCE;
  if (n_dp > 1) {
    t_grad += comm_time_s(&pg->dp, gcoll, COMM_AUTO, R->params_dense * gb, ct);
    if (shard) t_param += comm_time_s(&pg->dp, COMM_ALLGATHER, COMM_AUTO, R->params_dense * wb, ct);
  }
  if (n_edp > 1 && R->params_expert > 0) {
    t_grad += comm_time_s(&pg->edp, gcoll, COMM_AUTO, R->params_expert * gb, ct);
    if (shard) t_param += comm_time_s(&pg->edp, COMM_ALLGATHER, COMM_AUTO, R->params_expert * wb, ct);
  }
  if (p->zero_stage == 3) {
    /* Per micro-batch: gather for forward and for backward, reduce-scatter of gradients, each one collective
     * per layer (FSDP wraps every transformer block as a unit, Zhao et al. 2023 §3.2; DeepSpeed ZeRO-3
     * fetches per submodule), so the latency term counts once per layer. */
    double units = R->n_layers > 0 ? (double)R->n_layers : 1.0, u_grad = 0, u_param = 0;
    if (n_dp > 1) {
      u_grad += comm_time_s(&pg->dp, gcoll, COMM_AUTO, R->params_dense * gb / units, ct);
      u_param += comm_time_s(&pg->dp, COMM_ALLGATHER, COMM_AUTO, R->params_dense * wb / units, ct);
    }
    if (n_edp > 1 && R->params_expert > 0) {
      u_grad += comm_time_s(&pg->edp, gcoll, COMM_AUTO, R->params_expert * gb / units, ct);
      u_param += comm_time_s(&pg->edp, COMM_ALLGATHER, COMM_AUTO, R->params_expert * wb / units, ct);
    }
    double per_mb = units * (2 * u_param + u_grad);
    /* Gathers a layer waits on hide no better than the step's own collectives (the grid's pruning relies on
     * ZeRO-3 never beating ZeRO-2 on time). */
    dp_exposed = cost_exposed_s(per_mb * m, (R->tf + R->tb) * m, fmin(ov->zero3_overlap, ov->dp_overlap));
  } else if (p->zero_stage == 2) {
    /* Sharded gradients cannot accumulate locally over micro-batches: every micro-batch's backward reduce-
     * scatters them (DeepSpeed stage 2, FSDP SHARD_GRAD_OP); parameters are gathered once per step. */
    dp_exposed = cost_exposed_s(t_grad * m, R->tb * m, ov->dp_overlap);
    dp_exposed += p->overlap_param_gather ? cost_exposed_s(t_param, R->tf, ov->dp_overlap) : t_param;
  } else {
    /* A stack whose pipeline engine reduces after the last backward (plan/stack.h pp_sync_after: DeepSpeed's
     * TrainSchedule) hides none of it behind compute. */
    const plan_stack_info *st = plan_stack_get(p->stack);
    bool after = p->pp > 1 && st && st->pp_sync_after;
    dp_exposed = p->overlap_grad_reduce && !after ? cost_exposed_s(t_grad, R->tb, ov->dp_overlap) : t_grad;
    dp_exposed += p->overlap_param_gather && !after ? cost_exposed_s(t_param, R->tf, ov->dp_overlap) : t_param;
  }
  *opt_params = R->params_dense / (shard && n_dp > 0 ? n_dp : 1) + R->params_expert / (shard && n_edp > 0 ? n_edp : 1);
  return dp_exposed;
}

/* The precision must run on every device type of the cluster (plan.h leaves this check to the cost model). */
static ap_status check_precision(ap_ctx *ctx, const cost_env *env, const plan *p) {
  hw_dtype need = cost_gemm_dtype(p->precision);
  for (int gi = 0; gi < env->hc->n_groups; gi++) {
    const hw_device *d = &env->hc->groups[gi].device;
    if (d->peak_flop_per_s[need] <= 0 || d->peak_flop_per_s[HW_DTYPE_BF16] <= 0)
      return ctx_fail(ctx, AP_UNSUPPORTED, "plan: precision %s needs %s%s support, which device %s does not state",
                      plan_precision_name(p->precision), hw_dtype_name(need),
                      d->peak_flop_per_s[HW_DTYPE_BF16] <= 0 ? " and bf16" : "", d->name);
  }
  return AP_OK;
}

/* Clears *out but for the entries of its per-rank and per-chunk arrays past the first n_ranks and n_chunks,
 * which no reader looks at (they go by n_ranks and the plan's chunks): most of a cost_result's 29 kB is those
 * arrays, and a search costs thousands of plans into one result. Everything between and after the arrays is
 * cleared by address, so a field added anywhere is cleared too. */
_Static_assert(offsetof(cost_result, mem) < offsetof(cost_result, chunk_tf_s) &&
                   offsetof(cost_result, chunk_tb_s) == offsetof(cost_result, chunk_tf_s) + sizeof(double[PLAN_MAX_CHUNKS]) &&
                   offsetof(cost_result, chunk_tw_s) == offsetof(cost_result, chunk_tb_s) + sizeof(double[PLAN_MAX_CHUNKS]),
               "result_clear: the per-chunk arrays follow mem[], one after the other");
static void result_clear(cost_result *out, int64_t n_ranks, int64_t n_chunks) {
  char *base = (char *)out;
  memset(base, 0, (size_t)((char *)out->mem - base));
  memset(out->mem, 0, sizeof out->mem[0] * (size_t)n_ranks);
  char *after_mem = (char *)(out->mem + COST_MAX_RANKS);
  memset(after_mem, 0, (size_t)((char *)out->chunk_tf_s - after_mem));
  memset(out->chunk_tf_s, 0, sizeof out->chunk_tf_s[0] * (size_t)n_chunks);
  memset(out->chunk_tb_s, 0, sizeof out->chunk_tb_s[0] * (size_t)n_chunks);
  memset(out->chunk_tw_s, 0, sizeof out->chunk_tw_s[0] * (size_t)n_chunks);
  char *after_chunks = (char *)(out->chunk_tw_s + PLAN_MAX_CHUNKS);
  memset(after_chunks, 0, (size_t)(base + sizeof *out - after_chunks));
}

ap_status cost_estimate(ap_ctx *ctx, const cost_env *env, const plan *p, cost_result *out) {
  result_clear(out, 0, 0); /* the plan's counts are known valid only after plan_validate */
  ap_status st = plan_validate(ctx, p, env->g, env->hc->n_devices, "plan");
  if (st || (st = check_precision(ctx, env, p))) return st;
  result_clear(out, p->pp, plan_n_chunks(p));
  const graph *g = env->g;
  double b = (double)p->micro_batch_size, s = cost_seq_len(env, p);
  plan_groups pg;
  if ((st = cost_plan_groups(ctx, env, p, &pg))) return st;

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
  /* The layers of each chunk, added to the chunk's rank (rank.c); each distinct block is costed once per
   * device type. The per-chunk times are what the simulator runs. */
  int64_t unit = 0, n_chunks = plan_n_chunks(p);
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
      cost_rank_add_layer(env, p, &cache[bi], plan_layer_recomputes(p, c, i), R, &chunk_act);
    }
    out->chunk_tf_s[c] = R->tf - chunk_tf0;
    out->chunk_tb_s[c] = R->tb - chunk_tb0;
    out->chunk_tw_s[c] = R->tw - chunk_tw0;
    cost_rank_end_chunk(R, chunk_act);
  }
  /* What each rank holds besides its layers (rank.c); the non-layer blocks ride with the first and last chunk. */
  double p2p_s = 0, hw_flop_mb = 0;
  for (int r = 0; r < n_ranks; r++) {
    cost_rank_add_extras(env, p, &pg, r, &rc[r]);
    p2p_s = fmax(p2p_s, rc[r].p2p_s);
    hw_flop_mb += rc[r].hw_flop;
  }
  out->p2p_s = cost_p2p_exposed_s(env, p, p2p_s);
  double pipe_s = schedule_pipeline_s(p, rc, n_ranks, out->chunk_tf_s, out->chunk_tb_s, out->chunk_tw_s, &out->time);
  /* The reference executor runs the schedule's lists as they are (src/exec/rank_pipe.c, the lists of
   * plan/schedule.h): its pipeline time is the simulator's replay of them with these chunk times (sim.c), not
   * the closed forms, whose ZB-V fill is fitted to the frameworks (tuning.c). The two agree on the other kinds
   * (tests/test_closed_form.c); on bench/executor.py's zb-v plan the closed form said 0.326 s, the replay
   * 0.280 s and the executor measured 0.291 s of CPU a step (2026-12-01, load 8.8). */
  if (p->pp > 1 && cost_exec_cpu_on(env, rank_group[0], p)) {
    ap_status sst = sim_pipeline(ctx, p, out, 0, NULL, NULL, &pipe_s);
    if (sst) return sst;
  }
  out->pipeline_s = pipe_s;
  /* The critical rank's breakdown: the slowest rank's share of compute and communication over m micro-batches;
   * the bubble is the rest of the pipeline time. */
  int crit = 0;
  for (int r = 1; r < n_ranks; r++)
    if (rc[r].tf + rc[r].tb > rc[crit].tf + rc[crit].tb) crit = r;
  double m = (double)p->n_micro_batches;
  const rank_cost *C = &rc[crit];
  out->time.forward = C->fwd_s * m;
  out->time.backward = C->bwd_s * m;
  out->time.recompute = C->recompute_s * m;
  out->time.tp_comm = C->tp_s * m;
  out->time.cp_comm = C->cp_s * m;
  out->time.ep_comm = C->ep_s * m;
  out->time.pp_comm = cost_pp_comm_per_mb_s(env, p, p2p_s) * m;
  double busy = out->time.forward + out->time.backward + out->time.recompute + out->time.tp_comm +
                out->time.cp_comm + out->time.ep_comm + out->time.pp_comm;
  out->time.bubble = fmax(0, pipe_s - busy);
  double opt_params = 0;
  out->time.dp_comm = dp_sync_s(env, p, &pg, C, &opt_params);
  out->time.optimizer = cost_optimizer_step_s(env, rank_group[crit], opt_params);
  if (cost_exec_cpu_on(env, rank_group[crit], p)) /* the reference executor's step end (exec_cpu.c) */
    cost_exec_cpu_step(env, p, rc, n_ranks, &out->time.dp_comm, &out->time.optimizer);
  /* Offload (offload.c): the step runs on the host instead, and the moved states cross the host link. */
  ap_status ost = cost_offload(ctx, env, p, rank_group[crit], opt_params, &out->time.offload, &out->host_mem_bytes,
                               &out->nvme_bytes);
  if (ost) return ost;
  if (p->offload_optimizer != PLAN_OFFLOAD_NONE) out->time.optimizer = 0;
  out->host_capacity_bytes =
      out->host_mem_bytes > 0 ? cost_env_cluster(env)->groups[rank_group[crit]].host.mem_bytes : 0;
  out->nvme_capacity_bytes = out->nvme_bytes > 0 ? cost_env_cluster(env)->groups[rank_group[crit]].host.nvme_bytes : 0;
  out->iter_s = pipe_s + out->time.dp_comm + out->time.optimizer + out->time.offload;

  /* Memory per pipeline rank. The peak rank is the one with the least headroom on its own device; on one
   * device type, the one with the most bytes. capacity_bytes is that rank's device memory. */
  out->n_ranks = n_ranks;
  out->capacity_bytes = rank_cap[0];
  out->reserve_fraction = cost_reserve_fraction(env, p);
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
  /* NVMe capacity is checked where the cluster states it (else the answer says it was not: cost/assume.c). */
  out->fits = out->peak_mem_bytes <= out->capacity_bytes && out->host_mem_bytes <= out->host_capacity_bytes &&
              !(out->nvme_capacity_bytes > 0 && out->nvme_bytes > out->nvme_capacity_bytes);

  /* Throughput and FLOP conventions (flops.c). */
  double n_dev = (double)plan_n_devices(p);
  out->tokens_per_iter = (double)p->global_batch_size * s;
  out->tokens_per_s = out->tokens_per_iter / out->iter_s;
  out->tokens_per_s_per_device = out->tokens_per_s / n_dev;
  cost_flop_conventions(env, p, s, hw_flop_mb * m * (double)p->dp, out);
  double comm = out->time.tp_comm + out->time.cp_comm + out->time.ep_comm + out->time.pp_comm + out->time.dp_comm;
  /* Offload-bound: the host link, the CPU's optimizer step and NVMe take most of the iteration (offload.c). */
  out->bound = !out->fits ? "memory"
               : out->time.offload > 0.5 * out->iter_s ? "offload"
               : out->time.bubble > comm && out->time.bubble > 0.15 * out->iter_s ? "bubble"
               : comm > 0.25 * out->iter_s ? "communication"
                                          : "compute";
  return AP_OK;
}
