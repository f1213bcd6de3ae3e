/* The graph runtime's graph (exec layer; gx.h): value indices for every name of a decoded ONNX model, the op
 * types the runtime runs, and the trainable initializers laid out in one flat fp32 buffer in file order.
 * An initializer is trainable when it is a float tensor that no op reads as state rather than as an operand
 * (BatchNormalization's running mean and variance, inputs 3 and 4): torch.onnx.export writes a module's
 * parameters and buffers as initializers under their state-dict names, and only the parameters are trained. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/graph/gx.h"
#include "model/safetensors.h"

/* The op types of the default domain the runtime runs (gx_fwd.c has their forward, gx_bwd.c their backward). */
static const char *const k_ops[] = {
    "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Relu", "Gelu", "Erf", "Tanh", "Sigmoid", "Neg",
    "Exp", "Softmax", "LayerNormalization", "ReduceMean", "ReduceSum", "Conv", "BatchNormalization", "MaxPool",
    "AveragePool", "GlobalAveragePool", "Concat", "Split", "Slice", "Reshape", "Transpose", "Flatten", "Gather",
    "Dropout", "Identity", "Where", "Cast", "Constant", "ConstantOfShape", "Shape", "Unsqueeze", "Squeeze",
    "Expand", "Equal", "Range"};

static int find_val(const gx_graph *g, const char *name) {
  for (int i = 0; i < g->n_vals; i++)
    if (strcmp(g->names[i], name) == 0) return i;
  return -1;
}

static int add_val(gx_graph *g, const char *name, int *cap) {
  int v = find_val(g, name);
  if (v >= 0) return v;
  if (g->n_vals == *cap) {
    *cap = *cap ? 2 * *cap : 64;
    const char **nn = realloc(g->names, sizeof *nn * (size_t)*cap);
    if (!nn) return -1;
    g->names = nn;
  }
  g->names[g->n_vals] = name;
  return g->n_vals++;
}

ap_status gx_graph_build(ap_ctx *ctx, const char *file, const onnx_model *m, gx_graph *g) {
  memset(g, 0, sizeof *g);
  g->m = m;
  int cap = 0;
  g->nodes = calloc((size_t)(m->n_nodes ? m->n_nodes : 1), sizeof *g->nodes);
  if (!g->nodes) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", file);
  g->n_nodes = m->n_nodes;
  for (int i = 0; i < m->n_inits; i++)
    if (add_val(g, m->inits[i].name, &cap) < 0) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", file);
  for (int i = 0; i < m->n_inputs; i++)
    if (add_val(g, m->inputs[i].name, &cap) < 0) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", file);
  for (int k = 0; k < m->n_nodes; k++) {
    const onnx_node *n = &m->nodes[k];
    gx_node *gn = &g->nodes[k];
    gn->node = n;
    gn->name = n->name && *n->name ? n->name : NULL;
    if (!gn->name) {
      char *nm = malloc(strlen(n->op_type) + 16);
      if (!nm) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", file);
      sprintf(nm, "%s_%d", n->op_type, k);
      gn->name = nm;
    }
    bool known = false;
    for (size_t t = 0; t < sizeof k_ops / sizeof k_ops[0]; t++) known = known || strcmp(n->op_type, k_ops[t]) == 0;
    if ((n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0) || !known)
      return ctx_fail(ctx, AP_UNSUPPORTED, "%s: node '%s' (op_type %s): the graph executor does not run this op type",
                      file, gn->name, n->op_type);
    if (n->n_in > GX_MAX_IO || n->n_out > GX_MAX_IO)
      return ctx_fail(ctx, AP_UNSUPPORTED, "%s: node '%s': more than %d inputs or outputs", file, gn->name, GX_MAX_IO);
    gn->n_in = n->n_in;
    gn->n_out = n->n_out;
    for (int i = 0; i < n->n_in; i++) {
      gn->in[i] = *n->in[i] ? find_val(g, n->in[i]) : -1;
      if (*n->in[i] && gn->in[i] < 0)
        return ctx_fail(ctx, AP_INVALID, "%s: node '%s': input '%s' is produced by no earlier node", file, gn->name,
                        n->in[i]);
    }
    for (int i = 0; i < n->n_out; i++) {
      gn->out[i] = *n->out[i] ? add_val(g, n->out[i], &cap) : -1;
      if (*n->out[i] && gn->out[i] < 0) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", file);
    }
  }
  if (m->n_outputs != 1)
    return ctx_fail(ctx, AP_UNSUPPORTED, "%s: the graph has %d outputs; the graph executor trains a graph of one output",
                    file, m->n_outputs);
  g->output = find_val(g, m->outputs[0].name);
  if (g->output < 0) return ctx_fail(ctx, AP_INVALID, "%s: output '%s' is produced by no node", file, m->outputs[0].name);
  g->inputs = calloc((size_t)(m->n_inputs ? m->n_inputs : 1), sizeof *g->inputs);
  g->consts = calloc((size_t)g->n_vals, sizeof *g->consts);
  g->param_of = malloc(sizeof *g->param_of * (size_t)g->n_vals);
  g->params = calloc((size_t)(m->n_inits ? m->n_inits : 1), sizeof *g->params);
  g->table.t = calloc((size_t)(m->n_inits ? m->n_inits : 1), sizeof *g->table.t);
  if (!g->inputs || !g->consts || !g->param_of || !g->params || !g->table.t)
    return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", file);
  for (int v = 0; v < g->n_vals; v++) g->param_of[v] = -1, g->consts[v].rank = -1;
  for (int i = 0; i < m->n_inputs; i++) {
    int v = find_val(g, m->inputs[i].name);
    bool init = false;
    for (int k = 0; k < m->n_inits; k++) init = init || strcmp(m->inits[k].name, m->inputs[i].name) == 0;
    if (!init) g->inputs[g->n_inputs++] = v;
  }
  /* Initializers read as state (BatchNormalization's running statistics) are not trained. */
  bool *state = calloc((size_t)g->n_vals, sizeof *state);
  if (!state) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", file);
  for (int k = 0; k < g->n_nodes; k++)
    if (strcmp(g->nodes[k].node->op_type, "BatchNormalization") == 0)
      for (int i = 3; i < g->nodes[k].n_in && i < 5; i++)
        if (g->nodes[k].in[i] >= 0) state[g->nodes[k].in[i]] = true;
  for (int k = 0; k < m->n_inits; k++) {
    const onnx_tensor *t = &m->inits[k];
    int v = find_val(g, t->name);
    gx_tensor *c = &g->consts[v];
    if (t->external)
      return ctx_fail(ctx, AP_UNSUPPORTED, "%s: initializer '%s': its data is in an external file, which the graph "
                      "executor does not read", file, t->name);
    bool is_float = t->elem_type == ONNX_FLOAT;
    if (!is_float && t->n_vals < 0)
      return ctx_fail(ctx, AP_UNSUPPORTED, "%s: initializer '%s': element type %d (the graph executor reads float and "
                      "integer tensors)", file, t->name, t->elem_type);
    if (!gx_alloc(c, !is_float, t->n_dims, t->dims)) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", file);
    if (is_float) memcpy(c->f, t->f32, sizeof *c->f * (size_t)c->n);
    else memcpy(c->i, t->vals, sizeof *c->i * (size_t)c->n);
    if (!is_float || state[v]) continue;
    gx_param *p = &g->params[g->n_params];
    ex_tensor *et = &g->table.t[g->n_params];
    p->val = v;
    p->name = t->name;
    p->off = g->n_weights;
    p->n = c->n;
    snprintf(et->name, sizeof et->name, "%s", t->name);
    et->n_dims = t->n_dims < 2 ? t->n_dims : 2;
    et->off = p->off;
    et->n = p->n;
    et->decay = t->n_dims >= 2; /* as the transformer executor: matrices and convolution kernels decay */
    et->layer = -1;
    g->param_of[v] = g->n_params++;
    g->n_weights += c->n;
  }
  free(state);
  g->dep = calloc((size_t)g->n_vals, sizeof *g->dep);
  g->producer = malloc(sizeof *g->producer * (size_t)g->n_vals);
  if (!g->dep || !g->producer) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", file);
  for (int v = 0; v < g->n_vals; v++) g->producer[v] = -1;
  for (int k = 0; k < g->n_nodes; k++)
    for (int o = 0; o < g->nodes[k].n_out; o++)
      if (g->nodes[k].out[o] >= 0) g->producer[g->nodes[k].out[o]] = k;
  for (int i = 0; i < g->n_inputs; i++) g->dep[g->inputs[i]] = true;
  for (int k = 0; k < g->n_nodes; k++) {
    bool d = false;
    for (int i = 0; i < g->nodes[k].n_in; i++) d = d || (g->nodes[k].in[i] >= 0 && g->dep[g->nodes[k].in[i]]);
    /* Shape reads only an activation's dims: what it computes is known without the data. */
    if (strcmp(g->nodes[k].node->op_type, "Shape") == 0) d = false;
    for (int o = 0; o < g->nodes[k].n_out; o++)
      if (g->nodes[k].out[o] >= 0) g->dep[g->nodes[k].out[o]] = d;
  }
  g->table.n_t = g->n_params;
  g->table.n_params = g->n_weights;
  return AP_OK;
}

void gx_graph_free(gx_graph *g) {
  if (!g) return;
  for (int k = 0; k < g->n_nodes; k++)
    if (g->nodes[k].node && g->nodes[k].name != g->nodes[k].node->name) free((char *)g->nodes[k].name);
  if (g->consts)
    for (int v = 0; v < g->n_vals; v++) gx_free(&g->consts[v]);
  free(g->consts);
  free(g->nodes);
  free(g->names);
  free(g->inputs);
  free(g->param_of);
  free(g->dep);
  free(g->producer);
  free(g->params);
  free(g->table.t);
  memset(g, 0, sizeof *g);
}

ap_status gx_graph_init(ap_ctx *ctx, const gx_graph *g, const char *init, float *w) {
  for (int i = 0; i < g->n_params; i++) {
    const gx_param *p = &g->params[i];
    memcpy(w + p->off, g->consts[p->val].f, sizeof *w * (size_t)p->n);
  }
  if (!init) return AP_OK;
  st_file f;
  ap_status st = st_read(ctx, init, &f);
  if (st) return st;
  for (int64_t k = 0; k < f.n && !st; k++) {
    const st_tensor *t = &f.t[k];
    int v = -1;
    for (int i = 0; i < g->n_params && v < 0; i++)
      if (strcmp(g->params[i].name, t->name) == 0) v = i;
    if (v < 0) {
      st = ctx_fail(ctx, AP_INVALID, "%s: tensor \"%s\": the model has no trainable initializer of this name", init,
                    t->name);
      break;
    }
    const gx_tensor *c = &g->consts[g->params[v].val];
    bool same = t->n_dims == c->rank;
    for (int d = 0; same && d < c->rank; d++) same = t->shape[d] == c->dims[d];
    if (!same) {
      st = ctx_fail(ctx, AP_INVALID, "%s: tensor \"%s\": shape differs from the model's initializer", init, t->name);
      break;
    }
    memcpy(w + g->params[v].off, t->data, sizeof *w * (size_t)t->n_elems);
  }
  st_free(&f);
  return st;
}
