/* ap_solve_file (search layer; include/autopar.h "Solver problem files", docs/solve.md): reads a problem
 * file, picks the strategy from the registry (solve.c), runs it and writes autopar-solve/1 JSON or a one-line
 * text summary. Numbers are written with 17 significant digits, so that they read back to the same double. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/solve/solve.h"

void ap_solve_opts_init(ap_solve_opts *opts) {
  memset(opts, 0, sizeof *opts);
  opts->seed = 1;
}

const char *ap_solve_strategy_name(size_t i, const char **summary) {
  size_t n;
  const solve_strategy *s = solve_strategies(&n);
  if (i >= n) return NULL;
  if (summary) *summary = s[i].summary;
  return s[i].name;
}

static const char *const status_names[] = {"optimal", "feasible", "infeasible"};
_Static_assert(sizeof status_names / sizeof *status_names == SOLVE_INFEASIBLE + 1, "one name per solve_status");

static void num(strbuf *sb, double x) {
  if (isfinite(x)) sb_printf(sb, "%.17g", x);
  else sb_puts(sb, "null");
}

/* Parses "NODE=IDX;NODE=IDX" into ann (per node, -1 = none). */
static ap_status parse_annotate(ap_ctx *ctx, const sp_problem *p, const char *spec, int32_t *ann) {
  for (int32_t i = 0; i < p->n_nodes; i++) ann[i] = -1;
  const char *q = spec;
  while (*q) {
    const char *end = strchr(q, ';');
    size_t len = end ? (size_t)(end - q) : strlen(q);
    char item[64];
    if (len == 0 || len >= sizeof item) {
      return ctx_fail(ctx, AP_INVALID, "--annotate: expected NODE=STRATEGY items separated by ';', got \"%s\"", spec);
    }
    memcpy(item, q, len);
    item[len] = '\0';
    char *eq = strchr(item, '='), *e1 = NULL, *e2 = NULL;
    long node = eq ? strtol(item, &e1, 10) : -1, k = eq ? strtol(eq + 1, &e2, 10) : -1;
    if (!eq || e1 != eq || e1 == item || !e2 || *e2 || e2 == eq + 1)
      return ctx_fail(ctx, AP_INVALID, "--annotate: \"%s\": expected NODE=STRATEGY (two indices)", item);
    if (node < 0 || node >= p->n_nodes)
      return ctx_fail(ctx, AP_INVALID, "--annotate: \"%s\": %s has no node %ld (it has %d)", item, p->file, node,
                      p->n_nodes);
    if (k < 0 || k >= p->nodes[node].n_strategies)
      return ctx_fail(ctx, AP_INVALID, "--annotate: \"%s\": node %ld has %d strategies", item, node,
                      p->nodes[node].n_strategies);
    if (ann[node] >= 0 && ann[node] != k)
      return ctx_fail(ctx, AP_INVALID, "--annotate: node %ld is annotated twice", node);
    ann[node] = (int32_t)k;
    q += len + (end ? 1 : 0);
  }
  return AP_OK;
}

static void header(strbuf *sb, const char *problem, const char *strategy, solve_status status, double obj,
                   double lb, int64_t n_evals) {
  sb_printf(sb, "{\"format\": \"autopar-solve/1\", \"problem\": \"%s\", \"strategy\": \"%s\", \"status\": \"%s\", "
                "\"objective\": ", problem, strategy, status_names[status]);
  num(sb, status == SOLVE_INFEASIBLE ? NAN : obj);
  sb_puts(sb, ", \"lower_bound\": ");
  num(sb, status == SOLVE_INFEASIBLE ? NAN : lb);
  sb_printf(sb, ", \"evaluations\": %lld", (long long)n_evals);
}

static ap_status run_sharding(ap_ctx *ctx, const char *path, json_t *root, arena *a, const solve_strategy *s,
                              solve_opts *o, const char *annotate, int format, strbuf *sb) {
  sp_problem p;
  ap_status st = sp_from_json(ctx, a, path, root, &p);
  if (st) return st;
  if (!s->sharding)
    return ctx_fail(ctx, AP_UNSUPPORTED, "--strategy %s solves stage problems; %s is a sharding problem (try ilp)",
                    s->name, path);
  int32_t *ann = NULL;
  if (annotate && *annotate) {
    if (strcmp(s->name, "greedy") != 0)
      return ctx_fail(ctx, AP_INVALID, "--annotate seeds --strategy greedy, not %s", s->name);
    if (!(ann = arena_alloc(a, (size_t)p.n_nodes * sizeof *ann))) return ctx_fail(ctx, AP_NOMEM, "out of memory");
    if ((st = parse_annotate(ctx, &p, annotate, ann))) return st;
    o->annotate = ann;
  }
  sp_result r = {SOLVE_INFEASIBLE, NAN, NAN, arena_alloc(a, (size_t)p.n_groups * sizeof(int32_t)), 0, NULL, false};
  if (!r.choice) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  if ((st = s->sharding(ctx, &p, o, &r))) return st;
  bool feasible = r.status != SOLVE_INFEASIBLE;
  if (format == AP_OUT_JSON) {
    header(sb, SP_FORMAT, s->name, r.status, r.objective, r.lower_bound, r.n_evals);
    if (r.timed_out) sb_puts(sb, ", \"time_budget_ended\": true");
    if (r.answer_from) sb_printf(sb, ", \"answer_from\": \"%s\"", r.answer_from);
    if (feasible) {
      sb_puts(sb, ", \"choice\": [");
      for (int32_t i = 0; i < p.n_nodes; i++) sb_printf(sb, "%s%d", i ? ", " : "", r.choice[p.group_of[i]]);
      sb_puts(sb, "]");
    }
    sb_puts(sb, "}\n");
  } else {
    sb_printf(sb, "%s: sharding problem, %d nodes (%d after followers); %s: %s", path, p.n_nodes, p.n_groups,
              s->name, status_names[r.status]);
    if (feasible) {
      sb_printf(sb, ", objective %.6g", r.objective);
      if (isfinite(r.lower_bound)) sb_printf(sb, ", lower bound %.6g", r.lower_bound);
      if (r.answer_from)
        sb_printf(sb, " (the time budget ended before %s found a better one: %s's answer)", s->name, r.answer_from);
      else if (r.timed_out)
        sb_puts(sb, " (the time budget ended: the best found by then)");
      sb_puts(sb, "; choice");
      for (int32_t i = 0; i < p.n_nodes; i++) sb_printf(sb, " %d", r.choice[p.group_of[i]]);
    }
    sb_puts(sb, "\n");
  }
  return feasible ? AP_OK : ctx_fail(ctx, AP_INFEASIBLE, "%s: %s", path,
                                     s->exact ? "the problem has no feasible choice"
                                              : "the strategy found no feasible choice within its budget");
}

static ap_status run_stage(ap_ctx *ctx, const char *path, json_t *root, arena *a, const solve_strategy *s,
                           solve_opts *o, const char *annotate, int format, strbuf *sb) {
  stp_problem p;
  ap_status st = stp_from_json(ctx, a, path, root, &p);
  if (st) return st;
  if (!s->stage)
    return ctx_fail(ctx, AP_UNSUPPORTED, "--strategy %s solves sharding problems; %s is a stage problem (use inter-op)",
                    s->name, path);
  if (annotate && *annotate) return ctx_fail(ctx, AP_INVALID, "--annotate seeds --strategy greedy on sharding problems");
  stp_result r = {SOLVE_INFEASIBLE, NAN, NAN, 0, arena_alloc(a, (size_t)p.n_layers * sizeof(stp_stage)), 0};
  if (!r.stages) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  if ((st = s->stage(ctx, &p, o, &r))) return st;
  bool feasible = r.status != SOLVE_INFEASIBLE;
  if (format == AP_OUT_JSON) {
    header(sb, STP_FORMAT, s->name, r.status, r.objective, r.lower_bound, r.n_evals);
    if (feasible) {
      sb_puts(sb, ", \"stages\": [");
      for (int32_t k = 0; k < r.n_stages; k++) {
        const stp_stage *t = &r.stages[k];
        sb_printf(sb, "%s{\"first_layer\": %d, \"last_layer\": %d, \"submesh\": %d, \"config\": %d}", k ? ", " : "",
                  t->first_layer, t->last_layer, t->submesh, t->config);
      }
      sb_puts(sb, "]");
    }
    sb_puts(sb, "}\n");
  } else {
    sb_printf(sb, "%s: stage problem, %d layers on %d devices, %d micro-batches; %s: %s", path, p.n_layers,
              p.n_devices, p.n_micro_batches, s->name, status_names[r.status]);
    if (feasible) {
      sb_printf(sb, ", objective %.6g; %d stages:", r.objective, r.n_stages);
      for (int32_t k = 0; k < r.n_stages; k++) {
        const stp_stage *t = &r.stages[k];
        sb_printf(sb, " layers %d-%d on submesh %d [%dx%d] config %d%s", t->first_layer, t->last_layer, t->submesh,
                  p.submesh_hosts[t->submesh], p.submesh_devices_per_host[t->submesh], t->config,
                  k + 1 < r.n_stages ? "," : "");
      }
    }
    sb_puts(sb, "\n");
  }
  return feasible ? AP_OK : ctx_fail(ctx, AP_INFEASIBLE, "%s: no sequence of stages covers the layers on exactly %d "
                                                          "devices", path, p.n_devices);
}

ap_status ap_solve_file(ap_ctx *ctx, const char *path, const ap_solve_opts *opts, int format, char **out) {
  API_ENTER(ctx);
  *out = NULL;
  ap_solve_opts def;
  if (!opts) {
    ap_solve_opts_init(&def);
    opts = &def;
  }
  if (opts->time_budget_s < 0 || !isfinite(opts->time_budget_s))
    return ctx_fail(ctx, AP_INVALID, "--time-budget must be a number of seconds > 0");
  if (opts->max_evals < 0) return ctx_fail(ctx, AP_INVALID, "--evals must be >= 1");
  /* The time budget is one wall clock for the whole command: reading, reducing, building and solving. */
  double t0_s = solve_clock_s();
  json_t *root = NULL;
  ap_status st = jx_load_file(ctx, path, &root);
  if (st) return st;
  const char *fmt = problem_format(ctx, path, root);
  if (!fmt) {
    json_decref(root);
    return AP_INVALID;
  }
  bool sharding = strcmp(fmt, SP_FORMAT) == 0;
  const char *name = opts->strategy && *opts->strategy ? opts->strategy : sharding ? "ilp" : "inter-op";
  const solve_strategy *s = solve_strategy_find(name);
  if (!s) {
    size_t n;
    const solve_strategy *all = solve_strategies(&n);
    const char *names[16];
    for (size_t i = 0; i < n && i < 16; i++) names[i] = all[i].name;
    char hint[128];
    util_suggest(name, names, n < 16 ? n : 16, hint, sizeof hint);
    json_decref(root);
    return ctx_fail(ctx, AP_INVALID, "--strategy: unknown strategy \"%s\"%s%s%s", name, *hint ? " (did you mean " : "",
                    hint, *hint ? "?)" : "");
  }
  solve_opts o;
  solve_opts_init(&o);
  o.seed = opts->seed;
  o.progress = ctx;
  if (opts->time_budget_s > 0) o.time_budget_s = opts->time_budget_s;
  o.deadline_s = t0_s + o.time_budget_s;
  o.max_evals = opts->max_evals > 0 ? opts->max_evals : opts->time_budget_s > 0 ? 0 : o.max_evals;
  arena *a = arena_new();
  strbuf sb = {0};
  if (!a) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  else if (sharding) st = run_sharding(ctx, path, root, a, s, &o, opts->annotate, format, &sb);
  else st = run_stage(ctx, path, root, a, s, &o, opts->annotate, format, &sb);
  arena_free(a);
  json_decref(root);
  if (sb.oom) {
    sb_free(&sb);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  if (st == AP_OK || st == AP_INFEASIBLE) *out = sb_take(&sb);
  else sb_free(&sb);
  return st;
}
