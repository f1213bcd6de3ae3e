/* The public model API (model layer): loading a model from a preset name, a Hugging Face config.json, an
 * op-graph file or an ONNX file (through the optional "onnx" part), and describing it (parameters, per-block breakdown, FLOP per token). Presets are
 * config.json files under data/models/ compiled into the library, each with an "autopar" object naming its
 * source and published parameter counts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/jdoc.h"
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
  model_name_of_file(file, name, sizeof name);
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

/* The presets closest to name (util_suggest over their names, the .json dropped), lowercased first since Hub
 * ids are cased ("Meta-Llama-3-8B") and preset names are not. */
static void suggest_presets(const char *name, const char **names, size_t n, char *out, size_t out_n) {
  char bare[MAX_PRESETS][96], low[256];
  const char *cands[MAX_PRESETS];
  for (size_t i = 0; i < n; i++) {
    snprintf(bare[i], sizeof bare[i], "%s", names[i]);
    bare[i][strlen(bare[i]) - 5] = '\0';
    cands[i] = bare[i];
  }
  size_t k = 0;
  for (; name[k] && k + 1 < sizeof low; k++) low[k] = (char)(name[k] >= 'A' && name[k] <= 'Z' ? name[k] - 'A' + 'a' : name[k]);
  low[k] = '\0';
  util_suggest(low, cands, n, out, out_n);
}

ap_status ap_model_load(ap_ctx *ctx, const char *spec, ap_model **out) {
  API_ENTER(ctx);
  if (!ctx || !out) return ctx_fail(ctx, AP_INVALID, "ap_model_load: ctx and out must not be NULL");
  *out = NULL;
  ctx_clear(ctx);
  if (!spec || !*spec)
    return ctx_fail(ctx, AP_INVALID, "--model: expected a preset name or a path to a JSON or ONNX file");
  const char *names[MAX_PRESETS];
  const embedded_file *files[MAX_PRESETS];
  size_t n_presets = preset_names(names, files, MAX_PRESETS);
  bool onnx = util_ends_with(spec, ".onnx");
  struct stat sst;
  bool is_path = strchr(spec, '/') || util_ends_with(spec, ".json") || onnx || (stat(spec, &sst) == 0 && S_ISDIR(sst.st_mode));
  if (is_path) {
    /* A folder with a config.json, or a Hugging Face id in its cache, names a file (model_path.c). */
    char file[4096], sugg[512] = "";
    if (model_is_hf_id(spec)) suggest_presets(strchr(spec, '/') + 1, names, n_presets, sugg, sizeof sugg);
    ap_status st = model_find_file(ctx, spec, sugg, file, sizeof file);
    if (st) return st;
    char *text = NULL;
    size_t n = 0;
    st = util_read_file(ctx, file, &text, &n);
    if (st) return st;
    st = onnx ? model_parse_onnx(ctx, file, text, n, out) : model_parse(ctx, file, text, n, out);
    free(text);
    /* The absolute path, so that a plan recording it (ap_model_spec) finds the file from any directory; the
     * path as given where it cannot be resolved. */
    char abs[4096];
    bool resolved = !st && util_abs_path(file, abs, sizeof abs);
    if (!st && !((*out)->spec = arena_strdup((*out)->a, resolved ? abs : file))) {
      ap_model_free(*out);
      *out = NULL;
      return ctx_fail(ctx, AP_NOMEM, "out of memory");
    }
    return st;
  }
  size_t n = n_presets;
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
  char sugg[512];
  suggest_presets(spec, names, n, sugg, sizeof sugg);
  return ctx_fail(ctx, AP_NOTFOUND, "--model: unknown model preset \"%s\"%s%s (see `autopar models`)", spec,
                  *sugg ? "; did you mean " : "", sugg);
}

int64_t ap_model_params_total(const ap_model *m) { return m ? graph_params_total(&m->g) : 0; }
int64_t ap_model_params_active(const ap_model *m) { return m ? graph_params_active(&m->g) : 0; }
const char *ap_model_name(const ap_model *m) { return m && m->g.name ? m->g.name : ""; }

const char *ap_model_spec(const ap_model *m) { return !m ? "" : m->spec ? m->spec : m->g.name ? m->g.name : ""; }

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

/* `describe`'s answer as one document (autopar-describe/1, docs/json.md); the text below renders from it. */
static void describe_doc(jd *d, const ap_model *m, int64_t seq) {
  const graph *g = &m->g;
  double s = (double)resolve_seq(m, seq);
  jd_init(d, "autopar-describe/1");
  json_t *o = d->root;
  jd_str(d, o, "name", g->name);
  jd_str(d, o, "model_type", g->model_type);
  jd_str(d, o, "source", g->source);
  jd_int(d, o, "params_total", graph_params_total(g));
  jd_int(d, o, "params_active", graph_params_active(g));
  if (m->published_params_total) jd_int(d, o, "published_params_total", m->published_params_total);
  if (m->published_params_active) jd_int(d, o, "published_params_active", m->published_params_active);
  jd_int(d, o, "n_layers", g->n_layers);
  jd_int(d, o, "hidden_size", g->hidden_size);
  jd_int(d, o, "vocab_size", g->vocab_size);
  jd_int(d, o, "seq", (int64_t)s);
  double fwd = 0, train = 0, gemm = 0, saved = 0;
  json_t *blocks = jd_arr(d, o, "blocks");
  for (int i = 0; i < g->n_blocks; i++) {
    const graph_block *blk = &g->blocks[i];
    block_fig f = block_figures(blk, s);
    double r = (double)blk->repeat;
    fwd += f.fwd_flop * r;
    train += f.train_flop * r;
    gemm += f.train_gemm_flop * r;
    saved += f.saved_bytes * r;
    json_t *b = jd_obj(d, blocks, NULL);
    jd_str(d, b, "name", blk->name);
    jd_str(d, b, "role", role_names[blk->role]);
    jd_int(d, b, "repeat", blk->repeat);
    jd_bool(d, b, "moe", blk->is_moe);
    jd_int(d, b, "n_ops", blk->n_ops);
    jd_int(d, b, "params_per_repeat", graph_block_params(blk));
    jd_int(d, b, "params_active_per_repeat", graph_block_params_active(blk));
    jd_num(d, b, "fwd_flop_per_token", f.fwd_flop);
    jd_num(d, b, "train_flop_per_token", f.train_flop);
    jd_num(d, b, "saved_activation_bytes_per_token", f.saved_bytes);
  }
  json_t *fl = jd_obj(d, o, "flop_per_token");
  jd_num(d, fl, "forward", fwd);
  jd_num(d, fl, "train", train);
  jd_num(d, fl, "train_gemm", gemm);
  jd_str(d, fl, "convention", "forward + dgrad + wgrad, no causal discount, no recompute");
  jd_num(d, o, "saved_activation_bytes_per_token", saved);
}

static ap_status doc_out(ap_ctx *ctx, jd *d, bool as_json, char *(*render)(const json_t *), char **out) {
  *out = d->failed ? NULL : as_json ? jd_dump(d) : render(d->root);
  jd_free(d);
  return *out ? AP_OK : ctx_fail(ctx, AP_NOMEM, "out of memory");
}

/* Formats a count with a unit suffix: 70.55B, 8.03B, 124.4M. */
static void human(char *out, size_t n, double v) {
  const char *suf[] = {"", "K", "M", "B", "T"};
  int k = 0;
  while (v >= 1000 && k < 4) v /= 1000, k++;
  snprintf(out, n, k ? "%.2f%s" : "%.0f%s", v, suf[k]);
}

static char *describe_text(const json_t *doc) {
  strbuf sb = {0};
  char a[32], b[32];
  int64_t total = jd_geti(doc, "params_total"), active = jd_geti(doc, "params_active");
  human(a, sizeof a, (double)total);
  human(b, sizeof b, (double)active);
  sb_printf(&sb, "model        %s (%s)\nsource       %s\n", jd_gets(doc, "name"), jd_gets(doc, "model_type"),
            jd_gets(doc, "source"));
  sb_printf(&sb, "parameters   %s total (%lld), %s active per token (%lld)\n", a, (long long)total, b, (long long)active);
  if (jd_geti(doc, "n_layers"))
    sb_printf(&sb, "shape        %lld layers, hidden %lld, vocabulary %lld\n", (long long)jd_geti(doc, "n_layers"),
              (long long)jd_geti(doc, "hidden_size"), (long long)jd_geti(doc, "vocab_size"));
  sb_printf(&sb, "sequence     %lld tokens\n\n", (long long)jd_geti(doc, "seq"));
  /* Parameters per repeat (one layer), FLOP and saved bytes for all repeats (what the block costs the model):
   * each header says which. */
  sb_printf(&sb, "%-22s %6s %14s %14s %16s %16s\n", "block", "repeat", "params/repeat", "active/repeat",
            "FLOP/token, all", "saved B/tok, all");
  const json_t *blocks = jd_at(doc, "blocks");
  for (size_t i = 0; i < json_array_size(blocks); i++) {
    const json_t *blk = json_array_get(blocks, i);
    double r = (double)jd_geti(blk, "repeat");
    human(a, sizeof a, (double)jd_geti(blk, "params_per_repeat"));
    human(b, sizeof b, (double)jd_geti(blk, "params_active_per_repeat"));
    sb_printf(&sb, "%-22s %6lld %14s %14s %16.4g %16.4g\n", jd_gets(blk, "name"), (long long)r, a, b,
              jd_getn(blk, "train_flop_per_token") * r, jd_getn(blk, "saved_activation_bytes_per_token") * r);
  }
  sb_puts(&sb, "  (params and active per repeat, one block; training FLOP and saved activation bytes per token for\n"
              "   all repeats of the block together)\n");
  sb_printf(&sb, "\nFLOP per token: forward %.4g, training %.4g (GEMM only %.4g)\n", jd_getn(doc, "flop_per_token.forward"),
            jd_getn(doc, "flop_per_token.train"), jd_getn(doc, "flop_per_token.train_gemm"));
  sb_puts(&sb, "  (forward + input-gradient + weight-gradient; no causal discount; no recompute)\n");
  return sb_take(&sb);
}

ap_status ap_model_describe_json(ap_ctx *ctx, const ap_model *m, int64_t seq, char **json_out) {
  API_ENTER(ctx);
  if (json_out) *json_out = NULL;
  if (!ctx || !m || !json_out) return ctx_fail(ctx, AP_INVALID, "ap_model_describe_json: ctx, model and json_out must not be NULL");
  jd d;
  describe_doc(&d, m, seq);
  return doc_out(ctx, &d, true, describe_text, json_out);
}

ap_status ap_model_describe_text(ap_ctx *ctx, const ap_model *m, int64_t seq, char **text_out) {
  API_ENTER(ctx);
  if (text_out) *text_out = NULL;
  if (!ctx || !m || !text_out) return ctx_fail(ctx, AP_INVALID, "ap_model_describe_text: ctx, model and text_out must not be NULL");
  jd d;
  describe_doc(&d, m, seq);
  return doc_out(ctx, &d, false, describe_text, text_out);
}

/* `models`' answer as one document (autopar-models/1): every preset, loaded, so that a preset that fails to load
 * is reported, never skipped silently. */
static ap_status models_doc(ap_ctx *ctx, jd *d) {
  const char *names[MAX_PRESETS];
  const embedded_file *files[MAX_PRESETS];
  size_t n = preset_names(names, files, MAX_PRESETS);
  jd_init(d, "autopar-models/1");
  json_t *arr = jd_arr(d, d->root, "models");
  for (size_t i = 0; i < n; i++) {
    char name[96];
    snprintf(name, sizeof name, "%s", names[i]);
    name[strlen(name) - 5] = '\0';
    ap_model *m = NULL;
    ap_status st = ap_model_load(ctx, name, &m);
    if (st) {
      jd_free(d);
      return st;
    }
    json_t *o = jd_obj(d, arr, NULL);
    jd_str(d, o, "name", name);
    jd_str(d, o, "model_type", m->g.model_type);
    jd_int(d, o, "params_total", graph_params_total(&m->g));
    jd_int(d, o, "params_active", graph_params_active(&m->g));
    jd_str(d, o, "source", m->g.source);
    ap_model_free(m);
  }
  return AP_OK;
}

static char *models_text(const json_t *doc) {
  strbuf sb = {0};
  sb_printf(&sb, "%-28s %-12s %10s %10s  %s\n", "preset", "model_type", "params", "active", "source");
  const json_t *arr = jd_at(doc, "models");
  for (size_t i = 0; i < json_array_size(arr); i++) {
    const json_t *o = json_array_get(arr, i);
    char a[32], b[32];
    human(a, sizeof a, (double)jd_geti(o, "params_total"));
    human(b, sizeof b, (double)jd_geti(o, "params_active"));
    sb_printf(&sb, "%-28s %-12s %10s %10s  %.70s\n", jd_gets(o, "name"), jd_gets(o, "model_type"), a, b,
              jd_gets(o, "source"));
  }
  return sb_take(&sb);
}

ap_status ap_models_list_json(ap_ctx *ctx, char **json_out) {
  API_ENTER(ctx);
  if (json_out) *json_out = NULL;
  if (!ctx || !json_out) return ctx_fail(ctx, AP_INVALID, "ap_models_list_json: ctx and json_out must not be NULL");
  jd d;
  ap_status st = models_doc(ctx, &d);
  return st ? st : doc_out(ctx, &d, true, models_text, json_out);
}

ap_status ap_models_list_text(ap_ctx *ctx, char **text_out) {
  API_ENTER(ctx);
  if (text_out) *text_out = NULL;
  if (!ctx || !text_out) return ctx_fail(ctx, AP_INVALID, "ap_models_list_text: ctx and text_out must not be NULL");
  jd d;
  ap_status st = models_doc(ctx, &d);
  return st ? st : doc_out(ctx, &d, false, models_text, text_out);
}
