/* Lower bounds of the cost model's formulas (cost layer), for the searches that prune with them. Each sits
 * here, beside the formulas it bounds, so that a change to a formula and to its bound is one change; each is
 * tested against its formula on random plans (tests/test_bound.c: a bound never exceeds the value).
 *
 *  - cost_bound_pipeline_s bounds the closed-form pipeline time of schedule.c (hence cost_result.pipeline_s
 *    and iter_s, which only add to it) from the chunks' summed times, for every split and every saver;
 *  - cost_bound_states_bytes bounds the peak memory per device (memory.c) by the model states alone;
 *  - cost_bound_mem_at_zero bounds the peak memory of the same plan at a higher ZeRO stage from an evaluated
 *    one;
 *  - cost_bound_compute_s bounds the iteration time of every plan by the model's FLOP over the peak;
 *  - cost_bound_interleaved_s bounds the interleaved schedule's pipeline time (schedule_pipeline_s) from below
 *    by a function that never falls when a chunk grows, so that a search moving layers between chunks can
 *    rule out every move out of a chunk at once (search/stage_dp.c).
 * Internal header: not installed, not part of the public API. */
#ifndef AP_COST_BOUND_H
#define AP_COST_BOUND_H

#include "cost/cost.h"

/* The zero-bubble closed forms' fills per rank (schedule.c): ZB-H1's bubble is at least tf + tb - 2·tw (Qi et
 * al. 2024 §2.1); ZB-V's fill is (tf + tb - tw)/4, what plan/schedule.h's order (built at equal times) leaves
 * and the simulator replays (the paper's hand-built schedule reaches zero at T_F = T_B = T_W, §6). The closed
 * form and its bound read the same constants. */
#define COST_ZB_H1_W_MULT 2.0
#define COST_ZB_V_W_MULT 1.0
#define COST_ZB_V_FILL_DIV 4.0

/* A lower bound of schedule.c's closed-form pipeline time of a plan with schedule s, vpp chunks per rank, m
 * micro-batches over pp ranks, whose chunks' forward + backward times (recompute and exposed communication
 * included) sum to S and their weight-gradient parts to W (cost_result.chunk_tf_s + chunk_tb_s, chunk_tw_s).
 * Valid for every split of the layers; a saver only adds to S and leaves W, so S and W of the least saver
 * bound every saver. */
AP_HIDDEN double cost_bound_pipeline_s(plan_schedule s, int64_t vpp, double m, double pp, double S, double W);

/* The model's parameters by how a plan splits them: by tensor parallelism, replicated, routed experts. */
typedef struct {
  double split, replicated, expert;
} cost_param_counts;
AP_HIDDEN void cost_param_counts_of(const graph *g, cost_param_counts *out);

/* A lower bound of the peak memory per device (cost_result.peak_mem_bytes) of every plan with these degrees
 * and ZeRO stage: the states of one replica's slice (parameters, gradients at the environment's bytes per
 * gradient, fp32 master weights and Adam moments), tp and ep applied, ZeRO sharding over dp·cp and edp, averaged
 * over the pipeline ranks (the fullest rank holds at least the average). z0_shards_optimizer: the stack's
 * optimizer shards its states without ZeRO (cost_state_bytes.zero1_without_zero), so stage 0 is bounded as 1. */
AP_HIDDEN double cost_bound_states_bytes(const cost_env *env, const cost_param_counts *pc, int64_t tp, int64_t cp,
                                         int64_t dp, int64_t pp, int64_t ep, int64_t etp, int32_t zero_stage,
                                         bool z0_shards_optimizer);

/* Lower bounds of the peak memory of plan p at ZeRO 2 (*z2_bytes) and ZeRO 3 (*z3_bytes), everything else
 * equal, from its evaluation r at stage 1 or 2 (the optimizer states already sharded, as the grid costs them
 * first): stage 2 also shards the gradients and stage 3 the parameters over a data-parallel group of at most
 * max(dp·cp, edp) ranks, so each rank keeps at least its total less those savings. No bound from stage 0,
 * whose optimizer states a higher stage shards too. INFINITY for *z2_bytes when p is at stage 2 or above. */
AP_HIDDEN void cost_bound_mem_at_zero(const plan *p, const cost_result *r, double *z2_bytes, double *z3_bytes);

/* Half the model's training FLOP of one iteration over the device count times the fastest device's peak at the
 * precision: no plan is
 * faster. TUNING: the half is a margin for efficiency tables (profiles) that may put an op above its nominal
 * peak; the bound only ends hopeless searches early, so it may be loose. 0 when no peak is known. */
AP_HIDDEN double cost_bound_compute_s(const cost_env *env, plan_precision precision, int64_t global_batch_size,
                                      int64_t seq_length);

/* Interleaved-1f1b (0 for every other schedule): a lower bound of schedule_pipeline_s(p, rc, n, chunk_*) of every
 * split whose chunks' tf and tb are each at least these and in which at most one rank's tf + tb exceeds these,
 * by between grow_min_s and grow_max_s (0 and INFINITY: any growth of one rank), so that a search moving layers
 * between chunks can rule out every move out of a chunk at once: bound the split with that chunk one layer
 * shorter, the growth being what one layer adds to a chunk. Takes the chunk times after schedule_pipeline_s
 * added the ranks' edge blocks to them (it does so in place). schedule.c's two terms are m·max_r t_r +
 * Σ_{r≠crit} g_r and m·max(Σ_j round_j, max t) + Σ_{r≠crit} cmax_r, with crit the slowest rank; a rank that
 * grows can become crit and drop its g_r from the sum, so neither is monotone, and the bound takes the least
 * over the ranks that can become crit. */
AP_HIDDEN double cost_bound_interleaved_s(const plan *p, const rank_cost *rc, int n, const double *chunk_tf_s,
                                          const double *chunk_tb_s, double grow_min_s, double grow_max_s);

#endif
