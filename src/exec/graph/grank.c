/* The rank program's graph mode (exec layer, bin/autopar-rank; docs/executor.md "ONNX graphs"): `autopar run
 * --model NET.onnx --plan PLAN.json --data DATA.safetensors` trains the ONNX graph under an autopar-plan/2
 * plan. rank.c's main hands over here when the model is an .onnx file. Each rank decodes the graph through the
 * "onnx" part with its values (onnx_part_ops.decode), reads the plan, takes its share of each global batch
 * from DATA (one tensor per graph input by name, samples on the leading axis, and `labels`; step t takes
 * samples t·B … t·B + B − 1, modulo the samples in the file), runs forward and backward (gx_train.c), sums the
 * gradients over the ranks (MPI_Allreduce) and applies plain SGD or the transformer executor's AdamW
 * (ex_adamw_step). BatchNormalization's statistics and its backward sums are all-reduced inside the op
 * (gx_comm), so every rank normalises by the global batch, as one process does.
 *
 * What runs: every op under its specs on a 1- or 2-axis mesh (gx_shard.c), the resharding between ops, the
 * inter-op stages with micro-batches, and packed projections read in parts (<MatMul>#q ops; gx_packed.c, which
 * rewrites the decoded model before the graph is built). A spec it cannot read exits 2 naming the op and the
 * spec. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <mpi.h>

#include "exec/graph/grank.h"
#include "exec/rank.h"
#include "exec/graph/gx.h"
#include "exec/graph/gx_shard.h"
#include "model/onnx.h"
#include "model/safetensors.h"

#ifdef AP_PART_ONNX
AP_API const ap_part *ap_part_onnx(void);
#endif

typedef struct {
  const char *model, *plan, *init, *data, *save, *result;
  int64_t steps, fail_rank;
  bool check, sgd;
  int loss;
  ex_adamw opt;
  bool wd_given;
} gr_args;

#define die rk_die /* rank.c's: one line, naming the rank once MPI runs, then MPI_Abort */

bool gr_is_graph(const char *model) {
  size_t n = model ? strlen(model) : 0;
  return n > 5 && strcmp(model + n - 5, ".onnx") == 0;
}

static void parse_args(int argc, char **argv, gr_args *a) {
  *a = (gr_args){.steps = 1, .fail_rank = -1, .opt = {3e-4, 0.9, 0.95, 1e-8, 0.1}};
  for (int i = 1; i < argc; i++) {
    const char *k = argv[i];
    if (strcmp(k, "--check") == 0) {
      a->check = true;
      continue;
    }
    if (i + 1 >= argc) die(2, "%s: expected a value", k);
    const char *v = argv[++i];
    char *end = NULL;
    double d = strtod(v, &end);
    bool num = end && *end == '\0' && end != v;
    if (strcmp(k, "--model") == 0) a->model = v;
    else if (strcmp(k, "--plan") == 0) a->plan = v;
    else if (strcmp(k, "--init") == 0) a->init = v;
    else if (strcmp(k, "--data") == 0) a->data = v;
    else if (strcmp(k, "--save") == 0) a->save = v;
    else if (strcmp(k, "--result") == 0) a->result = v;
    else if (strcmp(k, "--loss") == 0) {
      if (strcmp(v, "cross-entropy") && strcmp(v, "mse")) die(2, "--loss: expected cross-entropy or mse, got \"%s\"", v);
      a->loss = v[0] == 'm' ? GX_LOSS_MSE : GX_LOSS_XENT;
    } else if (strcmp(k, "--optimizer") == 0) {
      if (strcmp(v, "adamw") && strcmp(v, "sgd")) die(2, "--optimizer: expected adamw or sgd, got \"%s\"", v);
      a->sgd = v[0] == 's';
    } else if (strcmp(k, "--data-dtype") == 0 || strcmp(k, "--seed") == 0) {
      die(2, "%s: not an option of a graph run (the data and the weights come from files)", k);
    } else if (!num) {
      die(2, "%s: expected a number, got \"%s\"", k, v);
    } else if (strcmp(k, "--steps") == 0 && d >= 1 && d <= 1e6 && d == floor(d)) a->steps = (int64_t)d;
    else if (strcmp(k, "--fail-rank") == 0 && d >= 0 && d == floor(d)) a->fail_rank = (int64_t)d;
    else if (strcmp(k, "--lr") == 0 && d >= 0) a->opt.lr = d;
    else if (strcmp(k, "--beta1") == 0 && d >= 0 && d < 1) a->opt.beta1 = d;
    else if (strcmp(k, "--beta2") == 0 && d >= 0 && d < 1) a->opt.beta2 = d;
    else if (strcmp(k, "--eps") == 0 && d > 0) a->opt.eps = d;
    else if (strcmp(k, "--weight-decay") == 0 && d >= 0) a->opt.weight_decay = d, a->wd_given = true;
    else die(2, "%s: unknown option or value out of range (\"%s\")", k, v);
  }
  if (!a->model || !a->plan) die(2, "--model and --plan are required");
  if (!a->data) die(2, "--data: required for an ONNX model (a safetensors file: one tensor per graph input, and labels)");
  if (a->sgd && !a->wd_given) a->opt.weight_decay = 0.0;
}

enum { GR_MAX_STAGES = 8 };

typedef struct {
  int n_dev, micro_batches, n_stages;
  int64_t gbs;
  int axes[GR_MAX_STAGES];       /* per stage: its mesh's axes (1 or 2) */
  int64_t mesh[GR_MAX_STAGES][2];
  int base[GR_MAX_STAGES];       /* per stage: its first rank (stages take consecutive ranks in order) */
  int first[GR_MAX_STAGES], last[GR_MAX_STAGES]; /* per stage: its first and last node */
  int *stage_of;                 /* per node: its stage, -1 for nodes on weights and constants alone */
  gx_opspec *ops;                /* per node */
} gr_plan;

static const char *spec_str(json_t *spec, char *buf, size_t n) {
  char *s = json_dumps(spec, JSON_COMPACT | JSON_ENCODE_ANY);
  snprintf(buf, n, "%s", s ? s : "?");
  free(s);
  return buf;
}

/* A spec list ["S0", "R", ...] into out; exits 2 naming the op and the field on anything else. */
static void parse_spec(const char *path, const char *op, const char *field, json_t *j, int n_axes, gx_spec *out) {
  char buf[300];
  if (!json_is_array(j) || json_array_size(j) > GX_MAX_DIMS)
    die(2, "%s: op \"%s\": %s %s: expected a list of dim specs", path, op, field, spec_str(j, buf, sizeof buf));
  out->rank = (int)json_array_size(j);
  for (int d = 0; d < out->rank; d++) {
    const char *v = json_string_value(json_array_get(j, (size_t)d));
    int m = !v ? -1 : !strcmp(v, "R") ? 0 : !strcmp(v, "S0") ? 1 : !strcmp(v, "S1") ? 2 : !strcmp(v, "S01") ? 3 : -1;
    if (m < 0 || (m & 2 && n_axes < 2))
      die(2, "%s: op \"%s\": %s %s: dim %d is not R, S0%s", path, op, field, spec_str(j, buf, sizeof buf), d,
          n_axes < 2 ? " (a 1-axis mesh)" : ", S1 or S01");
    out->d[d] = (uint8_t)m;
  }
}

static unsigned axes_of(const gx_spec *s) {
  unsigned a = 0;
  for (int d = 0; d < s->rank; d++) a |= s->d[d];
  return a;
}

/* A part of a packed projection (gx_packed.c): the plan gives its weight's spec on the initializer's stored
 * dims, of part q ([k, n], or [n, k] when stored transposed), so the MatMul takes its Slice [k, n] in that spec
 * (transposed back), and the bias Add after it runs in the part's output spec with the bias's spec. */
static void packed_specs(const char *path, const char *op, json_t *ws, json_t *w1, const gx_packed *pk, int n_axes,
                         gx_opspec *ops, int k) {
  gx_opspec *os = &ops[k];
  json_t *wj = json_object_get(ws, pk->weight);
  if (!wj) wj = w1;
  if (wj) {
    gx_spec s;
    parse_spec(path, op, "weight_specs", wj, n_axes, &s);
    if (s.rank != 2) die(2, "%s: op \"%s\": the spec of weight \"%s\" has %d dims (expected 2)", path, op, pk->weight, s.rank);
    os->in[1] = s;
    if (pk->transposed) os->in[1].d[0] = s.d[1], os->in[1].d[1] = s.d[0];
  }
  if (pk->add < 0) return;
  gx_opspec *ad = &ops[pk->add];
  const gx_spec *y = &os->out[0];
  *ad = (gx_opspec){.in_plan = true};
  for (int q = 0; q < GX_MAX_OUT_SPECS; q++) ad->out[q].rank = -1;
  for (int q = 0; q < GX_MAX_IO; q++) ad->in[q].rank = -1;
  ad->out[0] = ad->in[0] = *y;
  json_t *bj = json_object_get(ws, pk->bias);
  if (bj) parse_spec(path, op, "weight_specs", bj, n_axes, &ad->in[1]);
  else if (y->rank > 0) ad->in[1] = (gx_spec){.rank = 1, .d = {y->d[y->rank - 1]}};
  if (ad->in[1].rank > 0 && y->rank > 0 && ad->in[1].d[0] != y->d[y->rank - 1]) {
    char buf[300];
    die(2, "%s: op \"%s\": weight_specs \"%s\" %s: the bias must split as the output's last dim", path, op,
        pk->bias, spec_str(bj, buf, sizeof buf));
  }
  ad->used = axes_of(&ad->out[0]) | axes_of(&ad->in[1]);
}

/* The plan's op names (for gx_unpack), owned by the returned JSON document. */
static json_t *plan_names(const char *path, const char ***names, int *n) {
  json_error_t je;
  json_t *root = json_load_file(path, 0, &je), *ops = root ? json_object_get(root, "ops") : NULL;
  if (!root) die(2, "%s:%d: not JSON: %s", path, je.line, je.text);
  *n = json_is_array(ops) ? (int)json_array_size(ops) : 0;
  *names = calloc((size_t)(*n ? *n : 1), sizeof **names);
  if (!*names) die(1, "out of memory");
  for (int i = 0; i < *n; i++) (*names)[i] = json_string_value(json_object_get(json_array_get(ops, (size_t)i), "name"));
  return root;
}

/* Reads the plan's mesh, global batch and micro-batches, and each op's specs onto the graph's nodes (by name,
 * in graph order): output_spec, input_specs onto the node's activation inputs in order, weight_specs onto its
 * initializers by name (weight_spec onto its one weight), partial. One stage only. */
static void read_plan(const char *path, const gx_graph *g, const gx_packed *pk, int n_pk, gr_plan *p) {
  json_error_t je;
  json_t *root = json_load_file(path, 0, &je);
  if (!root) die(2, "%s:%d: not JSON: %s", path, je.line, je.text);
  json_t *fmt = json_object_get(root, "format");
  if (!json_is_string(fmt) || strcmp(json_string_value(fmt), "autopar-plan/2") != 0)
    die(2, "%s: format: expected \"autopar-plan/2\" (the plan `autopar plan --model NET.onnx --json` prints)", path);
  /* The stages (a plan of one stage may omit them): each its mesh and its first and last op, in graph order. */
  json_t *stages = json_object_get(root, "stages");
  size_t n_st = json_is_array(stages) ? json_array_size(stages) : 0;
  if (n_st > GR_MAX_STAGES) die(2, "%s: stages: %zu stages (at most %d)", path, n_st, GR_MAX_STAGES);
  p->n_stages = n_st > 1 ? (int)n_st : 1;
  p->n_dev = 0;
  int from = 0;
  for (int st = 0; st < p->n_stages; st++) {
    json_t *sj = n_st > 1 ? json_array_get(stages, (size_t)st) : NULL;
    json_t *shape = sj ? json_object_get(sj, "mesh") : json_object_get(json_object_get(root, "mesh"), "shape");
    if (!json_is_array(shape) || json_array_size(shape) < 1 || json_array_size(shape) > 2)
      die(2, "%s: %s: expected 1 or 2 axes", path, sj ? "stages[].mesh" : "mesh.shape");
    p->axes[st] = (int)json_array_size(shape);
    p->base[st] = p->n_dev;
    int n = 1;
    p->mesh[st][1] = 1;
    for (size_t i = 0; i < json_array_size(shape); i++) {
      json_int_t v = json_integer_value(json_array_get(shape, i));
      if (v < 1 || v > 4096) die(2, "%s: mesh[%zu]: expected a count >= 1", path, i);
      p->mesh[st][i] = (int64_t)v;
      n *= (int)v;
    }
    p->n_dev += n;
    p->first[st] = 0, p->last[st] = g->n_nodes - 1;
    if (!sj) continue;
    const char *fo = json_string_value(json_object_get(sj, "first_op"));
    const char *lo = json_string_value(json_object_get(sj, "last_op"));
    p->first[st] = p->last[st] = -1;
    for (int k = from; k < g->n_nodes && fo && p->first[st] < 0; k++)
      if (!strcmp(g->nodes[k].name, fo)) p->first[st] = k;
    for (int k = p->first[st] < 0 ? g->n_nodes : p->first[st]; k < g->n_nodes && lo && p->last[st] < 0; k++)
      if (!strcmp(g->nodes[k].name, lo)) p->last[st] = k;
    if (p->first[st] < 0 || p->last[st] < 0)
      die(2, "%s: stages[%d]: first_op \"%s\" and last_op \"%s\": expected nodes of the model in order", path, st,
          fo ? fo : "?", lo ? lo : "?");
    from = p->last[st] + 1;
  }
  p->stage_of = malloc(sizeof *p->stage_of * (size_t)(g->n_nodes ? g->n_nodes : 1));
  if (!p->stage_of) die(1, "out of memory");
  /* Nodes between a stage's first and last op are its own; a node on weights and constants alone runs on every
   * stage (-1); a data node before the first stage or between stages goes with the stage before it. */
  for (int k = 0, st = 0; k < g->n_nodes; k++) {
    while (st + 1 < p->n_stages && k >= p->first[st + 1]) st++;
    bool data = false;
    for (int o = 0; o < g->nodes[k].n_out; o++) data = data || (g->nodes[k].out[o] >= 0 && g->dep[g->nodes[k].out[o]]);
    p->stage_of[k] = data ? st : -1;
  }
  json_t *gbs = json_object_get(root, "global_batch_size"), *mb = json_object_get(root, "micro_batches");
  if (!json_is_integer(gbs) || json_integer_value(gbs) < 1) die(2, "%s: global_batch_size: expected a count >= 1", path);
  p->gbs = (int64_t)json_integer_value(gbs);
  p->micro_batches = json_is_integer(mb) ? (int)json_integer_value(mb) : 1;
  if (p->micro_batches < 1 || p->gbs % p->micro_batches)
    die(2, "%s: micro_batches: expected a count >= 1 that divides global_batch_size %lld", path, (long long)p->gbs);
  p->ops = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof *p->ops);
  if (!p->ops) die(1, "out of memory");
  json_t *ops = json_object_get(root, "ops");
  if (!json_is_array(ops)) die(2, "%s: ops: expected an array", path);
  size_t i;
  json_t *op;
  char buf[300];
  json_array_foreach(ops, i, op) {
    const char *name = json_string_value(json_object_get(op, "name"));
    if (!name) die(2, "%s: ops[%zu].name: expected a string", path, i);
    int k = -1;
    for (int q = 0; q < g->n_nodes && k < 0; q++)
      if (strcmp(g->nodes[q].name, name) == 0 && !p->ops[q].in_plan) k = q;
    if (k < 0) die(2, "%s: ops[%zu] \"%s\": no node of the model has this name", path, i, name);
    gx_opspec *os = &p->ops[k];
    const gx_node *nd = &g->nodes[k];
    int n_axes = p->axes[p->stage_of[k] < 0 ? 0 : p->stage_of[k]];
    p->stage_of[k] = p->stage_of[k] < 0 ? 0 : p->stage_of[k]; /* a plan op runs on its stage only */
    for (int st = 0; st < p->n_stages; st++)
      if (k >= p->first[st] && k <= p->last[st]) p->stage_of[k] = st, n_axes = p->axes[st];
    os->in_plan = true;
    for (int q = 0; q < GX_MAX_OUT_SPECS; q++) os->out[q].rank = -1;
    for (int q = 0; q < GX_MAX_IO; q++) os->in[q].rank = -1;
    json_t *out = json_object_get(op, "output_spec");
    if (json_is_array(out) && json_array_size(out) && json_is_array(json_array_get(out, 0))) {
      for (size_t o = 0; o < json_array_size(out) && o < GX_MAX_OUT_SPECS; o++)
        parse_spec(path, name, "output_spec", json_array_get(out, o), n_axes, &os->out[o]);
    } else {
      parse_spec(path, name, "output_spec", out, n_axes, &os->out[0]);
    }
    json_t *ins = json_object_get(op, "input_specs"), *ws = json_object_get(op, "weight_specs");
    json_t *w1 = json_object_get(op, "weight_spec"), *part = json_object_get(op, "partial");
    size_t next_in = 0;
    /* weight_spec is the first weight's (the first key of weight_specs): used once, by name or positionally. */
    void *first_key = json_is_object(ws) ? json_object_iter(ws) : NULL;
    const char *first = first_key ? json_object_iter_key(first_key) : NULL;
    bool w1_used = false;
    for (int q = 0; q < nd->n_in; q++) {
      int v = nd->in[q];
      if (v < 0) continue;
      if (g->dep[v]) {
        if (json_is_array(ins) && next_in < json_array_size(ins))
          parse_spec(path, name, "input_specs", json_array_get(ins, next_in), n_axes, &os->in[q]);
        next_in++;
        continue;
      }
      json_t *byname = json_object_get(ws, g->names[v]);
      if (byname) {
        parse_spec(path, name, "weight_specs", byname, n_axes, &os->in[q]);
        if (first && strcmp(first, g->names[v]) == 0) w1_used = true;
      } else if (w1 && !w1_used && (g->consts[v].rank < 0 || (g->consts[v].rank >= 1 && !g->consts[v].is_int))) {
        /* A weight that reaches the op through ops on weights alone (a Transpose of the initializer) is the
         * op's weight as the importer folds it. */
        parse_spec(path, name, "weight_spec", w1, n_axes, &os->in[q]);
        w1_used = true;
      }
    }
    for (int j = 0; j < n_pk; j++)
      if (pk[j].mm == k) packed_specs(path, name, ws, w1, &pk[j], n_axes, p->ops, k);
    if (json_is_array(part)) {
      size_t a;
      json_t *x;
      json_array_foreach(part, a, x) {
        json_int_t ax = json_integer_value(x);
        if (!json_is_integer(x) || ax < 0 || ax >= n_axes)
          die(2, "%s: op \"%s\": partial %s: expected mesh axes", path, name, spec_str(part, buf, sizeof buf));
        os->partial |= 1u << ax;
      }
    }
    os->used = os->partial;
    for (int q = 0; q < GX_MAX_OUT_SPECS; q++) os->used |= axes_of(&os->out[q]);
    for (int q = 0; q < nd->n_in; q++) os->used |= axes_of(&os->in[q]);
    for (int j = 0; j < n_pk; j++)
      if (pk[j].mm == k && pk[j].add >= 0) p->stage_of[pk[j].add] = p->stage_of[k];
  }
  json_decref(root);
}

/* The DATA file's tensor per graph input, and labels; all with the same sample count. */
typedef struct {
  st_file f;
  const st_tensor **in;
  const st_tensor *labels;
  int64_t n_samples;
} gr_data;

static void open_data(ap_ctx *ctx, const char *path, const gx_graph *g, gr_data *d) {
  if (st_read(ctx, path, &d->f)) die(2, "%s", ap_ctx_error(ctx));
  d->in = calloc((size_t)(g->n_inputs ? g->n_inputs : 1), sizeof *d->in);
  if (!d->in) die(1, "out of memory");
  d->labels = st_find(&d->f, "labels");
  if (!d->labels || d->labels->n_dims < 1) die(2, "%s: expected a tensor \"labels\" with the samples on its first axis", path);
  d->n_samples = d->labels->shape[0];
  for (int i = 0; i < g->n_inputs; i++) {
    const char *nm = g->names[g->inputs[i]];
    d->in[i] = st_find(&d->f, nm);
    if (!d->in[i]) die(2, "%s: expected a tensor \"%s\" (graph input %d of the model)", path, nm, i);
    if (d->in[i]->n_dims < 1 || d->in[i]->shape[0] != d->n_samples)
      die(2, "%s: tensor \"%s\": %lld samples on its first axis; labels has %lld", path, nm,
          (long long)(d->in[i]->n_dims ? d->in[i]->shape[0] : 0), (long long)d->n_samples);
  }
  if (d->n_samples < 1) die(2, "%s: labels: no samples", path);
}

/* Samples [first, first + n) of step t's global batch of B into t (is_int: as int64). */
static bool batch_of(const st_tensor *src, bool is_int, int64_t n_samples, int64_t t0, int64_t n, gx_tensor *out) {
  int64_t dims[GX_MAX_DIMS];
  dims[0] = n;
  for (int d = 1; d < src->n_dims; d++) dims[d] = src->shape[d];
  if (!gx_alloc(out, is_int, src->n_dims, dims)) return false;
  int64_t per = n ? out->n / n : 0;
  for (int64_t j = 0; j < n; j++) {
    int64_t s = (t0 + j) % n_samples;
    for (int64_t e = 0; e < per; e++) {
      float v = src->data[s * per + e];
      if (is_int) out->i[j * per + e] = (int64_t)v;
      else out->f[j * per + e] = v;
    }
  }
  return true;
}

/* The communicators of the mesh's axis sets: [1] axis 0, [2] axis 1, [3] both (the world). */
static MPI_Comm g_axes_comm[4];

static void mesh_all_reduce(void *user, unsigned axes, float *buf, int64_t n) {
  (void)user;
  if (axes && n) MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, g_axes_comm[axes & 3]);
}

static void mesh_sum_d(void *user, unsigned axes, double *buf, int64_t n) {
  (void)user;
  if (axes && n) MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, g_axes_comm[axes & 3]);
}

/* The pipeline's point-to-point messages (gx_pipe): a stage's first rank sends to every rank of the other stage;
 * the sends are nonblocking until pipe_flush, so that no order of stages can deadlock on them. */
typedef struct {
  const gr_plan *p;
  int stage_rank;
  MPI_Request *req;
  int n_req, cap_req;
} gr_link;

static void pipe_send(void *user, int dst, const float *buf, int64_t n) {
  gr_link *l = user;
  if (l->stage_rank != 0) return;
  int n_dst = (int)(l->p->mesh[dst][0] * l->p->mesh[dst][1]);
  for (int q = 0; q < n_dst; q++) {
    if (l->n_req == l->cap_req) {
      l->cap_req = l->cap_req ? 2 * l->cap_req : 64;
      l->req = realloc(l->req, sizeof *l->req * (size_t)l->cap_req);
      if (!l->req) die(1, "out of memory");
    }
    MPI_Isend(buf, (int)n, MPI_FLOAT, l->p->base[dst] + q, 21, MPI_COMM_WORLD, &l->req[l->n_req++]);
  }
}

static void pipe_recv(void *user, int src, float *buf, int64_t n) {
  gr_link *l = user;
  MPI_Recv(buf, (int)n, MPI_FLOAT, l->p->base[src], 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static void pipe_flush(void *user) {
  gr_link *l = user;
  MPI_Waitall(l->n_req, l->req, MPI_STATUSES_IGNORE);
  l->n_req = 0;
}

/* This process's CPU time, seconds (a diagnostic beside wall time on a loaded machine). */
static double cpu_s_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void write_result(ap_ctx *ctx, const gr_args *a, const gx_graph *g, const gr_plan *p, int world,
                         const double *loss, const double *time_s, const double *cpu_s, const long *rss) {
  json_t *r = json_object(), *steps = json_array(), *jr = json_array();
  json_object_set_new(r, "format", json_string("autopar-run/1"));
  json_object_set_new(r, "model", json_string(a->model));
  json_object_set_new(r, "plan", json_string(a->plan));
  json_object_set_new(r, "ranks", json_integer(world));
  json_object_set_new(r, "params", json_integer(g->n_weights));
  json_object_set_new(r, "precision", json_string("fp32"));
  json_object_set_new(r, "loss_kind", json_string(a->loss == GX_LOSS_MSE ? "mse" : "cross-entropy"));
  json_object_set_new(r, "optimizer", json_string(a->sgd ? "sgd" : "adamw"));
  json_object_set_new(r, "global_batch_size", json_integer(p->gbs));
  json_object_set_new(r, "micro_batches", json_integer(p->micro_batches));
  for (int64_t t = 0; t < a->steps; t++) {
    json_t *s = json_object();
    json_object_set_new(s, "step", json_integer(t + 1));
    json_object_set_new(s, "loss", json_real(loss[t]));
    json_object_set_new(s, "time_s", json_real(time_s[t]));
    json_object_set_new(s, "cpu_s", json_real(cpu_s[t])); /* the slowest rank's CPU time in the step */
    json_array_append_new(steps, s);
  }
  json_object_set_new(r, "steps", steps);
  int64_t n = a->steps > 1 ? a->steps - 1 : 1;
  double *sorted = malloc((size_t)n * sizeof *sorted), med = 0;
  if (!sorted) die(1, "out of memory");
  memcpy(sorted, a->steps > 1 ? time_s + 1 : time_s, (size_t)n * sizeof *sorted);
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
  med = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  free(sorted);
  json_object_set_new(r, "iteration_time_s", json_real(med));
  for (int k = 0; k < world; k++) json_array_append_new(jr, json_integer((json_int_t)rss[k] * 1024));
  json_object_set_new(r, "peak_rss_bytes", jr);
  char *text = json_dumps(r, JSON_REAL_PRECISION(17));
  json_decref(r);
  if (!text) die(1, "out of memory");
  size_t tn = strlen(text);
  char *line = malloc(tn + 2);
  if (!line) die(1, "out of memory");
  memcpy(line, text, tn);
  line[tn] = '\n', line[tn + 1] = '\0';
  free(text);
  if (util_write_file_atomic(ctx, a->result, line)) die(1, "%s", ap_ctx_error(ctx));
  free(line);
}

static void save_weights(ap_ctx *ctx, const char *path, const gx_graph *g, const float *w) {
  st_out *o = calloc((size_t)(g->n_params ? g->n_params : 1), sizeof *o);
  if (!o) die(1, "out of memory");
  for (int i = 0; i < g->n_params; i++) {
    const gx_tensor *c = &g->consts[g->params[i].val];
    o[i].name = g->params[i].name;
    o[i].n_dims = c->rank;
    memcpy(o[i].shape, c->dims, sizeof(int64_t) * (size_t)c->rank);
    o[i].data = w + g->params[i].off;
  }
  if (st_write(ctx, path, o, g->n_params)) die(2, "%s", ap_ctx_error(ctx));
  free(o);
}

int gr_main(int argc, char **argv) {
  gr_args a;
  parse_args(argc, argv, &a);
  ap_ctx *ctx = ap_ctx_new();
  if (!ctx) die(1, "out of memory");
#ifdef AP_PART_ONNX
  if (ap_ctx_add_part(ctx, ap_part_onnx())) die(1, "%s", ap_ctx_error(ctx));
#endif
  const onnx_part_ops *ops = ctx_part_ops(ctx, "onnx");
  if (!ops || !ops->decode)
    die(2, "%s: ONNX import is not built into this autopar (the optional part \"onnx\")", a.model);
  char *bytes = NULL;
  size_t n_bytes = 0;
  if (util_read_file(ctx, a.model, &bytes, &n_bytes)) die(2, "%s", ap_ctx_error(ctx));
  arena *ar = arena_new();
  onnx_model m;
  gx_graph g;
  if (!ar) die(1, "out of memory");
  if (ops->decode(ctx, ar, a.model, bytes, n_bytes, &m)) die(2, "%s", ap_ctx_error(ctx));
  free(bytes);
  const char **names = NULL;
  int n_names = 0, n_pk = 0;
  gx_packed *pk = NULL;
  json_t *pdoc = plan_names(a.plan, &names, &n_names);
  if (gx_unpack(ctx, ar, a.model, &m, names, n_names, &pk, &n_pk)) die(2, "%s", ap_ctx_error(ctx));
  json_decref(pdoc);
  free(names);
  if (gx_graph_build(ctx, a.model, &m, &g)) die(2, "%s", ap_ctx_error(ctx));
  gr_plan p;
  read_plan(a.plan, &g, pk, n_pk, &p);
  free(pk);
  gr_data data = {0};
  open_data(ctx, a.data, &g, &data);
  float *w = calloc((size_t)(g.n_weights ? g.n_weights : 1), sizeof *w);
  float *gw = calloc((size_t)(g.n_weights ? g.n_weights : 1), sizeof *gw);
  float *mom = calloc((size_t)(g.n_weights ? g.n_weights : 1), sizeof *mom);
  float *var = calloc((size_t)(g.n_weights ? g.n_weights : 1), sizeof *var);
  if (!w || !gw || !mom || !var) die(1, "out of memory for %lld parameters", (long long)g.n_weights);
  if (gx_graph_init(ctx, &g, a.init, w)) die(2, "%s", ap_ctx_error(ctx));
  if (a.check) {
    printf("ranks %d\n", p.n_dev);
    free(w), free(gw), free(mom), free(var), free(data.in), free(p.ops), free(p.stage_of);
    st_free(&data.f);
    gx_graph_free(&g);
    arena_free(ar);
    ap_ctx_free(ctx);
    return 0;
  }
  if (!a.result) die(2, "--result: required without --check");
  MPI_Init(&argc, &argv);
  int rank, world;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  rk_mpi_started(rank);
  if (world != p.n_dev) die(2, "%s: the plan has %d devices but the job has %d ranks", a.plan, p.n_dev, world);
  /* This rank's stage (stages take consecutive ranks in order) and its place on the stage's mesh, whose last
   * axis takes consecutive ranks (docs/graph-plan.md "Mesh"). */
  int stage = 0;
  while (stage + 1 < p.n_stages && rank >= p.base[stage + 1]) stage++;
  int lr = rank - p.base[stage];
  gx_mesh mesh = {.n_axes = p.axes[stage], .all_reduce = mesh_all_reduce, .sum_d = mesh_sum_d};
  mesh.size[0] = p.mesh[stage][0], mesh.size[1] = p.axes[stage] > 1 ? p.mesh[stage][1] : 1;
  mesh.coord[0] = (int)(lr / mesh.size[1]), mesh.coord[1] = (int)(lr % mesh.size[1]);
  MPI_Comm stage_comm;
  MPI_Comm_split(MPI_COMM_WORLD, stage, lr, &stage_comm);
  g_axes_comm[3] = stage_comm;
  if (p.axes[stage] == 1) {
    g_axes_comm[1] = stage_comm;
  } else {
    MPI_Comm_split(stage_comm, mesh.coord[1], mesh.coord[0], &g_axes_comm[1]);
    MPI_Comm_split(stage_comm, mesh.coord[0], mesh.coord[1], &g_axes_comm[2]);
  }
  gr_link link = {.p = &p, .stage_rank = lr};
  gx_pipe pipe = {p.n_stages, stage, p.stage_of, &link, pipe_send, pipe_recv, pipe_flush};
  int out_stage = g.producer[g.output] >= 0 && p.stage_of[g.producer[g.output]] >= 0 ? p.stage_of[g.producer[g.output]] : 0;
  int64_t B = p.gbs, mb = B / p.micro_batches, per_out = 0;
  gx_shape *shapes = world > 1 ? calloc((size_t)g.n_vals, sizeof *shapes) : NULL;
  if (world > 1 && !shapes) die(1, "out of memory");
  gx_tensor *in = calloc((size_t)(g.n_inputs ? g.n_inputs : 1), sizeof *in), lab;
  double *loss = calloc((size_t)a.steps, sizeof *loss), *time_s = calloc((size_t)a.steps, sizeof *time_s);
  double *cpu_s = calloc((size_t)a.steps, sizeof *cpu_s);
  gx_run *runs = calloc((size_t)p.micro_batches, sizeof *runs);
  gx_shard_mb **mbs = calloc((size_t)p.micro_batches, sizeof *mbs);
  if (!in || !loss || !time_s || !cpu_s || !runs || !mbs) die(1, "out of memory");
  per_out = data.labels->n_elems / data.n_samples; /* label values per sample (mse: the output's per sample) */
  for (int64_t t = 0; t < a.steps; t++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime(), c0 = cpu_s_now();
    if (t == 0 && a.fail_rank == rank) die(1, "failing on purpose (--fail-rank %d)", rank);
    memset(gw, 0, sizeof *gw * (size_t)g.n_weights);
    double l_sum = 0;
    for (int u = 0; u < p.micro_batches; u++) {
      /* Micro-batch u of the global batch: samples u·B/m … (u+1)·B/m − 1, this rank's slice of them, so that
       * BatchNormalization sees the same samples on any number of ranks. */
      int64_t first = t * B + u * mb;
      for (int i = 0; i < g.n_inputs; i++) {
        bool is_int = m.inputs[0].elem_type != ONNX_FLOAT;
        for (int k = 0; k < m.n_inputs; k++)
          if (strcmp(m.inputs[k].name, g.names[g.inputs[i]]) == 0) is_int = m.inputs[k].elem_type != ONNX_FLOAT;
        if (!batch_of(data.in[i], is_int, data.n_samples, first, mb, &in[i])) die(1, "out of memory");
      }
      if (!batch_of(data.labels, a.loss == GX_LOSS_XENT, data.n_samples, first, mb, &lab)) die(1, "out of memory");
      double scale = 1.0 / ((double)B * (a.loss == GX_LOSS_MSE ? (double)per_out : 1.0));
      runs[u] = (gx_run){.g = &g, .w = w, .gw = gw};
      if (shapes && t == 0 && u == 0 && !gx_shapes(&runs[u], in, shapes)) die(2, "%s: %s", a.model, runs[u].err);
      if (!shapes) {
        double l = gx_step(&runs[u], in, &lab, a.loss, scale);
        if (isnan(l)) die(2, "%s: %s", a.model, runs[u].err);
        l_sum += l;
      } else {
        /* GPipe's order (Huang et al. 2019): every micro-batch's forward, then the backwards in reverse. The
         * numbers are the same under 1F1B, which orders the same passes differently. */
        if (!(mbs[u] = gx_shard_fwd(&runs[u], &mesh, p.ops, shapes, &pipe, in))) die(2, "%s: %s", a.model, runs[u].err);
        if (gx_shard_has_output(mbs[u])) {
          double l = gx_shard_loss(mbs[u], &lab, a.loss, scale);
          if (isnan(l)) die(2, "%s: %s", a.model, runs[u].err);
          l_sum += l;
        }
      }
      for (int i = 0; i < g.n_inputs; i++) gx_free(&in[i]);
      gx_free(&lab);
    }
    for (int u = p.micro_batches - 1; shapes && u >= 0; u--)
      if (!gx_shard_bwd(mbs[u])) die(2, "%s: %s", a.model, runs[u].err);
    if (world > 1) MPI_Allreduce(MPI_IN_PLACE, gw, (int)g.n_weights, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (a.sgd) {
      /* torch.optim.SGD without momentum (torch/optim/sgd.py, _single_tensor_sgd at v1.13): g ← g + wd·p; p ← p − lr·g. */
      for (int64_t e = 0; e < g.n_weights; e++) w[e] -= (float)a.opt.lr * (gw[e] + (float)a.opt.weight_decay * w[e]);
    } else {
      ex_adamw_step(&g.table, &a.opt, t + 1, w, gw, mom, var, 0, g.n_weights);
    }
    double total = l_sum; /* every rank of the output's stage computed the whole loss */
    MPI_Bcast(&total, 1, MPI_DOUBLE, p.base[out_stage], MPI_COMM_WORLD);
    double my_cpu = cpu_s_now() - c0;
    MPI_Barrier(MPI_COMM_WORLD);
    time_s[t] = MPI_Wtime() - t0;
    MPI_Allreduce(&my_cpu, &cpu_s[t], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    loss[t] = total / ((double)B * (a.loss == GX_LOSS_MSE ? (double)per_out : 1.0));
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  long my_rss = ru.ru_maxrss, *rss = calloc((size_t)world, sizeof *rss);
  if (!rss) die(1, "out of memory");
  MPI_Gather(&my_rss, 1, MPI_LONG, rss, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    if (a.save) save_weights(ctx, a.save, &g, w);
    write_result(ctx, &a, &g, &p, world, loss, time_s, cpu_s, rss);
  }
  free(rss);
  free(shapes);
  free(p.ops);
  if (p.axes[stage] > 1) {
    MPI_Comm_free(&g_axes_comm[1]);
    MPI_Comm_free(&g_axes_comm[2]);
  }
  MPI_Comm_free(&stage_comm);
  free(link.req);
  free(runs);
  free(mbs);
  free(p.stage_of);
  free(in);
  free(loss);
  free(time_s);
  free(cpu_s);
  free(w);
  free(gw);
  free(mom);
  free(var);
  free(data.in);
  st_free(&data.f);
  gx_graph_free(&g);
  arena_free(ar);
  ap_ctx_free(ctx);
  MPI_Finalize();
  return 0;
}
