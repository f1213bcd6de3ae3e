/* A small ONNX model builder for tests (protobuf-c, the "onnx" part): graph inputs, initializers (float weights
 * as external data of which only the dims matter, int64 constants with their values), nodes with int, ints
 * and float attributes, packed and loaded as "net.onnx". One static-size struct, freed by ob_load. */
#ifndef AP_TESTS_ONNX_BUILD_H
#define AP_TESTS_ONNX_BUILD_H

#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "onnx.pb-c.h"

enum { OB_MAX = 128, OB_DIMS = 8, OB_ATTRS = 3, OB_IO = 4 };

typedef struct {
  Onnx__ModelProto model;
  Onnx__GraphProto graph;
  Onnx__OperatorSetIdProto opset, *opsets[1];
  Onnx__NodeProto node[OB_MAX], *nodes[OB_MAX];
  Onnx__AttributeProto attr[OB_MAX][OB_ATTRS], *attrs[OB_MAX][OB_ATTRS];
  int64_t attr_ints[OB_MAX][OB_ATTRS][OB_DIMS];
  char *node_in[OB_MAX][OB_IO], *node_out[OB_MAX][OB_IO];
  Onnx__ValueInfoProto vi[OB_MAX], *vis[OB_MAX];
  Onnx__TypeProto ty[OB_MAX];
  Onnx__TypeProto__Tensor tt[OB_MAX];
  Onnx__TensorShapeProto sh[OB_MAX];
  Onnx__TensorShapeProto__Dimension dm[OB_MAX][OB_DIMS], *dms[OB_MAX][OB_DIMS];
  Onnx__TensorProto init[OB_MAX], *inits[OB_MAX];
  int64_t init_dims[OB_MAX][OB_DIMS], init_vals[OB_MAX][OB_DIMS];
} onnx_b;

static inline onnx_b *ob_new(int64_t opset) {
  onnx_b *b = calloc(1, sizeof *b);
  b->model = (Onnx__ModelProto)ONNX__MODEL_PROTO__INIT;
  b->graph = (Onnx__GraphProto)ONNX__GRAPH_PROTO__INIT;
  b->opset = (Onnx__OperatorSetIdProto)ONNX__OPERATOR_SET_ID_PROTO__INIT;
  b->opset.has_version = true;
  b->opset.version = opset;
  b->opsets[0] = &b->opset;
  b->model.has_ir_version = true;
  b->model.ir_version = 8;
  b->model.n_opset_import = 1;
  b->model.opset_import = b->opsets;
  b->model.graph = &b->graph;
  b->graph.node = b->nodes;
  b->graph.input = b->vis;
  b->graph.initializer = b->inits;
  return b;
}

static inline void ob_input(onnx_b *b, char *name, int et, int n, const int64_t *d) {
  size_t k = b->graph.n_input++;
  b->vi[k] = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
  b->ty[k] = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
  b->tt[k] = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
  b->sh[k] = (Onnx__TensorShapeProto)ONNX__TENSOR_SHAPE_PROTO__INIT;
  for (int j = 0; j < n; j++) {
    b->dm[k][j] = (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
    b->dm[k][j].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    b->dm[k][j].dim_value = d[j];
    b->dms[k][j] = &b->dm[k][j];
  }
  b->sh[k].n_dim = (size_t)n;
  b->sh[k].dim = b->dms[k];
  b->tt[k].has_elem_type = true;
  b->tt[k].elem_type = et;
  b->tt[k].shape = &b->sh[k];
  b->ty[k].value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
  b->ty[k].tensor_type = &b->tt[k];
  b->vi[k].name = name;
  b->vi[k].type = &b->ty[k];
  b->vis[k] = &b->vi[k];
}

/* A float weight of n dims d (vals NULL), or an int64 constant of n_vals values (d NULL: 1-D). */
static inline void ob_init(onnx_b *b, char *name, int n, const int64_t *d, const int64_t *vals, int n_vals) {
  size_t k = b->graph.n_initializer++;
  Onnx__TensorProto *t = &b->init[k];
  *t = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
  t->name = name;
  t->has_data_type = true;
  if (vals) {
    b->init_dims[k][0] = n_vals;
    memcpy(b->init_vals[k], vals, sizeof *vals * (size_t)n_vals);
    t->n_dims = 1, t->dims = b->init_dims[k];
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    t->n_int64_data = (size_t)n_vals, t->int64_data = b->init_vals[k];
  } else {
    memcpy(b->init_dims[k], d, sizeof *d * (size_t)n);
    t->n_dims = (size_t)n, t->dims = b->init_dims[k];
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->has_data_location = true;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  }
  b->inits[k] = t;
}

/* A node; ins and outs end at NULL. Attributes are added to the last node by ob_attr_*. */
static inline void ob_node(onnx_b *b, char *name, char *op, char *const *ins, char *const *outs) {
  size_t k = b->graph.n_node++;
  Onnx__NodeProto *nd = &b->node[k];
  *nd = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
  nd->name = name, nd->op_type = op;
  while (ins[nd->n_input]) b->node_in[k][nd->n_input] = ins[nd->n_input], nd->n_input++;
  while (outs[nd->n_output]) b->node_out[k][nd->n_output] = outs[nd->n_output], nd->n_output++;
  nd->input = b->node_in[k], nd->output = b->node_out[k];
  nd->attribute = b->attrs[k];
  b->nodes[k] = nd;
}

static inline void ob_attr_ints(onnx_b *b, char *name, int n, const int64_t *v) {
  size_t k = b->graph.n_node - 1, j = b->node[k].n_attribute++;
  Onnx__AttributeProto *a = &b->attr[k][j];
  *a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
  a->name = name, a->has_type = true;
  if (n < 0) {
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, a->has_i = true, a->i = v[0];
  } else {
    memcpy(b->attr_ints[k][j], v, sizeof *v * (size_t)n);
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS, a->n_ints = (size_t)n, a->ints = b->attr_ints[k][j];
  }
  b->attrs[k][j] = a;
}

/* Packs b, frees it and loads the model as "net.onnx". */
static inline ap_status ob_load(ap_ctx *ctx, onnx_b *b, ap_model **m) {
  size_t n = onnx__model_proto__get_packed_size(&b->model);
  uint8_t *buf = malloc(n ? n : 1);
  onnx__model_proto__pack(&b->model, buf);
  free(b);
  ap_status st = model_parse_onnx(ctx, "net.onnx", buf, n, m);
  free(buf);
  return st;
}

#define OB_L(...) ((char *const[]){__VA_ARGS__, NULL})
#define OB_D(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), ((const int64_t[]){__VA_ARGS__})

#endif
