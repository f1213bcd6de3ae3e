/* Hostile numbers in every reader (issue 19, class 5): each number of each seed file (fuzz/seeds/…) is
 * replaced in turn by values at the edges of int32, int64, uint64 and double (2^31, 2^32, 2^62, 2^63 − 1,
 * −2^63, 2^64, 1e19, 1e308, −1e308), and the file is read again by the same reader the fuzz target calls:
 * stage and sharding problems (src/search/solve/problem.c), op-level plans autopar-plan/2
 * (src/search/graph/graph_plan_read*.c), device profiles (src/cost/compute.c) and safetensors headers
 * (src/model/safetensors.c; the header length is rewritten). Every read must either succeed or fail with a
 * one-line message; under `make asan` (UBSan with -fno-sanitize-recover) any overflowing product or sum of
 * input numbers stops the test: a submesh of [2^32, 2^32] wrapped to [0x0] before (problem.c). ONNX dims
 * are tested through the CLI (tests/sh_bounded.sh). */
#include "testutil.h"

#include <stdio.h>

#include "core/jsonx.h"
#include "cost/compute.h"
#include "hw/hw.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "search/graph/graph_plan_read.h"
#include "search/solve/problem.h"

static const char *const hostile[] = {"2147483648",           "4294967296", "4611686018427387904",
                                      "9223372036854775807",  "-9223372036854775808",
                                      "18446744073709551616", "1e19",       "1e308", "-1e308", "-1"};

typedef ap_status (*reader_fn)(ap_ctx *ctx, const char *text, size_t n);

static ap_status read_stage(ap_ctx *ctx, const char *text, size_t n) {
  json_t *root = NULL;
  arena *a = arena_new();
  ap_status st = jx_parse(ctx, "s.json", text, n, &root);
  stp_problem p;
  if (!st) st = stp_from_json(ctx, a, "s.json", root, &p);
  json_decref(root);
  arena_free(a);
  return st;
}

static ap_status read_sharding(ap_ctx *ctx, const char *text, size_t n) {
  json_t *root = NULL;
  arena *a = arena_new();
  ap_status st = jx_parse(ctx, "p.json", text, n, &root);
  sp_problem p;
  if (!st) st = sp_from_json(ctx, a, "p.json", root, &p);
  if (!st) {
    int32_t *c = arena_alloc(a, (size_t)p.n_groups * sizeof *c + 1);
    for (int32_t g = 0; c && g < p.n_groups; g++) c[g] = p.n_s[g] - 1;
    if (c) (void)sp_eval(&p, c);
  }
  json_decref(root);
  arena_free(a);
  return st;
}

static ap_status read_profile(ap_ctx *ctx, const char *text, size_t n) {
  arena *a = arena_new();
  compute_model cm;
  memset(&cm, 0, sizeof cm);
  cm.tuning = compute_tuning_defaults();
  ap_status st = compute_profile_parse(ctx, a, "profile.json", text, n, &cm);
  arena_free(a);
  return st;
}

static ap_model *mlp3;
static ap_cluster *h100x8, *dgx2x8;

static ap_status read_plan2(ap_ctx *ctx, const char *text, size_t n) {
  json_t *root = NULL;
  ap_status st = jx_parse(ctx, "plan2.json", text, n, &root);
  for (int c = 0; !st && c < 2; c++) {
    gplan_read_info info;
    gplan_result r;
    st = gplan_read(ctx, "plan2.json", root, model_graph(mlp3), c ? hw_cluster_of(dgx2x8) : hw_cluster_of(h100x8), NULL,
                    &info, &r);
    gplan_result_free(&r);
    if (st && c == 0) st = AP_OK, ctx_clear(ctx); /* a plan for the other cluster */
  }
  json_decref(root);
  return st;
}

/* safetensors: the number replaced lies in the JSON header, whose 8-byte length is written again. */
static ap_status read_safetensors(ap_ctx *ctx, const char *text, size_t n) {
  st_file f;
  ap_status st = st_parse(ctx, "t.safetensors", (const uint8_t *)text, n, &f);
  if (!st) st_free(&f);
  return st;
}

/* The numbers of a JSON text (outside strings): start offsets and lengths, at most max. */
static int find_numbers(const char *s, size_t n, size_t *at, size_t *len, int max) {
  int k = 0;
  bool in_str = false;
  for (size_t i = 0; i < n && k < max; i++) {
    if (in_str) {
      if (s[i] == '\\') i++;
      else if (s[i] == '"') in_str = false;
      continue;
    }
    if (s[i] == '"') {
      in_str = true;
    } else if ((s[i] >= '0' && s[i] <= '9') || (s[i] == '-' && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '9')) {
      size_t j = i + 1;
      while (j < n && strchr("0123456789.eE+-", s[j])) j++;
      at[k] = i, len[k++] = j - i;
      i = j - 1;
    }
  }
  return k;
}

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)sz + 1);
  if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) free(b), b = NULL;
  fclose(f);
  if (b) b[sz] = '\0', *n = (size_t)sz;
  return b;
}

enum { MAX_SITES = 4096 };

/* Sweeps one seed: every number (safetensors: of the header) replaced by every hostile value. */
static int sweep(reader_fn fn, const char *path, bool safetensors) {
  size_t n = 0;
  char *text = slurp(path, &n);
  if (!text) fail_msg("cannot read %s", path);
  size_t off = 0, hlen = n;
  if (safetensors) {
    uint64_t h = 0;
    for (int i = 0; i < 8 && i < (int)n; i++) h |= (uint64_t)(uint8_t)text[i] << (8 * i);
    if (n < 8 || h > n - 8) fail_msg("%s: not a safetensors file", path);
    off = 8, hlen = (size_t)h;
  }
  static size_t at[MAX_SITES], len[MAX_SITES];
  int sites = find_numbers(text + off, hlen, at, len, MAX_SITES), runs = 0;
  for (int k = 0; k < sites; k++)
    for (size_t v = 0; v < AP_COUNT(hostile); v++) {
      size_t hl = strlen(hostile[v]), m = n - len[k] + hl;
      char *t = malloc(m + 1);
      assert_non_null(t);
      size_t p = off + at[k];
      memcpy(t, text, p);
      memcpy(t + p, hostile[v], hl);
      memcpy(t + p + hl, text + p + len[k], n - p - len[k]);
      t[m] = '\0';
      if (safetensors) {
        uint64_t nh = (uint64_t)(hlen - len[k] + hl);
        for (int i = 0; i < 8; i++) t[i] = (char)(uint8_t)(nh >> (8 * i));
      }
      ap_ctx *ctx = ap_ctx_new();
      ap_status st = fn(ctx, t, m);
      const char *e = ap_ctx_error(ctx);
      if (st != AP_OK && (!*e || strchr(e, '\n')))
        fail_msg("%s, number %d -> %s: status %d with message \"%s\"", path, k, hostile[v], (int)st, e);
      ap_ctx_free(ctx);
      free(t);
      runs++;
    }
  free(text);
  return runs;
}

static void test_problem_files(void **state) {
  (void)state;
  int runs = sweep(read_stage, "fuzz/seeds/stage_problem/pipeline4.json", false) +
             sweep(read_stage, "fuzz/seeds/stage_problem/succ.json", false) +
             sweep(read_stage, "examples/problems/pipeline-4layer.json", false) +
             sweep(read_sharding, "fuzz/seeds/sharding_problem/mlp2.json", false) +
             sweep(read_sharding, "fuzz/seeds/sharding_problem/followers_penalty.json", false);
  print_message("# %d reads of problem files with hostile numbers\n", runs);
}

static void test_plan2(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  if (ap_model_load(ctx, "mlp-3", &mlp3) || ap_cluster_load(ctx, "h100-sxm:8", &h100x8) ||
      ap_cluster_load(ctx, "dgx-h100:2x8", &dgx2x8))
    fail_msg("%s", ap_ctx_error(ctx));
  int runs = sweep(read_plan2, "fuzz/seeds/plan2/mlp3-h100x8.json", false) +
             sweep(read_plan2, "fuzz/seeds/plan2/mlp3-2x8-3stages.json", false);
  print_message("# %d reads of plan/2 files with hostile numbers\n", runs);
  ap_model_free(mlp3);
  ap_cluster_free(h100x8);
  ap_cluster_free(dgx2x8);
  ap_ctx_free(ctx);
}

static void test_profiles(void **state) {
  (void)state;
  int runs = sweep(read_profile, "fuzz/seeds/profile/cpu-executor.json", false) +
             sweep(read_profile, "fuzz/seeds/profile/h200-trimmed.json", false);
  print_message("# %d reads of profiles with hostile numbers\n", runs);
}

static void test_safetensors(void **state) {
  (void)state;
  int runs = sweep(read_safetensors, "fuzz/seeds/safetensors/f32.safetensors", true) +
             sweep(read_safetensors, "fuzz/seeds/safetensors/bf16_f16.safetensors", true);
  print_message("# %d reads of safetensors headers with hostile numbers\n", runs);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_problem_files),
      cmocka_unit_test(test_plan2),
      cmocka_unit_test(test_profiles),
      cmocka_unit_test(test_safetensors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
