/* Benchmark: the intra-op ILP (`autopar solve --strategy ilp`, CBC through the "ilp" part) through the public
 * API, single-threaded, on random sharding problems of growing size: N nodes with 4 to 8 strategies each (a
 * fifth of them following another node, as Alpa merges elementwise ops onto their operand), 1.5 edges per node
 * between nearby nodes (a layered graph, as a model's is), program points of a sliding window of 8 nodes, and a
 * memory budget halfway between the leanest and the average peak (one family with it, one without). Prints per size the wall and CPU time, the status,
 * the objective and the gap to the LP relaxation's bound. Not part of `make test`; built without the part
 * (CORE_ONLY=1) it says so and exits. */
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

/* A tiny LCG for the problem generator (Knuth, TAOCP vol. 2, §3.3.4: MMIX's multiplier): the benchmark needs
 * only reproducible instances, and the public header has no RNG. */
static uint64_t lcg_state = 42;
static double urand(void) {
  lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(lcg_state >> 11) * 0x1.0p-53;
}

enum { MAX_S = 8, WINDOW = 8 };

static void write_problem(FILE *f, int n, int with_budget) {
  int *ns = malloc((size_t)n * sizeof *ns), *follow = malloc((size_t)n * sizeof *follow);
  double *mem = malloc((size_t)n * MAX_S * sizeof *mem);
  fprintf(f, "{\"format\": \"autopar-sharding-problem/1\", \"nodes\": [");
  for (int i = 0; i < n; i++) {
    follow[i] = i > 0 && urand() < 0.2 ? i - 1 : -1;
    ns[i] = follow[i] >= 0 ? ns[follow[i]] : 4 + (int)(urand() * 5);
    fprintf(f, "%s{\"compute\": [", i ? ", " : "");
    for (int k = 0; k < ns[i]; k++) fprintf(f, "%s%.3f", k ? ", " : "", 1 + 9 * urand());
    fprintf(f, "], \"communication\": [");
    for (int k = 0; k < ns[i]; k++) fprintf(f, "%s%.3f", k ? ", " : "", 3 * urand());
    fprintf(f, "], \"memory_bytes\": [");
    for (int k = 0; k < ns[i]; k++) fprintf(f, "%s%.0f", k ? ", " : "", mem[i * MAX_S + k] = 1e6 * (1 + 63 * urand()));
    fprintf(f, "]");
    if (follow[i] >= 0) fprintf(f, ", \"follow\": %d", follow[i]);
    fprintf(f, "}");
  }
  fprintf(f, "], \"edges\": [");
  int n_e = (int)(1.5 * n);
  for (int e = 0; e < n_e; e++) {
    int v = 1 + (int)(urand() * (n - 1)), u = v - 1 - (int)(urand() * (v < 4 ? v : 4));
    fprintf(f, "%s{\"from\": %d, \"to\": %d, \"cost\": [", e ? ", " : "", u, v);
    for (int a = 0; a < ns[u]; a++) {
      fprintf(f, "%s[", a ? ", " : "");
      for (int b = 0; b < ns[v]; b++) fprintf(f, "%s%.3f", b ? ", " : "", a == b ? 0.0 : 5 * urand());
      fprintf(f, "]");
    }
    fprintf(f, "]}");
  }
  fprintf(f, "], \"liveness\": [");
  double lo = 0, avg = 0;
  for (int t = 0; t + WINDOW <= n; t++) {
    double l = 0, s = 0;
    fprintf(f, "%s[", t ? ", " : "");
    for (int i = t; i < t + WINDOW; i++) {
      double mn = 1e300, sum = 0;
      for (int k = 0; k < ns[i]; k++) mn = mem[i * MAX_S + k] < mn ? mem[i * MAX_S + k] : mn, sum += mem[i * MAX_S + k];
      l += mn, s += sum / ns[i];
      fprintf(f, "%s%d", i > t ? ", " : "", i);
    }
    fprintf(f, "]");
    lo = l > lo ? l : lo, avg = s > avg ? s : avg;
  }
  if (with_budget) fprintf(f, "], \"memory_budget_bytes\": %.0f}\n", lo + 0.5 * (avg - lo));
  else fprintf(f, "]}\n");
  free(ns), free(follow), free(mem);
}

/* The number after "key": in s, or -1. */
static double field(const char *s, const char *key) {
  const char *p = strstr(s, key);
  return p ? atof(p + strlen(key)) : -1;
}

int main(void) {
#ifndef AP_PART_ILP
  printf("bench_ilp: this build has no ilp part (CORE_ONLY=1): nothing to measure\n");
  return 0;
#else
  /* TUNING: sizes that finish in minutes on one core; the budgeted family is the hard one (the memory rows
   * make it a multi-dimensional knapsack), so it stops at 100 nodes and a 60 s limit per instance. */
  static const struct {
    int n, budget;
  } cases[] = {{50, 0}, {100, 0}, {200, 0}, {400, 0}, {800, 0}, {25, 1}, {50, 1}, {100, 1}};
  printf("bench_ilp: CBC on random sharding problems (4-8 strategies, 1.5 edges/node), one thread, 60 s limit\n");
  printf("%6s %7s %10s %10s %10s %16s %12s\n", "nodes", "budget", "time_s", "cpu_s", "status", "objective", "LP gap");
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/bench_ilp_%d_%d.json", cases[c].n, cases[c].budget);
    FILE *f = fopen(path, "w");
    if (!f) return 1;
    write_problem(f, cases[c].n, cases[c].budget);
    fclose(f);
    ap_ctx *ctx = ap_ctx_new();
    ap_ctx_add_part(ctx, ap_part_ilp());
    ap_solve_opts o;
    ap_solve_opts_init(&o);
    o.strategy = "ilp";
    o.time_budget_s = 60;
    char *out = NULL;
    double t0 = now_s(), c0 = (double)clock() / CLOCKS_PER_SEC;
    ap_status st = ap_solve_file(ctx, path, &o, AP_OUT_JSON, &out);
    double dt = now_s() - t0, dc = (double)clock() / CLOCKS_PER_SEC - c0;
    if (st != AP_OK && st != AP_INFEASIBLE) {
      printf("%6d %7s failed: %s\n", cases[c].n, cases[c].budget ? "yes" : "no", ap_ctx_error(ctx));
    } else {
      double obj = field(out, "\"objective\": "), lb = field(out, "\"lower_bound\": ");
      const char *status = strstr(out, "\"status\": \"optimal\"") ? "optimal" : strstr(out, "\"feasible\"") ? "feasible" : "infeasible";
      printf("%6d %7s %10.3f %10.3f %10s %16.6f %11.4f%%\n", cases[c].n, cases[c].budget ? "yes" : "no", dt, dc, status, obj,
             obj > 0 ? 100 * (obj - lb) / obj : 0.0);
    }
    fflush(stdout);
    ap_free(out);
    ap_ctx_free(ctx);
    remove(path);
  }
  return 0;
#endif
}
