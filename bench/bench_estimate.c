/* Benchmark: the time of one estimate and one simulation through the public API (ap_estimate, ap_simulate),
 * single-threaded. Target (issue "Cost model"): one estimate of a 1T-parameter model on 3,072 GPUs under 1 ms.
 * Prints one line per case: the model, cluster and plan, and the mean time per call over a fixed wall budget;
 * for the h200 case also the first call of a fresh context, which parses the device profile. With arguments
 * `CASE CALLS estimate|simulate` it makes one first call and then exactly CALLS more of that case and prints
 * nothing: bench/estimate_instr.sh counts the instructions under callgrind (load-independent). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "autopar.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
  const char *model, *cluster;
  const char *kv[12][2];
} bench_case;

static const bench_case cases[] = {
    {"gpt-1t", "a100:3072", {{"tp", "8"}, {"pp", "64"}, {"mbs", "1"}, {"gbs", "3072"}, {"seq", "2048"}, {"recompute", "full"}, {"schedule", "interleaved-1f1b"}, {"vpp", "2"}, {0, 0}}},
    {"llama-3-70b", "h100:64", {{"tp", "8"}, {"pp", "4"}, {"gbs", "128"}, {"seq", "8192"}, {"sp", "1"}, {"recompute", "selective"}, {0, 0}}},
    {"deepseek-v3", "h800:2048", {{"tp", "1"}, {"pp", "16"}, {"ep", "64"}, {"gbs", "15360"}, {"seq", "4096"}, {"recompute", "full"}, {0, 0}}},
    /* The h200 carries a measured GEMM profile (data/profiles/h200.json, 616 shapes): parsed once per context
     * (the context's memo), so a call costs about what one without a profile does, not the 3.4 ms of the
     * parse. The first call of a context pays the parse; the mean over the budget hides it. */
    {"llama-3-8b", "h200:8", {{"tp", "1"}, {"pp", "1"}, {"gbs", "64"}, {"seq", "8192"}, {"recompute", "selective"}, {0, 0}}},
};

static int run(const bench_case *c, int simulate, int fixed_calls) {
  ap_ctx *ctx = ap_ctx_new();
  ap_model *m = NULL;
  ap_cluster *cl = NULL;
  ap_plan *p = NULL;
  if (ap_model_load(ctx, c->model, &m) || ap_cluster_load(ctx, c->cluster, &cl) || ap_plan_new(ctx, &p)) goto fail;
  for (int i = 0; c->kv[i][0]; i++)
    if (ap_plan_set(ctx, p, c->kv[i][0], c->kv[i][1])) goto fail;
  int n = 0;
  double f0 = now_s();
  {
    char *out = NULL;
    ap_status st = simulate ? ap_simulate(ctx, m, cl, p, NULL, AP_OUT_JSON, &out) : ap_estimate(ctx, m, cl, p, AP_OUT_JSON, &out);
    ap_free(out);
    if (st) goto fail;
  }
  double first_s = now_s() - f0;
  double t0 = now_s(), t1 = t0;
  while (fixed_calls >= 0 ? n < fixed_calls : t1 - t0 < 1.0 && n < 100000) {
    char *out = NULL;
    ap_status st = simulate ? ap_simulate(ctx, m, cl, p, NULL, AP_OUT_JSON, &out) : ap_estimate(ctx, m, cl, p, AP_OUT_JSON, &out);
    ap_free(out);
    if (st) goto fail;
    n++;
    t1 = now_s();
  }
  if (fixed_calls < 0)
    printf("%-9s %-12s on %-10s %9.3f ms per call (%d calls; first call of the context %.3f ms)\n",
         simulate ? "simulate" : "estimate", c->model, c->cluster, 1e3 * (t1 - t0) / n, n, 1e3 * first_s);
  ap_plan_free(p);
  ap_cluster_free(cl);
  ap_model_free(m);
  ap_ctx_free(ctx);
  return 0;
fail:
  fprintf(stderr, "bench_estimate: %s: %s\n", c->model, ap_ctx_error(ctx));
  ap_plan_free(p);
  ap_cluster_free(cl);
  ap_model_free(m);
  ap_ctx_free(ctx);
  return 1;
}

int main(int argc, char **argv) {
  int rc = 0;
  if (argc == 4) {
    char *end = NULL;
    long k = strtol(argv[1], &end, 10), calls = strtol(argv[2], NULL, 10);
    if (*end || k < 0 || (size_t)k >= sizeof cases / sizeof cases[0] || calls < 0 || calls > 100000) {
      fprintf(stderr, "bench_estimate: case %s out of range\n", argv[1]);
      return 2;
    }
    return run(&cases[k], argv[3][0] == 's', (int)calls);
  }
  if (argc != 1) {
    fprintf(stderr, "usage: bench_estimate [CASE CALLS estimate|simulate]\n");
    return 2;
  }
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) rc |= run(&cases[i], 0, -1);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) rc |= run(&cases[i], 1, -1);
  return rc;
}
