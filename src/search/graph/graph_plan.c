/* Op-level planning of a general graph (search layer; graph_plan.h). For each mesh shape the planner picks the
 * fewest micro-batches whose smallest possible memory fits the budget (gradient accumulation, as Alpa's
 * num_micro_batches), builds the sharding problem and runs every requested solve strategy on it; the fastest
 * feasible result over meshes and strategies wins. The per-iteration time is the sum over ops of compute and
 * collectives plus the resharding on edges: one stage, no overlap of communication with compute (Alpa's
 * intra-op objective, Zheng et al. 2022 §4.2). Bytes of state per parameter: 16, bf16 weight and gradient plus
 * fp32 master weight and Adam's two moments (Rajbhandari et al. 2020, ZeRO, §3.1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/graph/graph_plan.h"

void gplan_opts_init(gplan_opts *o) {
  memset(o, 0, sizeof *o);
  o->seed = 1;
}

const char *gplan_default_strategies(ap_ctx *ctx) {
  return ctx_part_ops(ctx, "ilp") ? "ilp,greedy,inter-op" : "elim-dp,greedy,mcmc,inter-op";
}

/* Finds an op by name: block and op index; false when none. */
static bool find_op(const graph *g, const char *name, size_t len, int *bi, int *oi) {
  for (int b = 0; b < g->n_blocks; b++)
    for (int i = 0; i < g->blocks[b].n_ops; i++) {
      const char *n = g->blocks[b].ops[i].name;
      if (n && strlen(n) == len && strncmp(n, name, len) == 0) {
        *bi = b, *oi = i;
        return true;
      }
    }
  return false;
}

/* Parses annotations by enumerating the annotated op's strategies (a fixed op is never made a follower, so the
 * enumeration's index is the node's). */
static ap_status parse_annotate(ap_ctx *ctx, const graph *g, const shard_env *env, const int *block_base,
                                const char *text, int32_t *fix, arena *a) {
  int cap = shard_max_strategies(env->mesh->n_axes);
  shard_strategy *tmp = arena_alloc(a, (size_t)cap * sizeof *tmp);
  if (!tmp) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  const char *q = text;
  while (*q) {
    const char *end = strchr(q, ';');
    size_t len = end ? (size_t)(end - q) : strlen(q);
    const char *eq = memchr(q, '=', len);
    if (!eq || eq == q)
      return ctx_fail(ctx, AP_INVALID, "--annotate: \"%.*s\": expected OP=SPEC (e.g. fc1=S0,R)", (int)len, q);
    int bi, oi;
    if (!find_op(g, q, (size_t)(eq - q), &bi, &oi))
      return ctx_fail(ctx, AP_INVALID, "--annotate: the model has no op named \"%.*s\"", (int)(eq - q), q);
    const graph_block *blk = &g->blocks[bi];
    const graph_op *op = &blk->ops[oi];
    char spec[64];
    size_t sl = len - (size_t)(eq + 1 - q);
    if (sl >= sizeof spec) return ctx_fail(ctx, AP_INVALID, "--annotate: op %s: the spec is too long", op->name);
    memcpy(spec, eq + 1, sl);
    spec[sl] = '\0';
    int rank = blk->tensors[op->out].n_dims;
    shard_spec want;
    if (!shard_spec_parse(spec, rank, &want))
      return ctx_fail(ctx, AP_INVALID, "--annotate: op %s: \"%s\" is not a spec of its output's %d dims (R, S0, S1 or "
                      "S01 per dim, comma-separated)", op->name, spec, rank);
    if (want.n_dims > 0 && env->mesh->n_axes < 2)
      for (int d = 0; d < want.n_dims; d++)
        if (want.dim[d] & 2u)
          return ctx_fail(ctx, AP_INVALID, "--annotate: op %s: \"%s\" names mesh axis 1 on a 1-axis mesh", op->name, spec);
    int n = shard_enumerate(env, blk, op, tmp, cap), k = -1;
    for (int j = 0; j < n && k < 0; j++)
      if (shard_spec_equal(&tmp[j].out[0], &want)) k = j;
    if (k < 0)
      return ctx_fail(ctx, AP_INVALID, "--annotate: op %s: no legal strategy gives its output the spec %s (see "
                      "`autopar describe --sharding`)", op->name, spec);
    int node = block_base[bi] + oi;
    if (fix[node] >= 0 && fix[node] != k)
      return ctx_fail(ctx, AP_INVALID, "--annotate: op %s is annotated twice", op->name);
    fix[node] = k;
    q += len + (end ? 1 : 0);
  }
  return AP_OK;
}

ap_status gplan_parse_annotate(ap_ctx *ctx, const graph_problem *gp, const char *text, int32_t *fix) {
  for (int i = 0; i < gp->n_nodes; i++) fix[i] = -1;
  return parse_annotate(ctx, gp->g, &gp->env, gp->block_base, text, fix, gp->a);
}

/* Sum over ops of the least memory any strategy needs: a lower bound on the peak. */
static double min_mem_bytes(const graph *g, const shard_env *env, shard_strategy *tmp, int cap) {
  double sum = 0;
  for (int bi = 0; bi < g->n_blocks; bi++)
    for (int oi = 0; oi < g->blocks[bi].n_ops; oi++) {
      int n = shard_enumerate(env, &g->blocks[bi], &g->blocks[bi].ops[oi], tmp, cap);
      double m = INFINITY;
      for (int k = 0; k < n; k++) m = fmin(m, tmp[k].weight_mem_bytes + tmp[k].act_mem_bytes);
      sum += (double)g->blocks[bi].repeat * (n > 0 ? m : 0);
    }
  return sum;
}

ap_status gplan_problem(ap_ctx *ctx, arena *a, const graph *g, const hw_cluster *c, const compute_model *cm,
                        const gplan_opts *o, const int64_t *shape, graph_problem *gp) {
  ap_status st;
  shard_mesh *mesh = arena_alloc(a, sizeof *mesh);
  if (!mesh) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  int n_axes = shape[0] > 1 ? 2 : 1;
  int64_t shp[2] = {shape[0] > 1 ? shape[0] : shape[1], shape[1]};
  if ((st = shard_mesh_init(ctx, c, n_axes, shp, mesh))) return st;
  double frac = o->max_mem_fraction > 0 ? o->max_mem_fraction : 1.0;
  double limit = frac * (double)c->groups[0].device.mem_bytes;
  double s = (double)(o->seq > 0 ? o->seq : (g->default_seq > 0 ? g->default_seq : 1));
  shard_env env = {cm, mesh, (double)o->gbs, s, 1, 16.0, HW_DTYPE_BF16};
  int cap = shard_max_strategies(n_axes);
  shard_strategy *tmp = arena_alloc(a, (size_t)cap * sizeof *tmp);
  if (!tmp) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  /* The fewest micro-batches whose least memory fits. */
  for (int64_t m = 1; m <= o->gbs; m *= 2) {
    if (o->gbs % m) break;
    env.n_micro = (double)m;
    env.b = (double)o->gbs / (double)m;
    if (min_mem_bytes(g, &env, tmp, cap) <= limit) break;
  }
  gp_opts gopt = {true, limit, true, NULL};
  int n_nodes = 0;
  for (int bi = 0; bi < g->n_blocks; bi++) n_nodes += g->blocks[bi].n_ops;
  int32_t *fix = NULL;
  if (o->annotate && *o->annotate) {
    fix = arena_alloc(a, (size_t)(n_nodes > 0 ? n_nodes : 1) * sizeof *fix);
    int *base = arena_alloc(a, (size_t)(g->n_blocks + 1) * sizeof *base);
    if (!fix || !base) return ctx_fail(ctx, AP_NOMEM, "out of memory");
    int nn = 0;
    for (int bi = 0; bi < g->n_blocks; bi++) base[bi] = nn, nn += g->blocks[bi].n_ops;
    for (int i = 0; i < n_nodes; i++) fix[i] = -1;
    if ((st = parse_annotate(ctx, g, &env, base, o->annotate, fix, a))) return st;
    gopt.fix = fix;
  }
  if ((st = graph_problem_build(ctx, a, g, &env, &gopt, gp))) return st;
  gp->fix = fix;
  gp->mem_limit_bytes = limit;
  return AP_OK;
}

static int mesh_shapes(const hw_cluster *c, const gplan_opts *o, int64_t (*out)[2]) {
  if (o->n_mesh_shapes > 0) {
    memcpy(out, o->mesh_shapes, (size_t)o->n_mesh_shapes * sizeof *out);
    return o->n_mesh_shapes;
  }
  int64_t n = c->n_devices;
  int k = 0;
  out[k][0] = 1, out[k][1] = n, k++;
  for (int64_t d = n / 2; d >= 2 && k < 8; d--)
    if (n % d == 0) out[k][0] = n / d, out[k][1] = d, k++;
  return k;
}

ap_status gplan_run(ap_ctx *ctx, const graph *g, const hw_cluster *c, const gplan_opts *o, gplan_result *r) {
  memset(r, 0, sizeof *r);
  r->g = g;
  r->a = arena_new();
  if (!r->a) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  if (o->gbs <= 0) return ctx_fail(ctx, AP_INVALID, "--gbs: expected a global batch of at least 1");
  ap_status st = compute_model_init(ctx, r->a, &c->groups[0].device, NULL, &r->cm);
  if (st) return st;
  r->mem_limit_bytes = (o->max_mem_fraction > 0 ? o->max_mem_fraction : 1.0) * (double)c->groups[0].device.mem_bytes;
  const char *list = o->strategies && *o->strategies ? o->strategies : gplan_default_strategies(ctx);
  /* Check the strategy names first. */
  char names[8][32];
  int n_names = 0;
  bool inter_op = false;
  for (const char *q = list; *q;) {
    const char *end = strchr(q, ',');
    size_t len = end ? (size_t)(end - q) : strlen(q);
    if (len == 0 || len >= sizeof names[0] || n_names >= 8)
      return ctx_fail(ctx, AP_INVALID, "--strategy: expected a comma-separated list of names, got \"%s\"", list);
    memcpy(names[n_names], q, len);
    names[n_names][len] = '\0';
    if (strcmp(names[n_names], "inter-op") == 0) {
      inter_op = true;
      q += len + (end ? 1 : 0);
      continue;
    }
    const solve_strategy *ss = solve_strategy_find(names[n_names]);
    if (!ss || !ss->sharding)
      return ctx_fail(ctx, AP_INVALID, "--strategy: \"%s\" is not a sharding strategy of a general graph (ilp, "
                      "elim-dp, greedy, mcmc, mcts, rl, recursive, inter-op)", names[n_names]);
    n_names++;
    q += len + (end ? 1 : 0);
  }
  int64_t shapes[8][2];
  int n_shapes = mesh_shapes(c, o, shapes);
  double best = INFINITY;
  arena *work = NULL;
  const char *first_err = NULL;
  for (int si = 0; si < n_shapes; si++) {
    arena *a = arena_new();
    if (!a) return ctx_fail(ctx, AP_NOMEM, "out of memory");
    graph_problem *gp = arena_alloc(a, sizeof *gp);
    int n_axes = shapes[si][0] > 1 ? 2 : 1;
    int64_t shp[2] = {shapes[si][0] > 1 ? shapes[si][0] : shapes[si][1], shapes[si][1]};
    if (!gp || (st = gplan_problem(ctx, a, g, c, &r->cm, o, shapes[si], gp))) {
      arena_free(a);
      if (!gp) return ctx_fail(ctx, AP_NOMEM, "out of memory");
      /* an annotation that this mesh cannot honour (axis 1 on a 1-axis mesh, a split that does not divide):
       * try the other meshes, and report the first such failure if none can */
      if (st != AP_INVALID || !o->annotate) return st;
      if (!first_err) first_err = arena_strdup(r->a, ap_ctx_error(ctx));
      ctx_clear(ctx);
      continue;
    }
    shard_mesh *mesh = (shard_mesh *)gp->env.mesh;
    shard_env env = gp->env;
    int n_nodes = gp->n_nodes;
    const int32_t *fix = gp->fix;
    bool kept = false;
    int32_t *gch = arena_alloc(a, (size_t)(gp->sp.n_groups > 0 ? gp->sp.n_groups : 1) * sizeof *gch);
    int32_t *nch = arena_alloc(a, (size_t)(n_nodes > 0 ? n_nodes : 1) * sizeof *nch);
    int32_t *bestch = arena_alloc(a, (size_t)(n_nodes > 0 ? n_nodes : 1) * sizeof *bestch);
    if (!gch || !nch || !bestch) {
      arena_free(a);
      return ctx_fail(ctx, AP_NOMEM, "out of memory");
    }
    for (int k = 0; k < n_names; k++) {
      const solve_strategy *ss = solve_strategy_find(names[k]);
      solve_opts so;
      solve_opts_init(&so);
      so.seed = o->seed;
      if (o->max_evals > 0) so.max_evals = o->max_evals;
      if (o->time_budget_s > 0) so.time_budget_s = o->time_budget_s;
      so.annotate = fix;
      sp_result sr = {.choice = gch};
      double t0 = solve_clock_s();
      st = ss->sharding(ctx, &gp->sp, &so, &sr);
      double dt = solve_clock_s() - t0;
      if (st == AP_UNSUPPORTED && n_names > 1) { /* elim-dp on a graph that is not series-parallel */
        ctx_clear(ctx);
        continue;
      }
      if (st) {
        arena_free(a);
        return st;
      }
      if (r->n_tries < (int)AP_COUNT(r->tries))
        r->tries[r->n_tries++] = (gplan_try){ss->name, {shp[0], n_axes == 2 ? shp[1] : 1}, n_axes, env.n_micro,
                                             sr.status, sr.objective, sr.lower_bound, dt, sr.n_evals};
      if (sr.status == SOLVE_INFEASIBLE) continue;
      /* ranked by the evaluation (the weight sync's overlap with the backward pass counted, gp_evaluate), which
       * is what the plan reports */
      gp_node_choice(gp, gch, nch);
      double t_eval = gp_evaluate(gp, nch).total_s;
      if (!(t_eval < best)) continue;
      best = t_eval;
      memcpy(bestch, nch, (size_t)n_nodes * sizeof *nch);
      r->mesh = *mesh;
      r->strategy = ss->name;
      r->status = sr.status;
      r->lower_bound_s = sr.lower_bound;
      r->n_micro = env.n_micro;
      r->b = env.b;
      r->s = env.s;
      kept = true;
    }
    if (kept) {
      arena_free(work);
      work = a;
      r->gp = *gp;
      r->gp.env.mesh = &r->mesh;
      r->choice = bestch;
      r->found = true;
    } else {
      arena_free(a);
    }
  }
  if (!r->found && first_err && r->n_tries == 0) return ctx_fail(ctx, AP_INVALID, "%s", first_err);
  if (r->found) {
    /* the winner's problem stays in its own arena, freed with the result's */
    r->br = gp_evaluate(&r->gp, r->choice);
    r->work = work;
    int64_t dpn = c->n_groups > 0 ? c->groups[0].devices_per_node : r->mesh.n_devices;
    r->n_stages = 1;
    r->stages[0] = (gstage){0, r->gp.n_nodes - 1, r->mesh.n_devices >= dpn ? r->mesh.n_devices / dpn : 1,
                            r->mesh.n_devices >= dpn ? dpn : r->mesh.n_devices, r->mesh, &r->gp, r->choice,
                            r->br.total_s / r->n_micro, 0, 0, 0, 1};
  }
  if (inter_op && n_names == 0)
    return ctx_fail(ctx, AP_INVALID, "--strategy: inter-op needs a sharding strategy for its stages (e.g. ilp,inter-op)");
  if (inter_op && (!o->annotate || !*o->annotate)) {
    const char *list_k[8];
    for (int k = 0; k < n_names; k++) list_k[k] = names[k];
    if ((st = gplan_inter_op(ctx, g, c, o, list_k, n_names, r))) return st;
  }
  return AP_OK;
}

/* The micro-batch count the inter-op pass plans with: TUNING: at least 8 (a pipeline of up to 4 stages then
 * idles at most 3 / 11 of its time under 1F1B, Narayanan et al. 2021 §2.2), at least the single stage's, and
 * a divisor of the global batch. */
static int64_t pipeline_micro(int64_t gbs, double single) {
  int64_t m = single > 8 ? (int64_t)single : 8;
  while (m > 1 && gbs % m) m--;
  return m;
}

ap_status gplan_inter_op(ap_ctx *ctx, const graph *g, const hw_cluster *c, const gplan_opts *o,
                         const char *const *names, int n_names, gplan_result *r) {
  double t0 = solve_clock_s();
  arena *a = arena_new();
  if (!a) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  gstage_opts so = {names, n_names, o->time_budget_s, o->max_evals, o->seed, r->mem_limit_bytes, o->gbs,
                    (double)(o->seq > 0 ? o->seq : (g->default_seq > 0 ? g->default_seq : 1)),
                    pipeline_micro(o->gbs, r->found ? r->n_micro : 1), 0, r->found ? r->br.total_s : 0};
  gstage_result *sr = arena_alloc(a, sizeof *sr);
  if (!sr) {
    arena_free(a);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  ap_status st = gstage_run(ctx, a, g, c, &r->cm, &so, sr);
  r->inter_op_s = solve_clock_s() - t0;
  if (st) {
    arena_free(a);
    return st;
  }
  r->n_layers = sr->n_layers;
  r->stage_solves = sr->n_stage_solves;
  r->memo_hits = sr->n_memo_hits;
  if (!sr->found || sr->n_stages < 2 || (r->found && !(sr->objective_s < r->br.total_s))) {
    arena_free(a);
    return AP_OK;
  }
  /* several stages win: the result describes them */
  arena_free(r->stage_arena);
  r->stage_arena = a;
  gplan_take_stages(r, sr->stages, sr->n_stages, (double)so.n_micro, o->gbs, sr->objective_s);
  r->strategy = "inter-op";
  r->status = sr->status;
  r->lower_bound_s = NAN;
  return AP_OK;
}

int gplan_slowest_stage(const gplan_result *r) {
  int slow = 0;
  for (int q = 1; q < r->n_stages; q++)
    if (r->stages[q].time_s > r->stages[slow].time_s) slow = q;
  return slow;
}

void gplan_take_stages(gplan_result *r, const gstage *st, int n, double n_micro, int64_t gbs, double latency_s) {
  r->n_stages = n;
  memcpy(r->stages, st, (size_t)n * sizeof *st);
  int slow = gplan_slowest_stage(r);
  r->gp = *st[slow].gp;
  r->mesh = st[slow].mesh;
  r->gp.env.mesh = &r->mesh;
  r->choice = st[slow].choice;
  r->n_micro = n_micro;
  r->b = (double)gbs / n_micro;
  r->found = true;
  gp_breakdown sum = {0};
  for (int q = 0; q < n; q++) {
    const gstage *y = &st[q];
    gp_breakdown b = gp_evaluate_range(y->gp, y->choice, y->first_node, y->last_node);
    sum.compute_s += b.compute_s, sum.op_comm_s += b.op_comm_s, sum.reshard_s += b.reshard_s;
    double m = y->weight_mem_bytes + y->in_flight * y->act_mem_bytes;
    sum.mem_bytes = fmax(sum.mem_bytes, m);
  }
  sum.total_s = latency_s;
  r->br = sum;
}

void gplan_result_free(gplan_result *r) {
  arena_free(r->stage_arena);
  r->stage_arena = NULL;
  arena_free(r->work);
  arena_free(r->a);
  r->work = r->a = NULL;
}
