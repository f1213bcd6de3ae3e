/* The ONNX importer (model layer, core library): turns a decoded ONNX graph (onnx.h, filled by the "onnx" part)
 * into autopar's graph, one block of role "other" holding every op, so that the cost model and the planner's
 * transformer-free path see it like an op-graph file (docs/model-inputs.md "ONNX").
 *
 * Order of work: initializers (parameters and constants), graph inputs, declared shapes (value_info and
 * outputs, read first), then the nodes in their (topological) order. Each node's op type must be one autopar
 * reads (onnx_ops.c) or the import fails naming the node; its output shapes come from the file or from shape
 * inference (onnx_shape.c). A node that depends on the graph inputs' data becomes a graph op; a node that
 * depends only on initializers, constants and shapes (shape arithmetic, a position table lookup) is folded at
 * import: it costs nothing per sample, and the parameters it reads are counted by the first op that uses its
 * result. Trainable parameters are the floating-point initializers except BatchNormalization's running mean
 * and variance; each is counted once, so a tied weight is not counted again.
 *
 * Batch and sequence: in a static-shape export the first dim of the graph inputs is the batch b0 and the
 * second dim of integer (token) inputs the sequence s0. Those dims are tagged B and S at the graph inputs and
 * the tags follow each node's semantics (onnx_dims.c ox_dim_tags: the dim correspondence of pointwise ops,
 * transposes, concatenations, reductions and gathers, the leading dims of a matmul, the batch of a convolution,
 * element offsets through views, where B·S merges and splits and B·heads is torch's [S, B·heads, d] attention
 * layout); a tagged dim is relabelled to the graph's symbolic B, S, [B, S] or [B, heads] (graph.h), so a hidden
 * size equal to the sequence stays literal. A tensor whose tags place no batch takes its first dim of b0's size
 * as B. A value no tag rule reached keeps the older rule by sizes: a dim equal to b0, s0 or b0·s0, or a
 * multiple of b0 in one of the first two places of a tensor of rank >= 3 with no dim equal to b0, at most one
 * B per tensor. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "model/onnx_internal.h"

enum { MAX_NODES = 200000, MAX_VALUES = 1000000 };

/* ---- The value table ---- */

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static ap_status oom(const ox *x) { return ctx_fail(x->ctx, AP_NOMEM, "%s: out of memory importing the model", x->file); }

static int find_val(const ox *x, const char *name) {
  if (!x->hash_cap) return -1;
  size_t mask = (size_t)x->hash_cap - 1;
  for (size_t h = (size_t)hash_str(name) & mask;; h = (h + 1) & mask) {
    int i = x->hash[h];
    if (i < 0) return -1;
    if (strcmp(x->vals[i].name, name) == 0) return i;
  }
}

static bool rehash(ox *x, int cap) {
  int *h = arena_alloc(x->a, sizeof *h * (size_t)cap);
  if (!h) return false;
  for (int i = 0; i < cap; i++) h[i] = -1;
  size_t mask = (size_t)cap - 1;
  for (int i = 0; i < x->n_vals; i++) {
    size_t k = (size_t)hash_str(x->vals[i].name) & mask;
    while (h[k] >= 0) k = (k + 1) & mask;
    h[k] = i;
  }
  x->hash = h;
  x->hash_cap = cap;
  return true;
}

/* Adds a value named name (which must be new); returns its index or -1 (out of memory or too many). */
static int add_val(ox *x, const char *name) {
  if (x->n_vals >= MAX_VALUES) return -1;
  if (x->n_vals == x->cap_vals) {
    int nc = x->cap_vals ? x->cap_vals * 2 : 256;
    ox_val *nv = arena_alloc(x->a, sizeof *nv * (size_t)nc);
    if (!nv) return -1;
    if (x->n_vals) memcpy(nv, x->vals, sizeof *nv * (size_t)x->n_vals);
    x->vals = nv;
    x->cap_vals = nc;
  }
  ox_val *v = &x->vals[x->n_vals];
  *v = (ox_val){.name = name, .n_dims = -1, .n_vals = -1, .producer = -1, .tensor = -1};
  x->n_vals++;
  if (2 * x->n_vals > x->hash_cap) {
    if (!rehash(x, x->hash_cap ? x->hash_cap * 2 : 1024)) return -1;
  } else {
    size_t mask = (size_t)x->hash_cap - 1, k = (size_t)hash_str(name) & mask;
    while (x->hash[k] >= 0) k = (k + 1) & mask;
    x->hash[k] = x->n_vals - 1;
  }
  return x->n_vals - 1;
}

static bool is_float(int et) {
  return et == ONNX_FLOAT || et == ONNX_FLOAT16 || et == ONNX_BFLOAT16 || et == ONNX_DOUBLE;
}

static bool is_int(int et) {
  return et == ONNX_INT64 || et == ONNX_INT32 || et == ONNX_INT16 || et == ONNX_INT8 || et == ONNX_UINT8 ||
         et == ONNX_UINT16 || et == ONNX_UINT32 || et == ONNX_UINT64;
}

static bool graph_dtype(int et, dtype *out) {
  switch (et) {
  case 0:
  case ONNX_FLOAT: *out = DT_FP32; return true;
  case ONNX_FLOAT16: *out = DT_FP16; return true;
  case ONNX_BFLOAT16: *out = DT_BF16; return true;
  case ONNX_DOUBLE: *out = DT_FP64; return true;
  case ONNX_INT64:
  case ONNX_UINT64: *out = DT_INT64; return true;
  case ONNX_INT32:
  case ONNX_UINT32: *out = DT_INT32; return true;
  case ONNX_INT16:
  case ONNX_UINT16: *out = DT_INT16; return true;
  case ONNX_INT8:
  case ONNX_UINT8:
  case ONNX_BOOL: *out = DT_U8; return true;
  default: return false;
  }
}

/* ---- Batch and sequence ---- */

typedef struct {
  int64_t b0, s0;
} refs;

/* The symbolic shape of a tensor of literal dims d (the rules at the top of the file); returns the rank, or -1
 * when the relabelled shape would exceed GRAPH_MAX_DIMS (the caller then keeps the literal shape). */
static int relabel(const refs *r, const int64_t *d, int n, int64_t *out, int8_t *first, int8_t *count) {
  bool exact_b = false, has_b = false;
  for (int i = 0; i < n; i++) exact_b = exact_b || (r->b0 > 1 && d[i] == r->b0);
  int k = 0;
  for (int i = 0; i < n; i++) {
    int64_t v = d[i];
    int64_t add[3];
    int na = 0;
    int64_t bs = 0;
    if (r->b0 > 1 && r->s0 > 1 && !has_b && !__builtin_mul_overflow(r->b0, r->s0, &bs) && v == bs) {
      add[na++] = DIM_B, add[na++] = DIM_S, has_b = true;
    } else if (r->b0 > 1 && !has_b && v == r->b0) {
      add[na++] = DIM_B, has_b = true;
    } else if (r->s0 > 1 && v == r->s0) {
      add[na++] = DIM_S;
    } else if (r->b0 > 1 && n >= 3 && i < 2 && !exact_b && !has_b && v > r->b0 && v % r->b0 == 0) {
      add[na++] = DIM_B, add[na++] = v / r->b0, has_b = true;
    } else {
      add[na++] = v;
    }
    if (k + na > GRAPH_MAX_DIMS) return -1;
    first[i] = (int8_t)k;
    count[i] = (int8_t)na;
    for (int j = 0; j < na; j++) out[k++] = add[j];
  }
  return k;
}

/* The symbolic shape of a tagged value (ox_val tag): B, S, [B, S] or [B, v / b0] where its tags say, literal
 * elsewhere; -1 when it would exceed GRAPH_MAX_DIMS. */
static int relabel_tags(const refs *r, ox_val *v, int64_t *out) {
  int k = 0;
  /* A tensor whose tags place no batch (it went through a layout the tags do not follow, such as torch's
   * [S·B, E] for the attention's output projection) takes as B its first dim of the batch's size. */
  int b_at = -1;
  for (int i = 0; i < v->n_dims && b_at != -2; i++)
    if (v->tag[i] == OX_TAG_B || v->tag[i] == OX_TAG_BS || v->tag[i] == OX_TAG_BX) b_at = -2;
  for (int i = 0; i < v->n_dims && b_at == -1; i++)
    if (r->b0 > 1 && v->dims[i] == r->b0) b_at = i;
  for (int i = 0; i < v->n_dims; i++) {
    int64_t add[2], d = v->dims[i];
    int na = 0;
    switch (i == b_at ? OX_TAG_B : v->tag[i]) {
    case OX_TAG_B: add[na++] = DIM_B; break;
    case OX_TAG_S: add[na++] = DIM_S; break;
    case OX_TAG_BS: add[na++] = DIM_B, add[na++] = DIM_S; break;
    case OX_TAG_BX:
      if (r->b0 > 1 && d % r->b0 == 0) add[na++] = DIM_B, add[na++] = d / r->b0;
      else add[na++] = d;
      break;
    default: add[na++] = d; break;
    }
    if (k + na > GRAPH_MAX_DIMS) return -1;
    v->g_first[i] = (int8_t)k;
    v->g_count[i] = (int8_t)na;
    for (int j = 0; j < na; j++) out[k++] = add[j];
  }
  return k;
}

/* ---- Import ---- */

typedef struct {
  ox x;
  refs r;
  graph_builder gb;
  graph *g;
  const onnx_value **declared; /* per value index: its value_info or output declaration, or NULL */
  ox_packed *pk;               /* per node: its part in a packed projection (onnx_packed.c) */
} imp;

static ap_status add_tensor(imp *im, ox_val *v) {
  ox *x = &im->x;
  dtype dt;
  if (!graph_dtype(v->elem_type, &dt))
    return ctx_fail(x->ctx, AP_UNSUPPORTED, "%s: value '%.200s': element type %d is not supported", x->file, v->name, v->elem_type);
  if (v->n_dims > GRAPH_MAX_DIMS)
    return ctx_fail(x->ctx, AP_UNSUPPORTED, "%s: value '%.200s': %d dimensions (the graph holds at most %d)", x->file,
                    v->name, v->n_dims, GRAPH_MAX_DIMS);
  for (int i = 0; i < v->n_dims; i++)
    if (v->dims[i] < 1)
      return ctx_fail(x->ctx, AP_UNSUPPORTED, "%s: value '%.200s': dimension %d is %lld (empty tensors are not supported)",
                      x->file, v->name, i, (long long)v->dims[i]);
  int64_t dims[GRAPH_MAX_DIMS];
  int n = v->tagged ? relabel_tags(&im->r, v, dims) : relabel(&im->r, v->dims, v->n_dims, dims, v->g_first, v->g_count);
  if (n < 0) {
    n = v->n_dims;
    memcpy(dims, v->dims, sizeof dims[0] * (size_t)n);
    for (int i = 0; i < n; i++) v->g_first[i] = (int8_t)i, v->g_count[i] = 1;
  }
  v->tensor = graph_tensor_add(&im->gb, v->name, dt, -1, false, dims, n);
  return v->tensor < 0 ? oom(x) : AP_OK;
}

/* Copies a declared shape into v when every dim is known; fails when it is out of range. */
static ap_status apply_declared(const ox *x, const onnx_value *d, ox_val *v) {
  if (!d || d->n_dims < 0) return AP_OK;
  for (int i = 0; i < d->n_dims; i++)
    if (d->dims[i] < 0) return AP_OK;
  if (!ox_dims_ok(d->n_dims, d->dims))
    return ctx_fail(x->ctx, AP_INVALID, "%s: value '%.200s': a dimension above 1e12 or more than 1e15 elements",
                    x->file, v->name);
  v->n_dims = d->n_dims;
  memcpy(v->dims, d->dims, sizeof d->dims[0] * (size_t)d->n_dims);
  if (!v->elem_type) v->elem_type = d->elem_type;
  return AP_OK;
}

static ap_status read_inits(imp *im) {
  ox *x = &im->x;
  const onnx_model *m = x->m;
  for (int i = 0; i < m->n_inits; i++) {
    const onnx_tensor *t = &m->inits[i];
    if (!t->name || !*t->name) return ctx_fail(x->ctx, AP_INVALID, "%s: initializer %d has no name", x->file, i);
    if (find_val(x, t->name) >= 0)
      return ctx_fail(x->ctx, AP_INVALID, "%s: initializer '%.200s' is defined twice", x->file, t->name);
    int k = add_val(x, t->name);
    if (k < 0) return oom(x);
    ox_val *v = &x->vals[k];
    v->is_init = true;
    v->elem_type = t->elem_type;
    v->n_dims = t->n_dims;
    if (t->n_dims) memcpy(v->dims, t->dims, sizeof t->dims[0] * (size_t)t->n_dims);
    v->n_vals = t->n_vals;
    v->vals = (int64_t *)(uintptr_t)t->vals;
    int64_t n = ox_numel(v);
    if (n < 0 || !ox_dims_ok(v->n_dims, v->dims))
      return ctx_fail(x->ctx, AP_INVALID, "%s: initializer '%.200s': a dimension above 1e12 or more than 1e15 elements",
                      x->file, t->name);
    if (is_float(t->elem_type)) v->pending_params = n;
  }
  /* BatchNormalization's running mean and variance (inputs 3 and 4) are statistics, not trainable. */
  for (int i = 0; i < m->n_nodes; i++) {
    const onnx_node *nd = &m->nodes[i];
    if (strcmp(nd->op_type, "BatchNormalization") != 0) continue;
    for (int k = 3; k < 5 && k < nd->n_in; k++) {
      int v = nd->in[k] && *nd->in[k] ? find_val(x, nd->in[k]) : -1;
      if (v >= 0 && x->vals[v].is_init) x->vals[v].pending_params = 0;
    }
  }
  return AP_OK;
}

static ap_status read_inputs(imp *im) {
  ox *x = &im->x;
  const onnx_model *m = x->m;
  for (int i = 0; i < m->n_inputs; i++) {
    const onnx_value *in = &m->inputs[i];
    if (!in->name || !*in->name) return ctx_fail(x->ctx, AP_INVALID, "%s: graph input %d has no name", x->file, i);
    if (find_val(x, in->name) >= 0) {
      if (x->vals[find_val(x, in->name)].is_init) continue; /* IR < 4 lists initializers as inputs too */
      return ctx_fail(x->ctx, AP_INVALID, "%s: graph input '%.200s' is listed twice", x->file, in->name);
    }
    int k = add_val(x, in->name);
    if (k < 0) return oom(x);
    ox_val *v = &x->vals[k];
    v->activation = true;
    v->elem_type = in->elem_type;
    ap_status st = apply_declared(x, in, v);
    if (st) return st;
    if (v->n_dims < 0)
      return ctx_fail(x->ctx, AP_UNSUPPORTED,
                      "%s: graph input '%.200s': its shape is unknown or symbolic; autopar reads static-shape exports "
                      "(export at a fixed batch and sequence; they are relabelled B and S)", x->file, in->name);
    if (v->n_dims >= 1 && !im->r.b0) im->r.b0 = v->dims[0];
    if (v->n_dims >= 2 && !im->r.s0 && is_int(v->elem_type)) im->r.s0 = v->dims[1];
    /* Tags: an input's first dim is the batch, a token input's second the sequence. */
    v->tagged = v->n_dims <= ONNX_MAX_DIMS;
    for (int d = 0; d < v->n_dims && d < ONNX_MAX_DIMS; d++) v->tag[d] = OX_TAG_NONE;
    if (v->n_dims >= 1 && v->dims[0] == im->r.b0 && im->r.b0 > 1) v->tag[0] = OX_TAG_B;
    if (v->n_dims >= 2 && is_int(v->elem_type) && v->dims[1] == im->r.s0 && im->r.s0 > 1) v->tag[1] = OX_TAG_S;
  }
  return AP_OK;
}

/* Indexes the declarations by name once (value_info is read before any node). */
typedef struct {
  const char **names;
  const onnx_value **decl;
  int cap;
} decl_index;

static ap_status index_declarations(imp *im, decl_index *di) {
  const onnx_model *m = im->x.m;
  int n = m->n_value_info + m->n_outputs, cap = 16;
  while (cap < 2 * n + 2) cap *= 2;
  di->names = arena_alloc(im->x.a, sizeof *di->names * (size_t)cap);
  di->decl = arena_alloc(im->x.a, sizeof *di->decl * (size_t)cap);
  if (!di->names || !di->decl) return oom(&im->x);
  di->cap = cap;
  for (int i = 0; i < n; i++) {
    const onnx_value *v = i < m->n_value_info ? &m->value_info[i] : &m->outputs[i - m->n_value_info];
    if (!v->name) continue;
    size_t k = (size_t)hash_str(v->name) & (size_t)(cap - 1);
    while (di->names[k] && strcmp(di->names[k], v->name) != 0) k = (k + 1) & (size_t)(cap - 1);
    if (!di->names[k]) di->names[k] = v->name, di->decl[k] = v;
  }
  return AP_OK;
}

static const onnx_value *find_decl(const decl_index *di, const char *name) {
  size_t k = (size_t)hash_str(name) & (size_t)(di->cap - 1);
  while (di->names[k]) {
    if (strcmp(di->names[k], name) == 0) return di->decl[k];
    k = (k + 1) & (size_t)(di->cap - 1);
  }
  return NULL;
}

/* The Split of a packed projection (onnx_packed.c): one MatMul per part, each producing one of its outputs. */
static ap_status emit_packed(imp *im, int ni) {
  ox *x = &im->x;
  const ox_packed *e = &im->pk[ni];
  const onnx_node *mm = &x->m->nodes[e->mm];
  int xi = find_val(x, mm->in[0]), wi = find_val(x, mm->in[1]), bi = -1;
  if (e->add >= 0) {
    const onnx_node *ad = &x->m->nodes[e->add];
    for (int k = 0; k < 2 && bi < 0; k++) {
      int v = find_val(x, ad->in[k]);
      if (v >= 0 && x->vals[v].is_init) bi = v;
    }
  }
  if (xi < 0 || wi < 0 || x->vals[xi].tensor < 0 || (e->add >= 0 && bi < 0))
    return ox_fail(x, AP_INTERNAL, "a packed projection lost its operands");
  ox_val *w = &x->vals[wi], *bias = bi >= 0 ? &x->vals[bi] : NULL;
  bool tr = false;
  const onnx_tensor *init = ox_packed_weight(x, mm, e->mm, &tr);
  if (!init) return ox_fail(x, AP_INTERNAL, "a packed projection lost its weight");
  int64_t k_dim = w->dims[0], n_part = w->dims[1] / e->parts;
  const char *base = mm->name && *mm->name ? mm->name : arena_printf(x->a, "MatMul_%d", e->mm);
  int first = im->gb.blk->n_ops;
  for (int q = 0; q < e->parts; q++) {
    ox_val *v = ox_out(x, q);
    ap_status st = add_tensor(im, v);
    if (st) return st;
    graph_op op = graph_op_init(OP_MATMUL, arena_printf(x->a, "%s#%d", base, q));
    if (!op.name) return oom(x);
    op.op_type = "MatMul";
    op.n_in = 1, op.in[0] = x->vals[xi].tensor;
    op.out = op.outs[0] = v->tensor, op.n_out = 1;
    op.weight_k = k_dim, op.weight_n = n_part, op.has_bias = bias != NULL;
    op.packed_with = q > 0 ? first + 1 : 0;
    w->pending_params -= k_dim * n_part;
    if (bias) bias->pending_params -= n_part;
    op.saved[op.n_saved++] = op.in[0];
    graph_weight *gw = &op.weights[op.n_weights++];
    if (tr) /* stored [p·N, K]: the part is of stored dim 0 */
      *gw = (graph_weight){.name = init->name, .n_dims = 2, .dims = {init->dims[0], init->dims[1]}, .logical = {1, 0},
                           .part_dim = 0, .part = (int16_t)q, .n_parts = (int16_t)e->parts};
    else
      *gw = (graph_weight){.name = w->name, .n_dims = 2, .dims = {w->dims[0], w->dims[1]}, .logical = {0, 1},
                           .part_dim = 1, .part = (int16_t)q, .n_parts = (int16_t)e->parts};
    if (bias)
      op.weights[op.n_weights++] = (graph_weight){.name = bias->name, .n_dims = 1, .dims = {bias->dims[0]},
                                                  .logical = {1}, .part_dim = 0, .part = (int16_t)q,
                                                  .n_parts = (int16_t)e->parts};
    if (graph_op_add(&im->gb, &op) < 0) return oom(x);
  }
  return AP_OK;
}

static ap_status read_node(imp *im, const decl_index *di, int ni) {
  ox *x = &im->x;
  const onnx_node *nd = &x->m->nodes[ni];
  char auto_name[96];
  x->node = nd;
  if (nd->name && *nd->name) {
    x->node_name = nd->name;
  } else {
    snprintf(auto_name, sizeof auto_name, "%.64s_%d", nd->op_type, ni);
    x->node_name = auto_name;
  }
  if (nd->domain && *nd->domain && strcmp(nd->domain, "ai.onnx") != 0)
    return ox_fail(x, AP_UNSUPPORTED, "op domain '%.64s' is not supported (only the default ONNX domain)", nd->domain);
  const ox_op_spec *spec = ox_find_op(nd->op_type);
  if (!spec || nd->has_subgraph) return ox_fail(x, AP_UNSUPPORTED, "unsupported op type");
  if (nd->n_in > (int)AP_COUNT(x->in)) return ox_fail(x, AP_UNSUPPORTED, "%d inputs (at most %d)", nd->n_in, (int)AP_COUNT(x->in));
  if (nd->n_out > OP_MAX_OUT) return ox_fail(x, AP_UNSUPPORTED, "%d outputs (at most %d)", nd->n_out, OP_MAX_OUT);
  x->n_in = nd->n_in;
  x->n_out = nd->n_out;
  bool activation = false;
  for (int i = 0; i < nd->n_in; i++) {
    const char *name = nd->in[i];
    x->in[i] = -1;
    if (!name || !*name) continue;
    x->in[i] = find_val(x, name);
    if (x->in[i] < 0)
      return ox_fail(x, AP_INVALID, "input '%.200s' is not a graph input, an initializer or an earlier node's output", name);
    activation = activation || x->vals[x->in[i]].activation;
  }
  if (strcmp(nd->op_type, "Shape") == 0) activation = false; /* a shape is metadata, not data */
  bool bn = strcmp(nd->op_type, "BatchNormalization") == 0;
  for (int i = 0; i < nd->n_out; i++) {
    const char *name = nd->out[i];
    x->out[i] = -1;
    if (!name || !*name) continue;
    if (find_val(x, name) >= 0) return ox_fail(x, AP_INVALID, "output '%.200s' is already defined", name);
    int k = add_val(x, name);
    if (k < 0) return oom(x);
    x->out[i] = k;
    ox_val *v = &x->vals[k];
    v->producer = ni;
    v->activation = activation && !(bn && i > 0); /* BatchNorm's updated running statistics are buffers */
    ap_status st = apply_declared(x, find_decl(di, name), v);
    if (st) return st;
  }
  ap_status st = ox_check_node(x);
  if (!st) st = spec->infer(x);
  if (st) return st;
  ox_dim_tags(x, im->r.b0, im->r.s0);
  if (im->pk[ni].role == OX_PACKED_MATMUL) ox_packed_check(x, im->pk, ni);
  if (activation && (im->pk[ni].role == OX_PACKED_MATMUL || im->pk[ni].role == OX_PACKED_BIAS)) return AP_OK;
  if (activation && im->pk[ni].role == OX_PACKED_SPLIT) return emit_packed(im, ni);
  for (int i = 0; i < nd->n_out; i++) {
    ox_val *v = ox_out(x, i);
    if (v && v->n_dims < 0) return ox_fail(x, AP_INVALID, "the shape of output '%.200s' cannot be inferred", v->name);
  }
  if (!activation) {
    /* Folded: parameters read here move on to the first output, for the op that uses it to count. */
    int64_t p = 0;
    for (int i = 0; i < x->n_in; i++) {
      ox_val *v = ox_in(x, i);
      if (v) p += v->pending_params, v->pending_params = 0;
    }
    for (int i = 0; i < x->n_out && p; i++)
      if (ox_out(x, i)) ox_out(x, i)->pending_params += p, p = 0;
    return AP_OK;
  }
  graph_op op = graph_op_init(OP_ELEMENTWISE, x->node_name);
  op.op_type = nd->op_type;
  for (int i = 0; i < nd->n_out; i++) {
    ox_val *v = ox_out(x, i);
    if (!v || !v->activation) continue;
    if ((st = add_tensor(im, v))) return st;
    op.outs[op.n_out++] = v->tensor;
  }
  if (!op.n_out) return ox_fail(x, AP_INVALID, "no output");
  op.out = op.outs[0];
  int src[OP_MAX_IN];
  for (int i = 0; i < nd->n_in; i++) {
    ox_val *v = ox_in(x, i);
    if (!v || !v->activation || v->tensor < 0) continue;
    bool dup = false;
    for (int k = 0; k < op.n_in; k++) dup = dup || op.in[k] == v->tensor;
    if (dup) continue;
    if (op.n_in == OP_MAX_IN)
      return ox_fail(x, AP_UNSUPPORTED, "more than %d distinct activation inputs (autopar's ops take at most %d)", OP_MAX_IN, OP_MAX_IN);
    src[op.n_in] = i;
    op.in[op.n_in++] = v->tensor;
  }
  if ((st = ox_make_op(x, spec, &op))) return st;
  ox_dim_map(x, &op, src);
  if (graph_op_add(&im->gb, &op) < 0) return oom(x);
  return AP_OK;
}

static const char *base_name(arena *a, const char *file) {
  const char *b = util_basename(file);
  size_t n = strlen(b);
  if (n > 5 && strcmp(b + n - 5, ".onnx") == 0) n -= 5;
  char *s = arena_alloc(a, n + 1);
  if (s) memcpy(s, b, n), s[n] = '\0';
  return s;
}

ap_status onnx_import(ap_ctx *ctx, arena *a, const char *file, const onnx_model *m, graph *out) {
  memset(out, 0, sizeof *out);
  if (m->n_nodes > MAX_NODES) return ctx_fail(ctx, AP_INVALID, "%s: %d nodes (autopar reads at most %d)", file, m->n_nodes, MAX_NODES);
  graph g;
  memset(&g, 0, sizeof g);
  imp im = {.x = {.ctx = ctx, .a = a, .file = file, .m = m, .opset = m->opset}, .gb = {.a = a, .ctx = ctx}, .g = &g};
  ap_status st = read_inits(&im);
  if (!st) st = read_inputs(&im);
  if (st) return st;
  decl_index di = {0};
  if ((st = index_declarations(&im, &di))) return st;
  g.name = base_name(a, file);
  g.model_type = "onnx";
  g.source = arena_printf(a, "%s (ONNX IR %lld, opset %lld, producer %.64s)", file, (long long)m->ir_version,
                          (long long)m->opset, m->producer ? m->producer : "");
  g.default_seq = im.r.s0 > 1 ? im.r.s0 : 1;
  if (!g.name || !g.source || !graph_block_begin(&im.gb, &g, "graph", BLOCK_OTHER, 1)) return oom(&im.x);
  for (int i = 0; i < im.x.n_vals; i++)
    if (im.x.vals[i].activation && (st = add_tensor(&im, &im.x.vals[i]))) return st;
  im.pk = arena_alloc(a, (size_t)(m->n_nodes > 0 ? m->n_nodes : 1) * sizeof *im.pk);
  if (!im.pk) return oom(&im.x);
  if ((st = ox_packed_scan(&im.x, im.pk))) return st;
  for (int i = 0; i < m->n_nodes; i++)
    if ((st = read_node(&im, &di, i))) return st;
  if (im.gb.oom) return oom(&im.x);
  graph_block *blk = &g.blocks[0];
  if (blk->n_ops == 0) return ctx_fail(ctx, AP_INVALID, "%s: no node depends on the graph's inputs", file);
  /* Parameters that reached no op (a weight only folded nodes read) still belong to the model. */
  int64_t left = 0;
  for (int i = 0; i < im.x.n_vals; i++) left += im.x.vals[i].pending_params;
  blk->ops[0].extra_params += left;
  for (int i = 0; i < m->n_inputs && blk->input < 0; i++) {
    int k = find_val(&im.x, m->inputs[i].name);
    if (k >= 0 && im.x.vals[k].tensor >= 0) blk->input = im.x.vals[k].tensor;
  }
  for (int i = 0; i < m->n_outputs && blk->output < 0; i++) {
    int k = m->outputs[i].name ? find_val(&im.x, m->outputs[i].name) : -1;
    if (k >= 0 && im.x.vals[k].tensor >= 0) blk->output = im.x.vals[k].tensor;
  }
  if (blk->output < 0) blk->output = blk->ops[blk->n_ops - 1].out;
  if ((st = graph_validate(ctx, &g, file))) return st;
  if ((st = graph_build_edges(ctx, a, &g))) return st;
  *out = g;
  return AP_OK;
}
