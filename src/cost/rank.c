/* Pipeline ranks, piece by piece (cost layer): what one layer, one finished chunk and a rank's non-layer blocks
 * and pipeline sends add to a rank_cost. cost_estimate (estimate.c) aggregates a whole plan with exactly these
 * functions, and the searches that build a pipeline split chunk by chunk (search/stage_dp.c, layer_dp.c,
 * hetero.c) call the same ones, so a dynamic programme over splits predicts the finished plan's pipeline time
 * and memory as cost_estimate computes them (tests/test_stage_dp.c and test_layer_dp.c check it). */
#include <math.h>
#include <string.h>

#include "cost/internal.h"
#include "plan/schedule.h"

double cost_p2p_exposed_s(const cost_env *env, const plan *p, double p2p_s) {
  /* Only a schedule that posts its sends asynchronously hides any (plan/schedule.h). */
  return p2p_s * (1.0 - (plan_schedule_async_p2p(p) ? env->tuning.overlap.pp_overlap : 0.0));
}

double cost_pp_comm_per_mb_s(const cost_env *env, const plan *p, double p2p_s) {
  return p->pp > 1 ? 2.0 * (double)plan_schedule_p2p_crossings(p) * cost_p2p_exposed_s(env, p, p2p_s) : 0.0;
}

double cost_exposed_s(double comm_s, double hide_s, double fraction) {
  double hidden = fmin(comm_s * fraction, hide_s);
  return comm_s - hidden;
}

layer_share cost_rank_add_layer(const cost_env *env, const plan *p, const layer_cost *L, bool full, rank_cost *R,
                                double *chunk_act_bytes) {
  const overlap_tuning *ov = &env->tuning.overlap;
  bool sel = p->recompute == PLAN_RECOMPUTE_SELECTIVE, op = p->recompute == PLAN_RECOMPUTE_OP;
  layer_share sh = {0};
  sh.recompute_s = full ? L->recompute_full_s : sel ? L->recompute_sel_s : op ? L->recompute_op_s : 0;
  plan_recompute pol = full ? PLAN_RECOMPUTE_FULL : (sel || op) ? p->recompute : PLAN_RECOMPUTE_NONE;
  /* A layer that recomputes repeats its forward TP collectives. */
  double tp_all = L->tp_comm_s + (full ? L->tp_recompute_comm_s : 0);
  sh.tp_exposed_s = p->tp_comm_overlap ? cost_exposed_s(tp_all, L->fwd_s + L->bwd_s, ov->tp_overlap) : tp_all;
  sh.cp_exposed_s = cost_exposed_s(L->cp_comm_s, 3 * L->attn_fwd_s, ov->cp_overlap);
  sh.ep_exposed_s = cost_exposed_s(L->ep_comm_s, L->fwd_s + L->bwd_s, ov->ep_overlap);
  double comm = sh.tp_exposed_s + sh.cp_exposed_s + sh.ep_exposed_s;
  R->tf += L->fwd_s + comm / 3.0;
  R->tb += L->bwd_s + sh.recompute_s + 2.0 * comm / 3.0;
  R->chunk_t_s += L->fwd_s + L->bwd_s + sh.recompute_s + comm;
  R->tw += L->wgrad_s;
  R->fwd_s += L->fwd_s;
  R->bwd_s += L->bwd_s;
  R->recompute_s += sh.recompute_s;
  R->tp_s += sh.tp_exposed_s;
  R->cp_s += sh.cp_exposed_s;
  R->ep_s += sh.ep_exposed_s;
  /* What the devices execute: the forward again for what the policy recomputes. */
  double again = full ? L->fwd_flop : sel ? L->attn_fwd_flop : op ? L->recompute_op_flop : 0;
  R->hw_flop += (L->fwd_flop + again + L->bwd_flop) * (double)(p->tp * p->cp);
  *chunk_act_bytes += L->act_bytes[pol];
  if (full) R->working_bytes = fmax(R->working_bytes, L->act_full_working_bytes);
  /* Per-op checkpointing rebuilds one layer's dropped tensors at a time during the backward pass. */
  if (op) R->working_bytes = fmax(R->working_bytes, L->act_full_working_bytes - L->act_bytes[PLAN_RECOMPUTE_OP]);
  R->params_dense += L->params_dense;
  R->params_expert += L->params_expert;
  R->param_max = fmax(R->param_max, L->param_max);
  R->n_layers++;
  return sh;
}

void cost_rank_end_chunk(rank_cost *R, double chunk_act_bytes) {
  R->act_bytes += chunk_act_bytes;
  R->act_chunk_bytes_max = fmax(R->act_chunk_bytes_max, chunk_act_bytes);
  R->chunk_t_max_s = fmax(R->chunk_t_max_s, R->chunk_t_s);
  R->chunk_t_s = 0;
}

void cost_rank_add_extras(const cost_env *env, const plan *p, const plan_groups *pg, int r, rank_cost *R) {
  const graph *g = env->g;
  double b = (double)p->micro_batch_size, s = cost_seq_len(env, p);
  int64_t n_chunks = plan_n_chunks(p);
  int group = cost_rank_group(env, p, r, NULL);
  /* Non-layer blocks: the embedding (and any other non-layer block) with the first chunk, the head with the
   * last chunk, on whichever ranks hold those chunks. Their TP collectives stay exposed. */
  for (int bi = 0; bi < g->n_blocks; bi++) {
    const graph_block *blk = &g->blocks[bi];
    if (!env->facts.has_layers || blk->role == BLOCK_LAYER) continue;
    int edge = blk->role == BLOCK_HEAD ? 1 : 0;
    if (plan_chunk_rank(p, edge ? n_chunks - 1 : 0) != r) continue;
    layer_cost L = cost_block_on(env, group, p, pg, bi, b, s);
    double tf = L.fwd_s + L.tp_comm_s / 2, tb = L.bwd_s + L.tp_comm_s / 2;
    R->tf += tf;
    R->tb += tb;
    R->tw += L.wgrad_s;
    R->edge_tf_s[edge] += tf;
    R->edge_tb_s[edge] += tb;
    R->edge_tw_s[edge] += L.wgrad_s;
    R->fwd_s += L.fwd_s;
    R->bwd_s += L.bwd_s;
    R->tp_s += L.tp_comm_s;
    R->hw_flop += (L.fwd_flop + L.bwd_flop) * (double)(p->tp * p->cp);
    R->act_bytes += L.act_bytes[PLAN_RECOMPUTE_NONE];
    R->params_dense += L.params_dense * (double)blk->repeat;
    R->param_max = fmax(R->param_max, L.param_max);
    R->has_embed |= blk->role == BLOCK_EMBED;
    R->has_head |= blk->role == BLOCK_HEAD;
  }
  /* Tied embeddings: with pp > 1 the last stage keeps its own copy of the table for the LM head (Megatron's
   * embedding group synchronises the two). */
  bool exec = cost_exec_cpu_on(env, group, p); /* the executor keeps the whole table anyway (exec_cpu.c) */
  if (p->pp > 1 && plan_chunk_rank(p, n_chunks - 1) == r && !exec)
    for (int bi = 0; bi < g->n_blocks; bi++)
      for (int k = 0; k < g->blocks[bi].n_ops; k++)
        if (g->blocks[bi].ops[k].tied) {
          const graph_op *op = &g->blocks[bi].ops[k];
          R->params_dense += (double)(op->weight_k * op->weight_n) / (double)p->tp;
          R->param_max = fmax(R->param_max, (double)(op->weight_k * op->weight_n) / (double)p->tp);
        }
  /* Pipeline send/recv of one boundary activation (a transformer's [b, s/cp, h], /tp with sequence
   * parallelism), exposed in each direction the rank sends and receives in. */
  if (p->pp > 1) {
    double bytes = cost_boundary_bytes(env, p, b, s, true);
    R->p2p_s = exec ? cost_exec_cpu_p2p_s(env, group, p, b, s)
                    : comm_time_s(cost_pp_group(pg, r), COMM_SENDRECV, COMM_AUTO, bytes, &env->tuning.comm);
    double crossings = (double)plan_schedule_p2p_crossings(p);
    double exp_p2p = crossings * cost_p2p_exposed_s(env, p, R->p2p_s);
    R->tf += exp_p2p * (r > 0 || crossings > 1 ? 1 : 0);
    R->tb += exp_p2p * (r < p->pp - 1 || crossings > 1 ? 1 : 0);
  }
}

void cost_rank_extras(const cost_env *env, const plan *p, const plan_groups *pg, int r, rank_cost *out) {
  memset(out, 0, sizeof *out);
  cost_rank_add_extras(env, p, pg, r, out);
}

void cost_rank_merge(rank_cost *into, const rank_cost *from) {
  into->tf += from->tf;
  into->tb += from->tb;
  into->tw += from->tw;
  into->fwd_s += from->fwd_s;
  into->bwd_s += from->bwd_s;
  into->recompute_s += from->recompute_s;
  into->tp_s += from->tp_s;
  into->cp_s += from->cp_s;
  into->ep_s += from->ep_s;
  into->hw_flop += from->hw_flop;
  for (int e = 0; e < 2; e++) {
    into->edge_tf_s[e] += from->edge_tf_s[e];
    into->edge_tb_s[e] += from->edge_tb_s[e];
    into->edge_tw_s[e] += from->edge_tw_s[e];
  }
  into->act_bytes += from->act_bytes;
  into->act_chunk_bytes_max = fmax(into->act_chunk_bytes_max, from->act_chunk_bytes_max);
  into->chunk_t_max_s = fmax(into->chunk_t_max_s, from->chunk_t_max_s);
  into->working_bytes = fmax(into->working_bytes, from->working_bytes);
  into->params_dense += from->params_dense;
  into->params_expert += from->params_expert;
  into->param_max = fmax(into->param_max, from->param_max);
  into->p2p_s = fmax(into->p2p_s, from->p2p_s);
  into->has_embed |= from->has_embed;
  into->has_head |= from->has_head;
}
