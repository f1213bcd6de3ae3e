/* What the op-graph JSON reader's files share (model layer, private to src/model/graph_json*.c; graph_json.c
 * says what the reader does): the reading session, the limits every count is held to, the kind table, and the
 * field readers graph_json_fields.c lends to the other two files. */
#ifndef AP_MODEL_GRAPH_JSON_INTERNAL_H
#define AP_MODEL_GRAPH_JSON_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/jsonx.h"
#include "model/graph_json.h"

#define GRAPH_FORMAT "autopar-graph/1"
#define GRAPH_FORMAT_PREFIX "autopar-graph/"

/* Limits that keep every count in an int and every parameter sum far from int64 overflow (graph.c sums
 * parameters in int64). A literal dimension is at most 1e12; a tensor's literal part (the product of its
 * dimensions other than B and S) at most 1e15 elements; the whole model at most 1e17 parameters, as for the
 * transformer builder (tf_config_check). */
enum { MAX_BLOCKS = 1024, MAX_TENSORS = 4096, MAX_OPS = 4096, MAX_NAME = 256 };
#define MAX_DIM 1000000000000LL
#define MAX_SMALL 1000000LL /* heads, head dims, kernel sizes, strides, groups, experts */
#define MAX_REPEAT 1000000LL
#define MAX_LITERAL_NUMEL 1e15
#define MAX_PARAMS 1e17
#define MAX_SEQ 100000000LL

/* One reading session. */
typedef struct {
  ap_ctx *ctx;
  arena *a;
  const char *file;
  graph_builder gb;
  graph *g;
  dtype default_dt;
  double params_total; /* running total, to refuse models whose int64 sums could overflow */
  /* Per block: which op produces each tensor and which op first reads it (-1 for none), to check that
   * ops come in execution order and that each tensor has at most one producer. */
  int *producer, *first_reader;
} rd;

typedef ap_status (*kind_reader)(rd *r, const char *where, json_t *jo, graph_op *op);

/* Per kind: the fields it accepts besides the common ones, how many inputs it takes, and its reader. */
typedef struct {
  const char *keys;
  int min_in, max_in;
  kind_reader read;
} kind_spec;

#define OP_COMMON_KEYS "name|kind|in|out|save|mask|tp_split|params"
/* graph_json_kinds.c: per op kind, its own fields, its input count and its reader. */
extern const kind_spec gj_kind_specs[OP_KIND_COUNT_];

/* graph_json_fields.c. Records "file: where.key: message" (key "[i]" attaches without a dot) and returns st. */
AP_HIDDEN ap_status gj_failf(const rd *r, ap_status st, const char *where, const char *key, const char *fmt, ...)
    AP_PRINTF(5, 6);
AP_HIDDEN ap_status gj_oom(const rd *r);
/* Writes "; did you mean a, b?" into out when some candidate is close to name, else "". */
AP_HIDDEN void gj_suggestion(const char *name, const char *const *cands, size_t n, char *out, size_t out_n);
/* Every key of obj must be in the "|"-separated list allowed. */
AP_HIDDEN ap_status gj_check_keys(const rd *r, const char *where, json_t *obj, const char *allowed);
AP_HIDDEN ap_status gj_read_name(const rd *r, const char *where, json_t *obj, const char *key, bool required,
                                 const char **out);
AP_HIDDEN ap_status gj_read_pair(const rd *r, const char *where, json_t *obj, const char *key, bool required,
                                 bool allow_scalar, int64_t min, int64_t max, int64_t out[2], bool *found);
AP_HIDDEN int64_t gj_literal_numel(const graph_tensor *t);
AP_HIDDEN bool gj_has_dim(const graph_tensor *t, int64_t d);
AP_HIDDEN bool gj_same_shape(const graph_tensor *a, const graph_tensor *b);
/* A tensor reference (name) of the current block into *out. */
AP_HIDDEN ap_status gj_resolve(const rd *r, const char *where, const char *key, json_t *v, int *out);
AP_HIDDEN ap_status gj_read_dtype(const rd *r, const char *where, json_t *obj, dtype *out);
AP_HIDDEN ap_status gj_read_tensor(rd *r, const char *where, json_t *jt);

#endif
