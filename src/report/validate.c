/* Validation against measured runs (report layer): rows of a runs table in, predictions and error figures
 * out. See validate.h for what is compared and how; ap_validate, the public entry point, is at the end.
 *
 * Reading order: row_read (the row's fields, checked: bad input stops the run), row_model and row_cluster
 * (the row's model and cluster: failures become the row's error), row_predict (plan completion and cost),
 * summarise (the figures), then the JSON and text writers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/jsonx.h"
#include "hw/hw.h"
#include "model/hfconfig.h"
#include "model/model.h"
#include "plan/summary.h"
#include "report/runs_csv.h"
#include "report/validate.h"
#include "search/complete.h"
#include "search/search.h"

static const char *const mem_names[] = {
#define X(e, s) s,
    VALIDATE_MEM_MAP(X)
#undef X
};
_Static_assert(AP_COUNT(mem_names) == VALIDATE_MEM_COUNT_, "mem_convention names and enum disagree");

struct validate_report {
  arena *a;
  bool keep;
  bool search;            /* validate_file_search: the planner's best plan for every row */
  double search_budget_s; /* per row */
  runs_table *t;
  int64_t n_rows;
  validate_row *rows;
  validate_summary sum;
};

/* TUNING: the time budget of the planner's search on one row of `validate --search`, seconds. Most rows (up to
 * a few hundred devices) finish in milliseconds; the largest meshes take longer, and 0.5 s each keeps a run
 * over the 385 reference rows near a minute on two cores. */
static const double VALIDATE_SEARCH_BUDGET_S = 0.5;

/* A row's miss: what a row the tool cannot model adds to MAPE, as if it had predicted no throughput. */
static const double MISS_APE = 1.0;

double validate_miss_ape(void) { return MISS_APE; }

const char *validate_mem_name(validate_mem_convention c) {
  return (int)c >= 0 && c < VALIDATE_MEM_COUNT_ ? mem_names[c] : "?";
}

/* ---- Reading a row ------------------------------------------------------------------------------------- */

/* The architecture as the row states it inline. */
typedef struct {
  const char *model_config; /* "" when none */
  bool has_layers, has_hidden, has_heads, has_vocab, has_ffn, has_kv, has_mlp, has_experts, has_top_k, has_moe_ffn;
  int64_t layers, hidden, heads, vocab, ffn, kv, experts, top_k, moe_ffn;
  int mlp; /* index into mlp_names */
  int arch; /* index into arch_names; -1 when empty */
} arch_spec;

static const char *const mlp_names[] = {"gelu", "swiglu"};
static const char *const arch_names[] = {"dense", "moe"};
static const char *const outcome_names[] = {"ok", "oom"};
/* The cluster as the row states it. */
typedef struct {
  const char *gpu;
  int64_t num_gpus, gpus_per_node;
  bool has_gpus_per_node, has_inter_bw;
  double inter_GBps;
} cluster_spec;

typedef struct {
  arch_spec arch;
  cluster_spec cl;
  plan partial;
  unsigned stated;
  bool selective; /* recompute "selective": which selective granularity depends on the model (row_predict) */
} row_spec;

/* The columns that are a run's inputs: what a prediction may read. Two rows equal in all of them are the same
 * configuration measured twice (data_floor.h). */
static const char *const input_columns[] = {
    "model_config", "arch", "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_kv_heads",
    "vocab_size", "seq_length", "mlp", "num_experts", "top_k", "moe_ffn_hidden_size", "gpu", "num_gpus",
    "gpus_per_node", "inter_node_GBps_per_gpu", "global_batch_size", "micro_batch_size", "tp", "pp", "dp", "cp", "ep",
    "vpp", "sequence_parallel", "recompute", "zero_stage", "precision"};

/* The row's input columns joined by a unit separator, each trimmed; vpp is left out without pipelining. */
static const char *input_key(arena *a, const runs_table *t, const runs_row *r) {
  strbuf sb = {0};
  const char *pp = runs_text(t, r, "pp");
  while (*pp == ' ') pp++;
  bool piped = *pp && strcmp(pp, "1") != 0;
  for (size_t i = 0; i < AP_COUNT(input_columns); i++) {
    const char *x = runs_text(t, r, input_columns[i]);
    if (strcmp(input_columns[i], "vpp") == 0 && !piped) x = "";
    while (*x == ' ') x++;
    size_t n = strlen(x);
    while (n > 0 && x[n - 1] == ' ') n--;
    sb_printf(&sb, "%.*s\x1f", (int)n, x);
  }
  char *joined = sb_take(&sb);
  const char *key = joined ? arena_strdup(a, joined) : NULL;
  free(joined);
  return key;
}

/* Reads every field the prediction needs; bad input is an error with file:line:col. */
static ap_status row_read(ap_ctx *ctx, const runs_table *t, const runs_row *r, validate_row *v, row_spec *rs) {
  ap_status st;
  memset(rs, 0, sizeof *rs);
  v->line = r->line;
  v->id = runs_text(t, r, "id");
  v->model = runs_text(t, r, "model");
  v->gpu = runs_text(t, r, "gpu");
  v->source = runs_text(t, r, "source");
  v->ape = v->mem_ape = NAN;
  if (!*v->id) return runs_fail(ctx, t, r, "id", AP_INVALID, "expected a row id, got an empty field");
  if (!*v->gpu) return runs_fail(ctx, t, r, "gpu", AP_INVALID, "expected a device preset name, got an empty field");
  if (!*v->model) v->model = v->id;

  /* Outcome and ground truth. */
  int outcome = 0;
  if ((st = runs_enum(ctx, t, r, "outcome", false, outcome_names, 2, &outcome, NULL))) return st;
  v->measured_oom = outcome == 1;
  if ((st = runs_f64(ctx, t, r, "measured_tokens_per_s_per_gpu", !v->measured_oom, 1e-9, INFINITY,
                     &v->measured_tokens, &v->has_measured)))
    return st;
  bool has_mem_conv = false;
  int conv = 0;
  if ((st = runs_f64(ctx, t, r, "measured_peak_mem_GiB", false, 1e-9, INFINITY, &v->measured_mem_bytes, &v->has_mem)))
    return st;
  if ((st = runs_enum(ctx, t, r, "mem_convention", v->has_mem, mem_names, VALIDATE_MEM_COUNT_, &conv, &has_mem_conv)))
    return st;
  v->measured_mem_bytes *= 1073741824.0;
  v->mem_convention = (validate_mem_convention)conv;

  /* Architecture. Without a model_config the inline columns must say enough to build a transformer. */
  arch_spec *a = &rs->arch;
  a->model_config = runs_text(t, r, "model_config");
  while (*a->model_config == ' ') a->model_config++;
  const char *why = *a->model_config ? util_relpath_problem(a->model_config) : NULL;
  if (why) return runs_fail(ctx, t, r, "model_config", AP_INVALID, "expected a file name inside models/; \"%.120s\" %s", a->model_config, why);
  bool need = !*a->model_config;
  a->arch = -1;
  if ((st = runs_enum(ctx, t, r, "arch", false, arch_names, 2, &a->arch, NULL)) ||
      (st = runs_i64(ctx, t, r, "num_layers", need, 1, TF_MAX_LAYERS, &a->layers, &a->has_layers)) ||
      (st = runs_i64(ctx, t, r, "hidden_size", need, 1, (int64_t)1 << 24, &a->hidden, &a->has_hidden)) ||
      (st = runs_i64(ctx, t, r, "ffn_hidden_size", false, 1, (int64_t)1 << 24, &a->ffn, &a->has_ffn)) ||
      (st = runs_i64(ctx, t, r, "num_attention_heads", need, 1, (int64_t)1 << 24, &a->heads, &a->has_heads)) ||
      (st = runs_i64(ctx, t, r, "num_kv_heads", false, 1, (int64_t)1 << 24, &a->kv, &a->has_kv)) ||
      (st = runs_i64(ctx, t, r, "vocab_size", need, 1, (int64_t)1 << 24, &a->vocab, &a->has_vocab)) ||
      (st = runs_enum(ctx, t, r, "mlp", false, mlp_names, 2, &a->mlp, &a->has_mlp)) ||
      (st = runs_i64(ctx, t, r, "num_experts", false, 1, (int64_t)1 << 24, &a->experts, &a->has_experts)) ||
      (st = runs_i64(ctx, t, r, "top_k", false, 1, (int64_t)1 << 24, &a->top_k, &a->has_top_k)) ||
      (st = runs_i64(ctx, t, r, "moe_ffn_hidden_size", false, 1, (int64_t)1 << 24, &a->moe_ffn, &a->has_moe_ffn)))
    return st;
  if (need && a->arch == 1 && !a->has_experts)
    return runs_fail(ctx, t, r, "num_experts", AP_INVALID, "expected the expert count of a moe row, got an empty field");
  if (need && a->has_experts && a->experts > 1 && !a->has_top_k)
    return runs_fail(ctx, t, r, "top_k", AP_INVALID, "expected the experts per token of a moe row, got an empty field");

  /* Cluster. */
  cluster_spec *c = &rs->cl;
  c->gpu = v->gpu;
  if ((st = runs_i64(ctx, t, r, "num_gpus", true, 1, HW_MAX_DEVICES, &c->num_gpus, NULL)) ||
      (st = runs_i64(ctx, t, r, "gpus_per_node", false, 1, HW_MAX_DEVICES, &c->gpus_per_node, &c->has_gpus_per_node)) ||
      (st = runs_f64(ctx, t, r, "inter_node_GBps_per_gpu", false, 1e-6, 1e6, &c->inter_GBps, &c->has_inter_bw)))
    return st;
  v->num_gpus = c->num_gpus;

  /* Plan: the batch is always stated; every other field may be empty ("not stated"). */
  plan *p = &rs->partial;
  plan_defaults(p);
  unsigned *s = &rs->stated;
  if ((st = runs_plan_fields(ctx, t, r, p, s))) return st;
  /* "selective" in runs.csv names the model's selective granularity, which row_predict picks. */
  if ((*s & PLAN_F(RECOMPUTE)) && p->recompute == PLAN_RECOMPUTE_SELECTIVE) {
    rs->selective = true;
    p->recompute = PLAN_RECOMPUTE_NONE;
    *s &= ~PLAN_F(RECOMPUTE);
  }
  /* A stated vpp implies the schedule Megatron runs with it. */
  if (*s & PLAN_F(VPP)) {
    p->schedule = p->vpp > 1 ? PLAN_SCHED_INTERLEAVED_1F1B : PLAN_SCHED_1F1B;
    *s |= PLAN_F(SCHEDULE);
  }
  snprintf(p->model, sizeof p->model, "%s", v->model);
  snprintf(p->cluster, sizeof p->cluster, "%s:%lld", v->gpu, (long long)c->num_gpus);
  v->plan = *p;
  v->stated = *s;
  return AP_OK;
}

/* ---- The row's model and cluster ------------------------------------------------------------------------ */

/* A transformer from the inline columns: GPT style (LayerNorm with biases, learned positions, tied
 * embeddings, as Megatron's GPT defaults) for gelu, Llama style (RMSNorm, rotary positions, no biases,
 * untied) for swiglu; FFN 4·hidden and KV heads = heads when empty (README "An empty architecture field
 * takes the usual default"); every layer MoE when the row has experts. */
static void inline_config(const arch_spec *a, int64_t seq, const char *name, tf_config *c) {
  tf_config_defaults(c);
  bool gelu = !a->has_mlp || a->mlp == 0;
  c->name = name;
  c->model_type = gelu ? "gpt (inline)" : "llama (inline)";
  c->source = "inline architecture columns";
  c->n_layers = a->layers;
  c->hidden = a->hidden;
  c->heads = a->heads;
  c->kv_heads = a->has_kv ? a->kv : a->heads;
  c->head_dim = c->head_dim_v = a->heads > 0 ? a->hidden / a->heads : 0;
  c->vocab = a->vocab;
  c->ffn = a->has_ffn ? a->ffn : 4 * a->hidden;
  c->max_pos = seq;
  c->norm = gelu ? NORM_LAYERNORM : NORM_RMSNORM;
  c->norm_bias = gelu;
  c->mlp = gelu ? MLP_PLAIN : MLP_GATED;
  c->learned_pos = gelu;
  c->rope = !gelu;
  c->tied = gelu;
  c->qkv_bias = c->o_bias = c->mlp_bias = gelu;
  if (a->has_experts && a->experts > 1) {
    c->n_experts = a->experts;
    c->top_k = a->has_top_k ? a->top_k : 1;
    c->moe_ffn = a->has_moe_ffn ? a->moe_ffn : c->ffn;
    for (int64_t i = 0; i < c->n_layers && i < TF_MAX_LAYERS; i++) c->is_moe_layer[i] = true;
  }
}

/* The built-in preset that a row's model name stands for: the name lowercased with runs of spaces and
 * underscores as one '-' ("GPT OSS 120B" -> gpt-oss-120b); NULL when there is none. */
static const embedded_file *preset_for_name(const char *model) {
  char want[96 + 24];
  size_t n = 0;
  bool dash = false;
  snprintf(want, sizeof want, "data/models/");
  n = strlen(want);
  for (const char *q = model; *q && n + 6 < sizeof want; q++) {
    char ch = *q;
    if (ch == ' ' || ch == '_') {
      dash = true;
      continue;
    }
    if (dash && n > 12) want[n++] = '-';
    dash = false;
    want[n++] = (char)(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
  }
  snprintf(want + n, sizeof want - n, ".json");
  return embedded_find(want);
}

/* Whether a config agrees with every architecture column the row states (the vocabulary excepted: the row's
 * is the padded one the run used). The columns cannot say a head dimension apart from hidden/heads, sliding
 * windows or attention sinks; a preset of the row's model name that agrees supplies them. */
static bool agrees(const arch_spec *a, const tf_config *c) {
  if (a->has_layers && a->layers != c->n_layers) return false;
  if (a->has_hidden && a->hidden != c->hidden) return false;
  if (a->has_heads && a->heads != c->heads) return false;
  if (a->has_kv && a->kv != c->kv_heads) return false;
  bool moe = a->has_experts && a->experts > 1;
  if (moe != (c->n_experts > 1)) return false;
  if (moe && (a->experts != c->n_experts || (a->has_top_k && a->top_k != c->top_k))) return false;
  if (moe && a->has_moe_ffn && a->moe_ffn != c->moe_ffn) return false;
  return true;
}

/* The built-in preset that a missing models/ file stands for: the longest preset name that is the config's
 * base name or ends it after a '-' ("meta-llama-Llama-3.1-8B.json" -> "llama-3.1-8b"), ignoring case; NULL
 * when none. Presets are data/models/NAME.json files compiled into the library. */
static const embedded_file *preset_for_config(const char *config) {
  static const char dir[] = "data/models/";
  char want[256];
  snprintf(want, sizeof want, "%s", util_basename(config));
  if (util_ends_with(want, ".json")) want[strlen(want) - 5] = '\0';
  for (char *q = want; *q; q++)
    if (*q >= 'A' && *q <= 'Z') *q = (char)(*q - 'A' + 'a');
  size_t n_files, wl = strlen(want), best_len = 0;
  const embedded_file *all = embedded_files(&n_files), *best = NULL;
  for (size_t i = 0; i < n_files; i++) {
    const char *path = all[i].path;
    if (strncmp(path, dir, sizeof dir - 1) != 0 || strchr(path + sizeof dir - 1, '/') || !util_ends_with(path, ".json"))
      continue;
    const char *name = path + sizeof dir - 1;
    size_t nl = strlen(name) - 5;
    if (nl > wl || nl <= best_len || strncmp(want + wl - nl, name, nl) != 0) continue;
    if (nl < wl && want[wl - nl - 1] != '-') continue;
    best = &all[i];
    best_len = nl;
  }
  return best;
}

/* Reads an HF config from text into c (strings point into *root, which the caller releases). */
static ap_status read_config(ap_ctx *ctx, const char *label, const char *text, size_t n, json_t **root,
                             tf_config *c) {
  ap_status st = jx_parse(ctx, label, text, n, root);
  if (!st) st = hf_config_read(ctx, label, *root, c);
  return st;
}

static bool inline_complete(const arch_spec *as) {
  return as->has_layers && as->has_hidden && as->has_heads && as->has_vocab;
}

/* The row's model: the named HF config (with the inline vocabulary, which Megatron pads, in place of the
 * config's), or the inline architecture. When models/ lacks the named file, the built-in preset of the same
 * name stands in for it, else the inline columns, and *note says so. Failures are the row's error, left in
 * ctx. */
static ap_status row_model(ap_ctx *ctx, arena *a, const char *csv_dir, const validate_row *v, const row_spec *rs,
                           ap_model **out, const char **note) {
  const arch_spec *as = &rs->arch;
  tf_config *c = calloc(1, sizeof *c);
  if (!c) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  ap_status st = AP_OK;
  json_t *root = NULL;
  bool from_config = false;
  if (*as->model_config) {
    char *path = arena_printf(a, "%s/models/%s", csv_dir, as->model_config);
    char *models_dir = arena_printf(a, "%s/models", csv_dir); /* a symlink inside it may not lead out of it */
    if (path && models_dir && (st = util_path_inside(ctx, models_dir, as->model_config, "model_config"))) path = NULL;
    const embedded_file *preset = NULL;
    struct stat sb; /* exists (util_read_file then refuses a directory or a FIFO, which fopen would block on) */
    bool exists = !st && path && stat(path, &sb) == 0;
    if (st) {
      /* model_config leads out of models/ */
    } else if (!path) {
      st = ctx_fail(ctx, AP_NOMEM, "out of memory");
    } else if (exists) {
      char *text = NULL;
      size_t n = 0;
      if (!(st = util_read_file(ctx, path, &text, &n))) st = read_config(ctx, path, text, n, &root, c);
      free(text);
      from_config = true;
      c->source = path;
    } else if ((preset = preset_for_config(as->model_config)) != NULL) {
      st = read_config(ctx, preset->path, preset->text, preset->n_bytes, &root, c);
      from_config = true;
      c->source = preset->path;
      *note = arena_printf(a, "%s not found; used the built-in preset %s", path, preset->path);
    } else if (inline_complete(as)) {
      *note = arena_printf(a, "%s not found; built from the inline architecture columns", path);
      inline_config(as, v->plan.seq_length, v->model, c);
    } else {
      st = ctx_fail(ctx, AP_NOTFOUND, "%s: cannot open, and the inline architecture columns are incomplete", path);
    }
  } else {
    const embedded_file *named = preset_for_name(v->model);
    ap_ctx pctx = ctx_child(ctx); /* a preset that does not read leaves the row to its columns */
    if (named && !read_config(&pctx, named->path, named->text, named->n_bytes, &root, c) && agrees(as, c)) {
      from_config = true;
      c->source = named->path;
      *note = arena_printf(a, "architecture of the built-in preset %s, which the row's columns agree with", named->path);
    } else {
      json_decref(root);
      root = NULL;
      inline_config(as, v->plan.seq_length, v->model, c);
    }
  }
  if (!st && from_config) {
    c->name = v->model;
    if (as->has_vocab) c->vocab = as->vocab;
  }
  if (!st) st = model_from_tf_config(ctx, c, out);
  json_decref(root);
  free(c);
  return st;
}

/* The row's cluster: num_gpus devices in nodes of the gpu preset's node type, with the network bandwidth
 * per GPU replaced by inter_node_GBps_per_gpu when given. gpus_per_node must match the node type's NVLink
 * domain (8 for DGX/HGX, 72 for NVL72); a different value would need a cluster file. */
static ap_status row_cluster(ap_ctx *ctx, const validate_row *v, const cluster_spec *cs, ap_cluster **out) {
  hw_device dev;
  ap_status st = hw_device_find(ctx, cs->gpu, &dev);
  if (st) return st;
  if (!dev.default_node[0]) return ctx_fail(ctx, AP_NOTFOUND, "gpu %s names no node preset", dev.name);
  ap_cluster *tmpl = NULL;
  if ((st = ap_cluster_load(ctx, dev.default_node, &tmpl))) return st;
  const hw_node_group *g0 = &hw_cluster_of(tmpl)->groups[0];
  int64_t dpn = g0->devices_per_node;
  int64_t domain = g0->n_levels > 1 ? g0->levels[0].domain_devices : dpn;
  char node[HW_NAME_MAX];
  snprintf(node, sizeof node, "%s", hw_cluster_of(tmpl)->name);
  ap_cluster_free(tmpl);
  if (cs->has_gpus_per_node && cs->gpus_per_node != domain)
    return ctx_fail(ctx, AP_UNSUPPORTED, "gpus_per_node = %lld, but a %s NVLink domain holds %lld devices",
                    (long long)cs->gpus_per_node, node, (long long)domain);
  int64_t n = cs->num_gpus, n_nodes = 1;
  if (n < dpn) dpn = n;
  else if (n % dpn != 0)
    return ctx_fail(ctx, AP_UNSUPPORTED, "num_gpus = %lld is not a whole number of %s nodes of %lld", (long long)n, node,
                    (long long)dpn);
  else n_nodes = n / dpn;
  json_t *root = json_pack("{s:s, s:s, s:I, s:I}", "name", v->id, "node", node, "n_nodes", (json_int_t)n_nodes,
                           "devices_per_node", (json_int_t)dpn);
  if (root && cs->has_inter_bw) {
    json_t *inter = json_pack("{s:f}", "bw_Bps", cs->inter_GBps * 1e9);
    if (!inter || json_object_set_new(root, "inter_node", inter) != 0) {
      json_decref(root);
      root = NULL;
    }
  }
  char *text = root ? json_dumps(root, JSON_COMPACT) : NULL;
  json_decref(root);
  if (!text) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  char label[160];
  snprintf(label, sizeof label, "cluster of row %s", v->id);
  st = hw_cluster_parse(ctx, label, text, strlen(text), out);
  mem_free_json(text); /* jansson's allocation */
  return st;
}

/* ---- Prediction ----------------------------------------------------------------------------------------- */

/* What a device shows of a predicted peak: the caching allocator holds the live peak plus its pool of freed
 * blocks (PyTorch's reserved bytes); nvidia-smi adds the CUDA context and NCCL's buffers outside it. */
static double shown_mem(const cost_env *env, double peak_bytes, bool with_context) {
  const memory_tuning *mt = &cost_env_tuning(env)->memory;
  double reserved = (peak_bytes - mt->context_bytes) * (1.0 + mt->pool_fraction);
  return with_context ? reserved + mt->context_bytes : reserved;
}

/* The memory to compare with the row's measurement (validate.h): the peak over all ranks, or for nvidia-smi
 * on the first node the most loaded pipeline rank among that node's devices. */
double validate_compared_mem(const validate_row *v, const cost_env *env, const cost_result *cr) {
  const hw_cluster *hc = cost_env_cluster(env);
  if (v->mem_convention == VALIDATE_MEM_MAX_RESERVED) return shown_mem(env, cr->peak_mem_bytes, false);
  if (v->mem_convention != VALIDATE_MEM_NVIDIA_SMI) return cr->peak_mem_bytes;
  int64_t node = hc->groups[0].devices_per_node, stride = plan_axis_stride(&v->plan, PLAN_AXIS_PP);
  if (stride < 1) return shown_mem(env, cr->peak_mem_bytes, true);
  double most = 0;
  for (int64_t rank = 0; rank < node && rank < hc->n_devices; rank++) {
    int64_t pr = (rank / stride) % v->plan.pp;
    if (pr < cr->n_ranks && cr->mem[pr].total > most) most = cr->mem[pr].total;
  }
  return shown_mem(env, most > 0 ? most : cr->peak_mem_bytes, true);
}

/* The planner's best plan for the row's model, devices, global batch, sequence length and precision (the
 * precision is the row's numerics, not a parallelisation choice, so it is held fixed). Only out of memory is a
 * failure; a search that finds nothing leaves a note. */
static ap_status row_search(validate_report *rep, validate_row *v, const cost_env *env) {
  v->searched = true;
  search_opts o = search_opts_defaults();
  o.top_k = 1;
  o.global_batch_size = v->plan.global_batch_size;
  o.seq_length = v->plan.seq_length;
  o.time_budget_s = rep->search_budget_s;
  o.fixed.precision = v->plan.precision;
  o.fixed_mask = PLAN_F(PRECISION);
  memcpy(o.fixed.model, v->plan.model, sizeof o.fixed.model);
  memcpy(o.fixed.cluster, v->plan.cluster, sizeof o.fixed.cluster);
  ap_ctx sctx = {0};
  search_result *res = NULL;
  int n = 0;
  search_stats st;
  ap_status s = search_run_all(&sctx, env, &o, &res, &n, &st);
  if (s == AP_NOMEM) {
    search_results_free(res, n);
    return AP_NOMEM;
  }
  if (s == AP_OK && n > 0) {
    v->has_best = true;
    v->best_tokens = res[0].r.tokens_per_s_per_device;
    v->best_plan = res[0].p;
  }
  if (s != AP_OK) v->search_note = arena_strdup(rep->a, sctx.error[0] ? sctx.error : ap_status_str(s));
  else if (st.truncated)
    v->search_note = arena_printf(rep->a, "the search stopped at its time budget of %g s", rep->search_budget_s);
  search_results_free(res, n);
  return AP_OK;
}

/* Whether the model's attention keeps its s×s scores for the backward pass (no flash attention). A runs.csv
 * "selective" names the selective recompute that saves memory on the row's model: Megatron's core-attention
 * recompute (Korthikanti et al. 2022 §5) where attention keeps the scores; with flash attention, which keeps
 * none, that recompute saves nothing, and selective checkpointing is the per-op kind (torchtitan's selective
 * AC; Megatron's --recompute-modules of layernorm and activations come close). */
static bool attention_keeps_scores(const graph *g) {
  for (int bi = 0; bi < g->n_blocks; bi++) {
    const graph_block *blk = &g->blocks[bi];
    for (int i = 0; i < blk->n_ops; i++) {
      const graph_op *op = &blk->ops[i];
      if (op->kind != OP_ATTENTION) continue;
      for (int k = 0; k < op->n_saved; k++) {
        const graph_tensor *t = &blk->tensors[op->saved[k]];
        int n_s = 0;
        for (int d = 0; d < t->n_dims; d++) n_s += t->dims[d] == DIM_S;
        if (n_s >= 2) return true;
      }
    }
  }
  return false;
}

/* Models one row; any failure becomes the row's error (only out of memory stops the run). */
static ap_status row_predict(ap_ctx *ctx, validate_report *rep, const char *csv_dir, validate_row *v,
                             const row_spec *rs, cost_result *cr) {
  ap_ctx rctx = ctx_child(ctx);
  ap_model *m = NULL;
  ap_cluster *cl = NULL;
  cost_env *env = NULL;
  const char *note = NULL;
  ap_status st = row_model(&rctx, rep->a, csv_dir, v, rs, &m, &note);
  if (!st) st = row_cluster(&rctx, v, &rs->cl, &cl);
  if (!st) st = cost_env_new(&rctx, m, cl, NULL, &env);
  complete_stats cs = {0};
  plan partial = rs->partial;
  unsigned stated = rs->stated;
  if (!st && rs->selective) {
    partial.recompute = attention_keeps_scores(model_graph(m)) ? PLAN_RECOMPUTE_SELECTIVE : PLAN_RECOMPUTE_OP;
    stated |= PLAN_F(RECOMPUTE);
  }
  if (!st) st = complete_plan(&rctx, env, &partial, stated, NULL, &v->plan, cr, &cs);
  v->note = note;
  v->n_evaluated = cs.n_evaluated;
  if (st == AP_NOMEM) {
    ctx_fail(ctx, st, "%s", rctx.error);
  } else if (st) {
    v->error = arena_strdup(rep->a, rctx.error[0] ? rctx.error : ap_status_str(st));
    if (!v->error) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
    else st = AP_OK;
  } else {
    v->predicted_tokens = cr->tokens_per_s_per_device;
    v->predicted_peak_mem_bytes = cr->peak_mem_bytes;
    v->fits = cr->fits;
    v->iter_s = cr->iter_s;
    v->mfu_palm = cr->mfu_palm;
    v->bound = cr->bound;
    if (v->has_measured && !v->measured_oom)
      v->ape = fabs(v->predicted_tokens - v->measured_tokens) / v->measured_tokens;
    if (v->has_mem) {
      v->compared_mem_bytes = validate_compared_mem(v, env, cr);
      v->mem_ape = fabs(v->compared_mem_bytes - v->measured_mem_bytes) / v->measured_mem_bytes;
    }
    if (rep->search && row_search(rep, v, env)) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  if (rep->keep && !v->error && !st) {
    v->kept_model = m;
    v->kept_cluster = cl;
    v->kept_env = env;
    return st;
  }
  cost_env_free(env);
  ap_cluster_free(cl);
  ap_model_free(m);
  return st;
}

/* ---- Summary -------------------------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y ? 1 : 0;
}

/* The median of v[0..n-1] (sorts v). */
static double median(double *v, int64_t n) {
  if (n <= 0) return NAN;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Ranks of x[0..n-1] (1-based, ties get the mean of their ranks) into r. O(n²): groups are small. */
static void ranks(const double *x, int64_t n, double *r) {
  for (int64_t i = 0; i < n; i++) {
    int64_t below = 0, equal = 0;
    for (int64_t j = 0; j < n; j++) {
      if (x[j] < x[i]) below++;
      else if (x[j] == x[i]) equal++;
    }
    r[i] = (double)below + (double)(equal + 1) / 2.0;
  }
}

/* Spearman's rho: Pearson's correlation of the ranks; NAN when either side has no spread. */
static double spearman(const double *x, const double *y, int64_t n, double *scratch) {
  double *rx = scratch, *ry = scratch + n;
  ranks(x, n, rx);
  ranks(y, n, ry);
  double mx = 0, my = 0;
  for (int64_t i = 0; i < n; i++) mx += rx[i], my += ry[i];
  mx /= (double)n;
  my /= (double)n;
  double sxy = 0, sxx = 0, syy = 0;
  for (int64_t i = 0; i < n; i++) {
    sxy += (rx[i] - mx) * (ry[i] - my);
    sxx += (rx[i] - mx) * (rx[i] - mx);
    syy += (ry[i] - my) * (ry[i] - my);
  }
  return sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : NAN;
}

/* The APE bar of the data floor's row count (data_floor.h): the "no row worse than 25%". */
#define FLOOR_BAR 0.25

/* A modelled row measured ok: it has both throughputs. */
static bool is_compared(const validate_row *v) { return !v->error && v->has_measured && !v->measured_oom; }

static ap_status summarise(ap_ctx *ctx, validate_report *rep) {
  validate_summary *s = &rep->sum;
  int64_t n = rep->n_rows;
  memset(s, 0, sizeof *s);
  s->n_rows = n;
  s->mape = s->median_ape = s->mean_signed_error = s->spearman = s->mem_mape = NAN;
  double *buf = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1) * 5);
  int64_t *members = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
  bool *grouped = calloc((size_t)(n > 0 ? n : 1), sizeof(bool));
  s->groups = arena_alloc(rep->a, sizeof *s->groups * (size_t)(n > 0 ? n : 1));
  if (!buf || !members || !grouped || !s->groups) {
    free(buf);
    free(members);
    free(grouped);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  /* Throughput. */
  double sum = 0, signed_sum = 0, mem_sum = 0, by_sum[VALIDATE_MEM_COUNT_] = {0};
  int64_t n_signed = 0;
  for (int64_t i = 0; i < n; i++) {
    const validate_row *v = &rep->rows[i];
    if (v->error) s->n_errors++;
    if (v->has_measured && !v->measured_oom) {
      double ape = v->error ? MISS_APE : v->ape;
      buf[s->n++] = ape;
      sum += ape;
      if (!v->error) {
        signed_sum += (v->predicted_tokens - v->measured_tokens) / v->measured_tokens;
        n_signed++;
        if (!s->worst_id || v->ape > s->worst_ape) {
          s->worst_id = v->id;
          s->worst_ape = v->ape;
        }
      }
    }
    if (!v->error && v->measured_oom) {
      s->oom_rows++;
      s->oom_predicted_oom += !v->fits;
    } else if (!v->error) {
      s->ok_rows++;
      s->ok_predicted_fit += v->fits;
    }
    if (!v->error && v->has_mem) {
      s->mem_n++;
      mem_sum += v->mem_ape;
      s->mem_n_by[v->mem_convention]++;
      by_sum[v->mem_convention] += v->mem_ape;
    }
  }
  if (s->n > 0) {
    s->mape = sum / (double)s->n;
    s->median_ape = median(buf, s->n);
  }
  if (n_signed > 0) s->mean_signed_error = signed_sum / (double)n_signed;
  if (s->mem_n > 0) s->mem_mape = mem_sum / (double)s->mem_n;
  for (int k = 0; k < VALIDATE_MEM_COUNT_; k++)
    s->mem_mape_by[k] = s->mem_n_by[k] > 0 ? by_sum[k] / (double)s->mem_n_by[k] : NAN;

  /* Rank correlation within groups of the same model and gpu, in order of first appearance. */
  double rho_sum = 0;
  for (int64_t i = 0; i < n; i++) {
    const validate_row *v = &rep->rows[i];
    if (grouped[i] || !is_compared(v)) continue;
    int64_t m = 0;
    for (int64_t j = i; j < n; j++) {
      const validate_row *w = &rep->rows[j];
      if (!grouped[j] && is_compared(w) && strcmp(w->model, v->model) == 0 && strcmp(w->gpu, v->gpu) == 0) {
        grouped[j] = true;
        members[m++] = j;
      }
    }
    if (m < 3) continue;
    double *x = buf, *y = buf + m, *scratch = buf + 2 * m;
    for (int64_t k = 0; k < m; k++) {
      x[k] = rep->rows[members[k]].predicted_tokens;
      y[k] = rep->rows[members[k]].measured_tokens;
    }
    validate_group *g = &s->groups[s->n_groups++];
    g->model = v->model;
    g->gpu = v->gpu;
    g->n = m;
    g->rho = spearman(x, y, m, scratch);
    if (!isnan(g->rho)) {
      rho_sum += g->rho;
      s->n_ranked++;
    }
  }
  if (s->n_ranked > 0) s->spearman = rho_sum / (double)s->n_ranked;
  /* The floor the data puts under the throughput error: every row with a measured throughput, modelled or not. */
  floor_row *fr = arena_alloc(rep->a, sizeof *fr * (size_t)(n > 0 ? n : 1));
  int64_t n_fr = 0;
  for (int64_t i = 0; fr && i < n; i++) {
    const validate_row *v = &rep->rows[i];
    if (v->has_measured && !v->measured_oom) fr[n_fr++] = (floor_row){v->input_key, v->id, v->measured_tokens};
  }
  ap_status fst = fr ? data_floor_compute(ctx, rep->a, fr, n_fr, FLOOR_BAR, &s->floor) : ctx_fail(ctx, AP_NOMEM, "out of memory");
  if (fst) {
    free(buf);
    free(members);
    free(grouped);
    return fst;
  }
  /* The planner against the stated plans. */
  s->searched = rep->search;
  for (int64_t i = 0; rep->search && i < n; i++) {
    const validate_row *v = &rep->rows[i];
    if (v->error || !v->searched) continue;
    if (!v->has_best) s->search_none_fit++;
    if (v->search_note && v->has_best) s->search_truncated++;
    if (!v->fits) {
      s->search_stated_unfit++;
      continue;
    }
    s->search_compared++;
    double ratio = v->has_best ? v->best_tokens / v->predicted_tokens : 0;
    if (ratio >= 1 - 1e-9) {
      s->search_at_least++;
    } else {
      s->search_slower++;
      if (!s->search_worst_id || ratio < s->search_worst_ratio) {
        s->search_worst_id = v->id;
        s->search_worst_ratio = ratio;
      }
    }
  }
  free(buf);
  free(members);
  free(grouped);
  return AP_OK;
}

/* ---- The run --------------------------------------------------------------------------------------------- */

static ap_status validate_run(ap_ctx *ctx, const char *csv_path, bool keep, bool search, double budget_s,
                              validate_report **out) {
  *out = NULL;
  validate_report *rep = calloc(1, sizeof *rep);
  if (!rep || !(rep->a = arena_new())) {
    free(rep);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  rep->keep = keep;
  rep->search = search;
  rep->search_budget_s = budget_s;
  ap_status st = runs_load(ctx, csv_path, &rep->t);
  if (!st) st = runs_check_columns(ctx, rep->t);
  /* The folder of the CSV file, where models/ lives. */
  char *dir = st ? NULL : arena_strdup(rep->a, csv_path);
  if (!st && !dir) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  if (!st) {
    char *slash = strrchr(dir, '/');
    if (!slash) dir = ".";
    else if (slash == dir) dir[1] = '\0';
    else *slash = '\0';
  }
  cost_result *cr = st ? NULL : malloc(sizeof *cr);
  if (!st && !cr) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  if (!st) {
    rep->n_rows = rep->t->n_rows;
    rep->rows = arena_alloc(rep->a, sizeof *rep->rows * (size_t)(rep->n_rows > 0 ? rep->n_rows : 1));
    if (!rep->rows) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  for (int64_t i = 0; !st && i < rep->n_rows; i++) {
    row_spec rs;
    validate_row *v = &rep->rows[i];
    if ((st = row_read(ctx, rep->t, &rep->t->rows[i], v, &rs))) break;
    if (!(v->input_key = input_key(rep->a, rep->t, &rep->t->rows[i]))) {
      st = ctx_fail(ctx, AP_NOMEM, "out of memory");
      break;
    }
    /* Ids name rows in the figures, so a repeated id is bad input. */
    for (int64_t j = 0; j < i; j++)
      if (strcmp(rep->rows[j].id, v->id) == 0) {
        st = runs_fail(ctx, rep->t, &rep->t->rows[i], "id", AP_INVALID, "expected a unique row id, got \"%s\" again (line %lld)",
                       v->id, (long long)rep->rows[j].line);
        break;
      }
    if (!st) st = row_predict(ctx, rep, dir, v, &rs, cr);
    if (!st && ctx_progress(ctx, (double)(i + 1) / (double)rep->n_rows, "validate")) st = ctx_fail(ctx, AP_CANCELLED, "cancelled");
  }
  free(cr);
  if (!st) st = summarise(ctx, rep);
  if (st) {
    validate_report_free(rep);
    return st;
  }
  *out = rep;
  return AP_OK;
}

ap_status validate_read_rows(ap_ctx *ctx, const char *file, const char *text, size_t n, int64_t *n_rows) {
  if (n_rows) *n_rows = 0;
  runs_table *t = NULL;
  ap_status st = runs_parse(ctx, file, text, n, &t);
  if (!st) st = runs_check_columns(ctx, t);
  for (int64_t i = 0; !st && i < t->n_rows; i++) {
    validate_row v;
    row_spec rs;
    memset(&v, 0, sizeof v);
    if (!(st = row_read(ctx, t, &t->rows[i], &v, &rs)) && n_rows) (*n_rows)++;
  }
  runs_free(t);
  return st;
}

ap_status validate_file(ap_ctx *ctx, const char *csv_path, validate_report **out) {
  return validate_run(ctx, csv_path, false, false, 0, out);
}

ap_status validate_file_keep(ap_ctx *ctx, const char *csv_path, validate_report **out) {
  return validate_run(ctx, csv_path, true, false, 0, out);
}

ap_status validate_file_search(ap_ctx *ctx, const char *csv_path, double budget_per_row_s, validate_report **out) {
  return validate_run(ctx, csv_path, false, true, budget_per_row_s, out);
}

void validate_report_free(validate_report *r) {
  if (!r) return;
  for (int64_t i = 0; r->rows && i < r->n_rows; i++) {
    cost_env_free(r->rows[i].kept_env);
    ap_cluster_free(r->rows[i].kept_cluster);
    ap_model_free(r->rows[i].kept_model);
  }
  runs_free(r->t);
  arena_free(r->a);
  free(r);
}

int64_t validate_report_n_rows(const validate_report *r) { return r->n_rows; }
const validate_row *validate_report_row(const validate_report *r, int64_t i) {
  return i >= 0 && i < r->n_rows ? &r->rows[i] : NULL;
}
const validate_summary *validate_report_summary(const validate_report *r) { return &r->sum; }

/* ---- Output ---------------------------------------------------------------------------------------------- */

/* The chooser of plan_summary's marks: a field is chosen by autopar when the row did not state it. */
static bool row_chose(const void *user, const char *field) {
  unsigned stated = *(const unsigned *)user;
  for (int b = 0; b < COMPLETE_N_FIELDS; b++)
    if (strcmp(plan_field_name((plan_field_id)b), field) == 0) return !(stated & (1u << b));
  return false;
}

void validate_plan_brief(const plan *p, unsigned stated, char *out, size_t n) {
  plan_summary(p, PLAN_SUMMARY_COMPACT, row_chose, &stated, out, n);
}

/* ---- Public API ------------------------------------------------------------------------------------------ */

ap_status ap_validate(ap_ctx *ctx, const char *csv_path, int flags, char **out) {
  API_ENTER(ctx);
  if (!ctx || !out) return ctx_fail(ctx, AP_INVALID, "ap_validate: ctx and out must not be NULL");
  *out = NULL;
  ctx_clear(ctx);
  if (!csv_path || !*csv_path) return ctx_fail(ctx, AP_INVALID, "validate: expected the path of a runs CSV file");
  if (flags & ~(AP_VALIDATE_JSON | AP_VALIDATE_SEARCH))
    return ctx_fail(ctx, AP_INVALID, "ap_validate: unknown flags 0x%x", (unsigned)flags);
  validate_report *rep = NULL;
  ap_status st = (flags & AP_VALIDATE_SEARCH) ? validate_file_search(ctx, csv_path, VALIDATE_SEARCH_BUDGET_S, &rep)
                                              : validate_file(ctx, csv_path, &rep);
  if (st) return st;
  *out = (flags & AP_VALIDATE_JSON) ? validate_report_json(rep) : validate_report_text(rep);
  validate_report_free(rep);
  if (!*out) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  if (mem_failed()) { /* a summary line that fell back to "?" (plan_summary; core/alloc.h) */
    free(*out);
    *out = NULL;
    return ctx_fail(ctx, AP_NOMEM, "out of memory writing the report");
  }
  return AP_OK;
}
