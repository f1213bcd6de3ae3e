/* Equality tests of the executor's parallel plans (part "exec"): each plan trains a tiny model (4 layers of
 * hidden 64, or 2 MoE layers, sequences of 16 tokens, 4 steps) through `autopar run` under mpirun with 1–4
 * ranks, and its losses and final weights must equal the one-process run of the same model, data and global
 * batch within relative 1e-5 (losses per step; weights as the largest difference of a tensor over its largest
 * value). Also: a failing rank ends the job with its message and leaves no process behind, and plans the
 * executor does not run are refused naming the field. Needs bin/autopar (AUTOPAR_BIN) and bin/autopar-rank. */
#include <jansson.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#include "cost/compute.h"
#include "hw/hw.h"
#include "model/safetensors.h"

enum { STEPS = 4, MAX_STEPS = 8 };

static const char *bin(void) {
  const char *b = getenv("AUTOPAR_BIN");
  return b && *b ? b : "bin/autopar";
}

static char tmpdir[64];

typedef struct {
  double loss[MAX_STEPS];
  int n_steps;
  char weights[128];
} run_out;

/* Writes plan_json to a file, runs it, fills out; returns the exit status. */
static int run_plan(const char *model, const char *name, const char *plan_json, const char *extra, run_out *out) {
  char plan_path[160], cmd[1024], res[160];
  snprintf(plan_path, sizeof plan_path, "%s/%s.json", tmpdir, name);
  snprintf(out->weights, sizeof out->weights, "%s/%s.safetensors", tmpdir, name);
  snprintf(res, sizeof res, "%s/%s.out", tmpdir, name);
  FILE *f = fopen(plan_path, "w");
  assert_non_null(f);
  fputs(plan_json, f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "%s run --model %s --plan %s --steps %d --seed 3 --save %s --json %s >%s 2>%s.err", bin(),
           model, plan_path, STEPS, out->weights, extra ? extra : "", res, res);
  int st = system(cmd);
  int rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  out->n_steps = 0;
  if (rc != 0) return rc;
  json_error_t e;
  json_t *r = json_load_file(res, 0, &e);
  if (!r) fail_msg("%s: %s", res, e.text);
  assert_string_equal(json_string_value(json_object_get(r, "format")), "autopar-run/1");
  size_t i;
  json_t *s;
  json_array_foreach(json_object_get(r, "steps"), i, s) {
    if (i < MAX_STEPS) out->loss[out->n_steps++] = json_number_value(json_object_get(s, "loss"));
  }
  json_decref(r);
  return 0;
}

/* The largest over tensors of ‖a − b‖₂ / ‖b‖₂. (Elementwise, Adam's first steps move an element by ±lr
 * whatever its gradient's size, so an element whose gradient is at rounding level may move either way; the
 * norm keeps such elements from deciding alone.) */
static double weight_diff(const char *a_path, const char *b_path) {
  st_file a, b;
  assert_int_equal(st_read(NULL, a_path, &a), AP_OK);
  assert_int_equal(st_read(NULL, b_path, &b), AP_OK);
  assert_int_equal(a.n, b.n);
  double worst = 0;
  for (int64_t i = 0; i < a.n; i++) {
    const st_tensor *tb = st_find(&b, a.t[i].name);
    assert_non_null(tb);
    assert_int_equal(tb->n_elems, a.t[i].n_elems);
    double d = 0, m = 0;
    /* GPT-2's key bias (the middle third of c_attn.bias) has a gradient of exactly 0 in exact arithmetic:
     * q·(k + b) shifts every score of a query by the same q·b, which the softmax ignores. Its computed gradient
     * is rounding noise, which Adam turns into steps of ±lr; those elements must only stay within the Adam
     * bound, 2·lr per step. */
    int64_t skip_lo = 0, skip_hi = 0;
    if (strstr(a.t[i].name, "attn.c_attn.bias")) {
      skip_lo = tb->n_elems / 3;
      skip_hi = 2 * tb->n_elems / 3;
      for (int64_t k = skip_lo; k < skip_hi; k++) assert_true(fabs((double)a.t[i].data[k] - tb->data[k]) <= 2 * 3e-4 * STEPS);
    }
    for (int64_t k = 0; k < tb->n_elems; k++) {
      if (k >= skip_lo && k < skip_hi) continue;
      double e = (double)a.t[i].data[k] - tb->data[k];
      d += e * e;
      m += (double)tb->data[k] * tb->data[k];
    }
    double r = m > 0 ? sqrt(d / m) : sqrt(d);
    if (getenv("AP_TEST_VERBOSE") && r > 1e-6) print_message("  %s: %.3g\n", a.t[i].name, r);
    worst = fmax(worst, r);
  }
  st_free(&a);
  st_free(&b);
  return worst;
}

typedef struct {
  const char *name, *model, *plan;
} plan_case;

#define LLAMA "tests/data/exec/tiny-llama.json"
#define GPT2 "tests/data/exec/tiny-gpt2.json"
#define MOE "tests/data/exec/tiny-mixtral.json"
#define MOE4 "tests/data/exec/tiny-mixtral-kv4.json" /* 4 KV heads, so that tp 4 splits them */
#define B "\"global_batch_size\":8,\"seq_length\":16,\"precision\":\"fp32\","

/* The one-process references, one per model: the whole batch as one micro-batch. */
static const plan_case refs[] = {
    {"ref-llama", LLAMA, "{" B "\"pipeline\":{\"micro_batch_size\":8},\"optimizer\":{\"zero_stage\":0}}"},
    {"ref-gpt2", GPT2, "{" B "\"pipeline\":{\"micro_batch_size\":8},\"optimizer\":{\"zero_stage\":0}}"},
    {"ref-moe", MOE, "{" B "\"pipeline\":{\"micro_batch_size\":8},\"optimizer\":{\"zero_stage\":0}}"},
    {"ref-moe4", MOE4, "{" B "\"pipeline\":{\"micro_batch_size\":8},\"optimizer\":{\"zero_stage\":0}}"},
};

static const plan_case cases[] = {
    {"accum", LLAMA, "{" B "\"pipeline\":{\"micro_batch_size\":2},\"optimizer\":{\"zero_stage\":0}}"},
    {"dp2", LLAMA, "{" B "\"parallel\":{\"dp\":2},\"pipeline\":{\"micro_batch_size\":2},\"optimizer\":{\"zero_stage\":0}}"},
    {"dp4-zero1", LLAMA, "{" B "\"parallel\":{\"dp\":4},\"pipeline\":{\"micro_batch_size\":1},\"optimizer\":{\"zero_stage\":1}}"},
    {"dp2-zero2", LLAMA, "{" B "\"parallel\":{\"dp\":2},\"pipeline\":{\"micro_batch_size\":4},\"optimizer\":{\"zero_stage\":2}}"},
    {"dp2-zero3", LLAMA, "{" B "\"parallel\":{\"dp\":2},\"pipeline\":{\"micro_batch_size\":2},\"optimizer\":{\"zero_stage\":3}}"},
    {"dp2-full", LLAMA, "{" B "\"parallel\":{\"dp\":2},\"pipeline\":{\"micro_batch_size\":2},\"recompute\":{\"granularity\":\"full\"}}"},
    {"dp2-sel-fused", LLAMA, "{" B "\"parallel\":{\"dp\":2},\"recompute\":{\"granularity\":\"selective\"},\"fused_loss\":true}"},
    {"dp2-op", LLAMA, "{" B "\"parallel\":{\"dp\":2},\"pipeline\":{\"micro_batch_size\":4},\"recompute\":{\"granularity\":\"op\"}}"},
    {"pp2-gpipe", LLAMA, "{" B "\"parallel\":{\"pp\":2},\"pipeline\":{\"schedule\":\"gpipe\",\"micro_batch_size\":2}}"},
    {"pp2-1f1b-uneven", LLAMA, "{" B "\"parallel\":{\"pp\":2},\"pipeline\":{\"schedule\":\"1f1b\",\"micro_batch_size\":1,\"stage_layers\":[1,3]}}"},
    {"pp4-1f1b-empty-first", LLAMA, "{" B "\"parallel\":{\"pp\":4},\"pipeline\":{\"schedule\":\"1f1b\",\"micro_batch_size\":1,\"stage_layers\":[0,2,1,1]}}"},
    {"pp2-interleaved", LLAMA, "{" B "\"parallel\":{\"pp\":2,\"vpp\":2},\"pipeline\":{\"schedule\":\"interleaved-1f1b\",\"micro_batch_size\":1}}"},
    {"pp2-zb-h1", LLAMA, "{" B "\"parallel\":{\"pp\":2},\"pipeline\":{\"schedule\":\"zb-h1\",\"micro_batch_size\":1}}"},
    {"pp4-zb-h1-uneven", LLAMA, "{" B "\"parallel\":{\"pp\":4},\"pipeline\":{\"schedule\":\"zb-h1\",\"micro_batch_size\":2,\"stage_layers\":[1,2,1,0]}}"},
    {"pp2-zb-v", LLAMA, "{" B "\"parallel\":{\"pp\":2,\"vpp\":2},\"pipeline\":{\"schedule\":\"zb-v\",\"micro_batch_size\":1}}"},
    {"gpt2-pp2-zb-v-tp2-sp", GPT2, "{" B "\"parallel\":{\"pp\":2,\"vpp\":2,\"tp\":2},\"sequence_parallel\":true,\"pipeline\":{\"schedule\":\"zb-v\",\"micro_batch_size\":2},\"recompute\":{\"granularity\":\"selective\"}}"},
    {"pp2-dp2-zero1", LLAMA, "{" B "\"parallel\":{\"pp\":2,\"dp\":2},\"pipeline\":{\"micro_batch_size\":1},\"optimizer\":{\"zero_stage\":1}}"},
    {"gpt2-pp2-tied", GPT2, "{" B "\"parallel\":{\"pp\":2},\"pipeline\":{\"schedule\":\"1f1b\",\"micro_batch_size\":2}}"},
    {"gpt2-pp2-dp2-zero3", GPT2, "{" B "\"parallel\":{\"pp\":2,\"dp\":2},\"pipeline\":{\"micro_batch_size\":2},\"optimizer\":{\"zero_stage\":3}}"},
    {"tp2", LLAMA, "{" B "\"parallel\":{\"tp\":2},\"pipeline\":{\"micro_batch_size\":4}}"},
    {"tp2-sp", LLAMA, "{" B "\"parallel\":{\"tp\":2},\"sequence_parallel\":true,\"pipeline\":{\"micro_batch_size\":2}}"},
    {"tp2-sp-op", LLAMA, "{" B "\"parallel\":{\"tp\":2},\"sequence_parallel\":true,\"recompute\":{\"granularity\":\"op\"}}"},
    {"tp2-sp-dp2-zero2", LLAMA, "{" B "\"parallel\":{\"tp\":2,\"dp\":2},\"sequence_parallel\":true,\"pipeline\":{\"micro_batch_size\":2},\"optimizer\":{\"zero_stage\":2}}"},
    {"tp2-pp2-full", LLAMA, "{" B "\"parallel\":{\"tp\":2,\"pp\":2},\"pipeline\":{\"micro_batch_size\":2},\"recompute\":{\"granularity\":\"full\"}}"},
    {"gpt2-tp2", GPT2, "{" B "\"parallel\":{\"tp\":2},\"pipeline\":{\"micro_batch_size\":4}}"},
    {"gpt2-tp2-sp-pp2", GPT2, "{" B "\"parallel\":{\"tp\":2,\"pp\":2},\"sequence_parallel\":true,\"pipeline\":{\"micro_batch_size\":2}}"},
    {"cp2", LLAMA, "{" B "\"parallel\":{\"cp\":2},\"pipeline\":{\"micro_batch_size\":4}}"},
    {"cp4-selective", LLAMA, "{" B "\"parallel\":{\"cp\":4},\"pipeline\":{\"micro_batch_size\":2},\"recompute\":{\"granularity\":\"selective\"}}"},
    {"cp2-dp2-zero1", LLAMA, "{" B "\"parallel\":{\"cp\":2,\"dp\":2},\"pipeline\":{\"micro_batch_size\":2},\"optimizer\":{\"zero_stage\":1}}"},
    {"cp2-pp2-1f1b", LLAMA, "{" B "\"parallel\":{\"cp\":2,\"pp\":2},\"pipeline\":{\"micro_batch_size\":2}}"},
    {"gpt2-cp2-full", GPT2, "{" B "\"parallel\":{\"cp\":2},\"pipeline\":{\"micro_batch_size\":2},\"recompute\":{\"granularity\":\"full\"}}"},
    {"moe-dp2", MOE, "{" B "\"parallel\":{\"dp\":2},\"pipeline\":{\"micro_batch_size\":2},\"optimizer\":{\"zero_stage\":1}}"},
    {"moe-dp2-ep2", MOE, "{" B "\"parallel\":{\"dp\":2,\"ep\":2},\"pipeline\":{\"micro_batch_size\":2},\"optimizer\":{\"zero_stage\":0}}"},
    {"moe-dp4-ep2-zero1", MOE, "{" B "\"parallel\":{\"dp\":4,\"ep\":2},\"pipeline\":{\"micro_batch_size\":1},\"optimizer\":{\"zero_stage\":1}}"},
    {"moe-dp4-ep4-full", MOE, "{" B "\"parallel\":{\"dp\":4,\"ep\":4},\"pipeline\":{\"micro_batch_size\":2},\"recompute\":{\"granularity\":\"full\"}}"},
    {"moe-pp2-dp2-ep2-zb-h1", MOE, "{" B "\"parallel\":{\"pp\":2,\"dp\":2,\"ep\":2},\"pipeline\":{\"schedule\":\"zb-h1\",\"micro_batch_size\":1}}"},
    {"moe-tp2-sp", MOE, "{" B "\"parallel\":{\"tp\":2},\"sequence_parallel\":true,\"pipeline\":{\"micro_batch_size\":2}}"},
    {"moe-tp2-sp-ep2-op", MOE, "{" B "\"parallel\":{\"tp\":2,\"dp\":2,\"ep\":2},\"sequence_parallel\":true,\"recompute\":{\"granularity\":\"op\"}}"},
    {"moe-pp2", MOE, "{" B "\"parallel\":{\"pp\":2},\"pipeline\":{\"micro_batch_size\":2}}"},
    /* context parallelism with tensor parallelism and on MoE; expert tensor parallelism 1 under tp 2 */
    {"cp2-tp2-sp", LLAMA, "{" B "\"parallel\":{\"cp\":2,\"tp\":2},\"sequence_parallel\":true,\"pipeline\":{\"micro_batch_size\":2}}"},
    {"cp2-tp2", LLAMA, "{" B "\"parallel\":{\"cp\":2,\"tp\":2},\"pipeline\":{\"micro_batch_size\":4},\"recompute\":{\"granularity\":\"selective\"}}"},
    {"gpt2-cp2-tp2-sp", GPT2, "{" B "\"parallel\":{\"cp\":2,\"tp\":2},\"sequence_parallel\":true,\"pipeline\":{\"micro_batch_size\":4}}"},
    {"moe-cp2-ep2", MOE, "{" B "\"parallel\":{\"cp\":2,\"ep\":2},\"pipeline\":{\"micro_batch_size\":4}}"},
    {"moe-cp2-tp2-sp", MOE, "{" B "\"parallel\":{\"cp\":2,\"tp\":2},\"sequence_parallel\":true,\"pipeline\":{\"micro_batch_size\":4}}"},
    {"moe-tp2-etp1-ep2", MOE, "{" B "\"parallel\":{\"tp\":2,\"etp\":1,\"ep\":2},\"sequence_parallel\":true,\"pipeline\":{\"micro_batch_size\":4}}"},
    /* 1 < etp < tp: two etp groups of 2 in the tp group of 4, with ep 2 across them, and with ep 1 (edp 2)
     * under op recompute (restore gathers the etp group's rows again) */
    {"moe4-tp4-etp2-ep2", MOE4, "{" B "\"parallel\":{\"tp\":4,\"etp\":2,\"ep\":2},\"sequence_parallel\":true,\"pipeline\":{\"micro_batch_size\":4}}"},
    {"moe4-tp4-etp2-op", MOE4, "{" B "\"parallel\":{\"tp\":4,\"etp\":2},\"sequence_parallel\":true,\"pipeline\":{\"micro_batch_size\":8},\"recompute\":{\"granularity\":\"op\"}}"},
    {"moe-dp2-tp2-etp1-ep4", MOE, "{" B "\"parallel\":{\"dp\":2,\"tp\":2,\"etp\":1,\"ep\":4},\"sequence_parallel\":true,\"pipeline\":{\"micro_batch_size\":2},\"recompute\":{\"granularity\":\"full\"}}"},
};

static void test_plans_equal_one_process(void **s) {
  (void)s;
  run_out ref[AP_COUNT(refs)];
  for (size_t i = 0; i < AP_COUNT(refs); i++) {
    if (run_plan(refs[i].model, refs[i].name, refs[i].plan, NULL, &ref[i])) fail_msg("%s did not run", refs[i].name);
    assert_int_equal(ref[i].n_steps, STEPS);
  }
  int bad = 0;
  for (size_t i = 0; i < AP_COUNT(cases); i++) {
    size_t r = 0;
    while (strcmp(refs[r].model, cases[i].model) != 0) r++;
    run_out o;
    int rc = run_plan(cases[i].model, cases[i].name, cases[i].plan, NULL, &o);
    if (rc) {
      print_message("%s: exit %d\n", cases[i].name, rc);
      bad++;
      continue;
    }
    double worst_loss = 0;
    for (int t = 0; t < STEPS; t++) worst_loss = fmax(worst_loss, fabs(o.loss[t] - ref[r].loss[t]) / fabs(ref[r].loss[t]));
    double wd = weight_diff(o.weights, ref[r].weights);
    bool ok = o.n_steps == STEPS && worst_loss <= 1e-5 && wd <= 1e-5;
    print_message("%-22s loss rel. diff %.2g, weights %.2g%s\n", cases[i].name, worst_loss, wd, ok ? "" : "  <- FAIL");
    bad += !ok;
  }
  assert_int_equal(bad, 0);
}

/* Training moves the loss: the same plan with lr 0 keeps the step-1 weights, with lr 3e-4 it does not. */
static void test_training_changes_weights(void **s) {
  (void)s;
  run_out a, b;
  const char *plan = "{" B "\"pipeline\":{\"micro_batch_size\":8}}";
  assert_int_equal(run_plan(LLAMA, "lr0", plan, "--lr 0 --weight-decay 0", &a), 0);
  assert_int_equal(run_plan(LLAMA, "lr1", plan, "--lr 1e-2", &b), 0);
  for (int t = 1; t < STEPS; t++) assert_true(a.loss[t] != b.loss[t]);
  assert_true(weight_diff(a.weights, b.weights) > 1e-3);
}

static void test_failing_rank_ends_job(void **s) {
  (void)s;
  char cmd[512], errp[128];
  snprintf(errp, sizeof errp, "%s/fail.err", tmpdir);
  snprintf(cmd, sizeof cmd, "%s run --model " LLAMA " --plan %s/dp2.json --steps 2 --seed 777123 --fail-rank 1 >/dev/null 2>%s",
           bin(), tmpdir, errp);
  int st = system(cmd);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) != 0);
  FILE *f = fopen(errp, "r");
  assert_non_null(f);
  char line[512] = "";
  assert_non_null(fgets(line, sizeof line, f));
  fclose(f);
  assert_non_null(strstr(line, "rank 1: failing on purpose"));
  /* no rank of that job is left: no process has the job's seed on its command line */
  st = system("for p in /proc/[0-9]*; do { tr '\\0' ' ' <$p/cmdline | grep -q 'seed 77712[3] --fail' && "
              "! grep -q '^State:.*Z' $p/status && exit 1; } 2>/dev/null; done; exit 0");
  assert_int_equal(WEXITSTATUS(st), 0);
}

/* A rank killed by a signal (as the kernel's out-of-memory killer ends one) ends the job with one line that
 * names the rank and the signal, not OpenMPI's banner (issue 19, class 9): the test starts a long run, kills
 * its rank 1 (the process whose environment says OMPI_COMM_WORLD_RANK=1 and whose command line carries the
 * run's seed) with SIGKILL, and reads the line. */
static void test_killed_rank_named(void **s) {
  (void)s;
  char cmd[2048], errp[128];
  snprintf(errp, sizeof errp, "%s/killed.err", tmpdir);
  snprintf(cmd, sizeof cmd,
           "%s run --model " LLAMA " --plan %s/dp2.json --steps 100000 --seed 777125 >/dev/null 2>%s & run=$!; "
           "for i in $(seq 1 600); do for p in /proc/[0-9]*; do "
           "tr '\\0' '\\n' <$p/cmdline 2>/dev/null | grep -qx 777125 || continue; "
           "tr '\\0' '\\n' <$p/environ 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 || continue; "
           "kill -9 ${p#/proc/} && break 2; done; sleep 0.05; done; wait $run",
           bin(), tmpdir, errp);
  int st = system(cmd);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 2);
  FILE *f = fopen(errp, "r");
  assert_non_null(f);
  char line[512] = "", more[512];
  assert_non_null(fgets(line, sizeof line, f));
  bool one_line = fgets(more, sizeof more, f) == NULL;
  fclose(f);
  if (!strstr(line, "rank 1 was killed by signal 9")) fail_msg("the line names neither the rank nor the signal: %s", line);
  assert_true(one_line);
}

/* Initial weights that are not finite are refused before the launch, naming the file, the tensor and the
 * element (issue 19, class 9; before, the first step failed with "out of memory or a schedule that consumes
 * before it produces"). */
static void test_nonfinite_init_named(void **s) {
  (void)s;
  run_out o;
  const char *plan = "{" B "\"pipeline\":{\"micro_batch_size\":8}}";
  assert_int_equal(run_plan(LLAMA, "init-src", plan, NULL, &o), 0);
  const float bad[] = {NAN, INFINITY};
  for (size_t k = 0; k < AP_COUNT(bad); k++) {
    st_file f;
    assert_int_equal(st_read(NULL, o.weights, &f), AP_OK);
    st_out *out = calloc((size_t)f.n, sizeof *out);
    assert_non_null(out);
    int victim = -1;
    for (int64_t i = 0; i < f.n; i++) {
      out[i] = (st_out){f.t[i].name, f.t[i].n_dims, {0}, f.t[i].data};
      memcpy(out[i].shape, f.t[i].shape, sizeof out[i].shape);
      if (victim < 0 && strstr(f.t[i].name, "layers.1.mlp.up_proj.weight")) victim = (int)i;
    }
    assert_true(victim >= 0);
    f.t[victim].data[5] = bad[k];
    char path[160], cmd[700], errp[180], line[512] = "";
    snprintf(path, sizeof path, "%s/nonfinite%zu.safetensors", tmpdir, k);
    assert_int_equal(st_write(NULL, path, out, f.n), AP_OK);
    char want[200];
    snprintf(want, sizeof want, "tensor \"%s\": element 5 of %lld is %s", f.t[victim].name, (long long)f.t[victim].n_elems,
             k == 0 ? "NaN" : "+Inf");
    free(out);
    st_free(&f);
    snprintf(errp, sizeof errp, "%s.err", path);
    snprintf(cmd, sizeof cmd, "%s run --model " LLAMA " --plan %s/init-src.json --init %s >/dev/null 2>%s", bin(), tmpdir,
             path, errp);
    int st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    FILE *ef = fopen(errp, "r");
    assert_non_null(ef);
    if (!fgets(line, sizeof line, ef)) line[0] = '\0';
    fclose(ef);
    if (!strstr(line, want) || !strstr(line, path)) fail_msg("\"%s\" lacks \"%s\" or the file", line, want);
  }
}

static void test_refused_plans(void **s) {
  (void)s;
  struct {
    const char *model, *plan, *want;
  } bad[] = {
      {MOE, "{" B "\"parallel\":{\"tp\":2}}", "sequence_parallel"},
      {LLAMA, "{" B "\"parallel\":{\"dp\":3}}", "global_batch_size"},
      {GPT2, "{\"global_batch_size\":1,\"seq_length\":128}", "seq_length"},
      {"deepseek-v3", "{}", "model_type"},
  };
  for (size_t i = 0; i < AP_COUNT(bad); i++) {
    run_out o;
    char name[32];
    snprintf(name, sizeof name, "bad%zu", i);
    assert_int_equal(run_plan(bad[i].model, name, bad[i].plan, NULL, &o), 2);
    char errp[160], line[512] = "";
    snprintf(errp, sizeof errp, "%s/%s.out.err", tmpdir, name);
    FILE *f = fopen(errp, "r");
    assert_non_null(f);
    if (!fgets(line, sizeof line, f)) line[0] = '\0';
    fclose(f);
    if (!strstr(line, bad[i].want)) fail_msg("case %zu: \"%s\" lacks \"%s\"", i, line, bad[i].want);
  }
}

/* `autopar profile --quick` on 2 ranks writes a cluster of 2 CPU devices whose inline profile the cost model
 * reads (its fp32 GEMM table), that `plan` accepts; a broken inline profile is refused naming the field. */
static void test_profile_cluster(void **s) {
  (void)s;
  char path[160], cmd[1400];
  snprintf(path, sizeof path, "%s/cpu.json", tmpdir);
  snprintf(cmd, sizeof cmd, "%s profile --ranks 2 --quick -o %s >/dev/null 2>%s.err", bin(), path, path);
  assert_int_equal(system(cmd), 0);
  ap_ctx *ctx = ap_ctx_new();
  ap_cluster *cl = NULL;
  assert_int_equal(ap_cluster_load(ctx, path, &cl), AP_OK);
  assert_int_equal(cl->c.n_devices, 2);
  const hw_device *d = &cl->c.groups[0].device;
  assert_string_equal(d->name, "cpu-rank");
  assert_true(d->profile_key[0] != '\0' && d->peak_flop_per_s[HW_DTYPE_FP32] > 0);
  arena *a = arena_new();
  compute_model cm;
  assert_int_equal(compute_model_init(ctx, a, d, NULL, &cm), AP_OK);
  assert_int_equal(cm.n_points[HW_DTYPE_FP32], 15); /* --quick: the five GEMMs of one layer shape, 3 layouts each */
  assert_true(cm.exec && cm.exec->present && cm.exec->n_gemm == 15 && cm.exec->attn_fwd_s > 0 && cm.exec->base_rss_bytes > 0);
  assert_non_null(strstr(cm.profile_source, "autopar profile"));
  arena_free(a);
  ap_cluster_free(cl);
  snprintf(cmd, sizeof cmd, "%s plan --model tests/data/exec/tiny-llama.json --cluster %s --gbs 8 --seq 16 --fix "
           "precision=fp32 >/dev/null 2>&1", bin(), path);
  assert_int_equal(system(cmd), 0);
  /* Its plans are the executor's unless told otherwise (issue 20 item 5): stack autopar and fp32, priced by
   * the executor's model from the profile; a serial plan takes one of the two ranks and says so. */
  static const struct {
    const char *args, *want[3];
  } says[] = {
      {"plan --model " LLAMA " --gbs 8 --seq 16 --top 1",
       {"stack: autopar (the cluster's devices are autopar profile's CPU ranks", "| fp32", "the reference executor's own cost model"}},
      {"estimate --model " LLAMA " --gbs 8 --seq 16 --dp 1",
       {"the plan takes 1 of the cluster's 2 ranks: it runs on the first 1", "stack    autopar", "| fp32"}},
  };
  for (size_t i = 0; i < sizeof says / sizeof says[0]; i++) {
    char out[200], text[8192];
    snprintf(out, sizeof out, "%s/says%zu.txt", tmpdir, i);
    snprintf(cmd, sizeof cmd, "%s %s --cluster %s >%s 2>&1", bin(), says[i].args, path, out);
    assert_int_equal(system(cmd), 0);
    FILE *tf = fopen(out, "r");
    assert_non_null(tf);
    size_t n = fread(text, 1, sizeof text - 1, tf);
    fclose(tf);
    text[n] = '\0';
    for (int k = 0; k < 3; k++)
      if (!strstr(text, says[i].want[k])) fail_msg("%s lacks \"%s\":\n%s", says[i].args, says[i].want[k], text);
  }
  /* run --record appends a runs.csv row that validate --cluster predicts (peak memory as RSS) */
  char plan_path[160], csv[160];
  snprintf(plan_path, sizeof plan_path, "%s/rec.json", tmpdir);
  snprintf(csv, sizeof csv, "%s/runs.csv", tmpdir);
  FILE *pf = fopen(plan_path, "w");
  assert_non_null(pf);
  fputs("{" B "\"parallel\":{\"dp\":2},\"pipeline\":{\"micro_batch_size\":2}}", pf);
  fclose(pf);
  snprintf(cmd, sizeof cmd, "%s run --model " LLAMA " --plan %s --steps 2 --record %s >/dev/null 2>&1 && %s validate %s "
           "--cluster %s --json >%s.out 2>&1", bin(), plan_path, csv, bin(), csv, path, csv);
  assert_int_equal(system(cmd), 0);
  char out_path[180];
  snprintf(out_path, sizeof out_path, "%s.out", csv);
  json_error_t e;
  json_t *v = json_load_file(out_path, 0, &e);
  assert_non_null(v);
  json_t *row = json_array_get(json_object_get(v, "rows"), 0);
  assert_non_null(row);
  assert_null(json_object_get(row, "error"));
  assert_string_equal(json_string_value(json_object_get(row, "mem_convention")), "rss");
  json_decref(v);
  /* a cluster of another size makes the row an error naming num_gpus */
  snprintf(cmd, sizeof cmd, "%s validate %s --cluster h100:8 --json >%s.out 2>&1", bin(), csv, csv);
  assert_int_equal(system(cmd), 0);
  v = json_load_file(out_path, 0, &e);
  assert_non_null(v);
  row = json_array_get(json_object_get(v, "rows"), 0);
  const char *err = json_string_value(json_object_get(row, "error"));
  assert_true(err && strstr(err, "num_gpus = 2"));
  json_decref(v);
  char bad[160];
  snprintf(bad, sizeof bad, "%s/bad.json", tmpdir);
  FILE *f = fopen(bad, "w");
  assert_non_null(f);
  fputs("{\"device\": {\"name\": \"x\", \"peak_flop_per_s\": {\"fp32\": 1e10}, \"mem_bytes\": 1000, \"mem_bw_Bps\": 1e9, "
        "\"profile\": {\"format\": \"other/1\", \"gemm\": []}}, \"devices_per_node\": 2, \"levels\": [{\"name\": \"shm\", "
        "\"bw_Bps\": 1e9, \"latency_s\": 1e-6}]}", f);
  fclose(f);
  assert_int_not_equal(ap_cluster_load(ctx, bad, &cl), AP_OK);
  assert_non_null(strstr(ap_ctx_error(ctx), "profile.format"));
  ap_ctx_free(ctx);
}

static int setup(void **s) {
  (void)s;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/ap_test_exec_run.XXXXXX");
  return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **s) {
  (void)s;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plans_equal_one_process),
      cmocka_unit_test(test_training_changes_weights),
      cmocka_unit_test(test_failing_rank_ends_job),
      cmocka_unit_test(test_killed_rank_named),
      cmocka_unit_test(test_nonfinite_init_named),
      cmocka_unit_test(test_refused_plans),
      cmocka_unit_test(test_profile_cluster),
  };
  return cmocka_run_group_tests_name("exec_run", tests, setup, teardown);
}
