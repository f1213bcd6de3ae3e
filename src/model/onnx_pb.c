/* The "onnx" optional part (model layer, libautopar-onnx.a): decodes an ONNX file with protobuf-c and hands
 * its graph to the core importer (onnx_import, src/model/onnx_import.c) in the neutral form of onnx.h. The
 * C code for onnx.proto is generated at build time from Debian's libonnx-dev copy (mk/onnx.mk). This is the
 * only file of autopar that includes protobuf-c headers besides the generated one.
 *
 * Nothing is read from outside the given bytes: an initializer whose data is external (data_location =
 * EXTERNAL) keeps its name, dims and dtype, and its data file is never opened. Integer tensors stored in
 * the file with at most ONNX_MAX_VALUES elements keep their values (shape arithmetic needs them). */
#include <stdio.h>
#include <string.h>

#include "model/onnx.h"
#include "onnx.pb-c.h"

typedef struct {
  ap_ctx *ctx;
  arena *a;
  const char *file;
  bool keep; /* keep every tensor's values (the executor's decode) */
} dec;

static ap_status oom(const dec *d) { return ctx_fail(d->ctx, AP_NOMEM, "%s: out of memory decoding the model", d->file); }

static const char *str_or_empty(const char *s) { return s ? s : ""; }

/* Reads element i of raw little-endian data of width w (signed unless unsigned_). */
static int64_t raw_int(const uint8_t *p, size_t w, bool unsigned_) {
  uint64_t v = 0;
  for (size_t k = 0; k < w; k++) v |= (uint64_t)p[k] << (8 * k);
  if (!unsigned_ && w < 8 && (v >> (8 * w - 1)) & 1) v |= ~(uint64_t)0 << (8 * w);
  return (int64_t)v;
}

/* The integer values of t when they are stored in the file and few; n_vals = -1 otherwise. */
static ap_status tensor_values(const dec *d, const Onnx__TensorProto *t, int64_t numel, onnx_tensor *o) {
  o->n_vals = -1;
  if (o->external || numel < 0 || (numel > ONNX_MAX_VALUES && !d->keep)) return AP_OK;
  size_t w = 0;
  bool uns = false;
  switch (t->data_type) {
  case ONNX_INT64: w = 8; break;
  case ONNX_UINT64: w = 8, uns = true; break;
  case ONNX_INT32: w = 4; break;
  case ONNX_UINT32: w = 4, uns = true; break;
  case ONNX_INT16: w = 2; break;
  case ONNX_UINT16: w = 2, uns = true; break;
  case ONNX_INT8: w = 1; break;
  case ONNX_UINT8:
  case ONNX_BOOL: w = 1, uns = true; break;
  default: return AP_OK;
  }
  size_t n = (size_t)numel;
  /* The values must be in the file before a buffer is sized by the dims (a file may claim any dims). */
  size_t have = t->has_raw_data ? (t->raw_data.len % w ? 0 : t->raw_data.len / w)
                : t->data_type == ONNX_INT64 ? t->n_int64_data
                : t->data_type == ONNX_UINT64 || t->data_type == ONNX_UINT32 ? t->n_uint64_data
                                                                             : t->n_int32_data;
  if (have != n) return AP_OK;
  int64_t *v = arena_alloc(d->a, sizeof *v * (n ? n : 1));
  if (!v) return oom(d);
  if (t->has_raw_data) {
    if (t->raw_data.len != n * w) return AP_OK;
    for (size_t i = 0; i < n; i++) v[i] = raw_int(t->raw_data.data + i * w, w, uns);
  } else if (t->data_type == ONNX_INT64 && t->n_int64_data == n) {
    if (n) memcpy(v, t->int64_data, sizeof *v * n);
  } else if (t->data_type == ONNX_UINT64 || t->data_type == ONNX_UINT32) {
    if (t->n_uint64_data != n) return AP_OK;
    for (size_t i = 0; i < n; i++) v[i] = (int64_t)t->uint64_data[i];
  } else if (t->data_type != ONNX_INT64 && t->n_int32_data == n) {
    for (size_t i = 0; i < n; i++) v[i] = t->int32_data[i];
  } else {
    return AP_OK;
  }
  o->vals = v;
  o->n_vals = (int64_t)n;
  return AP_OK;
}

/* The bytes of one element of data type et in raw_data and the typed field that holds it otherwise
 * (onnx.proto, TensorProto: FLOAT16, BFLOAT16 and the small integers in int32_data, UINT32 in uint64_data,
 * COMPLEX64 as two floats); 0 for a type autopar does not know (STRING has no raw form). */
static size_t elem_bytes(int et) {
  switch (et) {
  case ONNX_UINT8: case ONNX_INT8: case ONNX_BOOL: return 1;
  case ONNX_UINT16: case ONNX_INT16: case ONNX_FLOAT16: case ONNX_BFLOAT16: return 2;
  case ONNX_FLOAT: case ONNX_INT32: case ONNX_UINT32: return 4;
  case ONNX_INT64: case ONNX_UINT64: case ONNX_DOUBLE: case 14 /* COMPLEX64 */: return 8;
  case 15 /* COMPLEX128 */: return 16;
  default: return 0;
  }
}

/* The number of typed values stored for data type et, per element (complex: 2), or false when unknown. */
static bool typed_count(const Onnx__TensorProto *t, int et, size_t *n, uint64_t *per) {
  *per = 1;
  switch (et) {
  case ONNX_FLOAT: *n = t->n_float_data; return true;
  case 14: *n = t->n_float_data, *per = 2; return true;
  case ONNX_DOUBLE: *n = t->n_double_data; return true;
  case 15: *n = t->n_double_data, *per = 2; return true;
  case ONNX_INT64: *n = t->n_int64_data; return true;
  case ONNX_UINT32: case ONNX_UINT64: *n = t->n_uint64_data; return true;
  case ONNX_STRING: *n = t->n_string_data; return true;
  case ONNX_UINT8: case ONNX_INT8: case ONNX_BOOL: case ONNX_UINT16: case ONNX_INT16: case ONNX_INT32:
  case ONNX_FLOAT16: case ONNX_BFLOAT16: *n = t->n_int32_data; return true;
  default: return false;
  }
}

/* Every tensor stored in the file holds exactly what its dims and data type say (issue 19, class 6: a short
 * raw_data was accepted, an out-of-bounds read once the executor reads initializers). */
static ap_status check_length(const dec *d, const Onnx__TensorProto *t, const char *name, uint64_t numel) {
  int et = t->has_data_type ? t->data_type : 0;
  if (t->has_raw_data) {
    size_t w = elem_bytes(et);
    uint64_t want;
    if (!w) {
      if (et == ONNX_STRING)
        return ctx_fail(d->ctx, AP_INVALID, "%s: tensor '%.200s': a string tensor cannot have raw_data", d->file, name);
      return AP_OK; /* a type autopar does not read: refused where it is used */
    }
    if (__builtin_mul_overflow(numel, (uint64_t)w, &want) || want != t->raw_data.len)
      return ctx_fail(d->ctx, AP_INVALID, "%s: tensor '%.200s': raw_data holds %zu bytes, its dims and data type "
                      "need %llu elements of %zu bytes", d->file, name, t->raw_data.len, (unsigned long long)numel, w);
    return AP_OK;
  }
  size_t n = 0;
  uint64_t per = 1, want;
  if (!typed_count(t, et, &n, &per)) return AP_OK;
  if (__builtin_mul_overflow(numel, per, &want) || want != n)
    return ctx_fail(d->ctx, AP_INVALID, "%s: tensor '%.200s': %zu values stored, its dims need %llu", d->file, name, n,
                    (unsigned long long)numel);
  return AP_OK;
}

static ap_status tensor(const dec *d, const Onnx__TensorProto *t, onnx_tensor *o) {
  memset(o, 0, sizeof *o);
  o->name = str_or_empty(t->name);
  o->elem_type = t->has_data_type ? t->data_type : 0;
  if (t->n_dims > ONNX_MAX_DIMS)
    return ctx_fail(d->ctx, AP_INVALID, "%s: tensor '%.200s': %zu dimensions (autopar reads at most %d)", d->file,
                    o->name, t->n_dims, ONNX_MAX_DIMS);
  o->n_dims = (int)t->n_dims;
  o->dims = t->dims;
  o->external = t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  uint64_t numel = 1;
  for (size_t i = 0; i < t->n_dims; i++) {
    if (t->dims[i] < 0)
      return ctx_fail(d->ctx, AP_INVALID, "%s: tensor '%.200s': dims[%zu] = %lld (expected >= 0)", d->file, o->name, i,
                      (long long)t->dims[i]);
    if (__builtin_mul_overflow(numel, (uint64_t)t->dims[i], &numel))
      return ctx_fail(d->ctx, AP_INVALID, "%s: tensor '%.200s': the product of its dims overflows 64 bits", d->file,
                      o->name);
  }
  if (!o->external) {
    ap_status st = check_length(d, t, o->name, numel);
    if (st) return st;
  }
  if (d->keep && o->elem_type == ONNX_FLOAT && !o->external) {
    if (numel > 1e10) return ctx_fail(d->ctx, AP_INVALID, "%s: tensor '%.200s': too large", d->file, o->name);
    size_t n = (size_t)numel;
    /* The data must hold the floats before any buffer is sized by the dims. */
    if (!(t->has_raw_data && t->raw_data.len == n * 4) && !(!t->has_raw_data && t->n_float_data == n))
      return ctx_fail(d->ctx, AP_INVALID, "%s: tensor '%.200s': its data does not hold its %zu floats", d->file, o->name, n);
    float *f = arena_alloc(d->a, sizeof *f * (n ? n : 1));
    if (!f) return oom(d);
    if (t->has_raw_data) {
      for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)raw_int(t->raw_data.data + 4 * i, 4, true);
        memcpy(&f[i], &u, sizeof u);
      }
    } else if (!t->has_raw_data && t->n_float_data == n) {
      if (n) memcpy(f, t->float_data, sizeof *f * n);
    } else {
      return ctx_fail(d->ctx, AP_INVALID, "%s: tensor '%.200s': its data does not hold its %zu floats", d->file, o->name, n);
    }
    o->f32 = f;
  }
  return tensor_values(d, t, numel <= (d->keep ? 1e10 : ONNX_MAX_VALUES) ? (int64_t)numel : -1, o);
}

static ap_status attr(const dec *d, const Onnx__AttributeProto *p, onnx_attr *o, bool *subgraph) {
  memset(o, 0, sizeof *o);
  o->name = str_or_empty(p->name);
  int type = p->has_type ? (int)p->type : 0;
  if (!p->has_type) { /* IR version 1: the field in use says the type */
    if (p->has_f) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    else if (p->has_i) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    else if (p->has_s) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    else if (p->t) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    else if (p->n_ints) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    else if (p->n_floats) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
  }
  if (p->g || p->n_graphs) *subgraph = true;
  switch (type) {
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
    o->type = ONNX_ATTR_FLOAT;
    o->f = p->f;
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
    o->type = ONNX_ATTR_INT;
    o->i = p->i;
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: {
    o->type = ONNX_ATTR_STRING;
    char *s = arena_alloc(d->a, p->s.len + 1);
    if (!s) return oom(d);
    if (p->s.len) memcpy(s, p->s.data, p->s.len);
    s[p->s.len] = '\0';
    o->s = s;
    break;
  }
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
    if (!p->t) break;
    onnx_tensor *t = arena_alloc(d->a, sizeof *t);
    if (!t) return oom(d);
    ap_status st = tensor(d, p->t, t);
    if (st) return st;
    o->type = ONNX_ATTR_TENSOR;
    o->t = t;
    break;
  }
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
    if (p->n_ints > INT32_MAX) break;
    o->type = ONNX_ATTR_INTS;
    o->n_ints = (int)p->n_ints;
    o->ints = p->ints;
    if (d->keep) {
      int64_t *v = arena_alloc(d->a, sizeof *v * (p->n_ints ? p->n_ints : 1));
      if (!v) return oom(d);
      if (p->n_ints) memcpy(v, p->ints, sizeof *v * p->n_ints);
      o->ints = v;
    }
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
    if (p->n_floats > INT32_MAX) break;
    o->type = ONNX_ATTR_FLOATS;
    o->n_floats = (int)p->n_floats;
    if (d->keep) {
      float *f = arena_alloc(d->a, sizeof *f * (p->n_floats ? p->n_floats : 1));
      if (!f) return oom(d);
      if (p->n_floats) memcpy(f, p->floats, sizeof *f * p->n_floats);
      o->floats = f;
    }
    break;
  default:
    o->type = ONNX_ATTR_OTHER;
    break;
  }
  return AP_OK;
}

static ap_status value(const dec *d, const Onnx__ValueInfoProto *p, onnx_value *o) {
  memset(o, 0, sizeof *o);
  o->name = str_or_empty(p->name);
  o->n_dims = -1;
  if (!p->type || p->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !p->type->tensor_type) return AP_OK;
  const Onnx__TypeProto__Tensor *tt = p->type->tensor_type;
  o->elem_type = tt->has_elem_type ? tt->elem_type : 0;
  if (!tt->shape) return AP_OK;
  if (tt->shape->n_dim > ONNX_MAX_DIMS)
    return ctx_fail(d->ctx, AP_INVALID, "%s: value '%.200s': %zu dimensions (autopar reads at most %d)", d->file, o->name,
                    tt->shape->n_dim, ONNX_MAX_DIMS);
  o->n_dims = (int)tt->shape->n_dim;
  for (int i = 0; i < o->n_dims; i++) {
    const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[i];
    o->dims[i] = dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ? dim->dim_value : -1;
  }
  return AP_OK;
}

static ap_status values(const dec *d, Onnx__ValueInfoProto **in, size_t n, const onnx_value **out, int *n_out) {
  if (n > INT32_MAX / 2) return ctx_fail(d->ctx, AP_INVALID, "%s: too many values", d->file);
  onnx_value *v = arena_alloc(d->a, sizeof *v * (n ? n : 1));
  if (!v) return oom(d);
  for (size_t i = 0; i < n; i++) {
    ap_status st = value(d, in[i], &v[i]);
    if (st) return st;
  }
  *out = v;
  *n_out = (int)n;
  return AP_OK;
}

static ap_status node(const dec *d, const Onnx__NodeProto *p, onnx_node *o) {
  memset(o, 0, sizeof *o);
  o->name = p->name;
  o->op_type = str_or_empty(p->op_type);
  o->domain = str_or_empty(p->domain);
  if (p->n_input > INT32_MAX / 2 || p->n_output > INT32_MAX / 2 || p->n_attribute > INT32_MAX / 2)
    return ctx_fail(d->ctx, AP_INVALID, "%s: node '%.200s': too many inputs, outputs or attributes", d->file,
                    str_or_empty(p->name));
  o->n_in = (int)p->n_input;
  o->n_out = (int)p->n_output;
  o->in = (const char *const *)p->input;
  o->out = (const char *const *)p->output;
  onnx_attr *at = arena_alloc(d->a, sizeof *at * (p->n_attribute ? p->n_attribute : 1));
  if (!at) return oom(d);
  for (size_t i = 0; i < p->n_attribute; i++) {
    ap_status st = attr(d, p->attribute[i], &at[i], &o->has_subgraph);
    if (st) return st;
  }
  o->n_attrs = (int)p->n_attribute;
  o->attrs = at;
  return AP_OK;
}

/* Fills the neutral model from the decoded message (pointers into it stay valid until it is freed). */
static ap_status convert(const dec *d, const Onnx__ModelProto *mp, onnx_model *m) {
  memset(m, 0, sizeof *m);
  const Onnx__GraphProto *g = mp->graph;
  if (!g) return ctx_fail(d->ctx, AP_INVALID, "%s: the model has no graph", d->file);
  m->ir_version = mp->has_ir_version ? mp->ir_version : 0;
  m->producer = str_or_empty(mp->producer_name);
  for (size_t i = 0; i < mp->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
    if (o && (!o->domain || !*o->domain || strcmp(o->domain, "ai.onnx") == 0) && o->has_version) m->opset = o->version;
  }
  ap_status st;
  if ((st = values(d, g->input, g->n_input, &m->inputs, &m->n_inputs))) return st;
  if ((st = values(d, g->output, g->n_output, &m->outputs, &m->n_outputs))) return st;
  if ((st = values(d, g->value_info, g->n_value_info, &m->value_info, &m->n_value_info))) return st;
  if (g->n_initializer > INT32_MAX / 2 || g->n_node > INT32_MAX / 2)
    return ctx_fail(d->ctx, AP_INVALID, "%s: too many initializers or nodes", d->file);
  onnx_tensor *inits = arena_alloc(d->a, sizeof *inits * (g->n_initializer ? g->n_initializer : 1));
  onnx_node *nodes = arena_alloc(d->a, sizeof *nodes * (g->n_node ? g->n_node : 1));
  if (!inits || !nodes) return oom(d);
  for (size_t i = 0; i < g->n_initializer; i++)
    if ((st = tensor(d, g->initializer[i], &inits[i]))) return st;
  for (size_t i = 0; i < g->n_node; i++)
    if ((st = node(d, g->node[i], &nodes[i]))) return st;
  if (g->n_sparse_initializer)
    return ctx_fail(d->ctx, AP_UNSUPPORTED, "%s: sparse initializers are not supported", d->file);
  m->n_inits = (int)g->n_initializer;
  m->inits = inits;
  m->n_nodes = (int)g->n_node;
  m->nodes = nodes;
  return AP_OK;
}

static ap_status onnx_load(ap_ctx *ctx, arena *a, const char *file, const void *bytes, size_t n, graph *out) {
  dec d = {ctx, a, file, false};
  ap_status st = onnx_wire_check(ctx, file, bytes, n); /* protobuf-c's recursion has no depth bound */
  if (st) return st;
  Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, n, bytes);
  if (!mp) return ctx_fail(ctx, AP_INVALID, "%s: not an ONNX model (the protobuf does not decode as onnx.ModelProto)", file);
  onnx_model m;
  st = convert(&d, mp, &m);
  if (!st) st = onnx_import(ctx, a, file, &m, out);
  onnx__model_proto__free_unpacked(mp, NULL);
  return st;
}

/* The arena copy of a string of the message (the executor's decode outlives the message). */
static const char *keep_str(const dec *d, const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s);
  char *c = arena_alloc(d->a, n + 1);
  if (c) memcpy(c, s, n + 1);
  return c;
}

static const char *const *keep_strs(const dec *d, const char *const *s, int n) {
  const char **c = arena_alloc(d->a, sizeof *c * (size_t)(n ? n : 1));
  if (!c) return NULL;
  for (int i = 0; i < n; i++)
    if (!(c[i] = keep_str(d, s[i]))) return NULL;
  return c;
}

/* Copies every string and array that still points into the message into the arena. */
static ap_status keep_all(const dec *d, onnx_model *m) {
  for (int i = 0; i < m->n_nodes; i++) {
    onnx_node *nd = (onnx_node *)&m->nodes[i];
    nd->in = keep_strs(d, nd->in, nd->n_in);
    nd->out = keep_strs(d, nd->out, nd->n_out);
    if (!nd->in || !nd->out) return oom(d);
    if (nd->name && !(nd->name = keep_str(d, nd->name))) return oom(d);
    nd->op_type = keep_str(d, nd->op_type);
    nd->domain = keep_str(d, nd->domain);
    for (int k = 0; k < nd->n_attrs; k++) {
      onnx_attr *at = (onnx_attr *)&nd->attrs[k];
      if (!(at->name = keep_str(d, at->name))) return oom(d);
      if (at->t) {
        onnx_tensor *t = (onnx_tensor *)at->t;
        t->name = keep_str(d, t->name);
        int64_t *dims = arena_alloc(d->a, sizeof *dims * (size_t)(t->n_dims ? t->n_dims : 1));
        if (!dims) return oom(d);
        if (t->n_dims) memcpy(dims, t->dims, sizeof *dims * (size_t)t->n_dims);
        t->dims = dims;
      }
    }
  }
  for (int i = 0; i < m->n_inits; i++) {
    onnx_tensor *t = (onnx_tensor *)&m->inits[i];
    t->name = keep_str(d, t->name);
    int64_t *dims = arena_alloc(d->a, sizeof *dims * (size_t)(t->n_dims ? t->n_dims : 1));
    if (!dims || !t->name) return oom(d);
    if (t->n_dims) memcpy(dims, t->dims, sizeof *dims * (size_t)t->n_dims);
    t->dims = dims;
  }
  onnx_value *vs[3] = {(onnx_value *)m->inputs, (onnx_value *)m->outputs, (onnx_value *)m->value_info};
  int ns[3] = {m->n_inputs, m->n_outputs, m->n_value_info};
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < ns[k]; i++)
      if (!(vs[k][i].name = keep_str(d, vs[k][i].name))) return oom(d);
  m->producer = keep_str(d, m->producer);
  return AP_OK;
}

static ap_status onnx_decode(ap_ctx *ctx, arena *a, const char *file, const void *bytes, size_t n, onnx_model *out) {
  dec d = {ctx, a, file, true};
  ap_status st = onnx_wire_check(ctx, file, bytes, n); /* the same nesting bound as onnx_load's */
  if (st) return st;
  Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, n, bytes);
  if (!mp) return ctx_fail(ctx, AP_INVALID, "%s: not an ONNX model (the protobuf does not decode as onnx.ModelProto)", file);
  st = convert(&d, mp, out);
  if (!st) st = keep_all(&d, out);
  onnx__model_proto__free_unpacked(mp, NULL);
  return st;
}

static const onnx_part_ops ops = {.load = onnx_load, .decode = onnx_decode};
static const ap_part part = {.name = "onnx", .ops = &ops};

const ap_part *ap_part_onnx(void) { return &part; }
