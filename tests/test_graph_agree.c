/* The planner's closed form (gp_evaluate, what `plan` prints) and autopar's own event simulator (graph_sim.c,
 * and for pipelines the one timeline of graph_pipe.c, what `simulate` prints) agree within 5% on every plan
 * kind: data parallelism (its weight sync in DDP's buckets, overlapped with the backward pass: shard.h
 * SHARD_BUCKET_BYTES, graph_problem.c gp_wgrad_exposed_s), Megatron's column-then-row split, a 2-axis mesh,
 * resharding between ops (an annotation forces it), and inter-op stages, on chains of MLP blocks (on graphs
 * with branches the simulator also overlaps one branch's collectives with another's compute, which the closed
 * form does not: bench/graph_plan.txt has the shipped models' figures). */
#include <stdlib.h>

#include "testutil.h"

#include "hw/hw.h"
#include "model/graph.h"
#include "search/graph/graph_pipe.h"
#include "search/graph/graph_plan.h"

/* x[B, S, H] -> n x (matmul [H, F] -> gelu -> matmul [F, H]) -> loss. */
static graph *mlp_chain(arena *a, ap_ctx *ctx, int n, int64_t hidden, int64_t ffn, int64_t seq) {
  graph *g = arena_alloc(a, sizeof *g);
  memset(g, 0, sizeof *g);
  g->name = "mlp_chain";
  g->model_type = "graph";
  g->default_seq = seq;
  graph_builder gb = {.a = a, .ctx = ctx};
  graph_block_begin(&gb, g, "chain", BLOCK_OTHER, 1);
  int x = graph_tensor_add(&gb, "x", DT_BF16, -1, false, (int64_t[]){DIM_B, DIM_S, hidden}, 3);
  for (int l = 0; l < n; l++) {
    char *nm[3];
    for (int k = 0; k < 3; k++) nm[k] = arena_alloc(a, 32);
    snprintf(nm[0], 32, "/l.%d/fc1", l);
    snprintf(nm[1], 32, "/l.%d/gelu", l);
    snprintf(nm[2], 32, "/l.%d/fc2", l);
    int h = graph_tensor_add(&gb, nm[0], DT_BF16, -1, false, (int64_t[]){DIM_B, DIM_S, ffn}, 3);
    int u = graph_tensor_add(&gb, nm[1], DT_BF16, -1, false, (int64_t[]){DIM_B, DIM_S, ffn}, 3);
    int y = graph_tensor_add(&gb, nm[2], DT_BF16, -1, false, (int64_t[]){DIM_B, DIM_S, hidden}, 3);
    graph_op op = graph_op_init(OP_MATMUL, nm[0]);
    op.n_in = 1, op.in[0] = x, op.out = h, op.weight_k = hidden, op.weight_n = ffn;
    op.saved[op.n_saved++] = x;
    graph_op_add(&gb, &op);
    op = graph_op_init(OP_ELEMENTWISE, nm[1]);
    op.n_in = 1, op.in[0] = h, op.out = u, op.flop_per_elem = 8;
    op.saved[op.n_saved++] = h;
    graph_op_add(&gb, &op);
    op = graph_op_init(OP_MATMUL, nm[2]);
    op.n_in = 1, op.in[0] = u, op.out = y, op.weight_k = ffn, op.weight_n = hidden;
    op.saved[op.n_saved++] = u;
    graph_op_add(&gb, &op);
    x = y;
  }
  int l = graph_tensor_add(&gb, "loss", DT_FP32, -1, false, (int64_t[]){1}, 1);
  graph_op op = graph_op_init(OP_LOSS, "loss");
  op.n_in = 1, op.in[0] = x, op.out = l;
  graph_op_add(&gb, &op);
  assert_int_equal(graph_build_edges(ctx, a, g), AP_OK);
  assert_int_equal(graph_validate(ctx, g, "mlp_chain"), AP_OK);
  return g;
}

typedef struct {
  const char *kind;
  int n_layers;
  int64_t hidden, ffn, seq;
  const char *cluster;
  int64_t rows, cols; /* 0: every mesh shape */
  int64_t gbs;
  const char *strategies, *annotate;
} agree_case;

/* Plans the case and returns the closed form and the simulated time; checks the plan is of its kind. */
static void check(const agree_case *k) {
  ap_ctx *ctx = ap_ctx_new();
#ifdef AP_PART_ILP
  assert_int_equal(ap_ctx_add_part(ctx, ap_part_ilp()), AP_OK);
#endif
  arena *a = arena_new();
  graph *g = mlp_chain(a, ctx, k->n_layers, k->hidden, k->ffn, k->seq);
  ap_cluster *cl = NULL;
  assert_int_equal(ap_cluster_load(ctx, k->cluster, &cl), AP_OK);
  gplan_opts o;
  gplan_opts_init(&o);
  o.gbs = k->gbs;
  o.strategies = k->strategies;
  o.annotate = k->annotate;
  if (k->rows) {
    o.n_mesh_shapes = 1;
    o.mesh_shapes[0][0] = k->rows, o.mesh_shapes[0][1] = k->cols;
  }
  gplan_result r;
  if (gplan_run(ctx, g, hw_cluster_of(cl), &o, &r)) fail_msg("%s: %s", k->kind, ap_ctx_error(ctx));
  assert_true(r.found);
  /* the plan is of the kind the case names */
  const graph_problem *gp = &r.gp;
  bool w_split = false, partial = false, both_axes = false;
  double wgrad = 0;
  for (int i = 0; i < gp->n_nodes; i++) {
    const shard_strategy *s = &gp->nodes[i].s[r.choice[i]];
    for (int d = 0; d < s->weight.n_dims; d++) w_split = w_split || s->weight.dim[d];
    partial = partial || (s->partial && g->blocks[0].ops[gp->nodes[i].op].kind != OP_LOSS);
    both_axes = both_axes || (s->axis_loop[0] >= 0 && s->axis_loop[1] >= 0);
    wgrad += s->wgrad_comm_s;
  }
  if (strcmp(k->kind, "data parallel") == 0) assert_true(!w_split && wgrad > 0 && r.n_stages == 1);
  if (strcmp(k->kind, "column/row") == 0) assert_true(w_split && partial && r.n_stages == 1);
  if (strcmp(k->kind, "2-D mesh") == 0) assert_true(both_axes && r.mesh.n_axes == 2);
  if (strcmp(k->kind, "resharding") == 0) assert_true(r.br.reshard_s > 0);
  if (strcmp(k->kind, "stages") == 0) assert_true(r.n_stages >= 2);
  gpipe_stage ps[GST_MAX_LAYERS];
  int n_ps = 0;
  int64_t events = 0;
  gpipe_event *ev = NULL;
  size_t n_ev = 0;
  double sim_s = 0;
  assert_int_equal(gpipe_stage_times(ctx, &r, ps, &n_ps, &events), AP_OK);
  assert_int_equal(gpipe_simulate(ctx, ps, n_ps, (int64_t)r.n_micro, PLAN_SCHED_1F1B, &ev, &n_ev, &sim_s), AP_OK);
  free(ev);
  double closed = r.br.total_s, rel = (closed - sim_s) / sim_s;
  char mesh[48];
  if (r.mesh.n_axes == 2) snprintf(mesh, sizeof mesh, "%lldx%lld", (long long)r.mesh.shape[0], (long long)r.mesh.shape[1]);
  else snprintf(mesh, sizeof mesh, "%lld", (long long)r.mesh.shape[0]);
  print_message("# %-14s %-13s mesh %s, %d stage(s), %g micro-batches: closed form %.6g s, simulated %.6g s (%+.1f%%)\n",
                k->kind, k->cluster, mesh, r.n_stages, r.n_micro, closed, sim_s, 100 * rel);
  if (fabs(rel) > 0.05)
    fail_msg("%s: the closed form %.6g s and the simulator %.6g s differ by %.1f%%", k->kind, closed, sim_s, 100 * rel);
  gplan_result_free(&r);
  ap_cluster_free(cl);
  arena_free(a);
  ap_ctx_free(ctx);
}

static void test_plan_kinds_agree(void **state) {
  (void)state;
  static const agree_case cases[] = {
      {"data parallel", 4, 1024, 4096, 512, "dgx-h100:2x8", 1, 16, 256, "elim-dp", NULL},
      {"column/row", 2, 8192, 32768, 128, "h100-sxm:4", 1, 4, 4, "elim-dp", NULL},
      {"2-D mesh", 2, 4096, 16384, 512, "dgx-h100:2x8", 2, 8, 32, "elim-dp", NULL},
      {"resharding", 2, 8192, 32768, 128, "h100-sxm:4", 1, 4, 4, "elim-dp", "/l.0/fc1=S0,R,R"},
      {"stages", 16, 4096, 4096, 1024, "dgx-h100:4x8", 0, 0, 8, "elim-dp,inter-op", NULL},
  };
  for (size_t i = 0; i < AP_COUNT(cases); i++) check(&cases[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plan_kinds_agree),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
