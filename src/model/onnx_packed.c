/* Packed projections (model layer, core library): a MatMul whose weight is a 2-D initializer [K, p·N], with or
 * without a bias Add of a [p·N] initializer, whose output only a Split into p equal parts on its last axis reads
 * (GPT-2's c_attn, torch's packed in-projection of nn.MultiheadAttention: the fused query, key and value
 * weights), is read as p MatMuls, each with its part of the weight (and of the bias) and producing one of the
 * Split's outputs. Y[..., q·N:(q+1)·N] = X · W[:, q·N:(q+1)·N] + b[q·N:(q+1)·N] exactly, so the graph computes
 * the same; but each part can now be split on its own columns, which splits the attention by heads (Megatron's
 * ColumnParallelLinear over the fused QKV weight keeps each rank's heads' query, key and value together; a
 * contiguous split of the fused columns would not). Each part op records its weight as part q of p of the
 * initializer's stored dim 1 (graph.h graph_weight part_dim, part, n_parts), so a plan names the initializer
 * and an executor slices the part before it applies the spec. The parts' names are the MatMul's with "#q". */
#include <string.h>

#include "model/onnx_internal.h"

/* The names of the model's node outputs and initializers, indexed once (open addressing, FNV-1a), so that the
 * scan stays linear in the model's size: each with its producer node, its initializer and how many node inputs
 * and graph outputs read it. */
typedef struct {
  const char *name;
  int node;                 /* the first node that outputs it, or -1 */
  int n_readers;
  const onnx_tensor *init;  /* or NULL */
} ox_name;

struct ox_names {
  ox_name *e;
  size_t mask;
};

static uint64_t fnv(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static ox_name *slot(const struct ox_names *ix, const char *name, bool add) {
  if (!ix || !name || !*name) return NULL;
  for (size_t k = (size_t)fnv(name) & ix->mask;; k = (k + 1) & ix->mask) {
    ox_name *e = &ix->e[k];
    if (!e->name) {
      if (!add) return NULL;
      *e = (ox_name){name, -1, 0, NULL};
      return e;
    }
    if (strcmp(e->name, name) == 0) return e;
  }
}

static int64_t find_node_out(const struct ox_names *ix, const char *name, int before) {
  const ox_name *e = slot(ix, name, false);
  return e && e->node >= 0 && e->node < before ? e->node : -1;
}

static const onnx_tensor *find_init(const struct ox_names *ix, const char *name) {
  const ox_name *e = slot(ix, name, false);
  return e ? e->init : NULL;
}

static int readers(const struct ox_names *ix, const char *name) {
  const ox_name *e = slot(ix, name, false);
  return e ? e->n_readers : 0;
}

static ap_status index_names(ox *x) {
  const onnx_model *m = x->m;
  size_t n = (size_t)m->n_inits, cap = 16;
  for (int i = 0; i < m->n_nodes; i++) n += (size_t)m->nodes[i].n_out;
  while (cap < 2 * n + 2) cap *= 2;
  struct ox_names *ix = arena_alloc(x->a, sizeof *ix);
  ox_name *e = ix ? arena_alloc(x->a, cap * sizeof *e) : NULL;
  if (!e) return ctx_fail(x->ctx, AP_NOMEM, "%s: out of memory importing the model", x->file);
  memset(e, 0, cap * sizeof *e);
  *ix = (struct ox_names){e, cap - 1};
  for (int i = 0; i < m->n_nodes; i++)
    for (int k = 0; k < m->nodes[i].n_out; k++) {
      ox_name *s = slot(ix, m->nodes[i].out[k], true);
      if (s && s->node < 0) s->node = i;
    }
  for (int i = 0; i < m->n_inits; i++) {
    ox_name *s = slot(ix, m->inits[i].name, true);
    if (s && !s->init) s->init = &m->inits[i];
  }
  for (int i = 0; i < m->n_nodes; i++)
    for (int k = 0; k < m->nodes[i].n_in; k++) {
      ox_name *s = slot(ix, m->nodes[i].in[k], false);
      if (s) s->n_readers++;
    }
  for (int i = 0; i < m->n_outputs; i++) {
    ox_name *s = slot(ix, m->outputs[i].name, false);
    if (s) s->n_readers++;
  }
  x->names = ix;
  return AP_OK;
}

/* The Split's parts when they are equal (the split attribute or initializer, or absent: equal); 0 otherwise. */
static int equal_parts(const struct ox_names *ix, const onnx_model *m, const onnx_node *sp) {
  int p = sp->n_out;
  if (p < 2 || p > OP_MAX_OUT) return 0;
  const int64_t *v = NULL;
  int64_t n = -1;
  for (int a = 0; a < sp->n_attrs; a++)
    if (sp->attrs[a].name && strcmp(sp->attrs[a].name, "split") == 0 && sp->attrs[a].type == ONNX_ATTR_INTS) v = sp->attrs[a].ints, n = sp->attrs[a].n_ints;
  if (!v && sp->n_in > 1 && sp->in[1] && *sp->in[1]) {
    const onnx_tensor *t = find_init(ix, sp->in[1]);
    int64_t c = t ? -1 : find_node_out(ix, sp->in[1], (int)(sp - m->nodes));
    if (c >= 0 && strcmp(m->nodes[c].op_type, "Constant") == 0) /* torch.onnx's sizes: a Constant node */
      for (int a = 0; a < m->nodes[c].n_attrs; a++)
        if (m->nodes[c].attrs[a].type == ONNX_ATTR_TENSOR) t = m->nodes[c].attrs[a].t;
    if (!t || t->n_vals < 0) return 0;
    v = t->vals, n = t->n_vals;
  }
  if (v) {
    if (n != p) return 0;
    for (int i = 1; i < p; i++)
      if (v[i] != v[0]) return 0;
  }
  for (int k = 0; k < p; k++)
    if (!sp->out[k] || !*sp->out[k]) return 0;
  return p;
}

const onnx_tensor *ox_packed_weight(const ox *x, const onnx_node *mm, int64_t at, bool *transposed) {
  const onnx_model *m = x->m;
  const struct ox_names *ix = x->names;
  const onnx_tensor *t = find_init(ix, mm->in[1]);
  if (transposed) *transposed = false;
  if (t) return t->n_dims == 2 ? t : NULL;
  int64_t tr = find_node_out(ix, mm->in[1], (int)at);
  if (tr < 0 || strcmp(m->nodes[tr].op_type, "Transpose") != 0 || m->nodes[tr].n_in != 1) return NULL;
  t = find_init(ix, m->nodes[tr].in[0]); /* nn.Linear's [out, in] weight, transposed by torch.onnx (perm 1, 0) */
  if (transposed) *transposed = true;
  return t && t->n_dims == 2 ? t : NULL;
}

ap_status ox_packed_scan(ox *x, ox_packed *pk) {
  const onnx_model *m = x->m;
  ap_status st = index_names(x);
  if (st) return st;
  const struct ox_names *ix = x->names;
  for (int i = 0; i < m->n_nodes; i++) pk[i] = (ox_packed){0, -1, -1, -1, 0};
  for (int s = 0; s < m->n_nodes; s++) {
    const onnx_node *sp = &m->nodes[s];
    if (strcmp(sp->op_type, "Split") != 0 || sp->n_in < 1 || !sp->in[0] || !*sp->in[0]) continue;
    int p = equal_parts(ix, m, sp);
    if (!p || readers(ix, sp->in[0]) != 1) continue;
    int64_t prod = find_node_out(ix, sp->in[0], s), add = -1;
    if (prod < 0) continue;
    if (strcmp(m->nodes[prod].op_type, "Add") == 0) {
      const onnx_node *ad = &m->nodes[prod];
      int w = ad->n_in == 2 && find_init(ix, ad->in[1]) ? 1 : ad->n_in == 2 && find_init(ix, ad->in[0]) ? 0 : -1;
      if (w < 0 || readers(ix, ad->in[1 - w]) != 1) continue;
      add = prod;
      prod = find_node_out(ix, ad->in[1 - w], (int)add);
      if (prod < 0) continue;
    }
    const onnx_node *mm = &m->nodes[prod];
    if (strcmp(mm->op_type, "MatMul") != 0 || mm->n_in != 2 || !ox_packed_weight(x, mm, prod, NULL)) continue;
    pk[prod] = (ox_packed){OX_PACKED_MATMUL, (int)prod, (int)add, s, p};
    if (add >= 0) pk[add] = (ox_packed){OX_PACKED_BIAS, (int)prod, (int)add, s, p};
    pk[s] = (ox_packed){OX_PACKED_SPLIT, (int)prod, (int)add, s, p};
  }
  return AP_OK;
}

/* At the MatMul (after its shape inference): the weight [K, p·N] of trainable parameters, the output's last
 * dim p·N, the bias [p·N], the Split on the last axis; otherwise the pattern is dropped and each node is read as
 * it stands. */
void ox_packed_check(ox *x, ox_packed *pk, int ni) {
  ox_packed *e = &pk[ni];
  const onnx_model *m = x->m;
  ox_val *in = ox_in(x, 0), *w = ox_in(x, 1), *y = ox_out(x, 0);
  bool ok = in && in->activation && in->tensor >= 0 && w && !w->activation && w->n_dims == 2 && w->pending_params == w->dims[0] * w->dims[1] && y &&
            y->n_dims >= 2 && y->dims[y->n_dims - 1] == w->dims[1] && w->dims[1] % e->parts == 0;
  if (ok) {
    int axis = (int)ox_attr_i(&m->nodes[e->split], "axis", 0);
    ok = axis == -1 || axis == y->n_dims - 1;
  }
  if (ok && e->add >= 0) {
    const onnx_node *ad = &m->nodes[e->add];
    const onnx_tensor *b = find_init(x->names, ad->in[0]);
    if (!b) b = find_init(x->names, ad->in[1]);
    ok = b && b->n_dims == 1 && b->dims[0] == w->dims[1];
  }
  if (!ok) {
    if (e->add >= 0) pk[e->add].role = 0;
    pk[e->split].role = 0;
    e->role = 0;
  }
}
