/* bin/autopar-rank: the executor's rank program (exec layer), started once per device by `autopar run`
 * through mpirun (src/cli/cmd_run.c), or once without MPI with --check, which validates the model, the plan,
 * the weights and the data and prints the rank count, so that bad input fails before any launch. Each rank
 * reads the model through the model loader and the plan through the plan library, finds its place in the
 * plan's mesh (plan_axis_stride/plan_axis_size), runs the steps (rank_pipe.c), reduces gradients over its
 * data-parallel group (all-reduce, or reduce-scatter and all-gather under ZeRO), applies AdamW to what it owns,
 * and rank 0 writes the result file that `autopar run` prints. A rank that fails prints one line
 * "autopar-rank: rank R: MESSAGE" and calls MPI_Abort, which ends every rank of the job. */
#include <math.h>
#include <stdio.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "core/jsonx.h"
#include "exec/graph/grank.h"
#include "exec/rank.h"
#include "model/model.h"
#include "plan/plan_api.h"

typedef struct {
  const char *model, *plan, *init, *data, *save, *result;
  int data_width;
  int64_t steps, seed, fail_rank;
  bool check;
  ex_adamw opt;
} rk_args;

#define die rk_die

static void parse_args(int argc, char **argv, rk_args *a) {
  *a = (rk_args){.data_width = 2, .steps = 1, .fail_rank = -1, .opt = {3e-4, 0.9, 0.95, 1e-8, 0.1}};
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
    else if (strcmp(k, "--data-dtype") == 0) {
      if (strcmp(v, "uint16") && strcmp(v, "uint32")) die(2, "--data-dtype: expected uint16 or uint32, got \"%s\"", v);
      a->data_width = v[4] == '1' ? 2 : 4;
    } else if (!num) {
      die(2, "%s: expected a number, got \"%s\"", k, v);
    } else if (strcmp(k, "--steps") == 0 && d >= 1 && d <= 1e6 && d == floor(d)) a->steps = (int64_t)d;
    else if (strcmp(k, "--seed") == 0 && d >= 0 && d <= 9e15 && d == floor(d)) a->seed = (int64_t)d;
    else if (strcmp(k, "--fail-rank") == 0 && d >= 0 && d == floor(d)) a->fail_rank = (int64_t)d;
    else if (strcmp(k, "--lr") == 0 && d >= 0) a->opt.lr = d;
    else if (strcmp(k, "--beta1") == 0 && d >= 0 && d < 1) a->opt.beta1 = d;
    else if (strcmp(k, "--beta2") == 0 && d >= 0 && d < 1) a->opt.beta2 = d;
    else if (strcmp(k, "--eps") == 0 && d > 0) a->opt.eps = d;
    else if (strcmp(k, "--weight-decay") == 0 && d >= 0) a->opt.weight_decay = d;
    else die(2, "%s: unknown option or value out of range (\"%s\")", k, v);
  }
  if (!a->model || !a->plan) die(2, "--model and --plan are required");
}

/* The plan's fields the executor reads, in one place. Refuses what it does not run, naming the field. */
static void read_plan(ap_ctx *ctx, const char *path, const ap_model *model, const ex_cfg *c, rk_plan *out) {
  ap_plan *ap = NULL;
  if (ap_plan_load(ctx, path, &ap)) die(2, "%s", ap_ctx_error(ctx));
  plan *p = &ap->p;
  plan_resolve(ap, plan_n_devices(p));
  const graph *g = model_graph(model);
  if (plan_validate(ctx, p, g, plan_n_devices(p), path)) die(2, "%s", ap_ctx_error(ctx));
  memset(out, 0, sizeof *out);
  out->dp = plan_axis_size(p, PLAN_AXIS_DP);
  out->tp = plan_axis_size(p, PLAN_AXIS_TP);
  out->pp = plan_axis_size(p, PLAN_AXIS_PP);
  out->cp = plan_axis_size(p, PLAN_AXIS_CP);
  out->ep = plan_axis_size(p, PLAN_AXIS_EP);
  out->vpp = plan_n_chunks(p) / out->pp;
  out->n_dev = plan_n_devices(p);
  out->mbs = p->micro_batch_size;
  out->n_mb = p->n_micro_batches;
  out->gbs = p->global_batch_size;
  out->seq = p->seq_length > 0 ? p->seq_length : g->default_seq;
  out->zero = p->zero_stage;
  out->schedule = (int)p->schedule;
  out->schedule_name = plan_schedule_name(p->schedule);
  out->rc = (ex_recompute)p->recompute; /* the same four, in the same order */
  out->fused_loss = p->fused_loss;
  out->precision = plan_precision_name(p->precision);
  out->recompute_name = plan_recompute_name(p->recompute);
  out->sp = p->sequence_parallel && out->tp > 1;
  if (out->tp > 1 && c->F % out->tp)
    die(2, "%s: parallel.tp: %lld must divide the MLP width %lld (intermediate_size)", path, (long long)out->tp, (long long)c->F);
  out->edp = plan_edp(p);
  out->etp = plan_etp(p);
  if (c->E && out->etp > 1 && c->F % out->etp)
    die(2, "%s: parallel.etp: %lld must divide the experts' width %lld (intermediate_size)", path, (long long)out->etp,
        (long long)c->F);
  if (out->dp > 4 * RK_MAX_CHUNKS) die(2, "%s: parallel.dp: more than %d data-parallel ranks", path, 4 * RK_MAX_CHUNKS);
  if (out->dp * out->cp > 4 * RK_MAX_CHUNKS) die(2, "%s: parallel.cp: dp·cp above %d", path, 4 * RK_MAX_CHUNKS);
  if (plan_n_chunks(p) > RK_MAX_CHUNKS) die(2, "%s: parallel.vpp: more than %d chunks", path, RK_MAX_CHUNKS);
  if (out->seq < 1 || (c->family == EX_GPT2 && out->seq > c->P))
    die(2, "%s: seq_length: %lld: expected 1 … %lld (the model's positions)", path, (long long)out->seq, (long long)c->P);
  int32_t split[PLAN_MAX_CHUNKS];
  if (!plan_chunk_layers(p, c->L, split)) die(2, "%s: pipeline.stage_layers: no split of %lld layers", path, (long long)c->L);
  for (int64_t k = 0; k < plan_n_chunks(p); k++) {
    out->chunk_layers[k] = split[k];
    out->chunk_rank[k] = plan_chunk_rank(p, k);
  }
  if (rk_schedule_fill(ctx, p, out)) die(2, "%s: pipeline.schedule: %s", path, ap_ctx_error(ctx));
  ap_plan_free(ap);
}

/* The rank's coordinate along an axis of the plan's mesh (plan.h "The device mesh"). */
static int coord(ap_ctx *ctx, const char *path, int rank, plan_axis axis) {
  ap_plan *ap = NULL;
  if (ap_plan_load(ctx, path, &ap)) die(2, "%s", ap_ctx_error(ctx));
  plan_resolve(ap, plan_n_devices(&ap->p));
  int64_t stride = plan_axis_stride(&ap->p, axis), size = plan_axis_size(&ap->p, axis);
  ap_plan_free(ap);
  return (int)((rank / stride) % size);
}

/* The parameter range [lo, hi) of chunk k: its layers, with the embedding on chunk 0 and the final norm and
 * untied head on the last chunk (plan.h "Pipeline chunks"). */
static void chunk_range(const rk_state *s, int64_t k, int64_t *lo, int64_t *hi) {
  int64_t n_chunks = s->p.pp * s->p.vpp, l0 = s->chunk_l0[k], l1 = l0 + s->p.chunk_layers[k];
  int64_t end_layers = s->m.nfw; /* the final norm follows the last layer */
  *lo = k == 0 ? 0 : l0 < s->m.c.L ? s->m.lw[l0].n1w : end_layers;
  *hi = k == n_chunks - 1 ? s->m.n_params : l1 < s->m.c.L ? s->m.lw[l1].n1w : end_layers;
}

static void shard_of(const rk_state *s, int64_t lo, int64_t hi, int d, int64_t *a, int64_t *b) {
  int64_t n = hi - lo;
  *a = lo + n * d / s->red_size;
  *b = lo + n * (d + 1) / s->red_size;
}

/* Gradient reduction over the data-parallel group and the AdamW update of chunk k's range. */
static void update_range(rk_state *s, int64_t k, int64_t t, float *shard_g, float **mom, float **var) {
  int64_t lo, hi;
  chunk_range(s, k, &lo, &hi);
  if (hi <= lo) return;
  /* Tensor parallelism: each rank's slices (zero elsewhere) and its partial sums of the sequence-parallel
   * norms and biases add up to the whole gradient; every tensor-parallel rank then holds it and updates alike. */
  double t0 = rk_tally_begin(s, s->tp_comm, true), bytes = 4.0 * (double)(hi - lo);
  if (s->p.tp > 1) MPI_Allreduce(MPI_IN_PLACE, s->g + lo, (int)(hi - lo), MPI_FLOAT, MPI_SUM, s->tp_comm);
  rk_tally_add(s, RK_AT_STEP, RK_OP_ALLREDUCE, bytes, t0);
  int dp = s->red_size;
  if (s->p.zero == 0) {
    t0 = rk_tally_begin(s, s->dp_comm, true);
    if (dp > 1) MPI_Allreduce(MPI_IN_PLACE, s->g + lo, (int)(hi - lo), MPI_FLOAT, MPI_SUM, s->dp_comm);
    rk_tally_add(s, RK_AT_STEP, RK_OP_ALLREDUCE, bytes, t0);
    ex_adamw_step(&s->m, &s->opt, t + 1, s->w, s->g, *mom, *var, lo, hi);
    *mom += hi - lo;
    *var += hi - lo;
    return;
  }
  int counts[RK_MAX_CHUNKS * 4], displs[RK_MAX_CHUNKS * 4];
  for (int d = 0; d < dp; d++) {
    int64_t a, b;
    shard_of(s, lo, hi, d, &a, &b);
    counts[d] = (int)(b - a);
    displs[d] = (int)(a - lo);
  }
  int64_t a, b;
  shard_of(s, lo, hi, s->red_rank, &a, &b);
  t0 = rk_tally_begin(s, s->dp_comm, true);
  MPI_Reduce_scatter(s->g + lo, shard_g, counts, MPI_FLOAT, MPI_SUM, s->dp_comm);
  rk_tally_add(s, RK_AT_STEP, RK_OP_REDUCE_SCATTER, bytes, t0);
  memcpy(s->g + a, shard_g, (size_t)(b - a) * sizeof(float));
  ex_adamw_step(&s->m, &s->opt, t + 1, s->w, s->g, *mom, *var, a, b);
  *mom += b - a;
  *var += b - a;
  /* ZeRO-1/2 gather the updated parameters now; ZeRO-3 keeps only its shard until the next forward needs them
   * (gather_params), which gives the same numbers. */
  t0 = rk_tally_begin(s, s->dp_comm, true);
  if (s->p.zero < 3) MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, s->w + lo, counts, displs, MPI_FLOAT, s->dp_comm);
  rk_tally_add(s, RK_AT_STEP, RK_OP_ALLGATHER, s->p.zero < 3 ? bytes : 0, t0);
}

static void gather_params(rk_state *s, int64_t k) {
  int64_t lo, hi;
  chunk_range(s, k, &lo, &hi);
  int counts[RK_MAX_CHUNKS * 4], displs[RK_MAX_CHUNKS * 4];
  for (int d = 0; d < s->red_size; d++) {
    int64_t a, b;
    shard_of(s, lo, hi, d, &a, &b);
    counts[d] = (int)(b - a);
    displs[d] = (int)(a - lo);
  }
  double t0 = rk_tally_begin(s, s->dp_comm, true);
  if (hi > lo) MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, s->w + lo, counts, displs, MPI_FLOAT, s->dp_comm);
  rk_tally_add(s, RK_AT_STEP, RK_OP_ALLGATHER, 4.0 * (double)(hi - lo), t0);
}

void rk_tp_all_reduce(void *user, float *buf, int64_t n) {
  rk_state *s = user;
  double t0 = rk_tally_begin(s, s->tp_comm, true);
  MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, s->tp_comm);
  rk_tally_add(s, RK_AT_LAYER, RK_OP_ALLREDUCE, 4.0 * (double)n, t0);
}

/* loc is [B, S/t, H], this rank's positions of each sequence; full is [B, S, H]. */
void rk_tp_all_gather_seq(void *user, const float *loc, float *full, int64_t B, int64_t S, int64_t H) {
  rk_state *s = user;
  int64_t t = s->tp.size, Sl = S / t, n = B * Sl * H;
  float *tmp = malloc((size_t)(t * n) * sizeof *tmp);
  if (!tmp) die(1, "out of memory");
  double t0 = rk_tally_begin(s, s->tp_comm, true);
  MPI_Allgather(loc, (int)n, MPI_FLOAT, tmp, (int)n, MPI_FLOAT, s->tp_comm);
  rk_tally_add(s, RK_AT_LAYER, RK_OP_ALLGATHER, 4.0 * (double)(t * n), t0);
  for (int64_t r = 0; r < t; r++)
    for (int64_t b = 0; b < B; b++)
      memcpy(full + (b * S + r * Sl) * H, tmp + r * n + b * Sl * H, (size_t)(Sl * H) * sizeof *full);
  free(tmp);
}

void rk_tp_reduce_scatter_seq(void *user, const float *full, float *loc, int64_t B, int64_t S, int64_t H) {
  rk_state *s = user;
  int64_t t = s->tp.size, Sl = S / t, n = B * Sl * H;
  float *tmp = malloc((size_t)(t * n) * sizeof *tmp);
  if (!tmp) die(1, "out of memory");
  for (int64_t r = 0; r < t; r++)
    for (int64_t b = 0; b < B; b++)
      memcpy(tmp + r * n + b * Sl * H, full + (b * S + r * Sl) * H, (size_t)(Sl * H) * sizeof *tmp);
  double t0 = rk_tally_begin(s, s->tp_comm, true);
  MPI_Reduce_scatter_block(tmp, loc, (int)n, MPI_FLOAT, MPI_SUM, s->tp_comm);
  rk_tally_add(s, RK_AT_LAYER, RK_OP_REDUCE_SCATTER, 4.0 * (double)(t * n), t0);
  free(tmp);
}

/* Expert tensor parallelism 1 < etp < tp: the etp group's collectives over s->etp_comm (ex_tp's etp_*). */
static void rk_etp_gather(void *user, const float *loc, float *full, int64_t n) {
  rk_state *s = user;
  double t0 = rk_tally_begin(s, s->etp_comm, true);
  MPI_Allgather(loc, (int)n, MPI_FLOAT, full, (int)n, MPI_FLOAT, s->etp_comm);
  rk_tally_add(s, RK_AT_LAYER, RK_OP_ALLGATHER, 4.0 * (double)(n * s->tp.etp_size), t0);
}

static void rk_etp_all_reduce(void *user, float *buf, int64_t n) {
  rk_state *s = user;
  double t0 = rk_tally_begin(s, s->etp_comm, true);
  MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, s->etp_comm);
  rk_tally_add(s, RK_AT_LAYER, RK_OP_ALLREDUCE, 4.0 * (double)n, t0);
}

static void rk_etp_reduce_scatter(void *user, const float *full, float *loc, int64_t n) {
  rk_state *s = user;
  double t0 = rk_tally_begin(s, s->etp_comm, true);
  MPI_Reduce_scatter_block(full, loc, (int)n, MPI_FLOAT, MPI_SUM, s->etp_comm);
  rk_tally_add(s, RK_AT_LAYER, RK_OP_REDUCE_SCATTER, 4.0 * (double)(n * s->tp.etp_size), t0);
}

void rk_ep_counts(void *user, const int64_t *send, int64_t *recv, int64_t n) {
  rk_state *s = user;
  double t0 = rk_tally_begin(s, s->ep_comm, true);
  MPI_Alltoall(send, (int)n, MPI_INT64_T, recv, (int)n, MPI_INT64_T, s->ep_comm);
  rk_tally_add(s, RK_AT_LAYER, RK_OP_ALLTOALL, 8.0 * (double)(n * s->tp.ep_size), t0);
}

void rk_ep_rows(void *user, const float *send, const int64_t *send_rows, float *recv, const int64_t *recv_rows, int64_t H) {
  rk_state *s = user;
  int ep = s->tp.ep_size, sc[4 * RK_MAX_CHUNKS], sd[4 * RK_MAX_CHUNKS], rc[4 * RK_MAX_CHUNKS], rd[4 * RK_MAX_CHUNKS];
  for (int d = 0, so = 0, ro = 0; d < ep; d++) {
    sc[d] = (int)(send_rows[d] * H);
    rc[d] = (int)(recv_rows[d] * H);
    sd[d] = so;
    rd[d] = ro;
    so += sc[d];
    ro += rc[d];
  }
  int last = ep - 1;
  double t0 = rk_tally_begin(s, s->ep_comm, true);
  MPI_Alltoallv(send, sc, sd, MPI_FLOAT, recv, rc, rd, MPI_FLOAT, s->ep_comm);
  rk_tally_add(s, RK_AT_LAYER, RK_OP_ALLTOALL, 4.0 * (double)(sd[last] + sc[last]), t0);
}

void rk_cp_positions(const rk_state *s, int r, int64_t *pos) {
  int64_t cp = s->p.cp, cs = s->p.seq / (2 * cp);
  for (int64_t i = 0; i < cs; i++) {
    pos[i] = r * cs + i;
    pos[cs + i] = (2 * cp - 1 - r) * cs + i;
  }
}

/* loc [B, S, W] of this rank's positions; full [B, S·cp, W] in position order. */
void rk_cp_gather(void *user, const float *loc, float *full, int64_t B, int64_t S, int64_t W) {
  rk_state *s = user;
  int64_t cp = s->p.cp, n = B * S * W;
  float *tmp = malloc((size_t)(cp * n) * sizeof *tmp);
  int64_t *pos = malloc((size_t)S * sizeof *pos);
  if (!tmp || !pos) die(1, "out of memory");
  double t0 = rk_tally_begin(s, s->cp_comm, true);
  MPI_Allgather(loc, (int)n, MPI_FLOAT, tmp, (int)n, MPI_FLOAT, s->cp_comm);
  rk_tally_add(s, RK_AT_LAYER, RK_OP_ALLGATHER, 4.0 * (double)(cp * n), t0);
  for (int r = 0; r < cp; r++) {
    rk_cp_positions(s, r, pos);
    for (int64_t b = 0; b < B; b++)
      for (int64_t i = 0; i < S; i++)
        memcpy(full + (b * S * cp + pos[i]) * W, tmp + r * n + (b * S + i) * W, (size_t)W * sizeof *full);
  }
  free(tmp);
  free(pos);
}

void rk_cp_reduce_scatter(void *user, const float *full, float *loc, int64_t B, int64_t S, int64_t W) {
  rk_state *s = user;
  int64_t cp = s->p.cp, n = B * S * W;
  float *tmp = malloc((size_t)(cp * n) * sizeof *tmp);
  int64_t *pos = malloc((size_t)S * sizeof *pos);
  if (!tmp || !pos) die(1, "out of memory");
  for (int r = 0; r < cp; r++) {
    rk_cp_positions(s, r, pos);
    for (int64_t b = 0; b < B; b++)
      for (int64_t i = 0; i < S; i++)
        memcpy(tmp + r * n + (b * S + i) * W, full + (b * S * cp + pos[i]) * W, (size_t)W * sizeof *tmp);
  }
  double t0 = rk_tally_begin(s, s->cp_comm, true);
  MPI_Reduce_scatter_block(tmp, loc, (int)n, MPI_FLOAT, MPI_SUM, s->cp_comm);
  rk_tally_add(s, RK_AT_LAYER, RK_OP_REDUCE_SCATTER, 4.0 * (double)(cp * n), t0);
  free(tmp);
  free(pos);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* This process's CPU time, seconds (user and system, all its threads). */
static double cpu_now_s(void) {
  struct timespec ts;
  return clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0 ? (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec : 0.0;
}

static void write_result(const rk_args *a, const rk_state *s, const double *loss, const double *time_s,
                         const double *cpu_s, const long *rss, rk_tally tally[RK_AT_N][RK_OP_N], const double *passes,
                         ap_ctx *ctx) {
  strbuf sb = {0};
  sb_puts(&sb, "{\"format\": \"autopar-run/1\", \"model\": ");
  jx_sb_str(&sb, a->model);
  sb_puts(&sb, ", \"plan\": ");
  jx_sb_str(&sb, a->plan);
  sb_printf(&sb, ", \"ranks\": %d, \"params\": %lld, \"precision\": \"fp32\", \"plan_precision\": \"%s\", \"steps\": [",
            s->world, (long long)s->m.n_params, s->p.precision);
  for (int64_t t = 0; t < a->steps; t++) {
    sb_printf(&sb, "%s{\"step\": %lld, \"loss\": ", t ? ", " : "", (long long)t + 1);
    jx_sb_num(&sb, loss[t]);
    sb_puts(&sb, ", \"time_s\": ");
    jx_sb_num(&sb, time_s[t]);
    sb_puts(&sb, ", \"cpu_s\": ");
    jx_sb_num(&sb, cpu_s[t]);
    sb_puts(&sb, "}");
  }
  /* the median over the steps after the first (the first pays warm-up), or the only step */
  int64_t n = a->steps > 1 ? a->steps - 1 : 1;
  double *sorted = malloc((size_t)n * sizeof *sorted);
  double med = 0.0;
  if (sorted) {
    memcpy(sorted, a->steps > 1 ? time_s + 1 : time_s, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
    med = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  }
  free(sorted);
  sb_puts(&sb, "], \"notes\": [");
  if (strcmp(s->p.precision, "fp32") != 0) {
    sb_puts(&sb, "\"the plan's precision ");
    sb_puts(&sb, s->p.precision);
    sb_puts(&sb, " runs in fp32: the executor computes in fp32 only\"");
  }
  sb_puts(&sb, "], \"iteration_time_s\": ");
  jx_sb_num(&sb, med);
  sb_puts(&sb, ", \"peak_rss_bytes\": [");
  for (int r = 0; r < s->world; r++) sb_printf(&sb, "%s%lld", r ? ", " : "", (long long)rss[r] * 1024LL);
  sb_printf(&sb, "], \"tokens_per_step\": %lld, \"mpi\": [", (long long)(s->p.gbs * s->p.seq));
  static const char *const at_names[RK_AT_N] = {"layer", "pipeline", "step_end"},
                           *const op_names[RK_OP_N] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                                       "send_recv", "skew"};
  for (int i = 0, k = 0; i < RK_AT_N; i++)
    for (int j = 0; j < RK_OP_N; j++)
      if (tally[i][j].calls > 0)
        sb_printf(&sb, "%s{\"at\": \"%s\", \"op\": \"%s\", \"calls\": %.6g, \"bytes\": %.6g, \"time_s\": %.6g}",
                  k++ ? ", " : "", at_names[i], op_names[j], tally[i][j].calls, tally[i][j].bytes, tally[i][j].time_s);
  sb_printf(&sb, "], \"minor_faults_per_step\": %.6g, \"passes_per_step\": {", s->minflt);
  static const char *const pass_names[6] = {"forward_s", "backward_s", "weight_s", "forward_cpu_s", "backward_cpu_s",
                                            "weight_cpu_s"};
  for (int i = 0; i < 6; i++) {
    sb_printf(&sb, "%s\"%s\": [", i ? "], " : "", pass_names[i]);
    for (int r = 0; r < s->world; r++) sb_printf(&sb, "%s%.6g", r ? ", " : "", passes[6 * r + i]);
  }
  sb_puts(&sb, "]}");
  /* What `autopar run --record` writes into a runs.csv row: the architecture and the plan as run. */
  const ex_cfg *c = &s->m.c;
  sb_printf(&sb, ", \"arch\": {\"family\": \"%s\", \"num_layers\": %lld, \"hidden_size\": %lld, \"ffn_hidden_size\": %lld, "
            "\"num_attention_heads\": %lld, \"num_kv_heads\": %lld, \"vocab_size\": %lld, \"num_experts\": %lld, "
            "\"top_k\": %lld}", c->family == EX_GPT2 ? "gpt2" : "llama", (long long)c->L, (long long)c->H, (long long)c->F,
            (long long)c->nh, (long long)c->nkv, (long long)c->V, (long long)c->E, (long long)c->K);
  const rk_plan *p = &s->p;
  sb_printf(&sb, ", \"parallel\": {\"dp\": %lld, \"tp\": %lld, \"pp\": %lld, \"cp\": %lld, \"ep\": %lld, \"vpp\": %lld, "
            "\"sequence_parallel\": %d, \"micro_batch_size\": %lld, \"global_batch_size\": %lld, \"seq_length\": %lld, "
            "\"schedule\": \"%s\", \"recompute\": \"%s\", \"zero_stage\": %d}}\n",
            (long long)p->dp, (long long)p->tp, (long long)p->pp, (long long)p->cp, (long long)p->ep, (long long)p->vpp,
            p->sp ? 1 : 0, (long long)p->mbs, (long long)p->gbs, (long long)p->seq, p->schedule_name, p->recompute_name,
            p->zero);
  char *text = sb_take(&sb);
  if (!text) die(1, "out of memory");
  if (util_write_file_atomic(ctx, a->result, text)) die(1, "%s", ap_ctx_error(ctx));
  free(text);
}

/* Brings every chunk's parameters to world rank 0 (pipeline rank 0 and data-parallel rank 0). */
static void collect_to_rank0(rk_state *s) {
  if (s->p.pp == 1 || s->dp_rank != 0 || s->tp_rank != 0 || s->cp_rank != 0) return;
  for (int64_t k = 0; k < s->p.pp * s->p.vpp; k++) {
    int owner = (int)s->p.chunk_rank[k];
    if (owner == 0) continue;
    int64_t lo, hi;
    chunk_range(s, k, &lo, &hi);
    if (hi <= lo) continue;
    if (s->pp_rank == owner) MPI_Send(s->w + lo, (int)(hi - lo), MPI_FLOAT, 0, (int)k, s->pp_comm);
    if (s->pp_rank == 0) MPI_Recv(s->w + lo, (int)(hi - lo), MPI_FLOAT, owner, (int)k, s->pp_comm, MPI_STATUS_IGNORE);
  }
}

/* Under AddressSanitizer (make asan): OpenMPI leaves allocations to exit in components it has unloaded by then,
 * which no leak suppression can name, so the rank program runs without the leak check (the sanitizers' other
 * checks stay on). The executor's numerics are leak-checked in process by tests/test_exec.c. */
__attribute__((visibility("default"))) const char *__asan_default_options(void);
__attribute__((visibility("default"))) const char *__asan_default_options(void) { return "detect_leaks=0"; }

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--profile") == 0) return rk_profile_main(argc, argv);
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], "--model") == 0 && gr_is_graph(argv[i + 1])) return gr_main(argc, argv);
  rk_args a;
  parse_args(argc, argv, &a);
  ap_ctx *ctx = ap_ctx_new();
  if (!ctx) die(1, "out of memory");
  rk_state s;
  memset(&s, 0, sizeof s);
  s.opt = a.opt;
  ex_cfg cfg;
  if (ex_cfg_load(ctx, a.model, &cfg)) die(2, "%s", ap_ctx_error(ctx));
  ap_model *model = NULL;
  if (ap_model_load(ctx, a.model, &model)) die(2, "%s", ap_ctx_error(ctx));
  read_plan(ctx, a.plan, model, &cfg, &s.p);
  ap_model_free(model);
  if (ex_model_build(ctx, &cfg, &s.m)) die(1, "%s", ap_ctx_error(ctx));
  int64_t l = 0;
  for (int64_t k = 0; k < s.p.pp * s.p.vpp; k++) {
    s.chunk_l0[k] = l;
    l += s.p.chunk_layers[k];
  }
  s.w = calloc((size_t)s.m.n_params, sizeof *s.w);
  s.g = calloc((size_t)s.m.n_params, sizeof *s.g);
  if (!s.w || !s.g) die(1, "out of memory for %lld parameters", (long long)s.m.n_params);
  if (a.init) {
    if (ex_load(ctx, &s.m, a.init, s.w)) die(2, "%s", ap_ctx_error(ctx));
  } else {
    ex_init(&s.m, (uint64_t)a.seed, s.w);
  }
  if (a.data) {
    if (ex_data_open(ctx, a.data, a.data_width, cfg.V, &s.data)) die(2, "%s", ap_ctx_error(ctx));
  } else {
    ex_data_synthetic((uint64_t)a.seed, cfg.V, &s.data);
  }
  if (a.check) {
    printf("ranks %lld\n", (long long)s.p.n_dev);
    if (strcmp(s.p.precision, "fp32") != 0)
      printf("note plan precision %s runs in fp32: the executor computes in fp32 only\n", s.p.precision);
    rk_schedule_free(&s.p);
    return 0;
  }
  if (!a.result) die(2, "--result: required without --check");

  /* Allocation (docs/executor.md "Allocation"). A step allocates and frees its activations and collective
   * buffers (0.1-10 MiB each) every pass. Under glibc's default policy blocks above the mmap threshold (128 KiB
   * at first, raised to the size of each mmapped block freed; DEFAULT_MMAP_THRESHOLD_MAX 32 MiB) come from fresh
   * mappings, and the heap's top is given back to the kernel whenever more than the trim threshold (twice the
   * mmap threshold) is free at it (glibc malloc/malloc.c: free, systrim), so the next pass page-faults on its
   * first touch of every page again: tp 2 with sequence parallelism on bench/executor.py's model took 14,300
   * minor faults a step, pp 2 1f1b 7,700, dp 2 9,700. A training runtime keeps freed memory for the next step
   * (PyTorch's CUDACachingAllocator caches the blocks it got, c10/cuda/CUDACachingAllocator.cpp, and the first
   * iteration settles the pool). So by default (`cache`) the rank runs the first step under glibc's policy,
   * whose thresholds adapt to the step's blocks, then turns trimming off, which also freezes the adapted mmap
   * threshold (mallopt(3) M_TRIM_THRESHOLD; do_set_trim_threshold sets no_dyn_threshold): later steps reuse the
   * heap the first one grew, at the same peak resident set (bench/executor.py's 23 plans: within 0.5 MiB of
   * glibc's policy) and with 4-12x fewer faults. AUTOPAR_MALLOC=glibc keeps glibc's policy throughout;
   * AUTOPAR_MALLOC=keep sets the mmap threshold to 32 MiB and trimming off from the start (no faults at all, but
   * heap fragmentation raises the peak RSS of plans with several micro-batches: dp 2 ZeRO 2 with 2 micro-batches
   * 94 to 108 MiB). bench/exec_effects.py (F) measures the three. */
  const char *malloc_policy = getenv("AUTOPAR_MALLOC");
  if (!malloc_policy || !*malloc_policy) malloc_policy = "cache";
  if (strcmp(malloc_policy, "cache") != 0 && strcmp(malloc_policy, "glibc") != 0 && strcmp(malloc_policy, "keep") != 0)
    die(2, "AUTOPAR_MALLOC: expected cache, glibc or keep, got \"%s\"", malloc_policy);
#ifdef __GLIBC__
  if (strcmp(malloc_policy, "keep") == 0) {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, -1);
  }
#endif
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &s.world);
  rk_mpi_started(s.rank);
  if (s.world != s.p.n_dev) die(2, "%s: the plan has %lld devices but the job has %d ranks", a.plan, (long long)s.p.n_dev, s.world);
  s.dp_rank = coord(ctx, a.plan, s.rank, PLAN_AXIS_DP);
  s.pp_rank = coord(ctx, a.plan, s.rank, PLAN_AXIS_PP);
  s.tp_rank = coord(ctx, a.plan, s.rank, PLAN_AXIS_TP);
  s.cp_rank = coord(ctx, a.plan, s.rank, PLAN_AXIS_CP);
  int tps = (int)s.p.tp, dps = (int)s.p.dp, cps = (int)s.p.cp;
  /* Gradients reduce over dp·cp (Megatron's data-parallel group with context parallelism), so that group is
   * the ranks of one pipeline rank and tensor-parallel rank; it is also the ZeRO sharding group. */
  MPI_Comm_split(MPI_COMM_WORLD, s.pp_rank * tps + s.tp_rank, s.dp_rank * cps + s.cp_rank, &s.dp_comm);
  MPI_Comm_rank(s.dp_comm, &s.red_rank);
  MPI_Comm_size(s.dp_comm, &s.red_size);
  MPI_Comm_split(MPI_COMM_WORLD, (s.dp_rank * cps + s.cp_rank) * tps + s.tp_rank, s.pp_rank, &s.pp_comm);
  MPI_Comm_split(MPI_COMM_WORLD, (s.pp_rank * dps + s.dp_rank) * cps + s.cp_rank, s.tp_rank, &s.tp_comm);
  MPI_Comm_split(MPI_COMM_WORLD, (s.pp_rank * dps + s.dp_rank) * tps + s.tp_rank, s.cp_rank, &s.cp_comm);
  s.tp = (ex_tp){.rank = s.tp_rank, .size = tps, .sp = s.p.sp, .user = &s, .all_reduce = rk_tp_all_reduce,
                 .all_gather_seq = rk_tp_all_gather_seq, .reduce_scatter_seq = rk_tp_reduce_scatter_seq,
                 .ep_size = 1, .ep_counts = rk_ep_counts, .ep_rows = rk_ep_rows, .cp_rank = s.cp_rank,
                 .cp_size = cps, .cp_gather = rk_cp_gather, .cp_reduce_scatter = rk_cp_reduce_scatter};
  /* Context parallelism's load-balanced layout (Megatron-LM megatron/training/utils.py get_batch_on_this_cp_rank):
   * the sequence in 2·cp chunks, rank r holding chunks r and 2·cp − 1 − r. */
  int64_t s_loc = s.p.seq / cps;
  s.cp_pos = malloc((size_t)s_loc * sizeof *s.cp_pos);
  if (!s.cp_pos) die(1, "out of memory");
  rk_cp_positions(&s, s.cp_rank, s.cp_pos);
  s.tp.cp_pos = s.cp_pos;
  /* The expert mesh (plan.h): ep groups share the pipeline rank and the expert-data-parallel coordinate. */
  s.tp.ep_rank = coord(ctx, a.plan, s.rank, PLAN_AXIS_EP);
  s.tp.ep_size = (int)s.p.ep;
  s.tp.expert_whole = tps > 1 && s.p.etp == 1;
  int edp_rank = coord(ctx, a.plan, s.rank, PLAN_AXIS_EDP), etp_rank = coord(ctx, a.plan, s.rank, PLAN_AXIS_ETP);
  MPI_Comm_split(MPI_COMM_WORLD, (s.pp_rank * (int)s.p.edp + edp_rank) * tps + etp_rank, s.tp.ep_rank, &s.ep_comm);
  /* The etp group: the ranks of one pipeline rank, expert-data-parallel rank and ep rank. */
  MPI_Comm_split(MPI_COMM_WORLD, (s.pp_rank * (int)s.p.edp + edp_rank) * (int)s.p.ep + s.tp.ep_rank, etp_rank,
                 &s.etp_comm);
  if (tps > 1 && s.p.etp > 1 && s.p.etp < tps) {
    s.tp.etp_rank = etp_rank;
    s.tp.etp_size = (int)s.p.etp;
    s.tp.etp_gather = rk_etp_gather;
    s.tp.etp_all_reduce = rk_etp_all_reduce;
    s.tp.etp_reduce_scatter = rk_etp_reduce_scatter;
  }
  if (tps > 1) {
    s.scratch = calloc((size_t)s.m.n_params, sizeof *s.scratch);
    if (!s.scratch) die(1, "out of memory");
    if (s.tp_rank > 0) s.tp.g_repl = s.scratch;
  }

  /* Optimizer state for what this rank updates: its chunks' ranges, or its shard of each under ZeRO. */
  int64_t n_state = 0, n_chunks = s.p.pp * s.p.vpp, max_range = 0;
  for (int64_t k = 0; k < n_chunks; k++) {
    if (s.p.chunk_rank[k] != s.pp_rank) continue;
    int64_t lo, hi, sa, sb;
    chunk_range(&s, k, &lo, &hi);
    shard_of(&s, lo, hi, s.red_rank, &sa, &sb);
    n_state += s.p.zero ? sb - sa : hi - lo;
    max_range = hi - lo > max_range ? hi - lo : max_range;
  }
  s.mom = calloc((size_t)(n_state ? n_state : 1), sizeof *s.mom);
  s.var = calloc((size_t)(n_state ? n_state : 1), sizeof *s.var);
  float *shard_g = malloc((size_t)(max_range ? max_range : 1) * sizeof *shard_g);
  double *loss = calloc((size_t)a.steps, sizeof *loss), *time_s = calloc((size_t)a.steps, sizeof *time_s),
         *cpu_s = calloc((size_t)a.steps, sizeof *cpu_s);
  if (!s.mom || !s.var || !shard_g || !loss || !time_s || !cpu_s) die(1, "out of memory");
  bool tied_split = s.m.head == s.m.emb && s.p.chunk_rank[0] != s.p.chunk_rank[n_chunks - 1];
  int64_t emb_n = s.m.c.V * s.m.c.H;
  char msg[600];
  s.skew_barrier = getenv("AUTOPAR_MPI_SKEW") != NULL;
  for (int64_t t = 0; t < a.steps; t++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime(), c0 = cpu_now_s();
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    if (s.p.zero == 3 && t > 0)
      for (int64_t k = 0; k < n_chunks; k++)
        if (s.p.chunk_rank[k] == s.pp_rank) gather_params(&s, k);
    if (t == 0 && a.fail_rank == s.rank) die(1, "failing on purpose (--fail-rank %d)", s.rank);
    memset(s.g, 0, (size_t)s.m.n_params * sizeof *s.g);
    if (s.scratch) memset(s.scratch, 0, (size_t)s.m.n_params * sizeof *s.scratch);
    s.tallying = t > 0 || a.steps == 1;
    double l_sum = rk_pipeline_step(&s, t, msg, sizeof msg);
    if (l_sum < 0) die(1, "%s", msg);
    /* The tied embedding's gradient from the head (last chunk) joins the embedding's (chunk 0), as Megatron's
     * embedding group all-reduce does (megatron/core/distributed/finalize_model_grads.py). */
    if (tied_split) MPI_Allreduce(MPI_IN_PLACE, s.g + s.m.emb, (int)emb_n, MPI_FLOAT, MPI_SUM, s.pp_comm);
    float *mom = s.mom, *var = s.var;
    for (int64_t k = 0; k < n_chunks; k++)
      if (s.p.chunk_rank[k] == s.pp_rank) update_range(&s, k, t, shard_g, &mom, &var);
    if (tied_split) {
      if (s.p.zero == 3 && s.pp_rank == (int)s.p.chunk_rank[0]) gather_params(&s, 0);
      MPI_Bcast(s.w + s.m.emb, (int)emb_n, MPI_FLOAT, (int)s.p.chunk_rank[0], s.pp_comm);
    }
    double total = 0.0;
    MPI_Allreduce(&l_sum, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double my_cpu = cpu_now_s() - c0;
    getrusage(RUSAGE_SELF, &ru1);
    if (s.tallying) s.minflt += (double)(ru1.ru_minflt - ru0.ru_minflt);
#ifdef __GLIBC__
    if (t == 0 && strcmp(malloc_policy, "cache") == 0) mallopt(M_TRIM_THRESHOLD, -1); /* see "Allocation" above */
#endif
    MPI_Barrier(MPI_COMM_WORLD);
    time_s[t] = MPI_Wtime() - t0;
    MPI_Allreduce(&my_cpu, &cpu_s[t], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    loss[t] = total / ((double)s.p.gbs * (double)s.p.seq);
  }
  if (s.p.zero == 3)
    for (int64_t k = 0; k < n_chunks; k++)
      if (s.p.chunk_rank[k] == s.pp_rank) gather_params(&s, k);
  collect_to_rank0(&s);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  long my_rss = ru.ru_maxrss, *rss = calloc((size_t)s.world, sizeof *rss);
  if (!rss) die(1, "out of memory");
  MPI_Gather(&my_rss, 1, MPI_LONG, rss, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  rk_tally mean[RK_AT_N][RK_OP_N]; /* the mean over ranks */
  MPI_Reduce(s.tally, mean, 3 * RK_AT_N * RK_OP_N, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  double faults = 0;
  MPI_Reduce(&s.minflt, &faults, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  double n_tallied = (double)(a.steps > 1 ? a.steps - 1 : 1), mine[6];
  s.minflt = faults / s.world / n_tallied;
  for (int i = 0; i < 6; i++) mine[i] = (i < 3 ? s.pass_s : s.pass_cpu_s)[i % 3] / n_tallied;
  double *passes = calloc((size_t)(6 * s.world), sizeof *passes); /* per rank: forward, backward, weight; CPU */
  if (!passes) die(1, "out of memory");
  MPI_Gather(mine, 6, MPI_DOUBLE, passes, 6, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  for (int i = 0; i < RK_AT_N; i++)
    for (int j = 0; j < RK_OP_N; j++)
      mean[i][j].calls /= s.world, mean[i][j].bytes /= s.world, mean[i][j].time_s /= s.world;
  if (s.rank == 0) {
    if (a.save && ex_save(ctx, &s.m, a.save, s.w)) die(2, "%s", ap_ctx_error(ctx));
    write_result(&a, &s, loss, time_s, cpu_s, rss, mean, passes, ctx);
  }
  free(passes);
  free(rss);
  free(loss);
  free(time_s);
  free(cpu_s);
  free(shard_g);
  free(s.mom);
  free(s.var);
  free(s.w);
  free(s.g);
  ex_data_free(&s.data);
  ex_model_free(&s.m);
  ap_ctx_free(ctx);
  free(s.scratch);
  MPI_Comm_free(&s.dp_comm);
  MPI_Comm_free(&s.pp_comm);
  MPI_Comm_free(&s.tp_comm);
  MPI_Comm_free(&s.ep_comm);
  MPI_Comm_free(&s.etp_comm);
  MPI_Comm_free(&s.cp_comm);
  free(s.cp_pos);
  rk_schedule_free(&s.p);
  MPI_Finalize();
  return 0;
}
