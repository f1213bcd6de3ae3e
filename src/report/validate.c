/* Validation against measured runs (report layer): rows of a runs table in, predictions and error figures
 * out. See validate.h for what is compared and how.
 *
 * Reading order: row_read (the row's fields, checked: bad input stops the run), validate_row_model and
 * validate_row_cluster (validate_model.c: the row's model and cluster; failures become the row's error),
 * row_predict (plan completion and cost), validate_summarise (validate_summary.c: the figures), the run. The
 * document and its text are in validate_doc.c, the public entry point ap_validate in validate_api.c; the types
 * validate.c, validate_model.c and validate_summary.c share are in validate_internal.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonx.h"
#include "cost/calib.h"
#include "hw/hw.h"
#include "model/hfconfig.h"
#include "model/model.h"
#include "plan/summary.h"
#include "report/runs_csv.h"
#include "report/validate.h"
#include "report/validate_band.h"
#include "report/validate_internal.h"
#include "search/recipe/complete.h"
#include "search/recipe/search.h"

static const char *const mem_names[] = {
#define X(e, s) s,
    VALIDATE_MEM_MAP(X)
#undef X
};
_Static_assert(AP_COUNT(mem_names) == VALIDATE_MEM_COUNT_, "mem_convention names and enum disagree");



const char *validate_mem_name(validate_mem_convention c) {
  return (int)c >= 0 && c < VALIDATE_MEM_COUNT_ ? mem_names[c] : "?";
}

/* ---- Reading a row ------------------------------------------------------------------------------------- */

static const char *const mlp_names[] = {"gelu", "swiglu"};
static const char *const arch_names[] = {"dense", "moe"};
static const char *const outcome_names[] = {"ok", "oom"};

/* The columns that are a run's inputs: what a prediction may read. Two rows equal in all of them are the same
 * configuration measured twice (data_floor.h). */
static const char *const input_columns[] = {
    "model_config", "arch", "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_kv_heads",
    "vocab_size", "seq_length", "mlp", "num_experts", "top_k", "moe_ffn_hidden_size", "gpu", "num_gpus",
    "gpus_per_node", "inter_node_GBps_per_gpu", "global_batch_size", "micro_batch_size", "tp", "pp", "dp", "cp", "ep",
    "vpp", "sequence_parallel", "recompute", "zero_stage", "precision"};

/* The row's input columns joined by a unit separator, each trimmed; vpp is left out without pipelining. */
static const char *input_key(arena *a, const runs_table *t, const runs_row *r) {
  strbuf sb = {0};
  const char *pp = runs_text(t, r, "pp");
  while (*pp == ' ') pp++;
  bool piped = *pp && strcmp(pp, "1") != 0;
  for (size_t i = 0; i < AP_COUNT(input_columns); i++) {
    const char *x = runs_text(t, r, input_columns[i]);
    if (strcmp(input_columns[i], "vpp") == 0 && !piped) x = "";
    while (*x == ' ') x++;
    size_t n = strlen(x);
    while (n > 0 && x[n - 1] == ' ') n--;
    sb_printf(&sb, "%.*s\x1f", (int)n, x);
  }
  char *joined = sb_take(&sb);
  const char *key = joined ? arena_strdup(a, joined) : NULL;
  free(joined);
  return key;
}

/* Reads every field the prediction needs; bad input is an error with file:line:col. */
static ap_status row_read(ap_ctx *ctx, const runs_table *t, const runs_row *r, validate_row *v, row_spec *rs) {
  ap_status st;
  memset(rs, 0, sizeof *rs);
  v->line = r->line;
  v->id = runs_text(t, r, "id");
  v->model = runs_text(t, r, "model");
  v->gpu = runs_text(t, r, "gpu");
  v->source = runs_text(t, r, "source");
  v->ape = v->mem_ape = NAN;
  if (!*v->id) return runs_fail(ctx, t, r, "id", AP_INVALID, "expected a row id, got an empty field");
  if (!*v->gpu) return runs_fail(ctx, t, r, "gpu", AP_INVALID, "expected a device preset name, got an empty field");
  if (!*v->model) v->model = v->id;

  /* Outcome and ground truth. */
  int outcome = 0;
  if ((st = runs_enum(ctx, t, r, "outcome", false, outcome_names, 2, &outcome, NULL))) return st;
  v->measured_oom = outcome == 1;
  if ((st = runs_f64(ctx, t, r, "measured_tokens_per_s_per_gpu", !v->measured_oom, 1e-9, INFINITY,
                     &v->measured_tokens, &v->has_measured)))
    return st;
  bool has_mem_conv = false;
  int conv = 0;
  if ((st = runs_f64(ctx, t, r, "measured_peak_mem_GiB", false, 1e-9, INFINITY, &v->measured_mem_bytes, &v->has_mem)))
    return st;
  if ((st = runs_enum(ctx, t, r, "mem_convention", v->has_mem, mem_names, VALIDATE_MEM_COUNT_, &conv, &has_mem_conv)))
    return st;
  v->measured_mem_bytes *= 1073741824.0;
  v->mem_convention = (validate_mem_convention)conv;

  /* Architecture. Without a model_config the inline columns must say enough to build a transformer. */
  arch_spec *a = &rs->arch;
  a->model_config = runs_text(t, r, "model_config");
  while (*a->model_config == ' ') a->model_config++;
  const char *why = *a->model_config ? util_relpath_problem(a->model_config) : NULL;
  if (why) return runs_fail(ctx, t, r, "model_config", AP_INVALID, "expected a file name inside models/; \"%.120s\" %s", a->model_config, why);
  bool need = !*a->model_config;
  a->arch = -1;
  if ((st = runs_enum(ctx, t, r, "arch", false, arch_names, 2, &a->arch, NULL)) ||
      (st = runs_i64(ctx, t, r, "num_layers", need, 1, TF_MAX_LAYERS, &a->layers, &a->has_layers)) ||
      (st = runs_i64(ctx, t, r, "hidden_size", need, 1, (int64_t)1 << 24, &a->hidden, &a->has_hidden)) ||
      (st = runs_i64(ctx, t, r, "ffn_hidden_size", false, 1, (int64_t)1 << 24, &a->ffn, &a->has_ffn)) ||
      (st = runs_i64(ctx, t, r, "num_attention_heads", need, 1, (int64_t)1 << 24, &a->heads, &a->has_heads)) ||
      (st = runs_i64(ctx, t, r, "num_kv_heads", false, 1, (int64_t)1 << 24, &a->kv, &a->has_kv)) ||
      (st = runs_i64(ctx, t, r, "vocab_size", need, 1, (int64_t)1 << 24, &a->vocab, &a->has_vocab)) ||
      (st = runs_enum(ctx, t, r, "mlp", false, mlp_names, 2, &a->mlp, &a->has_mlp)) ||
      (st = runs_i64(ctx, t, r, "num_experts", false, 1, (int64_t)1 << 24, &a->experts, &a->has_experts)) ||
      (st = runs_i64(ctx, t, r, "top_k", false, 1, (int64_t)1 << 24, &a->top_k, &a->has_top_k)) ||
      (st = runs_i64(ctx, t, r, "moe_ffn_hidden_size", false, 1, (int64_t)1 << 24, &a->moe_ffn, &a->has_moe_ffn)))
    return st;
  if (need && a->arch == 1 && !a->has_experts)
    return runs_fail(ctx, t, r, "num_experts", AP_INVALID, "expected the expert count of a moe row, got an empty field");
  if (need && a->has_experts && a->experts > 1 && !a->has_top_k)
    return runs_fail(ctx, t, r, "top_k", AP_INVALID, "expected the experts per token of a moe row, got an empty field");

  /* Cluster. */
  cluster_spec *c = &rs->cl;
  c->gpu = v->gpu;
  if ((st = runs_i64(ctx, t, r, "num_gpus", true, 1, HW_MAX_DEVICES, &c->num_gpus, NULL)) ||
      (st = runs_i64(ctx, t, r, "gpus_per_node", false, 1, HW_MAX_DEVICES, &c->gpus_per_node, &c->has_gpus_per_node)) ||
      (st = runs_f64(ctx, t, r, "inter_node_GBps_per_gpu", false, 1e-6, 1e6, &c->inter_GBps, &c->has_inter_bw)))
    return st;
  v->num_gpus = c->num_gpus;

  /* Plan: the batch is always stated; every other field may be empty ("not stated"). */
  plan *p = &rs->partial;
  plan_defaults(p);
  unsigned *s = &rs->stated;
  if ((st = runs_plan_fields(ctx, t, r, p, s))) return st;
  /* "selective" in runs.csv names the model's selective granularity, which row_predict picks. */
  if ((*s & PLAN_F(RECOMPUTE)) && p->recompute == PLAN_RECOMPUTE_SELECTIVE) {
    rs->selective = true;
    p->recompute = PLAN_RECOMPUTE_NONE;
    *s &= ~PLAN_F(RECOMPUTE);
  }
  /* A stated vpp implies the schedule Megatron runs with it. */
  if (*s & PLAN_F(VPP)) {
    p->schedule = p->vpp > 1 ? PLAN_SCHED_INTERLEAVED_1F1B : PLAN_SCHED_1F1B;
    *s |= PLAN_F(SCHEDULE);
  }
  snprintf(p->model, sizeof p->model, "%s", v->model);
  snprintf(p->cluster, sizeof p->cluster, "%s:%lld", v->gpu, (long long)c->num_gpus);
  v->plan = *p;
  v->stated = *s;
  return AP_OK;
}

/* ---- Prediction ----------------------------------------------------------------------------------------- */

bool validate_fit_disagrees(const validate_row *v, const cost_result *cr, cost_result *scratch) {
  if (cr->fits || !v->kept_env) return v->measured_oom ? cr->fits : !cr->fits;
  if (v->measured_oom) return false;
  /* The kept plan no longer fits: validate would choose the unstated fields again under these constants. */
  if ((v->kept_stated & COMPLETE_FIELDS) == COMPLETE_FIELDS) return true;
  ap_ctx cctx = {0};
  plan best;
  return complete_plan(&cctx, v->kept_env, &v->kept_partial, v->kept_stated, NULL, &best, scratch, NULL) != AP_OK ||
         !scratch->fits;
}

/* The memory to compare with the row's measurement (validate.h). A rank's predicted total is what nvidia-smi
 * shows (cost/memory.c: live bytes, the allocator's reserve, the CUDA context); PyTorch's reserved bytes leave
 * out the context, a process's resident set also the allocator's reserve. For nvidia-smi on the first node it
 * is the most loaded pipeline rank among that node's devices, otherwise the peak over all ranks. */
double validate_compared_mem(const validate_row *v, const cost_env *env, const cost_result *cr) {
  const hw_cluster *hc = cost_env_cluster(env);
  const cost_mem *peak = cr->peak_rank >= 0 && cr->peak_rank < cr->n_ranks ? &cr->mem[cr->peak_rank] : NULL;
  if (v->mem_convention == VALIDATE_MEM_MAX_RESERVED) return cr->peak_mem_bytes - (peak ? peak->context : 0);
  if (v->mem_convention == VALIDATE_MEM_RSS) return cr->peak_mem_bytes - (peak ? peak->context + peak->reserve : 0);
  if (v->mem_convention != VALIDATE_MEM_NVIDIA_SMI) return cr->peak_mem_bytes;
  int64_t node = hc->groups[0].devices_per_node, stride = plan_axis_stride(&v->plan, PLAN_AXIS_PP);
  if (stride < 1) return cr->peak_mem_bytes;
  double most = 0;
  for (int64_t rank = 0; rank < node && rank < hc->n_devices; rank++) {
    int64_t pr = (rank / stride) % v->plan.pp;
    if (pr < cr->n_ranks && cr->mem[pr].total > most) most = cr->mem[pr].total;
  }
  return most > 0 ? most : cr->peak_mem_bytes;
}

/* The planner's best plan for the row's model, devices, global batch, sequence length and precision (the
 * precision is the row's numerics, not a parallelisation choice, so it is held fixed). Only out of memory is a
 * failure; a search that finds nothing leaves a note. */
static ap_status row_search(validate_report *rep, validate_row *v, const cost_env *env) {
  v->searched = true;
  search_opts o = search_opts_defaults();
  o.top_k = 1;
  o.global_batch_size = v->plan.global_batch_size;
  o.seq_length = v->plan.seq_length;
  o.time_budget_s = rep->search_budget_s;
  o.fixed.precision = v->plan.precision;
  o.fixed.stack = v->plan.stack;
  o.fixed_mask = PLAN_F(PRECISION);
  memcpy(o.fixed.model, v->plan.model, sizeof o.fixed.model);
  memcpy(o.fixed.cluster, v->plan.cluster, sizeof o.fixed.cluster);
  ap_ctx sctx = {0};
  search_result *res = NULL;
  int n = 0;
  search_stats st;
  ap_status s = search_run_all(&sctx, env, &o, &res, &n, &st);
  if (s == AP_NOMEM) {
    search_results_free(res, n);
    return AP_NOMEM;
  }
  if (s == AP_OK && n > 0) {
    v->has_best = true;
    v->best_tokens = res[0].r.tokens_per_s_per_device;
    v->best_plan = res[0].p;
  }
  if (s != AP_OK) v->search_note = arena_strdup(rep->a, sctx.error[0] ? sctx.error : ap_status_str(s));
  else if (st.truncated)
    v->search_note = arena_printf(rep->a, "the search stopped at its time budget of %g s", rep->search_budget_s);
  search_results_free(res, n);
  return AP_OK;
}

/* Whether the model's attention keeps its s×s scores for the backward pass (no flash attention). A runs.csv
 * "selective" names the selective recompute that saves memory on the row's model: Megatron's core-attention
 * recompute (Korthikanti et al. 2022 §5) where attention keeps the scores; with flash attention, which keeps
 * none, that recompute saves nothing, and selective checkpointing is the per-op kind (torchtitan's selective
 * AC; Megatron's --recompute-modules of layernorm and activations come close). */
static bool attention_keeps_scores(const graph *g) {
  for (int bi = 0; bi < g->n_blocks; bi++) {
    const graph_block *blk = &g->blocks[bi];
    for (int i = 0; i < blk->n_ops; i++) {
      const graph_op *op = &blk->ops[i];
      if (op->kind != OP_ATTENTION) continue;
      for (int k = 0; k < op->n_saved; k++) {
        const graph_tensor *t = &blk->tensors[op->saved[k]];
        int n_s = 0;
        for (int d = 0; d < t->n_dims; d++) n_s += t->dims[d] == DIM_S;
        if (n_s >= 2) return true;
      }
    }
  }
  return false;
}

/* Models one row; any failure becomes the row's error (only out of memory stops the run). */
static ap_status row_predict(ap_ctx *ctx, validate_report *rep, const char *csv_dir, validate_row *v,
                             const row_spec *rs, cost_result *cr) {
  ap_ctx rctx = ctx_child(ctx);
  /* validate reports progress (and takes a cancellation) per row; the row's completion would report its own
   * share of one row as the whole run's fraction, so it runs without the callback. */
  rctx.progress_fn = NULL;
  ap_model *m = NULL;
  ap_cluster *cl = NULL;
  cost_env *env = NULL;
  const char *note = NULL;
  ap_status st = validate_row_model(&rctx, rep->a, csv_dir, v, rs, &m, &note);
  if (!st && rep->cluster) {
    st = ap_cluster_load(&rctx, rep->cluster, &cl);
    if (!st && hw_cluster_of(cl)->n_devices != rs->cl.num_gpus)
      st = ctx_fail(&rctx, AP_INVALID, "num_gpus = %lld, but the cluster %s has %lld devices", (long long)rs->cl.num_gpus,
                    rep->cluster, (long long)hw_cluster_of(cl)->n_devices);
  } else if (!st) {
    st = validate_row_cluster(&rctx, v, &rs->cl, &cl);
  }
  if (!st) st = cost_env_new(&rctx, m, cl, NULL, &env);
  complete_stats cs = {0};
  plan partial = rs->partial;
  unsigned stated = rs->stated;
  if (!st && rs->selective) {
    partial.recompute = attention_keeps_scores(model_graph(m)) ? PLAN_RECOMPUTE_SELECTIVE : PLAN_RECOMPUTE_OP;
    stated |= PLAN_F(RECOMPUTE);
  }
  if (!st) st = complete_plan(&rctx, env, &partial, stated, NULL, &v->plan, cr, &cs);
  v->note = note;
  v->n_evaluated = cs.n_evaluated;
  if (st == AP_NOMEM) {
    ctx_fail(ctx, st, "%s", rctx.error);
  } else if (st) {
    v->error = arena_strdup(rep->a, rctx.error[0] ? rctx.error : ap_status_str(st));
    if (!v->error) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
    else st = AP_OK;
  } else {
    const graph *g = model_graph(m);
    for (int b = 0; b < g->n_blocks; b++) v->moe |= g->blocks[b].is_moe;
    v->predicted_tokens = cr->tokens_per_s_per_device;
    v->predicted_peak_mem_bytes = cr->peak_mem_bytes;
    v->fits = v->fits_band_high = cr->fits;
    v->capacity_bytes = cr->capacity_bytes;
    v->iter_s = cr->iter_s;
    v->mfu_palm = cr->mfu_palm;
    v->bound = cr->bound;
    if (v->has_measured && !v->measured_oom)
      v->ape = fabs(v->predicted_tokens - v->measured_tokens) / v->measured_tokens;
    if (v->has_mem) {
      v->compared_mem_bytes = validate_compared_mem(v, env, cr);
      v->mem_ape = fabs(v->compared_mem_bytes - v->measured_mem_bytes) / v->measured_mem_bytes;
    }
    if (rep->search && row_search(rep, v, env)) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  if (rep->keep && !v->error && !st) {
    v->kept_partial = partial;
    v->kept_stated = stated;
    v->kept_model = m;
    v->kept_cluster = cl;
    v->kept_env = env;
    return st;
  }
  cost_env_free(env);
  ap_cluster_free(cl);
  ap_model_free(m);
  return st;
}

/* ---- The run --------------------------------------------------------------------------------------------- */

/* Every row's error band from the residuals the calibration in force holds (`autopar calibrate`'s
 * cross-validations; none from the documented defaults). A row whose chip the calibration did not fit is
 * compared with the runs predicted without their chip. */
static ap_status fill_bands(ap_ctx *ctx, validate_report *rep) {
  cost_calib *cal = malloc(sizeof *cal);
  if (!cal) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  ap_ctx cctx = ctx_child(ctx);
  ap_status st = calib_of_ctx(&cctx, cal);
  if (st) { /* the calibration was read when the rows were predicted: only memory can fail here */
    free(cal);
    return ctx_fail(ctx, st, "%s", cctx.error);
  }
  for (int64_t i = 0; i < rep->n_rows; i++) {
    validate_row *v = &rep->rows[i];
    hw_device d;
    ap_ctx scratch = {0};
    char chip[HW_NAME_MAX];
    if (hw_device_find(&scratch, v->gpu, &d) == AP_OK) calib_chip_of(&d, chip, sizeof chip);
    else snprintf(chip, sizeof chip, "%s", v->gpu);
    v->chip_unseen = calib_chip_index(cal, chip) < 0;
  }
  if (cal->n_points > 0) st = band_fill_pool(ctx, rep, cal->points, cal->n_points);
  free(cal);
  return st;
}

static ap_status validate_run(ap_ctx *ctx, const char *csv_path, const char *cluster, plan_stack stack, bool keep,
                              bool search, double budget_s, validate_report **out) {
  *out = NULL;
  validate_report *rep = calloc(1, sizeof *rep);
  if (!rep || !(rep->a = arena_new())) {
    free(rep);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  rep->keep = keep;
  rep->search = search;
  rep->search_budget_s = budget_s;
  rep->cluster = cluster;
  rep->stack = stack;
  ap_status st = runs_load(ctx, csv_path, &rep->t);
  if (!st) st = runs_check_columns(ctx, rep->t);
  /* The folder of the CSV file, where models/ lives. */
  char *dir = st ? NULL : arena_strdup(rep->a, csv_path);
  if (!st && !dir) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  if (!st) {
    char *slash = strrchr(dir, '/');
    if (!slash) dir = ".";
    else if (slash == dir) dir[1] = '\0';
    else *slash = '\0';
  }
  cost_result *cr = st ? NULL : malloc(sizeof *cr);
  if (!st && !cr) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  if (!st) {
    rep->n_rows = rep->t->n_rows;
    rep->rows = arena_alloc(rep->a, sizeof *rep->rows * (size_t)(rep->n_rows > 0 ? rep->n_rows : 1));
    if (!rep->rows) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  for (int64_t i = 0; !st && i < rep->n_rows; i++) {
    row_spec rs;
    validate_row *v = &rep->rows[i];
    if ((st = row_read(ctx, rep->t, &rep->t->rows[i], v, &rs))) break;
    /* A row's stack column wins; the run's stack (--stack) applies to rows that name none. */
    if (rep->stack != PLAN_STACK_DEFAULT && v->plan.stack == PLAN_STACK_DEFAULT) rs.partial.stack = v->plan.stack = rep->stack;
    if (!(v->input_key = input_key(rep->a, rep->t, &rep->t->rows[i]))) {
      st = ctx_fail(ctx, AP_NOMEM, "out of memory");
      break;
    }
    /* Ids name rows in the figures, so a repeated id is bad input. */
    for (int64_t j = 0; j < i; j++)
      if (strcmp(rep->rows[j].id, v->id) == 0) {
        st = runs_fail(ctx, rep->t, &rep->t->rows[i], "id", AP_INVALID, "expected a unique row id, got \"%s\" again (line %lld)",
                       v->id, (long long)rep->rows[j].line);
        break;
      }
    if (!st) st = row_predict(ctx, rep, dir, v, &rs, cr);
    if (!st && ctx_progress(ctx, (double)(i + 1) / (double)rep->n_rows, "validate")) st = ctx_fail(ctx, AP_CANCELLED, "cancelled");
  }
  free(cr);
  if (!st) st = fill_bands(ctx, rep);
  if (!st) st = validate_summarise(ctx, rep);
  if (st) {
    validate_report_free(rep);
    return st;
  }
  *out = rep;
  return AP_OK;
}

ap_status validate_read_rows(ap_ctx *ctx, const char *file, const char *text, size_t n, int64_t *n_rows) {
  if (n_rows) *n_rows = 0;
  runs_table *t = NULL;
  ap_status st = runs_parse(ctx, file, text, n, &t);
  if (!st) st = runs_check_columns(ctx, t);
  for (int64_t i = 0; !st && i < t->n_rows; i++) {
    validate_row v;
    row_spec rs;
    memset(&v, 0, sizeof v);
    if (!(st = row_read(ctx, t, &t->rows[i], &v, &rs)) && n_rows) (*n_rows)++;
  }
  runs_free(t);
  return st;
}

ap_status validate_file(ap_ctx *ctx, const char *csv_path, validate_report **out) {
  return validate_run(ctx, csv_path, NULL, PLAN_STACK_DEFAULT, false, false, 0, out);
}

ap_status validate_file_keep(ap_ctx *ctx, const char *csv_path, validate_report **out) {
  return validate_run(ctx, csv_path, NULL, PLAN_STACK_DEFAULT, true, false, 0, out);
}

ap_status validate_file_search(ap_ctx *ctx, const char *csv_path, double budget_per_row_s, validate_report **out) {
  return validate_run(ctx, csv_path, NULL, PLAN_STACK_DEFAULT, false, true, budget_per_row_s, out);
}

ap_status validate_file_on(ap_ctx *ctx, const char *csv_path, const char *cluster, double budget_per_row_s,
                           validate_report **out) {
  return validate_file_stack(ctx, csv_path, cluster, PLAN_STACK_DEFAULT, budget_per_row_s, out);
}

ap_status validate_file_stack(ap_ctx *ctx, const char *csv_path, const char *cluster, plan_stack stack,
                              double budget_per_row_s, validate_report **out) {
  return validate_run(ctx, csv_path, cluster, stack, false, budget_per_row_s > 0, budget_per_row_s, out);
}

void validate_report_set_row(validate_report *dst, int64_t i, const validate_row *src) {
  if (i < 0 || i >= dst->n_rows) return;
  dst->rows[i] = *src;
  dst->rows[i].kept_env = NULL, dst->rows[i].kept_cluster = NULL, dst->rows[i].kept_model = NULL;
}

ap_status validate_report_hold(ap_ctx *ctx, validate_report *dst, validate_report *src) {
  validate_report **h = realloc(dst->held, sizeof *h * (size_t)(dst->n_held + 1));
  if (!h) {
    validate_report_free(src);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  dst->held = h;
  dst->held[dst->n_held++] = src;
  return AP_OK;
}

ap_status validate_report_resummarise(ap_ctx *ctx, validate_report *rep, const char *cv, const validate_fold *folds,
                                      int64_t n_folds) {
  rep->cv = cv ? arena_strdup(rep->a, cv) : NULL;
  rep->n_folds = 0;
  rep->folds = n_folds > 0 ? arena_alloc(rep->a, sizeof *rep->folds * (size_t)n_folds) : NULL;
  if ((cv && !rep->cv) || (n_folds > 0 && !rep->folds)) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  for (int64_t k = 0; k < n_folds; k++) {
    rep->folds[k] = folds[k];
    if (!(rep->folds[k].name = arena_strdup(rep->a, folds[k].name))) return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  rep->n_folds = n_folds;
  return validate_summarise(ctx, rep);
}


void validate_report_free(validate_report *r) {
  if (!r) return;
  for (int i = 0; i < r->n_held; i++) validate_report_free(r->held[i]);
  free(r->held);
  for (int64_t i = 0; r->rows && i < r->n_rows; i++) {
    cost_env_free(r->rows[i].kept_env);
    ap_cluster_free(r->rows[i].kept_cluster);
    ap_model_free(r->rows[i].kept_model);
  }
  runs_free(r->t);
  arena_free(r->a);
  free(r);
}

const validate_summary *validate_report_summary(const validate_report *r) { return &r->sum; }

/* ---- Output ---------------------------------------------------------------------------------------------- */

/* The chooser of plan_summary's marks: a field is chosen by autopar when the row did not state it. */
static bool row_chose(const void *user, const char *field) {
  unsigned stated = *(const unsigned *)user;
  for (int b = 0; b < COMPLETE_N_FIELDS; b++)
    if (strcmp(plan_field_name((plan_field_id)b), field) == 0) return !(stated & (1u << b));
  return false;
}

void validate_plan_brief(const plan *p, unsigned stated, char *out, size_t n) {
  plan_summary(p, PLAN_SUMMARY_COMPACT, row_chose, &stated, out, n);
}
