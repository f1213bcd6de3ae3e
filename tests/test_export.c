/* Tests of the exporters (plan layer, export_*.c): for fixed plans, the exact Megatron-LM flags, DeepSpeed keys
 * and torchtitan keys each must write or leave out (COSTMODEL.md §6.2-6.4); a table of Megatron flag
 * combinations that Megatron rejects (megatron/training/arguments.py, transformer_config.py), checked over a
 * sweep of thousands of generated valid plans, together with a differential check that the layer split
 * Megatron derives from the flags, and the one torchtitan reads from module_fqns_per_model_part, are the
 * plan's; the DeepSpeed JSON parses and keeps DeepSpeed's batch identity; the JSON export reads back as the
 * same plan; and each plan a framework cannot run is refused with a one-line reason. */
#include <stdlib.h>
#include <unistd.h>

#include "testutil.h"

#include "core/core.h"
#include "core/jsonx.h"
#include "model/model.h"
#include "plan/export.h"
#include "plan/plan.h"
#include "plan/plan_api.h"

enum { M_LLAMA70, M_DSV3, M_GPT3, M_MIXTRAL, M_GPT2, M_MLP3, M_COUNT };
static const char *const model_names[M_COUNT] = {"llama-3-70b", "deepseek-v3", "gpt3-175b", "mixtral-8x7b", "gpt2",
                                                 "data/models/examples/mlp-3.json"};
static ap_model *models[M_COUNT];

static int setup(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  for (int i = 0; i < M_COUNT; i++) {
    if (ap_model_load(ctx, model_names[i], &models[i])) {
      fprintf(stderr, "%s: %s\n", model_names[i], ap_ctx_error(ctx));
      ap_ctx_free(ctx);
      return -1;
    }
  }
  ap_ctx_free(ctx);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  for (int i = 0; i < M_COUNT; i++) ap_model_free(models[i]);
  return 0;
}

/* A plan handle from JSON written with single quotes for readability (each ' becomes "), stated in full as
 * ap_plan_load makes it. The caller frees it with ap_plan_free. */
static ap_plan *plan_of(const char *text_sq) {
  char text[2048];
  snprintf(text, sizeof text, "%s", text_sq);
  for (char *c = text; *c; c++)
    if (*c == '\'') *c = '"';
  ap_ctx *ctx = ap_ctx_new();
  json_t *root = NULL;
  ap_plan *ap = calloc(1, sizeof *ap);
  assert_non_null(ap);
  if (jx_parse(ctx, "plan.json", text, strlen(text), &root) || plan_from_json(ctx, "plan.json", root, &ap->p))
    fail_msg("%s: %s", text, ap_ctx_error(ctx));
  json_decref(root);
  ap_ctx_free(ctx);
  ap->dp_set = ap->n_micro_set = ap->gbs_set = true;
  return ap;
}

/* ---- Megatron argument lists ---- */

enum { MAX_FLAGS = 96 };
typedef struct {
  int n;
  char flag[MAX_FLAGS][64];
  char value[MAX_FLAGS][128]; /* "" for a flag without a value */
} mflags;

/* Parses an export: comment lines first, then "--flag [value]" lines, each but the last ending in " \". Fails
 * the test on anything else, and on a flag given twice. */
static void parse_megatron(const char *text, mflags *out) {
  memset(out, 0, sizeof *out);
  const char *line = text;
  bool in_flags = false, last_continued = true;
  while (*line) {
    const char *end = strchr(line, '\n');
    if (!end) fail_msg("export does not end in a newline: %s", text);
    size_t len = (size_t)(end - line);
    char buf[512];
    if (len >= sizeof buf) fail_msg("line too long: %.80s", line);
    memcpy(buf, line, len);
    buf[len] = '\0';
    line = end + 1;
    if (buf[0] == '#') {
      if (in_flags) fail_msg("comment after the flags: %s", buf);
      continue;
    }
    if (!last_continued) fail_msg("a flag line follows one without a continuation: %s", buf);
    in_flags = true;
    last_continued = len >= 2 && strcmp(buf + len - 2, " \\") == 0;
    if (last_continued) buf[len - 2] = '\0';
    if (strncmp(buf, "--", 2) != 0) fail_msg("not a flag line: \"%s\"", buf);
    if (out->n == MAX_FLAGS) fail_msg("too many flags");
    char *sp = strchr(buf, ' ');
    if (sp) *sp = '\0';
    for (int i = 0; i < out->n; i++)
      if (strcmp(out->flag[i], buf) == 0) fail_msg("flag %s given twice", buf);
    if (strlen(buf) >= sizeof out->flag[0] || (sp && strlen(sp + 1) >= sizeof out->value[0]))
      fail_msg("flag or value too long: %s", buf);
    memcpy(out->flag[out->n], buf, strlen(buf) + 1);
    memcpy(out->value[out->n], sp ? sp + 1 : "", sp ? strlen(sp + 1) + 1 : 1);
    out->n++;
  }
  if (last_continued) fail_msg("the last flag line ends in a continuation: %s", text);
  if (out->n == 0) fail_msg("no flags: %s", text);
}

/* The value of a flag ("" for a bare one), or NULL when absent. */
static const char *mg_get(const mflags *m, const char *flag) {
  for (int i = 0; i < m->n; i++)
    if (strcmp(m->flag[i], flag) == 0) return m->value[i];
  return NULL;
}

static int64_t mg_int(const mflags *m, const char *flag, int64_t dflt) {
  const char *v = mg_get(m, flag);
  return v ? strtoll(v, NULL, 10) : dflt;
}

/* Whether flag is present with a value matching want: NULL any, ">N" an integer above N, else exactly. */
static bool mg_has(const mflags *m, const char *flag, const char *want) {
  const char *v = mg_get(m, flag);
  if (!v) return false;
  if (!want) return true;
  if (want[0] == '>') return *v && strtoll(v, NULL, 10) > strtoll(want + 1, NULL, 10);
  return strcmp(v, want) == 0;
}

/* Flag combinations Megatron-LM rejects (arguments.py validate_args and transformer_config.py, @ d98e8a64).
 * EXCLUDES: a and b never together; REQUIRES: a only with b (or b2). */
typedef enum { EXCLUDES, REQUIRES } rule_kind;
static const struct {
  rule_kind kind;
  const char *a, *a_val, *b, *b_val, *b2;
} rules[] = {
    {EXCLUDES, "--num-layers-per-virtual-pipeline-stage", NULL, "--num-virtual-stages-per-pipeline-rank", NULL, NULL},
    {EXCLUDES, "--num-layers-per-virtual-pipeline-stage", NULL, "--pipeline-model-parallel-layout", NULL, NULL},
    {EXCLUDES, "--num-virtual-stages-per-pipeline-rank", NULL, "--pipeline-model-parallel-layout", NULL, NULL},
    {EXCLUDES, "--num-layers-per-virtual-pipeline-stage", NULL, "--decoder-first-pipeline-num-layers", NULL, NULL},
    {EXCLUDES, "--num-layers-per-virtual-pipeline-stage", NULL, "--decoder-last-pipeline-num-layers", NULL, NULL},
    {EXCLUDES, "--pipeline-model-parallel-layout", NULL, "--decoder-first-pipeline-num-layers", NULL, NULL},
    {EXCLUDES, "--pipeline-model-parallel-layout", NULL, "--decoder-last-pipeline-num-layers", NULL, NULL},
    {REQUIRES, "--decoder-first-pipeline-num-layers", NULL, "--decoder-first-pipeline-num-layers", ">0", NULL},
    {REQUIRES, "--decoder-last-pipeline-num-layers", NULL, "--decoder-last-pipeline-num-layers", ">0", NULL},
    {REQUIRES, "--num-layers-per-virtual-pipeline-stage", NULL, "--pipeline-model-parallel-size", ">1", NULL},
    {REQUIRES, "--num-virtual-stages-per-pipeline-rank", NULL, "--pipeline-model-parallel-size", ">1", NULL},
    {EXCLUDES, "--recompute-granularity", "selective", "--recompute-num-layers", NULL, NULL},
    {EXCLUDES, "--recompute-granularity", "selective", "--recompute-method", NULL, NULL},
    {REQUIRES, "--recompute-granularity", "full", "--recompute-method", NULL, NULL},
    {REQUIRES, "--recompute-granularity", "full", "--recompute-num-layers", ">0", NULL},
    {REQUIRES, "--recompute-method", NULL, "--recompute-granularity", "full", NULL},
    {REQUIRES, "--recompute-num-layers", NULL, "--recompute-granularity", "full", NULL},
    {EXCLUDES, "--use-torch-fsdp2", NULL, "--pipeline-model-parallel-size", ">1", NULL},
    {EXCLUDES, "--use-torch-fsdp2", NULL, "--use-distributed-optimizer", NULL, NULL},
    {EXCLUDES, "--use-torch-fsdp2", NULL, "--expert-model-parallel-size", ">1", NULL},
    {EXCLUDES, "--use-torch-fsdp2", NULL, "--use-megatron-fsdp", NULL, NULL},
    {REQUIRES, "--tp-comm-overlap", NULL, "--sequence-parallel", NULL, NULL},
    {REQUIRES, "--sequence-parallel", NULL, "--tensor-model-parallel-size", ">1", NULL},
    {REQUIRES, "--overlap-param-gather", NULL, "--use-distributed-optimizer", NULL, "--use-megatron-fsdp"},
    {REQUIRES, "--overlap-param-gather", NULL, "--overlap-grad-reduce", NULL, NULL},
    {REQUIRES, "--use-megatron-fsdp", NULL, "--ckpt-format", "fsdp_dtensor", NULL},
    {REQUIRES, "--ckpt-format", "fsdp_dtensor", "--use-megatron-fsdp", NULL, NULL},
    {REQUIRES, "--data-parallel-sharding-strategy", NULL, "--use-megatron-fsdp", NULL, NULL},
    {EXCLUDES, "--fp16", NULL, "--bf16", NULL, NULL},
    {REQUIRES, "--fp8-format", NULL, "--bf16", NULL, "--fp16"},
    {REQUIRES, "--expert-model-parallel-size", ">1", "--num-experts", NULL, NULL},
    {REQUIRES, "--num-query-groups", NULL, "--group-query-attention", NULL, NULL},
    {REQUIRES, "--moe-router-topk", NULL, "--num-experts", NULL, NULL},
};

static void check_rules(const mflags *m, const char *text) {
  for (size_t i = 0; i < AP_COUNT(rules); i++) {
    if (!mg_has(m, rules[i].a, rules[i].a_val)) continue;
    bool b = mg_has(m, rules[i].b, rules[i].b_val) || (rules[i].b2 && mg_has(m, rules[i].b2, NULL));
    if (rules[i].kind == EXCLUDES && b)
      fail_msg("%s%s%s together with %s%s%s, which Megatron rejects:\n%s", rules[i].a, rules[i].a_val ? " " : "",
               rules[i].a_val ? rules[i].a_val : "", rules[i].b, rules[i].b_val ? " " : "",
               rules[i].b_val ? rules[i].b_val : "", text);
    if (rules[i].kind == REQUIRES && !b)
      fail_msg("%s%s%s without %s%s%s%s%s, which Megatron rejects:\n%s", rules[i].a, rules[i].a_val ? " " : "",
               rules[i].a_val ? rules[i].a_val : "", rules[i].b, rules[i].b_val ? " " : "",
               rules[i].b_val ? rules[i].b_val : "", rules[i].b2 ? " or " : "", rules[i].b2 ? rules[i].b2 : "", text);
  }
  /* Megatron derives dp; it has no flag for it. */
  for (int i = 0; i < m->n; i++)
    if (strncmp(m->flag[i], "--data-parallel-size", 20) == 0) fail_msg("a dp flag: %s", text);
}

/* The layers of each chunk as Megatron derives them from the flags (arguments.py "Uneven virtual pipeline
 * parallelism", transformer_config.py "Uneven PP"), asserting each of its divisibility checks. Chunk c runs on
 * rank c mod pp and each of a rank's v chunks holds an equal share of its layers. */
static void megatron_split(const mflags *m, int64_t *out, int64_t *n_out, const char *text) {
  int64_t L = mg_int(m, "--num-layers", 0), P = mg_int(m, "--pipeline-model-parallel-size", 1);
  int64_t V = 1;
  if (mg_get(m, "--num-layers-per-virtual-pipeline-stage")) {
    int64_t k = mg_int(m, "--num-layers-per-virtual-pipeline-stage", 0);
    if (L % P != 0 || k <= 0 || (L / P) % k != 0) fail_msg("layers per virtual stage do not divide:\n%s", text);
    V = L / P / k;
  } else if (mg_get(m, "--num-virtual-stages-per-pipeline-rank")) {
    V = mg_int(m, "--num-virtual-stages-per-pipeline-rank", 1);
  }
  int64_t per_rank[PLAN_MAX_CHUNKS];
  bool has_first = mg_get(m, "--decoder-first-pipeline-num-layers") != NULL;
  bool has_last = mg_get(m, "--decoder-last-pipeline-num-layers") != NULL;
  if (has_first || has_last) {
    int64_t rest = L, middle = P, first = 0, last = 0;
    if (has_first) {
      first = mg_int(m, "--decoder-first-pipeline-num-layers", 0);
      rest -= first;
      middle--;
    }
    if (has_last) {
      last = mg_int(m, "--decoder-last-pipeline-num-layers", 0);
      rest -= last;
      middle--;
    }
    if ((rest != 0) != (middle != 0) || (middle && rest % middle != 0))
      fail_msg("the middle stages' layers do not divide:\n%s", text);
    for (int64_t r = 0; r < P; r++) per_rank[r] = middle ? rest / middle : 0;
    if (has_first) per_rank[0] = first;
    if (has_last) per_rank[P - 1] = last;
  } else {
    if (L % P != 0) fail_msg("--num-layers %% pp != 0 without uneven flags:\n%s", text);
    for (int64_t r = 0; r < P; r++) per_rank[r] = L / P;
  }
  for (int64_t r = 0; r < P; r++)
    if (per_rank[r] % V != 0) fail_msg("rank %lld's layers do not divide by v = %lld:\n%s", (long long)r, (long long)V, text);
  *n_out = P * V;
  for (int64_t c = 0; c < P * V; c++) out[c] = per_rank[c % P] / V;
}

/* Everything the Megatron text must agree on with the plan: the rules, the degrees, the batch and the split. */
static void check_megatron(const plan *p, const graph *g, const char *text) {
  mflags m;
  parse_megatron(text, &m);
  check_rules(&m, text);
  assert_int_equal(mg_int(&m, "--tensor-model-parallel-size", 0), p->tp);
  assert_int_equal(mg_int(&m, "--pipeline-model-parallel-size", 0), p->pp);
  assert_int_equal(mg_int(&m, "--context-parallel-size", 0), p->cp);
  assert_int_equal(mg_int(&m, "--micro-batch-size", 0), p->micro_batch_size);
  assert_int_equal(mg_int(&m, "--global-batch-size", 0), p->global_batch_size);
  assert_int_equal(mg_int(&m, "--expert-model-parallel-size", 1), p->ep);
  assert_int_equal(mg_get(&m, "--sequence-parallel") != NULL, p->sequence_parallel && p->tp > 1);
  int64_t split[PLAN_MAX_CHUNKS], n = 0;
  megatron_split(&m, split, &n, text);
  int32_t want[PLAN_MAX_CHUNKS];
  assert_true(export_chunk_layers(p, g, want));
  if (n != plan_n_chunks(p)) fail_msg("Megatron builds %lld chunks, the plan has %lld:\n%s", (long long)n, (long long)plan_n_chunks(p), text);
  for (int64_t c = 0; c < n; c++)
    if (split[c] != want[c])
      fail_msg("chunk %lld: Megatron builds %lld layers, the plan has %d:\n%s", (long long)c, (long long)split[c], (int)want[c], text);
  /* Recompute as the plan says. */
  const char *gran = mg_get(&m, "--recompute-granularity");
  if (p->recompute == PLAN_RECOMPUTE_NONE) assert_null(gran);
  else assert_string_equal(gran, plan_recompute_name(p->recompute));
  if (p->recompute == PLAN_RECOMPUTE_FULL)
    assert_int_equal(mg_int(&m, "--recompute-num-layers", 0), p->recompute_layers ? p->recompute_layers : 1);
}

/* ---- DeepSpeed and torchtitan ---- */

static void check_deepspeed(const plan *p, const char *text) {
  json_error_t err;
  json_t *root = json_loads(text, 0, &err);
  if (!root) fail_msg("DeepSpeed config does not parse: %s:%d: %s\n%s", err.source, err.line, err.text, text);
  int64_t train = json_integer_value(json_object_get(root, "train_batch_size"));
  int64_t micro = json_integer_value(json_object_get(root, "train_micro_batch_size_per_gpu"));
  int64_t ga = json_integer_value(json_object_get(root, "gradient_accumulation_steps"));
  json_t *ap = json_object_get(root, "autopar");
  assert_non_null(ap);
  int64_t dp = json_integer_value(json_object_get(ap, "data_parallel"));
  assert_int_equal(train, micro * ga * dp); /* DeepSpeed's _batch_assertion */
  assert_int_equal(train, p->global_batch_size);
  assert_int_equal(dp, p->dp);
  assert_int_equal(json_integer_value(json_object_get(ap, "tensor_parallel")), p->tp);
  assert_int_equal(json_integer_value(json_object_get(ap, "pipeline_parallel")), p->pp);
  json_t *zero = json_object_get(root, "zero_optimization");
  assert_non_null(zero);
  assert_int_equal(json_integer_value(json_object_get(zero, "stage")), p->zero_stage);
  assert_true(json_is_boolean(json_object_get(zero, "overlap_comm")));
  assert_true(json_is_boolean(json_object_get(zero, "contiguous_gradients")));
  assert_true(json_is_boolean(json_object_get(zero, "reduce_scatter")));
  bool fp16 = p->precision == PLAN_PREC_FP16;
  assert_true(json_is_true(json_object_get(json_object_get(root, fp16 ? "fp16" : "bf16"), "enabled")));
  assert_null(json_object_get(root, fp16 ? "bf16" : "fp16"));
  assert_int_equal(json_object_get(root, "activation_checkpointing") != NULL, p->recompute != PLAN_RECOMPUTE_NONE);
  json_t *pipe = json_object_get(root, "pipeline");
  assert_int_equal(pipe != NULL, p->pp > 1);
  if (pipe) assert_true(json_is_integer(json_object_get(pipe, "activation_checkpoint_interval")));
  /* Only keys DeepSpeed knows at the top level, and the documented "autopar". */
  static const char *const known[] = {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
                                      "bf16", "fp16", "zero_optimization", "activation_checkpointing", "pipeline",
                                      "autopar"};
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) {
    (void)v;
    bool ok = false;
    for (size_t i = 0; i < AP_COUNT(known); i++) ok = ok || strcmp(key, known[i]) == 0;
    if (!ok) fail_msg("unexpected DeepSpeed key %s", key);
  }
  json_decref(root);
}

/* The integer after "key = " on a line of the TOML text, or fails. */
static int64_t toml_int(const char *text, const char *key) {
  char pat[96];
  snprintf(pat, sizeof pat, "\n%s = ", key);
  const char *at = strstr(text, pat);
  if (!at) fail_msg("torchtitan config lacks %s:\n%s", key, text);
  return strtoll(at + strlen(pat), NULL, 10);
}

static bool toml_has(const char *text, const char *line) {
  char pat[160];
  snprintf(pat, sizeof pat, "\n%s\n", line);
  return strstr(text, pat) != NULL;
}

static void check_torchtitan(const plan *p, const graph *g, const char *text) {
  static const char *const sections[] = {"[training]", "[parallelism]", "[activation_checkpoint]"};
  for (size_t i = 0; i < AP_COUNT(sections); i++)
    if (!toml_has(text, sections[i])) fail_msg("torchtitan config lacks %s:\n%s", sections[i], text);
  int64_t rep = toml_int(text, "data_parallel_replicate_degree"), shard = toml_int(text, "data_parallel_shard_degree");
  int64_t tp = toml_int(text, "tensor_parallel_degree"), pp = toml_int(text, "pipeline_parallel_degree");
  int64_t cp = toml_int(text, "context_parallel_degree");
  assert_int_equal(rep * shard * cp * tp * pp, plan_n_devices(p)); /* parallel_dims.py _validate */
  assert_int_equal(rep * shard, p->dp);
  assert_int_equal(toml_int(text, "expert_parallel_degree"), p->ep);
  int64_t etp = toml_int(text, "expert_tensor_parallel_degree");
  assert_true(etp == 1 || etp == tp);
  /* global = local × dp × gradient accumulation; with pipeline parallelism the local batch holds the
   * micro-batches, without it they are accumulation steps. */
  int64_t local = toml_int(text, "local_batch_size"), global = toml_int(text, "global_batch_size");
  assert_int_equal(global, p->global_batch_size);
  assert_int_equal(global % (local * p->dp), 0);
  assert_int_equal(global / (local * p->dp), p->pp > 1 ? 1 : p->n_micro_batches);
  assert_int_equal(toml_int(text, "seq_len"), export_seq_length(p, g));
  /* torchtitan's modes: none, selective (per-op with selective_ac_option "op"), full; Megatron's
   * core-attention recompute has nothing to drop under SDPA flash attention and exports as none. */
  const char *tt_mode = p->recompute == PLAN_RECOMPUTE_OP          ? "selective"
                     : p->recompute == PLAN_RECOMPUTE_SELECTIVE ? "none"
                                                                : plan_recompute_name(p->recompute);
  char mode[64];
  snprintf(mode, sizeof mode, "mode = \"%s\"", tt_mode);
  assert_true(toml_has(text, mode));
  assert_true(toml_has(text, "selective_ac_option = \"op\"") == (p->recompute == PLAN_RECOMPUTE_OP));
  assert_true(toml_has(text, "mixed_precision_param = \"bfloat16\""));
  if (p->pp > 1) {
    assert_int_equal(toml_int(text, "pipeline_parallel_microbatch_size"), p->micro_batch_size);
    assert_non_null(strstr(text, "\npipeline_parallel_schedule = \""));
    /* One list of module names per chunk, holding the chunk's layers in order. */
    int32_t want[PLAN_MAX_CHUNKS];
    assert_true(export_chunk_layers(p, g, want));
    const char *at = strstr(text, "\nmodule_fqns_per_model_part = [\n");
    assert_non_null(at);
    at = strchr(at + 1, '\n') + 1;
    int64_t c = 0;
    for (; strncmp(at, "  [", 3) == 0; c++) {
      const char *eol = strchr(at, '\n');
      int32_t n = 0;
      for (const char *q = strstr(at, "\"layers."); q && q < eol; q = strstr(q + 1, "\"layers.")) n++;
      if (c >= plan_n_chunks(p) || n != want[c]) fail_msg("chunk %lld lists %d layers:\n%s", (long long)c, n, text);
      assert_int_equal(strstr(at, "\"tok_embeddings\"") != NULL && strstr(at, "\"tok_embeddings\"") < eol, c == 0);
      at = eol + 1;
    }
    assert_int_equal(c, plan_n_chunks(p));
    assert_true(strncmp(at, "]\n", 2) == 0);
  } else {
    assert_null(strstr(text, "module_fqns_per_model_part"));
  }
}


/* Round trip of the JSON export through a file and ap_plan_load: the same plan. */
static void check_json(const plan *p, const char *text) {
  char path[] = "/tmp/autopar-export-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  ap_ctx *ctx = ap_ctx_new();
  ap_plan *back = NULL;
  if (ap_plan_load(ctx, path, &back)) fail_msg("%s: %s", text, ap_ctx_error(ctx));
  unlink(path);
  if (!plan_equal(p, &back->p)) fail_msg("the JSON export does not read back as the same plan: %s", text);
  ap_plan_free(back);
  ap_ctx_free(ctx);
}

/* The checks of each format on its output for plan p of model g. */
static void check_output(const char *format, const plan *p, const graph *g, const char *text) {
  if (strcmp(format, "megatron") == 0) check_megatron(p, g, text);
  else if (strcmp(format, "deepspeed") == 0) check_deepspeed(p, text);
  else if (strcmp(format, "torchtitan") == 0) check_torchtitan(p, g, text);
  else if (strcmp(format, "json") == 0) check_json(p, text);
  /* Every text opens with the plan's summary (JSON carries it in full instead). */
  if (strcmp(format, "json") != 0) assert_non_null(strstr(text, "dp "));
}

/* Exports a plan of a model: the text on success (checked by check_output), else NULL with the status in
 * *st and a one-line message in ctx. The caller frees the text. */
static char *export_text(ap_ctx *ctx, int model, const char *plan_sq, const char *format, ap_status *st) {
  ap_plan *ap = plan_of(plan_sq);
  char *out = NULL;
  ctx_clear(ctx);
  *st = ap_export(ctx, models[model], ap, format, &out);
  if (*st) {
    assert_null(out);
    assert_null(strchr(ap_ctx_error(ctx), '\n'));
  } else {
    check_output(format, &ap->p, model_graph(models[model]), out);
  }
  ap_plan_free(ap);
  return out;
}

/* One Megatron export per line: the model, the plan, flags that must be there ("--flag" with any value,
 * "--flag value" exactly) and flags that must not. */
enum { MAX_LIST = 28 };
static const struct {
  int model;
  const char *plan;
  const char *present[MAX_LIST];
  const char *absent[MAX_LIST];
} megatron_cases[] = {
    /* Llama 3 70B on 64 GPUs: tp 8, pp 4, interleaved with two virtual stages, selective recompute, ZeRO-1. */
    {M_LLAMA70,
     "{'parallel':{'dp':2,'tp':8,'pp':4,'vpp':2},'pipeline':{'schedule':'interleaved-1f1b','n_micro_batches':64},"
     "'global_batch_size':128,'seq_length':8192,'sequence_parallel':true,'recompute':{'granularity':'selective'},"
     "'optimizer':{'zero_stage':1},'overlap':{'tp_comm':true}}",
     {"--num-layers 80", "--hidden-size 8192", "--ffn-hidden-size 28672", "--num-attention-heads 64",
      "--group-query-attention", "--num-query-groups 8", "--seq-length 8192", "--max-position-embeddings 8192",
      "--swiglu", "--normalization RMSNorm", "--position-embedding-type rope", "--untie-embeddings-and-output-weights",
      "--tensor-model-parallel-size 8", "--pipeline-model-parallel-size 4", "--num-layers-per-virtual-pipeline-stage 10",
      "--context-parallel-size 1", "--sequence-parallel", "--micro-batch-size 1", "--global-batch-size 128",
      "--recompute-granularity selective", "--use-distributed-optimizer", "--overlap-grad-reduce",
      "--overlap-param-gather", "--tp-comm-overlap", "--bf16"},
     {"--num-virtual-stages-per-pipeline-rank", "--recompute-method", "--recompute-num-layers", "--kv-channels",
      "--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl",
      "--num-experts", "--expert-model-parallel-size", "--fp16", "--fp8-format", "--decoder-first-pipeline-num-layers",
      "--decoder-last-pipeline-num-layers", "--use-megatron-fsdp", "--use-torch-fsdp2", "--multi-latent-attention"}},
    /* A fused in-place loss: Transformer Engine's cross entropy. */
    {M_LLAMA70, "{'parallel':{'dp':8,'tp':8},'sequence_parallel':true,'fused_loss':true}",
     {"--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl te"},
     {"--recompute-granularity"}},
    /* DeepSeek-V3: expert parallel 8 with etp 1, three dense layers first, MLA, an uneven first and last stage. */
    {M_DSV3,
     "{'parallel':{'dp':8,'pp':8,'ep':8,'etp':1},'pipeline':{'stage_layers':[6,8,8,8,8,8,8,7],'n_micro_batches':32},"
     "'seq_length':4096}",
     {"--num-layers 61", "--hidden-size 7168", "--ffn-hidden-size 18432", "--num-attention-heads 128",
      "--multi-latent-attention", "--q-lora-rank 1536", "--kv-lora-rank 512", "--num-experts 256", "--moe-router-topk 8",
      "--moe-ffn-hidden-size 2048", "--moe-shared-expert-intermediate-size 2048", "--moe-layer-freq '([0]*3+[1]*58)'",
      "--moe-grouped-gemm", "--moe-token-dispatcher-type alltoall", "--expert-model-parallel-size 8",
      "--expert-tensor-parallel-size 1", "--pipeline-model-parallel-size 8", "--decoder-first-pipeline-num-layers 6",
      "--decoder-last-pipeline-num-layers 7", "--swiglu", "--normalization RMSNorm", "--position-embedding-type rope",
      "--untie-embeddings-and-output-weights", "--global-batch-size 256", "--seq-length 4096"},
     {"--group-query-attention", "--num-query-groups", "--kv-channels", "--num-layers-per-virtual-pipeline-stage",
      "--num-virtual-stages-per-pipeline-rank", "--sequence-parallel", "--recompute-granularity"}},
    /* GPT-3 175B: tp 8, pp 8, full recompute of the first 4 layers of each stage. */
    {M_GPT3,
     "{'parallel':{'tp':8,'pp':8},'pipeline':{'n_micro_batches':64},'sequence_parallel':true,"
     "'recompute':{'granularity':'full','num_layers':4}}",
     {"--num-layers 96", "--hidden-size 12288", "--ffn-hidden-size 49152", "--num-attention-heads 96",
      "--seq-length 2048", "--max-position-embeddings 2048", "--normalization LayerNorm",
      "--position-embedding-type learned_absolute", "--recompute-granularity full", "--recompute-method block",
      "--recompute-num-layers 4", "--global-batch-size 64", "--pipeline-model-parallel-size 8"},
     {"--swiglu", "--untie-embeddings-and-output-weights", "--group-query-attention", "--kv-channels", "--num-experts",
      "--decoder-first-pipeline-num-layers"}},
    /* Full recompute of every layer: uniform, one layer per checkpoint. */
    {M_GPT3, "{'parallel':{'tp':8,'pp':8},'sequence_parallel':true,'recompute':{'granularity':'full'}}",
     {"--recompute-granularity full", "--recompute-method uniform", "--recompute-num-layers 1"},
     {"--decoder-first-pipeline-num-layers"}},
    /* Uneven first and last stages. */
    {M_LLAMA70, "{'parallel':{'tp':8,'pp':4},'pipeline':{'stage_layers':[19,21,21,19]}}",
     {"--decoder-first-pipeline-num-layers 19", "--decoder-last-pipeline-num-layers 19"},
     {"--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank"}},
    {M_LLAMA70, "{'parallel':{'tp':8,'pp':3}}", /* the even split [27,27,26] */
     {"--decoder-last-pipeline-num-layers 26"},
     {"--decoder-first-pipeline-num-layers"}},
    {M_LLAMA70, "{'parallel':{'tp':8,'pp':2},'pipeline':{'stage_layers':[30,50]}}",
     {"--decoder-first-pipeline-num-layers 30", "--decoder-last-pipeline-num-layers 50"},
     {NULL}},
    {M_LLAMA70,
     "{'parallel':{'tp':8,'pp':4,'vpp':2},'pipeline':{'schedule':'interleaved-1f1b','n_micro_batches':8,"
     "'stage_layers':[9,10,10,11,9,10,10,11]}}",
     {"--num-virtual-stages-per-pipeline-rank 2", "--decoder-first-pipeline-num-layers 18",
      "--decoder-last-pipeline-num-layers 22"},
     {"--num-layers-per-virtual-pipeline-stage"}},
    /* Precision. */
    {M_LLAMA70, "{'parallel':{'tp':8},'precision':'fp8'}", {"--bf16", "--fp8-format hybrid"}, {"--fp16"}},
    {M_LLAMA70, "{'parallel':{'tp':8},'precision':'fp16'}", {"--fp16"}, {"--bf16", "--fp8-format"}},
    /* Optimizer sharding. */
    {M_LLAMA70, "{'parallel':{'dp':8},'optimizer':{'zero_stage':0}}", {"--overlap-grad-reduce"},
     {"--use-distributed-optimizer", "--overlap-param-gather", "--use-megatron-fsdp", "--ckpt-format"}},
    {M_LLAMA70, "{'parallel':{'dp':8},'optimizer':{'zero_stage':2}}",
     {"--use-megatron-fsdp", "--data-parallel-sharding-strategy optim_grads", "--ckpt-format fsdp_dtensor",
      "--overlap-param-gather"},
     {"--use-distributed-optimizer", "--use-torch-fsdp2"}},
    {M_LLAMA70, "{'parallel':{'dp':8},'optimizer':{'zero_stage':3},'overlap':{'grad_reduce':false}}",
     {"--use-megatron-fsdp", "--data-parallel-sharding-strategy optim_grads_params"},
     {"--use-distributed-optimizer", "--overlap-param-gather", "--overlap-grad-reduce"}},
    /* Mixtral: every layer MoE, so no --moe-layer-freq; the expert width is the FFN width. */
    {M_MIXTRAL, "{'parallel':{'dp':8,'tp':2,'pp':4,'ep':8,'etp':1},'sequence_parallel':true}",
     {"--num-experts 8", "--moe-router-topk 2", "--ffn-hidden-size 14336", "--moe-ffn-hidden-size 14336",
      "--expert-model-parallel-size 8", "--expert-tensor-parallel-size 1", "--sequence-parallel"},
     {"--moe-layer-freq", "--moe-shared-expert-intermediate-size", "--multi-latent-attention"}},
    /* GPT-2: learned positions, tied embeddings, context parallel. */
    {M_GPT2, "{'parallel':{'cp':2,'tp':2},'sequence_parallel':true}",
     {"--max-position-embeddings 1024", "--seq-length 1024", "--position-embedding-type learned_absolute",
      "--context-parallel-size 2", "--normalization LayerNorm"},
     {"--untie-embeddings-and-output-weights", "--swiglu"}},
};

static void check_list(const mflags *m, const char *const *list, bool want, const char *text) {
  for (int i = 0; i < MAX_LIST && list[i]; i++) {
    char flag[64];
    snprintf(flag, sizeof flag, "%s", list[i]);
    char *sp = strchr(flag, ' ');
    const char *value = sp ? sp + 1 : NULL;
    if (sp) *sp = '\0';
    const char *got = mg_get(m, flag);
    bool has = got && (!value || strcmp(got, list[i] + (value - flag)) == 0);
    if (has != want) fail_msg("%s %s:\n%s", list[i], want ? "is missing" : "must not be there", text);
  }
}

static void test_megatron_cases(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  for (size_t i = 0; i < AP_COUNT(megatron_cases); i++) {
    ap_status st;
    char *text = export_text(ctx, megatron_cases[i].model, megatron_cases[i].plan, "megatron", &st);
    if (st) fail_msg("case %zu (%s): %s", i, megatron_cases[i].plan, ap_ctx_error(ctx));
    mflags m;
    parse_megatron(text, &m);
    check_list(&m, megatron_cases[i].present, true, text);
    check_list(&m, megatron_cases[i].absent, false, text);
    assert_non_null(strstr(text, "# autopar plan: "));
    free(text);
  }
  ap_ctx_free(ctx);
}

/* The DeepSpeed keys and the torchtitan keys of one plan. */
static void test_deepspeed_torchtitan_keys(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  ap_status st;
  const char *llama = "{'parallel':{'dp':2,'tp':8,'pp':4},'pipeline':{'n_micro_batches':64},'seq_length':8192,"
                      "'sequence_parallel':true,'recompute':{'granularity':'full'},'optimizer':{'zero_stage':1}}";
  char *ds = export_text(ctx, M_LLAMA70, llama, "deepspeed", &st);
  if (st) fail_msg("%s", ap_ctx_error(ctx));
  static const char *const ds_keys[] = {"\"train_batch_size\": 128", "\"train_micro_batch_size_per_gpu\": 1",
                                        "\"gradient_accumulation_steps\": 64", "\"bf16\": {", "\"zero_optimization\": {",
                                        "\"stage\": 1", "\"overlap_comm\": true", "\"contiguous_gradients\": true",
                                        "\"reduce_scatter\": true", "\"activation_checkpointing\": {",
                                        "\"pipeline\": {", "\"activation_checkpoint_interval\": 1",
                                        "\"tensor_parallel\": 8", "\"pipeline_parallel\": 4", "\"data_parallel\": 2"};
  for (size_t i = 0; i < AP_COUNT(ds_keys); i++)
    if (!strstr(ds, ds_keys[i])) fail_msg("DeepSpeed config lacks %s:\n%s", ds_keys[i], ds);
  free(ds);

  char *tt = export_text(ctx, M_LLAMA70, llama, "torchtitan", &st);
  if (st) fail_msg("%s", ap_ctx_error(ctx));
  static const char *const tt_lines[] = {"local_batch_size = 64", "global_batch_size = 128", "seq_len = 8192",
                                         "mixed_precision_param = \"bfloat16\"", "data_parallel_replicate_degree = 1",
                                         "data_parallel_shard_degree = 2", "fsdp_reshard_after_forward = \"never\"",
                                         "tensor_parallel_degree = 8", "enable_async_tensor_parallel = false",
                                         "pipeline_parallel_degree = 4", "pipeline_parallel_schedule = \"1F1B\"",
                                         "pipeline_parallel_microbatch_size = 1", "context_parallel_degree = 1",
                                         "expert_parallel_degree = 1", "expert_tensor_parallel_degree = 1",
                                         "mode = \"full\""};
  for (size_t i = 0; i < AP_COUNT(tt_lines); i++)
    if (!toml_has(tt, tt_lines[i])) fail_msg("torchtitan config lacks %s:\n%s", tt_lines[i], tt);
  free(tt);

  /* The schedules by their torch.distributed.pipelining names, ZeRO-3 as FSDP2 resharding after forward,
   * plain data parallelism as DDP, selective recompute per op, async TP with compile, the expert degrees. */
  static const struct {
    int model;
    const char *plan, *line;
  } tt_cases[] = {
      {M_LLAMA70, "{'parallel':{'pp':4,'vpp':2},'pipeline':{'schedule':'interleaved-1f1b','n_micro_batches':8}}",
       "pipeline_parallel_schedule = \"Interleaved1F1B\""},
      {M_LLAMA70, "{'parallel':{'pp':4,'vpp':2},'pipeline':{'schedule':'zb-v','n_micro_batches':8}}",
       "pipeline_parallel_schedule = \"ZBVZeroBubble\""},
      {M_LLAMA70, "{'parallel':{'pp':4},'pipeline':{'schedule':'gpipe','n_micro_batches':8}}",
       "pipeline_parallel_schedule = \"GPipe\""},
      {M_LLAMA70, "{'parallel':{'pp':4},'pipeline':{'schedule':'zb-h1','n_micro_batches':8}}",
       "pipeline_parallel_schedule = \"InterleavedZeroBubble\""},
      {M_LLAMA70, "{'parallel':{'dp':8},'optimizer':{'zero_stage':3}}", "fsdp_reshard_after_forward = \"always\""},
      {M_LLAMA70, "{'parallel':{'dp':8},'optimizer':{'zero_stage':0}}", "data_parallel_replicate_degree = 8"},
      {M_LLAMA70, "{'parallel':{'dp':8},'recompute':{'granularity':'op'}}", "selective_ac_option = \"op\""},
      {M_LLAMA70, "{'parallel':{'dp':8},'recompute':{'granularity':'selective'}}", "mode = \"none\""},
      {M_LLAMA70, "{'parallel':{'tp':8},'sequence_parallel':true,'overlap':{'tp_comm':true}}", "[compile]"},
      {M_LLAMA70, "{'parallel':{'tp':4,'cp':2},'seq_length':8192,'sequence_parallel':true}", "context_parallel_degree = 2"},
      {M_MIXTRAL, "{'parallel':{'dp':8,'tp':2,'pp':4,'ep':8,'etp':1},'sequence_parallel':true}", "expert_parallel_degree = 8"},
      {M_MIXTRAL, "{'parallel':{'dp':4,'tp':2,'ep':4},'sequence_parallel':true}", "expert_tensor_parallel_degree = 2"},
  };
  for (size_t i = 0; i < AP_COUNT(tt_cases); i++) {
    tt = export_text(ctx, tt_cases[i].model, tt_cases[i].plan, "torchtitan", &st);
    if (st) fail_msg("%s: %s", tt_cases[i].plan, ap_ctx_error(ctx));
    if (!toml_has(tt, tt_cases[i].line)) fail_msg("%s: torchtitan config lacks %s:\n%s", tt_cases[i].plan, tt_cases[i].line, tt);
    free(tt);
  }
  ap_ctx_free(ctx);
}

/* What a format cannot run is refused with a one-line reason; bad formats and bad plans are input errors. */
static const struct {
  int model;
  const char *plan, *format;
  ap_status status;
  const char *error;
} refused[] = {
    {M_LLAMA70, "{'parallel':{'tp':8,'pp':4},'pipeline':{'stage_layers':[0,40,40,0]}}", "megatron", AP_UNSUPPORTED,
     "has an empty first or last stage"},
    {M_LLAMA70, "{'parallel':{'tp':8,'pp':4},'pipeline':{'stage_layers':[20,19,21,20]}}", "megatron", AP_UNSUPPORTED,
     "has unequal middle stages"},
    {M_DSV3, "{'parallel':{'dp':8,'pp':8,'ep':8,'etp':1},'seq_length':4096}", "megatron", AP_UNSUPPORTED,
     "[7,8,8,8,8,8,7,7] has unequal middle stages"},
    {M_LLAMA70,
     "{'parallel':{'pp':4,'vpp':2},'pipeline':{'schedule':'interleaved-1f1b','n_micro_batches':8,"
     "'stage_layers':[10,10,10,10,9,11,10,10]}}",
     "megatron", AP_UNSUPPORTED, "gives one rank's virtual stages different layer counts"},
    {M_LLAMA70, "{'parallel':{'pp':4,'vpp':2},'pipeline':{'schedule':'zb-v','n_micro_batches':8}}", "megatron",
     AP_UNSUPPORTED, "Megatron-LM has no zb-v schedule"},
    {M_LLAMA70, "{'parallel':{'pp':4},'pipeline':{'schedule':'zb-h1'}}", "megatron", AP_UNSUPPORTED,
     "Megatron-LM has no zb-h1 schedule"},
    {M_LLAMA70, "{'parallel':{'dp':8},'recompute':{'granularity':'op'}}", "megatron", AP_UNSUPPORTED,
     "Megatron-LM has no per-op selective checkpointing"},
    {M_MLP3, "{'parallel':{'dp':2}}", "megatron", AP_UNSUPPORTED, "is not a transformer Megatron-LM builds"},
    {M_GPT2, "{'seq_length':2048}", "megatron", AP_INVALID, "exceeds the model's 1024 learned positions"},
    {M_LLAMA70, "{'parallel':{'cp':2},'seq_length':8192}", "deepspeed", AP_UNSUPPORTED, "no context parallelism"},
    {M_MIXTRAL, "{'parallel':{'dp':8,'ep':8}}", "deepspeed", AP_UNSUPPORTED, "DeepSpeed-MoE sets the expert-parallel size"},
    {M_LLAMA70, "{'parallel':{'pp':4,'vpp':2},'pipeline':{'schedule':'interleaved-1f1b','n_micro_batches':8}}",
     "deepspeed", AP_UNSUPPORTED, "runs 1F1B with one stage per rank, not interleaved-1f1b"},
    {M_LLAMA70, "{'parallel':{'dp':2,'pp':4},'optimizer':{'zero_stage':2}}", "deepspeed", AP_UNSUPPORTED,
     "ZeRO-2 and ZeRO-3 are incompatible with DeepSpeed pipeline parallelism"},
    {M_LLAMA70, "{'precision':'fp16'}", "torchtitan", AP_UNSUPPORTED, "not fp16"},
    {M_LLAMA70, "{'parallel':{'dp':8},'fused_loss':true}", "torchtitan", AP_UNSUPPORTED, "no fused in-place option"},
    {M_LLAMA70, "{'parallel':{'pp':2},'recompute':{'granularity':'full','num_layers':2}}", "torchtitan", AP_UNSUPPORTED,
     "cannot recompute only the first layers of each chunk"},
    {M_MIXTRAL, "{'parallel':{'dp':2,'tp':4,'ep':2,'etp':2},'sequence_parallel':true}", "torchtitan", AP_UNSUPPORTED,
     "expert_tensor_parallel_degree 1 or tp (= 4) only, got etp = 2"},
    {M_MLP3, "{'parallel':{'dp':2}}", "torchtitan", AP_UNSUPPORTED, "model mlp-3 has no attention layers"},
    {M_LLAMA70, "{}", "bogus", AP_INVALID,
     "unknown export format \"bogus\" (expected one of: megatron, deepspeed, torchtitan, json)"},
    {M_LLAMA70, "{}", "megatrom", AP_INVALID, "did you mean megatron?"},
    {M_LLAMA70, "{'parallel':{'tp':16}}", "json", AP_INVALID, "plan: tp = 16 must divide num_query_groups (KV heads) = 8"},
};

static void test_refused(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  for (size_t i = 0; i < AP_COUNT(refused); i++) {
    ap_status st;
    char *text = export_text(ctx, refused[i].model, refused[i].plan, refused[i].format, &st);
    if (!st) fail_msg("case %zu (%s as %s): exported, want \"%s\":\n%s", i, refused[i].plan, refused[i].format,
                      refused[i].error, text);
    print_message("# %s\n", ap_ctx_error(ctx));
    assert_int_equal(st, refused[i].status);
    assert_error_contains(ctx, refused[i].error);
  }
  ap_ctx_free(ctx);
}

/* The JSON export reads back as the same plan, and a plan that names its model needs no model argument. */
static void test_json_round_trip(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  static const char *const plans[] = {
      "{'model':'llama-3-70b','cluster':'h100:64','parallel':{'dp':2,'tp':8,'pp':4,'vpp':2},"
      "'pipeline':{'schedule':'interleaved-1f1b','n_micro_batches':64},'seq_length':8192,'sequence_parallel':true,"
      "'recompute':{'granularity':'selective'}}",
      "{'model':'llama-3-70b','parallel':{'tp':8,'pp':4},'pipeline':{'stage_layers':[19,21,21,19]},"
      "'recompute':{'granularity':'full','num_layers':3},'precision':'fp8','optimizer':{'zero_stage':3}}",
  };
  for (size_t i = 0; i < AP_COUNT(plans); i++) {
    ap_status st;
    char *text = export_text(ctx, M_LLAMA70, plans[i], "json", &st); /* check_json reloads it */
    if (st) fail_msg("%s", ap_ctx_error(ctx));
    assert_non_null(strstr(text, "\"format\":\"autopar-plan/1\""));
    free(text);
    ap_plan *ap = plan_of(plans[i]);
    char *out = NULL;
    if (ap_export(ctx, NULL, ap, "megatron", &out)) fail_msg("%s", ap_ctx_error(ctx));
    assert_non_null(strstr(out, "--num-layers 80"));
    ap_free(out);
    ap_plan_free(ap);
  }
  ap_plan *ap = plan_of("{'parallel':{'tp':8}}");
  char *out = NULL;
  assert_int_equal(ap_export(ctx, NULL, ap, "megatron", &out), AP_INVALID);
  assert_error_contains(ctx, "no model given");
  assert_null(out);
  ap_plan_free(ap);
  ap_ctx_free(ctx);
}

/* The header comments: what Megatron needs from the environment and what the export could not state. */
static void test_header_notes(void **state) {
  (void)state;
  static const struct {
    int model;
    const char *plan, *format, *line;
  } cases[] = {
      {M_LLAMA70, "{'parallel':{'tp':8}}", "megatron", "# env: export CUDA_DEVICE_MAX_CONNECTIONS=1"},
      {M_LLAMA70, "{'parallel':{'tp':8},'optimizer':{'zero_stage':3}}", "megatron",
       "# env: leave CUDA_DEVICE_MAX_CONNECTIONS unset or > 1"},
      {M_LLAMA70, "{'parallel':{'dp':2,'tp':8,'pp':4}}", "megatron", "# launch 64 ranks: Megatron derives dp = world / (tp x pp x cp) = 2"},
      {M_LLAMA70, "{'parallel':{'pp':4},'pipeline':{'schedule':'gpipe'}}", "megatron", "no GPipe schedule"},
      {M_LLAMA70, "{'parallel':{'dp':2},'overlap':{'grad_reduce':false}}", "megatron", "--overlap-param-gather left out"},
      {M_DSV3, "{'parallel':{'dp':8,'pp':8,'ep':8,'etp':1},'pipeline':{'stage_layers':[6,8,8,8,8,8,8,7]},'seq_length':4096}",
       "megatron", "MLA head dims"},
      {M_LLAMA70, "{'parallel':{'dp':2,'cp':2,'order':['tp','dp','cp','ep','pp']},'seq_length':8192}", "megatron",
       "# note: Megatron-LM numbers ranks cp-dp (innermost first); the plan's order dp-cp cannot be stated"},
      {M_LLAMA70, "{'parallel':{'dp':2,'cp':2,'order':['tp','dp','cp','ep','pp']},'seq_length':8192}", "torchtitan",
       "# note: torchtitan numbers ranks cp-dp"},
      {M_LLAMA70, "{'parallel':{'dp':2,'tp':2},'optimizer':{'zero_stage':0}}", "torchtitan", "its DDP is one-dimensional"},
      {M_LLAMA70, "{'parallel':{'tp':2},'precision':'fp8'}", "torchtitan", "converters = [\"float8\"]"},
      {M_LLAMA70, "{'parallel':{'pp':4},'pipeline':{'schedule':'gpipe'}}", "deepspeed", "DeepSpeed has no GPipe schedule"},
  };
  ap_ctx *ctx = ap_ctx_new();
  for (size_t i = 0; i < AP_COUNT(cases); i++) {
    ap_status st;
    char *text = export_text(ctx, cases[i].model, cases[i].plan, cases[i].format, &st);
    if (st) fail_msg("%s: %s", cases[i].plan, ap_ctx_error(ctx));
    if (!strstr(text, cases[i].line)) fail_msg("%s as %s lacks \"%s\":\n%s", cases[i].plan, cases[i].format, cases[i].line, text);
    free(text);
  }
  /* The default order says nothing. */
  ap_status st;
  char *text = export_text(ctx, M_LLAMA70, "{'parallel':{'dp':2,'tp':8,'pp':4}}", "megatron", &st);
  assert_int_equal(st, AP_OK);
  assert_null(strstr(text, "numbers ranks"));
  free(text);
  ap_ctx_free(ctx);
}

/* Every combination of recompute × ZeRO × schedule × sequence parallel × precision × overlap for four
 * models: each valid plan either exports in each format, passing all the checks above (Megatron's rules and
 * split, DeepSpeed's batch identity, torchtitan's degrees and split, the JSON round trip), or is refused with
 * AP_UNSUPPORTED. */
static void test_sweep(void **state) {
  (void)state;
  static const struct {
    int model;
    const char *degrees;     /* the "parallel" object without vpp */
    const char *split_vpp1;  /* stage_layers for one chunk per rank, or "" for the even split */
  } bases[] = {
      {M_LLAMA70, "'dp':2,'tp':8,'pp':4", ""},
      {M_MIXTRAL, "'dp':8,'tp':2,'pp':4,'ep':8,'etp':1", ""},
      {M_GPT3, "'tp':8,'pp':8", ""},
      {M_DSV3, "'dp':8,'pp':8,'ep':8,'etp':1", ",'stage_layers':[6,8,8,8,8,8,8,7]"},
  };
  static const char *const recomputes[] = {"'granularity':'none'", "'granularity':'selective'", "'granularity':'op'",
                                           "'granularity':'full','num_layers':0", "'granularity':'full','num_layers':2"};
  static const struct {
    const char *name;
    int vpp;
  } schedules[] = {{"1f1b", 1}, {"gpipe", 1}, {"interleaved-1f1b", 2}, {"zb-h1", 1}, {"zb-v", 2}};
  static const char *const precisions[] = {"bf16", "fp16", "fp8"};
  static const char *const formats[] = {"megatron", "deepspeed", "torchtitan", "json"};
  int n_valid = 0, n_ok[4] = {0}, n_refused[4] = {0};
  ap_ctx *ctx = ap_ctx_new();
  for (size_t b = 0; b < AP_COUNT(bases); b++)
    for (size_t r = 0; r < AP_COUNT(recomputes); r++)
      for (int zero = 0; zero <= 3; zero++)
        for (size_t s = 0; s < AP_COUNT(schedules); s++)
          for (int sp = 0; sp <= 1; sp++)
            for (size_t pr = 0; pr < AP_COUNT(precisions); pr++)
              for (int ov = 0; ov < 8; ov++) {
                char text[1024];
                snprintf(text, sizeof text,
                         "{'parallel':{%s,'vpp':%d},'pipeline':{'schedule':'%s','n_micro_batches':16%s},"
                         "'sequence_parallel':%s,'recompute':{%s},'optimizer':{'zero_stage':%d},'precision':'%s',"
                         "'overlap':{'grad_reduce':%s,'param_gather':%s,'tp_comm':%s}}",
                         bases[b].degrees, schedules[s].vpp, schedules[s].name,
                         schedules[s].vpp == 1 ? bases[b].split_vpp1 : "", sp ? "true" : "false", recomputes[r], zero,
                         precisions[pr], ov & 1 ? "true" : "false", ov & 2 ? "true" : "false", ov & 4 ? "true" : "false");
                ap_plan *ap = plan_of(text);
                const graph *g = model_graph(models[bases[b].model]);
                ctx_clear(ctx);
                bool valid = plan_validate(ctx, &ap->p, g, plan_n_devices(&ap->p), NULL) == AP_OK;
                ap_plan_free(ap);
                if (!valid) continue;
                n_valid++;
                for (size_t f = 0; f < AP_COUNT(formats); f++) {
                  if (f == 3 && ov) continue; /* the JSON round trip goes through a file: a sample suffices */
                  ap_status st;
                  char *out = export_text(ctx, bases[b].model, text, formats[f], &st);
                  if (st && st != AP_UNSUPPORTED) fail_msg("%s as %s: %s", text, formats[f], ap_ctx_error(ctx));
                  if (st) {
                    n_refused[f]++;
                    char prefix[32];
                    snprintf(prefix, sizeof prefix, "%s export: ", formats[f]);
                    if (strncmp(ap_ctx_error(ctx), prefix, strlen(prefix)) != 0)
                      fail_msg("%s: the reason does not name the format: %s", text, ap_ctx_error(ctx));
                  } else {
                    n_ok[f]++;
                  }
                  free(out);
                }
              }
  ap_ctx_free(ctx);
  print_message("# %d valid plans; exported (refused): megatron %d (%d), deepspeed %d (%d), torchtitan %d (%d), json %d\n",
                n_valid, n_ok[0], n_refused[0], n_ok[1], n_refused[1], n_ok[2], n_refused[2], n_ok[3]);
  assert_true(n_valid > 2000);
  assert_true(n_ok[0] > n_valid / 3); /* Megatron refuses zero-bubble schedules, per-op recompute and DeepSeek's v = 2 split */
  assert_true(n_ok[1] > 300);
  assert_true(n_ok[2] > n_valid / 3); /* fp16 and partial full recompute are refused */
  assert_int_equal(n_refused[3], 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_megatron_cases), cmocka_unit_test(test_deepspeed_torchtitan_keys),
      cmocka_unit_test(test_refused),        cmocka_unit_test(test_json_round_trip),
      cmocka_unit_test(test_header_notes),   cmocka_unit_test(test_sweep),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
