/* The environment of an evaluation (cost layer): the model's graph and the cluster with what the cost model
 * derives from them once (a compute model per node group, the pipeline units, the calibration's constants), and
 * the communication groups of a plan (groups.c derives them from its rank lists), memoised across the plans of
 * one search. Everything a plan evaluation (estimate.c, rank.c, layer.c) reads about the model and the cluster
 * comes from here. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/calib.h"
#include "cost/internal.h"
#include "plan/stack.h"

ap_status cost_env_new(ap_ctx *ctx, const ap_model *m, const ap_cluster *c, const cost_tuning *t, cost_env **out) {
  *out = NULL;
  cost_env *env = calloc(1, sizeof *env);
  if (!env || !(env->a = arena_new())) {
    free(env);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  env->model = m;
  env->g = model_graph(m);
  env->cluster = c;
  env->hc = hw_cluster_of(c);
  /* The calibration in force (--calibration, else the shipped one) when no tuning is given: its constants for
   * each node group's own device type. */
  cost_calib *cal = NULL;
  if (t) {
    env->tuning = *t;
    env->origin.how = CALIB_GIVEN;
  } else {
    cal = malloc(sizeof *cal);
    ap_status cst = cal ? calib_of_ctx(ctx, cal) : ctx_fail(ctx, AP_NOMEM, "out of memory");
    if (!cst) env->tuning = calib_tuning_for_device(cal, &env->hc->groups[0].device, &env->origin);
    if (!cst && cal->n_bands) {
      env->bands = arena_alloc(env->a, sizeof *env->bands * (size_t)cal->n_bands);
      if (!env->bands) cst = ctx_fail(ctx, AP_NOMEM, "out of memory");
      else memcpy(env->bands, cal->bands, sizeof *env->bands * (size_t)cal->n_bands);
      env->n_bands = env->bands ? cal->n_bands : 0;
    }
    if (!cst && cal->n_points) {
      env->points = arena_alloc(env->a, sizeof *env->points * (size_t)cal->n_points);
      if (!env->points) cst = ctx_fail(ctx, AP_NOMEM, "out of memory");
      else memcpy(env->points, cal->points, sizeof *env->points * (size_t)cal->n_points);
      env->n_points = env->points ? cal->n_points : 0;
    }
    if (cst) {
      free(cal);
      cost_env_free(env);
      return cst;
    }
  }
  plan_model_facts_of(env->g, &env->facts);
  ap_status st = compute_model_init(ctx, env->a, &env->hc->groups[0].device, &env->tuning.compute, &env->cm);
  /* A compute model per node group, so that each pipeline rank is costed on its own device. */
  env->group_cm = st ? NULL : arena_alloc(env->a, sizeof(compute_model) * (size_t)env->hc->n_groups);
  if (!st && !env->group_cm) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  for (int gi = 0; !st && gi < env->hc->n_groups; gi++) {
    const hw_device *dev = &env->hc->groups[gi].device;
    compute_tuning ct = cal ? calib_tuning_for_device(cal, dev, NULL).compute : env->tuning.compute;
    if (gi == 0) env->group_cm[0] = env->cm;
    else st = compute_model_init(ctx, env->a, dev, &ct, &env->group_cm[gi]);
  }
  free(cal);
  if (st) {
    cost_env_free(env);
    return st;
  }
  /* Pipeline units: the repeats of layer blocks (or of every block for graphs without layers). */
  env->n_layers = env->facts.n_layers;
  env->memo = arena_alloc(env->a, sizeof *env->memo);
  env->flops = arena_alloc(env->a, sizeof *env->flops);
  env->unit_block = arena_alloc(env->a, sizeof(int) * (size_t)(env->n_layers > 0 ? env->n_layers : 1));
  if (!env->unit_block || !env->memo) {
    cost_env_free(env);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  int64_t u = 0;
  for (int i = 0; i < env->g->n_blocks; i++) {
    const graph_block *blk = &env->g->blocks[i];
    if (env->facts.has_layers && blk->role != BLOCK_LAYER) continue;
    for (int64_t r = 0; r < blk->repeat && u < env->n_layers; r++) env->unit_block[u++] = i;
  }
  /* The blocks that can end a chunk, once per run of units of one block (cost_boundary_bytes reads them on
   * every rank's cost, so the scan over all units is done here once). */
  env->boundary_blocks = arena_alloc(env->a, sizeof(int) * (size_t)(env->n_layers > 0 ? env->n_layers : 1));
  if (!env->boundary_blocks) {
    cost_env_free(env);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  for (int64_t k = 0; k + 1 < env->n_layers; k++) {
    if (k > 0 && env->unit_block[k] == env->unit_block[k - 1]) continue;
    if (env->g->blocks[env->unit_block[k]].output < 0) continue;
    env->boundary_blocks[env->n_boundary_blocks++] = env->unit_block[k];
  }
  *out = env;
  return AP_OK;
}

void cost_env_free(cost_env *env) {
  if (!env) return;
  arena_free(env->a);
  free(env);
}

void cost_env_set_tuning(cost_env *env, const cost_tuning *t) {
  env->tuning = *t;
  env->cm.tuning = t->compute;
  for (int gi = 0; gi < env->hc->n_groups; gi++) env->group_cm[gi].tuning = t->compute; /* */
}

double cost_seq_len(const cost_env *env, const plan *p) {
  return (double)(p->seq_length > 0 ? p->seq_length : env->g->default_seq);
}

const graph *cost_env_graph(const cost_env *env) { return env->g; }
const hw_cluster *cost_env_cluster(const cost_env *env) { return env->hc; }
const cost_tuning *cost_env_tuning(const cost_env *env) { return &env->tuning; }
const plan_model_facts *cost_env_facts(const cost_env *env) { return &env->facts; }
int64_t cost_env_n_layers(const cost_env *env) { return env->n_layers; }
const int *cost_env_unit_block(const cost_env *env) { return env->unit_block; }

/* ---- The plan's communication groups (groups.h derives them; memoised here by rank shape) ---- */

static uint64_t shape_hash(const rank_shape *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (int i = 0; i < s->n_axes; i++) {
    h = (h ^ (uint64_t)s->degree[i]) * 1099511628211ull;
    h = (h ^ s->kind[i]) * 1099511628211ull;
  }
  return h ^ (uint64_t)s->n_axes;
}

static bool shape_equal(const rank_shape *a, const rank_shape *b) {
  if (a->n_axes != b->n_axes) return false;
  for (int i = 0; i < a->n_axes; i++)
    if (a->degree[i] != b->degree[i] || a->kind[i] != b->kind[i]) return false;
  return true;
}

/* The slot of key in a table of n (a power of two) entries of `size` bytes whose first members are `bool used`
 * and the key: the entry holding it, else the first free one of its probes (*fresh), else its home (*fresh). */
static void *memo_slot(void *table, size_t size, size_t key_offset, int n, const rank_shape *key, bool *fresh) {
  uint64_t h = shape_hash(key);
  char *t = table;
  *fresh = true;
  for (int i = 0; i < MEMO_PROBES; i++) {
    char *e = t + (size_t)((h + (uint64_t)i) & (uint64_t)(n - 1)) * size;
    if (!*(bool *)e) return e;
    if (shape_equal((const rank_shape *)(e + key_offset), key)) {
      *fresh = false;
      return e;
    }
  }
  return t + (size_t)(h & (uint64_t)(n - 1)) * size;
}

/* The comm_group of the groups of `axes` under p's order. */
static ap_status axis_group(ap_ctx *ctx, const cost_env *env, const plan *p, unsigned axes, comm_group *out) {
  rank_shape key;
  if (!rank_shape_of_axes(p, axes, &key)) return ctx_fail(ctx, AP_INVALID, "plan: the rank order is not a permutation");
  bool fresh;
  group_memo_entry *e = memo_slot(env->memo->groups, sizeof *e, offsetof(group_memo_entry, key), GROUP_MEMO_SLOTS,
                                  &key, &fresh);
  if (fresh) {
    group_geom geo;
    ap_status st = group_geom_of(ctx, env->hc, &key, &geo);
    if (!st) st = comm_group_from_counts(ctx, env->hc, geo.n_ranks, geo.per_level, 0, &e->g);
    e->used = !st;
    e->key = key;
    if (st) return st;
  }
  *out = e->g;
  return AP_OK;
}

/* The hops pipeline rank r sends or receives over, as chunks pass from rank to rank (plan_chunk_rank: 1F1B
 * and its kin go 0 .. pp-1, interleaving also wraps from the last rank to the first, the V schedule turns back
 * on the last rank): r's level is the outermost of those hops' levels. */
static void pipe_levels(const plan *p, const uint8_t *hop_level, uint8_t *rank_level) {
  memset(rank_level, 0, (size_t)p->pp);
  int64_t n = plan_n_chunks(p);
  for (int64_t c = 0; c + 1 < n; c++) {
    int64_t a = plan_chunk_rank(p, c), b = plan_chunk_rank(p, c + 1);
    if (a == b) continue;
    int64_t lo = a < b ? a : b, hi = a < b ? b : a;
    uint8_t l = hop_level[hi - lo == 1 ? lo : p->pp - 1]; /* neighbours, or the wrap pp-1 -> 0 */
    if (l > rank_level[a]) rank_level[a] = l;
    if (l > rank_level[b]) rank_level[b] = l;
  }
}

static ap_status pipe_group(ap_ctx *ctx, const cost_env *env, const plan *p, plan_groups *out) {
  group_memo *m = env->memo;
  out->pp_link = m->pair;
  memset(out->pp_level, 0, sizeof out->pp_level);
  if (p->pp <= 1) return AP_OK;
  if (p->pp > COST_MAX_RANKS)
    return ctx_fail(ctx, AP_INVALID, "plan: pp = %lld exceeds %d", (long long)p->pp, COST_MAX_RANKS);
  if (m->pair[0].n_ranks == 0) {
    /* The pairs, once per environment: two ranks that share domains from level l outward. */
    for (int l = 0; l < env->hc->n_levels; l++) {
      int64_t per[HW_MAX_LEVELS];
      for (int k = 0; k < env->hc->n_levels; k++) per[k] = k < l ? 1 : 2;
      ap_status st = comm_group_from_counts(ctx, env->hc, 2, per, 0, &m->pair[l]);
      if (st) return st;
    }
  }
  rank_shape key;
  rank_shape_of_pipe(p, &key);
  bool fresh;
  pipe_memo_entry *e =
      memo_slot(m->pipes, sizeof *e, offsetof(pipe_memo_entry, key), PIPE_MEMO_SLOTS, &key, &fresh);
  if (fresh) {
    ap_status st = pipe_hops_of(ctx, env->hc, &key, e->hop_level);
    e->used = !st;
    e->key = key;
    if (st) return st;
  }
  pipe_levels(p, e->hop_level, out->pp_level);
  return AP_OK;
}

ap_status cost_plan_groups(ap_ctx *ctx, const cost_env *env, const plan *p, plan_groups *out) {
  ap_status st;
  group_memo *m = env->memo;
  const int64_t mesh[8] = {p->tp, p->cp, p->dp, p->pp, p->ep, plan_etp(p), p->vpp, (int64_t)p->schedule};
  if (m->have_last && memcmp(mesh, m->last_mesh, sizeof mesh) == 0 &&
      memcmp(p->order, m->last_order, sizeof p->order) == 0) {
    *out = m->last;
    return AP_OK;
  }
  const unsigned TP = 1u << PLAN_AXIS_TP, CP = 1u << PLAN_AXIS_CP, EP = 1u << PLAN_AXIS_EP, DP = 1u << PLAN_AXIS_DP,
                 EDP = 1u << PLAN_AXIS_EDP;
  /* Megatron's gradient-reduce group is dp-cp (parallel_state.py get_ranks("dp-cp")) whatever lies between the
   * two in the order; the expert mesh reduces over edp. */
  if ((st = axis_group(ctx, env, p, TP, &out->tp)) || (st = axis_group(ctx, env, p, CP, &out->cp)) ||
      (st = axis_group(ctx, env, p, EP, &out->ep)) || (st = axis_group(ctx, env, p, DP | CP, &out->dp)) ||
      (st = axis_group(ctx, env, p, EDP, &out->edp)))
    return st;
  if ((st = pipe_group(ctx, env, p, out))) return st;
  m->have_last = true;
  memcpy(m->last_mesh, mesh, sizeof mesh);
  memcpy(m->last_order, p->order, sizeof p->order);
  m->last = *out;
  return AP_OK;
}

const comm_group *cost_pp_group(const plan_groups *pg, int r) {
  return &pg->pp_link[r >= 0 && r < COST_MAX_RANKS ? pg->pp_level[r] : 0];
}

/* The compute model of node group g (the first group's for an index out of range). */
const compute_model *cost_group_model(const cost_env *env, int g) {
  return g > 0 && g < env->hc->n_groups ? &env->group_cm[g] : &env->cm;
}

/* Whether a node group's devices [first, first + n) hold any device of pipeline rank r, whose devices
 * are those d with (d / stride) mod pp = r. Steps a stride at a time, so at most pp + 1 steps find one. */
static bool group_holds_rank(int64_t first, int64_t n, int64_t stride, int64_t pp, int64_t r) {
  for (int64_t d = first; d < first + n;) {
    int64_t seg = d / stride;
    if (seg % pp == r) return true;
    d = (seg + 1) * stride;
  }
  return false;
}

int cost_rank_group(const cost_env *env, const plan *p, int64_t r, double *capacity_bytes) {
  const hw_cluster *hc = env->hc;
  int best = 0;
  double cap = (double)hc->groups[0].device.mem_bytes;
  int64_t stride = hc->n_groups > 1 ? plan_axis_stride(p, PLAN_AXIS_PP) : 0; /* one group: no walk */
  if (hc->n_groups > 1 && stride > 0 && p->pp > 0) {
    bool any = false;
    for (int gi = 0; gi < hc->n_groups; gi++) {
      const hw_node_group *g = &hc->groups[gi];
      if (!group_holds_rank(g->first_rank, g->n_devices, stride, p->pp, r)) continue;
      double peak = g->device.peak_flop_per_s[HW_DTYPE_BF16];
      if (!any || peak < hc->groups[best].device.peak_flop_per_s[HW_DTYPE_BF16]) best = gi;
      if (!any || (double)g->device.mem_bytes < cap) cap = (double)g->device.mem_bytes;
      any = true;
    }
  }
  if (capacity_bytes) *capacity_bytes = cap;
  return best;
}

const calib_origin *cost_env_origin(const cost_env *env) { return &env->origin; }

bool cost_env_executor(const cost_env *env) {
  if (!env->facts.has_layers) return false;
  for (int g = 0; g < env->hc->n_groups; g++) {
    const compute_model *cm = cost_group_model(env, g);
    if (!cm->exec || !cm->exec->present) return false;
  }
  return true;
}

plan_stack cost_env_stack(const cost_env *env, const plan *p, const char **why) {
  const char *w = "stated";
  plan_stack st = p->stack;
  if (st == PLAN_STACK_DEFAULT && cost_env_executor(env)) {
    st = PLAN_STACK_AUTOPAR;
    w = "the cluster's devices are autopar profile's CPU ranks, which the reference executor runs";
  } else if (st == PLAN_STACK_DEFAULT) {
    st = plan_stack_default(env->facts.has_layers);
    w = "the default";
  }
  if (why) *why = w;
  return st;
}

const calib_band *cost_env_band(const cost_env *env, const plan *p) {
  /* Residuals of fitted constants say nothing of the documented defaults. */
  if (env->origin.how == CALIB_DEFAULTS) return NULL;
  const plan_stack_info *s =
      plan_stack_get(p->stack == PLAN_STACK_DEFAULT ? plan_stack_default(env->facts.has_layers) : p->stack);
  return calib_band_for(env->bands, env->n_bands, env->hc->groups[0].device.family, s ? s->name : "any");
}

void cost_env_point(const cost_env *env, const plan *p, calib_point *out) {
  memset(out, 0, sizeof *out);
  const char *fam = env->hc->groups[0].device.family;
  /* validate's points name a device of no stated family "unknown" (report/validate_band.c). */
  snprintf(out->family, sizeof out->family, "%s", fam[0] ? fam : "unknown");
  snprintf(out->stack, sizeof out->stack, "%s", plan_stack_name(cost_env_stack(env, p, NULL)));
  for (int b = 0; b < env->g->n_blocks; b++) out->moe = out->moe || env->g->blocks[b].is_moe;
  out->offload = p->offload_optimizer != PLAN_OFFLOAD_NONE || p->offload_param != PLAN_OFFLOAD_NONE;
  out->chip_unseen = env->origin.how != CALIB_FITTED;
  int64_t n = plan_n_devices(p);
  out->num_gpus = n > 0 ? (double)n : 1;
  out->err = out->mem_err = NAN;
}

int cost_env_point_band(const cost_env *env, const plan *p, bool memory, calib_near_band *out) {
  memset(out, 0, sizeof *out);
  /* Residuals of fitted constants say nothing of the documented defaults, nor of constants a caller gives. */
  if (env->origin.how == CALIB_DEFAULTS || env->origin.how == CALIB_GIVEN || !env->n_points) return 0;
  calib_point t;
  cost_env_point(env, p, &t);
  return calib_points_band(&t, env->points, env->n_points, NULL, memory, out);
}
