/* The failing-allocator mode (issue 9): each command's path through the library runs on tiny inputs (gpt2 on
 * h100:8, a three-row runs table) with a host allocator (ap_ctx_new_with_allocator; jansson's allocations are
 * routed to it with json_set_alloc_funcs, see json_alloc) that fails the n-th allocation, for every n along the path, as
 * Lua's test library does (ltests.c's memory limit); paths making more than 10,000 allocations are sampled
 * evenly. After each failure: the call returns AP_NOMEM, every allocation is released again (the allocator
 * counts live blocks; `make failing-allocator` also runs this under ASan), and no output or temporary file is
 * left; or the library recovers (a cache entry it cannot keep is recomputed) and answers exactly as without
 * the failure. `make test` runs a sample of each path (SAMPLE_QUICK failures); AUTOPAR_NOMEM_FULL=1 runs them all. */
#include <dirent.h>
#include <execinfo.h>
#include <stdlib.h>
#include <unistd.h>

#include <jansson.h>

#include "testutil.h"

#define AP_ALLOC_NO_MACROS /* this file's own allocations are libc's */
#include "core/core.h"

enum { FULL_LIMIT = 10000, SAMPLE_QUICK = 60 };

/* ---- The counting, failing allocator ---- */
static long n_calls, fail_at, live;
static bool fired, in_jansson;

static void *counting(void *user, void *ptr, size_t n) {
  (void)user;
  if (n == 0) {
    if (ptr) live--;
    free(ptr);
    return NULL;
  }
  if (in_jansson) {
    void *q = realloc(ptr, n);
    if (q && !ptr) live++;
    return q;
  }
  if (++n_calls == fail_at) {
    fired = true;
    if (getenv("AUTOPAR_NOMEM_TRACE")) { /* where the failure was injected, for addr2line */
      void *frames[16];
      backtrace_symbols_fd(frames, backtrace(frames, 16), 2);
    }
    return NULL;
  }
  void *q = realloc(ptr, n);
  if (q && !ptr) live++;
  return q;
}

/* jansson goes through the library's wrappers, so that its allocations meet the installed allocator, are
 * counted for leaks and are failed in turn like autopar's own, except those of jansson's parser (json_loadb,
 * marked by mem_json_loadb) unless AUTOPAR_NOMEM_JANSSON is set: jansson 2.14's parser is not safe under a
 * failed allocation (its lexer ignores a failed buffer growth, lex_save in load.c, and json_loadb then
 * segfaults or frees a pointer it did not allocate, on a valid file; AUTOPAR_NOMEM_JANSSON=1 shows it on the
 * validate path). */
static void *json_alloc(size_t n) {
  in_jansson = mem_in_json_parse() && !getenv("AUTOPAR_NOMEM_JANSSON");
  void *p = mem_malloc(n);
  in_jansson = false;
  return p;
}
static void json_release(void *p) { mem_free(p); }

static char dir[64];

/* What a path handed back (its output strings, lines that carry timings left out): a failure the library
 * recovers from (a cache entry it could not keep, a context without its memo) must give the same answer. */
static char *acc;
static size_t acc_len;
static void keep(const char *text) {
  for (const char *line = text; line && *line;) {
    const char *end = strchr(line, '\n');
    size_t n = end ? (size_t)(end - line) + 1 : strlen(line);
    bool timing = false;
    for (const char *m = line; m < line + n && !timing; m++)
      timing = strncmp(m, "per second", 10) == 0 || strncmp(m, "elapsed_s", 9) == 0 || strncmp(m, "plans_per_s", 11) == 0;
    if (!timing) {
      char *q = realloc(acc, acc_len + n + 1);
      if (!q) abort();
      acc = q;
      memcpy(acc + acc_len, line, n);
      acc_len += n;
      acc[acc_len] = '\0';
    }
    line += n;
  }
}

static void path_of(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

/* The outputs a path may write, and what the run without failures wrote there. */
static const char *const outputs[] = {"trace.json", "out.txt", "cal.json"};
enum { N_OUTPUTS = sizeof outputs / sizeof *outputs };
static char *reference[N_OUTPUTS];

static char *slurp(const char *name) {
  char p[128];
  path_of(p, sizeof p, name);
  FILE *f = fopen(p, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
    n += got;
    if (n + 1 >= cap) {
      char *q = realloc(buf, cap *= 2);
      if (!q) free(buf);
      buf = q;
    }
  }
  fclose(f);
  if (buf) buf[n] = '\0';
  return buf;
}

/* What a failed run left: a temporary (a dot file) or an output that is not the whole of what the run
 * without failures wrote (a file a finished earlier step wrote whole is fine). NULL when nothing. */
static const char *partial_files(void) {
  static char why[320];
  DIR *d = opendir(dir);
  why[0] = '\0';
  for (struct dirent *e; d && (e = readdir(d));)
    if (e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
      snprintf(why, sizeof why, "temporary %s", e->d_name);
  if (d) closedir(d);
  for (int i = 0; i < N_OUTPUTS && !why[0]; i++) {
    char *now = slurp(outputs[i]);
    if (now && (!reference[i] || strcmp(now, reference[i]) != 0)) snprintf(why, sizeof why, "partial %s", outputs[i]);
    free(now);
  }
  return why[0] ? why : NULL;
}

/* ---- The paths: each runs one command's calls and frees everything; returns the first failure. ---- */
typedef ap_status (*path_fn)(ap_ctx *ctx);

#define STEP(call)                                                                                           \
  do {                                                                                                       \
    if (!st) st = (call);                                                                                    \
  } while (0)

static ap_status path_describe(ap_ctx *ctx) {
  ap_model *m = NULL;
  char *a = NULL, *b = NULL;
  ap_status st = AP_OK;
  STEP(ap_model_load(ctx, "gpt2", &m));
  STEP(ap_model_describe_json(ctx, m, 0, &a));
  STEP(ap_model_describe_text(ctx, m, 512, &b));
  keep(a);
  keep(b);
  ap_free(a);
  ap_free(b);
  ap_model_free(m);
  return st;
}

static ap_status path_lists(ap_ctx *ctx) {
  char *a = NULL, *b = NULL, *c = NULL, *d = NULL;
  ap_status st = AP_OK;
  STEP(ap_models_list_json(ctx, &a));
  STEP(ap_clusters_list_text(ctx, &b));
  ap_cluster *cl = NULL;
  STEP(ap_cluster_load(ctx, "dgx-h100:2x8", &cl));
  STEP(ap_cluster_describe_json(ctx, cl, &c));
  STEP(ap_models_list_text(ctx, &d));
  ap_cluster_free(cl);
  keep(a);
  keep(b);
  keep(c);
  keep(d);
  ap_free(a);
  ap_free(b);
  ap_free(c);
  ap_free(d);
  return st;
}

static ap_status load_three(ap_ctx *ctx, ap_model **m, ap_cluster **c, ap_plan **p) {
  ap_status st = AP_OK;
  STEP(ap_model_load(ctx, "gpt2", m));
  STEP(ap_cluster_load(ctx, "h100:8", c));
  STEP(ap_plan_new(ctx, p));
  STEP(ap_plan_set(ctx, *p, "tp", "2"));
  STEP(ap_plan_set(ctx, *p, "pp", "2"));
  STEP(ap_plan_set(ctx, *p, "gbs", "16"));
  STEP(ap_plan_set(ctx, *p, "seq", "512"));
  return st;
}

static ap_status path_estimate(ap_ctx *ctx) {
  ap_model *m = NULL;
  ap_cluster *c = NULL;
  ap_plan *p = NULL;
  char *a = NULL, *b = NULL;
  ap_status st = load_three(ctx, &m, &c, &p);
  STEP(ap_estimate(ctx, m, c, p, AP_OUT_TEXT, &a));
  STEP(ap_estimate(ctx, m, c, p, AP_OUT_JSON, &b));
  keep(a);
  keep(b);
  ap_free(a);
  ap_free(b);
  ap_plan_free(p);
  ap_cluster_free(c);
  ap_model_free(m);
  return st;
}

static ap_status path_simulate(ap_ctx *ctx) {
  ap_model *m = NULL;
  ap_cluster *c = NULL;
  ap_plan *p = NULL;
  char *a = NULL, trace[128];
  path_of(trace, sizeof trace, "trace.json");
  ap_status st = load_three(ctx, &m, &c, &p);
  STEP(ap_simulate(ctx, m, c, p, trace, AP_OUT_JSON, &a));
  keep(a);
  ap_free(a);
  ap_plan_free(p);
  ap_cluster_free(c);
  ap_model_free(m);
  return st;
}

static ap_status path_export(ap_ctx *ctx) {
  ap_plan *p = NULL;
  char plan[128], out[128], *text = NULL;
  path_of(plan, sizeof plan, "plan.json");
  path_of(out, sizeof out, "out.txt");
  ap_status st = AP_OK;
  STEP(ap_plan_load(ctx, plan, &p));
  static const char *const formats[] = {"megatron", "deepspeed", "json"}; /* torchtitan trains no gpt2 */
  for (size_t i = 0; i < AP_COUNT(formats) && !st; i++) {
    STEP(ap_export(ctx, NULL, p, formats[i], &text));
    if (i == 0) STEP(ap_write_file(ctx, out, text));
    keep(text);
    ap_free(text);
    text = NULL;
  }
  char *j = NULL;
  STEP(ap_plan_json(ctx, p, &j));
  keep(j);
  ap_free(j);
  ap_plan_free(p);
  return st;
}

static ap_status path_plan(ap_ctx *ctx) {
  ap_model *m = NULL;
  ap_cluster *c = NULL;
  ap_plan *best = NULL;
  char *a = NULL;
  ap_status st = AP_OK;
  STEP(ap_model_load(ctx, "gpt2", &m));
  STEP(ap_cluster_load(ctx, "h100:8", &c));
  ap_search_opts o;
  ap_search_opts_init(&o);
  o.global_batch_size = 16;
  o.seq_length = 512;
  o.fix = "tp=2";
  o.top_k = 2;
  STEP(ap_plan_search(ctx, m, c, &o, AP_OUT_TEXT, &a, &best));
  keep(a);
  ap_free(a);
  ap_plan_free(best);
  ap_cluster_free(c);
  ap_model_free(m);
  return st;
}

static ap_status path_validate(ap_ctx *ctx) {
  char csv[128], *a = NULL;
  path_of(csv, sizeof csv, "runs.csv");
  ap_status st = ap_validate(ctx, csv, AP_VALIDATE_JSON, &a);
  keep(a);
  ap_free(a);
  return st;
}

static ap_status path_calibrate(ap_ctx *ctx) {
  char csv[128], out[128], *a = NULL;
  path_of(csv, sizeof csv, "runs.csv");
  path_of(out, sizeof out, "cal.json");
  ap_status st = ap_calibrate(ctx, csv, NULL, out, AP_OUT_TEXT, &a);
  keep(a);
  ap_free(a);
  return st;
}

/* Removes what a run wrote, so the next run starts clean. */
static void clean_outputs(void) {
  for (int i = 0; i < N_OUTPUTS; i++) {
    char p[128];
    path_of(p, sizeof p, outputs[i]);
    unlink(p);
  }
}

static void run_path(const char *name, path_fn fn) {
  bool full = getenv("AUTOPAR_NOMEM_FULL") != NULL;
  /* The path once without failures: how many allocations it makes. */
  n_calls = live = 0;
  fail_at = 0;
  fired = false;
  acc_len = 0;
  if (acc) acc[0] = '\0';
  ap_ctx *ctx = ap_ctx_new_with_allocator(counting, NULL);
  assert_non_null(ctx);
  ap_status st = fn(ctx);
  if (st) fail_msg("%s without failures: %s", name, ap_ctx_error(ctx));
  ap_ctx_free(ctx);
  if (live != 0) fail_msg("%s: %ld blocks left live without any failure", name, live);
  for (int i = 0; i < N_OUTPUTS; i++) {
    free(reference[i]);
    reference[i] = slurp(outputs[i]);
  }
  clean_outputs();
  char *ref = strdup(acc ? acc : "");
  assert_non_null(ref);
  long total = n_calls;
  long n_runs = full ? (total <= FULL_LIMIT ? total : FULL_LIMIT) : (total < SAMPLE_QUICK ? total : SAMPLE_QUICK);
  long checked = 0, n_bad = 0, n_recovered = 0;
  /* AUTOPAR_NOMEM_AT=PATH:N runs only that failure (with AUTOPAR_NOMEM_TRACE=1, its backtrace): debugging. */
  const char *at = getenv("AUTOPAR_NOMEM_AT");
  long only = 0;
  if (at) {
    size_t ln = strlen(name);
    if (strncmp(at, name, ln) != 0 || at[ln] != ':') return;
    only = atol(at + ln + 1);
    n_runs = 1;
  }
  for (long k = 0; k < n_runs; k++) {
    /* Every n, or n spread evenly over the path (always including the first allocation). */
    long n = n_runs == total ? k + 1 : 1 + (long)((double)k * (double)(total - 1) / (double)(n_runs - 1 > 0 ? n_runs - 1 : 1));
    if (only) n = only;
    if (getenv("AUTOPAR_NOMEM_VERBOSE")) fprintf(stderr, "%s: failing allocation %ld of %ld\n", name, n, total);
    n_calls = live = 0;
    fail_at = n;
    fired = false;
    acc_len = 0;
    if (acc) acc[0] = '\0';
    ctx = ap_ctx_new_with_allocator(counting, NULL);
    if (!ctx) {
      if (!fired || live) fail_msg("%s: n=%ld: context creation failed without a failure, or leaked", name, n);
      continue;
    }
    st = fn(ctx);
    char msg[1100];
    snprintf(msg, sizeof msg, "%s", ap_ctx_error(ctx));
    ap_ctx_free(ctx);
    const char *partial = partial_files();
    /* AP_NOMEM, or a recovery that gives the answer of the run without failures. */
    bool recovered = st == AP_OK && strcmp(acc ? acc : "", ref) == 0;
    const char *bad = fired && st != AP_NOMEM && !recovered ? "returned another status" : live != 0 ? "leaked" : partial;
    if (fired && recovered) n_recovered++;
    if (bad && ++n_bad <= 5)
      print_error("%s: allocation %ld of %ld failed: the path %s (%s, %ld live blocks, \"%s\")\n", name, n, total, bad,
                  ap_status_str(st), live, msg);
    clean_outputs();
    checked++;
  }
  free(ref);
  print_message("# %s: %ld allocations, %ld failures injected, %ld recovered with the same answer, %ld mishandled\n",
                name, total, checked, n_recovered, n_bad);
  if (n_bad) fail_msg("%s: %ld injected failures mishandled", name, n_bad);
}

static int setup(void **state) {
  (void)state;
  json_set_alloc_funcs(json_alloc, json_release);
  snprintf(dir, sizeof dir, "/tmp/autopar-nomem-XXXXXX");
  if (!mkdtemp(dir)) return -1;
  char p[128];
  path_of(p, sizeof p, "runs.csv");
  FILE *f = fopen(p, "w");
  if (!f) return -1;
  fputs("id,model,arch,num_layers,hidden_size,num_attention_heads,vocab_size,seq_length,mlp,gpu,num_gpus,"
        "global_batch_size,micro_batch_size,tp,pp,dp,recompute,zero_stage,precision,outcome,measured_tokens_per_s_per_gpu\n"
        "a,GPT small,dense,4,256,4,1000,512,gelu,a100-80gb,8,64,4,1,1,8,none,1,bf16,ok,10000\n"
        "b,GPT small,dense,4,256,4,1000,512,gelu,a100-80gb,8,64,2,2,1,4,none,1,bf16,ok,9000\n"
        "c,GPT small,dense,4,256,4,1000,512,gelu,a100-80gb,8,64,1,1,2,4,none,1,bf16,ok,8000\n",
        f);
  fclose(f);
  path_of(p, sizeof p, "plan.json");
  f = fopen(p, "w");
  if (!f) return -1;
  fputs("{\"format\":\"autopar-plan/1\",\"model\":\"gpt2\",\"global_batch_size\":16,\"seq_length\":512,"
        "\"parallel\":{\"dp\":2,\"tp\":2,\"pp\":2,\"cp\":1}}\n",
        f);
  fclose(f);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

#define PATH_TEST(name)                                                                                      \
  static void test_nomem_##name(void **state) {                                                              \
    (void)state;                                                                                             \
    run_path(#name, path_##name);                                                                            \
  }
PATH_TEST(describe)
PATH_TEST(lists)
PATH_TEST(estimate)
PATH_TEST(simulate)
PATH_TEST(export)
PATH_TEST(plan)
PATH_TEST(validate)
PATH_TEST(calibrate)

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nomem_describe), cmocka_unit_test(test_nomem_lists),
      cmocka_unit_test(test_nomem_estimate), cmocka_unit_test(test_nomem_simulate),
      cmocka_unit_test(test_nomem_export),   cmocka_unit_test(test_nomem_plan),
      cmocka_unit_test(test_nomem_validate), cmocka_unit_test(test_nomem_calibrate),
  };
  return cmocka_run_group_tests_name("nomem", tests, setup, teardown);
}
