/* The search driver and the strategy registry (search layer). See search.h for the contract; DESIGN.md
 * "Search" for the place of the driver: strategies propose, the driver costs and ranks.
 *
 * Reading order: the registry table, the names, then struct search_run (one planning run: its options, its
 * arena, the ranked top_k and the closest plans that do not fit), search_offer (check, cost, rank) and
 * search_run_all (the loop over strategies and the result). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan/stack.h"
#include "search/recipe/search.h"

/* ---- Names ------------------------------------------------------------------------------------------- */

AP_ENUM_NAMES(search_objective, search_objective, SEARCH_OBJECTIVE_MAP, SEARCH_OBJ_COUNT_)

search_opts search_opts_defaults(void) {
  search_opts o;
  memset(&o, 0, sizeof o);
  o.top_k = 3;
  o.max_mem_fraction = 1.0;
  o.objective = SEARCH_OBJ_THROUGHPUT;
  plan_defaults(&o.fixed);
  return o;
}

/* ---- The run ------------------------------------------------------------------------------------------- */

enum {
  MAX_TOP_K = 1000,  /* more plans than anyone reads */
  MIN_CLOSEST = 3,   /* closest plans kept for the infeasible report, at least */
};
_Static_assert((int)SEARCH_REFINE_K <= (int)MAX_TOP_K, "the ranked pool holds the refined plans");
/* Relative differences below this are ties, which keep the plan offered first. */
static const double TIE_EPS = 1e-9;

struct search_run {
  ap_ctx *ctx;     /* the caller's: progress callback, hard failures */
  ap_ctx scratch;  /* receives the messages of rejected plans */
  const cost_env *env;
  const graph *g;
  search_opts opts;
  search_space space;
  arena *arena;
  double t0_s, deadline_s;
  search_ticker ticker; /* progress and cancellation (space.h) */
  double limit_bytes, limit_fraction;
  int64_t default_seq;
  search_result *top; /* best first */
  int n_top, cap_top;
  search_result *closest; /* least memory first, one per mesh */
  int n_closest, cap_closest;
  search_stats st;
  const char *strategy; /* the one running */
  int ordinal, n_to_run; /* its place among the strategies that run */
  unsigned strategy_bit; /* its registry bit */
  double fraction;       /* its own progress */
  double strategy_deadline_s; /* its own budget's end (INFINITY = none) */
  uint64_t rng;          /* its random stream (search_random_u64) */
  bool stop;             /* the whole search stops: the budget is spent or the user cancelled */
  bool strategy_stop;    /* the running strategy's own budget is spent */
  cost_result cur;
  char what[160];
};

static double now_s(void) { return search_now_s(); }

const cost_env *search_env(const search_run *sr) { return sr->env; }
const search_opts *search_options(const search_run *sr) { return &sr->opts; }
const search_space *search_space_of(const search_run *sr) { return &sr->space; }
arena *search_arena(search_run *sr) { return sr->arena; }
double search_mem_limit_bytes(const search_run *sr) { return sr->limit_bytes; }

void search_progress(search_run *sr, double fraction) {
  sr->fraction = fraction < 0 ? 0 : fraction > 1 ? 1 : fraction;
}

/* Checks the clock and, every SEARCH_PROGRESS_EVERY_S, tells the progress callback (the ticker of space.h);
 * sets stop when the budget is spent or the callback asks to stop. */
static void tick(search_run *sr) {
  double t = now_s();
  if (t >= sr->deadline_s && !sr->stop) {
    sr->stop = true;
    sr->st.truncated = true;
  }
  if (t >= sr->strategy_deadline_s && !sr->strategy_stop) {
    sr->strategy_stop = true;
    sr->st.strategies_truncated |= sr->strategy_bit;
  }
  if (t < sr->ticker.next_s) return;
  double f = sr->n_to_run > 0 ? ((double)sr->ordinal + sr->fraction) / (double)sr->n_to_run : 0;
  if (sr->n_top > 0)
    snprintf(sr->what, sizeof sr->what, "%s: %lld plans evaluated, best %.4g s per iteration", sr->strategy,
             (long long)sr->st.n_evaluated, sr->top[0].r.iter_s);
  else
    snprintf(sr->what, sizeof sr->what, "%s: %lld plans evaluated, none fits yet", sr->strategy,
             (long long)sr->st.n_evaluated);
  if (search_ticker_tick(&sr->ticker, t, f, sr->what)) {
    sr->st.cancelled = true;
    sr->stop = true;
  }
}

bool search_should_stop(search_run *sr) {
  if (!sr->stop && !sr->strategy_stop) tick(sr);
  return sr->stop || sr->strategy_stop;
}

/* ---- Seeded randomness ------------------------------------------------------------------------------------ */

/* SplitMix64 (Steele, Lea and Flood 2014, "Fast splittable pseudorandom number generators"): one 64-bit state
 * word, every seed a full-period stream. */
uint64_t search_rng_next(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* The stream of one strategy: the seed mixed with the strategy's name (FNV-1a), so that a strategy draws the
 * same numbers whichever others ran before it. */
uint64_t search_rng_seed(uint64_t seed, const char *name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char *c = name; *c; c++) h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
  uint64_t x = seed ^ h;
  return search_rng_next(&x);
}

uint64_t search_random_u64(search_run *sr) { return search_rng_next(&sr->rng); }

double search_random_unit(search_run *sr) { return (double)(search_random_u64(sr) >> 11) * 0x1.0p-53; }

/* ---- Refining the best plans ------------------------------------------------------------------------------ */

ap_status search_refine_best(search_run *sr, int k, search_refine_fn fn, void *user) {
  if (k > sr->n_top) k = sr->n_top;
  if (k <= 0) return AP_OK;
  /* Copied before the first offer, which may reorder or replace the pool. */
  search_result *bases = arena_alloc(sr->arena, sizeof *bases * (size_t)k);
  if (!bases) return AP_NOMEM;
  ap_status st = AP_OK;
  for (int i = 0; i < k && !st; i++) {
    st = plan_copy(&bases[i].p, &sr->top[i].p);
    memcpy(&bases[i].r, &sr->top[i].r, sizeof bases[i].r);
    bases[i].found_by = sr->top[i].found_by;
  }
  for (int i = 0; i < k && !st && !search_should_stop(sr); i++) {
    search_progress(sr, (double)i / k);
    st = fn(sr, &bases[i], user);
    if (st == AP_CANCELLED || st == AP_INVALID) st = AP_OK;
  }
  for (int i = 0; i < k; i++) plan_free(&bases[i].p);
  return st;
}

const cost_result *search_offered_cost(const search_run *sr) { return &sr->cur; }

const search_result *search_best(const search_run *sr, int i) {
  return i >= 0 && i < sr->n_top ? &sr->top[i] : NULL;
}

double search_cutoff_s(const search_run *sr) {
  if (sr->opts.objective != SEARCH_OBJ_THROUGHPUT || sr->n_top < sr->cap_top) return INFINITY;
  return sr->top[sr->n_top - 1].r.iter_s;
}

/* ---- Ranking --------------------------------------------------------------------------------------------- */

/* True when a ranks strictly before b under the objective. */
static bool better(const search_run *sr, const cost_result *a, const cost_result *b) {
  if (sr->opts.objective == SEARCH_OBJ_MEMORY) {
    if (a->peak_mem_bytes < b->peak_mem_bytes * (1 - TIE_EPS)) return true;
    if (a->peak_mem_bytes > b->peak_mem_bytes * (1 + TIE_EPS)) return false;
  }
  return a->iter_s < b->iter_s * (1 - TIE_EPS);
}

/* Two plans that differ only in their memory savers are one configuration. */
static bool same_config(const plan *a, const plan *b) {
  if (a->tp != b->tp || a->pp != b->pp || a->dp != b->dp || a->micro_batch_size != b->micro_batch_size ||
      a->vpp != b->vpp || a->schedule != b->schedule)
    return false; /* the cheap fields first: most pairs differ there */
  return plan_equal_except(a, b, PLAN_F(RECOMPUTE) | PLAN_F(RECOMPUTE_LAYERS) | PLAN_F(CHUNK_RECOMPUTE_LAYERS) |
                                     PLAN_F(ZERO_STAGE));
}

static bool same_mesh(const plan *a, const plan *b) {
  return a->tp == b->tp && a->pp == b->pp && a->dp == b->dp && a->cp == b->cp && a->ep == b->ep &&
         plan_etp(a) == plan_etp(b) && memcmp(a->order, b->order, sizeof a->order) == 0;
}

/* Writes a plan into a list slot (raw memory or a plan whose ops were handed on). Plans offered by the
 * strategies carry no ops yet, so the copy cannot fail; one that did would keep the plan without its ops. */
static void put(search_run *sr, search_result *slot, const plan *p, const cost_result *r) {
  (void)plan_copy(&slot->p, p);
  memcpy(&slot->r, r, sizeof *r);
  slot->found_by = sr->strategy;
}

/* Removes entry i of a list of n, keeping the order. */
static void list_remove(search_result *list, int *n, int i) {
  plan_free(&list[i].p);
  if (i < *n - 1) memmove(&list[i], &list[i + 1], sizeof list[0] * (size_t)(*n - 1 - i));
  (*n)--;
}

/* Inserts at pos, dropping the last entry when the list is full. */
static void list_insert(search_run *sr, search_result *list, int *n, int cap, int pos, const plan *p,
                        const cost_result *r) {
  int last = *n < cap ? *n : cap - 1;
  if (*n == cap) plan_free(&list[cap - 1].p); /* dropped off the end */
  if (last > pos) memmove(&list[pos + 1], &list[pos], sizeof list[0] * (size_t)(last - pos));
  put(sr, &list[pos], p, r);
  if (*n < cap) (*n)++;
}

/* Keeps a fitting plan if it ranks among the top_k configurations. */
static void keep_top(search_run *sr, const plan *p, const cost_result *r) {
  int same = -1;
  for (int i = 0; i < sr->n_top; i++)
    if (same_config(&sr->top[i].p, p)) {
      if (!better(sr, r, &sr->top[i].r)) return;
      same = i;
      break;
    }
  int pos = same >= 0 ? same : sr->n_top;
  while (pos > 0 && better(sr, r, &sr->top[pos - 1].r)) pos--;
  if (pos >= sr->cap_top) return;
  if (sr->opts.admit && !sr->opts.admit(sr->opts.admit_user, p)) {
    sr->st.n_not_admitted++;
    return;
  }
  if (same >= 0) list_remove(sr->top, &sr->n_top, same);
  list_insert(sr, sr->top, &sr->n_top, sr->cap_top, pos, p, r);
}

/* Keeps a plan that does not fit if it is among the closest: least peak memory, then least time, one per
 * mesh (so that the report shows different ways of cutting the model, each with its best memory savers). */
static void keep_closest(search_run *sr, const plan *p, const cost_result *r) {
  if (sr->n_top > 0) return; /* only needed while nothing fits */
  int same = -1;
  for (int i = 0; i < sr->n_closest; i++)
    if (same_mesh(&sr->closest[i].p, p)) {
      const cost_result *o = &sr->closest[i].r;
      if (r->peak_mem_bytes >= o->peak_mem_bytes * (1 - TIE_EPS) &&
          !(r->peak_mem_bytes <= o->peak_mem_bytes * (1 + TIE_EPS) && r->iter_s < o->iter_s * (1 - TIE_EPS)))
        return;
      same = i;
      break;
    }
  if (same >= 0) list_remove(sr->closest, &sr->n_closest, same);
  int pos = sr->n_closest;
  while (pos > 0 && (r->peak_mem_bytes < sr->closest[pos - 1].r.peak_mem_bytes * (1 - TIE_EPS))) pos--;
  if (pos >= sr->cap_closest) return;
  list_insert(sr, sr->closest, &sr->n_closest, sr->cap_closest, pos, p, r);
}

/* ---- Offers ---------------------------------------------------------------------------------------------- */

bool search_breaks_fixed(const search_opts *o, int64_t default_seq, const plan *p, char *why, size_t n) {
  const plan *f = &o->fixed;
  if (p->global_batch_size != o->global_batch_size) {
    snprintf(why, n, "plan: global_batch_size = %lld, but the search is for %lld", (long long)p->global_batch_size,
             (long long)o->global_batch_size);
    return true;
  }
  int64_t want_seq = o->seq_length > 0 ? o->seq_length : default_seq;
  int64_t seq = p->seq_length > 0 ? p->seq_length : default_seq;
  if (seq != want_seq) {
    snprintf(why, n, "plan: seq_length = %lld, but the search is for %lld", (long long)seq, (long long)want_seq);
    return true;
  }
  /* The fixed fields, from the field table: each searched field whose bit the mask holds, compared by its
   * resolved value where it has one (etp 0 means tp). */
  size_t n_fields;
  const plan_field *fields = plan_fields(&n_fields);
  for (size_t i = 0; i < n_fields && o->fixed_mask; i++) {
    const plan_field *fl = &fields[i];
    if (!(fl->flags & PLAN_FF_SEARCHED) || !search_opts_fixes(o, fl->id)) continue;
    bool same = fl->resolved ? fl->resolved(p) == fl->resolved(f) : plan_field_equal(p, f, fl);
    if (same) continue;
    char got[96], want[96];
    if (fl->resolved) {
      snprintf(got, sizeof got, "%lld", (long long)fl->resolved(p));
      snprintf(want, sizeof want, "%lld", (long long)fl->resolved(f));
    } else {
      plan_field_format(p, fl, got, sizeof got);
      plan_field_format(f, fl, want, sizeof want);
    }
    snprintf(why, n, "plan: %s = %s, but %s = %s is fixed", plan_field_name(fl->id), got, plan_field_name(fl->id), want);
    return true;
  }
  return false;
}

static void reject(search_run *sr, const char *why) {
  sr->st.n_rejected++;
  if (!sr->st.first_rejection[0]) snprintf(sr->st.first_rejection, sizeof sr->st.first_rejection, "%s", why);
}

ap_status search_offer(search_run *sr, const plan *offered, cost_result *cost) {
  sr->st.n_offered++;
  plan stacked = *offered;
  stacked.stack = sr->opts.fixed.stack; /* the template's stack is every plan's */
  const plan *p = &stacked;
  if (sr->st.cancelled) return AP_CANCELLED;
  char why[1024];
  if (search_breaks_fixed(&sr->opts, sr->default_seq, p, why, sizeof why)) {
    reject(sr, why);
    return AP_INVALID;
  }
  /* Only what the stack runs (plan/stack.h); the template's stack, resolved by the caller, is the plan's. */
  if (!plan_stack_runs(sr->opts.fixed.stack, p, why, sizeof why)) {
    reject(sr, why);
    return AP_INVALID;
  }
  ctx_clear(&sr->scratch);
  cost_result *r = &sr->cur;
  ap_status st = cost_estimate(&sr->scratch, sr->env, p, r);
  if (st == AP_INVALID || st == AP_UNSUPPORTED) {
    reject(sr, sr->scratch.error);
    return AP_INVALID;
  }
  if (st) return ctx_fail(sr->ctx, st, "%s", sr->scratch.error[0] ? sr->scratch.error : ap_status_str(st));
  if (!isfinite(r->iter_s) || !isfinite(r->peak_mem_bytes) || r->iter_s <= 0) {
    reject(sr, "plan: the cost model gave no finite time or memory");
    return AP_INVALID;
  }
  sr->st.n_evaluated++;
  if (r->fits && sr->limit_fraction < 1) r->fits = r->peak_mem_bytes <= sr->limit_fraction * r->capacity_bytes;
  if (!r->fits) r->bound = "memory";
  if (sr->opts.observe) sr->opts.observe(sr->opts.observe_user, p, r);
  if (r->fits) {
    sr->st.n_fit++;
    keep_top(sr, p, r);
  } else {
    keep_closest(sr, p, r);
  }
  if (cost) memcpy(cost, r, sizeof *r);
  tick(sr);
  return sr->st.cancelled ? AP_CANCELLED : AP_OK;
}

/* ---- The whole search ------------------------------------------------------------------------------------- */

static ap_status check_opts(ap_ctx *ctx, const search_opts *o) {
  size_t n_reg;
  search_strategies(&n_reg);
  if (o->top_k < 1 || o->top_k > MAX_TOP_K)
    return ctx_fail(ctx, AP_INVALID, "search: top_k = %d must be in [1, %d]", o->top_k, MAX_TOP_K);
  if (!(o->max_mem_fraction > 0 && o->max_mem_fraction <= 1))
    return ctx_fail(ctx, AP_INVALID, "search: max_mem_fraction = %g must be in (0, 1]", o->max_mem_fraction);
  if (o->global_batch_size < 1 || o->global_batch_size > PLAN_MAX_COUNT)
    return ctx_fail(ctx, AP_INVALID, "search: global_batch_size = %lld must be in [1, %lld]",
                    (long long)o->global_batch_size, (long long)PLAN_MAX_COUNT);
  if (o->seq_length < 0 || o->seq_length > PLAN_MAX_COUNT)
    return ctx_fail(ctx, AP_INVALID, "search: seq_length = %lld must be in [0, %lld]", (long long)o->seq_length,
                    (long long)PLAN_MAX_COUNT);
  if ((unsigned)o->objective >= SEARCH_OBJ_COUNT_) return ctx_fail(ctx, AP_INVALID, "search: unknown objective");
  if (n_reg < SEARCH_MAX_STRATEGIES && (o->strategies >> n_reg) != 0)
    return ctx_fail(ctx, AP_INVALID, "search: strategy bits 0x%x name strategies the registry lacks", o->strategies);
  if (isnan(o->time_budget_s)) return ctx_fail(ctx, AP_INVALID, "search: time budget is not a number");
  for (int i = 0; i < SEARCH_MAX_STRATEGIES; i++)
    if (isnan(o->strategy_time_budget_s[i]) || o->strategy_time_budget_s[i] < 0)
      return ctx_fail(ctx, AP_INVALID, "search: the time budget of strategy %d must be >= 0 seconds", i);
  return AP_OK;
}

/* Copies the first n entries of a result list into a heap array for the caller (search_results_free). */
static search_result *copy_out(const search_result *list, int n) {
  search_result *out = calloc((size_t)(n > 0 ? n : 1), sizeof *out);
  if (!out) return NULL;
  for (int i = 0; i < n; i++) {
    if (plan_copy(&out[i].p, &list[i].p)) {
      search_results_free(out, i + 1);
      return NULL;
    }
    memcpy(&out[i].r, &list[i].r, sizeof out[i].r);
    out[i].found_by = list[i].found_by;
  }
  return out;
}

void search_results_free(search_result *list, int n) {
  if (!list) return;
  for (int i = 0; i < n; i++) plan_free(&list[i].p);
  free(list);
}

ap_status search_run_all(ap_ctx *ctx, const cost_env *env, const search_opts *opts, search_result **out, int *n_out,
                         search_stats *stats) {
  *out = NULL;
  *n_out = 0;
  if (stats) memset(stats, 0, sizeof *stats);
  ap_status st = check_opts(ctx, opts);
  if (st) return st;
  search_run *sr = calloc(1, sizeof *sr);
  if (!sr || !(sr->arena = arena_new())) {
    free(sr);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  sr->ctx = ctx;
  sr->scratch = ctx_child(ctx);
  sr->scratch.progress_fn = NULL;
  sr->env = env;
  sr->g = cost_env_graph(env);
  sr->default_seq = sr->g->default_seq;
  sr->opts = *opts;
  /* The loss of a transformer, unless fixed: the stack's fused loss where it can never lose to the unfused one
   * (no more bytes kept, none more moved: every stack with a fused loss, plan/stack.h
   * plan_stack_fused_dominates), else the stack's default. Every offered plan takes it from the template, so
   * the choice costs no evaluation. */
  if (!search_opts_fixes(opts, PLAN_F_FUSED_LOSS) && cost_env_facts(env)->has_layers)
    sr->opts.fixed.fused_loss = plan_stack_search_fused(
        opts->fixed.stack != PLAN_STACK_DEFAULT ? opts->fixed.stack : plan_stack_default(true));
  search_space_init(&sr->space, env, &sr->opts.fixed, opts->fixed_mask, opts->global_batch_size, opts->seq_length);
  /* The ranked pool holds at least SEARCH_REFINE_K plans whatever top_k asks for, and the cutoff is its
   * last, so that the refining strategies see the same bases, and the winner is the same, for every top_k up
   * to SEARCH_REFINE_K (issue 10: the winner depended on --top). */
  sr->cap_top = opts->top_k > SEARCH_REFINE_K ? opts->top_k : SEARCH_REFINE_K;
  sr->cap_closest = opts->top_k > MIN_CLOSEST ? opts->top_k : MIN_CLOSEST;
  sr->top = arena_alloc(sr->arena, sizeof *sr->top * (size_t)sr->cap_top);
  sr->closest = arena_alloc(sr->arena, sizeof *sr->closest * (size_t)sr->cap_closest);
  if (!sr->top || !sr->closest) {
    arena_free(sr->arena);
    free(sr);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  /* The memory limit: the smallest device of the cluster times the usable fraction. */
  const hw_cluster *hc = cost_env_cluster(env);
  double cap = INFINITY;
  for (int gi = 0; gi < hc->n_groups; gi++)
    if ((double)hc->groups[gi].device.mem_bytes < cap) cap = (double)hc->groups[gi].device.mem_bytes;
  sr->limit_fraction = opts->max_mem_fraction;
  sr->limit_bytes = cap * opts->max_mem_fraction;
  sr->t0_s = now_s();
  sr->deadline_s = opts->time_budget_s > 0 ? sr->t0_s + opts->time_budget_s : INFINITY;
  /* The first check reports at once (fraction 0), so that a caller can stop even a short search; then every
   * SEARCH_PROGRESS_EVERY_S. The CLI prints only once a search has run past one second. */
  search_ticker_init(&sr->ticker, sr->ctx);
  sr->ticker.next_s = sr->t0_s;

  size_t n_reg;
  const search_strategy *const *reg = search_strategies(&n_reg);
  bool runs[SEARCH_MAX_STRATEGIES] = {false};
  for (size_t i = 0; i < n_reg && i < SEARCH_MAX_STRATEGIES; i++) {
    if (opts->strategies && !((opts->strategies >> i) & 1u)) continue;
    runs[i] = !reg[i]->applies || reg[i]->applies(sr);
    if (runs[i]) sr->n_to_run++;
  }
  for (size_t i = 0; i < n_reg && i < SEARCH_MAX_STRATEGIES && !st && !sr->stop; i++) {
    if (!runs[i]) continue;
    sr->strategy = reg[i]->name;
    sr->strategy_bit = 1u << i;
    sr->fraction = 0;
    sr->strategy_stop = false;
    sr->rng = search_rng_seed(opts->seed, reg[i]->name);
    double budget = i < SEARCH_MAX_STRATEGIES ? opts->strategy_time_budget_s[i] : 0;
    sr->strategy_deadline_s = budget > 0 ? now_s() + budget : INFINITY;
    sr->st.strategies_run |= 1u << i;
    st = reg[i]->run(sr);
    if (st == AP_CANCELLED) st = AP_OK;
    sr->ordinal++;
  }
  sr->st.elapsed_s = now_s() - sr->t0_s;
  sr->st.arena_bytes = arena_used_bytes(sr->arena);
  if (stats) *stats = sr->st;

  if (!st) {
    if (sr->n_top > 0) {
      *n_out = sr->n_top < opts->top_k ? sr->n_top : opts->top_k;
      *out = copy_out(sr->top, *n_out);
      st = sr->st.cancelled ? ctx_fail(ctx, AP_CANCELLED, "search cancelled; the plans found so far are returned")
                            : AP_OK;
    } else if (sr->st.n_not_admitted > 0) {
      st = ctx_fail(ctx, AP_UNSUPPORTED,
                    "%lld plans fit, but the admission filter (the export format) accepts none of them",
                    (long long)sr->st.n_not_admitted);
    } else if (sr->n_closest > 0 && !sr->st.cancelled) {
      *out = copy_out(sr->closest, sr->n_closest);
      *n_out = sr->n_closest;
      const search_result *c = &sr->closest[0];
      st = ctx_fail(ctx, AP_INFEASIBLE,
                    "no plan fits in %.1f GiB per device%s; the closest needs %.1f GiB (%lld plans evaluated)",
                    sr->limit_bytes / 1073741824.0,
                    sr->st.truncated ? " within the time budget" : "", c->r.peak_mem_bytes / 1073741824.0,
                    (long long)sr->st.n_evaluated);
    } else if (sr->st.cancelled) {
      st = ctx_fail(ctx, AP_CANCELLED, "search cancelled before any plan that fits was found");
    } else if (sr->n_to_run == 0) {
      st = ctx_fail(ctx, AP_UNSUPPORTED, "search: no strategy applies to this model and cluster");
    } else if (sr->st.n_rejected > 0 && sr->st.n_evaluated == 0) {
      st = ctx_fail(ctx, sr->opts.fixed_mask ? AP_INVALID : AP_UNSUPPORTED,
                    "%s; the first candidate failed with: %s",
                    sr->opts.fixed_mask ? "no valid plan meets the fixed fields" : "no valid plan for this model and cluster",
                    sr->st.first_rejection);
    } else {
      st = ctx_fail(ctx, AP_INFEASIBLE, "no plan found%s (%lld plans evaluated)",
                    sr->st.truncated ? " within the time budget" : "", (long long)sr->st.n_evaluated);
    }
    if (*n_out > 0 && !*out) {
      *n_out = 0;
      st = ctx_fail(ctx, AP_NOMEM, "out of memory");
    }
  }
  for (int i = 0; i < sr->n_top; i++) plan_free(&sr->top[i].p);
  for (int i = 0; i < sr->n_closest; i++) plan_free(&sr->closest[i].p);
  arena_free(sr->arena);
  free(sr);
  return st;
}
