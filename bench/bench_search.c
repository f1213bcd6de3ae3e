/* Benchmark: every search family on the op-level sharding problems of the five shipped ONNX models
 * (examples/onnx, gbs 64), on h100-sxm:8 and dgx-h100:4x8, over every mesh shape the planner tries (one axis of
 * every device and each [n/d, d]; graph_plan.c mesh_shapes), at the budget of 20,000 evaluations and no
 * time limit (so every family gets the same budget, counted the same way: one evaluation is one scored complete
 * choice, sp_eval), seed 1. Per row: the groups of the problem and the most strategies of one group, then for each
 * heuristic its cost relative to the ILP's optimum (+x% above it), its evaluations and its CPU seconds (the
 * process's own, one thread). Not part of `make test`; built without the "ilp" or "onnx" part it says so and
 * exits. `make bench` runs it; one run's figures are in bench/search.txt. With arguments MODEL CLUSTER [SEED] it
 * runs that pair only (examples/onnx/MODEL.onnx), with that seed. The ILP's CPU seconds per problem are its
 * solve time by graph size on real models (bench/ilp.txt has random ones). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autopar.h"
#include "model/model.h"
#include "search/graph/graph_plan.h"

static double cpu_s(void) { return (double)clock() / CLOCKS_PER_SEC; }

#if defined(AP_PART_ILP) && defined(AP_PART_ONNX)
static const char *const families[] = {"ilp", "greedy", "mcmc", "mcts", "rl", "recursive"};
enum { N_FAM = sizeof families / sizeof *families };

/* One (model, cluster): every mesh shape, every family. */
static int run_pair(const char *model, const char *cluster, uint64_t seed) {
  ap_ctx *ctx = ap_ctx_new();
  ap_ctx_add_part(ctx, ap_part_ilp());
  ap_ctx_add_part(ctx, ap_part_onnx());
  char path[160];
  snprintf(path, sizeof path, "examples/onnx/%s.onnx", model);
  ap_model *m = NULL;
  ap_cluster *cl = NULL;
  ap_status st = ap_model_load(ctx, path, &m);
  if (!st) st = ap_cluster_load(ctx, cluster, &cl);
  if (st) {
    printf("%-11s %-13s failed: %s\n", model, cluster, ap_ctx_error(ctx));
    ap_model_free(m);
    ap_ctx_free(ctx);
    return 1;
  }
  const hw_cluster *c = hw_cluster_of(cl);
  int64_t n = c->n_devices, shapes[8][2];
  int n_shapes = 0;
  shapes[n_shapes][0] = 1, shapes[n_shapes][1] = n, n_shapes++;
  for (int64_t d = n / 2; d >= 2 && n_shapes < 8; d--)
    if (n % d == 0) shapes[n_shapes][0] = n / d, shapes[n_shapes][1] = d, n_shapes++;
  int rc = 0;
  for (int si = 0; si < n_shapes; si++) {
    arena *a = arena_new();
    compute_model cm;
    graph_problem gp;
    gplan_opts o;
    gplan_opts_init(&o);
    o.gbs = 64;
    char mesh[32];
    if (shapes[si][0] > 1) snprintf(mesh, sizeof mesh, "%lldx%lld", (long long)shapes[si][0], (long long)shapes[si][1]);
    else snprintf(mesh, sizeof mesh, "%lld", (long long)shapes[si][1]);
    st = compute_model_init(ctx, a, &c->groups[0].device, NULL, &cm);
    if (!st) st = gplan_problem(ctx, a, model_graph(m), c, &cm, &o, shapes[si], &gp);
    int32_t *choice = st ? NULL : arena_alloc(a, (size_t)(gp.sp.n_groups > 0 ? gp.sp.n_groups : 1) * sizeof *choice);
    if (st || !choice) {
      printf("%-11s %-13s %-6s failed: %s\n", model, cluster, mesh, st ? ap_ctx_error(ctx) : "out of memory");
      ctx_clear(ctx);
      arena_free(a);
      rc = 1;
      continue;
    }
    int max_s = 0;
    for (int32_t g = 0; g < gp.sp.n_groups; g++) max_s = gp.sp.n_s[g] > max_s ? gp.sp.n_s[g] : max_s;
    printf("%-11s %-13s %-6s %6d %5d", model, cluster, mesh, gp.sp.n_groups, max_s);
    double opt = 0;
    for (int f = 0; f < N_FAM; f++) {
      solve_opts so;
      solve_opts_init(&so);
      so.max_evals = 20000;
      so.time_budget_s = 0;
      so.seed = seed;
      sp_result r = {.choice = choice};
      double t0 = cpu_s();
      st = solve_strategy_find(families[f])->sharding(ctx, &gp.sp, &so, &r);
      double dt = cpu_s() - t0;
      if (st) {
        printf(" | %s failed: %s", families[f], ap_ctx_error(ctx));
        ctx_clear(ctx);
        rc = 1;
        continue;
      }
      if (f == 0) {
        opt = r.objective;
        printf(" %11.6g %6.2f", opt, dt);
      } else if (r.status == SOLVE_INFEASIBLE) {
        printf(" %8s %6lld %5.2f", "infeas.", (long long)r.n_evals, dt);
      } else {
        printf(" %+7.2f%% %6lld %5.2f", 100 * (r.objective / opt - 1), (long long)r.n_evals, dt);
      }
    }
    printf("\n");
    fflush(stdout);
    arena_free(a);
  }
  ap_cluster_free(cl);
  ap_model_free(m);
  ap_ctx_free(ctx);
  return rc;
}
#endif

int main(int argc, char **argv) {
#if !defined(AP_PART_ILP) || !defined(AP_PART_ONNX)
  (void)argc, (void)argv;
  printf("bench_search: needs the ilp and onnx parts (not built)\n");
  return 0;
#else
  static const char *const models[] = {"resnet50", "vit_b_16", "unet", "gpt2_small", "t5_small"};
  static const char *const clusters[] = {"h100-sxm:8", "dgx-h100:4x8"};
  printf("bench_search: every family on each model x cluster x mesh shape, gbs 64, 20000 evaluations, seed 1\n");
  printf("heuristics: cost above the ILP's optimum, evaluations, CPU s\n");
  printf("%-11s %-13s %-6s %6s %5s %11s %6s", "model", "cluster", "mesh", "groups", "max_s", "ilp s/iter", "cpu s");
  for (int f = 1; f < N_FAM; f++) printf(" | %-20s", families[f]);
  printf("\n");
  int rc = 0;
  if (argc >= 3) return run_pair(argv[1], argv[2], argc >= 4 ? (uint64_t)strtoull(argv[3], NULL, 10) : 1);
  for (size_t i = 0; i < sizeof models / sizeof *models; i++)
    for (size_t j = 0; j < 2; j++) rc |= run_pair(models[i], clusters[j], 1);
  return rc;
#endif
}
