/* The grid strategy's private state and types (search layer; grid.c says what the strategy does): what one
 * evaluation tells the grid, one mesh, a pipeline option, a rung of the memory-saver ladder and the run's
 * state, and the functions one grid file calls in another. Only src/search/grid*.c include it. */
#ifndef AP_SEARCH_GRID_INTERNAL_H
#define AP_SEARCH_GRID_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "cost/bound.h"
#include "search/recipe/cands.h"
#include "search/recipe/search.h"

enum {
  MAX_OPTS = 80,       /* pipeline options of one micro-batch size */
  MAX_FIT_RUNGS = 16,  /* fitting rungs remembered for the 1F1B shadow */
};

/* What one evaluation told the grid. */
typedef struct {
  bool valid, fits;
  double iter_s, peak_bytes;
  /* The chunks' forward + backward time (S) and weight-gradient time (W) of one micro-batch, summed over all
   * chunks: the same under every schedule, depth and split of the mesh and micro-batch size, for its saver. */
  double chunk_s, chunk_w_s;
  /* Lower bounds of the peak memory of the same plan at ZeRO 2 and ZeRO 3 (plan.h: stage 2 also shards the
   * gradients, stage 3 also the parameters, over a data-parallel group of at most max(dp·cp, edp) ranks): the
   * peak rank's total less the part that sharding can remove. INFINITY when the plan's stage is not below. */
  double mem_z2_lb, mem_z3_lb;
  double logits_bytes; /* the largest rank's logits, which grow in proportion to the micro-batch */
} grid_eval;

/* One mesh: degrees and order, with its probe. */
typedef struct {
  int64_t tp, cp, pp, dp, ep, etp; /* etp as the plan stores it: 0 = tp */
  const plan_axis *order;
  int zero_first; /* index into the ZeRO list of the first stage whose model states fit; -1 when none does */
  int index;      /* enumeration order: the tie-breaker of the sort */
  bool probed;
  plan probe; /* the probe plan and its result, reused when the exploration reaches it */
  grid_eval probe_res;
} grid_mesh;

/* One pipeline option of a micro-batch size. */
typedef struct {
  plan_schedule schedule;
  int64_t vpp;
  bool shadow; /* 1F1B after zb-h1: costed only at zb-h1's fitting rungs */
} pipe_opt;

typedef struct {
  int32_t zero;
  plan_recompute rc;
  int32_t k;
} rung;

/* What one ladder of memory savers found. */
typedef struct {
  bool first_valid;
  double first_s;            /* the least saver's time */
  double chunk_s, chunk_w_s; /* and its chunk sums (grid_eval) */
  double logits_bytes;       /* and its logits (grid_eval) */
  bool any_fit;
  double best_s;
  bool frugal_unfit;     /* the most frugal rung of every ZeRO stage was costed and did not fit */
  int n_fit;
  rung fit[MAX_FIT_RUNGS]; /* the rungs that fitted, and their times */
  double fit_s[MAX_FIT_RUNGS];
} ladder_out;

typedef struct {
  search_run *sr;
  const search_opts *o;
  const cost_env *env;
  const graph *g;
  plan_model_facts facts;
  int64_t n, gbs, seq, L;
  double mem_bound_limit; /* the memory limit the model-state bound is held to: largest device × fraction */
  cost_param_counts params; /* parameters: split by tp, replicated, routed experts */
  bool memory_objective, chunk_bound_ok;
  int32_t zeros[4];
  int n_zeros;
  plan base;
  grid_mesh *meshes;
  int n_meshes, cap_meshes;
  const grid_mesh *memo; /* the mesh being explored: its probe answers without a second evaluation */
  int64_t n_fit;
  bool stop;
  ap_status hard;
} grid;

static inline bool fixes(const grid *gr, plan_field_id f) { return search_space_fixes(search_space_of(gr->sr), f); }

/* grid_plan.c: cost plan p through the search (it offers p to the run and notes whether the run must stop). */
AP_HIDDEN grid_eval grid_evaluate(grid *gr, const plan *p);
/* grid_plan.c: the template with mesh m's degrees and order. */
AP_HIDDEN void grid_set_mesh(const grid *gr, const grid_mesh *m, plan *p);
/* grid_plan.c: micro-batch size mbs and the micro-batch count it leaves. */
AP_HIDDEN void grid_set_mbs(plan *p, int64_t mbs);
/* grid_plan.c: pipeline option po (schedule, virtual stages, the layer split it implies). */
AP_HIDDEN void grid_set_pipe(const grid *gr, plan *p, const pipe_opt *po);
/* grid_plan.c: rung r (ZeRO stage, recompute, full recompute's layer count). */
AP_HIDDEN void grid_set_rung(plan *p, const rung *r);
/* grid_plan.c: the pipeline options at pp ranks and n_micro micro-batches into out[MAX_OPTS]; their count. */
AP_HIDDEN int grid_pipe_options(const grid *gr, int64_t pp, int64_t n_micro, pipe_opt *out);
/* grid_space.c: the micro-batch sizes at data-parallel degree dp. */
AP_HIDDEN void grid_mbs_list(const grid *gr, int64_t dp, cands *out);
/* grid_space.c: whether ZeRO 2 and 3 shard anything on mesh m. */
AP_HIDDEN bool grid_zero_shards(const grid_mesh *m);
/* grid_space.c: every mesh into gr->meshes. */
AP_HIDDEN void grid_enum_meshes(grid *gr);
/* grid_ladder.c: the recompute modes in ladder order into out; their count. */
AP_HIDDEN int grid_rc_order(const grid *gr, plan_recompute *out);
/* grid_ladder.c: the memory-saver ladder of plan p on mesh m, into lo. */
AP_HIDDEN void grid_ladder(grid *gr, const grid_mesh *m, plan *p, ladder_out *lo);
/* grid_ladder.c: cost the most frugal rung of every ZeRO stage of p on m; whether one fits. */
AP_HIDDEN bool grid_frugal_fits(grid *gr, const grid_mesh *m, plan *p);

#endif
