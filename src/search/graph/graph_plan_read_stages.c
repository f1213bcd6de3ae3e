/* The pipeline stages of an op-level plan read back (search layer; graph_plan_read.h, the reader's stage part).
 * A plan of several stages (the inter-op pass's, graph_stages.c) is checked and rebuilt the way that pass built
 * it, through the functions it builds with (graph_stages.h): each stage's submesh must be one of the pass's
 * submeshes of the cluster and its mesh one of that submesh's logical meshes, the submeshes together use exactly
 * the cluster's devices, and the stages cover the graph's ops in order (stage 0 from the first op, each from the
 * op after the previous one's last, the last to the graph's last op, no stage starting inside a repeated block).
 * Each stage's ops are then matched against the whole graph's problem on its mesh (gstage_mesh_problem) and tied
 * into the groups of the stage's own problem (gstage_range_problem); once matched, each stage's objective is
 * scored as the inter-op pass scores a stage (gp_evaluate_range of its node choice) and the stage is described, priced and the
 * pipeline's latency formed by the pass's own functions (gstage_describe, gstage_latency_s, gplan_take_stages),
 * so that the figures are the plan's to the bit. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "search/graph/graph_plan_read.h"

/* The name of node i (blocks in order, their ops in order: the graph problem's node order). */
static const char *name_at(const graph *g, int i) {
  for (int b = 0; b < g->n_blocks; b++) {
    if (i < g->blocks[b].n_ops) return g->blocks[b].ops[i].name ? g->blocks[b].ops[i].name : "";
    i -= g->blocks[b].n_ops;
  }
  return "";
}

static void shape_text(char *buf, size_t n, const int64_t *v, int len) {
  if (len == 2) snprintf(buf, n, "[%lld, %lld]", (long long)v[0], (long long)v[1]);
  else snprintf(buf, n, "[%lld]", (long long)v[0]);
}

/* Config k of submesh sm as a mesh shape as the file writes it ([n] or [rows, cols]); 0 entries when none. */
static int config_shape(const gstage_submesh *sm, int k, int64_t *out) {
  if (sm->shape[k][1] == 0) return 0;
  if (sm->shape[k][0] > 1) {
    out[0] = sm->shape[k][0], out[1] = sm->shape[k][1];
    return 2;
  }
  out[0] = sm->shape[k][1];
  return 1;
}

/* The submesh [hosts, per host] and logical mesh a stage states, matched against the pass's. */
static ap_status match_submesh(const jx_src *s, const hw_cluster *c, const char *cluster, const gread_stated *x,
                               gread_stage *y) {
  gstage_submesh sm[GST_MAX_SUBMESHES];
  int n = gstage_submeshes(c, sm), m = 0;
  while (m < n && !(sm[m].hosts == x->sub[0] && sm[m].per_host == x->sub[1])) m++;
  char got[48], list[512] = "";
  if (m == n) {
    size_t len = 0;
    for (int k = 0; k < n && len < sizeof list; k++)
      len += (size_t)snprintf(list + len, sizeof list - len, "%s[%lld, %lld]", k ? ", " : "", (long long)sm[k].hosts,
                              (long long)sm[k].per_host);
    shape_text(got, sizeof got, x->sub, 2);
    return jx_fail(s, "submesh", "%s is not a submesh of %s (the inter-op pass's are %s)", got, cluster, list);
  }
  y->sub = sm[m];
  for (int k = 0; k < GST_N_CONFIGS; k++) {
    int64_t v[2];
    int len = config_shape(&sm[m], k, v);
    if (len > 0 && len == x->n_mesh && v[0] == x->mesh[0] && (len == 1 || v[1] == x->mesh[1])) {
      memcpy(y->shape, sm[m].shape[k], sizeof y->shape);
      return AP_OK;
    }
  }
  size_t len = 0;
  for (int k = 0; k < GST_N_CONFIGS; k++) {
    int64_t v[2];
    int nv = config_shape(&sm[m], k, v);
    char one[48];
    if (nv == 0) continue;
    shape_text(one, sizeof one, v, nv);
    len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", len ? " or " : "", one);
  }
  shape_text(got, sizeof got, x->mesh, x->n_mesh);
  char sub[48];
  shape_text(sub, sizeof sub, x->sub, 2);
  return jx_fail(s, "mesh", "%s is not a logical mesh of the submesh %s (expected %s)", got, sub, list);
}

ap_status gread_stages_check(const jx_src *top, const gread_stated *x, int n, const graph *g, const hw_cluster *c,
                             const char *cluster, gread_stages *out) {
  memset(out, 0, sizeof *out);
  int N = 0;
  for (int b = 0; b < g->n_blocks; b++) N += g->blocks[b].n_ops;
  out->n = n;
  int64_t devices = 0;
  char where[32];
  for (int q = 0; q < n; q++) {
    snprintf(where, sizeof where, "stages[%d]", q);
    jx_src s = {top->ctx, top->file, where};
    gread_stage *y = &out->st[q];
    ap_status st = match_submesh(&s, c, cluster, &x[q], y);
    if (st) return st;
    devices += y->sub.hosts * y->sub.per_host;
    /* first_op: the graph's first, else the op after the previous stage's last */
    int lo = q == 0 ? 0 : out->st[q - 1].hi + 1;
    if (lo >= N || strcmp(x[q].first, name_at(g, lo)) != 0) {
      if (q == 0) return jx_fail(&s, "first_op", "\"%s\": the first stage must start at the graph's first op, %s", x[q].first, name_at(g, 0));
      if (lo >= N) return jx_fail(&s, "first_op", "\"%s\": the stages before it end at the graph's last op", x[q].first);
      return jx_fail(&s, "first_op", "\"%s\": expected the op after stages[%d].last_op, %s", x[q].first, q - 1,
                     name_at(g, lo));
    }
    /* last_op: the last stage ends at the graph's last op; another at the first op of that name from lo on */
    int hi = -1;
    if (q == n - 1) {
      if (strcmp(x[q].last, name_at(g, N - 1)) != 0)
        return jx_fail(&s, "last_op", "\"%s\": the last stage must end at the graph's last op, %s", x[q].last,
                       name_at(g, N - 1));
      hi = N - 1;
    } else {
      for (int i = lo; i < N && hi < 0; i++)
        if (strcmp(x[q].last, name_at(g, i)) == 0) hi = i;
      if (hi < 0) return jx_fail(&s, "last_op", "\"%s\": no op of that name from first_op on", x[q].last);
      if (hi == N - 1) return jx_fail(&s, "last_op", "\"%s\" is the graph's last op: stages follow", x[q].last);
    }
    y->lo = lo, y->hi = hi;
    if (x[q].in_flight >= 0 && x[q].in_flight != n - q)
      return jx_fail(&s, "in_flight", "%lld, but under 1F1B stage %d of %d holds %d micro-batches (the stages after it "
                     "and its own)", (long long)x[q].in_flight, q, n, n - q);
  }
  if (devices != c->n_devices)
    return jx_fail(top, "stages", "the submeshes use %lld devices; the cluster %s has %lld", (long long)devices, cluster,
                   (long long)c->n_devices);
  return AP_OK;
}

ap_status gread_stages_build(const jx_src *top, arena *a, const graph *g, const hw_cluster *c, const compute_model *cm,
                             double b, double s, double n_micro, double limit_bytes, gread_stages *x) {
  ap_ctx *ctx = top->ctx;
  for (int q = 0; q < x->n; q++) {
    gread_stage *y = &x->st[q];
    y->gp = NULL;
    for (int p = 0; p < q && !y->gp; p++) /* stages on one mesh share its problem */
      if (x->st[p].shape[0] == y->shape[0] && x->st[p].shape[1] == y->shape[1]) y->gp = x->st[p].gp;
    if (!y->gp) {
      graph_problem *gp = arena_alloc(a, sizeof *gp);
      shard_mesh *mesh = arena_alloc(a, sizeof *mesh);
      if (!gp || !mesh) return ctx_fail(ctx, AP_NOMEM, "out of memory");
      ap_status st = gstage_mesh_problem(ctx, a, g, c, cm, y->shape, b, s, n_micro, limit_bytes, NULL, mesh, gp);
      if (st) return st;
      y->gp = gp;
    }
    if (q > 0 && !gstage_cut_ok(y->gp, y->lo)) {
      const graph_block *blk = &g->blocks[y->gp->nodes[y->lo].block];
      char where[32];
      snprintf(where, sizeof where, "stages[%d]", q);
      jx_src in = {ctx, top->file, where};
      return jx_fail(&in, "first_op", "\"%s\": a stage may not start inside block %s, which runs %lld times (the "
                     "inter-op pass never splits a repeated block)", name_at(g, y->lo), blk->name ? blk->name : "",
                     (long long)blk->repeat);
    }
    ap_status st = gstage_range_problem(ctx, a, y->gp, y->lo, y->hi, limit_bytes, &y->sp);
    if (st) return st;
  }
  return AP_OK;
}

ap_status gread_stages_finish(ap_ctx *ctx, arena *a, const hw_cluster *c, const gread_stages *x,
                              const int32_t *choice, double n_micro, int64_t gbs, double s, gplan_result *r) {
  const graph_problem *gp0 = x->st[0].gp;
  double b = (double)gbs / n_micro;
  double *cross = arena_alloc(a, ((size_t)gp0->n_nodes + 1) * sizeof *cross);
  if (!cross) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  if (gstage_crossing_bytes(gp0, b, s, cross)) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  gstage st[GST_MAX_LAYERS];
  for (int q = 0; q < x->n; q++) {
    const gread_stage *y = &x->st[q];
    int32_t *gch = arena_alloc(a, (size_t)(y->sp.n_groups > 0 ? y->sp.n_groups : 1) * sizeof *gch);
    if (!gch) return ctx_fail(ctx, AP_NOMEM, "out of memory");
    for (int32_t k = 0; k < y->sp.n_groups; k++) gch[k] = choice[y->lo + y->sp.leader[k]];
    /* scored as the inter-op pass scores a stage: the evaluation of its node choice (gp_evaluate_range, the
     * weight sync's overlap counted) */
    int32_t *full = arena_alloc(a, (size_t)y->gp->n_nodes * sizeof *full);
    if (!full) return ctx_fail(ctx, AP_NOMEM, "out of memory");
    for (int i = 0; i <= y->hi - y->lo; i++) full[y->lo + i] = gch[y->sp.group_of[i]];
    double obj = gp_evaluate_range(y->gp, full, y->lo, y->hi).total_s;
    double next = q + 1 < x->n ? cross[y->hi + 1] : 0;
    ap_status e = gstage_describe(ctx, a, c, &y->sub, y->gp, y->lo, y->hi, choice + y->lo, obj, next, n_micro, &st[q]);
    if (e) return e;
    st[q].in_flight = x->n - q;
  }
  gplan_take_stages(r, st, x->n, n_micro, gbs, gstage_latency_s(st, x->n, n_micro));
  return AP_OK;
}
