/* A validation row's model and cluster (report layer): from the runs table's model_config (an HF config under
 * models/, a built-in preset of the same name, or the inline architecture columns) and its gpu and device
 * columns. validate.c calls validate_row_model and validate_row_cluster for each row; a failure here is that
 * row's error, never the run's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/jsonx.h"
#include "hw/hw.h"
#include "model/hfconfig.h"
#include "model/model.h"
#include "report/validate_internal.h"

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
ap_status validate_row_model(ap_ctx *ctx, arena *a, const char *csv_dir, const validate_row *v, const row_spec *rs,
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
ap_status validate_row_cluster(ap_ctx *ctx, const validate_row *v, const cluster_spec *cs, ap_cluster **out) {
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
