/* The reference executor's cost on a CPU device (cost layer; exec_cpu.h). Where it applies (stack autopar, a
 * device whose profile carries the "executor" object of `autopar profile`), it replaces the GPU framework
 * model's pieces with what src/exec/ does, op by op, priced from the profile:
 *  - time of a layer pass: every cblas_sgemm the executor calls (forward y = x·Wᵀ, input gradient dy·W and
 *    weight gradient dyᵀ·x, at their shapes, from the measured table by layout), the per-head attention
 *    kernel, norms, activation, RoPE, residual adds and buffer zeroing at their measured per-unit times, and
 *    every MPI collective the executor makes (blocking, so on the pass's path) at its measured alpha-beta for
 *    that collective and group size; recompute repeats what the executor repeats (ex_layer.c restore);
 *  - the loss head and embedding as ex_head_loss and ex_embed run them (whole on every tensor-parallel rank);
 *  - the step's end (rank.c update_range): gradients zeroed, the tensor-parallel all-reduce of each chunk's
 *    whole gradient, all-reduce or ZeRO's reduce-scatter and all-gather over dp·cp, AdamW over the owned part;
 *  - memory: the process's base resident set, the whole fp32 parameter and gradient buffers every rank keeps
 *    (and the tensor-parallel scratch copy), the optimizer moments of what it updates, the saved activations
 *    exactly as ex_layer.c allocates them per recompute policy times the micro-batches in flight, one layer's
 *    working set and the head's logits.
 * The aggregation stays estimate.c's, so the simulator and the searches see the same chunk times; estimate.c
 * takes a pipeline plan's time from the simulator's replay of the schedule's lists, which the executor runs as
 * they are. Layer collectives are priced in step (coll_in_s), the step's end ones in isolation (coll_s). Sources: the executor's code (src/exec/ex_layer.c, ex_moe.c, rank.c, rank_pipe.c) for what
 * runs; the measurements are the profile's, one set per machine, none per plan. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonx.h"
#include "cost/internal.h"
#include "plan/schedule.h"
#include "plan/stack.h"

/* ---- The profile's executor part ------------------------------------------------------------------------- */

static const char *const coll_names[EXEC_COLL_COUNT_] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                                        "send_recv"};
static const char *const layout_names[EXEC_LAYOUT_COUNT_] = {"nt", "nn", "tn"};

/* The index of name among n names, n when absent. */
static int name_index(const char *const *names, int n, const char *name) {
  int i = 0;
  while (i < n && strcmp(names[i], name) != 0) i++;
  return i;
}

ap_status exec_cpu_profile_parse(ap_ctx *ctx, const char *file, const void *root_v, exec_cpu_profile *out) {
  json_t *root = (json_t *)(uintptr_t)root_v;
  memset(out, 0, sizeof *out);
  json_t *ex = json_object_get(root, "executor");
  if (!ex) return AP_OK;
  jx_src src = {ctx, file, "executor"};
  struct {
    const char *key;
    double *v;
  } f[] = {{"norm_fwd_s", &out->norm_fwd_s},     {"norm_bwd_s", &out->norm_bwd_s}, {"swiglu_fwd_s", &out->swiglu_fwd_s},
           {"swiglu_bwd_s", &out->swiglu_bwd_s}, {"gelu_fwd_s", &out->gelu_fwd_s}, {"gelu_bwd_s", &out->gelu_bwd_s},
           {"rope_s", &out->rope_s},             {"attn_fwd_s", &out->attn_fwd_s}, {"attn_bwd_s", &out->attn_bwd_s},
           {"xent_s", &out->xent_s},             {"adam_s", &out->adam_s},         {"copy_s", &out->copy_s}};
  ap_status st;
  for (size_t i = 0; i < AP_COUNT(f); i++)
    if ((st = jx_f64(&src, ex, f[i].key, true, 0, 1, f[i].v, NULL))) return st;
  if ((st = jx_f64(&src, ex, "base_rss_bytes", true, 0, 1e15, &out->base_rss_bytes, NULL)) ||
      (st = jx_f64(&src, ex, "attn_head_dim", true, 1, 1e6, &out->attn_head_dim, NULL)))
    return st;
  json_t *gemm = json_object_get(root, "gemm"), *e;
  size_t i;
  json_array_foreach(gemm, i, e) {
    const char *lay = "nt";
    char where[64];
    snprintf(where, sizeof where, "gemm[%zu]", i);
    jx_src es = {ctx, file, where};
    double m = 0, n = 0, k = 0, t = 0;
    if ((st = jx_str(&es, e, "layout", false, &lay, NULL)) || (st = jx_f64(&es, e, "m", true, 1, 1e12, &m, NULL)) ||
        (st = jx_f64(&es, e, "n", true, 1, 1e12, &n, NULL)) || (st = jx_f64(&es, e, "k", true, 1, 1e12, &k, NULL)) ||
        (st = jx_f64(&es, e, "time_s", true, 1e-12, 1e6, &t, NULL)))
      return st;
    int l = name_index(layout_names, EXEC_LAYOUT_COUNT_, lay);
    if (l == EXEC_LAYOUT_COUNT_) return jx_fail(&es, "layout", "expected nt, nn or tn, got \"%s\"", lay);
    if (out->n_gemm == EXEC_CPU_MAX_GEMM) return jx_fail(&src, "gemm", "more than %d GEMMs", EXEC_CPU_MAX_GEMM);
    int g = out->n_gemm++;
    out->gemm[g].layout = (exec_layout)l;
    out->gemm[g].log_m = log(m), out->gemm[g].log_n = log(n), out->gemm[g].log_k = log(k);
    out->gemm[g].s_per_flop = t / (2 * m * n * k);
  }
  if (out->n_gemm == 0) return jx_fail(&src, "gemm", "an executor profile needs measured GEMMs");
  json_t *comm = json_object_get(root, "comm");
  json_array_foreach(comm, i, e) {
    char where[64];
    snprintf(where, sizeof where, "comm[%zu]", i);
    jx_src es = {ctx, file, where};
    const char *op = NULL;
    int64_t ranks = 0;
    double alpha = 0, bw = 0;
    if ((st = jx_str(&es, e, "op", true, &op, NULL)) || (st = jx_i64(&es, e, "ranks", true, 2, 1 << 20, &ranks, NULL)) ||
        (st = jx_f64(&es, e, "alpha_s", true, 0, 10, &alpha, NULL)) || (st = jx_f64(&es, e, "bw_Bps", true, 1, 1e15, &bw, NULL)))
      return st;
    int c = name_index(coll_names, EXEC_COLL_COUNT_, op);
    if (c == EXEC_COLL_COUNT_) return jx_fail(&es, "op", "unknown collective \"%s\"", op);
    if (out->n_comm == EXEC_CPU_MAX_COMM) return jx_fail(&src, "comm", "more than %d fits", EXEC_CPU_MAX_COMM);
    int q = out->n_comm++;
    out->comm[q].op = (exec_coll)c;
    out->comm[q].ranks = ranks;
    out->comm[q].alpha_s = alpha, out->comm[q].bw_Bps = bw;
    for (int which = 0; which < 2; which++) {
      const char *key = which ? "in_step_points" : "points";
      json_t *pts = json_object_get(e, key), *pt;
      if (pts && !json_is_array(pts)) return jx_fail(&es, key, "expected an array of {bytes, time_s}");
      int *np = which ? &out->comm[q].n_in_step : &out->comm[q].n_points;
      double *pb = which ? out->comm[q].in_bytes : out->comm[q].bytes, *pv = which ? out->comm[q].in_time_s : out->comm[q].time_s;
      size_t j;
      json_array_foreach(pts, j, pt) {
        char pwhere[96];
        snprintf(pwhere, sizeof pwhere, "comm[%zu].%s[%zu]", i, key, j);
        jx_src ps = {ctx, file, pwhere};
        double b = 0, t = 0;
        if ((st = jx_f64(&ps, pt, "bytes", true, 1, 1e15, &b, NULL)) || (st = jx_f64(&ps, pt, "time_s", true, 1e-12, 1e3, &t, NULL)))
          return st;
        if (*np == EXEC_CPU_MAX_POINTS) return jx_fail(&ps, "bytes", "more than %d points", EXEC_CPU_MAX_POINTS);
        if (*np > 0 && b <= pb[*np - 1]) return jx_fail(&ps, "bytes", "expected sizes in ascending order");
        /* a larger message never takes less time in isolation: a point below its predecessor is the noise of
         * measuring (in a step the wait for a partner dominates small sizes, so those points stay as measured) */
        pb[*np] = b, pv[*np] = !which && *np > 0 ? fmax(t, pv[*np - 1]) : t;
        (*np)++;
      }
    }
  }
  out->present = true;
  return AP_OK;
}

/* ---- Pricing ----------------------------------------------------------------------------------------------- */

bool cost_exec_cpu_on(const cost_env *env, int group, const plan *p) {
  const compute_model *cm = cost_group_model(env, group);
  return cost_env_stack(env, p, NULL) == PLAN_STACK_AUTOPAR && cm->exec && cm->exec->present && env->facts.has_layers;
}

void cost_exec_cpu_origin(const cost_env *env, char *out, size_t n) {
  const exec_cpu_profile *x = cost_group_model(env, 0)->exec;
  snprintf(out, n,
           "the reference executor's own cost model (docs/executor.md) on the cluster's profile: %d measured GEMM shapes "
           "by layout, its kernels' measured times, the base RSS and %d measured collectives; no fitted constants",
           x ? x->n_gemm : 0, x ? x->n_comm : 0);
}

/* Seconds of one sgemm: the measured seconds per FLOP of the nearest shapes of that layout (inverse-distance
 * weights over the 4 nearest in log m, log n, log k; no curve: a CPU core's rate is what was measured). */
static double gemm_s(const exec_cpu_profile *x, exec_layout lay, double m, double n, double k) {
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  double lm = log(m), ln = log(n), lk = log(k), bd[4] = {INFINITY, INFINITY, INFINITY, INFINITY}, bv[4] = {0};
  int any = 0;
  for (int pass = 0; pass < 2 && !any; pass++)
    for (int i = 0; i < x->n_gemm; i++) {
      if (pass == 0 && x->gemm[i].layout != lay) continue;
      any = 1;
      double d = (x->gemm[i].log_m - lm) * (x->gemm[i].log_m - lm) + (x->gemm[i].log_n - ln) * (x->gemm[i].log_n - ln) +
                 (x->gemm[i].log_k - lk) * (x->gemm[i].log_k - lk);
      for (int j = 0; j < 4; j++)
        if (d < bd[j]) {
          for (int q = 3; q > j; q--) bd[q] = bd[q - 1], bv[q] = bv[q - 1];
          bd[j] = d, bv[j] = x->gemm[i].s_per_flop;
          break;
        }
    }
  double w = 0, v = 0;
  for (int j = 0; j < 4 && isfinite(bd[j]); j++) w += 1 / (bd[j] + 1e-3), v += bv[j] / (bd[j] + 1e-3);
  return w > 0 ? 2 * m * n * k * v / w : 0;
}

double exec_cpu_gemm_s(const exec_cpu_profile *x, exec_layout lay, double m, double n, double k) {
  return x && x->present ? gemm_s(x, lay, m, n, k) : 0;
}

/* Linear interpolation of n points (b ascending) at bytes: the first point's value below it, the last segment
 * extended past the last. */
static double interp(const double *b, const double *t, int n, double bytes) {
  if (bytes <= b[0] || n == 1) return t[0];
  int k = 1;
  while (k < n - 1 && bytes > b[k]) k++;
  return t[k - 1] + (bytes - b[k - 1]) * (t[k] - t[k - 1]) / (b[k] - b[k - 1]);
}

/* The profile's entry for collective op at the group size nearest `ranks`, -1 when none. */
static int coll_entry(const exec_cpu_profile *x, exec_coll op, int64_t ranks) {
  int best = -1;
  for (int i = 0; i < x->n_comm; i++) {
    if (x->comm[i].op != op) continue;
    if (best < 0 || llabs((long long)(x->comm[i].ranks - ranks)) < llabs((long long)(x->comm[best].ranks - ranks))) best = i;
  }
  return best;
}

/* Seconds of `bytes` through the profile's comm entry e: its measured points interpolated, else its fit. */
static double entry_s(const exec_cpu_profile *x, int e, double bytes) {
  if (x->comm[e].n_points < 2) return x->comm[e].alpha_s + bytes / x->comm[e].bw_Bps;
  return interp(x->comm[e].bytes, x->comm[e].time_s, x->comm[e].n_points, bytes);
}

/* Seconds of one collective over `ranks` ranks of a buffer of `bytes` (the whole buffer: the gathered result,
 * the scattered input, a rank's all-to-all send buffer, one message), from the profile's measurement of that
 * collective at that group size, else at the nearest measured size. Where the profile has measured points
 * (rank_prof.c: the executor's message sizes, from 4 KiB to past the caches), the time is interpolated linearly
 * between the two points around `bytes`, the smallest point's time below it (latency) and the last segment's
 * seconds per byte past the largest: a single alpha-beta line fitted at the in-cache sizes is 3-4x below a
 * reduce-scatter of a 16 MiB gradient, which no longer fits the caches (docs/executor.md "What separates
 * measured from predicted", I). Without points, the alpha-beta fit. */
static double coll_s(const exec_cpu_profile *x, exec_coll op, int64_t ranks, double bytes) {
  if (ranks <= 1 || bytes <= 0) return 0;
  int best = coll_entry(x, op, ranks);
  return best < 0 ? 0 : entry_s(x, best, bytes);
}

/* Seconds of a blocking collective inside a pass, between two of a layer's kernels: its isolated price (coll_s)
 * plus what the profile measured such a collective to take beyond that in the compute-interleaved pattern
 * (in_step_points, rank_prof.c time_coll_in_step: colder buffers and the wait for a partner whose kernel ran
 * longer), that excess interpolated between the measured sizes and kept at the largest's past it. A profile
 * without in_step_points: the isolated price. */
static double coll_in_s(const exec_cpu_profile *x, exec_coll op, int64_t ranks, double bytes) {
  int best = ranks > 1 && bytes > 0 ? coll_entry(x, op, ranks) : -1;
  if (best < 0) return 0;
  double t = entry_s(x, best, bytes);
  if (x->comm[best].n_in_step == 0) return t;
  const double *b = x->comm[best].in_bytes, *v = x->comm[best].in_time_s;
  int n = x->comm[best].n_in_step;
  double excess[EXEC_CPU_MAX_POINTS];
  for (int i = 0; i < n; i++) excess[i] = fmax(0, v[i] - entry_s(x, best, b[i]));
  return t + (bytes >= b[n - 1] ? excess[n - 1] : interp(b, excess, n, bytes));
}

double exec_cpu_coll_s(const exec_cpu_profile *x, exec_coll op, int64_t ranks, double bytes, bool in_step) {
  if (!x || !x->present) return 0;
  return in_step ? coll_in_s(x, op, ranks, bytes) : coll_s(x, op, ranks, bytes);
}

/* The layer's sizes as the executor reads them (ex_cfg), from the graph's ops. */
typedef struct {
  double H, nh, nkv, hd, F, E, K, V;
  bool gelu, moe;
} exec_dims;

static exec_dims dims_of(const cost_env *env) {
  const graph *g = env->g;
  exec_dims d = {.H = (double)g->hidden_size, .V = (double)g->vocab_size, .E = 0, .K = 1};
  d.gelu = g->arch.act == ARCH_ACT_GELU_TANH || g->arch.act == ARCH_ACT_GELU;
  for (int bi = 0; bi < g->n_blocks; bi++) {
    const graph_block *blk = &g->blocks[bi];
    if (blk->role != BLOCK_LAYER) continue;
    for (int i = 0; i < blk->n_ops; i++) {
      const graph_op *op = &blk->ops[i];
      if (op->kind == OP_ATTENTION) d.nh = (double)op->heads, d.nkv = (double)op->kv_heads, d.hd = (double)op->head_dim_qk;
      if (op->kind != OP_MATMUL || op->weight_is_input) continue;
      if (op->n_experts > 1) d.moe = true, d.E = (double)op->n_experts, d.K = (double)op->top_k;
      /* the MLP's second matmul maps its width back to the hidden size */
      if ((double)op->weight_n == d.H && (double)op->weight_k != d.nh * d.hd && op->weight_k != g->hidden_size)
        d.F = (double)op->weight_k;
    }
    break;
  }
  if (d.F <= 0) d.F = 4 * d.H;
  return d;
}

/* One pass's price and FLOP. */
typedef struct {
  double s, flop;
} acc;

/* A linear layer's forward (y = x·Wᵀ, T rows, out × in), and its backward's input and weight gradients. */
static void lin_fwd(const exec_cpu_profile *x, acc *a, double T, double out, double in) {
  a->s += gemm_s(x, EXEC_NT, T, out, in);
  a->flop += 2 * T * out * in;
}
static void lin_bwd(const exec_cpu_profile *x, acc *a, acc *w, double T, double out, double in) {
  a->s += gemm_s(x, EXEC_NN, T, in, out);
  a->flop += 2 * T * out * in;
  w->s += gemm_s(x, EXEC_TN, out, in, T);
  w->flop += 2 * T * out * in;
}

/* The executor's saved bytes of one layer (ex_layer.c fwd_compute and ex_layer_fwd's drops; ex_moe.c). */
typedef struct {
  double all, P, a, a_full, m, m_full, hact, x;
} layer_bytes;

/* Tm and Fe: the rows the MoE MLP routes and an expert's local width (ex_moe.c rows_of: the whole micro-batch
 * and F/tp with etp = tp; the rank's own rows and F with etp = 1). */
static layer_bytes saved_bytes(const exec_dims *d, double B, double T, double TL, double Sq, double Sk, double tp,
                               double cp, bool sp, double Tm, double Fe) {
  double nhl = d->nh / tp, kvl = d->nkv / tp * d->hd, qdl = nhl * d->hd, Dl = qdl + 2 * kvl, Fl = d->F / tp;
  double upl = d->gelu ? Fl : 2 * Fl, ln = d->gelu ? 2 : 1;
  layer_bytes b = {0};
  b.x = TL * d->H;
  b.a = TL * d->H;
  b.a_full = sp ? T * d->H : 0;
  b.m = TL * d->H;
  b.m_full = sp ? T * d->H : 0;
  b.P = B * nhl * Sq * Sk;
  b.hact = d->moe ? 0 : T * Fl;
  double moe = 0;
  if (d->moe) /* router probabilities, weights, routed rows out and back, each expert's rows, up and activation */
    moe = Tm * d->E + Tm * d->K * 3 + Tm * d->K * d->H * 2 + Tm * d->K * (2 * Fe + Fe);
  b.all = b.x + b.a + ln * TL + b.a_full + T * Dl + b.P + (cp > 1 ? B * Sk * 2 * kvl : 0) + T * qdl + TL * d->H + b.m +
          ln * TL + b.m_full + (d->moe ? moe : T * upl + b.hact);
  b.all *= 4, b.P *= 4, b.a *= 4, b.a_full *= 4, b.m *= 4, b.m_full *= 4, b.hact *= 4, b.x *= 4;
  return b;
}

layer_cost cost_exec_cpu_block(const cost_env *env, int group, const plan *p, const graph_block *blk, double b, double s) {
  const compute_model *cm = cost_group_model(env, group);
  const exec_cpu_profile *x = cm->exec;
  exec_dims d = dims_of(env);
  layer_cost lc = {0};
  double tp = (double)p->tp, cp = (double)p->cp, ep = (double)p->ep;
  bool sp = p->sequence_parallel && p->tp > 1;
  double T = b * s / cp, TL = sp ? T / tp : T, Sq = s / cp, Sk = s, H = d.H;
  double cpy = x->copy_s, act_bytes = 4 * T * H;
  lc.params_dense = (double)graph_block_params(blk);
  if (blk->role != BLOCK_LAYER) {
    /* The head (ex_head_loss) and the embedding run whole on every tensor-parallel rank, over the rank's T rows;
     * under sequence parallelism the head's input is gathered first and its gradient sliced back. */
    acc f = {0}, bw = {0}, w = {0};
    double gather = sp ? coll_in_s(x, EXEC_COLL_ALLGATHER, p->tp, act_bytes) + act_bytes * cpy : 0;
    if (blk->role == BLOCK_HEAD) {
      /* ex_head_loss runs the head's backward too, in the forward pass of the last chunk (rank_pipe.c
       * run_forward): the loss and its gradient, the head's two gradient GEMMs and the final norm's backward,
       * so their time is the forward's (the FLOP stay the backward's) */
      acc hb = {0}, hw = {0};
      f.s += gather + T * H * x->norm_fwd_s;
      lin_fwd(x, &f, T, d.V, H);
      f.s += T * d.V * x->xent_s;
      lin_bwd(x, &hb, &hw, T, d.V, H);
      f.s += hb.s + hw.s + T * H * x->norm_bwd_s;
      bw.flop += hb.flop + hw.flop;
      bw.s += act_bytes * cpy;
    } else {
      f.s += 2 * act_bytes * cpy;
      bw.s += 2 * act_bytes * cpy + gather;
    }
    lc.fwd_s = f.s;
    lc.bwd_s = bw.s + w.s;
    lc.wgrad_s = w.s;
    lc.fwd_flop = f.flop;
    lc.bwd_flop = bw.flop + w.flop;
    lc.recompute_full_s = 0; /* the executor recomputes layers only (ex_layer.c restore) */
    return lc;
  }
  double nhl = d.nh / tp, nkvl = d.nkv / tp, qdl = nhl * d.hd, kvl = nkvl * d.hd, Dl = qdl + 2 * kvl, Fl = d.F / tp;
  double upl = d.gelu ? Fl : 2 * Fl, units = b * nhl * Sq * Sk * d.hd / x->attn_head_dim;
  double norm_f = TL * H * x->norm_fwd_s, norm_b = TL * H * x->norm_bwd_s;
  /* Sequence-parallel gather before a column matmul (and reduce-scatter after a row matmul), each with its
   * rearranging copy (rank.c rk_tp_all_gather_seq); without sequence parallelism the row output all-reduced. */
  double ag = sp ? coll_in_s(x, EXEC_COLL_ALLGATHER, p->tp, act_bytes) + act_bytes * cpy : 0;
  double rs = sp ? coll_in_s(x, EXEC_COLL_REDUCE_SCATTER, p->tp, act_bytes) + act_bytes * cpy
              : p->tp > 1 ? coll_in_s(x, EXEC_COLL_ALLREDUCE, p->tp, act_bytes) : act_bytes * cpy;
  /* the backward of a column matmul's input without sequence parallelism: Megatron's f, an all-reduce */
  double col_in_bwd = sp ? rs : p->tp > 1 ? coll_in_s(x, EXEC_COLL_ALLREDUCE, p->tp, act_bytes) : 0;
  double row_out_bwd = sp ? ag : 0;
  double kv_bytes = 4 * b * Sk * 2 * kvl;
  double cp_f = p->cp > 1 ? coll_in_s(x, EXEC_COLL_ALLGATHER, p->cp, kv_bytes) + kv_bytes * cpy : 0;
  double cp_b = p->cp > 1 ? coll_in_s(x, EXEC_COLL_REDUCE_SCATTER, p->cp, kv_bytes) + kv_bytes * cpy : 0;
  double rope = d.gelu ? 0 : T * (nhl + nkvl) * d.hd * x->rope_s;
  double resid = 6 * TL * H * cpy; /* x + y read, written: 12 bytes an element, at the copy rate of 2 bytes/byte */
  double act_f = T * Fl * (d.gelu ? x->gelu_fwd_s : x->swiglu_fwd_s), act_b = T * Fl * (d.gelu ? x->gelu_bwd_s : x->swiglu_bwd_s);
  /* The MoE MLP's rows and expert width (ex_moe.c rows_of): the rows of the etp group (the whole micro-batch at
   * etp = tp, the rank's own at etp = 1), each expert's width split etp ways. */
  double etp = (double)plan_etp(p), Tm = sp ? TL * etp : T, Fe = d.F / etp;
  layer_bytes sb = saved_bytes(&d, b, T, TL, Sq, Sk, tp, cp, sp, Tm, Fe);
  acc f = {0}, bw = {0}, w = {0};
  /* forward (ex_layer.c fwd_compute); zeroing the buffers it allocates (calloc) at half the copy rate */
  f.s += sb.all * cpy / 2 + norm_f + ag + rope + cp_f + units * x->attn_fwd_s + rs + resid + norm_f + 2 * resid;
  lin_fwd(x, &f, T, Dl, H);
  lin_fwd(x, &f, T, H, qdl);
  /* backward (bwd_impl): the same matmuls' two gradients, the kernels' backward passes, the conjugate collectives */
  bw.s += 2 * norm_b + rope + cp_b + units * x->attn_bwd_s + row_out_bwd + col_in_bwd + 2 * resid + sb.all * cpy / 2;
  lin_bwd(x, &bw, &w, T, Dl, H);
  lin_bwd(x, &bw, &w, T, H, qdl);
  double mlp_f = 0, mlp_b = 0;
  if (!d.moe) {
    f.s += ag + act_f + rs;
    lin_fwd(x, &f, T, upl, H);
    lin_fwd(x, &f, T, H, Fl);
    bw.s += act_b + row_out_bwd + col_in_bwd;
    lin_bwd(x, &bw, &w, T, upl, H);
    lin_bwd(x, &bw, &w, T, H, Fl);
  } else {
    /* ex_moe.c: every tensor-parallel rank routes the whole micro-batch (gathered under sequence parallelism);
     * the routed copies go to their experts' ranks and back by all-to-all; the local experts' rows are, routing
     * balanced, T·K in all; the expert outputs are all-reduced over tp and the rank's rows kept. */
    double rows = Tm * d.K, n_local = d.E / ep, rows_e = rows / n_local, send = 4 * rows * H;
    /* the counts' exchange follows the router's kernels (in step); the rows' exchange follows it at once */
    double a2a = p->ep > 1 ? 2 * coll_in_s(x, EXEC_COLL_ALLTOALL, p->ep, 8 * ep * n_local) +
                                 coll_s(x, EXEC_COLL_ALLTOALL, p->ep, send) * 2
                           : 0;
    /* over the etp group: the rows gathered (forward: the input; backward: the output gradient), the routed
     * outputs' partial sums all-reduced (T·K rows), the input gradient reduce-scattered */
    int64_t eg = plan_etp(p);
    double m_bytes = 4 * Tm * H;
    bool split = eg > 1 && sp;
    double e_ag = split ? coll_in_s(x, EXEC_COLL_ALLGATHER, eg, m_bytes) + (eg == p->tp ? m_bytes * cpy : 0) : 0;
    double e_rs = split ? coll_in_s(x, EXEC_COLL_REDUCE_SCATTER, eg, m_bytes) + (eg == p->tp ? m_bytes * cpy : 0) : 0;
    double tp_out = !split ? 0 : p->ep > 1 ? coll_s(x, EXEC_COLL_ALLREDUCE, eg, send) : coll_in_s(x, EXEC_COLL_ALLREDUCE, eg, send);
    acc ef = {0}, eb = {0}, ew = {0};
    lin_fwd(x, &ef, Tm, d.E, H);
    lin_bwd(x, &eb, &ew, Tm, d.E, H);
    for (double e = 0; e < n_local; e++) {
      lin_fwd(x, &ef, rows_e, 2 * Fe, H);
      lin_fwd(x, &ef, rows_e, H, Fe);
      lin_bwd(x, &eb, &ew, rows_e, 2 * Fe, H);
      lin_bwd(x, &eb, &ew, rows_e, H, Fe);
    }
    mlp_f = e_ag + a2a / 2 + rows * Fe * x->swiglu_fwd_s + tp_out + 3 * send * cpy + Tm * d.E * x->xent_s;
    mlp_b = e_ag + a2a / 2 + rows * Fe * x->swiglu_bwd_s + e_rs + 3 * send * cpy;
    f.s += mlp_f + ef.s;
    f.flop += ef.flop;
    bw.s += mlp_b + eb.s;
    bw.flop += eb.flop;
    w.s += ew.s;
    w.flop += ew.flop;
  }
  lc.fwd_s = f.s;
  lc.bwd_s = bw.s + w.s;
  lc.wgrad_s = w.s;
  lc.fwd_flop = f.flop;
  lc.bwd_flop = bw.flop + w.flop;
  /* Recompute (ex_layer.c restore): full runs the forward again, collectives included; selective the
   * attention kernel; op the norms (and their gathers) and the activation. */
  lc.recompute_full_s = lc.fwd_s;
  lc.recompute_sel_s = units * x->attn_fwd_s;
  lc.recompute_op_s = 2 * (norm_f + ag) + (d.moe ? 0 : act_f);
  lc.attn_fwd_s = units * x->attn_fwd_s;
  lc.act_bytes[PLAN_RECOMPUTE_NONE] = sb.all;
  lc.act_bytes[PLAN_RECOMPUTE_SELECTIVE] = sb.all - sb.P;
  lc.act_bytes[PLAN_RECOMPUTE_OP] = sb.all - sb.a - sb.a_full - sb.m - sb.m_full - sb.hact;
  lc.act_bytes[PLAN_RECOMPUTE_FULL] = sb.x;
  lc.act_full_working_bytes = sb.all;
  return lc;
}

double cost_exec_cpu_p2p_s(const cost_env *env, int group, const plan *p, double b, double s) {
  /* rank_pipe.c send_to: the rank's [b, s/cp, H] fp32 rows (a tensor-parallel rank's share under sequence
   * parallelism), one MPI_Isend matched by a blocking receive */
  double rows = b * s / (double)p->cp / (p->sequence_parallel && p->tp > 1 ? (double)p->tp : 1.0);
  return coll_s(cost_group_model(env, group)->exec, EXEC_COLL_SENDRECV, 2, 4 * rows * (double)env->g->hidden_size);
}

/* The step's end on pipeline rank r (rank.c: the gradient zeroing at the step's start, update_range per chunk,
 * the tied embedding's all-reduce and broadcast between first and last stage). *adam_s receives the AdamW part. */
static double step_end_s(const cost_env *env, const plan *p, const rank_cost *R, int r, double *adam_s) {
  const compute_model *cm = cost_group_model(env, cost_rank_group(env, p, r, NULL));
  const exec_cpu_profile *x = cm->exec;
  double n_all = (double)graph_params_total(env->g), n_r = R->params_dense, red = (double)(p->dp * p->cp);
  double bytes = 4 * n_r, t = 4 * n_all * (p->tp > 1 ? 2 : 1) / cm->device.mem_bw_Bps; /* memset of g (and scratch) */
  if (p->tp > 1) t += coll_s(x, EXEC_COLL_ALLREDUCE, p->tp, bytes);
  if (red > 1) {
    if (p->zero_stage == 0) t += coll_s(x, EXEC_COLL_ALLREDUCE, p->dp * p->cp, bytes);
    else t += coll_s(x, EXEC_COLL_REDUCE_SCATTER, p->dp * p->cp, bytes) + coll_s(x, EXEC_COLL_ALLGATHER, p->dp * p->cp, bytes);
  }
  *adam_s = x->adam_s * (p->zero_stage > 0 && red > 1 ? n_r / red : n_r);
  return t;
}

void cost_exec_cpu_step(const cost_env *env, const plan *p, const rank_cost *rc, int n_ranks, double *sync_s,
                        double *opt_s) {
  *sync_s = 0, *opt_s = 0;
  double worst = -1;
  for (int r = 0; r < n_ranks; r++) {
    double adam = 0, t = step_end_s(env, p, &rc[r], r, &adam);
    if (t + adam > worst) worst = t + adam, *sync_s = t, *opt_s = adam;
  }
}

/* The peak bytes of activations pipeline rank r holds, as the executor runs the schedule's list (plan/schedule.h;
 * rank_pipe.c): a chunk pass's activations (act_pass bytes) live from its F to its B, or to its W when the
 * schedule splits the backward (zero bubble: the weight-gradient GEMMs need the layer inputs), and a split pass
 * also keeps copies of its output gradients (wrec_pass bytes, ex_layer.c lin_bwd) from its B to its W. The
 * schedule rule of plan_schedule_in_flight_mb when the list cannot be built. */
static double schedule_peak_bytes(const plan *p, int r, double act_pass, double wrec_pass) {
  double v = (double)plan_n_chunks(p) / (double)p->pp, fallback = plan_schedule_in_flight_mb(p, r) * v * act_pass;
  ap_ctx *ctx = ap_ctx_new();
  plan_schedule_order o;
  if (!ctx || plan_schedule_build(ctx, p, &o) != AP_OK) {
    ap_ctx_free(ctx);
    return fallback;
  }
  bool split = false;
  for (size_t i = 0; i < o.n_items && !split; i++) split = o.items[i].pass == SCHED_W;
  double alive = 0, pending = 0, peak = 0;
  for (size_t i = o.first[r]; r < o.n_stages && i < o.first[r + 1]; i++) {
    sched_pass k = o.items[i].pass;
    if (k == SCHED_F) alive++;
    else if (k == SCHED_B && !split) alive--;
    else if (k == SCHED_B) pending++;
    else alive--, pending--;
    peak = fmax(peak, alive * act_pass + pending * wrec_pass);
  }
  plan_schedule_free(&o);
  ap_ctx_free(ctx);
  return peak;
}

cost_mem cost_exec_cpu_memory(const cost_env *env, const plan *p, const rank_cost *rc, int r, double b, double s) {
  const rank_cost *R = &rc[r];
  const compute_model *cm = cost_group_model(env, cost_rank_group(env, p, r, NULL));
  const exec_cpu_profile *x = cm->exec;
  exec_dims d = dims_of(env);
  cost_mem mem = {0};
  double n_all = (double)graph_params_total(env->g), red = (double)(p->dp * p->cp), tp = (double)p->tp;
  bool zero = p->zero_stage > 0 && red > 1, sp = p->sequence_parallel && p->tp > 1;
  double owned = zero ? R->params_dense / red : R->params_dense;
  /* rank.c: w and g whole on every rank, the tensor-parallel scratch copy, the moments of the owned part and,
   * under ZeRO, the reduce-scatter's shard. */
  mem.params = 4 * n_all;
  mem.grads = 4 * n_all * (p->tp > 1 ? 2 : 1) + (zero ? 4 * owned : 0);
  mem.optimizer = 8 * owned;
  double T = b * s / (double)p->cp, TL = sp ? T / tp : T;
  double etp = (double)plan_etp(p);
  layer_bytes lb = saved_bytes(&d, b, T, TL, s / (double)p->cp, s, tp, (double)p->cp, sp, sp ? TL * etp : T, d.F / etp);
  /* The micro-batches in flight at the rank's peak (plan/schedule.h), each with its saved layers and the
   * boundary activation it hands on; one layer's working set in its backward. */
  double v = (double)plan_n_chunks(p) / (double)p->pp, nhl = d.nh / tp, Dl = (nhl + 2 * d.nkv / tp) * d.hd;
  /* the output gradients a split backward copies for its W: q|k|v and o, and the dense MLP's two matmuls */
  double wrec_layer = 4 * T * (Dl + d.H + (d.moe ? 0 : (d.gelu ? 1 : 2) * d.F / tp + d.H));
  double boundary = 4 * T * d.H; /* the activation each micro-batch in flight hands on (rank_pipe.c) */
  mem.activations = schedule_peak_bytes(p, r, (R->act_bytes + boundary) / v, (double)R->n_layers * wrec_layer / v) + lb.all;
  /* The head's logits (and their gradient unless fused) live inside ex_head_loss, in the forward pass, so never
   * beside a layer's backward working set: only what they exceed it by adds to the peak. */
  double head = R->has_head ? 4 * T * d.V * (p->fused_loss ? 1 : 2) + 3 * 4 * T * d.H : 0;
  mem.logits = fmax(0, head - lb.all);
  mem.buffers = 2 * 4 * T * d.H; /* run_forward's x and y */
  /* The step's end, after the activations are freed: OpenMPI's all-reduce and reduce-scatter of the chunk's
   * gradient take a temporary of the whole message (ompi/mca/coll/base/coll_base_allreduce.c recursive
   * doubling and coll_base_reduce_scatter.c recursive halving allocate count·extent), where the activation peak
   * was. */
  double coll_temp = red > 1 || p->tp > 1 ? 4 * R->params_dense : 0, act = mem.activations + mem.logits + mem.buffers;
  if (coll_temp > act) mem.buffers += coll_temp - act;
  /* The process's base resident set (MPI, OpenBLAS and the C library, measured by profile) is the executor's
   * library workspace; it has no caching allocator (reserve 0) and no device context (context 0). */
  mem.workspace = x->base_rss_bytes;
  mem.total = mem.params + mem.grads + mem.optimizer + mem.activations + mem.logits + mem.buffers + mem.step +
              mem.workspace + mem.reserve + mem.context;
  return mem;
}
