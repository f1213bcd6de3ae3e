/* The public model API (model layer): loading a model from a preset name, a Hugging Face config.json, an
 * op-graph file or an ONNX file (through the optional "onnx" part), and describing it (parameters, per-block breakdown, FLOP per token). Presets are
 * config.json files under data/models/ compiled into the library, each with an "autopar" object naming its
 * source and published parameter counts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonx.h"
#include "model/graph_json.h"
#include "model/hfconfig.h"
#include "model/model.h"
#include "model/onnx.h"

static const char PRESET_DIR[] = "data/models/";

const graph *model_graph(const ap_model *m) { return &m->g; }

static ap_model *model_alloc(void) {
  ap_model *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->a = arena_new();
  if (!m->a) {
    free(m);
    return NULL;
  }
  return m;
}

void ap_model_free(ap_model *m) {
  if (!m) return;
  arena_free(m->a);
  free(m);
}

ap_status model_from_tf_config(ap_ctx *ctx, const tf_config *c, ap_model **out) {
  *out = NULL;
  ap_model *m = model_alloc();
  if (!m) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  ap_status st = tf_config_check(ctx, c, c->name ? c->name : "model");
  if (!st) st = tf_build(ctx, m->a, c, &m->g);
  if (st) {
    ap_model_free(m);
    return st;
  }
  *out = m;
  return AP_OK;
}

/* Builds from a parsed root: an op graph or an HF config; reads preset metadata when present. */
static ap_status model_from_json(ap_ctx *ctx, const char *file, const char *name, json_t *root, ap_model **out) {
  *out = NULL;
  ap_model *m = model_alloc();
  if (!m) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  ap_status st;
  if (graph_json_detect(root)) {
    st = graph_json_read(ctx, m->a, file, root, &m->g);
  } else {
    tf_config *c = calloc(1, sizeof *c);
    if (!c) {
      ap_model_free(m);
      return ctx_fail(ctx, AP_NOMEM, "out of memory");
    }
    st = hf_config_read(ctx, file, root, c);
    if (!st) {
      c->name = name;
      c->source = file;
      json_t *meta = json_object_get(root, "autopar");
      jx_src src = {ctx, file, "autopar"};
      if (json_is_object(meta)) {
        const char *s = NULL;
        if (!(st = jx_str(&src, meta, "source", false, &s, NULL)) && s) c->source = s;
        if (!st) st = jx_i64(&src, meta, "published_params_total", false, 1, INT64_MAX, &m->published_params_total, NULL);
        if (!st) st = jx_i64(&src, meta, "published_params_active", false, 1, INT64_MAX, &m->published_params_active, NULL);
      }
      if (!st) st = tf_build(ctx, m->a, c, &m->g);
    }
    free(c);
  }
  if (st) {
    ap_model_free(m);
    return st;
  }
  *out = m;
  return AP_OK;
}

ap_status model_parse_onnx(ap_ctx *ctx, const char *file, const void *bytes, size_t n, ap_model **out) {
  *out = NULL;
  const onnx_part_ops *ops = ctx_part_ops(ctx, "onnx");
  if (!ops)
    return ctx_fail(ctx, AP_UNSUPPORTED, "%s: ONNX import is not built into this autopar (the optional part \"onnx\"; "
                    "build without CORE_ONLY=1)", file);
  ap_model *m = model_alloc();
  if (!m) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  ap_status st = ops->load(ctx, m->a, file, bytes, n, &m->g);
  if (st) {
    ap_model_free(m);
    return st;
  }
  *out = m;
  return AP_OK;
}

ap_status model_parse(ap_ctx *ctx, const char *file, const char *text, size_t n, ap_model **out) {
  json_t *root = NULL;
  *out = NULL;
  ap_status st = jx_parse(ctx, file, text, n, &root);
  if (st) return st;
  char name[256];
  snprintf(name, sizeof name, "%s", util_basename(file));
  if (util_ends_with(name, ".json")) name[strlen(name) - 5] = '\0';
  st = model_from_json(ctx, file, name, root, out);
  json_decref(root);
  return st;
}

/* The preset names (file base names under data/models/, examples included). Returns how many. */
static size_t preset_names(const char **names, const embedded_file **files, size_t cap) {
  size_t n_files, n = 0;
  const embedded_file *all = embedded_files(&n_files);
  for (size_t i = 0; i < n_files && n < cap; i++) {
    if (strncmp(all[i].path, PRESET_DIR, sizeof PRESET_DIR - 1) != 0 || !util_ends_with(all[i].path, ".json")) continue;
    names[n] = util_basename(all[i].path);
    files[n++] = &all[i];
  }
  return n;
}

enum { MAX_PRESETS = 256 };

ap_status ap_model_load(ap_ctx *ctx, const char *spec, ap_model **out) {
  API_ENTER(ctx);
  if (!ctx || !out) return ctx_fail(ctx, AP_INVALID, "ap_model_load: ctx and out must not be NULL");
  *out = NULL;
  ctx_clear(ctx);
  if (!spec || !*spec)
    return ctx_fail(ctx, AP_INVALID, "--model: expected a preset name or a path to a JSON or ONNX file");
  bool onnx = util_ends_with(spec, ".onnx");
  bool is_path = strchr(spec, '/') || util_ends_with(spec, ".json") || onnx;
  if (is_path) {
    char *text = NULL;
    size_t n = 0;
    ap_status st = util_read_file(ctx, spec, &text, &n);
    if (st) return st;
    st = onnx ? model_parse_onnx(ctx, spec, text, n, out) : model_parse(ctx, spec, text, n, out);
    free(text);
    return st;
  }
  const char *names[MAX_PRESETS];
  const embedded_file *files[MAX_PRESETS];
  size_t n = preset_names(names, files, MAX_PRESETS);
  char want[256];
  snprintf(want, sizeof want, "%s.json", spec);
  for (size_t i = 0; i < n; i++)
    if (strcmp(names[i], want) == 0) {
      char label[300];
      snprintf(label, sizeof label, "%s", files[i]->path);
      json_t *root = NULL;
      ap_status st = jx_parse(ctx, label, files[i]->text, files[i]->n_bytes, &root);
      if (st) return st;
      st = model_from_json(ctx, label, spec, root, out);
      json_decref(root);
      return st;
    }
  /* Suggest by preset name without the .json suffix. */
  char bare[MAX_PRESETS][96];
  const char *cands[MAX_PRESETS];
  for (size_t i = 0; i < n; i++) {
    snprintf(bare[i], sizeof bare[i], "%s", names[i]);
    bare[i][strlen(bare[i]) - 5] = '\0';
    cands[i] = bare[i];
  }
  char sugg[512];
  util_suggest(spec, cands, n, sugg, sizeof sugg);
  return ctx_fail(ctx, AP_NOTFOUND, "--model: unknown model preset \"%s\"%s%s (see `autopar models`)", spec,
                  *sugg ? "; did you mean " : "", sugg);
}

int64_t ap_model_params_total(const ap_model *m) { return m ? graph_params_total(&m->g) : 0; }
int64_t ap_model_params_active(const ap_model *m) { return m ? graph_params_active(&m->g) : 0; }
const char *ap_model_name(const ap_model *m) { return m && m->g.name ? m->g.name : ""; }

static const char *const role_names[] = {[BLOCK_EMBED] = "embedding", [BLOCK_LAYER] = "layer", [BLOCK_HEAD] = "head",
                                         [BLOCK_OTHER] = "other"};

/* Per-block figures at sequence s and micro-batch 1, per token. */
typedef struct {
  double fwd_flop, train_flop, train_gemm_flop, saved_bytes;
} block_fig;

static block_fig block_figures(const graph_block *blk, double s) {
  op_cost c = graph_block_eval(blk, 1, s);
  block_fig f = {
      .fwd_flop = (c.fwd_gemm_flop + c.fwd_vector_flop) / s,
      .train_flop = (c.fwd_gemm_flop + c.fwd_vector_flop + c.dgrad_flop + c.wgrad_flop) / s,
      .train_gemm_flop = (c.fwd_gemm_flop + c.bwd_gemm_flop) / s,
      .saved_bytes = graph_block_saved_bytes(blk, 1, s) / s,
  };
  return f;
}

static int64_t resolve_seq(const ap_model *m, int64_t seq) { return seq > 0 ? seq : m->g.default_seq > 0 ? m->g.default_seq : 1; }

ap_status ap_model_describe_json(ap_ctx *ctx, const ap_model *m, int64_t seq, char **json_out) {
  API_ENTER(ctx);
  if (json_out) *json_out = NULL;
  if (!ctx || !m || !json_out) return ctx_fail(ctx, AP_INVALID, "ap_model_describe_json: ctx, model and json_out must not be NULL");
  const graph *g = &m->g;
  double s = (double)resolve_seq(m, seq);
  strbuf sb = {0};
  sb_puts(&sb, "{\"name\":");
  jx_sb_str(&sb, g->name);
  sb_puts(&sb, ",\"model_type\":");
  jx_sb_str(&sb, g->model_type);
  sb_puts(&sb, ",\"source\":");
  jx_sb_str(&sb, g->source);
  sb_printf(&sb, ",\"params_total\":%lld,\"params_active\":%lld", (long long)graph_params_total(g),
            (long long)graph_params_active(g));
  if (m->published_params_total)
    sb_printf(&sb, ",\"published_params_total\":%lld", (long long)m->published_params_total);
  if (m->published_params_active)
    sb_printf(&sb, ",\"published_params_active\":%lld", (long long)m->published_params_active);
  sb_printf(&sb, ",\"n_layers\":%lld,\"hidden_size\":%lld,\"vocab_size\":%lld,\"seq\":%lld", (long long)g->n_layers,
            (long long)g->hidden_size, (long long)g->vocab_size, (long long)s);
  double fwd = 0, train = 0, gemm = 0, saved = 0;
  sb_puts(&sb, ",\"blocks\":[");
  for (int i = 0; i < g->n_blocks; i++) {
    const graph_block *blk = &g->blocks[i];
    block_fig f = block_figures(blk, s);
    double r = (double)blk->repeat;
    fwd += f.fwd_flop * r;
    train += f.train_flop * r;
    gemm += f.train_gemm_flop * r;
    saved += f.saved_bytes * r;
    sb_printf(&sb, "%s{\"name\":", i ? "," : "");
    jx_sb_str(&sb, blk->name);
    sb_printf(&sb,
              ",\"role\":\"%s\",\"repeat\":%lld,\"moe\":%s,\"n_ops\":%d,\"params_per_repeat\":%lld,"
              "\"params_active_per_repeat\":%lld,\"fwd_flop_per_token\":%.6g,\"train_flop_per_token\":%.6g,"
              "\"saved_activation_bytes_per_token\":%.6g}",
              role_names[blk->role], (long long)blk->repeat, blk->is_moe ? "true" : "false", blk->n_ops,
              (long long)graph_block_params(blk), (long long)graph_block_params_active(blk), f.fwd_flop,
              f.train_flop, f.saved_bytes);
  }
  sb_printf(&sb,
            "],\"flop_per_token\":{\"forward\":%.6g,\"train\":%.6g,\"train_gemm\":%.6g,"
            "\"convention\":\"forward + dgrad + wgrad, no causal discount, no recompute\"},"
            "\"saved_activation_bytes_per_token\":%.6g}\n",
            fwd, train, gemm, saved);
  *json_out = sb_take(&sb);
  return *json_out ? AP_OK : ctx_fail(ctx, AP_NOMEM, "out of memory");
}

/* Formats a count with a unit suffix: 70.55B, 8.03B, 124.4M. */
static void human(char *out, size_t n, double v) {
  const char *suf[] = {"", "K", "M", "B", "T"};
  int k = 0;
  while (v >= 1000 && k < 4) v /= 1000, k++;
  snprintf(out, n, k ? "%.2f%s" : "%.0f%s", v, suf[k]);
}

ap_status ap_model_describe_text(ap_ctx *ctx, const ap_model *m, int64_t seq, char **text_out) {
  API_ENTER(ctx);
  if (text_out) *text_out = NULL;
  if (!ctx || !m || !text_out) return ctx_fail(ctx, AP_INVALID, "ap_model_describe_text: ctx, model and text_out must not be NULL");
  const graph *g = &m->g;
  double s = (double)resolve_seq(m, seq);
  strbuf sb = {0};
  char a[32], b[32];
  human(a, sizeof a, (double)graph_params_total(g));
  human(b, sizeof b, (double)graph_params_active(g));
  sb_printf(&sb, "model        %s (%s)\nsource       %s\n", g->name, g->model_type, g->source);
  sb_printf(&sb, "parameters   %s total (%lld), %s active per token (%lld)\n", a, (long long)graph_params_total(g), b,
            (long long)graph_params_active(g));
  if (g->n_layers)
    sb_printf(&sb, "shape        %lld layers, hidden %lld, vocabulary %lld\n", (long long)g->n_layers,
              (long long)g->hidden_size, (long long)g->vocab_size);
  sb_printf(&sb, "sequence     %lld tokens\n\n", (long long)s);
  sb_printf(&sb, "%-22s %6s %14s %14s %16s %16s\n", "block", "repeat", "params/repeat", "active/repeat",
            "train FLOP/token", "saved B/token");
  double fwd = 0, train = 0, gemm = 0;
  for (int i = 0; i < g->n_blocks; i++) {
    const graph_block *blk = &g->blocks[i];
    block_fig f = block_figures(blk, s);
    fwd += f.fwd_flop * (double)blk->repeat;
    train += f.train_flop * (double)blk->repeat;
    gemm += f.train_gemm_flop * (double)blk->repeat;
    human(a, sizeof a, (double)graph_block_params(blk));
    human(b, sizeof b, (double)graph_block_params_active(blk));
    sb_printf(&sb, "%-22s %6lld %14s %14s %16.4g %16.4g\n", blk->name, (long long)blk->repeat, a, b,
              f.train_flop * (double)blk->repeat, f.saved_bytes * (double)blk->repeat);
  }
  sb_printf(&sb, "\nFLOP per token: forward %.4g, training %.4g (GEMM only %.4g)\n", fwd, train, gemm);
  sb_puts(&sb, "  (forward + input-gradient + weight-gradient; no causal discount; no recompute)\n");
  *text_out = sb_take(&sb);
  return *text_out ? AP_OK : ctx_fail(ctx, AP_NOMEM, "out of memory");
}

/* Loads every preset for listing; a preset that fails to load is reported, never skipped silently. */
static ap_status list_presets(ap_ctx *ctx, bool as_json, char **out) {
  const char *names[MAX_PRESETS];
  const embedded_file *files[MAX_PRESETS];
  size_t n = preset_names(names, files, MAX_PRESETS);
  strbuf sb = {0};
  if (as_json) sb_puts(&sb, "[");
  else sb_printf(&sb, "%-28s %-12s %10s %10s  %s\n", "preset", "model_type", "params", "active", "source");
  ap_status st = AP_OK;
  for (size_t i = 0; i < n && !st; i++) {
    char name[96];
    snprintf(name, sizeof name, "%s", names[i]);
    name[strlen(name) - 5] = '\0';
    ap_model *m = NULL;
    st = ap_model_load(ctx, name, &m);
    if (st) break;
    if (as_json) {
      sb_printf(&sb, "%s{\"name\":", i ? "," : "");
      jx_sb_str(&sb, name);
      sb_puts(&sb, ",\"model_type\":");
      jx_sb_str(&sb, m->g.model_type);
      sb_printf(&sb, ",\"params_total\":%lld,\"params_active\":%lld,\"source\":", (long long)graph_params_total(&m->g),
                (long long)graph_params_active(&m->g));
      jx_sb_str(&sb, m->g.source);
      sb_puts(&sb, "}");
    } else {
      char a[32], b[32];
      human(a, sizeof a, (double)graph_params_total(&m->g));
      human(b, sizeof b, (double)graph_params_active(&m->g));
      sb_printf(&sb, "%-28s %-12s %10s %10s  %.70s\n", name, m->g.model_type, a, b, m->g.source);
    }
    ap_model_free(m);
  }
  if (as_json) sb_puts(&sb, "]\n");
  if (st) {
    sb_free(&sb);
    return st;
  }
  *out = sb_take(&sb);
  return *out ? AP_OK : ctx_fail(ctx, AP_NOMEM, "out of memory");
}

ap_status ap_models_list_json(ap_ctx *ctx, char **json_out) {
  API_ENTER(ctx);
  if (json_out) *json_out = NULL;
  if (!ctx || !json_out) return ctx_fail(ctx, AP_INVALID, "ap_models_list_json: ctx and json_out must not be NULL");
  return list_presets(ctx, true, json_out);
}
ap_status ap_models_list_text(ap_ctx *ctx, char **text_out) {
  API_ENTER(ctx);
  if (text_out) *text_out = NULL;
  if (!ctx || !text_out) return ctx_fail(ctx, AP_INVALID, "ap_models_list_text: ctx and text_out must not be NULL");
  return list_presets(ctx, false, text_out);
}
