/* Benchmark: op-level plans of the five shipped ONNX models (`autopar plan --model examples/onnx/M.onnx
 * --cluster C --gbs 64`, the default strategies: the ILP and greedy on every mesh shape, then the inter-op
 * pass) through the public API, single-threaded, on h100-sxm:8 and dgx-h100:4x8: the wall and CPU time of the
 * whole plan, the predicted iteration time and the number of pipeline stages. Not part of `make test`; built without the "ilp" or "onnx" part it says so and exits. Figures of one
 * run are in bench/graph_plan.txt. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "autopar.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(void) {
#if !defined(AP_PART_ILP) || !defined(AP_PART_ONNX)
  printf("bench_graph_plan: needs the ilp and onnx parts (not built)\n");
  return 0;
#else
  static const char *const models[] = {"resnet50", "vit_b_16", "unet", "gpt2_small", "t5_small"};
  static const char *const clusters[] = {"h100-sxm:8", "dgx-h100:4x8"};
  printf("%-12s %-14s %10s %10s %14s %7s\n", "model", "cluster", "wall s", "cpu s", "iteration s", "stages");
  for (size_t i = 0; i < sizeof models / sizeof *models; i++)
    for (size_t j = 0; j < 2; j++) {
      ap_ctx *ctx = ap_ctx_new();
      ap_ctx_add_part(ctx, ap_part_ilp());
      ap_ctx_add_part(ctx, ap_part_onnx());
      char path[128];
      snprintf(path, sizeof path, "examples/onnx/%s.onnx", models[i]);
      ap_model *m = NULL;
      ap_cluster *c = NULL;
      char *out = NULL;
      ap_graph_plan_opts o;
      ap_graph_plan_opts_init(&o);
      o.global_batch_size = 64;
      double t0 = now_s(), c0 = (double)clock() / CLOCKS_PER_SEC;
      ap_status st = ap_model_load(ctx, path, &m);
      if (!st) st = ap_cluster_load(ctx, clusters[j], &c);
      if (!st) st = ap_graph_plan(ctx, m, c, &o, AP_OUT_JSON, &out);
      double dt = now_s() - t0, dc = (double)clock() / CLOCKS_PER_SEC - c0;
      const char *it = out ? strstr(out, "\"time\": {\"iteration_s\": ") : NULL;
      double iter = 0;
      if (it) sscanf(it + strlen("\"time\": {\"iteration_s\": "), "%lf", &iter);
      int n_stages = 0;
      for (const char *q = out; q && (q = strstr(q, "\"first_op\"")); q++) n_stages++; /* only stages have it */
      if (st) printf("%-12s %-14s failed: %s\n", models[i], clusters[j], ap_ctx_error(ctx));
      else printf("%-12s %-14s %10.2f %10.2f %14.5g %7d\n", models[i], clusters[j], dt, dc, iter, n_stages);
      ap_free(out);
      ap_cluster_free(c);
      ap_model_free(m);
      ap_ctx_free(ctx);
    }
  return 0;
#endif
}
