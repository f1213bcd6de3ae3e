/* Plan completion (search layer): given a plan of which only some fields are stated, choose the others as a
 * tuned team would, the best under the cost model given the stated ones. `autopar validate` uses it for the
 * plan fields a measured run does not state; the planner and `validate --search` start from it.
 *
 * The stated fields are a bit set of plan field ids (PLAN_F(TP) | …). Every unstated field gets candidates (below); the
 * candidates are the product of the per-field lists, kept to plans that plan_validate accepts, and evaluated
 * with cost_estimate. The winner is the plan with the most tokens per second among those that fit in device
 * memory; when none fits, the one with the least peak memory (the team would reach for every memory saver
 * before giving up). Ties go to the first candidate in enumeration order, which lists the usual choice of
 * each field first, so the result is deterministic.
 *
 * Candidates of an unstated field:
 *  - tp: 1, 2, 4, 8, at most the devices of one NVLink domain (the cluster's innermost level);
 *  - cp: 1;
 *  - pp: every divisor of devices/(tp·cp) up to the layer count, or devices/(tp·cp·dp) when dp is stated;
 *    dp is then devices/(tp·pp·cp) (and must equal a stated dp);
 *  - ep: 1 for a dense model; for MoE every divisor of the expert count that divides dp·cp;
 *  - etp (MoE with tp > 1, unless PLAN_F(ETP) is in stated, a bit beyond COMPLETE_FIELDS): the stack's default
 *    (plan/stack.h etp_default: tp for Megatron-LM, 1 for Megatron-Bridge's recipes) first, then the other;
 *  - micro_batch_size: 1, 2, 4, 8 dividing global_batch_size/dp;
 *  - vpp: 1, and 2..8 when pp > 1, the layers (or the layers plus the embedding and the loss, below) divide
 *    into pp·vpp equal chunks and the micro-batch count is a multiple of pp (Megatron's interleaving
 *    requirements); the schedule, unless stated, is 1f1b for vpp = 1 and interleaved-1f1b above;
 *  - the split of the layers (unless the partial plan lists one): even, or Megatron's split that counts the
 *    embedding and the loss as a layer each when pp·vpp exceeds the layers by one or two;
 *  - sequence_parallel: on when tp > 1 (Megatron's recommended setting; required for MoE with tp > 1);
 *  - recompute: none, selective, full (the granularities every framework runs; per-op checkpointing, which
 *    only torchtitan runs, when stated); zero_stage: 1 (the distributed optimizer), 2, 3, 0. These are
 *    memory savers, and a memory saver never makes an iteration faster (recompute adds compute, a higher ZeRO
 *    stage adds communication, stage 0 needs as much time as stage 1 and more memory), so for each stage the
 *    recompute granularities are tried only until one fits, and the stages only until one fits without
 *    recompute; once recompute is needed, full recompute of the fewest layers of each chunk that fit
 *    (Megatron's block method, found by bisection) is tried as well;
 *  - precision: bf16;
 *  - the loss (unless PLAN_F(FUSED_LOSS) is in stated, a bit beyond COMPLETE_FIELDS): the stack's default
 *    (plan/stack.h plan_stack_fused_default: fused for Megatron-Bridge, NeMo and llm-foundry), and, where that
 *    is unfused and the stack has a fused loss, the fused one when no plan fits without it.
 * Internal header: not installed, not part of the public API. */
#ifndef AP_SEARCH_COMPLETE_H
#define AP_SEARCH_COMPLETE_H

#include <stdbool.h>
#include <stdint.h>

#include "cost/cost.h"
#include "search/recipe/space.h"

/* The plan fields the completion chooses when they are not stated: the first COMPLETE_N_FIELDS ids of the
 * field table (plan.h PLAN_FIELD_MAP), whose bits PLAN_F(TP) … PLAN_F(SCHEDULE) make the `stated` mask. */
#define COMPLETE_N_FIELDS (PLAN_F_SCHEDULE + 1)
#define COMPLETE_FIELDS ((1u << COMPLETE_N_FIELDS) - 1u)

/* Limits of one completion. */
typedef struct {
  /* The most candidates evaluated with cost_estimate; the enumeration stops there (stats.truncated).
   * TUNING: a cost evaluation takes tens of microseconds, so 16384 keeps one completion within about half a
   * second; the fields a measured run leaves open rarely make more than a few hundred. (8192 until the
   * completion also tried expert tensor parallelism 1, which doubles an MoE model's candidates with ep > 1: a
   * Mixtral-8x7B on 32 H100 with nothing stated needs more than 8192.) */
  int64_t max_evaluations;
} complete_options;

AP_HIDDEN complete_options complete_options_defaults(void);

/* What a completion did. */
typedef struct {
  int64_t n_evaluated; /* candidates given to cost_estimate */
  int64_t n_valid;     /* of those, plans that cost_estimate accepted */
  int64_t n_fit;       /* of those, plans that fit in device memory */
  bool truncated;      /* max_evaluations stopped the enumeration */
} complete_stats;

/* Completes `partial`: the fields in `stated` are kept as they are in partial, as are the batch
 * (global_batch_size, seq_length), the mesh order, the overlap switches, the names and every field that
 * COMPLETE_FIELDS does not hold; the others are chosen as described above. n_micro_batches is always derived
 * from global_batch_size, micro_batch_size and dp. On success *best is the chosen plan (valid under
 * plan_validate for env's model and cluster) and *best_cost its cost. When no candidate is a valid plan,
 * returns AP_INFEASIBLE (AP_INVALID when every field is stated) with the first candidate's violated
 * constraint in the context's error. opt may be NULL for the defaults; stats may be NULL. */
AP_HIDDEN ap_status complete_plan(ap_ctx *ctx, const cost_env *env, const plan *partial, unsigned stated,
                                  const complete_options *opt, plan *best, cost_result *best_cost,
                                  complete_stats *stats);

#endif
