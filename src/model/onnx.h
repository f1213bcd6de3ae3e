/* ONNX models (model layer): the neutral form of a decoded ONNX file, the ops table of the optional "onnx"
 * part, and the importer that turns a decoded model into autopar's graph (graph.h).
 *
 * Decoding the protobuf needs protobuf-c, so it lives in the optional part (src/model/onnx_pb.c, built into
 * libautopar-onnx.a; docs/build.md). The part fills an onnx_model whose strings and arrays point into its
 * decoded message (or into the arena) and calls onnx_import, which is plain C in the core library: shape
 * inference, the per-op rules (kind, FLOP, bytes, saved tensors), parameters from initializers and the
 * batch/sequence relabelling. The model loader reaches the part only through ctx_part_ops(ctx, "onnx"). The
 * file format is onnx/onnx.proto as Debian's libonnx-dev ships it (ONNX 1.12); docs/model-inputs.md lists
 * the op types read and their rules. */
#ifndef AP_MODEL_ONNX_H
#define AP_MODEL_ONNX_H

#include "model/graph.h"

/* ONNX TensorProto.DataType codes (onnx.proto, enum DataType). */
enum {
  ONNX_FLOAT = 1, ONNX_UINT8 = 2, ONNX_INT8 = 3, ONNX_UINT16 = 4, ONNX_INT16 = 5, ONNX_INT32 = 6, ONNX_INT64 = 7,
  ONNX_STRING = 8, ONNX_BOOL = 9, ONNX_FLOAT16 = 10, ONNX_DOUBLE = 11, ONNX_UINT32 = 12, ONNX_UINT64 = 13,
  ONNX_BFLOAT16 = 16
};
enum { ONNX_MAX_DIMS = 8 };

/* A tensor value: an initializer or a Constant's "value". Integer values are kept (as int64) when stored in
 * the file and at most ONNX_MAX_VALUES long, for shape arithmetic; weights are never kept. external: the data
 * lives in another file, which is never opened (only dims matter). */
enum { ONNX_MAX_VALUES = 4096 };
typedef struct {
  const char *name;
  int elem_type;
  int n_dims;
  const int64_t *dims;
  bool external;
  int64_t n_vals; /* -1 when the values are not known */
  const int64_t *vals;
  const float *f32; /* FLOAT data, only when decoded for the executor (onnx_part_ops.decode); else NULL */
} onnx_tensor;

typedef enum { ONNX_ATTR_OTHER, ONNX_ATTR_FLOAT, ONNX_ATTR_INT, ONNX_ATTR_STRING, ONNX_ATTR_TENSOR, ONNX_ATTR_INTS,
               ONNX_ATTR_FLOATS } onnx_attr_type;
typedef struct {
  const char *name;
  onnx_attr_type type;
  double f;
  int64_t i;
  const char *s;
  int n_ints; /* INTS: the list; FLOATS: only the count is kept, in n_floats */
  const int64_t *ints;
  int n_floats;
  const float *floats; /* FLOATS: the list, only when decoded for the executor; else NULL */
  const onnx_tensor *t;
} onnx_attr;

typedef struct {
  const char *name;    /* may be NULL or "": named <op_type>_<index> */
  const char *op_type;
  const char *domain;  /* "" or NULL for the default ONNX domain */
  int n_in, n_out;
  const char *const *in; /* "" for an omitted optional input */
  const char *const *out;
  int n_attrs;
  const onnx_attr *attrs;
  bool has_subgraph; /* an attribute holds a graph (If, Loop, Scan): not read */
} onnx_node;

/* A value's declared type: elem_type 0 when unknown; n_dims -1 when the rank is unknown; a dim < 0 when it
 * is symbolic or unknown. */
typedef struct {
  const char *name;
  int elem_type;
  int n_dims;
  int64_t dims[ONNX_MAX_DIMS];
} onnx_value;

typedef struct {
  int64_t ir_version, opset;
  const char *producer;
  int n_inputs, n_outputs, n_value_info, n_inits, n_nodes;
  const onnx_value *inputs, *outputs, *value_info;
  const onnx_tensor *inits;
  const onnx_node *nodes;
} onnx_model;

/* The "onnx" part's ops table (ctx_part_ops(ctx, "onnx")): decodes an ONNX file's bytes and imports it into
 * *out (allocated from a). file names the source in messages. */
typedef struct {
  ap_status (*load)(ap_ctx *ctx, arena *a, const char *file, const void *bytes, size_t n, graph *out);
  /* Decodes the file into *out with every tensor's values kept (FLOAT data in f32, integer tensors of any
   * size in vals, FLOATS attributes), copied into a: what the graph executor (src/exec/graph/) runs. */
  ap_status (*decode)(ap_ctx *ctx, arena *a, const char *file, const void *bytes, size_t n, onnx_model *out);
} onnx_part_ops;

/* Imports a decoded model (core library; called by the part). Errors name the file and the node
 * ("net.onnx: node 'Foo_12' (op_type Foo): unsupported op type"). */
AP_HIDDEN ap_status onnx_import(ap_ctx *ctx, arena *a, const char *file, const onnx_model *m, graph *out);

/* The deepest nesting of protobuf messages read (a subgraph level is three: GraphProto, NodeProto,
 * AttributeProto; a sequence type two). TUNING: 64 leaves 20 levels of If within If, far beyond any export
 * seen, while protobuf-c's recursion stays a few kilobytes of stack. */
enum { ONNX_MAX_NESTING = 64 };

/* Scans an ONNX file's protobuf wire format and fails (AP_INVALID, naming the file and the byte) when its
 * messages nest deeper than ONNX_MAX_NESTING; called before protobuf-c unpacks, whose recursion has no bound
 * (src/model/onnx_wire.c). Malformed bytes pass: the decoder refuses them. */
AP_HIDDEN ap_status onnx_wire_check(ap_ctx *ctx, const char *file, const void *bytes, size_t n);

#endif
