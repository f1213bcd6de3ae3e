/* `autopar compare-search` (report layer; include/autopar.h ap_compare_search, docs/graph-plan.md): every
 * search family on the same sharding problem (one graph, one mesh, one budget), against two baselines:
 *  - data parallel: every op splits its batch (its first loop) over every mesh axis where it can, and is
 *    replicated elsewhere;
 *  - Megatron: the matmuls with a weight alternate column- and row-parallel on the inner axis in graph order
 *    (Shoeybi et al. 2019 §3: the first GEMM of a pair split by columns, the second by rows), the batch split on
 *    the outer axis (data parallelism across, Narayanan et al. 2021 §3.3); every other op takes its locally
 *    cheapest strategy given the ops before it.
 * For a heuristic the time to reach its best is measured by rerunning it, same seed, with a doubling evaluation
 * budget (a run with a smaller budget is a prefix of a longer one): the first budget that reaches the final best
 * gives the time. The gap is to the ILP's LP-relaxation bound when the "ilp" part is built. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonx.h"
#include "model/model.h"
#include "report/compare_search.h"
#include "search/graph/graph_plan.h"
#include "search/graph/graph_sim.h"

typedef struct {
  const char *name;
  solve_status status;
  double best_s, time_to_best_s, total_s, lower_bound_s;
  int64_t n_evals;
  bool ran;
  const char *note;
} family_row;

/* The node's strategy with every axis on loop `loop` (or, for a 2-axis mesh with inner >= 0, axis 0 on loop and
 * axis 1 on inner); -1 when none. */
static int find_strategy(const gp_node *nd, int n_axes, int l0, int l1) {
  for (int k = 0; k < nd->n_s; k++) {
    const int8_t *al = nd->s[k].axis_loop;
    if (al[0] == l0 && (n_axes < 2 || al[1] == l1)) return k;
  }
  return -1;
}

/* Cheapest strategy of group g given the decided groups (choice >= 0). */
static int32_t local_best(const sp_problem *p, const int32_t *choice, int32_t g) {
  int32_t best = 0;
  double best_c = INFINITY;
  for (int32_t k = 0; k < p->n_s[g]; k++) {
    double c = p->unary[g][k];
    for (int32_t q = p->adj_start[g]; q < p->adj_start[g + 1] && c < INFINITY; q++) {
      const sp_pair *e = &p->pairs[p->adj[q]];
      int32_t h = sp_pair_other(e, g);
      if (choice[h] >= 0) c += sp_pair_cost(p, e, g, k, choice[h]);
    }
    if (c < best_c) best_c = c, best = k;
  }
  return best;
}

static void baseline(const graph_problem *gp, bool megatron, int32_t *gch) {
  const sp_problem *p = &gp->sp;
  int n_axes = gp->env.mesh->n_axes;
  for (int g = 0; g < p->n_groups; g++) gch[g] = -1;
  bool column = true;
  for (int i = 0; i < gp->n_nodes; i++) {
    int g = p->group_of[i];
    if (p->leader[g] != i) continue;
    const gp_node *nd = &gp->nodes[i];
    const graph_op *op = &gp->g->blocks[nd->block].ops[nd->op];
    shard_loops L;
    shard_op_loops(&gp->g->blocks[nd->block], op, gp->env.b, gp->env.s, &L);
    int k = -1;
    if (megatron) {
      if (op->kind == OP_MATMUL && !op->weight_is_input && L.k_loop >= 0 && L.n_loop >= 0) {
        int tl = column ? L.n_loop : L.k_loop;
        k = n_axes == 2 ? find_strategy(nd, 2, 0, tl) : find_strategy(nd, 1, tl, -1);
        if (k < 0 && n_axes == 2) k = find_strategy(nd, 2, -1, tl);
        column = !column;
      }
    } else {
      k = n_axes == 2 ? find_strategy(nd, 2, 0, 0) : find_strategy(nd, 1, 0, -1);
      if (k < 0 && n_axes == 2) k = find_strategy(nd, 2, 0, -1);
      if (k < 0) k = find_strategy(nd, n_axes, -1, -1);
    }
    if (k >= 0 && sp_allowed(p, g, k)) gch[g] = k;
  }
  for (int i = 0; i < gp->n_nodes; i++) {
    int g = p->group_of[i];
    if (gch[g] < 0) gch[g] = local_best(p, gch, g);
  }
}

/* The evaluation budget when only the clock is to stop a search (far beyond what any clock allows). */
#define CS_NO_EVAL_CAP (INT64_MAX / 4)

static void run_family(ap_ctx *ctx, arena *a, const graph_problem *gp, const solve_strategy *ss, const ap_graph_plan_opts *o,
                       int32_t *gch, family_row *row) {
  row->name = ss->name;
  solve_opts so;
  solve_opts_init(&so);
  so.seed = o->seed;
  so.annotate = gp->fix;
  so.time_budget_s = o->time_budget_s > 0 ? o->time_budget_s : 5;
  /* With a time budget and no --evals, only the clock stops a family (issue 19, class 3: the 20,000-evaluation
   * default capped it, so --time-budget 60 stopped at 20,000 evaluations whatever the clock said). */
  int64_t max_evals = o->max_evals > 0 ? o->max_evals : o->time_budget_s > 0 ? CS_NO_EVAL_CAP : 20000;
  sp_result r = {.choice = gch};
  if (ss->exact || strcmp(ss->name, "greedy") == 0) {
    so.max_evals = max_evals;
    double t0 = solve_clock_s();
    ap_status st = ss->sharding(ctx, &gp->sp, &so, &r);
    row->total_s = row->time_to_best_s = solve_clock_s() - t0;
    if (st) {
      row->note = arena_strdup(a, ap_ctx_error(ctx));
      ctx_clear(ctx);
      return;
    }
  } else {
    /* doubling budgets up to max_evals or the time budget */
    double spent = 0, best = INFINITY, t_best = 0;
    for (int64_t n = 500;; n *= 2) {
      if (n > max_evals) n = max_evals;
      so.max_evals = n;
      so.time_budget_s = fmax(0.01, (o->time_budget_s > 0 ? o->time_budget_s : 5) - spent);
      double t0 = solve_clock_s();
      ap_status st = ss->sharding(ctx, &gp->sp, &so, &r);
      double dt = solve_clock_s() - t0;
      spent += dt;
      if (st) {
        row->note = arena_strdup(a, ap_ctx_error(ctx));
        ctx_clear(ctx);
        return;
      }
      if (r.status != SOLVE_INFEASIBLE && (isinf(best) || r.objective < best * (1 - 1e-12))) best = r.objective, t_best = dt;
      if (n >= max_evals || spent >= (o->time_budget_s > 0 ? o->time_budget_s : 5) || r.n_evals < n) break;
    }
    row->total_s = spent;
    row->time_to_best_s = t_best;
  }
  row->ran = true;
  row->status = r.status;
  row->best_s = r.objective;
  row->lower_bound_s = r.lower_bound;
  row->n_evals = r.n_evals;
}

ap_status ap_compare_search(ap_ctx *ctx, const ap_model *model, const ap_cluster *cluster,
                            const ap_graph_plan_opts *opts, int format, char **out) {
  API_ENTER(ctx);
  *out = NULL;
  const graph *g = model_graph(model);
  const hw_cluster *c = hw_cluster_of(cluster);
  if (opts->global_batch_size <= 0) return ctx_fail(ctx, AP_INVALID, "--gbs: expected a global batch of at least 1");
  gplan_opts o;
  gplan_opts_init(&o);
  o.gbs = opts->global_batch_size;
  o.seq = opts->seq_length;
  o.annotate = opts->annotate;
  o.max_mem_fraction = opts->max_mem_fraction;
  arena *a = arena_new();
  if (!a) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  compute_model cm;
  graph_problem gp;
  int64_t dpn = c->n_groups > 0 ? c->groups[0].devices_per_node : c->n_devices;
  int64_t shape[2] = {c->n_devices > dpn ? c->n_devices / dpn : 1, c->n_devices > dpn ? dpn : c->n_devices};
  ap_status st = compute_model_init(ctx, a, &c->groups[0].device, NULL, &cm);
  if (!st) st = gplan_problem(ctx, a, g, c, &cm, &o, shape, &gp);
  int32_t *gch = st ? NULL : arena_alloc(a, (size_t)(gp.sp.n_groups > 0 ? gp.sp.n_groups : 1) * sizeof *gch);
  if (!st && !gch) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  if (st) {
    arena_free(a);
    return st;
  }
  size_t n_fam;
  const solve_strategy *fams = solve_strategies(&n_fam);
  family_row rows[20];
  int nr = 0;
  double lb = NAN;
  for (size_t i = 0; i < n_fam && nr < 14; i++) {
    if (!fams[i].sharding) continue;
    family_row *row = &rows[nr++];
    memset(row, 0, sizeof *row);
    run_family(ctx, a, &gp, &fams[i], opts, gch, row);
    if (row->ran && isfinite(row->lower_bound_s)) lb = row->lower_bound_s;
  }
  /* FlexFlow's MCMC on the event simulator (delta simulation per move), from the data-parallel baseline; its
   * best is scored on the same objective as the others (the simulated time, with overlap, is its own). */
  {
    family_row *row = &rows[nr++];
    memset(row, 0, sizeof *row);
    row->name = "mcmc-sim (delta)";
    gsim sim;
    int32_t *init = arena_alloc(a, (size_t)(gp.sp.n_groups > 0 ? gp.sp.n_groups : 1) * sizeof *init);
    if (init && !gsim_init(ctx, a, &gp, &sim)) {
      baseline(&gp, false, init);
      int64_t ne = 0;
      double t0 = solve_clock_s();
      gsim_mcmc(&gp, &sim, init, opts->max_evals > 0 ? opts->max_evals : opts->time_budget_s > 0 ? CS_NO_EVAL_CAP : 20000,
                opts->time_budget_s > 0 ? opts->time_budget_s : 5, 1.2, opts->seed, gch, &ne, a);
      sp_score sc = sp_eval(&gp.sp, gch);
      row->ran = true;
      row->best_s = sc.objective;
      row->status = sc.violation > 0 ? SOLVE_INFEASIBLE : SOLVE_FEASIBLE;
      row->lower_bound_s = NAN;
      row->n_evals = ne;
      row->total_s = row->time_to_best_s = solve_clock_s() - t0;
    } else {
      row->note = "out of memory";
      ctx_clear(ctx);
    }
  }
  const char *bnames[2] = {"baseline: data parallel", "baseline: megatron"};
  for (int k = 0; k < 2; k++) {
    family_row *row = &rows[nr++];
    memset(row, 0, sizeof *row);
    baseline(&gp, k == 1, gch);
    sp_score sc = sp_eval(&gp.sp, gch);
    row->name = bnames[k];
    row->ran = true;
    row->best_s = sc.objective;
    row->status = sc.violation > 0 ? SOLVE_INFEASIBLE : SOLVE_FEASIBLE;
    row->lower_bound_s = NAN;
    row->n_evals = 1;
  }
  /* One document (docs/json.md "autopar-compare-search/1"), full-precision numbers; the text is rendered from it
   * (compare_search_text), as ap_render does for a document handed back. */
  strbuf sb = {0};
  const shard_mesh *m = gp.env.mesh;
  sb_puts(&sb, "{\"format\": \"autopar-compare-search/1\", \"model\": ");
  jx_sb_str(&sb, g->name);
  sb_puts(&sb, ", \"cluster\": ");
  jx_sb_str(&sb, c->name);
  sb_puts(&sb, ", \"mesh\": [");
  for (int ax = 0; ax < m->n_axes; ax++) sb_printf(&sb, "%s%lld", ax ? ", " : "", (long long)m->shape[ax]);
  sb_printf(&sb, "], \"ops\": %d, \"groups\": %d, \"lp_bound_s\": ", gp.n_nodes, gp.sp.n_groups);
  if (isfinite(lb)) jx_sb_num(&sb, lb);
  else sb_puts(&sb, "null");
  sb_puts(&sb, ", \"families\": [");
  for (int i = 0; i < nr; i++) {
    const family_row *r = &rows[i];
    sb_printf(&sb, "%s\n  {\"name\": ", i ? "," : "");
    jx_sb_str(&sb, r->name);
    sb_printf(&sb, ", \"ran\": %s", r->ran ? "true" : "false");
    if (r->ran) {
      sb_printf(&sb, ", \"status\": \"%s\", \"best_s\": ", r->status == SOLVE_OPTIMAL ? "optimal"
                                                            : r->status == SOLVE_FEASIBLE ? "feasible" : "infeasible");
      if (r->status != SOLVE_INFEASIBLE) jx_sb_num(&sb, r->best_s);
      else sb_puts(&sb, "null");
      sb_puts(&sb, ", \"time_to_best_s\": ");
      jx_sb_num(&sb, r->time_to_best_s);
      sb_puts(&sb, ", \"total_s\": ");
      jx_sb_num(&sb, r->total_s);
      sb_printf(&sb, ", \"evaluations\": %lld, \"gap_to_lp\": ", (long long)r->n_evals);
      if (isfinite(lb) && lb > 0 && r->status != SOLVE_INFEASIBLE) jx_sb_num(&sb, (r->best_s - lb) / lb);
      else sb_puts(&sb, "null");
    } else {
      sb_puts(&sb, ", \"why\": ");
      jx_sb_str(&sb, r->note ? r->note : "");
    }
    sb_puts(&sb, "}");
  }
  sb_puts(&sb, "]}\n");
  if (format != AP_OUT_JSON && !sb.oom) {
    json_t *doc = json_loads(sb.buf, 0, NULL);
    char *text = doc ? compare_search_text(doc) : NULL;
    json_decref(doc);
    sb_free(&sb);
    if (text) sb_puts(&sb, text);
    free(text);
    if (!text) sb.oom = true;
  }
  *out = sb.oom ? NULL : sb_take(&sb);
  if (!*out) sb_free(&sb);
  arena_free(a);
  return *out ? AP_OK : ctx_fail(ctx, AP_NOMEM, "out of memory");
}

/* The text of a compare-search document: the problem's line, then one row per family and baseline. */
char *compare_search_text(const json_t *doc) {
  strbuf sb = {0};
  const json_t *mesh = json_object_get(doc, "mesh");
  sb_printf(&sb, "compare-search: %s on %s, mesh ", jd_gets(doc, "model"), jd_gets(doc, "cluster"));
  for (size_t ax = 0; ax < json_array_size(mesh); ax++)
    sb_printf(&sb, "%s%lld", ax ? " x " : "", (long long)json_integer_value(json_array_get(mesh, ax)));
  double lb = jd_getn(doc, "lp_bound_s");
  sb_printf(&sb, ", %lld ops in %lld groups; LP bound ", (long long)jd_geti(doc, "ops"), (long long)jd_geti(doc, "groups"));
  if (isfinite(lb)) sb_printf(&sb, "%.6g s\n\n", lb);
  else sb_puts(&sb, "n/a\n\n");
  sb_printf(&sb, "%-24s %-10s %12s %10s %10s %10s\n", "family", "status", "best s/iter", "to best s", "evals",
            "gap to LP");
  const json_t *fams = json_object_get(doc, "families");
  for (size_t i = 0; i < json_array_size(fams); i++) {
    const json_t *r = json_array_get(fams, i);
    if (!json_is_true(json_object_get(r, "ran"))) {
      sb_printf(&sb, "%-24s %-10s %s\n", jd_gets(r, "name"), "n/a", jd_gets(r, "why"));
      continue;
    }
    sb_printf(&sb, "%-24s %-10s %12.6g %10.3g %10lld ", jd_gets(r, "name"), jd_gets(r, "status"), jd_getn(r, "best_s"),
              jd_getn(r, "time_to_best_s"), (long long)jd_geti(r, "evaluations"));
    double gap = jd_getn(r, "gap_to_lp");
    if (isfinite(gap)) sb_printf(&sb, "%9.2f%%\n", 100 * gap);
    else sb_puts(&sb, "       n/a\n");
  }
  return sb_take(&sb);
}
