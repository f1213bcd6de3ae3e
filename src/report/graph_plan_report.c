/* Op-level plans of general graphs, written out (report layer; include/autopar.h "Op-level plans"):
 * ap_graph_plan runs the planner (search/graph_plan.c) and writes the plan in format autopar-plan/2
 * (docs/graph-plan.md): the mesh with the link level of each axis, the stages, and per op its output spec(s),
 * weight spec, the mesh axes with a pending sum and its collectives, with the time and memory breakdown and
 * why the heaviest ops got their spec (each against its best alternative, everything else held). Text output
 * is a summary with the heaviest ops. ap_describe_sharding lists each op's legal strategies. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/model.h"
#include "report/graph_plan_io.h"

static const char *coll_kind(comm_coll c) {
  switch (c) {
  case COMM_ALLREDUCE: return "all-reduce";
  case COMM_ALLGATHER: return "all-gather";
  case COMM_REDUCE_SCATTER: return "reduce-scatter";
  case COMM_ALLTOALL: return "all-to-all";
  case COMM_SENDRECV: return "send-recv";
  default: return "broadcast";
  }
}

void ap_graph_plan_opts_init(ap_graph_plan_opts *o) {
  memset(o, 0, sizeof *o);
  o->seed = 1;
}

int ap_model_is_general_graph(const ap_model *m) {
  const graph *g = model_graph(m);
  return g->model_type && strcmp(g->model_type, "onnx") == 0;
}

static void to_gplan(const ap_graph_plan_opts *in, gplan_opts *o) {
  gplan_opts_init(o);
  o->gbs = in->global_batch_size;
  o->seq = in->seq_length;
  o->strategies = in->strategies;
  o->annotate = in->annotate;
  o->max_mem_fraction = in->max_mem_fraction;
  o->time_budget_s = in->time_budget_s;
  o->max_evals = in->max_evals;
  o->seed = in->seed;
}

/* The op's own cost under its chosen strategy, per iteration. */
static double op_cost_s(const gp_node *nd, const shard_strategy *s) { return nd->repeat * (s->compute_s + s->comm_s); }

/* The max ops of largest own cost, largest first, one per group. */
static int heaviest(const graph_problem *gp, const int32_t *ch, int lo, int hi, int *idx, int max) {
  int n = 0;
  for (int i = lo; i <= hi; i++) {
    double c = op_cost_s(&gp->nodes[i], &gp->nodes[i].s[ch[i]]);
    bool seen = false; /* one op per group: its tied copies say the same */
    for (int q = 0; q < n && !seen; q++) seen = gp->sp.group_of[idx[q]] == gp->sp.group_of[i];
    if (seen) continue;
    int j;
    if (n < max) {
      j = n++;
    } else {
      j = max - 1;
      if (op_cost_s(&gp->nodes[idx[j]], &gp->nodes[idx[j]].s[ch[idx[j]]]) >= c) continue;
    }
    idx[j] = i;
    while (j > 0 && op_cost_s(&gp->nodes[idx[j - 1]], &gp->nodes[idx[j - 1]].s[ch[idx[j - 1]]]) < c) {
      int t = idx[j - 1];
      idx[j - 1] = idx[j];
      idx[j] = t;
      j--;
    }
  }
  return n;
}

/* Why node i got its strategy: the best other strategy of its group with every other group held, and the total
 * it would cost. */
static void explain(strbuf *sb, const graph_problem *gp, const int32_t *ch, int lo, int hi, int i, bool json) {
  int32_t *alt = arena_alloc(gp->a, (size_t)gp->n_nodes * sizeof *alt);
  if (!alt) return;
  int g = gp->sp.group_of[i];
  double base = gp_evaluate_range(gp, ch, lo, hi).total_s, best = INFINITY;
  int best_k = -1;
  for (int k = 0; k < gp->sp.n_s[g]; k++) {
    if (k == ch[i] || !sp_allowed(&gp->sp, g, k)) continue;
    for (int j = 0; j < gp->n_nodes; j++) alt[j] = gp->sp.group_of[j] == g && j >= lo && j <= hi ? k : ch[j];
    double t = gp_evaluate_range(gp, alt, lo, hi).total_s;
    if (t < best) best = t, best_k = k;
  }
  const gp_node *nd = &gp->nodes[i];
  const graph_op *op = &gp->g->blocks[nd->block].ops[nd->op];
  const shard_strategy *s = &nd->s[ch[i]];
  strbuf spec = {0}, aspec = {0};
  gpr_spec_text(&spec, &s->out[0]);
  gpr_weight_text(&spec, op, s); /* in stored order, as weight_spec / weight_specs */
  if (best_k >= 0) {
    gpr_spec_text(&aspec, &nd->s[best_k].out[0]);
    gpr_weight_text(&aspec, op, &nd->s[best_k]);
  }
  int n_group = 0;
  for (int j = lo; j <= hi; j++) n_group += gp->sp.group_of[j] == g;
  char tail[96] = "";
  if (n_group > 1) snprintf(tail, sizeof tail, " (it and the %d ops that share its strategy switched together)", n_group - 1);
  char line[768];
  if (best_k < 0)
    snprintf(line, sizeof line, "%s: output %s is its only legal strategy here", op->name, spec.buf ? spec.buf : "");
  else
    snprintf(line, sizeof line, "%s: output %s (compute %.3g s, collectives %.3g s); the best alternative, output %s "
             "(compute %.3g s, collectives %.3g s), makes the iteration %.3g s slower counting resharding%s",
             op->name, spec.buf ? spec.buf : "", nd->repeat * s->compute_s, nd->repeat * s->comm_s,
             aspec.buf ? aspec.buf : "", nd->repeat * nd->s[best_k].compute_s, nd->repeat * nd->s[best_k].comm_s,
             best - base, tail);
  sb_free(&spec);
  sb_free(&aspec);
  if (json) {
    sb_puts(sb, "\"");
    for (const char *p = line; *p; p++) sb_printf(sb, (*p == '"' || *p == '\\') ? "\\%c" : "%c", *p);
    sb_puts(sb, "\"");
  } else {
    sb_printf(sb, "  %s\n", line);
  }
}

static void json_str(strbuf *sb, const char *s) {
  sb_puts(sb, "\"");
  for (const char *p = s ? s : ""; *p; p++) {
    if (*p == '"' || *p == '\\') sb_printf(sb, "\\%c", *p);
    else if ((unsigned char)*p < 0x20) sb_printf(sb, "\\u%04x", (unsigned char)*p);
    else sb_printf(sb, "%c", *p);
  }
  sb_puts(sb, "\"");
}

static void op_json(strbuf *sb, const graph_problem *gp, const int32_t *ch, int i) {
  const gp_node *nd = &gp->nodes[i];
  const graph_block *blk = &gp->g->blocks[nd->block];
  const graph_op *op = &blk->ops[nd->op];
  const shard_strategy *s = &nd->s[ch[i]];
  sb_puts(sb, "{\"name\": ");
  json_str(sb, op->name);
  sb_puts(sb, ", \"op_type\": ");
  json_str(sb, op->op_type ? op->op_type : op_kind_name(op->kind));
  sb_puts(sb, ", \"output_spec\": ");
  if (s->n_out == 1) {
    gpr_spec_json(sb, &s->out[0]);
  } else {
    sb_puts(sb, "[");
    for (int k = 0; k < s->n_out; k++) {
      if (k) sb_puts(sb, ", ");
      gpr_spec_json(sb, &s->out[k]);
    }
    sb_puts(sb, "]");
  }
  gpr_weight_json(sb, op, s);
  gpr_input_json(sb, op, s);
  sb_puts(sb, ", \"partial\": [");
  int np = 0;
  for (int a = 0; a < gp->env.mesh->n_axes; a++)
    if (s->partial & (1u << a)) sb_printf(sb, "%s%d", np++ ? ", " : "", a);
  sb_puts(sb, "], \"comm\": [");
  int nc = 0;
  for (int c = 0; c < s->n_comm; c++)
    sb_printf(sb, "%s{\"kind\": \"%s\", \"axis\": %d, \"bytes\": %.6g}", nc++ ? ", " : "", coll_kind(s->comm[c].coll),
              s->comm[c].axis, nd->repeat * s->comm[c].bytes);
  /* resharding of its inputs (as the consumer of each edge) */
  for (int ei = 0; ei < gp->g->n_edges; ei++) {
    const graph_edge *e = &gp->g->edges[ei];
    if (gp_node_of(gp, e->to_block, e->to_op) != i) continue;
    int f = gp_node_of(gp, e->from_block, e->from_op);
    if (f == i) continue;
    shard_comm cm[2 * SHARD_MAX_COMM];
    int n = 0;
    gp_edge_reshard(gp, e, ch[f], ch[i], cm, &n);
    double mult = e->carried ? (double)(blk->repeat - 1) : (e->from_block == e->to_block ? (double)blk->repeat : 1);
    for (int c = 0; c < n; c++)
      if (cm[c].bytes > 0)
        sb_printf(sb, "%s{\"kind\": \"%s\", \"axis\": %d, \"bytes\": %.6g}", nc++ ? ", " : "", coll_kind(cm[c].coll),
                  cm[c].axis, mult * cm[c].bytes);
  }
  sb_puts(sb, "]}");
}

static const char *status_name(solve_status s) {
  return s == SOLVE_OPTIMAL ? "optimal" : s == SOLVE_FEASIBLE ? "feasible" : "infeasible";
}

/* The plan's stages: r's own, or (a result without them, as the plan/2 reader builds) its one stage on the
 * whole mesh. */
static int plan_stages(const gplan_result *r, const hw_cluster *c, gstage *out) {
  if (r->n_stages > 0) {
    memcpy(out, r->stages, (size_t)r->n_stages * sizeof *out);
    return r->n_stages;
  }
  int64_t dpn = c->n_groups > 0 ? c->groups[0].devices_per_node : r->mesh.n_devices;
  bool whole = r->mesh.n_devices >= dpn;
  out[0] = (gstage){0, r->gp.n_nodes - 1, whole ? r->mesh.n_devices / dpn : 1, whole ? dpn : r->mesh.n_devices,
                    r->mesh, &r->gp, r->choice, r->n_micro > 0 ? r->br.total_s / r->n_micro : r->br.total_s, 0, 0, 0, 1};
  return 1;
}

/* The stage that runs node i. */
static const gstage *stage_of(const gstage *st, int n, int i) {
  for (int q = 0; q < n; q++)
    if (i >= st[q].first_node && i <= st[q].last_node) return &st[q];
  return &st[0];
}

static const char *node_name(const graph_problem *gp, int i) {
  const gp_node *nd = &gp->nodes[i];
  const char *n = gp->g->blocks[nd->block].ops[nd->op].name;
  return n ? n : "";
}

/* "stages": [{first_op, last_op, submesh, mesh, time_per_micro_batch_s, send_recv_s, in_flight}] */
static void stages_json(strbuf *sb, const gstage *st, int n) {
  sb_puts(sb, "[");
  for (int q = 0; q < n; q++) {
    const gstage *y = &st[q];
    sb_puts(sb, q ? ", {\"first_op\": " : "{\"first_op\": ");
    json_str(sb, y->last_node >= y->first_node ? node_name(y->gp, y->first_node) : "");
    sb_puts(sb, ", \"last_op\": ");
    json_str(sb, y->last_node >= y->first_node ? node_name(y->gp, y->last_node) : "");
    sb_printf(sb, ", \"submesh\": [%lld, %lld], \"mesh\": [", (long long)y->hosts, (long long)y->per_host);
    for (int a = 0; a < y->mesh.n_axes; a++) sb_printf(sb, "%s%lld", a ? ", " : "", (long long)y->mesh.shape[a]);
    sb_puts(sb, "], \"levels\": [");
    for (int a = 0; a < y->mesh.n_axes; a++) {
      if (a) sb_puts(sb, ", ");
      json_str(sb, y->mesh.level_name[a]);
    }
    sb_puts(sb, "], \"time_per_micro_batch_s\": ");
    jx_sb_num(sb, y->time_s);
    sb_puts(sb, ", \"send_recv_s\": ");
    jx_sb_num(sb, y->send_s);
    sb_printf(sb, ", \"in_flight\": %d}", y->in_flight);
  }
  sb_puts(sb, "]");
}

/* , "inter_op": {layers, stage_solves, memo_hits, solve_s} when the pass ran */
/* The annotations a plan's search had (gp->fix), as `plan --annotate` takes them: OP=SPEC of each fixed op's
 * output, so that the plan reader builds the same problem (a fixed op is never a follower). */
static void annotate_json(strbuf *sb, const graph_problem *gp) {
  if (!gp->fix) return;
  strbuf a = {0};
  for (int i = 0; i < gp->n_nodes; i++) {
    if (gp->fix[i] < 0 || gp->fix[i] >= gp->nodes[i].n_s) continue;
    const graph_op *op = &gp->g->blocks[gp->nodes[i].block].ops[gp->nodes[i].op];
    sb_printf(&a, "%s%s=", a.buf && a.buf[0] ? ";" : "", op->name);
    gpr_spec_text(&a, &gp->nodes[i].s[gp->fix[i]].out[0]);
  }
  if (a.buf && a.buf[0]) {
    sb_puts(sb, ", \"annotate\": ");
    json_str(sb, a.buf);
  }
  sb_free(&a);
}

static void inter_op_json(strbuf *sb, const gplan_result *r) {
  if (r->inter_op_s <= 0) return;
  sb_printf(sb, ", \"inter_op\": {\"layers\": %d, \"stage_solves\": %d, \"memo_hits\": %d, \"solve_s\": %.4g}",
            r->n_layers, r->stage_solves, r->memo_hits, r->inter_op_s);
}

/* The nodes the explanation covers: the slowest stage's (r->gp and r->choice are its), or all. */
static void explained_range(const gplan_result *r, int *lo, int *hi) {
  int slow = 0;
  for (int q = 1; q < r->n_stages; q++)
    if (r->stages[q].time_s > r->stages[slow].time_s) slow = q;
  *lo = r->n_stages > 1 ? r->stages[slow].first_node : 0;
  *hi = r->n_stages > 1 ? r->stages[slow].last_node : r->gp.n_nodes - 1;
}

/* MFU of a graph plan on the graph's own FLOP (forward + dgrad + wgrad of every op, graph_train_flop_per_seq),
 * not PaLM's 6N, which counts only matmul parameters and says nothing of a convolution's reuse of its weights;
 * against the first device group's dense bf16 peak (as cost/flops.c's MFU). */
static double graph_mfu(const graph *g, const hw_cluster *c, const gplan_result *r, double *flop_out) {
  double flop = graph_train_flop_per_seq(g, r->s, false) * r->b * r->n_micro;
  double peak = c->groups[0].device.peak_flop_per_s[HW_DTYPE_BF16];
  *flop_out = flop;
  return r->br.total_s > 0 && peak > 0 ? flop / (r->br.total_s * (double)c->n_devices * peak) : 0;
}

void gpr_stages_json(strbuf *sb, const hw_cluster *c, const gplan_result *r) {
  gstage st[GST_MAX_LAYERS];
  stages_json(sb, st, plan_stages(r, c, st));
}

/* The text lines of a plan with several stages. */
void gpr_stages_text(strbuf *sb, const gplan_result *r) {
  if (r->n_stages < 2) return;
  sb_printf(sb, "stages    %d (pipeline, 1F1B, %.0f micro-batches; inter-op over %d layers, %d stage solves, %d "
            "memoised)\n", r->n_stages, r->n_micro, r->n_layers, r->stage_solves, r->memo_hits);
  for (int q = 0; q < r->n_stages; q++) {
    const gstage *y = &r->stages[q];
    sb_printf(sb, "  %d: %s .. %s on %lldx%lld, mesh", q, node_name(y->gp, y->first_node), node_name(y->gp, y->last_node),
              (long long)y->hosts, (long long)y->per_host);
    for (int a = 0; a < y->mesh.n_axes; a++) sb_printf(sb, "%s%lld", a ? "x" : " ", (long long)y->mesh.shape[a]);
    sb_printf(sb, ", %.4g s per micro-batch (send/recv %.3g s), %.2f GiB with %d in flight\n", y->time_s, y->send_s,
              (y->weight_mem_bytes + y->in_flight * y->act_mem_bytes) / 1073741824.0, y->in_flight);
  }
}

static void write_json(strbuf *sb, const graph *g, const hw_cluster *c, const gplan_opts *o, const gplan_result *r) {
  const graph_problem *gp = &r->gp;
  const shard_mesh *m = &r->mesh;
  sb_puts(sb, "{\"format\": \"autopar-plan/2\", \"model\": ");
  json_str(sb, g->name);
  if (o->model_path) { /* so that `export --plan` finds the graph again without --model */
    sb_puts(sb, ", \"model_path\": ");
    json_str(sb, o->model_path);
  }
  char cspec[256];
  sb_puts(sb, ", \"cluster\": ");
  json_str(sb, gpr_cluster_spec(c, cspec, sizeof cspec));
  sb_printf(sb, ", \"global_batch_size\": %lld, \"seq\": %.0f, \"micro_batches\": %.0f, \"micro_batch_size\": %.0f",
            (long long)o->gbs, r->s, r->n_micro, r->b);
  sb_puts(sb, ", \"mesh\": {\"shape\": [");
  for (int a = 0; a < m->n_axes; a++) sb_printf(sb, "%s%lld", a ? ", " : "", (long long)m->shape[a]);
  sb_puts(sb, "], \"levels\": [");
  for (int a = 0; a < m->n_axes; a++) {
    if (a) sb_puts(sb, ", ");
    json_str(sb, m->level_name[a]);
  }
  sb_puts(sb, "]}, \"stages\": ");
  gpr_stages_json(sb, c, r);
  gstage st[GST_MAX_LAYERS];
  int n_st = plan_stages(r, c, st);
  sb_puts(sb, ", \"search\": {\"strategy\": ");
  json_str(sb, r->strategy);
  sb_printf(sb, ", \"status\": \"%s\", \"lower_bound_s\": ", status_name(r->status));
  if (isfinite(r->lower_bound_s)) sb_printf(sb, "%.6g", r->lower_bound_s);
  else sb_puts(sb, "null");
  sb_printf(sb, ", \"nodes\": %d, \"followers\": %d, \"groups\": %d", gp->n_nodes, gp->n_followers, gp->sp.n_groups);
  annotate_json(sb, gp);
  sb_puts(sb, ", \"tries\": [");
  for (int t = 0; t < r->n_tries; t++) {
    const gplan_try *y = &r->tries[t];
    sb_printf(sb, "%s{\"strategy\": \"%s\", \"mesh\": [%lld", t ? ", " : "", y->strategy, (long long)y->mesh[0]);
    if (y->n_axes == 2) sb_printf(sb, ", %lld", (long long)y->mesh[1]);
    sb_printf(sb, "], \"micro_batches\": %.0f, \"status\": \"%s\", \"iteration_s\": ", y->n_micro, status_name(y->status));
    if (y->status != SOLVE_INFEASIBLE) sb_printf(sb, "%.6g", y->objective_s);
    else sb_puts(sb, "null");
    sb_printf(sb, ", \"solve_s\": %.4g, \"evaluations\": %lld}", y->time_s, (long long)y->n_evals);
  }
  sb_puts(sb, "]");
  inter_op_json(sb, r);
  sb_printf(sb, "}, \"time\": {\"iteration_s\": %.6g, \"compute_s\": %.6g, \"op_comm_s\": %.6g, \"reshard_s\": %.6g}",
            r->br.total_s, r->br.compute_s, r->br.op_comm_s, r->br.reshard_s);
  double flop, mfu = graph_mfu(g, c, r, &flop);
  sb_puts(sb, ", \"mfu\": {\"value\": ");
  jx_sb_num(sb, mfu);
  sb_puts(sb, ", \"flop_per_iteration\": ");
  jx_sb_num(sb, flop);
  sb_puts(sb, ", \"convention\": \"graph\"}");
  sb_printf(sb, ", \"memory\": {\"peak_bytes\": %.6g, \"limit_bytes\": %.6g}", r->br.mem_bytes, r->mem_limit_bytes);
  int idx[5];
  int lo, hi;
  explained_range(r, &lo, &hi);
  int nh = heaviest(gp, r->choice, lo, hi, idx, 5);
  sb_puts(sb, ", \"explain\": [");
  for (int k = 0; k < nh; k++) {
    if (k) sb_puts(sb, ", ");
    explain(sb, gp, r->choice, lo, hi, idx[k], true);
  }
  sb_puts(sb, "], \"ops\": [");
  for (int i = 0; i < gp->n_nodes; i++) {
    sb_puts(sb, i ? ",\n  " : "\n  ");
    const gstage *y = stage_of(st, n_st, i);
    op_json(sb, y->gp, y->choice, i);
  }
  sb_puts(sb, "]}\n");
}

static void write_text(strbuf *sb, const graph *g, const hw_cluster *c, const gplan_opts *o, const gplan_result *r) {
  const graph_problem *gp = &r->gp;
  const shard_mesh *m = &r->mesh;
  sb_printf(sb, "autopar plan: %s on %s (%lld devices), global batch %lld, op-level sharding\n", g->name, c->name,
            (long long)c->n_devices, (long long)o->gbs);
  sb_printf(sb, r->n_stages > 1 ? "mesh      (the slowest stage's) " : "mesh      ");
  for (int a = 0; a < m->n_axes; a++)
    sb_printf(sb, "%saxis %d: %lld over %s", a ? ", " : "", a, (long long)m->shape[a], m->level_name[a]);
  sb_printf(sb, "\nsearch    %s (%s), %d ops in %d groups (%d followers), %d solves\n", r->strategy,
            status_name(r->status), gp->n_nodes, gp->sp.n_groups, gp->n_followers, r->n_tries);
  sb_printf(sb, "predicted %.4g s per iteration (%.0f micro-batches of %.0f)\n", r->br.total_s, r->n_micro, r->b);
  double flop, mfu = graph_mfu(g, c, r, &flop);
  sb_printf(sb, "MFU       %.1f%% (graph FLOPs: %.4g per iteration, every op's forward and backward, of dense bf16 "
            "peak)\n", 100 * mfu, flop);
  gpr_stages_text(sb, r);
  double t = r->n_stages > 1 ? r->br.compute_s + r->br.op_comm_s + r->br.reshard_s : r->br.total_s;
  t = t > 0 ? t : 1;
  if (r->n_stages > 1) sb_puts(sb, "(summed over the stages, per iteration)\n");
  sb_printf(sb, "time      compute %.4g s (%.1f%%), op collectives %.4g s (%.1f%%), resharding %.4g s (%.1f%%)\n",
            r->br.compute_s, 100 * r->br.compute_s / t, r->br.op_comm_s, 100 * r->br.op_comm_s / t, r->br.reshard_s,
            100 * r->br.reshard_s / t);
  sb_printf(sb, "memory    peak %.2f GiB per device (limit %.2f GiB)\n", r->br.mem_bytes / 1073741824.0,
            r->mem_limit_bytes / 1073741824.0);
  int idx[5];
  int lo, hi;
  explained_range(r, &lo, &hi);
  int nh = heaviest(gp, r->choice, lo, hi, idx, 5);
  sb_puts(sb, "why (heaviest ops):\n");
  for (int k = 0; k < nh; k++) explain(sb, gp, r->choice, lo, hi, idx[k], false);
}

ap_status ap_graph_plan(ap_ctx *ctx, const ap_model *model, const ap_cluster *cluster, const ap_graph_plan_opts *opts,
                        int format, char **out) {
  API_ENTER(ctx);
  *out = NULL;
  gplan_opts o;
  to_gplan(opts, &o);
  o.model_path = model->spec;
  const graph *g = model_graph(model);
  const hw_cluster *c = hw_cluster_of(cluster);
  gplan_result r;
  ap_status st = gplan_run(ctx, g, c, &o, &r);
  if (!st && !r.found)
    st = ctx_fail(ctx, AP_INFEASIBLE, "no sharding of %s on %s fits in %.1f GiB per device", g->name, c->name,
                  r.mem_limit_bytes / 1073741824.0);
  if (!st) {
    strbuf sb = {0};
    if (format == AP_OUT_JSON) write_json(&sb, g, c, &o, &r);
    else write_text(&sb, g, c, &o, &r);
    *out = sb_take(&sb);
    if (!*out) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  gplan_result_free(&r);
  return st;
}

/* ---- describe --sharding ---- */
ap_status ap_describe_sharding(ap_ctx *ctx, const ap_model *model, const ap_cluster *cluster,
                               const ap_graph_plan_opts *opts, int format, char **out) {
  API_ENTER(ctx);
  *out = NULL;
  const graph *g = model_graph(model);
  const hw_cluster *c = hw_cluster_of(cluster);
  if (opts->global_batch_size <= 0) return ctx_fail(ctx, AP_INVALID, "--gbs: expected a global batch of at least 1");
  arena *a = arena_new();
  if (!a) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  compute_model cm;
  shard_mesh mesh;
  int64_t dpn = c->n_groups > 0 ? c->groups[0].devices_per_node : c->n_devices;
  int n_axes = c->n_devices > dpn ? 2 : 1;
  int64_t shape[2] = {n_axes == 2 ? c->n_devices / dpn : c->n_devices, dpn};
  ap_status st = compute_model_init(ctx, a, &c->groups[0].device, NULL, &cm);
  if (!st) st = shard_mesh_init(ctx, c, n_axes, shape, &mesh);
  int cap = shard_max_strategies(n_axes);
  shard_strategy *tmp = st ? NULL : arena_alloc(a, (size_t)cap * sizeof *tmp);
  if (!st && !tmp) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  if (st) {
    arena_free(a);
    return st;
  }
  double s = (double)(opts->seq_length > 0 ? opts->seq_length : (g->default_seq > 0 ? g->default_seq : 1));
  shard_env env = {&cm, &mesh, (double)opts->global_batch_size, s, 1, 16.0, HW_DTYPE_BF16};
  strbuf sb = {0};
  bool json = format == AP_OUT_JSON;
  if (json) {
    sb_puts(&sb, "{\"format\": \"autopar-sharding/1\", \"model\": ");
    json_str(&sb, g->name);
    sb_puts(&sb, ", \"mesh\": {\"shape\": [");
    for (int i = 0; i < n_axes; i++) sb_printf(&sb, "%s%lld", i ? ", " : "", (long long)mesh.shape[i]);
    sb_puts(&sb, "], \"levels\": [");
    for (int i = 0; i < n_axes; i++) {
      if (i) sb_puts(&sb, ", ");
      json_str(&sb, mesh.level_name[i]);
    }
    sb_puts(&sb, "]}, \"ops\": [");
  } else {
    sb_printf(&sb, "sharding strategies of %s on a mesh of", g->name);
    for (int i = 0; i < n_axes; i++) sb_printf(&sb, " %s%lld (%s)", i ? "x " : "", (long long)mesh.shape[i], mesh.level_name[i]);
    sb_printf(&sb, ", global batch %lld\n", (long long)opts->global_batch_size);
  }
  int n_op = 0;
  for (int bi = 0; bi < g->n_blocks; bi++)
    for (int oi = 0; oi < g->blocks[bi].n_ops; oi++) {
      const graph_op *op = &g->blocks[bi].ops[oi];
      int n = shard_enumerate(&env, &g->blocks[bi], op, tmp, cap);
      if (json) {
        sb_puts(&sb, n_op++ ? ",\n  {\"name\": " : "\n  {\"name\": ");
        json_str(&sb, op->name);
        sb_puts(&sb, ", \"op_type\": ");
        json_str(&sb, op->op_type ? op->op_type : op_kind_name(op->kind));
        sb_puts(&sb, ", \"strategies\": [");
      } else {
        sb_printf(&sb, "\n%s (%s): %d\n", op->name, op->op_type ? op->op_type : op_kind_name(op->kind), n);
      }
      for (int k = 0; k < n; k++) {
        const shard_strategy *t = &tmp[k];
        if (json) {
          sb_puts(&sb, k ? ", {\"output_spec\": " : "{\"output_spec\": ");
          gpr_spec_json(&sb, &t->out[0]);
          gpr_weight_json(&sb, op, t); /* in stored order, as the plan's */
          sb_puts(&sb, ", \"input_specs\": [");
          for (int i = 0; i < op->n_in; i++) {
            if (i) sb_puts(&sb, ", ");
            gpr_spec_json(&sb, &t->in[i]);
          }
          sb_printf(&sb, "], \"partial\": %u, \"compute_s\": %.6g, \"comm_s\": %.6g, \"mem_bytes\": %.6g}", t->partial,
                    t->compute_s, t->comm_s, t->weight_mem_bytes + t->act_mem_bytes);
        } else {
          sb_printf(&sb, "  %2d  out ", k);
          gpr_spec_text(&sb, &t->out[0]);
          sb_puts(&sb, " ");
          if (t->weight.n_dims > 0 && graph_op_params(op) > 0) gpr_weight_text(&sb, op, t); /* stored order */
          else sb_puts(&sb, " weight -");
          sb_puts(&sb, "  in ");
          for (int i = 0; i < op->n_in; i++) {
            if (i) sb_puts(&sb, " | ");
            gpr_spec_text(&sb, &t->in[i]);
          }
          sb_printf(&sb, "%s  compute %.3g s, comm %.3g s, mem %.3g B\n", t->partial ? "  (pending sum)" : "",
                    t->compute_s, t->comm_s, t->weight_mem_bytes + t->act_mem_bytes);
        }
      }
      if (json) sb_puts(&sb, "]}");
    }
  if (json) sb_puts(&sb, "]}\n");
  *out = sb_take(&sb);
  arena_free(a);
  return *out ? AP_OK : ctx_fail(ctx, AP_NOMEM, "out of memory");
}

/* The document and text writers, for the /2 reader's export and render (graph_plan_eval.c). */
void gpr_plan_write(strbuf *sb, const graph *g, const char *model_path, const hw_cluster *c, int64_t gbs,
                    const gplan_result *r, bool json) {
  gplan_opts o;
  gplan_opts_init(&o);
  o.gbs = gbs;
  o.model_path = model_path;
  if (json) write_json(sb, g, c, &o, r);
  else write_text(sb, g, c, &o, r);
}
