/* Benchmark: `autopar plan` through the public API (ap_plan_search), single-threaded, on the five cases of the
 * issue "Planner": Llama-3-70B on 64 H100, GPT-3 175B on 1,024 A100, a 1T GPT on 3,072 A100, Llama-3.1-405B on
 * 16,384 H100 and DeepSeek-V3 on 2,048 H800. Target: each search under one second. Prints per case the wall
 * time, the plans costed, plans costed per second and the best plan's predicted tokens/s per device. The
 * figures come from the JSON report (docs/planner.md), read here with a few string scans so that the benchmark
 * needs nothing but the public header.
 *
 * Wall time depends on the machine's load; the instructions a search executes do not. `bench_plan N` runs case N
 * (0-based) alone, so that bench/plan_instr.sh can count each search's instructions under callgrind (only those
 * inside ap_plan_search) and print them per plan costed: the figure to compare across commits on a shared
 * machine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autopar.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
  const char *model, *cluster;
  int64_t gbs, seq;
} bench_case;

/* Batches as published: Llama 3 pre-training (8k context), Narayanan et al. 2021 Table 1 (GPT-3 175B with
 * batch 1536, 1T with 3072, sequence 2048), Llama 3.1 (16M-token batches of 8k sequences) and DeepSeek-V3
 * (15,360 sequences of 4k). */
static const bench_case cases[] = {
    {"llama-3-70b", "dgx-h100:8x8", 1024, 8192},    {"gpt3-175b", "a100:1024", 1536, 2048},
    {"gpt-1t", "a100:3072", 3072, 2048},            {"llama-3.1-405b", "h100:16384", 2048, 8192},
    {"deepseek-v3", "h800:2048", 15360, 4096},
};

/* The number after the first "key": at or after from; -1 when absent. */
static double field(const char *from, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = from ? strstr(from, pat) : NULL;
  return p ? strtod(p + strlen(pat), NULL) : -1;
}

static int run(const bench_case *c) {
  ap_ctx *ctx = ap_ctx_new();
  ap_model *m = NULL;
  ap_cluster *cl = NULL;
  char *out = NULL;
  int rc = 1;
  if (ap_model_load(ctx, c->model, &m) || ap_cluster_load(ctx, c->cluster, &cl)) goto done;
  ap_search_opts so;
  ap_search_opts_init(&so);
  so.global_batch_size = c->gbs;
  so.seq_length = c->seq;
  double t0 = now_s();
  ap_status st = ap_plan_search(ctx, m, cl, &so, AP_OUT_JSON, &out, NULL);
  double wall = now_s() - t0;
  if (st) goto done;
  double n = field(out, "n_evaluated"), tok = field(strstr(out, "\"plans\":["), "tokens_per_s_per_device");
  printf("plan  %-15s on %-13s gbs %5lld seq %5lld  %7.3f s  %7.0f plans  %8.0f plans/s  best %8.1f tokens/s/device%s\n",
         c->model, c->cluster, (long long)c->gbs, (long long)c->seq, wall, n, n / wall, tok,
         wall < 1.0 ? "" : "  (over 1 s)");
  rc = 0;
done:
  if (rc) fprintf(stderr, "bench_plan: %s on %s: %s\n", c->model, c->cluster, ap_ctx_error(ctx));
  ap_free(out);
  ap_cluster_free(cl);
  ap_model_free(m);
  ap_ctx_free(ctx);
  return rc;
}

int main(int argc, char **argv) {
  size_t n = sizeof cases / sizeof cases[0];
  if (argc > 1) {
    char *end = NULL;
    long i = strtol(argv[1], &end, 10);
    if (argc > 2 || !end || *end || end == argv[1] || i < 0 || (size_t)i >= n) {
      fprintf(stderr, "bench_plan: expected no argument or a case number 0..%zu, got '%s'\n", n - 1, argv[1]);
      return 2;
    }
    return run(&cases[i]);
  }
  int rc = 0;
  for (size_t i = 0; i < n; i++) rc |= run(&cases[i]);
  return rc;
}
