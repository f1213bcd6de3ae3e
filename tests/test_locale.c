/* The library's numbers do not depend on the host's locale (issue 19, class 8): a host that has called
 * setlocale(LC_ALL, "de_DE.UTF-8"), whose decimal separator is a comma, gets byte for byte the documents,
 * texts and files it gets under "C", reads the same numbers ("2.5e11" tokens, a price of 2.5, a runs table with
 * fractional measurements, a calibration file), and keeps its own locale after every call, whether it was set
 * for the process (setlocale) or for the thread (uselocale). Each case runs once under "C" and once under
 * de_DE.UTF-8. Skips, saying so, where that locale is not installed (scripts/deps.sh generates it as root). */
#include <locale.h>
#include <stdlib.h>
#include <unistd.h>

#include "testutil.h"

#include "core/core.h"

static const char *de_names[] = {"de_DE.UTF-8", "de_DE.utf8", "de_DE"};
static char tmpdir[64];

/* The outputs of one run of every case, concatenated with separators. */
static char *run_all(void) {
  ap_ctx *ctx = ap_ctx_new();
  assert_non_null(ctx);
  size_t cap = 1 << 20, n = 0;
  char *all = malloc(cap);
  assert_non_null(all);
  all[0] = '\0';
#define ADD(s)                                                                                 \
  do {                                                                                         \
    const char *s_ = (s);                                                                      \
    size_t k_ = strlen(s_);                                                                    \
    while (n + k_ + 8 >= cap) assert_non_null(all = realloc(all, cap *= 2));                   \
    memcpy(all + n, s_, k_);                                                                   \
    n += k_;                                                                                   \
    memcpy(all + n, "\n----\n", 7);                                                            \
    n += 6;                                                                                    \
  } while (0)
#define CHECK(call)                                                                            \
  do {                                                                                         \
    ap_status st_ = (call);                                                                    \
    if (st_) fail_msg("%s: %s", #call, ap_ctx_error(ctx));                                     \
  } while (0)
  ap_model *m = NULL;
  ap_cluster *c = NULL;
  ap_plan *p = NULL, *loaded = NULL;
  char *out = NULL, *doc = NULL;
  CHECK(ap_model_load(ctx, "gpt2", &m));
  CHECK(ap_cluster_load(ctx, "dgx-h100:2x8", &c));
  CHECK(ap_cluster_describe_json(ctx, c, &out));
  ADD(out);
  ap_free(out);
  CHECK(ap_plan_new(ctx, &p));
  CHECK(ap_plan_set(ctx, p, "global_batch_size", "16"));
  CHECK(ap_plan_set(ctx, p, "seq_length", "1024"));
  CHECK(ap_plan_set(ctx, p, "tp", "2"));
  CHECK(ap_estimate(ctx, m, c, p, AP_OUT_JSON, &doc));
  ADD(doc);
  CHECK(ap_estimate(ctx, m, c, p, AP_OUT_TEXT, &out));
  ADD(out);
  ap_free(out);
  /* Numbers read: tokens and a price with a decimal point. */
  CHECK(ap_render(ctx, doc, "2.5e11", "2.5", AP_OUT_JSON, &out));
  ADD(out);
  ap_free(out);
  CHECK(ap_render(ctx, doc, "2.5e11", "2.5", AP_OUT_TEXT, &out));
  ADD(out);
  ap_free(out);
  ap_free(doc);
  /* A trace file. */
  char trace[128];
  snprintf(trace, sizeof trace, "%s/trace.json", tmpdir);
  CHECK(ap_simulate(ctx, m, c, p, trace, AP_OUT_JSON, &out));
  ADD(out);
  ap_free(out);
  char *text = NULL;
  FILE *f = fopen(trace, "r");
  assert_non_null(f);
  text = calloc(1, 1 << 22);
  assert_non_null(text);
  size_t got = fread(text, 1, (1 << 22) - 1, f);
  fclose(f);
  assert_true(got > 0);
  ADD(text);
  free(text);
  /* A plan file read and written. */
  CHECK(ap_plan_load(ctx, "data/plans/llama-3-70b-64xh100.json", &loaded));
  CHECK(ap_plan_json(ctx, loaded, &out));
  ADD(out);
  ap_free(out);
  /* A runs table with fractional measurements, validated. */
  char csv[128];
  snprintf(csv, sizeof csv, "%s/runs.csv", tmpdir);
  CHECK(ap_validate(ctx, csv, AP_VALIDATE_JSON, &out));
  ADD(out);
  ap_free(out);
  /* A calibration file (fractions everywhere), then an estimate under it. */
  CHECK(ap_ctx_set_calibration(ctx, "data/calibration/default.json"));
  CHECK(ap_estimate(ctx, m, c, p, AP_OUT_JSON, &out));
  ADD(out);
  ap_free(out);
  ap_plan_free(loaded);
  ap_plan_free(p);
  ap_cluster_free(c);
  ap_model_free(m);
  ap_ctx_free(ctx);
  all[n] = '\0';
  return all;
#undef ADD
#undef CHECK
}

static const char *set_de(void) {
  for (size_t i = 0; i < AP_COUNT(de_names); i++)
    if (setlocale(LC_ALL, de_names[i])) return de_names[i];
  return NULL;
}

/* The host's comma is still its own after the calls. */
static void assert_host_comma(void) {
  char buf[16];
  snprintf(buf, sizeof buf, "%.1f", 1.5);
  assert_string_equal(buf, "1,5");
}

static void test_same_under_comma_locale(void **state) {
  (void)state;
  setlocale(LC_ALL, "C");
  char *in_c = run_all();
  const char *de = set_de();
  if (!de) {
    setlocale(LC_ALL, "C");
    free(in_c);
    print_message("SKIP: no de_DE.UTF-8 locale on this machine (scripts/deps.sh generates it when run as root)\n");
    skip();
  }
  assert_host_comma();
  char *in_de = run_all();
  assert_host_comma();
  setlocale(LC_ALL, "C");
  if (strcmp(in_c, in_de) != 0) {
    size_t i = 0;
    while (in_c[i] == in_de[i]) i++;
    size_t from = i > 60 ? i - 60 : 0;
    fail_msg("under %s the output differs at byte %zu:\n  C:  %.120s\n  de: %.120s", de, i, in_c + from, in_de + from);
  }
  free(in_c);
  free(in_de);
}

/* A thread locale of the host's own (uselocale) is restored too, and the library still writes points. */
static void test_thread_locale_restored(void **state) {
  (void)state;
  locale_t de = (locale_t)0;
  for (size_t i = 0; i < AP_COUNT(de_names) && !de; i++) de = newlocale(LC_ALL_MASK, de_names[i], (locale_t)0);
  if (!de) {
    print_message("SKIP: no de_DE.UTF-8 locale on this machine\n");
    skip();
  }
  locale_t before = uselocale(de);
  ap_ctx *ctx = ap_ctx_new();
  ap_model *m = NULL;
  char *out = NULL;
  assert_int_equal(ap_model_load(ctx, "gpt2", &m), AP_OK);
  assert_int_equal(ap_model_describe_text(ctx, m, 1024, &out), AP_OK);
  assert_true(uselocale((locale_t)0) == de);
  assert_host_comma();
  assert_non_null(out);
  ap_free(out);
  ap_model_free(m);
  ap_ctx_free(ctx);
  uselocale(before);
  freelocale(de);
}

static int setup(void **state) {
  (void)state;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/autopar-locale-XXXXXX");
  if (!mkdtemp(tmpdir)) return -1;
  char csv[128];
  snprintf(csv, sizeof csv, "%s/runs.csv", tmpdir);
  FILE *f = fopen(csv, "w");
  if (!f) return -1;
  fputs("id,stack,model,arch,num_layers,hidden_size,num_attention_heads,vocab_size,seq_length,mlp,gpu,num_gpus,"
        "global_batch_size,micro_batch_size,tp,pp,dp,recompute,zero_stage,precision,outcome,"
        "measured_tokens_per_s_per_gpu,measured_peak_mem_GiB,mem_convention\n"
        "a,megatron-lm,GPT 1.3B,dense,24,2048,16,51200,2048,gelu,a100-80gb,8,512,4,1,1,8,none,1,bf16,ok,10000.75,21.5,nvidia-smi\n"
        "b,megatron-lm,GPT 1.3B,dense,24,2048,16,51200,2048,gelu,a100-80gb,8,512,2,2,1,4,none,1,bf16,ok,9000.25,17.25,nvidia-smi\n",
        f);
  return fclose(f) == 0 ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_under_comma_locale),
      cmocka_unit_test(test_thread_locale_restored),
  };
  return cmocka_run_group_tests_name("locale", tests, setup, teardown);
}
