/* Tests of `autopar validate` and its parts: the RFC 4180 CSV reader (one line per input and the fields or
 * the file:line:col message it must give), the typed field getters, plan completion (every result valid,
 * stated fields kept, the choice checked against brute force over the same candidates) and a tiny runs
 * table validated end to end through ap_validate's JSON. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "testutil.h"

#include "core/core.h"
#include "cost/cost.h"
#include "model/model.h"
#include "report/runs_csv.h"
#include "report/validate.h"
#include "search/recipe/complete.h"

/* ---- CSV reader ---- */

/* A good input and what it must read as: the rows joined as "f1|f2;f1|f2" (fields by '|', rows by ';'), and
 * the line on which the last row starts. */
static const struct {
  const char *name, *text, *want;
  int64_t last_line;
} csv_good[] = {
    {"plain", "a,b\n1,2\n3,4\n", "1|2;3|4", 3},
    {"no final newline", "a,b\n1,2", "1|2", 2},
    {"CRLF", "a,b\r\n1,2\r\n3,4\r\n", "1|2;3|4", 3},
    {"quoted comma", "a,b\n\"x,y\",2\n", "x,y|2", 2},
    {"doubled quotes", "a,b\n\"say \"\"hi\"\"\",2\n", "say \"hi\"|2", 2},
    {"embedded LF", "a,b\n\"l1\nl2\",2\n3,4\n", "l1\nl2|2;3|4", 4},
    {"embedded CRLF kept", "a,b\r\n\"l1\r\nl2\",2\r\n", "l1\r\nl2|2", 2},
    {"empty fields", "a,b,c\n,,\n1,,3\n", "||;1||3", 3},
    {"empty quoted", "a,b\n\"\",2\n", "|2", 2},
    {"blank lines skipped", "a,b\n\n1,2\n\r\n3,4\n\n", "1|2;3|4", 5},
    {"byte-order mark", "\xEF\xBB\xBF" "a,b\n1,2\n", "1|2", 2},
    {"header only", "a,b\n", "", 0},
    {"blanks kept in fields", "a,b\n 1 , x y \n", " 1 | x y ", 2},
};

/* A bad input and the start of the message it must give (file "t.csv"). */
static const struct {
  const char *name, *text, *want;
} csv_bad[] = {
    {"quote inside unquoted", "a,b\n1,x\"y\n", "t.csv:2:4: expected a field without quotes"},
    {"text after closing quote", "a,b\n\"x\"y,2\n", "t.csv:2:4: expected ',' or the end of the line after a closing quote, got 'y'"},
    {"unterminated", "a,b\n1,2\n\"abc,2\n", "t.csv:3:1: unterminated quoted field"},
    {"too many fields", "a,b\n1,2,3\n", "t.csv:2:5: expected 2 fields as in the header, got 3"},
    {"too few fields", "a,b,c\n1,2\n", "t.csv:2:3: expected 3 fields as in the header, got 2"},
    {"line after embedded newline", "a,b\n\"x\ny\",1\n1,\"2\"z\n", "t.csv:4:6: expected ','"},
    {"duplicate column", "a,b,a\n1,2,3\n", "t.csv:1:5: expected distinct column names, got \"a\" again"},
    {"empty column name", "a,,c\n", "t.csv:1:3: expected a column name"},
    {"empty file", "", "t.csv:1:1: expected a header line"},
    {"only blank lines", "\n\r\n", "t.csv:3:1: expected a header line"},
};

static void join_rows(const runs_table *t, char *out, size_t n) {
  size_t len = 0;
  out[0] = '\0';
  for (int64_t i = 0; i < t->n_rows; i++)
    for (int k = 0; k < t->n_cols; k++)
      len += (size_t)snprintf(out + len, n - len, "%s%s", k ? "|" : (i ? ";" : ""), t->rows[i].fields[k].text);
}

static void test_csv_good(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  for (size_t i = 0; i < sizeof csv_good / sizeof csv_good[0]; i++) {
    runs_table *t = NULL;
    ap_status st = runs_parse(ctx, "t.csv", csv_good[i].text, strlen(csv_good[i].text), &t);
    if (st) fail_msg("%s: %s", csv_good[i].name, ap_ctx_error(ctx));
    char got[256];
    join_rows(t, got, sizeof got);
    if (strcmp(got, csv_good[i].want) != 0) fail_msg("%s: read \"%s\", want \"%s\"", csv_good[i].name, got, csv_good[i].want);
    int64_t last = t->n_rows ? t->rows[t->n_rows - 1].line : 0;
    if (last != csv_good[i].last_line)
      fail_msg("%s: last row on line %lld, want %lld", csv_good[i].name, (long long)last, (long long)csv_good[i].last_line);
    runs_free(t);
  }
  ap_ctx_free(ctx);
}

static void test_csv_bad(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  for (size_t i = 0; i < sizeof csv_bad / sizeof csv_bad[0]; i++) {
    runs_table *t = NULL;
    ap_status st = runs_parse(ctx, "t.csv", csv_bad[i].text, strlen(csv_bad[i].text), &t);
    if (st != AP_PARSE) fail_msg("%s: status %d, want AP_PARSE", csv_bad[i].name, (int)st);
    if (t) fail_msg("%s: table returned on failure", csv_bad[i].name);
    const char *msg = ap_ctx_error(ctx);
    if (strncmp(msg, csv_bad[i].want, strlen(csv_bad[i].want)) != 0)
      fail_msg("%s: message \"%s\", want it to start \"%s\"", csv_bad[i].name, msg, csv_bad[i].want);
    if (strchr(msg, '\n')) fail_msg("%s: message has a newline", csv_bad[i].name);
  }
  ap_ctx_free(ctx);
}

/* The typed getters name file:line:col and the column; absent or empty optional fields are not errors. */
static void test_csv_getters(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  const char *text = "id,n,x,kind\nr1,8,2.5,ok\nr2,eight,1e400,meh\nr3,8.0,,\n";
  runs_table *t = NULL;
  assert_int_equal(runs_parse(ctx, "t.csv", text, strlen(text), &t), AP_OK);
  int64_t n = 0;
  double x = 0;
  int k = -1;
  bool found = true;
  static const char *const kinds[] = {"ok", "oom"};
  assert_int_equal(runs_i64(ctx, t, &t->rows[0], "n", true, 1, INT64_MAX, &n, &found), AP_OK);
  assert_int_equal(n, 8);
  assert_true(found);
  assert_int_equal(runs_f64(ctx, t, &t->rows[0], "x", true, 0, INFINITY, &x, NULL), AP_OK);
  assert_rel_close(x, 2.5, 0);
  assert_int_equal(runs_enum(ctx, t, &t->rows[0], "kind", true, kinds, 2, &k, NULL), AP_OK);
  assert_int_equal(k, 0);
  assert_int_equal(runs_i64(ctx, t, &t->rows[1], "n", true, 1, INT64_MAX, &n, NULL), AP_INVALID);
  assert_error_contains(ctx, "t.csv:3:4: n: expected an integer >= 1, got \"eight\"");
  assert_int_equal(runs_f64(ctx, t, &t->rows[1], "x", true, 0, INFINITY, &x, NULL), AP_INVALID);
  assert_error_contains(ctx, "t.csv:3:10: x: expected a number >= 0");
  assert_int_equal(runs_enum(ctx, t, &t->rows[1], "kind", true, kinds, 2, &k, NULL), AP_INVALID);
  assert_error_contains(ctx, "t.csv:3:16: kind: expected one of ok, oom, got \"meh\"");
  /* "8.0" is an integer; an empty optional field leaves the value alone; an empty required one fails. */
  assert_int_equal(runs_i64(ctx, t, &t->rows[2], "n", true, 1, INT64_MAX, &n, NULL), AP_OK);
  assert_int_equal(n, 8);
  x = 7;
  assert_int_equal(runs_f64(ctx, t, &t->rows[2], "x", false, 0, INFINITY, &x, &found), AP_OK);
  assert_false(found);
  assert_rel_close(x, 7, 0);
  assert_int_equal(runs_f64(ctx, t, &t->rows[2], "x", true, 0, INFINITY, &x, NULL), AP_INVALID);
  assert_error_contains(ctx, "t.csv:4:8: x: expected a number >= 0, got an empty field");
  assert_int_equal(runs_i64(ctx, t, &t->rows[2], "nope", true, 1, 9, &n, NULL), AP_INVALID);
  assert_error_contains(ctx, "t.csv:4:1: nope: expected an integer in [1, 9], but the file has no such column");
  /* The runs.csv format's required columns. */
  assert_int_equal(runs_check_columns(ctx, t), AP_PARSE);
  assert_error_contains(ctx, "t.csv:1:1: expected a column named \"gpu\"");
  runs_free(t);
  ap_ctx_free(ctx);
}

/* ---- Plan completion ---- */

typedef struct {
  ap_model *model;
  ap_cluster *cluster;
  cost_env *env;
} fixture;

static void fixture_load(fixture *f, const char *model, const char *cluster) {
  ap_ctx *ctx = ap_ctx_new();
  if (ap_model_load(ctx, model, &f->model) || ap_cluster_load(ctx, cluster, &f->cluster) ||
      cost_env_new(ctx, f->model, f->cluster, NULL, &f->env))
    fail_msg("%s on %s: %s", model, cluster, ap_ctx_error(ctx));
  ap_ctx_free(ctx);
}

static void fixture_free(fixture *f) {
  cost_env_free(f->env);
  ap_cluster_free(f->cluster);
  ap_model_free(f->model);
}

/* One completion case: a model, a cluster, the stated fields as "key=value" pairs and the stated mask. */
static const struct {
  const char *model, *cluster;
  int64_t tp, pp, dp, ep, mbs, vpp; /* 0 = not stated */
  int zero;                         /* -1 = not stated */
  int rc;                           /* -1 = not stated */
} complete_cases[] = {
    {"llama-3-8b", "h100:16", 0, 0, 0, 0, 0, 0, -1, -1},
    {"llama-3-8b", "h100:16", 2, 0, 0, 0, 0, 0, -1, -1},
    {"llama-3-8b", "h100:16", 0, 2, 0, 0, 0, 0, -1, -1},
    {"llama-3-8b", "h100:16", 0, 0, 4, 0, 2, 0, 3, -1},
    {"llama-3-8b", "h100:16", 1, 1, 16, 0, 1, 1, 1, 3},
    {"llama-3-70b", "h100:64", 0, 0, 0, 0, 0, 0, -1, -1},
    {"llama-3-70b", "h100:64", 8, 4, 0, 0, 1, 0, -1, -1},
    {"mixtral-8x7b", "h100:32", 0, 0, 0, 0, 0, 0, -1, -1},
    {"mixtral-8x7b", "h100:32", 4, 1, 8, 8, 0, 0, -1, -1},
    {"gpt2", "a100:8", 0, 0, 0, 0, 0, 0, -1, -1},
};

static void case_partial(size_t i, plan *p, unsigned *stated) {
  plan_defaults(p);
  p->global_batch_size = 128;
  p->seq_length = 4096;
  *stated = 0;
  if (complete_cases[i].tp) p->tp = complete_cases[i].tp, *stated |= PLAN_F(TP);
  if (complete_cases[i].pp) p->pp = complete_cases[i].pp, *stated |= PLAN_F(PP);
  if (complete_cases[i].dp) p->dp = complete_cases[i].dp, *stated |= PLAN_F(DP);
  if (complete_cases[i].ep) p->ep = complete_cases[i].ep, *stated |= PLAN_F(EP);
  if (complete_cases[i].mbs) p->micro_batch_size = complete_cases[i].mbs, *stated |= PLAN_F(MICRO_BATCH_SIZE);
  if (complete_cases[i].vpp) p->vpp = complete_cases[i].vpp, *stated |= PLAN_F(VPP);
  if (complete_cases[i].zero >= 0) p->zero_stage = complete_cases[i].zero, *stated |= PLAN_F(ZERO_STAGE);
  if (complete_cases[i].rc >= 0) p->recompute = (plan_recompute)complete_cases[i].rc, *stated |= PLAN_F(RECOMPUTE);
}

/* Expert tensor parallelism (issue 10): Megatron defaults etp to tp, Megatron-Bridge's MoE recipes use 1, and
 * where etp = tp leaves no room (tp 8 with ep 8 on 16 devices: etp·ep must divide 16) only etp 1 runs. The completion
 * tries both when etp is not stated: it completes that case with etp 1, and wherever both run its choice is at
 * least as fast as the better of the two completions with etp stated. */
static void test_complete_tries_etp_1(void **state) {
  (void)state;
  static const struct {
    const char *cluster;
    int64_t tp, ep;
  } cases[] = {{"h100:16", 8, 8}, {"h100:32", 4, 8}, {"h100:16", 2, 8}};
  ap_ctx *ctx = ap_ctx_new();
  cost_result *cr = malloc(sizeof *cr), *c1 = malloc(sizeof *c1);
  assert_non_null(cr);
  assert_non_null(c1);
  for (size_t i = 0; i < AP_COUNT(cases); i++) {
    fixture f = {0};
    fixture_load(&f, "mixtral-8x7b", cases[i].cluster);
    plan partial, best, fixed;
    plan_defaults(&partial);
    partial.global_batch_size = 64;
    partial.seq_length = 4096;
    partial.tp = cases[i].tp;
    partial.ep = cases[i].ep;
    unsigned stated = PLAN_F(TP) | PLAN_F(EP);
    if (complete_plan(ctx, f.env, &partial, stated, NULL, &best, cr, NULL))
      fail_msg("%s tp %lld ep %lld: %s", cases[i].cluster, (long long)cases[i].tp, (long long)cases[i].ep, ap_ctx_error(ctx));
    double best_other = 0;
    for (int64_t etp = 0; etp <= 1; etp++) { /* etp 0 = tp */
      plan q = partial;
      q.etp = etp;
      ap_ctx scratch = {0};
      ap_status qs = complete_plan(&scratch, f.env, &q, stated | PLAN_F(ETP), NULL, &fixed, c1, NULL);
      if (qs == AP_OK && c1->fits) {
        assert_int_equal(fixed.etp, etp); /* stated: kept */
        best_other = c1->tokens_per_s_per_device > best_other ? c1->tokens_per_s_per_device : best_other;
      }
    }
    assert_true(best_other > 0);
    if (cr->tokens_per_s_per_device < best_other * (1 - 1e-9))
      fail_msg("%s: completion %.6g tokens/s, with etp stated %.6g", cases[i].cluster, cr->tokens_per_s_per_device,
               best_other);
    if (i == 0) assert_int_equal(plan_etp(&best), 1);
    fixture_free(&f);
  }
  free(cr);
  free(c1);
  ap_ctx_free(ctx);
}

/* The completion reports progress and honours cancellation through the driver's ticker (search/space.h): a
 * callback that asks to stop ends it with AP_CANCELLED, and one that lets it run hears fractions in [0, 1]. */
typedef struct {
  int calls;
  bool stop, in_range;
} progress_probe;

static int probe_progress(void *user, double fraction, const char *what) {
  progress_probe *pr = user;
  pr->calls++;
  pr->in_range &= fraction >= 0 && fraction <= 1 && what && strstr(what, "completion");
  return pr->stop;
}

static void test_complete_progress_and_cancel(void **state) {
  (void)state;
  fixture f = {0};
  fixture_load(&f, "mixtral-8x7b", "h100:32");
  cost_result *cr = malloc(sizeof *cr);
  assert_non_null(cr);
  plan partial, best;
  plan_defaults(&partial);
  partial.global_batch_size = 128;
  partial.seq_length = 4096;
  for (int stop = 0; stop <= 1; stop++) {
    ap_ctx *ctx = ap_ctx_new();
    progress_probe pr = {0, stop == 1, true};
    ap_ctx_set_progress(ctx, probe_progress, &pr);
    ap_status st = complete_plan(ctx, f.env, &partial, 0, NULL, &best, cr, NULL);
    assert_true(pr.calls >= 1);
    assert_true(pr.in_range);
    if (stop) {
      assert_int_equal(st, AP_CANCELLED);
      assert_int_equal(pr.calls, 1); /* the first report is due at once, and it stops */
    } else {
      assert_int_equal(st, AP_OK);
    }
    ap_ctx_free(ctx);
  }
  free(cr);
  fixture_free(&f);
}

static void test_complete_valid_and_honours_stated(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  cost_result *cr = malloc(sizeof *cr);
  for (size_t i = 0; i < sizeof complete_cases / sizeof complete_cases[0]; i++) {
    fixture f = {0};
    fixture_load(&f, complete_cases[i].model, complete_cases[i].cluster);
    plan partial, best;
    unsigned stated;
    case_partial(i, &partial, &stated);
    complete_stats cs;
    if (complete_plan(ctx, f.env, &partial, stated, NULL, &best, cr, &cs))
      fail_msg("case %zu (%s): %s", i, complete_cases[i].model, ap_ctx_error(ctx));
    const graph *g = model_graph(f.model);
    if (plan_validate(ctx, &best, g, ap_cluster_n_devices(f.cluster), "plan"))
      fail_msg("case %zu: invalid result: %s", i, ap_ctx_error(ctx));
    assert_true(cs.n_evaluated >= 1);
    assert_true(cs.n_valid >= 1);
    if (cs.truncated) fail_msg("case %zu: truncated after %lld evaluations", i, (long long)cs.n_evaluated);
    if (stated & PLAN_F(TP)) assert_int_equal(best.tp, partial.tp);
    if (stated & PLAN_F(PP)) assert_int_equal(best.pp, partial.pp);
    if (stated & PLAN_F(DP)) assert_int_equal(best.dp, partial.dp);
    if (stated & PLAN_F(EP)) assert_int_equal(best.ep, partial.ep);
    if (stated & PLAN_F(MICRO_BATCH_SIZE)) assert_int_equal(best.micro_batch_size, partial.micro_batch_size);
    if (stated & PLAN_F(VPP)) assert_int_equal(best.vpp, partial.vpp);
    if (stated & PLAN_F(ZERO_STAGE)) assert_int_equal(best.zero_stage, partial.zero_stage);
    if (stated & PLAN_F(RECOMPUTE)) assert_int_equal(best.recompute, partial.recompute);
    assert_int_equal(best.global_batch_size, 128);
    assert_int_equal(best.seq_length, 4096);
    /* The returned cost is the cost of the returned plan. */
    cost_result *again = malloc(sizeof *again);
    assert_int_equal(cost_estimate(ctx, f.env, &best, again), AP_OK);
    assert_rel_close(again->tokens_per_s_per_device, cr->tokens_per_s_per_device, 1e-12);
    free(again);
    fixture_free(&f);
  }
  free(cr);
  ap_ctx_free(ctx);
}

/* With the mesh stated, the choice of micro-batch, ZeRO stage and recompute equals brute force over the same
 * candidates (none, selective, full of the first k layers of each chunk for every k; the recompute early exit
 * and the bisection over k must not lose the best plan), and repeated runs agree. */
static void test_complete_matches_brute_force(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  fixture f = {0};
  fixture_load(&f, "llama-3-70b", "h100:64");
  plan partial, best, again, p;
  plan_defaults(&partial);
  partial.tp = 8, partial.pp = 4, partial.dp = 2, partial.global_batch_size = 64, partial.seq_length = 4096;
  unsigned stated = PLAN_F(TP) | PLAN_F(PP) | PLAN_F(DP) | PLAN_F(VPP) | PLAN_F(SEQUENCE_PARALLEL);
  partial.sequence_parallel = true;
  partial.tp_comm_overlap = true; /* completion's rule: on with sequence parallelism and tp > 1 */
  cost_result *cr = malloc(sizeof *cr), *c2 = malloc(sizeof *c2);
  assert_int_equal(complete_plan(ctx, f.env, &partial, stated, NULL, &best, cr, NULL), AP_OK);
  assert_int_equal(complete_plan(ctx, f.env, &partial, stated, NULL, &again, c2, NULL), AP_OK);
  assert_true(plan_equal(&best, &again));
  double top = -1;
  static const int64_t mbs[] = {1, 2, 4, 8};
  static const plan_recompute rcs[] = {PLAN_RECOMPUTE_NONE, PLAN_RECOMPUTE_SELECTIVE, PLAN_RECOMPUTE_FULL};
  int64_t tried_partial = 0;
  for (size_t m = 0; m < 4; m++)
    for (int z = 0; z < 4; z++)
      for (size_t rc = 0; rc < AP_COUNT(rcs); rc++)
        for (int32_t k = 0; k <= (rcs[rc] == PLAN_RECOMPUTE_FULL ? 20 : 0); k++) { /* 80 layers over pp 4 */
          p = partial;
          p.micro_batch_size = mbs[m];
          p.n_micro_batches = 64 / (2 * mbs[m]);
          p.zero_stage = z;
          p.recompute = rcs[rc];
          p.recompute_layers = k;
          if (cost_estimate(ctx, f.env, &p, c2)) continue;
          tried_partial += k > 0;
          if (c2->fits && c2->tokens_per_s_per_device > top) top = c2->tokens_per_s_per_device;
        }
  assert_true(tried_partial > 0);
  assert_true(top > 0);
  assert_true(cr->fits);
  assert_rel_close(cr->tokens_per_s_per_device, top, 1e-9);
  free(cr);
  free(c2);
  fixture_free(&f);
  ap_ctx_free(ctx);
}

static void test_complete_no_valid_plan(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  fixture f = {0};
  fixture_load(&f, "llama-3-8b", "h100:16");
  plan partial, best;
  plan_defaults(&partial);
  partial.global_batch_size = 64;
  partial.seq_length = 4096;
  partial.tp = 3; /* divides neither the 32 heads nor the 16 devices */
  cost_result *cr = malloc(sizeof *cr);
  assert_int_equal(complete_plan(ctx, f.env, &partial, PLAN_F(TP), NULL, &best, cr, NULL), AP_INFEASIBLE);
  assert_error_contains(ctx, "no valid plan completes the stated fields");
  /* Every field stated: the one candidate's violated constraint is the answer. */
  assert_int_equal(complete_plan(ctx, f.env, &partial, COMPLETE_FIELDS, NULL, &best, cr, NULL), AP_INVALID);
  assert_error_contains(ctx, "plan: dp·tp·pp·cp");
  free(cr);
  fixture_free(&f);
  ap_ctx_free(ctx);
}

/* ---- End to end ---- */

static char tmp_dir[64];

static void write_file(const char *name, const char *text) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
  FILE *fp = fopen(path, "wb");
  assert_non_null(fp);
  fputs(text, fp);
  fclose(fp);
}

static const char tiny_csv[] =
    "id,model,model_config,arch,num_layers,hidden_size,ffn_hidden_size,num_attention_heads,num_kv_heads,vocab_size,"
    "seq_length,mlp,gpu,num_gpus,gpus_per_node,inter_node_GBps_per_gpu,global_batch_size,micro_batch_size,tp,pp,dp,"
    "recompute,zero_stage,precision,outcome,measured_tokens_per_s_per_gpu,measured_peak_mem_GiB,mem_convention,notes\r\n"
    "gpt-1,\"GPT 1.3B, inline\",,dense,24,2048,,16,,51200,2048,gelu,a100-80gb,8,8,25,512,4,1,1,8,none,1,bf16,ok,"
    "10000,40,nvidia-smi,\"a note, with \"\"quotes\"\"\"\r\n"
    "tiny-llama,tiny,tiny.json,dense,,,,,,,1024,swiglu,h100-sxm,16,8,,64,,,,,,,,ok,50000,,,\r\n"
    "bad-gpu,GPT,,dense,2,64,,4,,100,128,gelu,h100-sxm-9000,8,8,,8,1,1,1,8,none,1,bf16,ok,1000,,,\r\n"
    "gpt-oom,\"GPT 1.3B, inline\",,dense,24,2048,,16,,51200,2048,gelu,a100-80gb,8,8,25,512,4,1,1,8,none,1,bf16,oom,,,,\r\n";

static const char tiny_config[] =
    "{\"model_type\":\"llama\",\"hidden_size\":512,\"intermediate_size\":1536,\"num_hidden_layers\":8,"
    "\"num_attention_heads\":8,\"num_key_value_heads\":4,\"vocab_size\":32000,\"max_position_embeddings\":2048}";

static int e2e_setup(void **state) {
  (void)state;
  snprintf(tmp_dir, sizeof tmp_dir, "/tmp/autopar-validate-XXXXXX");
  if (!mkdtemp(tmp_dir)) return -1;
  char models[128];
  snprintf(models, sizeof models, "%s/models", tmp_dir);
  return mkdir(models, 0700);
}

static int e2e_teardown(void **state) {
  (void)state;
  char path[256];
  static const char *const files[] = {"models/tiny.json", "runs.csv", "bad.csv", "stack.csv", "models"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", tmp_dir, files[i]);
    remove(path);
  }
  return rmdir(tmp_dir);
}

static json_t *row_by_id(json_t *rows, const char *id) {
  size_t i;
  json_t *r;
  json_array_foreach(rows, i, r) if (strcmp(json_string_value(json_object_get(r, "id")), id) == 0) return r;
  fail_msg("no row %s", id);
  return NULL;
}

static void test_validate_end_to_end(void **state) {
  (void)state;
  write_file("runs.csv", tiny_csv);
  write_file("models/tiny.json", tiny_config);
  char path[256];
  snprintf(path, sizeof path, "%s/runs.csv", tmp_dir);
  ap_ctx *ctx = ap_ctx_new();
  char *out = NULL;
  if (ap_validate(ctx, path, AP_VALIDATE_JSON, &out)) fail_msg("%s", ap_ctx_error(ctx));
  json_error_t err;
  json_t *root = json_loads(out, 0, &err);
  if (!root) fail_msg("not JSON: %s: %.200s", err.text, out);
  json_t *rows = json_object_get(root, "rows"), *sum = json_object_get(root, "summary");
  assert_int_equal(json_array_size(rows), 4);

  /* Every modelled row has the specified keys, and ape is |predicted - measured| / measured. */
  static const char *const keys[] = {"id", "predicted_tokens_per_s_per_gpu", "measured_tokens_per_s_per_gpu", "ape",
                                     "predicted_outcome", "predicted_peak_mem_bytes"};
  double ape_sum = 0;
  static const char *const modelled[] = {"gpt-1", "tiny-llama"};
  for (size_t i = 0; i < 2; i++) {
    json_t *r = row_by_id(rows, modelled[i]);
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
      if (!json_object_get(r, keys[k])) fail_msg("row %s lacks %s", modelled[i], keys[k]);
    double pred = json_number_value(json_object_get(r, "predicted_tokens_per_s_per_gpu"));
    double meas = json_number_value(json_object_get(r, "measured_tokens_per_s_per_gpu"));
    double ape = json_number_value(json_object_get(r, "ape"));
    assert_true(pred > 0);
    assert_rel_close(ape, fabs(pred - meas) / meas, 1e-8);
    ape_sum += ape;
    const char *outcome = json_string_value(json_object_get(r, "predicted_outcome"));
    assert_true(strcmp(outcome, "ok") == 0 || strcmp(outcome, "oom") == 0);
    assert_true(json_number_value(json_object_get(r, "predicted_peak_mem_bytes")) > 0);
    assert_null(json_object_get(r, "error"));
  }
  json_t *gpt = row_by_id(rows, "gpt-1");
  assert_string_equal(json_string_value(json_object_get(gpt, "model")), "GPT 1.3B, inline");
  assert_rel_close(json_number_value(json_object_get(gpt, "measured_peak_mem_bytes")), 40.0 * 1073741824.0, 1e-12);
  assert_string_equal(json_string_value(json_object_get(gpt, "plan")), "tp1 pp1 dp8 mbs4 vpp1* sp0* rc=none z1");
  /* The row that states nothing of its plan gets every field chosen, from the config in models/. */
  json_t *tiny = row_by_id(rows, "tiny-llama");
  assert_true(json_array_size(json_object_get(tiny, "chosen")) >= 8);
  /* The unknown device is a miss with an error; the oom row has no throughput. */
  json_t *bad = row_by_id(rows, "bad-gpu");
  assert_non_null(strstr(json_string_value(json_object_get(bad, "error")), "h100-sxm-9000"));
  assert_true(json_is_null(json_object_get(bad, "ape")));
  json_t *oom = row_by_id(rows, "gpt-oom");
  assert_true(json_is_null(json_object_get(oom, "measured_tokens_per_s_per_gpu")));
  assert_true(json_is_null(json_object_get(oom, "ape")));

  /* Summary: three rows with a measured throughput, the error counting as ape 1. */
  assert_int_equal(json_integer_value(json_object_get(sum, "n")), 3);
  assert_int_equal(json_integer_value(json_object_get(sum, "n_errors")), 1);
  assert_rel_close(json_number_value(json_object_get(sum, "mape")), (ape_sum + 1.0) / 3.0, 1e-8);
  assert_non_null(json_object_get(sum, "median_ape"));
  json_t *oomsum = json_object_get(sum, "oom");
  assert_int_equal(json_integer_value(json_object_get(oomsum, "oom_rows")), 1);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(sum, "memory"), "n")), 1);
  json_decref(root);
  ap_free(out);

  /* The text form has the table and the summary lines. */
  assert_int_equal(ap_validate(ctx, path, 0, &out), AP_OK);
  assert_non_null(strstr(out, "tiny-llama"));
  assert_non_null(strstr(out, "MAPE"));
  assert_non_null(strstr(out, "oom agreement"));
  ap_free(out);
  ap_ctx_free(ctx);
}


/* --stack: a row's stack column wins, the run's stack applies to rows that name none (ap_validate_stack). Three
 * rows of one configuration: the one on the run's stack predicts the memory of the row that names that stack. */
static const char stack_csv[] =
    "id,stack,model,arch,num_layers,hidden_size,num_attention_heads,vocab_size,seq_length,mlp,gpu,num_gpus,"
    "gpus_per_node,global_batch_size,micro_batch_size,tp,pp,dp,recompute,zero_stage,precision,outcome,"
    "measured_tokens_per_s_per_gpu\n"
    "tt,torchtitan,g,dense,24,2048,16,51200,2048,gelu,a100-80gb,8,8,512,4,1,1,8,none,2,bf16,ok,10000\n"
    "none,,g,dense,24,2048,16,51200,2048,gelu,a100-80gb,8,8,512,4,1,1,8,none,2,bf16,ok,10000\n"
    "ds,megatron-deepspeed,g,dense,24,2048,16,51200,2048,gelu,a100-80gb,8,8,512,4,1,1,8,none,2,bf16,ok,10000\n";

static void test_validate_stack(void **state) {
  (void)state;
  write_file("stack.csv", stack_csv);
  char path[256];
  snprintf(path, sizeof path, "%s/stack.csv", tmp_dir);
  ap_ctx *ctx = ap_ctx_new();
  static const plan_stack runs[] = {PLAN_STACK_DEFAULT, PLAN_STACK_MEGATRON_DEEPSPEED, PLAN_STACK_TORCHTITAN};
  double mem[3][3];
  for (size_t k = 0; k < 3; k++) {
    validate_report *rep = NULL;
    if (validate_file_stack(ctx, path, NULL, runs[k], 0, &rep)) fail_msg("%s", ap_ctx_error(ctx));
    assert_int_equal(validate_report_n_rows(rep), 3);
    const validate_row *tt = validate_report_row(rep, 0), *none = validate_report_row(rep, 1),
                       *ds = validate_report_row(rep, 2);
    assert_int_equal(tt->plan.stack, PLAN_STACK_TORCHTITAN);
    assert_int_equal(ds->plan.stack, PLAN_STACK_MEGATRON_DEEPSPEED);
    assert_int_equal(none->plan.stack, runs[k]);
    for (int i = 0; i < 3; i++) {
      const validate_row *v = validate_report_row(rep, i);
      if (v->error) fail_msg("row %s: %s", v->id, v->error);
      mem[k][i] = v->predicted_peak_mem_bytes;
    }
    validate_report_free(rep);
  }
  /* The stacks allocate differently (DeepSpeed's step copies and bucket, torchtitan's loss), and the row that
   * names none follows the run's stack. */
  assert_true(mem[0][0] != mem[0][2]);
  assert_true(mem[1][1] == mem[1][2]);
  assert_true(mem[2][1] == mem[2][0]);
  assert_true(mem[0][1] != mem[1][1]);
  /* The public entry point takes the name; an unknown one is refused. */
  char *out = NULL;
  assert_int_equal(ap_validate_stack(ctx, path, NULL, "torchtitan", AP_VALIDATE_JSON, &out), AP_OK);
  ap_free(out);
  out = NULL;
  assert_int_equal(ap_validate_stack(ctx, path, NULL, "megatron", 0, &out), AP_INVALID);
  assert_error_contains(ctx, "--stack must be one of");
  assert_null(out);
  ap_ctx_free(ctx);
}

/* Bad input fails the whole run with file:line:col; a missing file is an I/O error. */
static void test_validate_bad_input(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  char path[256], *out = NULL;
  snprintf(path, sizeof path, "%s/bad.csv", tmp_dir);
  static const struct {
    const char *text, *want;
  } cases[] = {
      {"id,gpu\n\"a\"b,h100\n", "bad.csv:2:4: expected ','"},
      {"id,gpu,num_gpus,global_batch_size,seq_length\n", "bad.csv:1:1: expected a column named \"measured_tokens_per_s_per_gpu\""},
      {"id,gpu,num_gpus,global_batch_size,seq_length,measured_tokens_per_s_per_gpu,num_layers,hidden_size,"
       "num_attention_heads\n",
       "expected a column named \"model_config\" or the architecture columns"},
      {"id,gpu,num_gpus,global_batch_size,seq_length,measured_tokens_per_s_per_gpu,model_config\n"
       "r1,h100-sxm,eight,8,128,100,x.json\n",
       "bad.csv:2:13: num_gpus: expected an integer in [1, 4194304], got \"eight\""},
      {"id,gpu,num_gpus,global_batch_size,seq_length,measured_tokens_per_s_per_gpu,model_config,tp\n"
       "r1,h100-sxm,8,8,128,100,x.json,0\n",
       "bad.csv:2:32: tp: expected an integer in [1,"},
      {"id,gpu,num_gpus,global_batch_size,seq_length,measured_tokens_per_s_per_gpu,model_config\n"
       "r1,h100-sxm,8,8,128,,x.json\n",
       "bad.csv:2:21: measured_tokens_per_s_per_gpu: expected a number"},
      {"id,gpu,num_gpus,global_batch_size,seq_length,measured_tokens_per_s_per_gpu,num_layers,hidden_size,"
       "num_attention_heads,vocab_size\nr1,h100-sxm,8,8,128,100,,64,4,100\n",
       "bad.csv:2:25: num_layers: expected an integer in [1, 1024], got an empty field"},
      {"id,gpu,num_gpus,global_batch_size,seq_length,measured_tokens_per_s_per_gpu,model_config\n"
       "r1,h100-sxm,8,8,128,100,x.json\nr1,h100-sxm,8,8,128,100,x.json\n",
       "bad.csv:3:1: id: expected a unique row id, got \"r1\" again (line 2)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    write_file("bad.csv", cases[i].text);
    ap_status st = ap_validate(ctx, path, AP_VALIDATE_JSON, &out);
    if (st == AP_OK) fail_msg("case %zu: accepted", i);
    assert_null(out);
    if (!strstr(ap_ctx_error(ctx), cases[i].want)) fail_msg("case %zu: \"%s\" lacks \"%s\"", i, ap_ctx_error(ctx), cases[i].want);
  }
  assert_int_equal(ap_validate(ctx, "/nonexistent/runs.csv", 0, &out), AP_IO);
  assert_error_contains(ctx, "/nonexistent/runs.csv: cannot open");
  assert_int_equal(ap_validate(ctx, path, 2, &out), AP_INVALID);
  ap_ctx_free(ctx);
}

/* The figures `make calibrate` gives (README's accuracy table), each rounded up: the Megatron-DeepSpeed rows'
 * memory MAPE (4.17%; 7.3% before), and the torchtitan rows' (2.91%; 3.4% before). */
#define MDS_MEM_MAPE 0.042
#define TT_MEM_MAPE 0.030

/* The memory of the stacks as they allocate (issue 20, item 3), with the shipped calibration: the
 * Megatron-DeepSpeed rows (BigScience's BLOOM prototypes, nvidia-smi peaks of the first node) within 3% on
 * average (mean signed error; 5-10% under before DeepSpeed's pipeline buffers, process groups, step copies and
 * Megatron-DeepSpeed's unfused attention and dropout masks were modelled) and their MAPE at the figure `make
 * calibrate` gives (docs/cost-model.md "Memory"); the torchtitan rows (PyTorch's reserved bytes) within theirs;
 * every row measured out of memory predicted not to fit, every row measured to run predicted to fit. */
static void check_reference_memory(const validate_report *rep) {
  double sum[2] = {0}, abs_sum[2] = {0};
  int n[2] = {0}, oom = 0, oom_ok = 0, ran = 0, ran_ok = 0;
  for (int64_t i = 0; i < validate_report_n_rows(rep); i++) {
    const validate_row *v = validate_report_row(rep, i);
    if (v->error) continue;
    if (v->measured_oom) oom++, oom_ok += !v->fits;
    else ran++, ran_ok += v->fits;
    if (!v->has_mem) continue;
    int k = v->plan.stack == PLAN_STACK_MEGATRON_DEEPSPEED ? 0 : v->plan.stack == PLAN_STACK_TORCHTITAN ? 1 : -1;
    if (k < 0) fail_msg("row %s: a measured peak on a stack this test does not know", v->id);
    double e = (v->compared_mem_bytes - v->measured_mem_bytes) / v->measured_mem_bytes;
    sum[k] += e, abs_sum[k] += fabs(e), n[k]++;
  }
  print_message("# megatron-deepspeed: %d rows, mean signed %+.2f%%, MAPE %.2f%%; torchtitan: %d rows, MAPE %.2f%%; "
                "oom %d of %d, ran %d of %d\n",
                n[0], 100 * sum[0] / n[0], 100 * abs_sum[0] / n[0], n[1], 100 * abs_sum[1] / n[1], oom_ok, oom, ran_ok, ran);
  assert_true(n[0] >= 37 && n[1] >= 9);
  assert_true(fabs(sum[0] / n[0]) <= 0.03);
  assert_true(abs_sum[0] / n[0] <= MDS_MEM_MAPE);
  assert_true(abs_sum[1] / n[1] <= TT_MEM_MAPE);
  assert_int_equal(oom_ok, oom);
  assert_int_equal(ran_ok, ran);
}

/* The reference table itself (when the shared folder is at hand): every row is modelled, and its memory
 * figures hold (check_reference_memory). */
static void test_validate_reference(void **state) {
  (void)state;
  const char *dir = test_reference_dir();
  if (!dir) skip();
  char path[256];
  snprintf(path, sizeof path, "%s/runs.csv", dir);
  ap_ctx *ctx = ap_ctx_new();
  validate_report *rep = NULL;
  if (validate_file(ctx, path, &rep)) fail_msg("%s", ap_ctx_error(ctx));
  const validate_summary *s = validate_report_summary(rep);
  assert_true(s->n_rows >= 385);
  for (int64_t i = 0; i < validate_report_n_rows(rep); i++) {
    const validate_row *v = validate_report_row(rep, i);
    if (v->error) fail_msg("row %s: %s", v->id, v->error);
  }
  assert_true(isfinite(s->mape) && s->mape > 0);
  /* The table repeats configurations across releases: its floor is above zero and below the model's error. */
  assert_true(s->floor.n_groups > 0 && s->floor.n_rows == s->n);
  assert_true(s->floor.mape_floor > 0 && s->floor.mape_floor < s->mape);
  check_reference_memory(rep);
  validate_report_free(rep);
  ap_ctx_free(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_csv_good),
      cmocka_unit_test(test_csv_bad),
      cmocka_unit_test(test_csv_getters),
      cmocka_unit_test(test_complete_valid_and_honours_stated),
      cmocka_unit_test(test_complete_tries_etp_1),
      cmocka_unit_test(test_complete_progress_and_cancel),
      cmocka_unit_test(test_complete_matches_brute_force),
      cmocka_unit_test(test_complete_no_valid_plan),
      cmocka_unit_test(test_validate_end_to_end),
      cmocka_unit_test(test_validate_stack),
      cmocka_unit_test(test_validate_bad_input),
      cmocka_unit_test(test_validate_reference),
  };
  return cmocka_run_group_tests(tests, e2e_setup, e2e_teardown);
}
