/* The autopar-search/2 document (report layer; plan_doc.h, docs/json.md). Every figure of `plan`'s answer is
 * put here once: the problem, the search's statistics, each plan with the one cost-result object
 * (cost_result_put) and what it loses on against the winner, the closest plans with what would make them fit
 * when nothing fits, and the --compare plan. The text explanation (plan_text.c) reads only this document. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/result_doc.h"
#include "plan/summary.h"
#include "report/advice.h"
#include "report/plan_doc.h"

/* ---- When nothing fits: what would make a plan fit (advice.c) ------------------------------------------------- */

/* About how many devices the plan's mesh would need for its model states, sharded ZeRO-3 over more data-parallel
 * ranks, to leave room for what does not shrink (activations, logits, buffers, overhead); 0 when those alone
 * exceed the limit. An estimate: it scales the data-parallel degree only. */
static int64_t devices_needed(const cost_env *env, const plan *p, const cost_result *r, double limit) {
  const cost_mem *m = &r->mem[r->peak_rank];
  double n_dp = (double)(p->dp * p->cp);
  plan_model_facts facts;
  plan_model_facts_of(cost_env_graph(env), &facts);
  cost_state_bytes sb = cost_state_bytes_plan(&cost_env_tuning(env)->memory, p, facts.has_layers);
  double per_param = sb.weights + sb.grads + sb.unsharded + sb.optimizer;
  /* The rank's parameters, from the parameter bytes and how the plan shards them. */
  double params = m->params / 2.0 * (p->zero_stage >= 3 ? n_dp : 1);
  double rest = m->total - m->params - m->grads - m->optimizer;
  if (rest >= limit) return 0;
  double f = ceil(per_param * params / (n_dp * (limit - rest)));
  if (f < 1) f = 1;
  int64_t n = cost_env_cluster(env)->n_devices;
  double need = (double)n * f;
  return need > 1e15 ? INT64_MAX : (int64_t)need;
}

/* ---- Pieces ------------------------------------------------------------------------------------------------------ */

/* One costed plan: its summary, its plan object and the cost result's keys. */
static void put_figures(jd *d, json_t *o, const plan *p, const cost_result *r) {
  char b[512];
  plan_summary(p, PLAN_SUMMARY_LINE, NULL, NULL, b, sizeof b);
  jd_str(d, o, "summary", b);
  cost_doc_plan(d, o, "plan", p);
  cost_result_put(d, o, r);
}

/* How r compares with the reference ref: r's slowdown, its peak memory minus ref's, and each time part's
 * difference (r minus ref), seconds. */
static void put_vs(jd *d, json_t *parent, const char *key, const cost_result *ref, const cost_result *r) {
  json_t *o = jd_obj(d, parent, key);
  jd_num(d, o, "slowdown", r->iter_s / ref->iter_s - 1);
  jd_num(d, o, "peak_mem_delta_bytes", r->peak_mem_bytes - ref->peak_mem_bytes);
  json_t *ds = jd_obj(d, o, "delta_s");
  const cost_time_part *parts = cost_time_parts();
  for (size_t i = 0; i < COST_N_TIME_PARTS; i++)
    jd_num(d, ds, parts[i].key, cost_time_part_s(&r->time, i) - cost_time_part_s(&ref->time, i));
}

static void put_closest(jd *d, const plan_doc_in *in, double limit) {
  json_t *arr = jd_arr(d, d->root, "closest");
  for (int i = 0; i < in->n; i++) {
    const search_result *c = &in->res[i];
    json_t *o = jd_obj(d, arr, NULL);
    jd_int(d, o, "rank", i + 1);
    put_figures(d, o, &c->p, &c->r);
    jd_num(d, o, "over_bytes", c->r.peak_mem_bytes - limit);
    json_t *fixes = jd_arr(d, o, "fixes");
    advice_fix *f = malloc(sizeof *f * ADVICE_MAX);
    int nf = f ? advice_fixes(in->env, &c->p, limit, f) : 0;
    for (int j = 0; j < nf; j++) {
      json_t *fx = jd_obj(d, fixes, NULL);
      char b[512];
      plan_summary(&f[j].p, PLAN_SUMMARY_LINE, NULL, NULL, b, sizeof b);
      jd_str(d, fx, "change", f[j].change);
      jd_str(d, fx, "summary", b);
      jd_num(d, fx, "peak_mem_bytes", f[j].peak_bytes);
      jd_num(d, fx, "iteration_time_s", f[j].iter_s);
      jd_bool(d, fx, "fits", f[j].fits);
      jd_bool(d, fx, "host_short", f[j].host_short);
    }
    free(f);
    int64_t need = devices_needed(in->env, &c->p, &c->r, limit);
    if (need > 0) jd_int(d, o, "devices_needed_estimate", need);
    else jd_null(d, o, "devices_needed_estimate");
  }
}

static void put_compare(jd *d, const plan_compare *c, const search_result *best) {
  json_t *o = jd_obj(d, d->root, "compare");
  jd_bool(d, o, "valid", c->valid);
  jd_bool(d, o, "batch_differs", c->batch_differs);
  if (!c->valid) {
    char b[512];
    plan_summary(&c->p, PLAN_SUMMARY_LINE, NULL, NULL, b, sizeof b);
    jd_str(d, o, "error", c->error);
    jd_str(d, o, "summary", b);
    cost_doc_plan(d, o, "plan", &c->p);
    return;
  }
  put_figures(d, o, &c->p, c->r);
  if (best) put_vs(d, o, "best_vs_given", c->r, &best->r);
  if (c->reason[0]) jd_str(d, o, "not_chosen_because", c->reason);
}

/* ---- The explored space ------------------------------------------------------------------------------------------ */

/* xorshift64* (Vigna 2016, "An experimental exploration of Marsaglia's xorshift generators", Fig. 10): a
 * seeded, reproducible stream for the reservoir. */
static uint64_t next_rand(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1DULL;
}

void plan_space_observe(void *user, const plan *p, const cost_result *r) {
  plan_space *sp = user;
  if (sp->failed) return;
  if (!sp->pts) {
    sp->pts = malloc(sizeof *sp->pts * PLAN_SPACE_MAX);
    sp->rng = 0x9E3779B97F4A7C15ULL; /* any non-zero seed; fixed so that a search samples the same plans */
    if (!sp->pts) {
      sp->failed = true;
      return;
    }
  }
  /* Algorithm R (Vitter 1985): the i-th plan replaces a kept one with probability PLAN_SPACE_MAX / (i + 1). */
  int64_t slot = sp->n < PLAN_SPACE_MAX ? sp->n++ : (int64_t)(next_rand(&sp->rng) % (uint64_t)(sp->n_seen + 1));
  sp->n_seen++;
  if (slot >= PLAN_SPACE_MAX) return;
  plan_space_point *pt = &sp->pts[slot];
  pt->p = *p;
  pt->iter_s = r->iter_s;
  pt->peak_mem_bytes = r->peak_mem_bytes;
  pt->fits = r->fits;
}

static void put_space(jd *d, const plan_space *sp) {
  json_t *arr = jd_arr(d, d->root, "space");
  for (int i = 0; i < sp->n; i++) {
    const plan_space_point *pt = &sp->pts[i];
    json_t *o = jd_obj(d, arr, NULL);
    char b[512];
    plan_summary(&pt->p, PLAN_SUMMARY_LINE, NULL, NULL, b, sizeof b);
    jd_num(d, o, "iteration_time_s", pt->iter_s);
    jd_num(d, o, "peak_mem_bytes", pt->peak_mem_bytes);
    jd_bool(d, o, "fits", pt->fits);
    jd_str(d, o, "summary", b);
  }
}

/* ---- The document ------------------------------------------------------------------------------------------------ */

void plan_doc(jd *d, const plan_doc_in *in) {
  const graph *g = cost_env_graph(in->env);
  const hw_cluster *hc = cost_env_cluster(in->env);
  const search_stats *st = in->stats;
  double limit = (double)hc->groups[0].device.mem_bytes * in->so->max_mem_fraction;
  int64_t seq = in->so->seq_length > 0 ? in->so->seq_length : g->default_seq;
  jd_init(d, "autopar-search/2");
  json_t *root = d->root;
  jd_str(d, root, "model", g->name);
  jd_str(d, root, "cluster", in->cluster_spec);
  jd_int(d, root, "n_devices", hc->n_devices);
  jd_str(d, root, "device", hc->groups[0].device.name);
  jd_int(d, root, "device_memory_bytes", hc->groups[0].device.mem_bytes);
  jd_num(d, root, "mem_limit_bytes", limit);
  jd_int(d, root, "global_batch_size", in->so->global_batch_size);
  jd_int(d, root, "seq_length", seq);
  jd_str(d, root, "objective", search_objective_name(in->so->objective));
  cost_stack_put(d, root, in->so->fixed.stack, in->stack_source ? in->stack_source : "default",
                 in->stack_why ? in->stack_why : "the default");
  json_t *s = jd_obj(d, root, "search");
  json_t *names = jd_arr(d, s, "strategies");
  size_t n_reg;
  const search_strategy *const *reg = search_strategies(&n_reg);
  for (size_t i = 0; i < n_reg && i < 32; i++)
    if ((st->strategies_run >> i) & 1u) jd_str(d, names, NULL, reg[i]->name);
  jd_int(d, s, "n_offered", st->n_offered);
  jd_int(d, s, "n_rejected", st->n_rejected);
  jd_int(d, s, "n_evaluated", st->n_evaluated);
  jd_int(d, s, "n_fit", st->n_fit);
  jd_num(d, s, "elapsed_s", st->elapsed_s);
  jd_num(d, s, "plans_per_s", st->elapsed_s > 0 ? (double)st->n_evaluated / st->elapsed_s : NAN);
  jd_bool(d, s, "truncated", st->truncated);
  jd_bool(d, s, "cancelled", st->cancelled);
  jd_num(d, s, "time_budget_s", in->so->time_budget_s);
  jd_int(d, s, "arena_bytes", (int64_t)st->arena_bytes);
  bool have_space = in->space && !in->space->failed && in->space->n > 0;
  jd_int(d, s, "space_listed", have_space ? in->space->n : 0);
  bool feasible = in->st != AP_INFEASIBLE && in->n > 0;
  jd_bool(d, root, "feasible", feasible);
  if (!feasible) jd_str(d, root, "message", in->message ? in->message : "");
  json_t *plans = jd_arr(d, root, "plans");
  for (int i = 0; feasible && i < in->n; i++) {
    const search_result *r = &in->res[i];
    json_t *o = jd_obj(d, plans, NULL);
    jd_int(d, o, "rank", i + 1);
    jd_str(d, o, "found_by", r->found_by ? r->found_by : "");
    put_figures(d, o, &r->p, &r->r);
    cost_calibration_put(d, o, in->env, &r->p, &r->r);
    if (i > 0) put_vs(d, o, "vs_best", &in->res[0].r, &r->r);
  }
  if (in->st == AP_INFEASIBLE) put_closest(d, in, limit);
  if (in->cmp && in->cmp->have) put_compare(d, in->cmp, feasible ? &in->res[0] : NULL);
  if (have_space) put_space(d, in->space);
}
