/* The API from several threads at once, one context each (include/autopar.h promises that distinct contexts
 * are independent), and two threads writing one path. `make test` runs it as a plain test; `make tsan` builds
 * it with ThreadSanitizer, which reported the race on calibrate.c's lazily initialised defaults before they
 * became per thread. Every thread loads, estimates, simulates with a trace, exports, searches, validates and
 * calibrates a three-row runs table; the outputs of the threads must agree with one another. */
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

enum { N_THREADS = 4, N_WRITES = 200 };

static char dir[64];

static const char runs_csv[] =
    "id,model,arch,num_layers,hidden_size,num_attention_heads,vocab_size,seq_length,mlp,gpu,num_gpus,"
    "global_batch_size,micro_batch_size,tp,pp,dp,recompute,zero_stage,precision,outcome,measured_tokens_per_s_per_gpu\n"
    "a,GPT 1.3B,dense,24,2048,16,51200,2048,gelu,a100-80gb,8,512,4,1,1,8,none,1,bf16,ok,10000\n"
    "b,GPT 1.3B,dense,24,2048,16,51200,2048,gelu,a100-80gb,8,512,2,2,1,4,none,1,bf16,ok,9000\n"
    "c,GPT 1.3B,dense,24,2048,16,51200,2048,gelu,a100-80gb,8,512,1,1,2,4,none,1,bf16,ok,8000\n";

typedef struct {
  int id;
  char *estimate, *search;
  ap_status st;
  char where[64];
} job;

#define TRY(call)                                                                                            \
  do {                                                                                                       \
    if ((j->st = (call)) != AP_OK) {                                                                         \
      snprintf(j->where, sizeof j->where, "%s", #call);                                                      \
      goto done;                                                                                             \
    }                                                                                                        \
  } while (0)

static void *work(void *arg) {
  job *j = arg;
  ap_ctx *ctx = ap_ctx_new();
  ap_model *m = NULL;
  ap_cluster *c = NULL;
  ap_plan *p = NULL, *best = NULL;
  char *s = NULL, path[128], csv[128];
  snprintf(csv, sizeof csv, "%s/runs.csv", dir);
  TRY(ap_model_load(ctx, "gpt2", &m));
  TRY(ap_cluster_load(ctx, "h100:8", &c));
  TRY(ap_plan_new(ctx, &p));
  TRY(ap_plan_set(ctx, p, "tp", "2"));
  TRY(ap_plan_set(ctx, p, "gbs", "16"));
  TRY(ap_plan_set(ctx, p, "seq", "1024"));
  TRY(ap_estimate(ctx, m, c, p, AP_OUT_JSON, &j->estimate));
  snprintf(path, sizeof path, "%s/trace-%d.json", dir, j->id);
  TRY(ap_simulate(ctx, m, c, p, path, AP_OUT_TEXT, &s));
  ap_free(s);
  s = NULL;
  TRY(ap_export(ctx, m, p, "megatron", &s));
  ap_free(s);
  s = NULL;
  ap_search_opts o;
  ap_search_opts_init(&o);
  o.global_batch_size = 16;
  o.seq_length = 1024;
  TRY(ap_plan_search(ctx, m, c, &o, AP_OUT_JSON, &j->search, &best));
  TRY(ap_validate(ctx, csv, AP_VALIDATE_JSON, &s));
  ap_free(s);
  s = NULL;
  snprintf(path, sizeof path, "%s/cal-%d.json", dir, j->id);
  TRY(ap_calibrate(ctx, csv, NULL, path, AP_OUT_JSON, &s));
done:
  ap_free(s);
  ap_plan_free(best);
  ap_plan_free(p);
  ap_cluster_free(c);
  ap_model_free(m);
  if (j->st) snprintf(j->where + strlen(j->where), sizeof j->where - strlen(j->where), ": %.20s", ap_ctx_error(ctx));
  ap_ctx_free(ctx);
  return NULL;
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/autopar-threads-XXXXXX");
  if (!mkdtemp(dir)) return -1;
  char csv[128];
  snprintf(csv, sizeof csv, "%s/runs.csv", dir);
  write_file(csv, runs_csv);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

static void test_contexts_on_threads(void **state) {
  (void)state;
  pthread_t t[N_THREADS];
  job jobs[N_THREADS];
  memset(jobs, 0, sizeof jobs);
  for (int i = 0; i < N_THREADS; i++) {
    jobs[i].id = i;
    assert_int_equal(pthread_create(&t[i], NULL, work, &jobs[i]), 0);
  }
  for (int i = 0; i < N_THREADS; i++) assert_int_equal(pthread_join(t[i], NULL), 0);
  for (int i = 0; i < N_THREADS; i++) {
    if (jobs[i].st) fail_msg("thread %d: %s -> %s", i, jobs[i].where, ap_status_str(jobs[i].st));
    /* The same question gets the same answer on every thread. */
    assert_string_equal(jobs[i].estimate, jobs[0].estimate);
    /* (the search's own timing figures differ, so compare from its plans on) */
    assert_non_null(strstr(jobs[i].search, "\"plans\":"));
    assert_string_equal(strstr(jobs[i].search, "\"plans\":"), strstr(jobs[0].search, "\"plans\":"));
  }
  for (int i = 0; i < N_THREADS; i++) {
    ap_free(jobs[i].estimate);
    ap_free(jobs[i].search);
  }
}

/* Two threads replace one path over and over: each write is whole (one thread's text, never a mix, never a
 * failure), because each takes its own exclusively created temporary (a shared predictable one gave spurious
 * I/O errors and mixed content). */
typedef struct {
  const char *path;
  char text[4096];
  int failures;
} writer;

static void *write_loop(void *arg) {
  writer *w = arg;
  ap_ctx *ctx = ap_ctx_new();
  for (int i = 0; i < N_WRITES; i++)
    if (ap_write_file(ctx, w->path, w->text) != AP_OK) w->failures++;
  ap_ctx_free(ctx);
  return NULL;
}

static void test_two_writers_one_path(void **state) {
  (void)state;
  char path[128];
  snprintf(path, sizeof path, "%s/shared.txt", dir);
  writer w[2] = {{path, {0}, 0}, {path, {0}, 0}};
  memset(w[0].text, 'a', sizeof w[0].text - 1);
  memset(w[1].text, 'b', sizeof w[1].text - 2); /* a different length too */
  pthread_t t[2];
  for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&t[i], NULL, write_loop, &w[i]), 0);
  for (int i = 0; i < 2; i++) assert_int_equal(pthread_join(t[i], NULL), 0);
  assert_int_equal(w[0].failures + w[1].failures, 0);
  char buf[8192] = {0};
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  assert_true(n == strlen(w[0].text) || n == strlen(w[1].text));
  assert_true(strcmp(buf, w[0].text) == 0 || strcmp(buf, w[1].text) == 0);
  /* No temporary is left behind beside the file. */
  char cmd[256];
  snprintf(cmd, sizeof cmd, "test $(ls -A '%s' | grep -c '^\\.shared') -eq 0", dir);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_contexts_on_threads),
      cmocka_unit_test(test_two_writers_one_path),
  };
  return cmocka_run_group_tests_name("threads", tests, setup, teardown);
}
