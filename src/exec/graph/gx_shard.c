/* A micro-batch under an op-level plan (exec layer; gx_shard.h). Every value has a layout: a plan op's output
 * its output_spec's, everything else (graph inputs, weights, constants, the outputs of nodes the plan does not
 * list) whole on every rank. An op takes each input in the spec its strategy needs (input_specs, a weight's
 * weight_spec): the layout it has costs nothing; a whole tensor is sliced (free); any other is made whole
 * first (each rank puts its shard in a zero tensor, the replicas of one shard but one leave it zero, and an
 * all-reduce over the mesh sums them: an all-gather) and sliced. The op's kernel (gx_fwd.c, gx_nn.c) then runs
 * on the shards; a pending sum (`partial`) is all-reduced over its axes, as Megatron's row-parallel linear
 * does. In the backward pass an operand's gradient is a pending sum over the mesh axes the strategy puts on
 * loops the operand lacks (Alpa's rule, docs/graph-plan.md "Specs"), identical over the axes the strategy
 * leaves unused: kept in the operand's layout it is all-reduced over the pending axes; otherwise put whole by
 * the same zero-tensor sum. Weight gradients are gathered that way into the flat buffer, which the host then
 * all-reduces once (data parallelism's gradient all-reduce folded into the same sum).
 *
 * Where a shard changes an op's arithmetic: a view op (Reshape, Flatten, Squeeze, Unsqueeze, Expand) takes
 * its output shape from the whole shape divided by its spec; a Gather whose table rows are split looks up its
 * own rows and leaves zeros for the others (vocab parallelism, a pending sum); a ReduceMean over split dims
 * scales by the share of the count it saw; a bias of a Gemm or Conv with a pending sum is added by one rank
 * of the sum; BatchNormalization sums its statistics over the axes splitting the batch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/graph/gx_ops.h"
#include "exec/graph/gx_shard.h"

struct gx_shard_mb {
  gx_run *r;
  const gx_mesh *m;
  const gx_opspec *ops;
  const gx_shape *shapes;
  gx_spec *lay;     /* per value: its layout */
  gx_tensor *whole; /* per value: its whole tensor once gathered (rank -1: not yet) */
  float **wgrad;    /* per value of a split layout: the gradient contributions put whole */
  float **xgrad;    /* per value sent to later stages: the whole gradient they sent back */
  const gx_pipe *pipe;
  bool *sent, *recvd; /* per value: sent to a later stage / received from an earlier one */
};
typedef struct gx_shard_mb sh;

static bool is_whole(const gx_spec *s) {
  if (s->rank < 0) return true;
  for (int d = 0; d < s->rank; d++)
    if (s->d[d]) return false;
  return true;
}

static bool same_spec(const gx_spec *a, const gx_spec *b) {
  if (is_whole(a) || is_whole(b)) return is_whole(a) && is_whole(b);
  return a->rank == b->rank && memcmp(a->d, b->d, (size_t)a->rank) == 0;
}

static unsigned spec_axes(const gx_spec *s) {
  unsigned a = 0;
  for (int d = 0; s->rank > 0 && d < s->rank; d++) a |= s->d[d];
  return a;
}

/* The shard count and this rank's shard index of a dim split over axes (S01: axis 0 major). */
static void shard_of(const gx_mesh *m, unsigned axes, int64_t *count, int64_t *index) {
  *count = 1, *index = 0;
  for (int a = 0; a < m->n_axes; a++)
    if (axes & (1u << a)) *index = *index * m->size[a] + m->coord[a], *count *= m->size[a];
}

/* Whether this rank has coordinate 0 on every mesh axis in axes (the one replica that contributes). */
static bool first_on(const gx_mesh *m, unsigned axes) {
  for (int a = 0; a < m->n_axes; a++)
    if ((axes & (1u << a)) && m->coord[a]) return false;
  return true;
}

static unsigned all_axes(const gx_mesh *m) { return (1u << m->n_axes) - 1u; }

/* For element e of the local shard (dims ld), its flat index in the whole tensor. */
static int64_t whole_index(const gx_mesh *m, const gx_spec *s, int rank, const int64_t *ld, int64_t e) {
  int64_t idx = 0, stride = 1;
  for (int d = rank - 1; d >= 0; d--) {
    int64_t c = e % ld[d], cnt = 1, at = 0;
    e /= ld[d];
    if (s->rank > 0) shard_of(m, s->d[d], &cnt, &at);
    idx += (at * ld[d] + c) * stride;
    stride *= ld[d] * cnt;
  }
  return idx;
}

/* Slices whole to spec s into out (fails when a split dim does not divide). */
static bool slice_to(sh *h, int k, const gx_tensor *whole, const gx_spec *s, gx_tensor *out) {
  int64_t ld[GX_MAX_DIMS];
  if (s->rank >= 0 && s->rank != whole->rank)
    return gx_fail(h->r, k, "a spec of rank %d for a tensor of rank %d", s->rank, whole->rank);
  for (int d = 0; d < whole->rank; d++) {
    int64_t cnt = 1, at = 0;
    if (s->rank > 0) shard_of(h->m, s->d[d], &cnt, &at);
    if (whole->dims[d] % cnt) return gx_fail(h->r, k, "dim %d of size %lld does not split %lld ways", d,
                                             (long long)whole->dims[d], (long long)cnt);
    ld[d] = whole->dims[d] / cnt;
  }
  if (!gx_alloc(out, whole->is_int, whole->rank, ld)) return gx_fail(h->r, k, "out of memory");
  for (int64_t e = 0; e < out->n; e++) {
    int64_t w = whole_index(h->m, s, whole->rank, ld, e);
    if (out->is_int) out->i[e] = whole->i[w];
    else out->f[e] = whole->f[w];
  }
  return true;
}

/* The whole dims of value v from its shard and layout; returns the element count. */
static int64_t whole_dims(const sh *h, int v, int64_t *wd) {
  const gx_tensor *t = &h->r->v[v];
  int64_t n = 1;
  for (int d = 0; d < t->rank; d++) {
    int64_t cnt = 1, at = 0;
    if (h->lay[v].rank > 0) shard_of(h->m, h->lay[v].d[d], &cnt, &at);
    wd[d] = t->dims[d] * cnt;
    n *= wd[d];
  }
  return n;
}

/* The whole tensor of value v (gathered once and kept for the step). */
static const gx_tensor *whole_of(sh *h, int k, int v) {
  gx_tensor *t = &h->r->v[v];
  if (is_whole(&h->lay[v])) return t;
  if (h->whole[v].rank >= 0) return &h->whole[v];
  const gx_spec *s = &h->lay[v];
  if (t->is_int) {
    gx_fail(h->r, k, "an integer value with a split spec");
    return NULL;
  }
  int64_t wd[GX_MAX_DIMS];
  for (int d = 0; d < t->rank; d++) {
    int64_t cnt = 1, at = 0;
    shard_of(h->m, s->d[d], &cnt, &at);
    wd[d] = t->dims[d] * cnt;
  }
  gx_tensor *w = &h->whole[v];
  if (!gx_alloc(w, false, t->rank, wd)) {
    gx_fail(h->r, k, "out of memory");
    return NULL;
  }
  if (first_on(h->m, all_axes(h->m) & ~spec_axes(s)))
    for (int64_t e = 0; e < t->n; e++) w->f[whole_index(h->m, s, t->rank, t->dims, e)] = t->f[e];
  h->m->all_reduce(h->m->user, all_axes(h->m), w->f, w->n);
  return w;
}

/* The spec node k takes input i in. */
static const gx_spec *want(const sh *h, int k, int i) {
  static const gx_spec whole = {.rank = -1};
  return h->ops[k].in_plan ? &h->ops[k].in[i] : &whole;
}

/* Puts node k's inputs in the specs it takes them in: saved[i] keeps the value's own tensor while tmp[i] holds
 * the resharded one in r->v. */
static bool stage_inputs(sh *h, int k, gx_tensor *saved, gx_tensor *tmp, bool *swapped) {
  const gx_node *nd = &h->r->g->nodes[k];
  for (int i = 0; i < nd->n_in; i++) {
    swapped[i] = false;
    int v = nd->in[i];
    if (v < 0 || same_spec(&h->lay[v], want(h, k, i))) continue;
    for (int j = 0; j < i; j++)
      if (nd->in[j] == v && swapped[j]) {
        if (!same_spec(want(h, k, j), want(h, k, i))) return gx_fail(h->r, k, "one value taken in two specs");
        goto next;
      }
    {
      const gx_tensor *w = whole_of(h, k, v);
      if (!w) return false;
      if (!slice_to(h, k, w, want(h, k, i), &tmp[i])) return false;
      saved[i] = h->r->v[v];
      h->r->v[v] = tmp[i];
      swapped[i] = true;
    }
  next:;
  }
  return true;
}

static void unstage_inputs(sh *h, int k, gx_tensor *saved, bool *swapped) {
  const gx_node *nd = &h->r->g->nodes[k];
  for (int i = nd->n_in - 1; i >= 0; i--)
    if (swapped[i]) {
      gx_free(&h->r->v[nd->in[i]]);
      h->r->v[nd->in[i]] = saved[i];
    }
}

/* The local dims of output o of node k: the whole shape divided by its spec. */
static void local_dims(const sh *h, int k, int o, int64_t *dims, int *rank) {
  const gx_shape *w = &h->shapes[h->r->g->nodes[k].out[o]];
  const gx_spec *s = &h->ops[k].out[o < GX_MAX_OUT_SPECS ? o : 0];
  *rank = w->rank;
  for (int d = 0; d < w->rank; d++) {
    int64_t cnt = 1, at = 0;
    if (s->rank > 0 && d < s->rank) shard_of(h->m, s->d[d], &cnt, &at);
    dims[d] = w->dims[d] / cnt;
  }
}

static bool is_view(const char *op) {
  return !strcmp(op, "Reshape") || !strcmp(op, "Flatten") || !strcmp(op, "Squeeze") || !strcmp(op, "Unsqueeze");
}

/* The share of a ReduceMean's count this rank's shard sees (1 when no reduced dim is split). */
static double reduce_share(sh *h, int k) {
  const gx_node *nd = &h->r->g->nodes[k];
  if (strcmp(nd->node->op_type, "ReduceMean") || !h->ops[k].in_plan) return 1.0;
  const gx_tensor *x = &h->r->v[nd->in[0]];
  const gx_spec *s = &h->ops[k].in[0];
  bool mask[GX_MAX_DIMS];
  if (s->rank <= 0 || !gx_reduce_axes(h->r, k, x, mask)) return 1.0;
  double f = 1.0;
  for (int d = 0; d < s->rank; d++) {
    int64_t cnt = 1, at = 0;
    shard_of(h->m, s->d[d], &cnt, &at);
    if (mask[d]) f /= (double)cnt;
  }
  return f;
}

/* The Gather of a table whose rows are split (vocab parallelism): this rank's rows, zeros elsewhere. */
static bool split_gather(sh *h, int k, bool bwd) {
  gx_run *r = h->r;
  const gx_node *nd = &r->g->nodes[k];
  const gx_tensor *x = &r->v[nd->in[0]], *ix = &r->v[nd->in[1]];
  int64_t cnt = 1, at = 0, D = x->dims[0], inner = x->n / (D ? D : 1);
  shard_of(h->m, h->ops[k].in[0].d[0], &cnt, &at);
  if (gx_attr_i(nd->node, "axis", 0) != 0 || ix->is_int == false) return gx_fail(r, k, "a split table on axis != 0");
  int64_t lo = at * D;
  if (!bwd) {
    int64_t dims[GX_MAX_DIMS * 2];
    int rank = 0;
    for (int d = 0; d < ix->rank; d++) dims[rank++] = ix->dims[d];
    for (int d = 1; d < x->rank; d++) dims[rank++] = x->dims[d];
    if (!gx_alloc(&r->v[nd->out[0]], false, rank, dims)) return gx_fail(r, k, "out of memory");
  }
  float *y = r->v[nd->out[0]].f, *dx = bwd ? gx_grad(r, nd->in[0]) : NULL;
  const float *dy = bwd ? r->grad[nd->out[0]] : NULL;
  if (bwd && !dx) return gx_fail(r, k, "out of memory");
  for (int64_t j = 0; j < ix->n; j++) {
    int64_t id = ix->i[j] - lo;
    if (id < 0 || id >= D) continue;
    for (int64_t e = 0; e < inner; e++)
      if (bwd) dx[id * inner + e] += dy[j * inner + e];
      else y[j * inner + e] = x->f[id * inner + e];
  }
  return true;
}

/* Whether node k's bias (input 2 of Gemm and Conv) must be left to another rank of its pending sum. */
static bool bias_elsewhere(const sh *h, int k) {
  const gx_node *nd = &h->r->g->nodes[k];
  const char *op = nd->node->op_type;
  return h->ops[k].in_plan && h->ops[k].partial && nd->n_in > 2 && nd->in[2] >= 0 &&
         (!strcmp(op, "Gemm") || !strcmp(op, "Conv")) && !first_on(h->m, h->ops[k].partial);
}

static bool fwd_node(sh *h, int k) {
  gx_run *r = h->r;
  const gx_node *nd = &r->g->nodes[k];
  const gx_opspec *os = &h->ops[k];
  const char *op = nd->node->op_type;
  gx_tensor saved[GX_MAX_IO], tmp[GX_MAX_IO];
  bool swapped[GX_MAX_IO];
  if (!strcmp(op, "Shape") && nd->in[0] >= 0) { /* the whole shape, whatever the shard */
    const gx_shape *w = &h->shapes[nd->in[0]];
    int64_t b = gx_attr_i(nd->node, "start", 0), e = gx_attr_i(nd->node, "end", w->rank);
    b = b < 0 ? b + w->rank : b, e = e < 0 ? e + w->rank : e > w->rank ? w->rank : e;
    if (!gx_alloc(&r->v[nd->out[0]], true, 1, (int64_t[]){e > b ? e - b : 0})) return gx_fail(r, k, "out of memory");
    for (int64_t d = b; d < e; d++) r->v[nd->out[0]].i[d - b] = w->dims[d];
    return true;
  }
  if (!stage_inputs(h, k, saved, tmp, swapped)) return false;
  bool ok;
  gx_tensor zero_bias = {.rank = -1}, bias_saved = {.rank = -1};
  if (bias_elsewhere(h, k)) {
    bias_saved = r->v[nd->in[2]];
    ok = gx_alloc(&zero_bias, false, bias_saved.rank, bias_saved.dims);
    if (!ok) return gx_fail(r, k, "out of memory");
    r->v[nd->in[2]] = zero_bias;
  }
  gx_comm comm = {h->m->user, h->m->sum_d, os->in_plan && os->in[0].rank > 0 ? os->in[0].d[0] : 0};
  const gx_comm *prev = r->comm;
  r->comm = &comm;
  if (os->in_plan && is_view(op) && !r->v[nd->in[0]].is_int) {
    int64_t dims[GX_MAX_DIMS];
    int rank;
    local_dims(h, k, 0, dims, &rank);
    const gx_tensor *x = &r->v[nd->in[0]];
    gx_tensor *y = &r->v[nd->out[0]];
    ok = gx_alloc(y, false, rank, dims) && y->n == x->n;
    if (ok) memcpy(y->f, x->f, sizeof *y->f * (size_t)x->n);
    else gx_fail(r, k, "the shard of %lld elements does not take the output spec's shape", (long long)x->n);
  } else if (os->in_plan && !strcmp(op, "Gather") && os->in[0].rank > 0 && os->in[0].d[0]) {
    ok = split_gather(h, k, false);
  } else {
    ok = gx_fwd(r, k);
  }
  r->comm = prev;
  if (ok && os->in_plan && !strcmp(op, "ReduceMean")) {
    double f = reduce_share(h, k);
    gx_tensor *y = &r->v[nd->out[0]];
    if (f != 1.0)
      for (int64_t e = 0; e < y->n; e++) y->f[e] = (float)(y->f[e] * f);
  }
  if (zero_bias.rank >= 0) {
    gx_free(&r->v[nd->in[2]]);
    r->v[nd->in[2]] = bias_saved;
  }
  unstage_inputs(h, k, saved, swapped);
  if (!ok) return false;
  for (int o = 0; o < nd->n_out; o++) {
    int v = nd->out[o];
    if (v < 0) continue;
    h->lay[v] = os->in_plan && o < GX_MAX_OUT_SPECS && !r->v[v].is_int ? os->out[o] : (gx_spec){.rank = -1};
    if (os->in_plan && os->partial && !r->v[v].is_int)
      h->m->all_reduce(h->m->user, os->partial, r->v[v].f, r->v[v].n);
  }
  return true;
}

/* The gradient of value v in its layout, once every consumer has contributed (called at its producer): this
 * stage's contributions, and the whole gradient later stages sent back (xgrad). */
static bool settle_grad(sh *h, int k, int v) {
  gx_run *r = h->r;
  if (v < 0 || r->v[v].is_int) return true;
  const gx_tensor *t = &r->v[v];
  if (is_whole(&h->lay[v])) { /* contributions are masked shares of the whole gradient */
    if (r->grad[v]) h->m->all_reduce(h->m->user, all_axes(h->m), r->grad[v], t->n);
  } else if (h->wgrad[v]) {
    int64_t wd[GX_MAX_DIMS];
    h->m->all_reduce(h->m->user, all_axes(h->m), h->wgrad[v], whole_dims(h, v, wd));
    float *g = gx_grad(r, v);
    if (!g) return gx_fail(r, k, "out of memory");
    for (int64_t e = 0; e < t->n; e++) g[e] += h->wgrad[v][whole_index(h->m, &h->lay[v], t->rank, t->dims, e)];
  }
  if (h->xgrad[v]) {
    float *g = gx_grad(r, v);
    if (!g) return gx_fail(r, k, "out of memory");
    bool whole = is_whole(&h->lay[v]);
    for (int64_t e = 0; e < t->n; e++) g[e] += h->xgrad[v][whole ? e : whole_index(h->m, &h->lay[v], t->rank, t->dims, e)];
  }
  return true;
}

/* Adds node k's gradient contribution tg (in the spec it took input i in) to value v's gradient. */
static bool contribute(sh *h, int k, int i, float *tg) {
  gx_run *r = h->r;
  const gx_node *nd = &r->g->nodes[k];
  int v = nd->in[i];
  const gx_spec *s = want(h, k, i);
  unsigned used = h->ops[k].in_plan ? h->ops[k].used : 0;
  unsigned pending = used & ~spec_axes(s), unused = all_axes(h->m) & ~used;
  const gx_tensor *t = &r->v[v]; /* the value's own tensor (its layout) */
  if (!is_whole(&h->lay[v]) && same_spec(s, &h->lay[v])) {
    if (pending) h->m->all_reduce(h->m->user, pending, tg, t->n);
    float *g = gx_grad(r, v);
    if (!g) return gx_fail(r, k, "out of memory");
    for (int64_t e = 0; e < t->n; e++) g[e] += tg[e];
    return true;
  }
  /* Every rank allocates the whole buffer (settle_grad's all-reduce is collective); one replica fills it. */
  float *dst;
  int wrank = t->rank;
  int64_t wdims[GX_MAX_DIMS], ld[GX_MAX_DIMS];
  if (is_whole(&h->lay[v])) {
    dst = gx_grad(r, v);
    memcpy(wdims, t->dims, sizeof wdims);
  } else {
    int64_t wn = whole_dims(h, v, wdims);
    if (!h->wgrad[v]) h->wgrad[v] = calloc((size_t)(wn ? wn : 1), sizeof(float));
    dst = h->wgrad[v];
  }
  if (!dst) return gx_fail(r, k, "out of memory");
  if (!first_on(h->m, unused)) return true; /* another replica contributes this share */
  int64_t n = 1;
  for (int d = 0; d < wrank; d++) {
    int64_t cnt = 1, at = 0;
    if (s->rank > 0) shard_of(h->m, s->d[d], &cnt, &at);
    ld[d] = wdims[d] / cnt;
    n *= ld[d];
  }
  for (int64_t e = 0; e < n; e++) dst[whole_index(h->m, s, wrank, ld, e)] += tg[e];
  return true;
}

static bool bwd_node(sh *h, int k) {
  gx_run *r = h->r;
  const gx_node *nd = &r->g->nodes[k];
  const gx_opspec *os = &h->ops[k];
  const char *op = nd->node->op_type;
  for (int o = 0; o < nd->n_out; o++)
    if (!settle_grad(h, k, nd->out[o])) return false;
  bool any = false;
  for (int o = 0; o < nd->n_out; o++) any = any || (nd->out[o] >= 0 && r->grad[nd->out[o]]);
  if (!any || !strcmp(op, "Shape")) return true;
  gx_tensor saved[GX_MAX_IO], tmp[GX_MAX_IO];
  bool swapped[GX_MAX_IO];
  float *own[GX_MAX_IO];
  if (!stage_inputs(h, k, saved, tmp, swapped)) return false;
  /* Each input's contribution goes to a buffer of its own (an input read twice shares one). */
  for (int i = 0; i < nd->n_in; i++) {
    int v = nd->in[i];
    own[i] = NULL;
    if (v < 0) continue;
    bool dup = false;
    for (int j = 0; j < i; j++) dup = dup || nd->in[j] == v;
    if (dup) continue;
    own[i] = r->grad[v];
    r->grad[v] = NULL;
  }
  float scale = (float)reduce_share(h, k);
  float *dy0 = nd->out[0] >= 0 ? r->grad[nd->out[0]] : NULL, *dy_scaled = NULL;
  if (scale != 1.0f && dy0) {
    dy_scaled = malloc(sizeof *dy_scaled * (size_t)r->v[nd->out[0]].n);
    if (!dy_scaled) return gx_fail(r, k, "out of memory");
    for (int64_t e = 0; e < r->v[nd->out[0]].n; e++) dy_scaled[e] = dy0[e] * scale;
    r->grad[nd->out[0]] = dy_scaled;
  }
  gx_comm comm = {h->m->user, h->m->sum_d, os->in_plan && os->in[0].rank > 0 ? os->in[0].d[0] : 0};
  const gx_comm *prev = r->comm;
  r->comm = &comm;
  bool ok;
  if (os->in_plan && is_view(op) && !r->v[nd->in[0]].is_int) {
    float *dx = gx_grad(r, nd->in[0]);
    const float *dy = r->grad[nd->out[0]];
    ok = dx != NULL;
    for (int64_t e = 0; ok && e < r->v[nd->in[0]].n; e++) dx[e] += dy[e];
  } else if (os->in_plan && !strcmp(op, "Gather") && os->in[0].rank > 0 && os->in[0].d[0]) {
    ok = split_gather(h, k, true);
  } else {
    ok = gx_bwd(r, k);
  }
  r->comm = prev;
  if (dy_scaled) {
    r->grad[nd->out[0]] = dy0;
    free(dy_scaled);
  }
  if (ok && bias_elsewhere(h, k) && r->grad[nd->in[2]])
    memset(r->grad[nd->in[2]], 0, sizeof(float) * (size_t)r->v[nd->in[2]].n);
  /* Move each contribution out and restore the values' own gradients and tensors. */
  float *contrib[GX_MAX_IO];
  for (int i = 0; i < nd->n_in; i++) {
    int v = nd->in[i];
    contrib[i] = NULL;
    if (v < 0) continue;
    bool dup = false;
    for (int j = 0; j < i; j++) dup = dup || nd->in[j] == v;
    if (dup) continue;
    contrib[i] = r->grad[v];
    r->grad[v] = own[i];
  }
  unstage_inputs(h, k, saved, swapped);
  for (int i = 0; i < nd->n_in; i++) {
    if (ok && contrib[i] && !r->v[nd->in[i]].is_int) ok = contribute(h, k, i, contrib[i]);
    free(contrib[i]);
  }
  return ok;
}

/* Whether node k runs on this rank's stage. */
static bool here(const sh *h, int k) {
  return !h->pipe || h->pipe->stage_of[k] < 0 || h->pipe->stage_of[k] == h->pipe->stage;
}

/* The stage that produces value v (-1: every stage has it: a graph input, a weight, a constant). */
static int stage_of_value(const sh *h, int v) {
  int p = h->r->g->producer[v];
  return !h->pipe || p < 0 ? -1 : h->pipe->stage_of[p];
}

/* The stages that read value v, a bit each. */
static unsigned readers(const sh *h, int v) {
  unsigned m = 0;
  const gx_graph *g = h->r->g;
  for (int k = 0; k < g->n_nodes; k++)
    for (int i = 0; i < g->nodes[k].n_in; i++)
      if (g->nodes[k].in[i] == v && h->pipe->stage_of[k] >= 0) m |= 1u << h->pipe->stage_of[k];
  return m;
}

static void free_state(sh *h) {
  const gx_graph *g = h->r->g;
  for (int v = 0; v < g->n_vals; v++) {
    if (h->whole) gx_free(&h->whole[v]);
    if (h->wgrad) free(h->wgrad[v]);
    if (h->xgrad) free(h->xgrad[v]);
  }
  free(h->lay);
  free(h->whole);
  free(h->wgrad);
  free(h->xgrad);
  free(h->sent);
  free(h->recvd);
  gx_run_free(h->r);
  free(h);
}

gx_shard_mb *gx_shard_fwd(gx_run *r, const gx_mesh *mesh, const gx_opspec *ops, const gx_shape *shapes,
                          const gx_pipe *pipe, const gx_tensor *inputs) {
  const gx_graph *g = r->g;
  size_t nv = (size_t)g->n_vals;
  r->err[0] = '\0';
  sh *h = calloc(1, sizeof *h);
  if (!h) return NULL;
  *h = (sh){r, mesh, ops, shapes, calloc(nv, sizeof(gx_spec)), calloc(nv, sizeof(gx_tensor)), calloc(nv, sizeof(float *)),
            calloc(nv, sizeof(float *)), pipe && pipe->n_stages > 1 ? pipe : NULL, calloc(nv, 1), calloc(nv, 1)};
  r->v = calloc(nv, sizeof *r->v);
  r->grad = calloc(nv, sizeof *r->grad);
  if (!h->lay || !h->whole || !h->wgrad || !h->xgrad || !h->sent || !h->recvd || !r->v || !r->grad) goto oom;
  for (int v = 0; v < g->n_vals; v++) {
    h->lay[v].rank = -1;
    h->whole[v].rank = -1;
    r->v[v].rank = -1;
    if (g->consts[v].rank < 0) continue;
    r->v[v] = g->consts[v];
    r->v[v].view = true;
    if (g->param_of[v] >= 0) r->v[v].f = (float *)r->w + g->params[g->param_of[v]].off;
  }
  for (int i = 0; i < g->n_inputs; i++) {
    gx_tensor *t = &r->v[g->inputs[i]];
    if (!gx_alloc(t, inputs[i].is_int, inputs[i].rank, inputs[i].dims)) goto oom;
    if (t->is_int) memcpy(t->i, inputs[i].i, sizeof *t->i * (size_t)t->n);
    else memcpy(t->f, inputs[i].f, sizeof *t->f * (size_t)t->n);
  }
  /* The activations earlier stages computed for this one, whole, in value order (as they send them). */
  for (int v = 0; h->pipe && v < g->n_vals; v++) {
    int src = stage_of_value(h, v);
    if (src < 0 || src == pipe->stage || !(readers(h, v) & (1u << pipe->stage))) continue;
    if (!gx_alloc(&r->v[v], false, shapes[v].rank, shapes[v].dims)) goto oom;
    pipe->recv(pipe->user, src, r->v[v].f, r->v[v].n);
    h->recvd[v] = true;
  }
  for (int k = 0; k < g->n_nodes; k++)
    if (here(h, k) && !fwd_node(h, k)) goto fail;
  for (int v = 0; h->pipe && v < g->n_vals; v++) {
    if (stage_of_value(h, v) != pipe->stage || r->v[v].is_int) continue;
    unsigned later = readers(h, v) & ~(1u << pipe->stage);
    if (!later) continue;
    const gx_tensor *w = whole_of(h, g->n_nodes - 1, v);
    if (!w) goto fail;
    for (int t = 0; t < pipe->n_stages; t++)
      if (later & (1u << t)) pipe->send(pipe->user, t, w->f, w->n);
    h->sent[v] = true;
  }
  if (h->pipe) pipe->flush(pipe->user);
  return h;
oom:
  snprintf(r->err, sizeof r->err, "out of memory");
fail:
  free_state(h);
  return NULL;
}

bool gx_shard_has_output(const gx_shard_mb *h) {
  return !h->pipe || stage_of_value(h, h->r->g->output) == h->pipe->stage;
}

double gx_shard_loss(gx_shard_mb *h, const gx_tensor *labels, int loss, double scale) {
  gx_run *r = h->r;
  const gx_graph *g = r->g;
  const gx_tensor *y = whole_of(h, g->n_nodes - 1, g->output);
  if (!y) return NAN;
  float *dy = calloc((size_t)(y->n ? y->n : 1), sizeof *dy);
  if (!dy) {
    snprintf(r->err, sizeof r->err, "out of memory");
    return NAN;
  }
  double result = gx_loss(r, y, labels, loss, scale, dy);
  /* The output's gradient, whole on every rank, as one rank's share (settle_grad sums the shares). */
  if (!first_on(h->m, all_axes(h->m))) memset(dy, 0, sizeof *dy * (size_t)y->n);
  if (is_whole(&h->lay[g->output])) r->grad[g->output] = dy;
  else h->wgrad[g->output] = dy;
  return result;
}

bool gx_shard_bwd(gx_shard_mb *h) {
  gx_run *r = h->r;
  const gx_graph *g = r->g;
  const gx_pipe *pipe = h->pipe;
  bool ok = true;
  /* The gradients later stages send back for what this one sent them, summed per value. */
  for (int v = 0; ok && pipe && v < g->n_vals; v++) {
    if (!h->sent[v]) continue;
    int64_t n = r->v[v].n, wd[GX_MAX_DIMS];
    if (!is_whole(&h->lay[v])) n = whole_dims(h, v, wd);
    float *buf = malloc(sizeof *buf * (size_t)(n ? n : 1));
    h->xgrad[v] = calloc((size_t)(n ? n : 1), sizeof(float));
    ok = buf && h->xgrad[v];
    unsigned later = readers(h, v) & ~(1u << pipe->stage);
    for (int t = 0; ok && t < pipe->n_stages; t++)
      if (later & (1u << t)) {
        pipe->recv(pipe->user, t, buf, n);
        for (int64_t e = 0; e < n; e++) h->xgrad[v][e] += buf[e];
      }
    free(buf);
  }
  if (!ok) snprintf(r->err, sizeof r->err, "out of memory");
  for (int k = g->n_nodes - 1; ok && k >= 0; k--)
    if (here(h, k)) ok = bwd_node(h, k);
  /* What this stage received goes back as its whole gradient (zeros where nothing reached it). */
  for (int v = 0; ok && pipe && v < g->n_vals; v++) {
    if (!h->recvd[v]) continue;
    float *gr = gx_grad(r, v);
    if (!gr) {
      snprintf(r->err, sizeof r->err, "out of memory");
      ok = false;
      break;
    }
    h->m->all_reduce(h->m->user, all_axes(h->m), gr, r->v[v].n);
    pipe->send(pipe->user, stage_of_value(h, v), gr, r->v[v].n);
  }
  if (pipe) pipe->flush(pipe->user);
  for (int p = 0; ok && p < g->n_params; p++) {
    const float *gr = r->grad[g->params[p].val];
    if (!gr) continue;
    float *dst = r->gw + g->params[p].off;
    for (int64_t e = 0; e < g->params[p].n; e++) dst[e] += gr[e];
  }
  free_state(h);
  return ok;
}
