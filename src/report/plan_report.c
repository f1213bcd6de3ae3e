/* `autopar plan` (report layer): the public options turned into a search, and its result explained.
 * DESIGN.md "Search" and "Interfaces"; docs/planner.md describes the output.
 *
 * Reading order: plan_fix_parse (--fix), the option checks of ap_plan_search, the costing of a --compare plan,
 * then ap_plan_search itself: it runs the search, builds the one answer document (plan_doc.c, autopar-search/2)
 * and writes it as JSON or renders it as text (plan_text.c), so text and JSON come from the same figures. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonx.h"
#include "plan/export.h"
#include "plan/plan_api.h"
#include "report/plan_doc.h"
#include "model/model.h"
#include "plan/stack.h"
#include "report/plan_report.h"

/* ---- --fix ------------------------------------------------------------------------------------------------ */

static void trim(char *s) {
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = '\0';
  size_t i = 0;
  while (s[i] == ' ' || s[i] == '\t') i++;
  if (i) memmove(s, s + i, n - i + 1);
}

static ap_status fix_one(ap_ctx *ctx, char *pair, ap_plan *ap, unsigned *mask, uint64_t *seen) {
  char *eq = strchr(pair, '=');
  *eq = '\0';
  char *key = pair, *value = eq + 1;
  trim(key);
  trim(value);
  /* The keys are the field table's (plan_fields.c): canonical names, CLI flags and aliases. */
  const plan_field *f = plan_field_find(key);
  if (f && (f->flags & PLAN_FF_PROBLEM)) {
    char flag[64];
    plan_field_flag(f->id, flag, sizeof flag);
    return ctx_fail(ctx, AP_INVALID, "--fix: %s is part of the problem, not of the plan; give it with --%s", key, flag);
  }
  if (!f || (f->flags & PLAN_FF_NO_KEY)) {
    const char *names[PLAN_F_COUNT_];
    char list[512] = "";
    size_t n = 0, n_fields;
    const plan_field *fields = plan_fields(&n_fields);
    for (size_t i = 0; i < n_fields; i++)
      if (!(fields[i].flags & (PLAN_FF_NO_KEY | PLAN_FF_PROBLEM))) {
        names[n] = plan_field_name(fields[i].id);
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", n ? ", " : "", names[n]);
        n++;
      }
    char sugg[128];
    util_suggest(key, names, n, sugg, sizeof sugg);
    return ctx_fail(ctx, AP_INVALID, "--fix: unknown plan field \"%.64s\"%s%s%s (fields: %s)", key,
                    *sugg ? "; did you mean " : "", sugg, *sugg ? "?" : "", list);
  }
  if (!*value) return ctx_fail(ctx, AP_INVALID, "--fix: %s needs a value (%s=VALUE)", key, key);
  /* One bit per field, so that an alias of a field already given (mbs, micro_batch_size) is a repeat too. */
  if (*seen >> f->id & 1u) return ctx_fail(ctx, AP_INVALID, "--fix: %s given twice; give each field once", key);
  *seen |= (uint64_t)1 << f->id;
  ap_ctx scratch = ctx_child(ctx);
  if (ap_plan_set(&scratch, ap, key, value)) return ctx_fail(ctx, AP_INVALID, "--fix: %s", scratch.error);
  /* The offload fields are not searched, but fixing them (even to none) tells the planner not to turn offload
   * on when nothing fits (ap_plan_search); fixing fused_loss keeps the search's choice of loss off (search_run_all). */
  if ((f->flags & PLAN_FF_SEARCHED) || f->id == PLAN_F_OFFLOAD_OPTIMIZER || f->id == PLAN_F_OFFLOAD_PARAM ||
      f->id == PLAN_F_FUSED_LOSS)
    *mask |= 1u << f->id;
  return AP_OK;
}

ap_status plan_fix_parse(ap_ctx *ctx, const char *fix, plan *base, unsigned *mask) {
  if (!fix || !*fix) return AP_OK;
  size_t n = strlen(fix);
  char *buf = malloc(n + 1), *pair = malloc(n + 1);
  if (!buf || !pair) {
    free(buf);
    free(pair);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  memcpy(buf, fix, n + 1);
  ap_plan ap = {.p = *base};
  ap_status st = AP_OK;
  uint64_t seen = 0; /* the fields given so far */
  _Static_assert(PLAN_F_COUNT_ <= 64, "seen holds one bit per field");
  pair[0] = '\0';
  /* Split on commas; a token without '=' continues the value before it. */
  for (char *tok = buf, *next; tok && !st; tok = next) {
    char *comma = strchr(tok, ',');
    next = comma ? comma + 1 : NULL;
    if (comma) *comma = '\0';
    if (strchr(tok, '=')) {
      if (pair[0]) st = fix_one(ctx, pair, &ap, mask, &seen);
      snprintf(pair, n + 1, "%s", tok);
    } else if (pair[0]) {
      size_t len = strlen(pair);
      snprintf(pair + len, n + 1 - len, ",%s", tok);
    } else {
      char t[64];
      snprintf(t, sizeof t, "%s", tok);
      trim(t);
      if (*t) st = ctx_fail(ctx, AP_INVALID, "--fix: expected key=value pairs such as tp=8,pp=4, got \"%.64s\"", t);
    }
  }
  if (!st && pair[0]) st = fix_one(ctx, pair, &ap, mask, &seen);
  if (!st) *base = ap.p;
  free(buf);
  free(pair);
  return st;
}

/* ---- Options ------------------------------------------------------------------------------------------------- */

void ap_search_opts_init(ap_search_opts *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->top_k = 3;
  o->max_mem_fraction = 1.0;
}

/* Strategy names ("grid,stage-dp") to registry bits. */
static ap_status parse_strategies(ap_ctx *ctx, const char *names, unsigned *mask) {
  *mask = 0;
  if (!names || !*names) return AP_OK;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", names);
  size_t n_reg;
  const search_strategy *const *reg = search_strategies(&n_reg);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    trim(tok);
    int i = search_strategy_find(tok);
    if (i < 0 || i >= 32) {
      char list[256] = "";
      for (size_t k = 0; k < n_reg; k++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? ", " : "", reg[k]->name);
      return ctx_fail(ctx, AP_INVALID, "--strategy: unknown strategy \"%.64s\" (expected one of: %s)", tok, list);
    }
    *mask |= 1u << i;
  }
  return AP_OK;
}

/* The cluster as the user named it: its origin without the file it came from. */
static void cluster_spec(const hw_cluster *hc, char *out, size_t n) {
  const char *o = hc->origin && *hc->origin ? hc->origin : hc->name;
  const char *paren = strstr(o, " (");
  int len = paren ? (int)(paren - o) : (int)strlen(o);
  snprintf(out, n, "%.*s", len, o);
}

/* Keeps only plans the exporter can write (ap_plan_search's export_format), and the exporter's reason for the
 * first it refused, which the message says when it refuses them all. */
typedef struct {
  const ap_model *model;
  const char *format;
  char first_refusal[512];
} admit_ctx;

static bool admit_export(void *user, const plan *p) {
  admit_ctx *a = user;
  ap_ctx scratch = {0};
  ap_plan ap = {.p = *p, .dp_set = true, .n_micro_set = true, .gbs_set = true, .loss_set = true};
  ap_status st = export_check_plan(&scratch, a->model, &ap, a->format, false);
  if (st && !a->first_refusal[0]) snprintf(a->first_refusal, sizeof a->first_refusal, "%.500s", scratch.error);
  ctx_clear(&scratch);
  return st == AP_OK;
}

/* ---- The comparison with a given plan -------------------------------------------------------------------------- */

static void compare_cost(const cost_env *env, const ap_plan *given, const search_opts *so, plan_compare *c) {
  ap_plan copy = *given;
  plan_resolve(&copy, cost_env_cluster(env)->n_devices);
  c->have = true;
  c->p = copy.p;
  int64_t seq = so->seq_length > 0 ? so->seq_length : cost_env_graph(env)->default_seq;
  int64_t pseq = c->p.seq_length > 0 ? c->p.seq_length : cost_env_graph(env)->default_seq;
  c->batch_differs = c->p.global_batch_size != so->global_batch_size || pseq != seq;
  ap_ctx scratch = {0};
  c->valid = cost_estimate(&scratch, env, &c->p, c->r) == AP_OK;
  if (!c->valid) snprintf(c->error, sizeof c->error, "%.500s", scratch.error);
}

/* Why the search did not return the --compare plan c although it is no slower than the winner best: the first
 * of these that holds, each a fact of this search (never a time budget or a fixed field that was not set):
 * its batch differs; it exceeds the memory limit (--max-mem-fraction); it breaks a fixed field; the stack
 * does not run it; the export cannot write it; the time budget ran out; it ties with #1 (ties keep the plan
 * found first); else the strategies did not generate it. */
static void compare_reason(const cost_env *env, const search_opts *so, const search_stats *stats,
                           const search_result *best, plan_compare *c) {
  c->reason[0] = '\0';
  if (!c->valid || !best || c->r->iter_s > best->r.iter_s * (1 + 1e-9)) return;
  char why[1024];
  plan q = c->p;
  q.stack = so->fixed.stack; /* as search_offer: the search's stack is every plan's */
  double limit = so->max_mem_fraction * c->r->capacity_bytes;
  if (c->batch_differs) {
    snprintf(c->reason, sizeof c->reason, "its global batch or sequence length differs from the search's");
  } else if (!c->r->fits || c->r->peak_mem_bytes > limit) {
    snprintf(c->reason, sizeof c->reason, "its peak memory %.2f GiB exceeds the limit of %.2f GiB (%g of device memory)",
             c->r->peak_mem_bytes / 1073741824.0, limit / 1073741824.0, so->max_mem_fraction);
  } else if (search_breaks_fixed(so, cost_env_graph(env)->default_seq, &q, why, sizeof why)) {
    snprintf(c->reason, sizeof c->reason, "%s", why);
  } else if (!plan_stack_runs(q.stack, &q, why, sizeof why)) {
    snprintf(c->reason, sizeof c->reason, "the stack does not run it: %s", why);
  } else if (so->admit && !so->admit(so->admit_user, &q)) {
    snprintf(c->reason, sizeof c->reason, "the requested export cannot write it");
  } else if (stats->truncated || stats->strategies_truncated) {
    snprintf(c->reason, sizeof c->reason, "the search's time budget (%g s, or a strategy's own) ran out first",
             so->time_budget_s);
  } else if (plan_equal(&q, &best->p)) {
    snprintf(c->reason, sizeof c->reason, "it is the winner, #1");
  } else if (c->r->iter_s >= best->r.iter_s * (1 - 1e-9)) {
    snprintf(c->reason, sizeof c->reason,
             "it ties with #1 (within a part in 10^9 of its iteration time); ties keep the plan found first");
  } else {
    snprintf(c->reason, sizeof c->reason,
             "no strategy generated it: it lies outside the candidates they try (docs/planner.md lists them) or "
             "their pruning missed it");
  }
}

/* ---- Public API --------------------------------------------------------------------------------------------------- */

/* Where the search's stack came from, for the document (plan_doc_in). */
typedef struct {
  const char *source;
  char why[160];
} stack_origin;

static ap_status build_opts(ap_ctx *ctx, const ap_model *model, const cost_env *env, const ap_search_opts *o,
                            search_opts *so, const char *spec, stack_origin *so_origin) {
  *so = search_opts_defaults();
  so->global_batch_size = o->global_batch_size;
  so->seq_length = o->seq_length;
  so->top_k = o->top_k;
  so->time_budget_s = o->time_budget_s;
  so->max_mem_fraction = o->max_mem_fraction;
  if (o->global_batch_size < 1)
    return ctx_fail(ctx, AP_INVALID, "plan: the global batch (--gbs) must be a positive number of sequences, got %lld",
                    (long long)o->global_batch_size);
  if (o->seq_length < 0) return ctx_fail(ctx, AP_INVALID, "plan: --seq must be positive, got %lld", (long long)o->seq_length);
  if (o->top_k < 1 || o->top_k > 1000) return ctx_fail(ctx, AP_INVALID, "plan: --top must be in [1, 1000], got %d", o->top_k);
  if (!(o->max_mem_fraction > 0 && o->max_mem_fraction <= 1))
    return ctx_fail(ctx, AP_INVALID, "plan: --max-mem-fraction must be in (0, 1], got %g", o->max_mem_fraction);
  if (!(o->time_budget_s >= 0) || !isfinite(o->time_budget_s))
    return ctx_fail(ctx, AP_INVALID, "plan: --time-budget must be a non-negative number of seconds, got %g", o->time_budget_s);
  if (o->objective && *o->objective && !search_objective_from_name(o->objective, &so->objective))
    return ctx_fail(ctx, AP_INVALID, "plan: --objective must be throughput or memory, got \"%.64s\"", o->objective);
  ap_status st = plan_fix_parse(ctx, o->fix, &so->fixed, &so->fixed_mask);
  if (!st) st = parse_strategies(ctx, o->strategies, &so->strategies);
  if (st) return st;
  /* The path a config was read from, so that `export --plan` loads the same model again; the name where the
   * path does not fit the field. */
  const char *mspec = ap_model_spec(model);
  snprintf(so->fixed.model, sizeof so->fixed.model, "%s",
           strlen(mspec) < sizeof so->fixed.model ? mspec : ap_model_name(model));
  snprintf(so->fixed.cluster, sizeof so->fixed.cluster, "%s", spec);
  so->fixed.global_batch_size = o->global_batch_size;
  so->fixed.seq_length = o->seq_length;
  /* The stack, asking for nothing the user did not say: --stack, else the one the export's format runs on, else
   * the reference executor on a cluster of autopar profile's CPU ranks, else the model's default (plan/stack.h);
   * the document says which and why. */
  plan_stack stk = plan_stack_of_export(o->export_format);
  so_origin->source = "--export";
  snprintf(so_origin->why, sizeof so_origin->why, "from --export %.64s", o->export_format ? o->export_format : "");
  if (o->stack && *o->stack) {
    if (!plan_stack_from_name(o->stack, &stk) || stk == PLAN_STACK_DEFAULT)
      return ctx_fail(ctx, AP_INVALID,
                      "plan: --stack must be one of megatron-lm, megatron-bridge, nemo, megatron-deepspeed, torchtitan, "
                      "llm-foundry, deepspeed, autopar, any; got \"%.64s\"",
                      o->stack);
    so_origin->source = "--stack";
    snprintf(so_origin->why, sizeof so_origin->why, "--stack");
  }
  if (stk == PLAN_STACK_COUNT_ || stk == PLAN_STACK_DEFAULT) {
    plan probe;
    plan_defaults(&probe);
    const char *why = NULL;
    stk = cost_env_stack(env, &probe, &why);
    so_origin->source = cost_env_executor(env) ? "cluster" : "default";
    snprintf(so_origin->why, sizeof so_origin->why, "%s", why);
  }
  /* The executor computes in fp32 only (docs/executor.md): on its own cluster its plans are fp32 unless fixed. */
  if (stk == PLAN_STACK_AUTOPAR && cost_env_executor(env) && !(so->fixed_mask & PLAN_F(PRECISION))) {
    so->fixed.precision = PLAN_PREC_FP32;
    so->fixed_mask |= PLAN_F(PRECISION);
  }
  /* A --fix that the stack cannot run fails now, naming the field, rather than leaving an empty space. */
  char why[512];
  if (!plan_stack_runs_fixed(stk, &so->fixed, so->fixed_mask, why, sizeof why))
    return ctx_fail(ctx, AP_INVALID, "plan: --fix %s (stack %s, %s)", why, plan_stack_name(stk), so_origin->why);
  /* A stack that lacks the model runs none of its plans (issue 10): torchtitan trains only its own models. */
  if (stk == PLAN_STACK_TORCHTITAN && !tt_trains_family(model_graph(model)))
    return ctx_fail(ctx, AP_UNSUPPORTED,
                    "plan: stack torchtitan: torchtitan has no %s model (model_type \"%s\"); it trains llama3, qwen3, "
                    "deepseek_v3 and gpt_oss (torchtitan/models/ @ b5bcd76c); plan for another --stack",
                    model_graph(model)->name, model_graph(model)->model_type ? model_graph(model)->model_type : "");
  so->fixed.stack = stk;
  return AP_OK;
}

ap_status ap_plan_search(ap_ctx *ctx, const ap_model *model, const ap_cluster *cluster, const ap_search_opts *o,
                         int format, char **out, ap_plan **best) {
  API_ENTER(ctx);
  if (best) *best = NULL;
  if (!ctx || !out) return ctx_fail(ctx, AP_INVALID, "ap_plan_search: ctx and out must not be NULL");
  *out = NULL;
  if (!model || !cluster || !o) return ctx_fail(ctx, AP_INVALID, "ap_plan_search: model, cluster and opts are required");
  if (format != AP_OUT_TEXT && format != AP_OUT_JSON)
    return ctx_fail(ctx, AP_INVALID, "ap_plan_search: format must be AP_OUT_TEXT or AP_OUT_JSON, got %d", format);
  ctx_clear(ctx);
  const hw_cluster *hc = hw_cluster_of(cluster);
  char spec[PLAN_NAME_MAX];
  cluster_spec(hc, spec, sizeof spec);
  cost_env *env = NULL;
  ap_status st = cost_env_new(ctx, model, cluster, NULL, &env);
  if (st) return st;
  search_opts so;
  stack_origin origin = {"default", ""};
  if ((st = build_opts(ctx, model, env, o, &so, spec, &origin))) {
    cost_env_free(env);
    return st;
  }
  admit_ctx adm = {model, o->export_format, ""};
  if (o->export_format) {
    /* An unknown format fails now, not as "nothing fits". */
    ap_ctx probe = ctx_child(ctx);
    ap_plan dummy = {.dp_set = true, .n_micro_set = true, .gbs_set = true, .loss_set = true};
    plan_defaults(&dummy.p);
    char *text = NULL;
    if (ap_export(&probe, model, &dummy, o->export_format, &text) && strstr(probe.error, "unknown export format")) {
      cost_env_free(env);
      return ctx_fail(ctx, AP_INVALID, "--export: %s", probe.error);
    }
    free(text);
    so.admit = admit_export;
    so.admit_user = &adm;
    /* A format that cannot carry the stack's fused loss (torchtitan-toml: v0.2.2 predates ChunkedLossWrapper)
     * plans with the unfused one, unless the loss is fixed: the same plan with each loss, asked of the format. */
    if (!(so.fixed_mask & PLAN_F(FUSED_LOSS)) && plan_stack_search_fused(so.fixed.stack)) {
      dummy.p.stack = so.fixed.stack;
      dummy.p.seq_length = so.fixed.seq_length;
      bool ok[2];
      for (int f = 0; f < 2; f++) {
        dummy.p.fused_loss = f == 1;
        ap_ctx scratch = ctx_child(ctx);
        ok[f] = export_check_plan(&scratch, model, &dummy, o->export_format, false) == AP_OK;
        ctx_clear(&scratch);
      }
      if (ok[0] && !ok[1]) {
        so.fixed.fused_loss = false;
        so.fixed_mask |= PLAN_F(FUSED_LOSS);
      }
    }
  }
  plan_compare cmp = {0};
  if (o->compare && !(cmp.r = malloc(sizeof *cmp.r))) {
    cost_env_free(env);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  if (o->compare) compare_cost(env, o->compare, &so, &cmp);

  plan_space space = {0};
  so.observe = plan_space_observe;
  so.observe_user = &space;
  search_result *res = NULL;
  int n = 0;
  search_stats stats;
  st = search_run_all(ctx, env, &so, &res, &n, &stats);
  /* Offload (cost/offload.c) only when nothing fits without it, and only where the cluster states a host side
   * and the caller did not fix offload: optimizer states to host memory (ZeRO-Offload), then the parameters
   * too (ZeRO-3), then both to NVMe (ZeRO-Infinity); the first that fits is the answer. */
  static const plan_offload levels[][2] = {
      {PLAN_OFFLOAD_CPU, PLAN_OFFLOAD_NONE}, {PLAN_OFFLOAD_CPU, PLAN_OFFLOAD_CPU}, {PLAN_OFFLOAD_NVME, PLAN_OFFLOAD_NVME}};
  const hw_node_group *g0 = &hc->groups[0];
  bool may_offload = !search_opts_fixes(&so, PLAN_F_OFFLOAD_OPTIMIZER) && !search_opts_fixes(&so, PLAN_F_OFFLOAD_PARAM) &&
                     g0->device.host_link_bw_Bps > 0 && g0->host.mem_bytes > 0 && g0->host.mem_bw_Bps > 0;
  bool zero_fixed = (so.fixed_mask & PLAN_F(ZERO_STAGE)) != 0;
  for (size_t lv = 0; st == AP_INFEASIBLE && may_offload && lv < AP_COUNT(levels); lv++) {
    if (levels[lv][0] == PLAN_OFFLOAD_NVME && !(g0->host.nvme_bw_Bps > 0)) break;
    search_results_free(res, n);
    res = NULL;
    n = 0;
    space.n = 0;
    space.n_seen = 0;
    ctx_clear(ctx);
    so.fixed.offload_optimizer = levels[lv][0];
    so.fixed.offload_param = levels[lv][1];
    /* Parameter offload runs on ZeRO-3 only (plan_validate): the level fixes it, unless the caller fixed a stage. */
    if (levels[lv][1] != PLAN_OFFLOAD_NONE && !(so.fixed_mask & PLAN_F(ZERO_STAGE)) && !zero_fixed) {
      so.fixed.zero_stage = 3;
      so.fixed_mask |= PLAN_F(ZERO_STAGE);
    }
    st = search_run_all(ctx, env, &so, &res, &n, &stats);
    if (st == AP_INFEASIBLE && lv + 1 == AP_COUNT(levels)) break;
  }
  if (st == AP_UNSUPPORTED && o->export_format && stats.n_not_admitted > 0)
    st = ctx_fail(ctx, AP_UNSUPPORTED, "--export %s: none of the plans that fit can be written as %s (the first refused: %s; "
                  "docs/exports.md lists what it cannot express; --fix can steer the search to what it can)",
                  o->export_format, o->export_format, adm.first_refusal[0] ? adm.first_refusal : "no reason given");
  char message[1024];
  snprintf(message, sizeof message, "%s", ap_ctx_error(ctx));
  if (o->compare && st == AP_OK && n > 0) compare_reason(env, &so, &stats, &res[0], &cmp);
  if (st == AP_OK || st == AP_INFEASIBLE || (st == AP_CANCELLED && n > 0)) {
    plan_doc_in in = {env, &so, &stats, res, n, st, message, o->compare ? &cmp : NULL, spec, &space,
                      origin.source, origin.why};
    jd doc;
    plan_doc(&doc, &in);
    *out = doc.failed ? NULL : format == AP_OUT_JSON ? jd_dump(&doc) : plan_doc_text(doc.root);
    jd_free(&doc);
    if (!*out) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
    /* Helpers that write "?" when their buffer fails (plan_report_brief) leave the mark (core/alloc.h). */
    if (*out && mem_failed()) st = ctx_fail(ctx, AP_NOMEM, "out of memory writing the report");
    if (best && *out && st != AP_INFEASIBLE && st != AP_NOMEM && n > 0) { /* (plan_copy's status replaces st) */
      ap_plan *bp = calloc(1, sizeof *bp);
      if (!bp) {
        st = ctx_fail(ctx, AP_NOMEM, "out of memory");
      } else {
        st = plan_copy(&bp->p, &res[0].p);
        bp->dp_set = bp->n_micro_set = bp->gbs_set = bp->loss_set = true;
        *best = bp;
        if (st) ctx_fail(ctx, st, "out of memory");
      }
    }
    /* The verdict stays in the context for the caller (the CLI prints it on failure). */
    if (st == AP_INFEASIBLE || st == AP_CANCELLED) ctx_fail(ctx, st, "%s", message);
  }
  if (st == AP_NOMEM) {
    free(*out);
    *out = NULL;
    if (best) {
      ap_plan_free(*best);
      *best = NULL;
    }
  }
  search_results_free(res, n);
  free(space.pts);
  free(cmp.r);
  cost_env_free(env);
  return st;
}
