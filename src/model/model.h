/* The public model handle (model layer): a graph plus where it came from. Other modules reach the graph
 * through model_graph(). */
#ifndef AP_MODEL_MODEL_H
#define AP_MODEL_MODEL_H

#include "model/graph.h"
#include "model/transformer.h"

struct ap_model {
  arena *a;
  graph g;
  int64_t published_params_total; /* from a preset's metadata; 0 when unknown */
  int64_t published_params_active;
  const char *spec; /* the absolute path of the file ap_model_load read (arena); NULL for presets, built models */
};

AP_HIDDEN const graph *model_graph(const ap_model *m);
/* Builds a model from a transformer config (used by tests and by validate's inline architectures). The
 * caller frees *out with ap_model_free. */
AP_HIDDEN ap_status model_from_tf_config(ap_ctx *ctx, const tf_config *c, ap_model **out);
/* Parses a model from memory (HF config or op graph); file names the source in messages. */
AP_HIDDEN ap_status model_parse(ap_ctx *ctx, const char *file, const char *text, size_t n, ap_model **out);
/* Decodes an ONNX model from memory through the "onnx" part of ctx (ctx_part_ops); AP_UNSUPPORTED naming the
 * part when ctx has none. */
AP_HIDDEN ap_status model_parse_onnx(ap_ctx *ctx, const char *file, const void *bytes, size_t n, ap_model **out);

/* Where a --model that is not a preset is on disk (model_path.c): out is spec itself (a file, or a path the
 * reader will say it cannot open), SPEC/config.json for a folder that holds one, or the config.json of a
 * Hugging Face model id ORG/NAME in the Hugging Face cache. AP_NOTFOUND with one line for a folder without a
 * config.json and for an id not on disk (where to put its config.json, and suggest, the closest presets).
 * model_is_hf_id: spec reads as ORG/NAME; model_hf_cache_dir: the cache folder huggingface_hub uses. */
AP_HIDDEN ap_status model_find_file(ap_ctx *ctx, const char *spec, const char *suggest, char *out, size_t n);
AP_HIDDEN bool model_is_hf_id(const char *spec);
AP_HIDDEN void model_hf_cache_dir(char *out, size_t n);
/* The name a model read from file goes by: the file's base name without .json; for a config.json, its
 * folder's name, or ORG/NAME for a snapshot in the Hugging Face cache. */
AP_HIDDEN void model_name_of_file(const char *file, char *out, size_t n);

#endif
