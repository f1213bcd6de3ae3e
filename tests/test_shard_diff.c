/* Every sharding spec is legal (shard/ on ONNX imports): one differential test per op kind. Each case is a
 * one-node ONNX model (built here with protobuf-c, so the importer's dim correspondence, src/model/onnx_dims.c,
 * is under test too) run on small random tensors by the serial reference kernels of tests/shard_ref.h, then,
 * for every strategy shard_enumerate allows on the meshes [2], [4] and [2, 2], simulated on one process: each
 * device's inputs and weights are sliced as the strategy's specs say (a dim split over the axes of its mask
 * into contiguous chunks, axis 0 major for S01), the same kernel runs on each device's shard, and the spec's
 * collective rebuilds the whole output: concatenation for a split dim, a sum over the axes of a pending sum
 * (`partial`), replicas compared equal. The result must equal the serial output to 1e-9, and every pending sum
 * and every statistics all-reduce the simulation needs must be priced in the strategy's collectives.
 *
 * Conventions an executor shares with this simulation: with a pending sum, a bias (Gemm's C, Conv's B) is added
 * by the devices at coordinate 0 of the partial axes only; a vocab-parallel embedding looks up only its own rows
 * (zeros for the others); BatchNormalization with N split uses the statistics all-reduced over the N axes. */
#include <stdlib.h>

#include "testutil.h"
#include "shard_ref.h"

#include "hw/hw.h"
#include "model/model.h"
#include "onnx.pb-c.h"
#include "shard/shard.h"

enum { MAX_IO = 8, MAX_ATTR = 4, FLOAT = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, INT64 = ONNX__TENSOR_PROTO__DATA_TYPE__INT64 };

typedef struct {
  char *name;
  int et;                 /* FLOAT or INT64 */
  int n;
  int64_t d[RT_MAX_DIMS];
  bool init;              /* an initializer (float: a weight; int64: constant values in vals) */
  int n_vals;
  int64_t vals[8];
  int64_t max_id;         /* an int64 activation: ids in [0, max_id) */
} io;

typedef struct {
  char *name;
  char kind; /* 'i' int, 'I' ints, 'f' float */
  int64_t i;
  int n_ints;
  int64_t ints[RT_MAX_DIMS];
  float f;
} attr;

typedef struct {
  const char *title;
  int64_t opset;
  ref_node rn;
  int n_io;
  io ios[MAX_IO];
  int n_out;
  int n_attr;
  attr attrs[MAX_ATTR];
  int min_strategies; /* on the [2, 2] mesh: at least this many (the case is not vacuous) */
} dcase;

/* ---- A one-node model with protobuf-c, all storage in one case-sized struct ---- */
typedef struct {
  Onnx__ModelProto model;
  Onnx__GraphProto graph;
  Onnx__OperatorSetIdProto opset, *opsets[1];
  Onnx__NodeProto node, *nodes[1];
  Onnx__AttributeProto attr[MAX_ATTR], *attrs[MAX_ATTR];
  Onnx__ValueInfoProto vi[MAX_IO], *vis[MAX_IO];
  Onnx__TypeProto ty[MAX_IO];
  Onnx__TypeProto__Tensor tt[MAX_IO];
  Onnx__TensorShapeProto sh[MAX_IO];
  Onnx__TensorShapeProto__Dimension dm[MAX_IO][RT_MAX_DIMS], *dms[MAX_IO][RT_MAX_DIMS];
  Onnx__TensorProto init[MAX_IO], *inits[MAX_IO];
  char *in_names[MAX_IO], *out_names[8];
  char out_buf[8][16];
} mbuild;

static ap_status build_and_load(ap_ctx *ctx, dcase *c, ap_model **m) {
  mbuild *b = calloc(1, sizeof *b);
  assert_non_null(b);
  b->model = (Onnx__ModelProto)ONNX__MODEL_PROTO__INIT;
  b->graph = (Onnx__GraphProto)ONNX__GRAPH_PROTO__INIT;
  b->opset = (Onnx__OperatorSetIdProto)ONNX__OPERATOR_SET_ID_PROTO__INIT;
  b->opset.has_version = true;
  b->opset.version = c->opset;
  b->opsets[0] = &b->opset;
  b->model.has_ir_version = true;
  b->model.ir_version = 8;
  b->model.n_opset_import = 1;
  b->model.opset_import = b->opsets;
  b->model.graph = &b->graph;
  b->graph.input = b->vis;
  b->graph.initializer = b->inits;
  for (int i = 0; i < c->n_io; i++) {
    io *v = &c->ios[i];
    b->in_names[i] = v->name;
    if (v->init) {
      Onnx__TensorProto *t = &b->init[b->graph.n_initializer];
      *t = (Onnx__TensorProto)ONNX__TENSOR_PROTO__INIT;
      t->name = v->name;
      t->n_dims = (size_t)v->n;
      t->dims = v->d;
      t->has_data_type = true;
      t->data_type = v->et;
      if (v->et == INT64) {
        t->n_int64_data = (size_t)v->n_vals;
        t->int64_data = v->vals;
      } else {
        t->has_data_location = true; /* the weights' values are the test's own: only dims matter here */
        t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
      }
      b->inits[b->graph.n_initializer++] = t;
      continue;
    }
    size_t k = b->graph.n_input++;
    b->vi[k] = (Onnx__ValueInfoProto)ONNX__VALUE_INFO_PROTO__INIT;
    b->ty[k] = (Onnx__TypeProto)ONNX__TYPE_PROTO__INIT;
    b->tt[k] = (Onnx__TypeProto__Tensor)ONNX__TYPE_PROTO__TENSOR__INIT;
    b->sh[k] = (Onnx__TensorShapeProto)ONNX__TENSOR_SHAPE_PROTO__INIT;
    for (int j = 0; j < v->n; j++) {
      b->dm[k][j] = (Onnx__TensorShapeProto__Dimension)ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
      b->dm[k][j].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
      b->dm[k][j].dim_value = v->d[j];
      b->dms[k][j] = &b->dm[k][j];
    }
    b->sh[k].n_dim = (size_t)v->n;
    b->sh[k].dim = b->dms[k];
    b->tt[k].has_elem_type = true;
    b->tt[k].elem_type = v->et;
    b->tt[k].shape = &b->sh[k];
    b->ty[k].value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    b->ty[k].tensor_type = &b->tt[k];
    b->vi[k].name = v->name;
    b->vi[k].type = &b->ty[k];
    b->vis[k] = &b->vi[k];
  }
  for (int k = 0; k < c->n_out; k++) {
    snprintf(b->out_buf[k], sizeof b->out_buf[k], "y%d", k);
    b->out_names[k] = b->out_buf[k];
  }
  for (int k = 0; k < c->n_attr; k++) {
    const attr *s = &c->attrs[k];
    Onnx__AttributeProto *a = &b->attr[k];
    *a = (Onnx__AttributeProto)ONNX__ATTRIBUTE_PROTO__INIT;
    a->name = s->name;
    a->has_type = true;
    if (s->kind == 'i') a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, a->has_i = true, a->i = s->i;
    if (s->kind == 'f') a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, a->has_f = true, a->f = s->f;
    if (s->kind == 'I') {
      a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
      a->n_ints = (size_t)s->n_ints;
      a->ints = c->attrs[k].ints;
    }
    b->attrs[k] = a;
  }
  b->node = (Onnx__NodeProto)ONNX__NODE_PROTO__INIT;
  b->node.name = "op";
  b->node.op_type = (char *)c->rn.op;
  b->node.n_input = (size_t)c->n_io;
  b->node.input = b->in_names;
  b->node.n_output = (size_t)c->n_out;
  b->node.output = b->out_names;
  b->node.n_attribute = (size_t)c->n_attr;
  b->node.attribute = b->attrs;
  b->nodes[0] = &b->node;
  b->graph.n_node = 1;
  b->graph.node = b->nodes;
  size_t n = onnx__model_proto__get_packed_size(&b->model);
  uint8_t *buf = malloc(n ? n : 1);
  assert_non_null(buf);
  onnx__model_proto__pack(&b->model, buf);
  ap_status st = model_parse_onnx(ctx, "case.onnx", buf, n, m);
  free(buf);
  free(b);
  return st;
}

/* ---- Slicing by spec ---- */

/* The chunk of a dim split over the axes of mask, for device coordinate co: (index, count); axis 0 major. */
static void chunk_of(const shard_mesh *m, uint8_t mask, const int64_t *co, int64_t *index, int64_t *count) {
  *index = 0, *count = 1;
  for (int a = 0; a < m->n_axes; a++)
    if (mask & (1u << a)) *index = *index * m->shape[a] + co[a], *count *= m->shape[a];
}

/* The shard of t for spec sp at device co (sp NULL or of another rank: whole); off gets where it starts. */
static rt slice(const shard_mesh *m, const rt *t, const shard_spec *sp, const int64_t *co, int64_t *off) {
  int64_t d[RT_MAX_DIMS], lo[RT_MAX_DIMS];
  for (int i = 0; i < t->n; i++) {
    int64_t ix = 0, cnt = 1;
    if (sp && sp->n_dims == t->n) chunk_of(m, sp->dim[i], co, &ix, &cnt);
    assert_int_equal(t->d[i] % cnt, 0);
    d[i] = t->d[i] / cnt;
    lo[i] = off[i] = ix * d[i];
  }
  rt r = rt_new(t->n, d);
  int64_t idx[RT_MAX_DIMS] = {0}, o = 0;
  do {
    int64_t src[RT_MAX_DIMS];
    for (int i = 0; i < t->n; i++) src[i] = lo[i] + idx[i];
    r.v[o++] = t->v[rt_at(t->d, t->n, src)];
  } while (rt_next(idx, d, t->n));
  return r;
}

static bool priced(const shard_strategy *s, int axis) {
  for (int i = 0; i < s->n_comm; i++)
    if (s->comm[i].axis == axis && (s->comm[i].coll == COMM_ALLREDUCE || s->comm[i].coll == COMM_REDUCE_SCATTER)) return true;
  return false;
}

/* One strategy on mesh m: every device's shard run and the output rebuilt; fails with the strategy's specs. */
static void check_strategy(const dcase *c, const graph_op *op, const graph_block *blk, const shard_mesh *m,
                           const shard_strategy *st, const rt *ins, const rt *serial) {
  const shard_spec *spec[MAX_IO] = {NULL};
  shard_spec wspec[MAX_IO];
  for (int i = 0; i < c->n_io; i++) {
    for (int k = 0; k < op->n_in; k++)
      if (strcmp(blk->tensors[op->in[k]].name, c->ios[i].name) == 0) spec[i] = &st->in[k];
    for (int w = 0; w < op->n_weights; w++)
      if (strcmp(op->weights[w].name, c->ios[i].name) == 0) {
        shard_stored_weight_spec(st, &op->weights[w], &wspec[i]);
        spec[i] = &wspec[i];
      }
  }
  int64_t n_dev = m->n_devices, co[SHARD_MAX_AXES] = {0};
  rt whole[8], whole2[8];
  for (int k = 0; k < c->n_out; k++) whole[k] = rt_new(serial[k].n, serial[k].d), whole2[k] = rt_new(serial[k].n, serial[k].d);
  /* BatchNormalization: each device's per-channel sums, then summed over the devices that split N. */
  bool bn = strcmp(c->rn.op, "BatchNormalization") == 0;
  double *bn_s = NULL, *bn_q = NULL, *bn_cnt = NULL;
  int64_t C = ins[0].d[1];
  if (bn) {
    bn_s = calloc((size_t)(n_dev * C), sizeof *bn_s);
    bn_q = calloc((size_t)(n_dev * C), sizeof *bn_q);
    bn_cnt = calloc((size_t)n_dev, sizeof *bn_cnt);
  }
  for (int pass = bn ? 0 : 1; pass < 2; pass++)
    for (int64_t dv = 0; dv < n_dev; dv++) {
      co[0] = m->n_axes == 2 ? dv / m->shape[1] : dv;
      co[1] = m->n_axes == 2 ? dv % m->shape[1] : 0;
      ref_node rn = c->rn;
      rt loc[MAX_IO], out[8];
      for (int i = 0; i < c->n_io; i++) loc[i] = slice(m, &ins[i], spec[i], co, rn.off[i]);
      bool off_partial = false;
      for (int a = 0; a < m->n_axes; a++) off_partial = off_partial || ((st->partial >> a) & 1u && co[a] != 0);
      if (off_partial && c->n_io > 2 && (strcmp(rn.op, "Gemm") == 0 || strcmp(rn.op, "Conv") == 0))
        memset(loc[2].v, 0, sizeof(double) * (size_t)rt_numel(&loc[2]));
      int64_t c_lo = rn.off[0][1], c_n = bn ? loc[0].d[1] : 0;
      if (bn && pass == 0) { /* this device's sums over its N, H, W */
        int64_t N = loc[0].d[0], HW = rt_numel(&loc[0]) / (N * c_n);
        bn_cnt[dv] = (double)(N * HW);
        for (int64_t ch = 0; ch < c_n; ch++)
          for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < HW; i++) {
              double v = loc[0].v[(n * c_n + ch) * HW + i];
              bn_s[dv * C + c_lo + ch] += v, bn_q[dv * C + c_lo + ch] += v * v;
            }
        for (int i = 0; i < c->n_io; i++) rt_free(&loc[i]);
        continue;
      }
      double mean[64], var[64];
      if (bn) { /* the all-reduce over the axes that split N (loop 0) */
        bool n_split = false;
        for (int a = 0; a < m->n_axes; a++) n_split = n_split || st->axis_loop[a] == 0;
        for (int64_t ch = 0; ch < c_n; ch++) {
          double s = 0, q = 0, cnt = 0;
          for (int64_t d2 = 0; d2 < n_dev; d2++) {
            int64_t c2[2] = {m->n_axes == 2 ? d2 / m->shape[1] : d2, m->n_axes == 2 ? d2 % m->shape[1] : 0};
            bool same = true;
            for (int a = 0; a < m->n_axes; a++) same = same && (st->axis_loop[a] == 0 || c2[a] == co[a]);
            if (!same) continue;
            s += bn_s[d2 * C + c_lo + ch], q += bn_q[d2 * C + c_lo + ch], cnt += bn_cnt[d2];
          }
          mean[ch] = s / cnt, var[ch] = q / cnt - mean[ch] * mean[ch];
        }
        rn.bn_mean = mean, rn.bn_var = var;
        for (int a = 0; a < m->n_axes; a++)
          if (st->axis_loop[a] == 0 && m->shape[a] > 1 && !priced(st, a))
            fail_msg("%s: BatchNorm with N split on axis %d: its statistics' all-reduce is not priced", c->title, a);
        (void)n_split;
      }
      rt want[1];
      int64_t wd[RT_MAX_DIMS], cnt, ix;
      for (int j = 0; j < serial[0].n; j++) {
        chunk_of(m, st->out[0].dim[j], co, &ix, &cnt);
        wd[j] = serial[0].d[j] / cnt;
      }
      /* Reshape's target on this shard: an output dim is a shard where an input dim carries its split (the same
       * axes), else whole (the device reshapes what it holds and keeps its chunk). */
      want[0] = (rt){.n = serial[0].n};
      for (int j = 0; j < serial[0].n; j++) {
        bool carried = st->out[0].dim[j] == 0;
        for (int i = 0; spec[0] && i < spec[0]->n_dims; i++) carried = carried || spec[0]->dim[i] == st->out[0].dim[j];
        want[0].d[j] = carried ? wd[j] : serial[0].d[j];
      }
      int n_out = ref_run(&rn, loc, c->n_io, &want[0], out);
      if (n_out != c->n_out) fail_msg("%s: the kernel ran %d outputs on a shard, want %d", c->title, n_out, c->n_out);
      for (int k = 0; k < c->n_out; k++) {
        /* The output as the spec holds it: the natural shard, or the device's chunk of a whole result. */
        int64_t lo[RT_MAX_DIMS], sd[RT_MAX_DIMS];
        assert_int_equal(out[k].n, serial[k].n);
        for (int j = 0; j < serial[k].n; j++) {
          chunk_of(m, st->out[k].dim[j], co, &ix, &cnt);
          sd[j] = serial[k].d[j] / cnt;
          lo[j] = ix * sd[j];
          if (out[k].d[j] == sd[j]) continue;
          if (out[k].d[j] != serial[k].d[j])
            fail_msg("%s: output %d dim %d of a shard is %lld, the spec wants %lld of %lld", c->title, k, j,
                     (long long)out[k].d[j], (long long)sd[j], (long long)serial[k].d[j]);
        }
        /* Replicated axes (neither splitting this output nor pending): coordinate 0 writes the result, and the
         * last coordinate a second copy, so that replicas that disagree fail too. */
        bool writer = true, writer2 = true;
        for (int a = 0; a < m->n_axes; a++) {
          bool used = (st->partial >> a) & 1u;
          for (int j = 0; j < serial[k].n; j++) used = used || (st->out[k].dim[j] >> a) & 1u;
          writer = writer && (used || co[a] == 0);
          writer2 = writer2 && (used || co[a] == m->shape[a] - 1);
        }
        int64_t idx[RT_MAX_DIMS] = {0};
        do {
          int64_t g[RT_MAX_DIMS], s[RT_MAX_DIMS];
          for (int j = 0; j < serial[k].n; j++) g[j] = lo[j] + idx[j], s[j] = out[k].d[j] == sd[j] ? idx[j] : g[j];
          double v = out[k].v[rt_at(out[k].d, out[k].n, s)];
          double *w = &whole[k].v[rt_at(whole[k].d, whole[k].n, g)];
          if (writer) *w += v;
          if (writer2) whole2[k].v[rt_at(whole[k].d, whole[k].n, g)] += v;
        } while (rt_next(idx, sd, serial[k].n));
        rt_free(&out[k]);
      }
      for (int i = 0; i < c->n_io; i++) rt_free(&loc[i]);
    }
  for (int a = 0; a < m->n_axes; a++)
    if ((st->partial >> a) & 1u && m->shape[a] > 1 && !priced(st, a))
      fail_msg("%s: a pending sum on axis %d is not priced", c->title, a);
  for (int k = 0; k < c->n_out; k++) {
    double scale = 1e-30, err = 0;
    for (int64_t i = 0; i < rt_numel(&serial[k]); i++) scale = fmax(scale, fabs(serial[k].v[i]));
    for (int64_t i = 0; i < rt_numel(&serial[k]); i++)
      err = fmax(err, fmax(fabs(whole[k].v[i] - serial[k].v[i]), fabs(whole2[k].v[i] - serial[k].v[i])));
    if (err > 1e-9 * scale) {
      char buf[256];
      int n = snprintf(buf, sizeof buf, "out");
      for (int j = 0; j < st->out[k].n_dims; j++) n += snprintf(buf + n, sizeof buf - (size_t)n, "%s%s", j ? "," : " ", shard_dim_name(st->out[k].dim[j]));
      for (int i = 0; i < op->n_in; i++) {
        n += snprintf(buf + n, sizeof buf - (size_t)n, "; in%d", i);
        for (int j = 0; j < st->in[i].n_dims; j++) n += snprintf(buf + n, sizeof buf - (size_t)n, "%s%s", j ? "," : " ", shard_dim_name(st->in[i].dim[j]));
      }
      fail_msg("%s on mesh [%lld%s%lld]: output %d off by %.3g (of %.3g) under %s, partial %u", c->title,
               (long long)m->shape[0], m->n_axes == 2 ? ", " : "", m->n_axes == 2 ? (long long)m->shape[1] : 0LL, k,
               err, scale, buf, st->partial);
    }
    rt_free(&whole[k]);
    rt_free(&whole2[k]);
  }
  free(bn_s), free(bn_q), free(bn_cnt);
}

static void run_case(dcase *c) {
  ap_ctx *ctx = ap_ctx_new();
  assert_int_equal(ap_ctx_add_part(ctx, ap_part_onnx()), AP_OK);
  ap_model *model = NULL;
  if (build_and_load(ctx, c, &model)) fail_msg("%s: %s", c->title, ap_ctx_error(ctx));
  const graph *g = model_graph(model);
  const graph_block *blk = &g->blocks[0];
  assert_int_equal(blk->n_ops, 1);
  const graph_op *op = &blk->ops[0];
  /* Random inputs (ids below max_id, constants as given) and the serial run. */
  rt ins[MAX_IO], serial[8];
  srand(7);
  for (int i = 0; i < c->n_io; i++) {
    io *v = &c->ios[i];
    ins[i] = rt_new(v->n, v->d);
    for (int64_t k = 0; k < rt_numel(&ins[i]); k++)
      ins[i].v[k] = v->et == FLOAT ? 2.0 * rand() / RAND_MAX - 1 : v->init ? (double)v->vals[k] : (double)(rand() % v->max_id);
  }
  ref_node rn = c->rn;
  int n_out = ref_run(&rn, ins, c->n_io, &(rt){0}, serial);
  if (c->rn.op && strcmp(c->rn.op, "Reshape") == 0) {
    /* the target is the graph's output shape */
    const graph_tensor *t = &blk->tensors[op->out];
    rt want = {.n = t->n_dims};
    for (int j = 0; j < t->n_dims; j++) want.d[j] = (int64_t)graph_dim(t->dims[j], (double)c->ios[0].d[0], (double)g->default_seq); /* x is input 0 */
    n_out = ref_run(&rn, ins, c->n_io, &want, serial);
  }
  assert_int_equal(n_out, c->n_out);
  for (int k = 0; k < c->n_out; k++) assert_int_equal(blk->tensors[op->outs[k]].n_dims, serial[k].n); /* no relabelling here */
  ap_cluster *cl = NULL;
  assert_int_equal(ap_cluster_load(ctx, "h100-sxm:8", &cl), AP_OK);
  arena *a = arena_new();
  compute_model cm;
  assert_int_equal(compute_model_init(ctx, a, &hw_cluster_of(cl)->groups[0].device, NULL, &cm), AP_OK);
  int64_t b0 = 1;
  for (int i = c->n_io - 1; i >= 0; i--)
    if (!c->ios[i].init) b0 = c->ios[i].d[0];
  static const int64_t meshes[][2] = {{2, 0}, {4, 0}, {2, 2}};
  int total = 0;
  for (size_t mi = 0; mi < AP_COUNT(meshes); mi++) {
    shard_mesh m;
    int na = meshes[mi][1] ? 2 : 1;
    assert_int_equal(shard_mesh_init(ctx, hw_cluster_of(cl), na, meshes[mi], &m), AP_OK);
    shard_env env = {.cm = &cm, .mesh = &m, .b = (double)b0, .s = (double)g->default_seq, .n_micro = 1,
                     .state_bytes_per_param = 16, .gemm_dtype = HW_DTYPE_BF16};
    int cap = shard_max_strategies(na);
    shard_strategy *ss = malloc((size_t)cap * sizeof *ss);
    assert_non_null(ss);
    int n = shard_enumerate(&env, blk, op, ss, cap);
    for (int k = 0; k < n; k++) check_strategy(c, op, blk, &m, &ss[k], ins, serial);
    if (na == 2 && n < c->min_strategies)
      fail_msg("%s: %d strategies on the [2, 2] mesh, want at least %d", c->title, n, c->min_strategies);
    total += n;
    free(ss);
  }
  print_message("# %-44s %3d strategies checked\n", c->title, total);
  for (int i = 0; i < c->n_io; i++) rt_free(&ins[i]);
  for (int k = 0; k < c->n_out; k++) rt_free(&serial[k]);
  arena_free(a);
  ap_cluster_free(cl);
  ap_model_free(model);
  ap_ctx_free(ctx);
}

#define F(nm, ...) {.name = nm, .et = FLOAT, .n = (int)AP_COUNT(((int64_t[]){__VA_ARGS__})), .d = {__VA_ARGS__}}
#define W(nm, ...) {.name = nm, .et = FLOAT, .init = true, .n = (int)AP_COUNT(((int64_t[]){__VA_ARGS__})), .d = {__VA_ARGS__}}
#define INTS(nm, ...) {.name = nm, .kind = 'I', .n_ints = (int)AP_COUNT(((int64_t[]){__VA_ARGS__})), .ints = {__VA_ARGS__}}
#define INT(nm, v) {.name = nm, .kind = 'i', .i = v}

#include "shard_diff_cases.h"

int main(void) {
  const struct CMUnitTest tests[] = {
#define X(fn) cmocka_unit_test(fn),
      SHARD_DIFF_TESTS(X)
#undef X
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
