/* The planner's search driver and its strategy interface (search layer). DESIGN.md "Search": every strategy
 * shares one driver (time budget, top-k, progress, determinism) and one cost model; a strategy is a file under
 * src/search/ registered in the table of search.c, and adding one touches no other strategy.
 *
 * The three kinds of object are kept apart as in SQLite's planner (STYLE.md §6):
 *  - an option is one way to run one piece (a block under a recompute choice, a chunk on a rank), with its
 *    cost: strategies keep their own option tables;
 *  - a path is a partial solution (a DP state: the blocks covered so far and the accumulated cost): strategy
 *    internals, allocated from the run's arena;
 *  - a plan is a complete assignment (plan.h), which a strategy offers to the driver with search_offer; the
 *    driver evaluates it with cost_estimate and keeps the best top_k that fit.
 *
 * What the driver keeps (search.c): the top_k best *configurations* that fit. Two plans that differ only in
 * their memory savers (recompute, recompute_layers, chunk_recompute_layers, zero_stage) are one configuration,
 * of which the faster is kept, so that the runner-ups differ from the winner in how they parallelise and not
 * merely in ZeRO 1 against ZeRO 2. Ranking: less iteration time (throughput objective) or less peak memory per
 * device, then less time (memory objective); a tie (within one part in 10^9) keeps the plan offered first, so
 * the result depends only on the order of offers, never on timing, unless the time budget cuts the search.
 * Internal header: not installed, not part of the public API. */
#ifndef AP_SEARCH_H
#define AP_SEARCH_H

#include "cost/cost.h"
#include "search/recipe/complete.h"

#define SEARCH_OBJECTIVE_MAP(X)                                                          \
  X(THROUGHPUT, "throughput") /* least iteration time, i.e. most tokens per second */  \
  X(MEMORY, "memory")         /* least peak memory per device, then least time */

typedef enum {
#define X(e, s) SEARCH_OBJ_##e,
  SEARCH_OBJECTIVE_MAP(X)
#undef X
  SEARCH_OBJ_COUNT_
} search_objective;

AP_HIDDEN const char *search_objective_name(search_objective o);
AP_HIDDEN bool search_objective_from_name(const char *name, search_objective *out);

enum {
  /* The most strategies the registry may hold (bits of search_opts.strategies). */
  SEARCH_MAX_STRATEGIES = 32,
  /* TUNING: the plans the refining strategies (stage DP, layer DP) start from: the best this many of the ranked
   * pool, which holds at least as many whatever top_k asks for, so that --top does not change the winner.
   * Each refinement costs one DP over the layers (milliseconds); the grid's best eight hold the winner's mesh
   * on every scenario of tests/test_search.c. */
  SEARCH_REFINE_K = 3,
};

typedef struct {
  int top_k;                 /* plans to return, >= 1 */
  double time_budget_s;      /* wall-clock budget of the whole search; <= 0 = no limit */
  /* Each strategy's own wall-clock budget, seconds, by registry index; 0 = none (only the whole search's).
   * A strategy whose budget is spent is stopped (search_should_stop) and the next one runs. */
  double strategy_time_budget_s[SEARCH_MAX_STRATEGIES];
  /* The seed of every stochastic choice (search_random_u64): a search is a function of its options, seed
   * included. 0 is a seed like any other. */
  uint64_t seed;
  double max_mem_fraction;   /* usable fraction of device memory, in (0, 1] */
  search_objective objective;
  /* The fields the user fixed, as plan field bits (PLAN_F(TP) | …) of the searched fields (PLAN_FF_SEARCHED
   * in the field table). fixed is also the
   * template of every plan: fields no strategy searches (the overlap switches, the model and cluster names)
   * come from it. The driver rejects an offered plan that differs from fixed in a fixed field. */
  plan fixed;
  unsigned fixed_mask;
  int64_t global_batch_size; /* sequences; every offered plan must have it */
  int64_t seq_length;        /* tokens; 0 = the model's default; every offered plan must have it */
  unsigned strategies;       /* bit i = strategy i of the registry; 0 = all that apply */
  /* An extra test of a fitting plan before it enters the top_k (NULL = none): the planner uses it to keep only
   * plans that a framework can run (`plan --export megatron` admits no zero-bubble schedule). Called only for
   * plans that would rank, so it may be slower than an evaluation. */
  bool (*admit)(void *user, const plan *p);
  void *admit_user;
  /* Sees every costed plan once the driver has settled whether it fits (NULL = none): the planner's report
   * samples the explored space with it (report/plan_report.c). Called in the search's thread; must be cheap. */
  void (*observe)(void *user, const plan *p, const cost_result *r);
  void *observe_user;
} search_opts;

/* Top 3, no time limit, all of device memory, throughput, nothing fixed (fixed = plan_defaults), batch unset. */
AP_HIDDEN search_opts search_opts_defaults(void);
static inline bool search_opts_fixes(const search_opts *o, unsigned bit) { return (o->fixed_mask >> bit) & 1u; }

/* One returned plan with its cost. */
typedef struct {
  plan p;
  cost_result r;        /* r.fits is the driver's: peak memory within max_mem_fraction of capacity */
  const char *found_by; /* the strategy that offered it first (static storage) */
} search_result;

/* What a search did. */
typedef struct {
  int64_t n_offered;   /* plans strategies offered */
  int64_t n_rejected;  /* of those, plans that --fix or plan_validate ruled out before costing */
  int64_t n_evaluated; /* plans costed with cost_estimate */
  int64_t n_fit;       /* of those, plans within the memory limit */
  int64_t n_not_admitted; /* fitting plans that would have ranked but the admit filter turned away */
  double elapsed_s;
  bool truncated;   /* the time budget ran out before every strategy finished */
  unsigned strategies_truncated; /* bit i = strategy i of the registry stopped at its own budget */
  bool cancelled;   /* the progress callback asked to stop */
  size_t arena_bytes;  /* the run's scratch memory at its peak */
  unsigned strategies_run; /* bit i = strategy i of the registry ran */
  char first_rejection[1024]; /* why the first rejected plan was rejected ("" when none was) */
} search_stats;

typedef struct search_run search_run;

/* A search strategy. run() offers plans with search_offer until it is done or search_should_stop says so. */
typedef struct {
  const char *name;    /* "grid": what --strategy and found_by say */
  const char *summary; /* one line for --help and docs */
  /* Whether the strategy has anything to do for this model and cluster (e.g. hetero only for node groups of
   * different device types). */
  bool (*applies)(const search_run *sr);
  /* AP_OK when done or stopped (by the budget or the user); another status only for a hard failure (out of
   * memory), which ends the whole search. */
  ap_status (*run)(search_run *sr);
} search_strategy;

/* Whether plan p breaks the batch (global_batch_size, seq_length; default_seq when 0) or a fixed field of o: then
 * writes why into why (n bytes) and returns true. The driver rejects such offers; --compare names the reason. */
AP_HIDDEN bool search_breaks_fixed(const search_opts *o, int64_t default_seq, const plan *p, char *why, size_t n);

/* The strategies, one file each, each defining one `const search_strategy`. To add one: write its file and
 * add one row to the registry table of registry.c; no other strategy file changes. */
/* The registry (registry.c), in the order the driver runs them; *n_out receives its length. */
AP_HIDDEN const search_strategy *const *search_strategies(size_t *n_out);
/* The registry index of the strategy named name, or -1. */
AP_HIDDEN int search_strategy_find(const char *name);

/* Runs the search: the applicable strategies in registry order, each offering plans. On success (AP_OK) *out
 * holds up to opts->top_k plans that fit, best first, and *n_out their count (>= 1). When no offered plan
 * fits: AP_INFEASIBLE, and *out holds the closest plans instead (least peak memory, one per mesh, up to
 * max(top_k, 3)) for the "what would make it fit" report. When no offered plan was even valid: AP_INVALID
 * with the first rejection in the context's error (a --fix that no plan can meet). AP_CANCELLED when the
 * progress callback stopped the search: *out holds what was found so far. The caller frees *out with
 * search_results_free(*out, *n_out) (it may be NULL when *n_out is 0); stats may be NULL. */
AP_HIDDEN ap_status search_run_all(ap_ctx *ctx, const cost_env *env, const search_opts *opts, search_result **out,
                                   int *n_out, search_stats *stats);

/* Frees a result list of search_run_all (its plans and the array); NULL is a no-op. */
AP_HIDDEN void search_results_free(search_result *list, int n);

/* ---- For strategies ---- */
AP_HIDDEN const cost_env *search_env(const search_run *sr);
AP_HIDDEN const search_opts *search_options(const search_run *sr);
/* The problem and its fixed fields (space.h), as the driver built it from the options. */
AP_HIDDEN const search_space *search_space_of(const search_run *sr);
AP_HIDDEN arena *search_arena(search_run *sr);
/* The memory limit of a plan that fits: device capacity times max_mem_fraction, bytes. */
AP_HIDDEN double search_mem_limit_bytes(const search_run *sr);
/* Evaluates p (after checking it against the fixed fields and plan_validate) and keeps it if it ranks in the
 * top_k of the fitting configurations; *cost (may be NULL) receives its cost, with fits the driver's (the
 * memory limit above). Returns AP_OK whether or not the plan was kept, AP_INVALID (with the context's error
 * untouched) when the plan is not valid or breaks a fixed field, AP_CANCELLED when the progress callback asked
 * to stop, another status on a hard failure (out of memory). */
AP_HIDDEN ap_status search_offer(search_run *sr, const plan *p, cost_result *cost);
/* The cost of the plan last offered, when search_offer returned AP_OK (fits the driver's), valid until the next
 * offer: what *cost receives, without the copy (a cost_result is 29 kB; the grid reads a few fields of each). */
AP_HIDDEN const cost_result *search_offered_cost(const search_run *sr);
/* True once the time budget of the search or of the running strategy is spent, or the user cancelled;
 * strategies check it between offers. */
AP_HIDDEN bool search_should_stop(search_run *sr);
/* The running strategy's random stream, seeded from search_opts.seed and the strategy's name: the same numbers
 * for the same seed whichever strategies ran before. search_random_unit is uniform in [0, 1). */
AP_HIDDEN uint64_t search_random_u64(search_run *sr);
/* The stream behind it, for tests and for strategies that keep several: the start state of strategy name's
 * stream under seed, and the next number of a stream (SplitMix64). */
AP_HIDDEN uint64_t search_rng_seed(uint64_t seed, const char *name);
AP_HIDDEN uint64_t search_rng_next(uint64_t *state);
AP_HIDDEN double search_random_unit(search_run *sr);
/* "Refine the best k", written once for every strategy that improves the plans of earlier ones: copies the
 * best min(k, kept) plans of the ranked pool (with their costs) before any offer, then calls fn on each, best
 * first, until the search should stop, reporting progress over them. fn offers what it finds with
 * search_offer; its AP_INVALID and AP_CANCELLED end only that base; another failure ends the refinement and
 * is returned. */
typedef ap_status (*search_refine_fn)(search_run *sr, const search_result *base, void *user);
AP_HIDDEN ap_status search_refine_best(search_run *sr, int k, search_refine_fn fn, void *user);
/* The strategy's progress, a fraction in [0, 1] of its own work; the driver scales it over the strategies and
 * reports it through the context's progress callback now and then. */
AP_HIDDEN void search_progress(search_run *sr, double fraction);
/* The iteration time of the worst plan of the ranked pool (the best max(top_k, SEARCH_REFINE_K)), or INFINITY
 * while it is not full (and always under the memory objective): a bound that lets strategies skip candidates
 * whose lower bound on iteration time is not below it, since such a candidate can no longer enter the pool. */
AP_HIDDEN double search_cutoff_s(const search_run *sr);
/* The i-th plan of the current top_k, best first (i = 0 the best), or NULL when fewer than i + 1 are kept. The
 * pointer is valid until the next search_offer, so a strategy that refines the plans of earlier ones (stage DP,
 * layer-wise DP) copies the few it wants before it offers. */
AP_HIDDEN const search_result *search_best(const search_run *sr, int i);

/* ---- The cores of the refining strategies, one plan at a time (for the strategies and their tests). Each
 * keeps every rank within mem_fraction of its own device's memory (cost_rank_group), and predicts the
 * closed-form pipeline time (cost_result.pipeline_s) of the plan it returns. ---- */
/* stage_dp.c: the split of the layers into base's pp·vpp chunks that minimises the pipeline time of base's
 * schedule; *out is base with stage_layers set (and chunk_recompute_layers cleared). AP_INFEASIBLE when no split
 * fits, AP_UNSUPPORTED for what the DP does not model (vpp > 1 over layers of different blocks; too large a
 * table). */
AP_HIDDEN ap_status search_stage_dp_split(ap_ctx *ctx, arena *a, const cost_env *env, const plan *base,
                                          double mem_fraction, plan *out, double *pipeline_s);
/* layer_dp.c: for base's mesh, schedule and split, the layers of each chunk (from its first) that use full
 * recompute; *out is base with recompute full and chunk_recompute_layers set. AP_INFEASIBLE when a rank does
 * not fit even when all its layers recompute. */
AP_HIDDEN ap_status search_layer_dp_choose(ap_ctx *ctx, arena *a, const cost_env *env, const plan *base,
                                           double mem_fraction, plan *out, double *pipeline_s);
/* hetero.c: base's layers split over its pipeline ranks in proportion to their devices' speed, within their
 * devices' memory (AMP/Metis style); *out is base with stage_layers set. AP_INFEASIBLE when no split fits. */
AP_HIDDEN ap_status search_hetero_split(ap_ctx *ctx, const cost_env *env, const plan *base, double mem_fraction,
                                        plan *out);

#endif
