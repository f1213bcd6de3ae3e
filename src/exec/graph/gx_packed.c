/* Packed projections in the graph runtime (exec layer; gx.h gx_unpack). The ONNX importer reads a weight MatMul
 * (+ bias Add of an initializer) whose output only an equal Split on its last axis reads (GPT-2's c_attn,
 * torch's packed in-projection) as one MatMul per part, named "<MatMul>#q", each with part q of the weight's
 * columns (and of the bias) and producing the Split's output q (src/model/onnx_packed.c); a plan names those
 * parts. Here the decoded model is rewritten the same way, so that the plan's ops are nodes the runtime runs:
 * per part q, weight-only nodes Slice the weight [K, p·N] (the initializer, or the Transpose of an [p·N, K]
 * initializer that torch.onnx writes for nn.Linear) to its columns q·N … (q+1)·N − 1 and the bias to the same
 * range, a MatMul "<MatMul>#q" computes X · W_q, and an Add "<MatMul>#q/bias" adds b_q into the Split's output q.
 * Y[..., q·N:(q+1)·N] = X · W[:, q·N:(q+1)·N] + b[q·N:(q+1)·N], so the graph computes what it did. The weight
 * and bias stay the model's initializers: Slice's backward writes each part's gradient into its slice of the
 * packed weight's gradient, which the optimizer updates as one tensor. Only MatMuls the plan names in parts are
 * rewritten (their "#0" op is in the plan), so a graph the importer read otherwise keeps its nodes. Unnamed
 * nodes take their <op_type>_<index> name of the original graph first, so that the rewrite renames nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/graph/gx.h"

static const onnx_tensor *find_init(const onnx_model *m, const char *name) {
  for (int i = 0; name && *name && i < m->n_inits; i++)
    if (strcmp(m->inits[i].name, name) == 0) return &m->inits[i];
  return NULL;
}

/* The node that outputs name, and how many node inputs and graph outputs read it. */
static int producer_of(const onnx_model *m, const char *name) {
  for (int k = 0; name && *name && k < m->n_nodes; k++)
    for (int o = 0; o < m->nodes[k].n_out; o++)
      if (strcmp(m->nodes[k].out[o], name) == 0) return k;
  return -1;
}

static int readers_of(const onnx_model *m, const char *name, int *only) {
  int n = 0;
  for (int k = 0; k < m->n_nodes; k++)
    for (int i = 0; i < m->nodes[k].n_in; i++)
      if (strcmp(m->nodes[k].in[i], name) == 0) n++, *only = k;
  for (int i = 0; i < m->n_outputs; i++) n += strcmp(m->outputs[i].name, name) == 0;
  return n;
}

static const onnx_attr *attr(const onnx_node *n, const char *name) {
  for (int a = 0; a < n->n_attrs; a++)
    if (n->attrs[a].name && strcmp(n->attrs[a].name, name) == 0) return &n->attrs[a];
  return NULL;
}

static bool wanted(const char *base, int q, const char *const *names, int n_names) {
  char buf[600];
  snprintf(buf, sizeof buf, "%s#%d", base, q);
  for (int i = 0; i < n_names; i++)
    if (names[i] && strcmp(names[i], buf) == 0) return true;
  return false;
}

/* Whether the Split's parts are equal: no split attribute or input, or all its entries the same. */
static bool equal_split(const onnx_model *m, const onnx_node *sp) {
  const onnx_attr *a = attr(sp, "split");
  const int64_t *v = a && a->type == ONNX_ATTR_INTS ? a->ints : NULL;
  int64_t n = a ? a->n_ints : 0;
  if (!v && sp->n_in > 1 && *sp->in[1]) {
    const onnx_tensor *t = find_init(m, sp->in[1]);
    int c = t ? -1 : producer_of(m, sp->in[1]);
    if (c >= 0 && strcmp(m->nodes[c].op_type, "Constant") == 0 && attr(&m->nodes[c], "value"))
      t = attr(&m->nodes[c], "value")->t;
    if (!t || t->n_vals < 0) return false;
    v = t->vals, n = t->n_vals;
  }
  if (v && n != sp->n_out) return false;
  for (int i = 1; v && i < n; i++)
    if (v[i] != v[0]) return false;
  return true;
}

static onnx_node slice_node(arena *a, const char *name, const char *in, const char *out, int64_t b, int64_t e,
                            int64_t axis) {
  const char **io = arena_alloc(a, 2 * sizeof *io);
  onnx_attr *at = arena_alloc(a, 3 * sizeof *at);
  int64_t *v = arena_alloc(a, 3 * sizeof *v);
  if (!io || !at || !v) return (onnx_node){0};
  io[0] = in, io[1] = out, v[0] = b, v[1] = e, v[2] = axis;
  static const char *const keys[] = {"starts", "ends", "axes"};
  for (int i = 0; i < 3; i++) at[i] = (onnx_attr){.name = keys[i], .type = ONNX_ATTR_INTS, .n_ints = 1, .ints = &v[i]};
  return (onnx_node){.name = name, .op_type = "Slice", .domain = "", .n_in = 1, .n_out = 1, .in = io, .out = io + 1,
                     .n_attrs = 3, .attrs = at};
}

static onnx_node bin_node(arena *a, const char *name, const char *op, const char *x, const char *y, const char *out) {
  const char **io = arena_alloc(a, 3 * sizeof *io);
  if (!io) return (onnx_node){0};
  io[0] = x, io[1] = y, io[2] = out;
  return (onnx_node){.name = name, .op_type = op, .domain = "", .n_in = 2, .n_out = 1, .in = io, .out = io + 2};
}

ap_status gx_unpack(ap_ctx *ctx, arena *a, const char *file, onnx_model *m, const char *const *names, int n_names,
                    gx_packed **out, int *n_out) {
  *out = NULL, *n_out = 0;
  /* Each packed MatMul becomes at most 4 nodes per Split output (and its Add and Split go). */
  int n_new = 0, cap = m->n_nodes + 1, n_parts = 0;
  for (int k = 0; k < m->n_nodes; k++)
    if (strcmp(m->nodes[k].op_type, "Split") == 0) cap += 4 * m->nodes[k].n_out;
  onnx_node *nn = arena_alloc(a, sizeof *nn * (size_t)cap);
  int *skip = calloc((size_t)(m->n_nodes ? m->n_nodes : 1), sizeof *skip);
  gx_packed *pk = NULL;
  if (!nn || !skip) goto oom;
  for (int k = 0; k < m->n_nodes; k++) {
    if (skip[k]) continue;
    onnx_node nd = m->nodes[k];
    if (!nd.name || !*nd.name) nd.name = arena_printf(a, "%s_%d", nd.op_type, k);
    if (!nd.name) goto oom;
    if (strcmp(nd.op_type, "MatMul") != 0 || nd.n_in != 2 || nd.n_out != 1 || !wanted(nd.name, 0, names, n_names)) {
      if (n_new == cap) goto oom;
      nn[n_new++] = nd;
      continue;
    }
    /* A MatMul the plan reads in parts: its weight, its bias Add and its Split, as the importer found them. */
    const char *why = NULL;
    bool tr = false;
    const onnx_tensor *w = find_init(m, nd.in[1]);
    int t = w ? -1 : producer_of(m, nd.in[1]);
    if (t >= 0 && strcmp(m->nodes[t].op_type, "Transpose") == 0 && m->nodes[t].n_in == 1) {
      const onnx_attr *perm = attr(&m->nodes[t], "perm");
      w = find_init(m, m->nodes[t].in[0]);
      tr = true;
      if (perm && (perm->n_ints != 2 || perm->ints[0] != 1 || perm->ints[1] != 0)) w = NULL;
    }
    int add = -1, split = -1, r1 = 0, r2 = 0;
    const onnx_tensor *b = NULL;
    if (!w || w->n_dims != 2 || w->elem_type != ONNX_FLOAT) why = "its weight is not a 2-D float initializer (or its Transpose)";
    else if (readers_of(m, nd.out[0], &r1) != 1) why = "its output is read by more than one node";
    if (!why && strcmp(m->nodes[r1].op_type, "Add") == 0) {
      const onnx_node *ad = &m->nodes[r1];
      int bi = ad->n_in == 2 ? (strcmp(ad->in[0], nd.out[0]) == 0 ? 1 : 0) : -1;
      b = bi >= 0 ? find_init(m, ad->in[bi]) : NULL;
      add = r1;
      if (!b || b->n_dims != 1 || b->elem_type != ONNX_FLOAT) why = "its Add's other operand is not a 1-D initializer";
      else if (readers_of(m, ad->out[0], &r2) != 1) why = "its Add's output is read by more than one node";
      r1 = r2;
    }
    int64_t cols = w ? (tr ? w->dims[0] : w->dims[1]) : 0, rows = w ? (tr ? w->dims[1] : w->dims[0]) : 0;
    if (!why && strcmp(m->nodes[r1].op_type, "Split") == 0) split = r1;
    else if (!why) why = "its output does not go to a Split";
    const onnx_node *sp = split >= 0 ? &m->nodes[split] : NULL;
    int p = sp ? sp->n_out : 0;
    if (!why && (p < 2 || !equal_split(m, sp) || cols % p)) why = "its Split is not into equal parts";
    if (!why && b && b->dims[0] != cols) why = "its bias is not one per output column";
    for (int q = 0; !why && q < p; q++)
      if (!wanted(nd.name, q, names, n_names)) why = "the plan does not name each of its parts";
    if (why)
      return free(skip), free(pk), ctx_fail(ctx, AP_INVALID, "%s: the plan reads node '%s' (MatMul) as a packed "
                                            "projection (op \"%s#0\"), but %s", file, nd.name, nd.name, why);
    if (add >= 0) skip[add] = 1;
    skip[split] = 1;
    gx_packed *np = realloc(pk, sizeof *pk * (size_t)(n_parts + p));
    if (!np) goto oom;
    pk = np;
    int64_t n_col = cols / p;
    const char *wt = nd.in[1]; /* [K, p·N] as the MatMul reads it */
    for (int q = 0; q < p; q++) {
      if (n_new + 4 > cap) goto oom;
      const char *pn = arena_printf(a, "%s#%d", nd.name, q), *wq = arena_printf(a, "%s#%d/weight", nd.name, q);
      const char *bq = arena_printf(a, "%s#%d/bias_part", nd.name, q), *yq = arena_printf(a, "%s#%d/out", nd.name, q);
      const char *sn = arena_printf(a, "%s#%d/slice_weight", nd.name, q), *bn = arena_printf(a, "%s#%d/slice_bias", nd.name, q);
      const char *an = arena_printf(a, "%s#%d/bias", nd.name, q);
      if (!pn || !wq || !bq || !yq || !sn || !bn || !an) goto oom;
      nn[n_new++] = slice_node(a, sn, wt, wq, q * n_col, (q + 1) * n_col, 1);
      nn[n_new++] = bin_node(a, pn, "MatMul", nd.in[0], wq, b ? yq : sp->out[q]);
      pk[n_parts + q] = (gx_packed){.mm = n_new - 1, .add = -1, .weight = w->name, .bias = b ? b->name : NULL,
                                    .transposed = tr, .part = q, .n_parts = p, .k = rows, .n = n_col};
      if (b) {
        nn[n_new++] = slice_node(a, bn, b->name, bq, q * n_col, (q + 1) * n_col, 0);
        nn[n_new++] = bin_node(a, an, "Add", yq, bq, sp->out[q]);
        pk[n_parts + q].add = n_new - 1;
      }
      if (!nn[n_new - 1].op_type || !nn[n_new - 2].op_type) goto oom;
    }
    n_parts += p;
  }
  free(skip);
  m->nodes = nn;
  m->n_nodes = n_new;
  *out = pk, *n_out = n_parts;
  return AP_OK;
oom:
  free(skip);
  free(pk);
  return ctx_fail(ctx, AP_NOMEM, "%s: out of memory reading the packed projections", file);
}
