/* What every export must agree on with its plan, for the export tests (test_export.c, test_export_sweep.c):
 * the models they export, plans written in JSON with single quotes, and one check per format run on every
 * export: Megatron-LM's flag combinations (megatron/training/arguments.py, transformer_config.py @ d98e8a64),
 * torchrun's world size, tp·pp·cp·dp and the layer split Megatron derives; DeepSpeed's batch identity;
 * torchtitan's degrees, token counts and module_fqns_per_model_part; the JSON round trip; and, through
 * export_check.h, every flag and key against the frameworks' own definitions. Static functions: include once,
 * after testutil.h and export_check.h. */
#ifndef AP_TESTS_EXPORT_VERIFY_H
#define AP_TESTS_EXPORT_VERIFY_H

#include <unistd.h>

#include "core/core.h"
#include "core/jsonx.h"
#include "model/model.h"
#include "plan/export.h"
#include "plan/plan.h"
#include "plan/plan_api.h"

enum { M_LLAMA70, M_DSV3, M_GPT3, M_MIXTRAL, M_GPT2, M_MLP3, M_LLAMA8, M_LLAMA31_8, M_QWEN3MOE, M_MISTRAL, M_QWEN25, M_COUNT };
static const char *const model_names[M_COUNT] = {"llama-3-70b", "deepseek-v3", "gpt3-175b", "mixtral-8x7b", "gpt2",
                                                 "data/models/examples/mlp-3.json", "llama-3-8b", "llama-3.1-8b",
                                                 "qwen3-30b-a3b", "mistral-7b", "qwen2.5-7b"};
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
  ap->loss_set = json_object_get(root, "fused_loss") != NULL; /* as ap_plan_load reads it */
  json_decref(root);
  ap_ctx_free(ctx);
  ap->dp_set = ap->n_micro_set = ap->gbs_set = true;
  return ap;
}

/* ---- The frameworks' own checks, as extract.py read them (check:*, base:*, default:*, module:*, pp:* rows) ---- */

/* Whether the comma-separated list holds v. */
static bool list_has(const char *list, const char *v) { return in_choices(list, v) && list[0]; }

/* The names of a Python or TOML list of strings '["a", "b"]' as "a,b". */
static void str_list(const char *v, char *out, size_t cap) {
  out[0] = '\0';
  for (const char *q = strchr(v, '"'); q; q = strchr(q, '"')) {
    const char *e = strchr(q + 1, '"');
    if (!e) break;
    size_t n = strlen(out);
    snprintf(out + n, cap - n, "%s%.*s", n ? "," : "", (int)(e - q - 1), q + 1);
    q = e + 1;
  }
}

/* The launch a torchrun-based export states (n_nodes nodes; < 0: the first torchrun's --nnodes): on one node
 * torchrun --standalone; on several the c10d rendezvous on the first node, the srun line and the command per
 * node, and never a node rank or master address set by hand. */
static void check_torchrun_launch(const char *text, int64_t n_nodes) {
  const char *nn = strstr(text, "torchrun ");
  nn = nn ? strstr(nn, "--nnodes ") : NULL;
  if (n_nodes < 0) n_nodes = nn ? strtoll(nn + 9, NULL, 10) : 0;
  if (n_nodes < 1) fail_msg("no torchrun --nnodes N in the launch:\n%s", text);
  if (strstr(text, "${NODE_RANK") || strstr(text, "--node-rank") || strstr(text, "${MASTER_ADDR"))
    fail_msg("a launch that relies on NODE_RANK or MASTER_ADDR set by hand:\n%s", text);
  if (n_nodes <= 1) {
    if (!strstr(text, "torchrun --standalone --nnodes 1 ")) fail_msg("one node without torchrun --standalone:\n%s", text);
    return;
  }
  static const char *const need[] = {"--rdzv-backend c10d", "--rdzv-endpoint ", "--rdzv-id ", "srun --nodes ",
                                     "--ntasks-per-node 1", "on each of the "};
  for (size_t i = 0; i < AP_COUNT(need); i++)
    if (!strstr(text, need[i])) fail_msg("a %lld-node launch lacks %s:\n%s", (long long)n_nodes, need[i], text);
}

/* The commit the table's meta row names for fw appears in the export (its first 8 hex digits, or the tag). */
static void check_commit(const char *fw, const char *text) {
  if (!text) fail_msg("the %s export names no commit", fw);
  const fa_row *r = fa_find("meta", fw);
  if (!r) fail_msg("framework_args.tsv has no meta row for %s", fw);
  const char *at = strchr(r->type, '@');
  char want[16];
  const char *tag = strstr(r->type, "(v");
  if (tag) snprintf(want, sizeof want, "%.*s", (int)strcspn(tag + 1, ")"), tag + 1);
  else snprintf(want, sizeof want, "%.8s", at ? at + 1 : "");
  if (!strstr(text, want)) fail_msg("the %s export does not name %s, the commit its names are checked at:\n%s", fw, want, text);
}

/* The module lists of module_fqns_per_model_part, one chunk per line after `indent[`, against the version's
 * modules (module:MODEL) and its own split's first and last stage (pp:first_stage, pp:last_stage):
 * distributed/pipeline_parallel.py _split_module drops whatever a chunk does not list, so a name that is no
 * module, or a last stage without the head, trains a model without it. */
static void check_fqns(const char *fw, const char *model, const char *at, const char *indent, const char *text) {
  char key[96];
  snprintf(key, sizeof key, "module:%s", model);
  const fa_row *mods = fa_find(fw, key), *first = fa_find(fw, "pp:first_stage"), *last = fa_find(fw, "pp:last_stage");
  if (!mods || !first || !last) fail_msg("framework_args.tsv lacks %s, pp:first_stage or pp:last_stage of %s", key, fw);
  size_t il = strlen(indent);
  int64_t c = 0;
  char prev_names[4096] = "";
  for (; strncmp(at, indent, il) == 0 && at[il] == '['; c++) {
    const char *eol = strchr(at, '\n');
    char line[4096], names[4096];
    snprintf(line, sizeof line, "%.*s", (int)(eol - at), at);
    str_list(line, names, sizeof names);
    for (char *save = NULL, *tok = strtok_r(names, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
      char top[64];
      snprintf(top, sizeof top, "%.*s", (int)strcspn(tok, "."), tok);
      if (!list_has(mods->choices, top)) fail_msg("%s lists %s, not a module of %s's model (%s):\n%s", fw, tok, model, mods->choices, text);
      if (c > 0 && list_has(first->choices, tok)) fail_msg("%s: %s outside the first chunk:\n%s", fw, tok, text);
    }
    str_list(line, names, sizeof names);
    if (c == 0 && strncmp(names, first->choices, strlen(first->choices)) != 0)
      fail_msg("%s: the first chunk does not start with %s:\n%s", fw, first->choices, text);
    snprintf(prev_names, sizeof prev_names, "%s", names);
    at = eol + 1;
  }
  size_t n = strlen(prev_names), m = strlen(last->choices);
  if (c == 0 || n < m || strcmp(prev_names + n - m, last->choices) != 0)
    fail_msg("%s: the last chunk does not end with %s (torchtitan drops what it leaves out):\n%s", fw, last->choices, text);
}

/* The value of a field after the export ran: its own line, else the base config's (base:MODEL:FUNCTION:field),
 * else the dataclass default (default:field); lists as "a,b", booleans True/False. */
static void effective(const char *text, const char *model, const char *fn, const char *field, char *out, size_t cap);

/* ---- Megatron argument lists ---- */

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
    /* "Transformer Engine cross entropy loss fusion is disabled due to stability issues" (arguments.py). */
    {EXCLUDES, "--cross-entropy-loss-fusion", NULL, "--cross-entropy-fusion-impl", "te", NULL},
    {REQUIRES, "--use-rope-scaling", NULL, "--position-embedding-type", "rope", NULL},
    {REQUIRES, "--moe-shared-expert-intermediate-size", NULL, "--disable-bias-linear", NULL, NULL},
    {REQUIRES, "--add-qkv-bias", NULL, "--disable-bias-linear", NULL, NULL},
    {REQUIRES, "--window-attn-skip-freq", NULL, "--window-size", NULL, NULL},
    {REQUIRES, "--qk-pos-emb-head-dim", NULL, "--multi-latent-attention", NULL, NULL},
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
 * parallelism", pipeline_parallel_layer_layout.py), asserting each of its divisibility checks. Chunk c runs on
 * rank c mod pp; without a layout each of a rank's v chunks holds an equal share of its layers. */
static void megatron_split(const mflags *m, const graph *g, int64_t *out, int64_t *n_out, const char *text) {
  int64_t L = mg_int(m, "--num-layers", 0), P = mg_int(m, "--pipeline-model-parallel-size", 1);
  const char *layout = mg_get(m, "--pipeline-model-parallel-layout");
  if (layout) {
    layout_split(layout, out, n_out, mg_int(m, "--mtp-num-layers", 0), text);
    if (*n_out % P != 0) fail_msg("the layout's %lld stages do not divide by pp = %lld:\n%s", (long long)*n_out, (long long)P, text);
    int64_t sum = 0;
    for (int64_t c = 0; c < *n_out; c++) sum += out[c];
    if (sum != L) fail_msg("the layout holds %lld layers, --num-layers %lld:\n%s", (long long)sum, (long long)L, text);
    return;
  }
  (void)g;
  int64_t V = 1;
  if (mg_get(m, "--num-layers-per-virtual-pipeline-stage")) {
    int64_t k = mg_int(m, "--num-layers-per-virtual-pipeline-stage", 0);
    if (L % P != 0 || k <= 0 || (L / P) % k != 0) fail_msg("layers per virtual stage do not divide:\n%s", text);
    V = L / P / k;
  }
  if (L % P != 0 || (L / P) % V != 0) fail_msg("--num-layers %% pp != 0 without a layout:\n%s", text);
  *n_out = P * V;
  for (int64_t c = 0; c < P * V; c++) out[c] = L / P / V;
}

/* The graph's layers in forward order as 1 where is_one holds. */
static int layer_bits(const graph *g, bool (*is_one)(const graph_block *), int *out, int cap) {
  int n = 0;
  for (int i = 0; i < g->n_blocks; i++)
    if (g->blocks[i].role == BLOCK_LAYER)
      for (int64_t r = 0; r < g->blocks[i].repeat && n < cap; r++) out[n++] = is_one(&g->blocks[i]);
  return n;
}

static bool windowed(const graph_block *blk) {
  for (int j = 0; j < blk->n_ops; j++)
    if (blk->ops[j].kind == OP_ATTENTION) return blk->ops[j].window > 0;
  return false;
}

/* A pattern flag (--moe-layer-freq, --window-attn-skip-freq) expands to the graph's layers. */
static void check_pattern(const mflags *m, const char *flag, const graph *g, bool (*is_one)(const graph_block *),
                          const char *text) {
  const char *v = mg_get(m, flag);
  if (!v) return;
  int got[1024], want[1024];
  int n = expand_pattern(v, got, 1024), k = layer_bits(g, is_one, want, 1024);
  if (n != k) fail_msg("%s %s covers %d layers, the model has %d:\n%s", flag, v, n, k, text);
  for (int i = 0; i < n; i++)
    if (got[i] != want[i]) fail_msg("%s %s: layer %d is %d, the model's is %d:\n%s", flag, v, i, got[i], want[i], text);
}

/* Everything the Megatron text must agree on with the plan: the rules, the degrees, the batch and the split. */
static void check_megatron(const plan *p, const graph *g, const char *text) {
  mflags m;
  parse_megatron(text, &m);
  check_commit("megatron", text);
  check_torchrun_launch(text, m.nnodes);
  megatron_against_table(&m, text);
  check_rules(&m, text);
  if (m.nnodes * m.nproc != plan_n_devices(p))
    fail_msg("torchrun launches %lld x %lld ranks, the plan has %lld:\n%s", (long long)m.nnodes, (long long)m.nproc,
             (long long)plan_n_devices(p), text);
  /* Megatron's dp = world / (tp·pp·cp) (it has no dp flag). */
  assert_int_equal(m.nnodes * m.nproc / (p->tp * p->pp * p->cp), p->dp);
  assert_int_equal(mg_get(&m, "--use-tp-pp-dp-mapping") != NULL,
                   !export_order_is(p, "tp-cp-ep-dp-pp") && export_order_is(p, "tp-cp-ep-pp-dp"));
  /* "Bias in Moe is only supported when ETP==1"; the expert bias needs a sigmoid router (transformer_config.py). */
  if (mg_get(&m, "--num-experts") && !mg_get(&m, "--disable-bias-linear"))
    assert_int_equal(mg_int(&m, "--expert-tensor-parallel-size", 0), 1);
  if (mg_get(&m, "--moe-router-enable-expert-bias")) assert_string_equal(mg_get(&m, "--moe-router-score-function"), "sigmoid");
  check_pattern(&m, "--moe-layer-freq", g, export_block_is_moe, text);
  check_pattern(&m, "--window-attn-skip-freq", g, windowed, text);
  assert_int_equal(mg_int(&m, "--tensor-model-parallel-size", 0), p->tp);
  assert_int_equal(mg_int(&m, "--pipeline-model-parallel-size", 0), p->pp);
  assert_int_equal(mg_int(&m, "--context-parallel-size", 0), p->cp);
  assert_int_equal(mg_int(&m, "--micro-batch-size", 0), p->micro_batch_size);
  assert_int_equal(mg_int(&m, "--global-batch-size", 0), p->global_batch_size);
  assert_int_equal(mg_int(&m, "--expert-model-parallel-size", 1), p->ep);
  assert_int_equal(mg_get(&m, "--sequence-parallel") != NULL, p->sequence_parallel && p->tp > 1);
  int64_t split[PLAN_MAX_CHUNKS], n = 0;
  megatron_split(&m, g, split, &n, text);
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

/* DeepSpeed's launch: the deepspeed launcher's options are runner.py's (launcher:*), the script's those
 * deepspeed.add_config_arguments adds (script:*); several nodes name a hostfile and the first node's address,
 * and the SLURM line is a torchrun with the c10d rendezvous. */
static void check_deepspeed_launch(json_t *launch, const char *text) {
  if (!json_is_object(launch)) fail_msg("DeepSpeed config without autopar.launch:\n%s", text);
  const char *cmd = json_string_value(json_object_get(launch, "deepspeed"));
  const char *rdzv = json_string_value(json_object_get(launch, "rendezvous"));
  if (!cmd || !rdzv || strncmp(cmd, "deepspeed ", 10) != 0) fail_msg("autopar.launch.deepspeed:\n%s", text);
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", cmd);
  bool script = false, multi = strstr(cmd, "--num_nodes") != NULL;
  for (char *save = NULL, *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
    if (strcmp(tok, "TRAIN.py") == 0) script = true;
    if (strncmp(tok, "--", 2) != 0) continue;
    char key[96];
    snprintf(key, sizeof key, "%s%.80s", script ? "script:" : "launcher:", tok);
    if (!fa_find("deepspeed", key)) fail_msg("%s is not a DeepSpeed %s option (framework_args.tsv):\n%s", tok,
                                             script ? "script" : "launcher", text);
  }
  if (multi) {
    if (!strstr(cmd, "--hostfile") || !strstr(cmd, "--master_addr")) fail_msg("multi-node deepspeed launch:\n%s", text);
    const char *slurm = json_string_value(json_object_get(launch, "slurm"));
    if (!slurm || strncmp(slurm, "srun --nodes ", 13) != 0 || !strstr(slurm, "--rdzv-backend c10d") ||
        !strstr(slurm, "--rdzv-endpoint "))
      fail_msg("no SLURM line with torchrun's c10d rendezvous:\n%s", text);
  }
}

static void check_deepspeed(const plan *p, const char *text) {
  json_error_t err;
  json_t *root = json_loads(text, 0, &err);
  if (!root) fail_msg("DeepSpeed config does not parse: %s:%d: %s\n%s", err.source, err.line, err.text, text);
  deepspeed_object(root, "", text);
  int64_t train = json_integer_value(json_object_get(root, "train_batch_size"));
  int64_t micro = json_integer_value(json_object_get(root, "train_micro_batch_size_per_gpu"));
  int64_t ga = json_integer_value(json_object_get(root, "gradient_accumulation_steps"));
  json_t *ap = json_object_get(root, "autopar");
  assert_non_null(ap);
  int64_t dp = json_integer_value(json_object_get(ap, "data_parallel"));
  assert_int_equal(train, micro * ga * dp); /* DeepSpeed's _batch_assertion, with an mpu */
  const char *identity = json_string_value(json_object_get(ap, "batch_identity"));
  assert_non_null(identity);
  if (p->tp * p->pp > 1) assert_non_null(strstr(identity, "mpu=mpu"));
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
  check_commit("deepspeed", json_string_value(json_object_get(ap, "target")));
  check_deepspeed_launch(json_object_get(ap, "launch"), text);
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

/* Every "key = value" line under its [section] (arrays over several lines included) is a torchtitan v0.2.2
 * job-config field with a value of its type; [model] names a registry flavor, converters registered names. */
static void toml_against_table(const char *text) {
  char section[64] = "", model[64] = "";
  for (const char *line = text; *line;) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    char buf[512];
    snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), line);
    line += len + (end != NULL);
    if (!buf[0] || buf[0] == '#' || buf[0] == ' ' || buf[0] == ']') continue;
    if (buf[0] == '[') {
      snprintf(section, sizeof section, "%.*s", (int)(strcspn(buf + 1, "]")), buf + 1);
      continue;
    }
    char *eq = strstr(buf, " = ");
    if (!eq) fail_msg("not a TOML key line: %s\n%s", buf, text);
    *eq = '\0';
    char name[160];
    snprintf(name, sizeof name, "%.60s.%.90s", section, buf);
    const fa_row *r = fa_find("torchtitan-toml", name);
    if (!r) fail_msg("torchtitan v0.2.2 has no field %s (framework_args.tsv):\n%s", name, text);
    if (!tt_value_fits(r, eq + 3, false)) fail_msg("%s = %s: not a %s %s:\n%s", name, eq + 3, r->type, r->choices, text);
    if (strcmp(name, "model.name") == 0) snprintf(model, sizeof model, "%.*s", (int)strlen(eq + 3) - 2, eq + 4);
    if (strcmp(name, "model.flavor") == 0) {
      char key[160];
      snprintf(key, sizeof key, "model:%s:%.*s", model, (int)strlen(eq + 3) - 2, eq + 4);
      if (!fa_find("torchtitan-toml", key)) fail_msg("no torchtitan v0.2.2 flavor %s:\n%s", key, text);
    }
    if (strcmp(name, "model.converters") == 0) {
      char key[160];
      snprintf(key, sizeof key, "converter:%.*s", (int)strcspn(eq + 5, "\""), eq + 5);
      if (!fa_find("torchtitan-toml", key)) fail_msg("no torchtitan v0.2.2 %s:\n%s", key, text);
    }
  }
  if (!model[0]) fail_msg("no [model] name:\n%s", text);
}

static void check_torchtitan_toml(const plan *p, const graph *g, const char *text) {
  toml_against_table(text);
  check_commit("torchtitan-toml", text);
  check_torchrun_launch(text, -1);
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
    char model[64];
    const char *nm = strstr(text, "\nname = \"");
    assert_non_null(nm);
    snprintf(model, sizeof model, "%.*s", (int)strcspn(nm + 9, "\""), nm + 9);
    check_fqns("torchtitan-toml", model, at, "  ", text);
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


/* The value of "    config.FIELD = " in the Python form, or NULL. */
static const char *py_value(const char *text, const char *field, char *buf, size_t cap) {
  char pat[128];
  snprintf(pat, sizeof pat, "\n    config.%s = ", field);
  const char *at = strstr(text, pat);
  if (!at) return NULL;
  at += strlen(pat);
  snprintf(buf, cap, "%.*s", (int)strcspn(at, "\n"), at);
  return buf;
}

static int64_t py_int(const char *text, const char *field) {
  char buf[64];
  if (!py_value(text, field, buf, sizeof buf)) fail_msg("torchtitan config lacks config.%s:\n%s", field, text);
  return strtoll(buf, NULL, 10);
}

static void effective(const char *text, const char *model, const char *fn, const char *field, char *out, size_t cap) {
  char buf[512], key[192];
  if (py_value(text, field, buf, sizeof buf)) {
    if (buf[0] == '[') str_list(buf, out, cap);
    else snprintf(out, cap, "%s", buf);
    return;
  }
  snprintf(key, sizeof key, "base:%.40s:%.90s:%.50s", model, fn, field);
  const fa_row *r = fa_find("torchtitan", key);
  if (!r) {
    snprintf(key, sizeof key, "default:%s", field);
    r = fa_find("torchtitan", key);
  }
  snprintf(out, cap, "%s", r ? r->choices : "");
}

/* torchtitan's refusals at b5bcd76c, applied to base + export: async TP needs the model compiled
 * (CompileConfig.__post_init__); CUDA graphs need pipeline parallelism off, and expert parallelism only with a
 * dispatcher that does not synchronise (Trainer.Config._validate_cuda_graphs), unless turned off; the loss the
 * export keeps or unwraps is the base config's ChunkedLossWrapper (components/loss.py). */
static void check_torchtitan_rules(const plan *p, const char *model, const char *fn, const char *text) {
  char v[512], v2[512], key[160];
  const fa_row *r;
  effective(text, model, fn, "compile.enable_async_tensor_parallel", v, sizeof v);
  if (strcmp(v, "True") == 0 && (r = fa_find("torchtitan", "check:async_tp"))) {
    effective(text, model, fn, "compile.enable", v, sizeof v);
    effective(text, model, fn, "compile.components", v2, sizeof v2);
    if (strcmp(v, "True") != 0 || !list_has(v2, "model"))
      fail_msg("async TP with compile.enable %s and components [%s]: torchtitan raises \"Async TP requires 'model' in "
               "--compile.components and --compile.enable\" (%s):\n%s", v, v2, r->choices, text);
  }
  effective(text, model, fn, "training.disable_cuda_graphs", v, sizeof v);
  bool off = strcmp(v, "True") == 0;
  if (p->pp > 1 && (r = fa_find("torchtitan", "check:cuda_graphs:pp")) && !off)
    fail_msg("pp = %lld with CUDA graphs on: torchtitan raises \"CUDA graphs do not support pipeline parallelism yet\" "
             "unless %s:\n%s", (long long)p->pp, r->choices, text);
  if (p->ep > 1 && (r = fa_find("torchtitan", "check:cuda_graphs:ep")) && !off) {
    snprintf(key, sizeof key, "registry:%.64s:moe_comm_backend", model);
    const fa_row *b = fa_find("torchtitan", key);
    snprintf(key, sizeof key, "comm_backend:%.64s", b ? b->choices : "");
    const fa_row *d = fa_find("torchtitan", key), *ok = fa_find("torchtitan", "check:cuda_graphs:ep_dispatchers");
    if (strstr(text, "moe_comm_backend")) fail_msg("the checks read the registry's default dispatcher only:\n%s", text);
    if (!d || !ok || !list_has(ok->choices, d->choices))
      fail_msg("ep = %lld over %s with CUDA graphs on: torchtitan raises \"CUDA graphs support only expert parallel "
               "token dispatcher configurations without CPU synchronization\" unless %s:\n%s",
               (long long)p->ep, d ? d->choices : "?", r->choices, text);
  }
  snprintf(key, sizeof key, "base:%.40s:%.90s:loss", model, fn);
  const fa_row *loss = fa_find("torchtitan", key);
  bool unwraps = py_value(text, "loss", v, sizeof v) != NULL;
  if (unwraps && strcmp(v, "config.loss.loss_fn") != 0) fail_msg("config.loss = %s:\n%s", v, text);
  if (unwraps == p->fused_loss) fail_msg("the loss line disagrees with the plan's fused_loss %d:\n%s", (int)p->fused_loss, text);
  if (!loss || strcmp(loss->choices, "ChunkedLossWrapper") != 0 || !fa_find("torchtitan", "ChunkedLossWrapper.Config.loss_fn"))
    fail_msg("%s() does not use ChunkedLossWrapper, whose loss_fn the export keeps or unwraps:\n%s", fn, text);
}

/* The Python form: each "config.a.b = value" a field of torchtitan's dataclasses at b5bcd76c with a value of
 * its type; the base config function, the flavor and the classes constructed exist there; and the degrees,
 * token counts and split are the plan's. */
static void check_torchtitan(const plan *p, const graph *g, const char *text) {
  char model[64] = "", buf[512];
  const char *imp = strstr(text, "\nfrom torchtitan.models.");
  if (!imp || sscanf(imp, "\nfrom torchtitan.models.%63[a-z0-9_] import model_registry", model) != 1)
    fail_msg("no model_registry import:\n%s", text);
  const char *base = strstr(text, "\n    config = ");
  char fn[96];
  if (!base || sscanf(base, "\n    config = %95[a-z0-9_]()", fn) != 1) fail_msg("no base config:\n%s", text);
  snprintf(buf, sizeof buf, "config:%s:%s", model, fn);
  if (!fa_find("torchtitan", buf)) fail_msg("torchtitan has no config function %s:\n%s", buf, text);
  for (const char *line = strstr(text, "\n    config."); line; line = strstr(line + 1, "\n    config.")) {
    char field[128];
    if (sscanf(line, "\n    config.%127[a-z_.] = ", field) != 1) fail_msg("bad line %.60s", line);
    py_value(text, field, buf, sizeof buf);
    if (strcmp(field, "model_spec") == 0) {
      char flavor[64], key[160];
      if (sscanf(buf, "model_registry(\"%63[^\"]\"", flavor) != 1) fail_msg("model_spec = %s", buf);
      snprintf(key, sizeof key, "model:%s:%s", model, flavor);
      if (!fa_find("torchtitan", key)) fail_msg("torchtitan has no flavor %s:\n%s", key, text);
      if (strstr(buf, "converters=") && !fa_find("torchtitan", "class:Float8LinearConverter.Config"))
        fail_msg("no Float8LinearConverter:\n%s", text);
      continue;
    }
    if (strcmp(field, "activation_checkpoint") == 0) {
      char cls[64], key[96];
      if (strcmp(buf, "None") == 0) continue;
      if (sscanf(buf, "%63[A-Za-z].Config()", cls) != 1) fail_msg("activation_checkpoint = %s", buf);
      snprintf(key, sizeof key, "class:%s.Config", cls);
      if (!fa_find("torchtitan", key)) fail_msg("torchtitan has no %s:\n%s", key, text);
      continue;
    }
    const fa_row *r = fa_find("torchtitan", field);
    if (!r) fail_msg("torchtitan has no field %s (framework_args.tsv):\n%s", field, text);
    if (!tt_value_fits(r, buf, true)) fail_msg("config.%s = %s: not a %s:\n%s", field, buf, r->type, text);
  }
  check_torchtitan_rules(p, model, fn, text);
  check_commit("torchtitan", text);
  check_torchrun_launch(text, -1);
  /* parallel_dims.py: dp_replicate·dp_shard·cp·tp·pp = world; trainer.py: the token identity. */
  int64_t rep = py_int(text, "parallelism.data_parallel_replicate_degree");
  int64_t shard = py_int(text, "parallelism.data_parallel_shard_degree");
  int64_t tp = py_int(text, "parallelism.tensor_parallel_degree"), pp = py_int(text, "parallelism.pipeline_parallel_degree");
  int64_t cp = py_int(text, "parallelism.context_parallel_degree"), ep = py_int(text, "parallelism.expert_parallel_degree");
  assert_int_equal(rep * shard * cp * tp * pp, plan_n_devices(p));
  assert_int_equal(rep * shard, p->dp);
  assert_int_equal(ep, p->ep);
  if (ep > 1) assert_int_equal((shard * cp * tp) % ep, 0); /* EP borrows from dp_shard·cp·tp */
  int64_t seq = export_seq_length(p, g);
  int64_t mb = py_int(text, "training.num_tokens_per_microbatch_per_dp_rank");
  int64_t step = py_int(text, "training.num_tokens_per_train_step");
  int64_t n_pp = pp > 1 ? py_int(text, "parallelism.num_pp_microbatches") : 1;
  assert_int_equal(py_int(text, "training.max_context_length"), seq);
  assert_int_equal(mb, p->micro_batch_size * seq);
  assert_int_equal(step, p->global_batch_size * seq);
  assert_int_equal(step % (mb * n_pp * rep * shard), 0);
  assert_int_equal(step / (mb * n_pp * rep * shard) * n_pp, p->n_micro_batches); /* accumulation × pp micro-batches */
  if (pp > 1) {
    int32_t want[PLAN_MAX_CHUNKS];
    assert_true(export_chunk_layers(p, g, want));
    const char *at = strstr(text, "\n    config.parallelism.module_fqns_per_model_part = [\n");
    assert_non_null(at);
    at = strchr(at + 1, '\n') + 1;
    check_fqns("torchtitan", model, at, "        ", text);
    int64_t c = 0, next = 0;
    for (; strncmp(at, "        [", 9) == 0; c++) {
      const char *eol = strchr(at, '\n');
      int32_t n = 0;
      for (const char *q = strstr(at, "\"layers."); q && q < eol; q = strstr(q + 1, "\"layers."), n++)
        if (strtoll(q + 8, NULL, 10) != next++) fail_msg("layers out of order in chunk %lld:\n%s", (long long)c, text);
      if (c >= plan_n_chunks(p) || n != want[c]) fail_msg("chunk %lld lists %d layers:\n%s", (long long)c, n, text);
      at = eol + 1;
    }
    assert_int_equal(c, plan_n_chunks(p));
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
  else if (strcmp(format, "torchtitan-toml") == 0) check_torchtitan_toml(p, g, text);
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

#endif
