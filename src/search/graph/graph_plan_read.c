/* Reading an op-level plan back (search layer; graph_plan_read.h). The document is checked in the order it is
 * written: header, mesh, stages, the time and memory figures (types only: they are recomputed), then the ops
 * and last the search record (whose counts a plan of another graph would break before its op names say so).
 * A plan of one stage: the problem is rebuilt as the planner built it for the plan's mesh and micro-batch count
 * (graph_plan.c gplan_problem, with the count the file states instead of the fewest that fit). A plan of
 * several: each stage's problems as the inter-op pass built them (graph_plan_read_stages.c). Each op's specs are
 * matched against its strategies on its stage's mesh: an op's output spec(s), its weight's spec in stored order
 * (report/graph_plan_specs.c writes the same), its pending-sum axes and, when given, its inputs' specs. Ops
 * that the (stage's) problem ties into one group (followers and repeated layers) must match a common strategy. */
#include <math.h>
#include <string.h>

#include "search/graph/graph_plan_read.h"

/* The keys of the document (report/graph_plan_report.c writes them). The stages' per-stage figures and "mfu"
 * are recomputed (type-checked only); "search.inter_op" is the record of the pass that made the plan, kept. */
static const char *const TOP_KEYS[] = {"format", "model", "model_path", "cluster", "global_batch_size", "seq", "micro_batches",
                                       "micro_batch_size", "mesh", "stages", "search", "time", "mfu", "memory",
                                       "explain", "ops"};
static const char *const MESH_KEYS[] = {"shape", "levels"};
static const char *const STAGE_KEYS[] = {"first_op", "last_op", "submesh", "mesh", "levels", "time_per_micro_batch_s",
                                         "send_recv_s", "in_flight"};
static const char *const SEARCH_KEYS[] = {"strategy", "status", "lower_bound_s", "nodes", "followers", "groups", "annotate", "tries",
                                          "inter_op"};
static const char *const MFU_KEYS[] = {"value", "flop_per_iteration", "convention"};
static const char *const INTER_OP_KEYS[] = {"layers", "stage_solves", "memo_hits", "solve_s"};
static const char *const TRY_KEYS[] = {"strategy", "mesh", "micro_batches", "status", "iteration_s", "solve_s",
                                       "evaluations"};
static const char *const TIME_KEYS[] = {"iteration_s", "compute_s", "op_comm_s", "reshard_s"};
static const char *const MEMORY_KEYS[] = {"peak_bytes", "limit_bytes"};
static const char *const OP_KEYS[] = {"name", "op_type", "output_spec", "weight_spec", "weight_specs", "input_specs",
                                      "partial", "comm"};
static const char *const COMM_KEYS[] = {"kind", "axis", "bytes"};
static const char *const COMM_KINDS[] = {"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send-recv", "broadcast"};

/* A child object of obj at key (required or not), its keys checked; *out NULL when absent. */
static ap_status child_object(const jx_src *s, json_t *obj, const char *key, bool required, const char *const *keys,
                              size_t n_keys, char *where, size_t where_n, json_t **out) {
  *out = json_object_get(obj, key);
  if (!*out) return required ? jx_fail(s, key, "missing (an autopar-plan/2 plan has it)") : AP_OK;
  if (!json_is_object(*out)) return jx_fail(s, key, "expected an object");
  snprintf(where, where_n, "%s%s%s", s->where, *s->where ? "." : "", key);
  jx_src in = {s->ctx, s->file, where};
  return jx_check_keys(&in, *out, keys, n_keys, 0);
}

static ap_status solve_status_of(const jx_src *s, json_t *obj, const char *key, solve_status *out) {
  const char *v = NULL;
  ap_status st = jx_str(s, obj, key, true, &v, NULL);
  if (st) return st;
  if (strcmp(v, "optimal") == 0) *out = SOLVE_OPTIMAL;
  else if (strcmp(v, "feasible") == 0) *out = SOLVE_FEASIBLE;
  else if (strcmp(v, "infeasible") == 0) *out = SOLVE_INFEASIBLE;
  else return jx_fail(s, key, "expected optimal, feasible or infeasible, got \"%s\"", v);
  return AP_OK;
}

/* A number >= 0 or null (NAN). */
static ap_status num_or_null(const jx_src *s, json_t *obj, const char *key, double *out) {
  json_t *v = json_object_get(obj, key);
  *out = NAN;
  if (!v) return jx_fail(s, key, "missing");
  if (json_is_null(v)) return AP_OK;
  return jx_f64(s, obj, key, true, 0, 1e30, out, NULL);
}

/* A strategy name of the registry (a sharding strategy, or inter-op for the stage pass), as its static name. */
static ap_status strategy_of(const jx_src *s, json_t *obj, const char *key, const char **out) {
  const char *v = NULL;
  ap_status st = jx_str(s, obj, key, true, &v, NULL);
  if (st) return st;
  const solve_strategy *ss = solve_strategy_find(v);
  if (!ss)
    return jx_fail(s, key, "\"%s\" is not a strategy (ilp, elim-dp, greedy, mcmc, mcts, rl, recursive, inter-op)", v);
  *out = ss->name;
  return AP_OK;
}

/* An array of 1 or 2 integers in [1, max] (a mesh or a submesh shape). */
static ap_status int_list(const jx_src *s, json_t *obj, const char *key, int min_n, int max_n, int64_t *out, int *n) {
  json_t *a = json_object_get(obj, key);
  if (!a) return jx_fail(s, key, "missing");
  size_t len = json_is_array(a) ? json_array_size(a) : 0;
  if (!json_is_array(a) || (int)len < min_n || (int)len > max_n)
    return jx_fail(s, key, "expected an array of %d to %d positive integers", min_n, max_n);
  for (size_t i = 0; i < len; i++) {
    json_t *e = json_array_get(a, i);
    if (!json_is_integer(e) || json_integer_value(e) < 1 || json_integer_value(e) > ((int64_t)1 << 22))
      return jx_fail(s, key, "[%zu]: expected a positive integer", i);
    out[i] = json_integer_value(e);
  }
  *n = (int)len;
  return AP_OK;
}

/* Finds an op by name: the first node of that name not yet listed (entry[i] < 0; ops of different blocks may
 * share a name, and the file lists them in graph order), else the first listed one, else -1. */
static int node_named(const graph_problem *gp, const char *name, const int32_t *entry) {
  int listed = -1;
  for (int i = 0; i < gp->n_nodes; i++) {
    const gp_node *nd = &gp->nodes[i];
    const char *n = gp->g->blocks[nd->block].ops[nd->op].name;
    if (!n || strcmp(n, name) != 0) continue;
    if (entry[i] < 0) return i;
    if (listed < 0) listed = i;
  }
  return listed;
}

static const graph_op *op_of(const graph_problem *gp, int i) {
  return &gp->g->blocks[gp->nodes[i].block].ops[gp->nodes[i].op];
}

/* A spec: an array of rank strings R, S0, S1, S01 on a mesh of n_axes axes. */
static ap_status read_spec(const jx_src *s, const char *key, json_t *a, int rank, int n_axes, shard_spec *out) {
  if (!json_is_array(a)) return jx_fail(s, key, "expected an array of R, S0, S1 or S01, one per dim");
  if ((int)json_array_size(a) != rank)
    return jx_fail(s, key, "expected %d entries (one per dim), got %zu", rank, json_array_size(a));
  memset(out, 0, sizeof *out);
  out->n_dims = (int8_t)rank;
  for (int d = 0; d < rank; d++) {
    json_t *e = json_array_get(a, (size_t)d);
    const char *v = json_is_string(e) ? json_string_value(e) : "";
    shard_spec one;
    if (!shard_spec_parse(v, 1, &one)) return jx_fail(s, key, "[%d]: expected R, S0, S1 or S01", d);
    if (one.dim[0] >= (1u << n_axes)) return jx_fail(s, key, "[%d]: \"%s\" names mesh axis 1 of a 1-axis mesh", d, v);
    out->dim[d] = one.dim[0];
  }
  return AP_OK;
}

/* What one op entry states, to match against strategies. */
typedef struct {
  int n_out;
  shard_spec out[OP_MAX_OUT];
  bool has_weight, has_weights, has_inputs;
  shard_spec weight;
  int n_named;
  shard_spec named[OP_MAX_WEIGHTS]; /* weight_specs, in the op's weight order */
  shard_spec in[OP_MAX_IN];
  unsigned partial;
} op_stated;

static ap_status read_op_specs(const jx_src *s, json_t *e, const graph_problem *gp, int node, op_stated *o) {
  const graph_op *op = op_of(gp, node);
  const graph_block *blk = &gp->g->blocks[gp->nodes[node].block];
  int n_axes = gp->env.mesh->n_axes;
  ap_status st;
  memset(o, 0, sizeof *o);
  /* output_spec: one spec, or a list of one per output for an op with several. */
  int n_out = op->n_out > 0 ? op->n_out : 1;
  json_t *os = json_object_get(e, "output_spec");
  if (!os) return jx_fail(s, "output_spec", "missing");
  o->n_out = n_out;
  if (n_out == 1) {
    if ((st = read_spec(s, "output_spec", os, blk->tensors[op->out].n_dims, n_axes, &o->out[0]))) return st;
  } else {
    if (!json_is_array(os) || (int)json_array_size(os) != n_out)
      return jx_fail(s, "output_spec", "expected a list of %d specs, one per output", n_out);
    for (int k = 0; k < n_out; k++) {
      char key[32];
      snprintf(key, sizeof key, "output_spec[%d]", k);
      if ((st = read_spec(s, key, json_array_get(os, (size_t)k), blk->tensors[op->outs[k]].n_dims, n_axes, &o->out[k])))
        return st;
    }
  }
  json_t *ws = json_object_get(e, "weight_spec");
  if (ws) {
    int rank = op->n_weights > 0 ? op->weights[0].n_dims : -1;
    if (rank < 0) { /* the logical weight: its rank is that of any strategy's */
      rank = gp->nodes[node].n_s > 0 ? gp->nodes[node].s[0].weight.n_dims : 0;
      if (rank == 0 || graph_op_params(op) <= 0) return jx_fail(s, "weight_spec", "op %s has no weight", op->name);
    }
    if ((st = read_spec(s, "weight_spec", ws, rank, n_axes, &o->weight))) return st;
    o->has_weight = true;
  }
  json_t *named = json_object_get(e, "weight_specs");
  if (named) {
    if (!json_is_object(named)) return jx_fail(s, "weight_specs", "expected an object keyed by initializer name");
    if (op->n_weights < 1)
      return jx_fail(s, "weight_specs", "op %s has no stored weights (give weight_spec for its logical weight)",
                     op->name);
    const char *key;
    json_t *v;
    json_object_foreach(named, key, v) {
      int k = 0;
      while (k < op->n_weights && strcmp(op->weights[k].name ? op->weights[k].name : "", key) != 0) k++;
      char where[96];
      snprintf(where, sizeof where, "weight_specs.%.64s", key);
      if (k == op->n_weights) return jx_fail(s, where, "op %s reads no initializer of that name", op->name);
      if ((st = read_spec(s, where, v, op->weights[k].n_dims, n_axes, &o->named[k]))) return st;
    }
    if ((int)json_object_size(named) != op->n_weights)
      return jx_fail(s, "weight_specs", "expected one entry for each of the op's %d weights, got %zu", op->n_weights,
                     json_object_size(named));
    o->has_weights = true;
  }
  json_t *ins = json_object_get(e, "input_specs");
  if (ins) {
    if (!json_is_array(ins) || (int)json_array_size(ins) != op->n_in)
      return jx_fail(s, "input_specs", "expected %d specs, one per activation input", op->n_in);
    for (int i = 0; i < op->n_in; i++) {
      char key[32];
      snprintf(key, sizeof key, "input_specs[%d]", i);
      if ((st = read_spec(s, key, json_array_get(ins, (size_t)i), blk->tensors[op->in[i]].n_dims, n_axes, &o->in[i])))
        return st;
    }
    o->has_inputs = true;
  }
  json_t *pa = json_object_get(e, "partial");
  if (!pa) return jx_fail(s, "partial", "missing");
  if (!json_is_array(pa)) return jx_fail(s, "partial", "expected an array of mesh axes");
  for (size_t i = 0; i < json_array_size(pa); i++) {
    json_t *x = json_array_get(pa, i);
    if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= n_axes)
      return jx_fail(s, "partial", "[%zu]: expected a mesh axis, 0 to %d", i, n_axes - 1);
    unsigned bit = 1u << json_integer_value(x);
    if (o->partial & bit) return jx_fail(s, "partial", "axis %lld appears twice", (long long)json_integer_value(x));
    o->partial |= bit;
  }
  json_t *comm = json_object_get(e, "comm");
  if (comm) { /* recomputed from the strategy; checked for form only */
    if (!json_is_array(comm)) return jx_fail(s, "comm", "expected an array of collectives");
    for (size_t i = 0; i < json_array_size(comm); i++) {
      char where[160];
      snprintf(where, sizeof where, "%s.comm[%zu]", s->where, i);
      jx_src c = {s->ctx, s->file, where};
      json_t *x = json_array_get(comm, i);
      if (!json_is_object(x)) return jx_fail(&c, "kind", "expected an object {kind, axis, bytes}");
      if ((st = jx_check_keys(&c, x, COMM_KEYS, AP_COUNT(COMM_KEYS), 0))) return st;
      const char *kind = NULL;
      int64_t axis;
      double bytes;
      if ((st = jx_str(&c, x, "kind", true, &kind, NULL))) return st;
      if (names_find(COMM_KINDS, AP_COUNT(COMM_KINDS), kind) < 0)
        return jx_fail(&c, "kind", "expected all-reduce, all-gather, reduce-scatter, all-to-all or send-recv");
      if ((st = jx_i64(&c, x, "axis", true, 0, n_axes - 1, &axis, NULL))) return st;
      if ((st = jx_f64(&c, x, "bytes", true, 0, 1e30, &bytes, NULL))) return st;
    }
  }
  return AP_OK;
}

/* True when strategy t gives what o states. */
static bool matches(const graph_op *op, const shard_strategy *t, const op_stated *o) {
  if (t->partial != o->partial) return false;
  for (int k = 0; k < o->n_out; k++)
    if (!shard_spec_equal(&t->out[k], &o->out[k])) return false;
  if (o->has_weight) {
    shard_spec w = t->weight;
    if (op->n_weights > 0) shard_stored_weight_spec(t, &op->weights[0], &w);
    if (!shard_spec_equal(&w, &o->weight)) return false;
  }
  for (int k = 0; o->has_weights && k < op->n_weights; k++) {
    shard_spec w;
    shard_stored_weight_spec(t, &op->weights[k], &w);
    if (!shard_spec_equal(&w, &o->named[k])) return false;
  }
  for (int i = 0; o->has_inputs && i < op->n_in; i++)
    if (!shard_spec_equal(&t->in[i], &o->in[i])) return false;
  return true;
}

/* The header and the figures the reader does not recompute from: the batch, the mesh and the stages. */
typedef struct {
  int64_t gbs, n_micro, shape[2];
  int n_axes;
  double seq, limit_bytes;
  gread_stages stages; /* a plan of several stages (stages.n >= 2); stages.n = 1 otherwise */
} header;

static ap_status read_header(const jx_src *top, json_t *root, const graph *g, const hw_cluster *c, const char *cluster,
                             header *h) {
  ap_status st;
  if ((st = jx_check_keys(top, root, TOP_KEYS, AP_COUNT(TOP_KEYS), 0))) return st;
  const char *format = NULL, *name = NULL;
  if ((st = jx_str(top, root, "format", true, &format, NULL))) return st;
  if (strcmp(format, GPLAN_FORMAT) != 0) return jx_fail(top, "format", "expected \"%s\", got \"%s\"", GPLAN_FORMAT, format);
  if ((st = jx_str(top, root, "model", false, &name, NULL))) return st;
  if ((st = jx_str(top, root, "model_path", false, &name, NULL))) return st;
  if ((st = jx_str(top, root, "cluster", false, &name, NULL))) return st;
  int64_t mbs = 0, seq = 0;
  if ((st = jx_i64(top, root, "global_batch_size", true, 1, (int64_t)1 << 40, &h->gbs, NULL))) return st;
  if ((st = jx_i64(top, root, "micro_batches", true, 1, h->gbs, &h->n_micro, NULL))) return st;
  if (h->gbs % h->n_micro) return jx_fail(top, "micro_batches", "%lld does not divide the global batch %lld",
                                          (long long)h->n_micro, (long long)h->gbs);
  if ((st = jx_i64(top, root, "micro_batch_size", false, 1, h->gbs, &mbs, NULL))) return st;
  if (mbs && mbs != h->gbs / h->n_micro)
    return jx_fail(top, "micro_batch_size", "expected global_batch_size / micro_batches = %lld, got %lld",
                   (long long)(h->gbs / h->n_micro), (long long)mbs);
  if ((st = jx_i64(top, root, "seq", true, 1, (int64_t)1 << 40, &seq, NULL))) return st;
  h->seq = (double)seq;
  char where[64];
  json_t *mesh;
  if ((st = child_object(top, root, "mesh", true, MESH_KEYS, AP_COUNT(MESH_KEYS), where, sizeof where, &mesh))) return st;
  jx_src ms = {top->ctx, top->file, "mesh"};
  if ((st = int_list(&ms, mesh, "shape", 1, 2, h->shape, &h->n_axes))) return st;
  json_t *levels = json_object_get(mesh, "levels");
  if (!levels || !json_is_array(levels) || (int)json_array_size(levels) != h->n_axes)
    return jx_fail(&ms, "levels", "expected %d link-level names, one per axis", h->n_axes);
  for (int a = 0; a < h->n_axes; a++)
    if (!json_is_string(json_array_get(levels, (size_t)a))) return jx_fail(&ms, "levels", "[%d]: expected a name", a);
  /* Stages: one on the whole mesh, from the graph's first op to its last; or a pipeline of several. */
  json_t *stages = json_object_get(root, "stages");
  if (!stages || !json_is_array(stages) || json_array_size(stages) < 1)
    return jx_fail(top, "stages", "expected an array of stages");
  size_t n_stages = json_array_size(stages);
  if (n_stages > GST_MAX_LAYERS)
    return jx_fail(top, "stages", "%zu stages; a plan has at most %d (the inter-op pass's layers)", n_stages, GST_MAX_LAYERS);
  int64_t n = h->n_axes == 2 ? h->shape[0] * h->shape[1] : h->shape[0];
  if (n_stages == 1 && n != c->n_devices)
    return jx_fail(&ms, "shape", "covers %lld devices; the cluster %s has %lld", (long long)n, cluster,
                   (long long)c->n_devices);
  gread_stated stated[GST_MAX_LAYERS];
  for (size_t i = 0; i < n_stages; i++) {
    snprintf(where, sizeof where, "stages[%zu]", i);
    jx_src ss = {top->ctx, top->file, where};
    json_t *e = json_array_get(stages, i);
    if (!json_is_object(e)) return jx_fail(top, where, "expected an object");
    if ((st = jx_check_keys(&ss, e, STAGE_KEYS, AP_COUNT(STAGE_KEYS), 0))) return st;
    const char *first = NULL, *last = NULL;
    if ((st = jx_str(&ss, e, "first_op", true, &first, NULL)) || (st = jx_str(&ss, e, "last_op", true, &last, NULL)))
      return st;
    int64_t sub[2], sm[2];
    int n_sub, n_sm;
    if ((st = int_list(&ss, e, "submesh", 2, 2, sub, &n_sub)) || (st = int_list(&ss, e, "mesh", 1, 2, sm, &n_sm))) return st;
    double x;
    int64_t k = -1;
    json_t *lv = json_object_get(e, "levels");
    if (lv && (!json_is_array(lv) || (int)json_array_size(lv) != n_sm))
      return jx_fail(&ss, "levels", "expected one link-level name per axis of the stage's mesh");
    for (size_t a = 0; lv && a < json_array_size(lv); a++)
      if (!json_is_string(json_array_get(lv, a))) return jx_fail(&ss, "levels", "[%zu]: expected a name", a);
    if ((st = jx_f64(&ss, e, "time_per_micro_batch_s", false, 0, 1e30, &x, NULL)) ||
        (st = jx_f64(&ss, e, "send_recv_s", false, 0, 1e30, &x, NULL)) ||
        (st = jx_i64(&ss, e, "in_flight", false, 1, (int64_t)1 << 30, &k, NULL)))
      return st;
    stated[i] = (gread_stated){first, last, {sub[0], sub[1]}, {sm[0], n_sm == 2 ? sm[1] : 0}, n_sm, k};
    if (n_stages > 1) continue;
    const graph_block *b0 = &g->blocks[0], *bl = &g->blocks[g->n_blocks - 1];
    if (b0->n_ops > 0 && strcmp(first, b0->ops[0].name) != 0)
      return jx_fail(&ss, "first_op", "\"%s\": the one stage must start at the graph's first op, %s", first, b0->ops[0].name);
    if (bl->n_ops > 0 && strcmp(last, bl->ops[bl->n_ops - 1].name) != 0)
      return jx_fail(&ss, "last_op", "\"%s\": the one stage must end at the graph's last op, %s", last,
                     bl->ops[bl->n_ops - 1].name);
    if (sub[0] * sub[1] != c->n_devices)
      return jx_fail(&ss, "submesh", "%lld x %lld devices; the one stage runs on all %lld", (long long)sub[0],
                     (long long)sub[1], (long long)c->n_devices);
    if (n_sm != h->n_axes || sm[0] != h->shape[0] || (n_sm == 2 && sm[1] != h->shape[1]))
      return jx_fail(&ss, "mesh", "must equal mesh.shape");
    if (k >= 0 && k != 1) return jx_fail(&ss, "in_flight", "%lld, but the one stage holds 1 micro-batch", (long long)k);
  }
  h->stages.n = 1;
  if (n_stages > 1 && (st = gread_stages_check(top, stated, (int)n_stages, g, c, cluster, &h->stages))) return st;
  json_t *mem;
  h->limit_bytes = (double)c->groups[0].device.mem_bytes;
  if ((st = child_object(top, root, "memory", false, MEMORY_KEYS, AP_COUNT(MEMORY_KEYS), where, sizeof where, &mem))) return st;
  if (mem) {
    jx_src mm = {top->ctx, top->file, "memory"};
    double peak;
    if ((st = jx_f64(&mm, mem, "peak_bytes", true, 0, 1e30, &peak, NULL))) return st;
    double dev = h->limit_bytes;
    if ((st = jx_f64(&mm, mem, "limit_bytes", true, 1, dev * (1 + 1e-5), &h->limit_bytes, NULL))) return st;
    /* The file holds 6 significant digits: the whole device memory reads back as itself. */
    if (fabs(h->limit_bytes - dev) <= 1e-5 * dev) h->limit_bytes = dev;
  }
  json_t *time;
  if ((st = child_object(top, root, "time", false, TIME_KEYS, AP_COUNT(TIME_KEYS), where, sizeof where, &time))) return st;
  for (size_t k = 0; time && k < AP_COUNT(TIME_KEYS); k++) {
    jx_src tt = {top->ctx, top->file, "time"};
    double x;
    if ((st = jx_f64(&tt, time, TIME_KEYS[k], true, 0, 1e30, &x, NULL))) return st;
  }
  json_t *mfu;
  if ((st = child_object(top, root, "mfu", false, MFU_KEYS, AP_COUNT(MFU_KEYS), where, sizeof where, &mfu))) return st;
  if (mfu) {
    jx_src fs = {top->ctx, top->file, "mfu"};
    double x;
    const char *conv = NULL;
    if ((st = jx_f64(&fs, mfu, "value", true, 0, 1e3, &x, NULL)) ||
        (st = jx_f64(&fs, mfu, "flop_per_iteration", true, 0, 1e40, &x, NULL)) ||
        (st = jx_str(&fs, mfu, "convention", false, &conv, NULL)))
      return st;
  }
  json_t *explain = json_object_get(root, "explain");
  if (explain) {
    if (!json_is_array(explain)) return jx_fail(top, "explain", "expected an array of sentences");
    for (size_t i = 0; i < json_array_size(explain); i++)
      if (!json_is_string(json_array_get(explain, i))) return jx_fail(top, "explain", "[%zu]: expected a string", i);
  }
  return AP_OK;
}

/* The search record: copied into r (the figures of the search that made the plan). */
static ap_status read_search(const jx_src *top, json_t *root, const graph_problem *gp, gplan_result *r) {
  char where[64];
  json_t *se;
  ap_status st = child_object(top, root, "search", true, SEARCH_KEYS, AP_COUNT(SEARCH_KEYS), where, sizeof where, &se);
  if (st) return st;
  jx_src s = {top->ctx, top->file, "search"};
  if ((st = strategy_of(&s, se, "strategy", &r->strategy)) || (st = solve_status_of(&s, se, "status", &r->status)) ||
      (st = num_or_null(&s, se, "lower_bound_s", &r->lower_bound_s)))
    return st;
  if (r->status == SOLVE_INFEASIBLE) return jx_fail(&s, "status", "a plan's search must have found it (optimal or feasible)");
  static const char *const counts[] = {"nodes", "followers", "groups"};
  int64_t want[3] = {gp->n_nodes, gp->n_followers, gp->sp.n_groups};
  for (int k = 0; k < 3; k++) {
    int64_t v;
    if ((st = jx_i64(&s, se, counts[k], true, 0, (int64_t)1 << 30, &v, NULL))) return st;
    if (v != want[k])
      return jx_fail(&s, counts[k], "%lld, but the graph's problem on this mesh has %lld", (long long)v, (long long)want[k]);
  }
  json_t *io;
  if ((st = child_object(&s, se, "inter_op", false, INTER_OP_KEYS, AP_COUNT(INTER_OP_KEYS), where, sizeof where, &io)))
    return st;
  if (io) { /* the record of the pass that made the plan, written again as it is */
    jx_src is = {top->ctx, top->file, "search.inter_op"};
    int64_t layers, solves, hits;
    if ((st = jx_i64(&is, io, "layers", true, 1, GST_MAX_LAYERS, &layers, NULL)) ||
        (st = jx_i64(&is, io, "stage_solves", true, 0, INT32_MAX, &solves, NULL)) ||
        (st = jx_i64(&is, io, "memo_hits", true, 0, INT32_MAX, &hits, NULL)) ||
        (st = jx_f64(&is, io, "solve_s", true, 1e-300, 1e30, &r->inter_op_s, NULL)))
      return st;
    r->n_layers = (int)layers, r->stage_solves = (int)solves, r->memo_hits = (int)hits;
  }
  json_t *tries = json_object_get(se, "tries");
  if (!tries || !json_is_array(tries) || json_array_size(tries) > AP_COUNT(r->tries))
    return jx_fail(&s, "tries", "expected an array of at most %d solves", (int)AP_COUNT(r->tries));
  for (size_t i = 0; i < json_array_size(tries); i++) {
    snprintf(where, sizeof where, "search.tries[%zu]", i);
    jx_src ts = {top->ctx, top->file, where};
    json_t *e = json_array_get(tries, i);
    if (!json_is_object(e)) return jx_fail(&s, "tries", "[%zu]: expected an object", i);
    if ((st = jx_check_keys(&ts, e, TRY_KEYS, AP_COUNT(TRY_KEYS), 0))) return st;
    gplan_try *y = &r->tries[r->n_tries];
    int64_t mic;
    if ((st = strategy_of(&ts, e, "strategy", &y->strategy)) || (st = int_list(&ts, e, "mesh", 1, 2, y->mesh, &y->n_axes)) ||
        (st = jx_i64(&ts, e, "micro_batches", true, 1, (int64_t)1 << 40, &mic, NULL)) ||
        (st = solve_status_of(&ts, e, "status", &y->status)) || (st = num_or_null(&ts, e, "iteration_s", &y->objective_s)) ||
        (st = jx_f64(&ts, e, "solve_s", true, 0, 1e30, &y->time_s, NULL)) ||
        (st = jx_i64(&ts, e, "evaluations", true, 0, INT64_MAX, &y->n_evals, NULL)))
      return st;
    if (y->n_axes == 1) y->mesh[1] = 1;
    y->n_micro = (double)mic;
    y->lower_bound_s = NAN;
    r->n_tries++;
  }
  return AP_OK;
}

/* A stage as the ops see it: the problem whose strategies its nodes lo..hi take, and the problem that ties them
 * into groups (nodes lo..hi as 0..): for a plan of one stage the graph's problem both times. */
typedef struct {
  const graph_problem *gp;
  const sp_problem *sp;
  int lo, hi;
} op_view;

/* The ops: each graph op once, each matched to a strategy of its stage; groups agree. */
static ap_status read_ops(const jx_src *top, json_t *root, const op_view *v, int n_views, arena *a, int32_t *choice) {
  json_t *ops = json_object_get(root, "ops");
  if (!ops || !json_is_array(ops)) return jx_fail(top, "ops", "expected an array with one entry per op of the graph");
  const graph_problem *gp = v[0].gp;
  int n = gp->n_nodes;
  int32_t *entry = arena_alloc(a, (size_t)(n > 0 ? n : 1) * sizeof *entry);
  uint8_t **ok = arena_alloc(a, (size_t)(n > 0 ? n : 1) * sizeof *ok);
  op_stated *o = arena_alloc(a, sizeof *o);
  if (!entry || !ok || !o) return ctx_fail(top->ctx, AP_NOMEM, "out of memory");
  for (int i = 0; i < n; i++) entry[i] = -1;
  ap_status st;
  char where[96];
  for (size_t j = 0; j < json_array_size(ops); j++) {
    json_t *e = json_array_get(ops, j);
    snprintf(where, sizeof where, "ops[%zu]", j);
    jx_src s = {top->ctx, top->file, where};
    if (!json_is_object(e)) return jx_fail(top, where, "expected an object");
    if ((st = jx_check_keys(&s, e, OP_KEYS, AP_COUNT(OP_KEYS), 0))) return st;
    const char *name = NULL, *type = NULL;
    if ((st = jx_str(&s, e, "name", true, &name, NULL))) return st;
    int i = node_named(gp, name, entry);
    if (i < 0) return jx_fail(&s, "name", "the graph %s has no op named \"%s\"", gp->g->name, name);
    if (entry[i] >= 0)
      return jx_fail(&s, "name", "op %s is listed more often than the graph has it (also ops[%d])", name, entry[i]);
    entry[i] = (int32_t)j;
    const graph_op *op = op_of(gp, i);
    const char *want = op->op_type ? op->op_type : op_kind_name(op->kind);
    if ((st = jx_str(&s, e, "op_type", true, &type, NULL))) return st;
    if (strcmp(type, want) != 0) return jx_fail(&s, "op_type", "op %s is a %s in the graph, not a %s", name, want, type);
    snprintf(where, sizeof where, "ops[%zu] (%.64s)", j, name);
    s.where = where;
    int q = 0;
    while (q + 1 < n_views && i > v[q].hi) q++;
    const graph_problem *sgp = v[q].gp;
    if ((st = read_op_specs(&s, e, sgp, i, o))) return st;
    const gp_node *nd = &sgp->nodes[i];
    ok[i] = arena_alloc(a, (size_t)(nd->n_s > 0 ? nd->n_s : 1));
    if (!ok[i]) return ctx_fail(top->ctx, AP_NOMEM, "out of memory");
    int n_match = 0;
    for (int k = 0; k < nd->n_s; k++) n_match += ok[i][k] = matches(op, &nd->s[k], o);
    if (n_match == 0) {
      const shard_mesh *mesh = sgp->env.mesh;
      char shape[48];
      if (mesh->n_axes == 2) snprintf(shape, sizeof shape, "[%lld, %lld]", (long long)mesh->shape[0], (long long)mesh->shape[1]);
      else snprintf(shape, sizeof shape, "[%lld]", (long long)mesh->shape[0]);
      return ctx_fail(top->ctx, AP_INVALID, "%s: %s: no legal strategy of op %s on mesh %s gives these specs (`autopar "
                      "describe --sharding` lists them)", top->file, where, name, shape);
    }
  }
  for (int i = 0; i < n; i++)
    if (entry[i] < 0) return jx_fail(top, "ops", "op %s of the graph is missing", op_of(gp, i)->name);
  /* A group takes one strategy: the lowest every member matches, allowed by the problem. */
  for (int q = 0; q < n_views; q++) {
    const sp_problem *sp = v[q].sp;
    int lo = v[q].lo, m = v[q].hi - v[q].lo + 1;
    for (int32_t g = 0; g < sp->n_groups; g++) {
      int32_t leader = lo + sp->leader[g], pick = -1;
      for (int32_t k = 0; k < sp->n_s[g] && pick < 0; k++) {
        bool all = sp_allowed(sp, g, k);
        for (int i = 0; i < m && all; i++)
          if (sp->group_of[i] == g) all = ok[lo + i][k];
        if (all) pick = k;
      }
      if (pick < 0) {
        int bad = -1;
        for (int i = 0; i < m && bad < 0; i++)
          if (sp->group_of[i] == g && lo + i != leader) bad = lo + i;
        snprintf(where, sizeof where, "ops[%d] (%.64s)", entry[bad >= 0 ? bad : leader], op_of(gp, bad >= 0 ? bad : leader)->name);
        return ctx_fail(top->ctx, AP_INVALID, "%s: %s: its specs must be those of op %s, which it shares one strategy "
                        "with (a follower or the same op of a repeated layer%s), and legal there", top->file, where,
                        op_of(gp, leader)->name, n_views > 1 ? " in its stage" : "");
      }
      for (int i = 0; i < m; i++)
        if (sp->group_of[i] == g) choice[lo + i] = pick;
    }
  }
  return AP_OK;
}

ap_status gplan_read_cluster_name(ap_ctx *ctx, const char *file, json_t *root, const char **cluster) {
  jx_src top = {ctx, file, ""};
  *cluster = NULL;
  if (!json_is_object(root)) return ctx_fail(ctx, AP_INVALID, "%s: a plan must be a JSON object", file);
  const char *format = NULL;
  ap_status st = jx_str(&top, root, "format", true, &format, NULL);
  if (!st && strcmp(format, GPLAN_FORMAT) != 0) st = jx_fail(&top, "format", "expected \"%s\"", GPLAN_FORMAT);
  if (!st) st = jx_str(&top, root, "cluster", true, cluster, NULL);
  return st;
}

ap_status gplan_read_model_path(ap_ctx *ctx, const char *file, json_t *root, const char **path) {
  jx_src top = {ctx, file, ""};
  *path = NULL;
  if (!json_is_object(root)) return ctx_fail(ctx, AP_INVALID, "%s: a plan must be a JSON object", file);
  return jx_str(&top, root, "model_path", false, path, NULL);
}

ap_status gplan_read(ap_ctx *ctx, const char *file, json_t *root, const graph *g, const hw_cluster *c,
                     const char *cluster, gplan_read_info *info, gplan_result *r) {
  memset(r, 0, sizeof *r);
  memset(info, 0, sizeof *info);
  r->g = g;
  r->a = arena_new();
  if (!r->a) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  if (!cluster) cluster = c->name;
  jx_src top = {ctx, file, ""};
  if (!json_is_object(root)) return ctx_fail(ctx, AP_INVALID, "%s: a plan must be a JSON object", file);
  header *h = arena_alloc(r->a, sizeof *h);
  if (!h) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  ap_status st = read_header(&top, root, g, c, cluster, h);
  if (st) return st;
  info->gbs = h->gbs;
  jx_str(&top, root, "cluster", false, &info->cluster, NULL);
  if ((st = compute_model_init(ctx, r->a, &c->groups[0].device, NULL, &r->cm))) return st;
  r->n_micro = (double)h->n_micro;
  r->b = (double)h->gbs / (double)h->n_micro;
  r->s = h->seq;
  r->mem_limit_bytes = h->limit_bytes;
  op_view v[GST_MAX_LAYERS];
  int n_views = h->stages.n;
  if (n_views <= 1) { /* the whole graph on the plan's mesh */
    int64_t shape[2] = {h->n_axes == 2 ? h->shape[0] : 1, h->n_axes == 2 ? h->shape[1] : h->shape[0]};
    if ((st = gstage_mesh_problem(ctx, r->a, g, c, &r->cm, shape, r->b, r->s, r->n_micro, h->limit_bytes, NULL,
                                  &r->mesh, &r->gp)))
      return st;
    /* A plan of an annotated search (search.annotate, `plan --annotate`'s ops and output specs): its problem has
     * those ops fixed, and a fixed op is never a follower, so it is built again with them fixed. */
    json_t *se = json_object_get(root, "search"), *an = json_is_object(se) ? json_object_get(se, "annotate") : NULL;
    if (an) {
      jx_src s = {ctx, file, "search"};
      if (!json_is_string(an) || !*json_string_value(an))
        return jx_fail(&s, "annotate", "expected the annotations as `plan --annotate` takes them (OP=SPEC;...)");
      int32_t *fix = arena_alloc(r->a, (size_t)(r->gp.n_nodes > 0 ? r->gp.n_nodes : 1) * sizeof *fix);
      if (!fix) return ctx_fail(ctx, AP_NOMEM, "out of memory");
      if (gplan_parse_annotate(ctx, &r->gp, json_string_value(an), fix)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", ap_ctx_error(ctx));
        return jx_fail(&s, "annotate", "%s", msg);
      }
      if ((st = gstage_mesh_problem(ctx, r->a, g, c, &r->cm, shape, r->b, r->s, r->n_micro, h->limit_bytes, fix,
                                    &r->mesh, &r->gp)))
        return st;
    }
    v[0] = (op_view){&r->gp, &r->gp.sp, 0, r->gp.n_nodes - 1};
  } else {
    if ((st = gread_stages_build(&top, r->a, g, c, &r->cm, r->b, r->s, r->n_micro, h->limit_bytes, &h->stages)))
      return st;
    for (int q = 0; q < n_views; q++)
      v[q] = (op_view){h->stages.st[q].gp, &h->stages.st[q].sp, h->stages.st[q].lo, h->stages.st[q].hi};
  }
  int n_nodes = v[0].gp->n_nodes;
  int32_t *choice = arena_alloc(r->a, (size_t)(n_nodes > 0 ? n_nodes : 1) * sizeof *choice);
  if (!choice) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  /* The ops before the search record, whose counts a plan of another graph would break first. */
  if ((st = read_ops(&top, root, v, n_views, r->a, choice))) return st;
  if (n_views <= 1) {
    r->choice = choice;
    r->br = gp_evaluate(&r->gp, r->choice);
    r->found = true;
  } else {
    if ((st = gread_stages_finish(ctx, r->a, c, &h->stages, choice, r->n_micro, h->gbs, r->s, r))) return st;
    /* mesh: the slowest stage's (the writer's r->mesh) */
    int slow = gplan_slowest_stage(r);
    if (h->n_axes != r->mesh.n_axes || h->shape[0] != r->mesh.shape[0] || (h->n_axes == 2 && h->shape[1] != r->mesh.shape[1])) {
      jx_src ms = {ctx, file, "mesh"};
      char want[48];
      if (r->mesh.n_axes == 2) snprintf(want, sizeof want, "[%lld, %lld]", (long long)r->mesh.shape[0], (long long)r->mesh.shape[1]);
      else snprintf(want, sizeof want, "[%lld]", (long long)r->mesh.shape[0]);
      return jx_fail(&ms, "shape", "expected the mesh of the slowest stage, stages[%d]: %s", slow, want);
    }
  }
  return read_search(&top, root, &r->gp, r);
}
