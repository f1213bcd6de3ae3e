/* An event simulator of one training iteration of an op-level plan, with delta simulation, and FlexFlow's
 * MCMC search on it (search layer, above graph_problem.h).
 *
 * The simulator plays one device of the SPMD program (every device runs the same ops on its shard): a compute
 * stream and a communication stream, each FIFO. Forward, in op order: an op waits for its producers and for the
 * resharding of each input edge (on the communication stream), computes, then all-reduces its pending sum
 * before its consumers may start. Backward, in reverse op order: an op waits for each consumer's input
 * gradient and that edge's backward resharding, computes, all-reduces its input gradients (its producers wait
 * for that) and enqueues its weight-gradient all-reduce, which overlaps with the compute that follows. The
 * iteration ends when both streams are idle. (FlexFlow's simulator, Jia et al. 2019 §5: a task graph with
 * compute and communication tasks, FIFO per device; op times here come from the cost model instead of
 * profiling.)
 *
 * Delta simulation: after a change of some ops' strategies, the events before the first changed op's forward
 * event are unaffected (their inputs and streams are the same), so the simulation restarts there from the
 * saved stream state and replays only the rest (FlexFlow's paper describes delta simulation; no public
 * FlexFlow code implements it, SURVEY.md §3.2, so this is autopar's own definition). Tested equal to a full
 * re-simulation on random moves. */
#ifndef AP_SEARCH_GRAPH_SIM_H
#define AP_SEARCH_GRAPH_SIM_H

#include "search/graph/graph_problem.h"

typedef struct {
  const graph_problem *gp;
  int n;
  int lo, hi;                /* the nodes played (a pipeline stage's), inclusive; 0 .. n - 1 by gsim_init */
  int *in_start, *in_edge;   /* CSR: edges into each node */
  int *out_start, *out_edge; /* CSR: edges out of each node */
  double *ready;             /* forward: when each node's output is usable */
  double *comp_before, *comm_before; /* stream state before each node's forward event */
  double *gdone;             /* backward: when each node's input gradients are reduced */
  int64_t n_events;          /* events replayed by the last call (forward + backward) */
  double fwd_end_s;          /* when the last call's forward sweep ended (its backward starts there) */
  bool skip_wgrad;           /* leave the weight-gradient all-reduces out (set by the caller; false by the inits):
                                the pipeline timeline (graph_pipe.h) takes what they add as its own event */
} gsim;

/* Allocates the simulator's arrays in arena a. */
AP_HIDDEN ap_status gsim_init(ap_ctx *ctx, arena *a, const graph_problem *gp, gsim *s);
/* The same for the nodes lo..hi only (one pipeline stage): edges from or to other nodes are left out (their
 * activations cross between stages by send/recv, which the stage's price adds); node_choice is still indexed
 * by gp's nodes. */
AP_HIDDEN ap_status gsim_init_range(ap_ctx *ctx, arena *a, const graph_problem *gp, int lo, int hi, gsim *s);
/* The iteration time of a node choice, simulated in full. */
AP_HIDDEN double gsim_full(gsim *s, const int32_t *node_choice);
/* The same after a change whose first changed node is `first`: valid when the last simulation was of a choice
 * that agrees with node_choice on every node before `first`. */
AP_HIDDEN double gsim_delta(gsim *s, const int32_t *node_choice, int first);

/* FlexFlow's MCMC (legacy model.cc, mcmc_optimize; SURVEY.md §3.2) over the groups of gp with the simulator as
 * the objective and delta simulation per move: from init (per group), a random group takes a random allowed
 * strategy; better is kept, worse accepted with probability exp(-alpha · Δms); every budget/100 moves
 * (1..1000) the walk restarts from the best. Writes the best group choice to best and returns its simulated
 * time; *n_evals counts the simulations. limit_s > 0 also stops it after that many seconds. */
AP_HIDDEN double gsim_mcmc(const graph_problem *gp, gsim *s, const int32_t *init, int64_t budget, double limit_s,
                           double alpha, uint64_t seed, int32_t *best, int64_t *n_evals, arena *a);

#endif
