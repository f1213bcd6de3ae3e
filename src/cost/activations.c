/* Saved activations (cost layer): the bytes a block keeps for its backward pass under each recompute policy,
 * read off the graph's own tensors (which op saves which tensor, its shape, dtype and how the plan shards it).
 * layer.c calls it once per block and policy; the published closed forms are tests (tests/test_cost.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost/internal.h"


/* Whether per-op selective checkpointing keeps op i's output (torchtitan's selective_ac_option "op",
 * parallelize.py _custom_policy: the outputs of attention and of every matmul but each second one, counted
 * within the layer, are saved; every other op runs again in the backward pass). Router, dispatch and combine
 * are kept too: recomputing them would repeat the all-to-alls. *n_mm counts the matmuls seen so far. */
bool cost_op_policy_keeps(const graph_op *op, int *n_mm) {
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

/* What unfused attention keeps beyond its inputs (compute_shard.attn_scores: Megatron-DeepSpeed's baddbmm, fused
 * scale-mask-softmax and bmm, plan/stack.c [MDS-attn]), over the full s×s product of each of the device's heads:
 * the softmax output (2 bytes per score) and, where the stack or the model runs attention dropout, the dropout
 * output the bmm with V reads (2) and its mask (1): Korthikanti et al. 2022 §4.1's 5as²b. These take the place
 * of the op's own saved tensors and mask (attention_internal): flash attention's output and statistics are not
 * among them (the output is the next matmul's saved input anyway). */
static double unfused_scores_bytes(const graph_op *op, const compute_shard *sh, double b, double s) {
  double heads = (double)op->heads / (op->tp_split ? (double)sh->tp : 1.0);
  return b * heads * (s / (double)sh->cp) * s * (sh->dropout || op->mask_of >= 0 ? 5.0 : 2.0);
}

/* An op's saved tensor that unfused attention does not keep, or that selective recompute drops: anything but
 * the attention's inputs q, k, v. */
static bool attention_internal(const graph_op *op, int t) {
  return op->kind == OP_ATTENTION && t != op->in[0] && t != op->in[1] && t != op->in[2];
}

/* The hidden dropout masks of a block where its stack runs dropout (compute_shard.dropout, plan/stack.c
 * [MDS-drop]) and the model's graph has none of its own (model/transformer.c's dropout ops, whose masks the
 * markers count), one byte per element of the block's [b, s, h] output each: the embedding's one, and a
 * layer's two (Megatron's bias-dropout-adds after the attention and after the MLP), split as that output is. */
static double hidden_mask_bytes(const graph_block *blk, const compute_shard *sh, double b, double s) {
  int n = blk->role == BLOCK_LAYER ? 2 : blk->role == BLOCK_EMBED ? 1 : 0;
  if (!sh->dropout || blk->output < 0 || n == 0) return 0;
  for (int i = 0; i < blk->n_ops; i++)
    if (blk->ops[i].mask_of >= 0 && blk->ops[i].kind != OP_ATTENTION) return 0;
  const graph_tensor *t = &blk->tensors[blk->output];
  return n * graph_tensor_numel(t, b, s) / cost_tensor_divisor(t, sh);
}

/* No recompute, or selective: every op's saved tensors, except that selective recompute drops what the core
 * attention keeps for itself beyond its inputs q, k, v (the s×s scores and their masks, or flash attention's
 * statistics), as Megatron's core_attn recompute does (Korthikanti et al. 2022 §5); unfused attention keeps its
 * scores instead of flash attention's own tensors; plus the hidden dropout masks where the stack runs dropout. */
static double mark_saved(const graph_block *blk, const compute_shard *sh, double b, double s, bool selective,
                         unsigned char *mark) {
  double masks = hidden_mask_bytes(blk, sh, b, s);
  for (int i = 0; i < blk->n_ops; i++) {
    const graph_op *op = &blk->ops[i];
    bool sel = selective && op->kind == OP_ATTENTION, unfused = sh->attn_scores && op->kind == OP_ATTENTION;
    for (int k = 0; k < op->n_saved; k++) {
      int t = op->saved[k];
      if ((sel || unfused) && attention_internal(op, t)) continue;
      mark[t] |= (unsigned char)(1 | (op->kind == OP_MATMUL ? 0 : 2));
    }
    if (unfused && !sel) masks += unfused_scores_bytes(op, sh, b, s);
    if (op->mask_of >= 0 && !sel && !unfused)
      masks += graph_tensor_numel(&blk->tensors[op->mask_of], b, s) / cost_tensor_divisor(&blk->tensors[op->mask_of], sh);
  }
  return masks;
}

/* Per-op selective checkpointing: the block input, the outputs of the kept ops (op_policy_keeps), and what a
 * kept op saves for itself that no op of the block produces (flash attention's softmax statistics, dropout
 * masks of kept ops; unfused attention's scores). The dropouts between the kept ops run again. */
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
    if (!cost_op_policy_keeps(op, &n_mm)) continue;
    if (op->out >= 0 && op->out != blk->output) mark[op->out] |= 1;
    bool unfused = sh->attn_scores && op->kind == OP_ATTENTION;
    for (int k = 0; k < op->n_saved; k++)
      if (!(mark[op->saved[k]] & 4) && !(unfused && attention_internal(op, op->saved[k]))) mark[op->saved[k]] |= 1;
    if (unfused) masks += unfused_scores_bytes(op, sh, b, s);
    if (op->mask_of >= 0 && !unfused)
      masks += graph_tensor_numel(&blk->tensors[op->mask_of], b, s) / cost_tensor_divisor(&blk->tensors[op->mask_of], sh);
  }
  return masks;
}

double cost_saved_bytes(const graph_block *blk, const compute_shard *sh, double b, double s, plan_recompute rc) {
  if (rc == PLAN_RECOMPUTE_FULL) {
    if (blk->input < 0) return 0;
    const graph_tensor *t = &blk->tensors[blk->input];
    return graph_tensor_bytes(t, b, s) / cost_tensor_divisor(t, sh);
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
    total += bytes / cost_tensor_divisor(gt, sh);
  }
  if (mark != mark_small) free(mark);
  return total;
}

double cost_boundary_bytes(const cost_env *env, const plan *p, double b, double s, bool seq_split) {
  /* The split is not known piece by piece (the searches cost a rank's sends before they choose it), so the
   * largest output among the units that can end a chunk (all but the last) bounds every boundary; for a
   * transformer every layer hands on the same [b, s, h] tensor. */
  compute_shard sh = cost_shard_of(p);
  if (!seq_split) sh.sequence_parallel = false;
  double best = 0;
  for (int k = 0; k < env->n_boundary_blocks; k++) { /* once per run of units of one block (env.c) */
    const graph_block *blk = &env->g->blocks[env->boundary_blocks[k]];
    const graph_tensor *t = &blk->tensors[blk->output];
    best = fmax(best, graph_tensor_bytes(t, b, s) / cost_tensor_divisor(t, &sh));
  }
  return best;
}

double cost_logit_elems(const cost_env *env, const plan *p, double b, double s) {
  compute_shard sh = cost_shard_of(p);
  double n = 0;
  for (int bi = 0; bi < env->g->n_blocks; bi++) {
    const graph_block *blk = &env->g->blocks[bi];
    for (int k = 0; k < blk->n_ops; k++)
      if (blk->ops[k].kind == OP_LOSS && blk->ops[k].n_in > 0) {
        const graph_tensor *t = &blk->tensors[blk->ops[k].in[0]];
        n += graph_tensor_numel(t, b, s) / cost_tensor_divisor(t, &sh);
      }
  }
  return n;
}
