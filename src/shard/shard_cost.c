/* Costs of op-level sharding strategies (shard layer; the model is in shard.h): the mesh over a cluster, the
 * enumeration of every legal strategy of an op with its compute (the cost model's compute_op on the op rebuilt
 * at its shard's shape), its collectives (comm_time_s on the axis' comm_group) and its memory, and the cost of
 * resharding a tensor between two specs. All times are per training iteration, forward and backward. */
#include <math.h>
#include <string.h>

#include "shard/shard.h"

ap_status shard_mesh_init(ap_ctx *ctx, const hw_cluster *c, int n_axes, const int64_t *shape, shard_mesh *m) {
  memset(m, 0, sizeof *m);
  if (n_axes < 1 || n_axes > SHARD_MAX_AXES) return ctx_fail(ctx, AP_INVALID, "a mesh has 1 or 2 axes, not %d", n_axes);
  m->n_axes = n_axes;
  m->n_devices = 1;
  for (int a = 0; a < n_axes; a++) {
    if (shape[a] < 1) return ctx_fail(ctx, AP_INVALID, "mesh axis %d has size %lld", a, (long long)shape[a]);
    m->shape[a] = shape[a];
    m->n_devices *= shape[a];
  }
  if (m->n_devices > c->n_devices)
    return ctx_fail(ctx, AP_INVALID, "a mesh of %lld devices does not fit %s (%lld devices)", (long long)m->n_devices,
                    c->name, (long long)c->n_devices);
  /* The last axis is the inner one: consecutive ranks (inside a node first); the one before strides over it. */
  comm_axis ax[SHARD_MAX_AXES];
  int64_t stride = 1;
  for (int a = n_axes - 1; a >= 0; a--) {
    ax[a] = (comm_axis){stride, shape[a], 0};
    stride *= shape[a];
  }
  ap_status st = comm_groups_for_axes(ctx, c, ax, n_axes, m->group);
  if (st) return st;
  for (int a = 0; a < n_axes; a++) {
    const comm_group *g = &m->group[a];
    m->level[a] = g->n_levels > 0 ? g->levels[g->n_levels - 1].hw_level : 0;
    m->level_name[a] = g->n_levels > 0 ? g->levels[g->n_levels - 1].name : (c->n_groups > 0 ? c->groups[0].levels[0].name : "");
  }
  return AP_OK;
}

int shard_max_strategies(int n_axes) {
  return n_axes == 1 ? SHARD_MAX_LOOPS + 1 : (SHARD_MAX_LOOPS + 1) * (SHARD_MAX_LOOPS + 1);
}

/* The split factor of each loop under a strategy. */
static void loop_factors(const shard_mesh *m, const int8_t *axis_loop, int64_t *f) {
  for (int l = 0; l < SHARD_MAX_LOOPS; l++) f[l] = 1;
  for (int a = 0; a < m->n_axes; a++)
    if (axis_loop[a] >= 0) f[axis_loop[a]] *= m->shape[a];
}

static uint8_t loop_mask(const shard_mesh *m, const int8_t *axis_loop, int loop) {
  uint8_t k = 0;
  for (int a = 0; a < m->n_axes; a++)
    if (loop >= 0 && axis_loop[a] == loop) k = (uint8_t)(k | (1u << a));
  return k;
}

/* Spec of an operand from its dim → loop map; false when a split does not divide a dim. */
static bool operand_spec(const shard_mesh *m, const int8_t *axis_loop, const int64_t *f, const int8_t *map,
                         const int64_t *dims, int n_dims, shard_spec *sp) {
  sp->n_dims = (int8_t)n_dims;
  for (int i = 0; i < n_dims; i++) {
    int l = map[i];
    sp->dim[i] = loop_mask(m, axis_loop, l);
    if (l >= 0 && f[l] > 1 && dims[i] % f[l] != 0) return false;
  }
  return true;
}

static double spec_factor(const shard_mesh *m, const shard_spec *sp) {
  double f = 1;
  for (int i = 0; i < sp->n_dims; i++)
    for (int a = 0; a < m->n_axes; a++)
      if (sp->dim[i] & (1u << a)) f *= (double)m->shape[a];
  return f;
}

/* A copy of tensor t at literal dims, split as spec says (ceil, for saved tensors whose split is inferred). */
static graph_tensor shard_tensor(const shard_mesh *m, const graph_tensor *t, const shard_spec *sp, double b, double s) {
  graph_tensor r = *t;
  for (int i = 0; i < t->n_dims; i++) {
    int64_t d = (int64_t)graph_dim(t->dims[i], b, s), f = 1;
    if (sp && i < sp->n_dims)
      for (int a = 0; a < m->n_axes; a++)
        if (sp->dim[i] & (1u << a)) f *= m->shape[a];
    r.dims[i] = d < 1 ? 1 : (d + f - 1) / f;
  }
  return r;
}

/* Seconds of one collective on mesh axis `axis`: on a CPU core profiled with the executor's kernels, the MPI
 * collective as the profile measured it in isolation (exec_cpu.c: its points by size; not the in-step excess,
 * exec_graph_cpu.c says why), else the cluster's collective model. */
static double coll_time_s(const shard_env *env, comm_coll coll, int axis, double bytes) {
  const shard_mesh *m = env->mesh;
  const exec_cpu_profile *x = env->cm ? env->cm->exec : NULL;
  if (x && x->present) {
    static const exec_coll map[] = {[COMM_ALLREDUCE] = EXEC_COLL_ALLREDUCE, [COMM_REDUCE_SCATTER] = EXEC_COLL_REDUCE_SCATTER,
                                    [COMM_ALLGATHER] = EXEC_COLL_ALLGATHER, [COMM_ALLTOALL] = EXEC_COLL_ALLTOALL,
                                    [COMM_SENDRECV] = EXEC_COLL_SENDRECV, [COMM_BROADCAST] = EXEC_COLL_ALLGATHER};
    if ((int)coll >= 0 && coll < COMM_COLL_COUNT) return exec_cpu_coll_s(x, map[coll], m->shape[axis], bytes, false);
  }
  return comm_time_s(&m->group[axis], coll, COMM_AUTO, bytes, NULL);
}

static void add_comm(const shard_env *env, shard_strategy *st, comm_coll coll, int axis, double bytes) {
  const shard_mesh *m = env->mesh;
  if (bytes <= 0 || m->shape[axis] <= 1) return;
  double t = coll_time_s(env, coll, axis, bytes);
  st->comm_s += t;
  for (int i = 0; i < st->n_comm; i++)
    if (st->comm[i].coll == coll && st->comm[i].axis == axis) {
      st->comm[i].bytes += bytes;
      st->comm[i].time_s += t;
      return;
    }
  if (st->n_comm < SHARD_MAX_COMM) st->comm[st->n_comm++] = (shard_comm){coll, axis, bytes, t};
}

/* The weight gradients' all-reduce as PyTorch's DistributedDataParallel runs it: gradients gathered into
 * buckets of bucket_cap_mb = 25 MiB (torch/nn/parallel/distributed.py: "default case (bucket cap is 25 MiB)",
 * bucket_bytes_cap = int(bucket_cap_mb * 1024 * 1024)), one all-reduce per bucket, so an op whose gradient is
 * smaller than a bucket pays its share of a bucket's all-reduce (bytes / cap of it, the latency amortised over
 * the bucket) and a larger one its own all-reduce. The simulator (search/graph/graph_sim.c) launches the
 * buckets as they fill during the backward pass, overlapped with it. */
static void add_bucketed(const shard_env *env, shard_strategy *st, comm_coll coll, int axis, double bytes) {
  const shard_mesh *m = env->mesh;
  if (bytes <= 0 || m->shape[axis] <= 1) return;
  double t = bytes >= SHARD_BUCKET_BYTES
                 ? coll_time_s(env, coll, axis, bytes)
                 : bytes / SHARD_BUCKET_BYTES * coll_time_s(env, coll, axis, SHARD_BUCKET_BYTES);
  st->comm_s += t;
  for (int i = 0; i < st->n_comm; i++)
    if (st->comm[i].coll == coll && st->comm[i].axis == axis) {
      st->comm[i].bytes += bytes;
      st->comm[i].time_s += t;
      return;
    }
  if (st->n_comm < SHARD_MAX_COMM) st->comm[st->n_comm++] = (shard_comm){coll, axis, bytes, t};
}

/* A pending sum over the axes of mask on a buffer of `bytes`: an all-reduce on one axis; over both, the
 * hierarchical form (reduce-scatter inside, all-reduce of the scattered part across, all-gather inside), as
 * NCCL's and Horovod's hierarchical all-reduce (Sergeev & Del Balso 2018 §4; Jia et al. 2018, 2D all-reduce). */
static void partial_sum(const shard_env *env, shard_strategy *st, unsigned mask, double bytes) {
  const shard_mesh *m = env->mesh;
  if (mask == 1u || mask == 2u) {
    add_comm(env, st, COMM_ALLREDUCE, mask == 1u ? 0 : 1, bytes);
  } else if (mask == 3u) {
    add_comm(env, st, COMM_REDUCE_SCATTER, 1, bytes);
    add_comm(env, st, COMM_ALLREDUCE, 0, bytes / (double)m->shape[1]);
    add_comm(env, st, COMM_ALLGATHER, 1, bytes);
  }
}

static bool is_integer(dtype dt) { return dt == DT_INT64 || dt == DT_INT32 || dt == DT_INT16 || dt == DT_U8; }

/* The cost of one axis assignment; false when it is not legal. */
static bool cost_one(const shard_env *env, const graph_block *blk, const graph_op *op, const shard_loops *L,
                     const int8_t *axis_loop, shard_strategy *st) {
  const shard_mesh *m = env->mesh;
  memset(st, 0, sizeof *st);
  memcpy(st->axis_loop, axis_loop, sizeof st->axis_loop);
  int64_t f[SHARD_MAX_LOOPS];
  loop_factors(m, axis_loop, f);
  for (int a = 0; a < m->n_axes; a++) {
    int l = axis_loop[a];
    if (l < 0) continue;
    if (!L->splittable[l] || L->size[l] % f[l] != 0) return false;
  }
  double b = env->b, s = env->s;
  int64_t dims[GRAPH_MAX_DIMS];
  /* The mini block: the op's tensors at their shard shapes. */
  graph_tensor tens[OP_MAX_IN + OP_MAX_OUT + OP_MAX_SAVED + 1];
  int nt = 0;
  graph_op sop = *op;
  st->n_out = op->n_out > 0 ? op->n_out : 1;
  for (int k = 0; k < st->n_out; k++) {
    const graph_tensor *t = &blk->tensors[k == 0 ? op->out : op->outs[k]];
    for (int i = 0; i < t->n_dims; i++) dims[i] = (int64_t)graph_dim(t->dims[i], b, s);
    if (!operand_spec(m, axis_loop, f, L->out_map[k], dims, t->n_dims, &st->out[k])) return false;
  }
  for (int i = 0; i < op->n_in; i++) {
    const graph_tensor *t = &blk->tensors[op->in[i]];
    for (int d = 0; d < t->n_dims; d++) dims[d] = (int64_t)graph_dim(t->dims[d], b, s);
    if (!operand_spec(m, axis_loop, f, L->in_map[i], dims, t->n_dims, &st->in[i])) return false;
  }
  if (L->w_dims > 0 && !operand_spec(m, axis_loop, f, L->w_map, L->w_shape, L->w_dims, &st->weight)) return false;
  /* Rebuild the op on the shard's tensors (indices into tens). */
  int map_t[OP_MAX_IN + OP_MAX_OUT];
  for (int i = 0; i < op->n_in; i++) {
    tens[nt] = shard_tensor(m, &blk->tensors[op->in[i]], &st->in[i], b, s);
    map_t[i] = op->in[i];
    sop.in[i] = nt++;
  }
  for (int k = 0; k < st->n_out; k++) {
    int t = k == 0 ? op->out : op->outs[k];
    tens[nt] = shard_tensor(m, &blk->tensors[t], &st->out[k], b, s);
    if (k == 0) sop.out = nt;
    sop.outs[k] = nt++;
  }
  /* Saved tensors and masks: the shard of whichever operand they are, else the output's split. */
  double act = 0;
  for (int i = 0; i < op->n_saved; i++) {
    int t = op->saved[i];
    const shard_spec *sp = &st->out[0];
    for (int j = 0; j < op->n_in; j++)
      if (map_t[j] == t) sp = &st->in[j];
    graph_tensor gt = shard_tensor(m, &blk->tensors[t], sp, b, s);
    act += graph_tensor_bytes(&gt, b, s);
  }
  if (op->mask_of >= 0) act += graph_tensor_numel(&tens[sop.out], b, s);
  st->act_mem_bytes = act;
  sop.n_saved = 0;
  sop.mask_of = -1;
  graph_block mini = *blk;
  mini.tensors = tens;
  mini.n_tensors = nt;
  if (L->k_loop >= 0 && f[L->k_loop] > 1) {
    if (op->kind == OP_EMBEDDING) sop.extra_params /= f[L->k_loop];
    else sop.weight_k /= f[L->k_loop];
  }
  if (L->n_loop >= 0 && f[L->n_loop] > 1 && (op->kind == OP_MATMUL || op->kind == OP_ROUTER || op->kind == OP_CONV2D))
    sop.weight_n /= f[L->n_loop];
  if (L->n_loop >= 0 && op->kind == OP_EMBEDDING && f[L->n_loop] > 1) sop.extra_params /= f[L->n_loop];
  if (L->cin_loop >= 0 && f[L->cin_loop] > 1) sop.weight_k /= f[L->cin_loop];
  if (L->head_loop >= 0 && f[L->head_loop] > 1) {
    sop.heads /= f[L->head_loop];
    if (sop.kv_heads > 0) sop.kv_heads /= f[L->head_loop];
  }
  if (op->kind == OP_NORM || op->kind == OP_ELEMENTWISE) {
    if (L->w_dims == 1 && L->w_map[0] >= 0) sop.extra_params /= f[L->w_map[0]];
  }
  if (op->kind == OP_EMBEDDING && L->w_dims == 2) {
    /* the table [rows, H]: split by rows (k_loop) and by H (the output's last loop) */
    int hl = L->w_map[1];
    sop.extra_params = op->extra_params / (L->k_loop >= 0 ? f[L->k_loop] : 1) / (hl >= 0 ? f[hl] : 1);
  }
  compute_shard csh = {.tp = 1, .cp = 1, .ep = 1, .etp = 1, .gemm_dtype = env->gemm_dtype};
  /* On a CPU core profiled with the executor's kernels, the op as the graph executor runs it (exec_graph_cpu.c);
   * else the device model. */
  compute_op_time ct;
  if (!compute_op_exec_graph(env->cm, &mini, &sop, b, s, &ct)) ct = compute_op(env->cm, &mini, &sop, b, s, &csh);
  st->compute_s = env->n_micro * (ct.fwd_s + ct.bwd_s);
  st->compute_fwd_s = env->n_micro * ct.fwd_s;
  double params_shard = (double)graph_op_params(&sop);
  st->weight_mem_bytes = params_shard * env->state_bytes_per_param;

  /* Collectives. Forward: a split contraction leaves a partial sum on every output: all-reduce it. */
  double c_start = st->comm_s;
  double out_bytes = 0;
  for (int k = 0; k < st->n_out; k++) out_bytes += graph_tensor_bytes(&tens[sop.outs[k]], b, s);
  for (int a = 0; a < m->n_axes; a++) {
    int l = axis_loop[a];
    if (l < 0 || !L->reduce[l]) continue;
    st->partial = (uint8_t)(st->partial | (1u << a));
    if (op->kind == OP_LOSS && l == L->n_loops - 1) {
      /* vocab-parallel cross-entropy: the max and the sum of exponentials per row are all-reduced
       * (Megatron-LM, Shoeybi et al. 2019 §3, VocabParallelCrossEntropy) */
      double rows = graph_tensor_numel(&tens[sop.in[0]], b, s) / (double)(L->size[l] / f[l]);
      add_comm(env, st, COMM_ALLREDUCE, a, env->n_micro * rows * 4.0 * 2.0);
    }
  }
  partial_sum(env, st, st->partial, env->n_micro * out_bytes);
  /* BatchNormalization in training mode normalises by the statistics of the whole batch: with N split they are
   * all-reduced, the sum and the sum of squares per channel forward and the two per-channel sums of its
   * gradient backward (PyTorch's SyncBatchNorm, torch/nn/modules/_functions.py: all_reduce of the mean/invstd
   * counts forward, of sum_dy and sum_dy_xmu backward), in fp32. */
  double bn_stat_bytes = 0;
  if (op->kind == OP_NORM && op->op_type && strcmp(op->op_type, "BatchNormalization") == 0 && L->n_loops >= 2)
    bn_stat_bytes = env->n_micro * 2.0 * (double)L->size[1] * 4.0;
  for (int a = 0; a < m->n_axes && bn_stat_bytes > 0; a++)
    if (axis_loop[a] == 0) add_comm(env, st, COMM_ALLREDUCE, a, bn_stat_bytes);
  st->fwd_comm_s = st->comm_s - c_start;
  c_start = st->comm_s;
  /* Backward: each input's gradient is a partial sum over the axes on loops it lacks (a packed projection's
   * parts after the first add theirs into the first's, which reduces the sum once: graph.h packed_with). */
  for (int i = 0; i < op->n_in && op->packed_with == 0; i++) {
    const graph_tensor *t = &blk->tensors[op->in[i]];
    if (is_integer(t->dt)) continue;
    unsigned mask = 0;
    for (int a = 0; a < m->n_axes; a++) {
      int l = axis_loop[a];
      if (l < 0) continue;
      bool has = false;
      for (int d = 0; d < t->n_dims; d++) has = has || L->in_map[i][d] == l;
      if (!has) mask |= 1u << a;
    }
    partial_sum(env, st, mask, env->n_micro * graph_tensor_bytes(&tens[sop.in[i]], b, s));
  }
  for (int a = 0; a < m->n_axes && bn_stat_bytes > 0; a++)
    if (axis_loop[a] == 0) add_comm(env, st, COMM_ALLREDUCE, a, bn_stat_bytes);
  st->bwd_comm_s = st->comm_s - c_start;
  c_start = st->comm_s;
  /* The weight gradient: a partial sum over the axes on loops the weight lacks (data parallelism's
   * all-reduce), once per iteration after the micro-batches have accumulated. */
  if (params_shard > 0) {
    double gbytes = params_shard * (double)dtype_bytes(blk->tensors[op->out].dt == DT_FP32 ? DT_FP32 : DT_BF16);
    unsigned mask = 0;
    for (int a = 0; a < m->n_axes; a++) {
      int l = axis_loop[a];
      if (l < 0) continue;
      bool has = false;
      for (int d = 0; d < L->w_dims; d++) has = has || L->w_map[d] == l;
      if (!has) mask |= 1u << a;
    }
    if (mask == 1u || mask == 2u) {
      add_bucketed(env, st, COMM_ALLREDUCE, mask == 1u ? 0 : 1, gbytes);
    } else if (mask == 3u) {
      add_bucketed(env, st, COMM_REDUCE_SCATTER, 1, gbytes);
      add_bucketed(env, st, COMM_ALLREDUCE, 0, gbytes / (double)m->shape[1]);
      add_bucketed(env, st, COMM_ALLGATHER, 1, gbytes);
    }
    st->wgrad_bytes = mask ? gbytes : 0;
    st->wgrad_mask = (uint8_t)mask;
  }
  st->wgrad_comm_s = st->comm_s - c_start;
  return true;
}

int shard_enumerate(const shard_env *env, const graph_block *blk, const graph_op *op, shard_strategy *out,
                    int max_out) {
  shard_loops L;
  shard_op_loops(blk, op, env->b, env->s, &L);
  const shard_mesh *m = env->mesh;
  int n = 0;
  int n1 = m->n_axes == 2 ? L.n_loops + 1 : 1;
  for (int l0 = -1; l0 < L.n_loops; l0++)
    for (int j = 0; j < n1; j++) {
      int8_t al[SHARD_MAX_AXES] = {(int8_t)l0, (int8_t)(m->n_axes == 2 ? j - 1 : -1)};
      if (n >= max_out) return n;
      if (cost_one(env, blk, op, &L, al, &out[n])) n++;
    }
  return n;
}

double shard_reshard_s(const shard_env *env, double bytes, const shard_spec *from, const shard_spec *to,
                       shard_comm *comm, int *n_comm) {
  return shard_reshard_fb(env, bytes, from, to, comm, n_comm, NULL, NULL);
}

double shard_reshard_fb(const shard_env *env, double bytes, const shard_spec *from, const shard_spec *to,
                        shard_comm *comm, int *n_comm, double *fwd_s, double *bwd_s) {
  if (fwd_s) *fwd_s = 0;
  if (bwd_s) *bwd_s = 0;
  const shard_mesh *m = env->mesh;
  shard_spec cur = *from;
  double t = 0;
  int nc = 0;
  if (n_comm) *n_comm = 0;
  if (from->n_dims != to->n_dims) return 0;
  for (int a = 0; a < m->n_axes; a++) {
    uint8_t bit = (uint8_t)(1u << a);
    int ds = -1, dd = -1;
    for (int i = 0; i < cur.n_dims; i++) {
      if (cur.dim[i] & bit) ds = i;
      if (to->dim[i] & bit) dd = i;
    }
    if (ds == dd || m->shape[a] <= 1) continue;
    double shard_bytes = bytes / spec_factor(m, &cur);
    comm_coll fwd, bwd;
    double fb, bb;
    if (dd < 0) { /* all-gather forward, reduce-scatter of the gradient backward */
      fwd = COMM_ALLGATHER, bwd = COMM_REDUCE_SCATTER;
      fb = bb = shard_bytes * (double)m->shape[a];
      cur.dim[ds] = (uint8_t)(cur.dim[ds] & ~bit);
    } else if (ds < 0) { /* a local slice forward; the gradient is all-gathered backward */
      fwd = COMM_COLL_COUNT, bwd = COMM_ALLGATHER;
      fb = 0, bb = shard_bytes;
      cur.dim[dd] = (uint8_t)(cur.dim[dd] | bit);
    } else { /* moved from one dim to another: all-to-all both ways */
      fwd = bwd = COMM_ALLTOALL;
      fb = bb = shard_bytes;
      cur.dim[ds] = (uint8_t)(cur.dim[ds] & ~bit);
      cur.dim[dd] = (uint8_t)(cur.dim[dd] | bit);
    }
    double tf = fwd == COMM_COLL_COUNT ? 0 : env->n_micro * coll_time_s(env, fwd, a, fb);
    double tb = env->n_micro * coll_time_s(env, bwd, a, bb);
    t += tf + tb;
    if (fwd_s) *fwd_s += tf;
    if (bwd_s) *bwd_s += tb;
    if (comm && fwd != COMM_COLL_COUNT && nc < SHARD_MAX_COMM) comm[nc++] = (shard_comm){fwd, a, env->n_micro * fb, tf};
    if (comm && nc < SHARD_MAX_COMM) comm[nc++] = (shard_comm){bwd, a, env->n_micro * bb, tb};
  }
  if (n_comm) *n_comm = nc;
  return t;
}
