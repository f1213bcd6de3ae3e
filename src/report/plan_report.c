/* `autopar plan` (report layer): the public options turned into a search, and its result explained.
 * DESIGN.md "Search" and "Interfaces"; docs/planner.md describes the output.
 *
 * Reading order: plan_fix_parse (--fix), the option checks of ap_plan_search, then the explanation: one block
 * per plan (iteration time, tokens/s, MFU, the breakdown, what bounds it, memory per stage), what each runner-up
 * loses on against the winner, the closest plans when nothing fits with what would make them fit, and the
 * side-by-side comparison with a given plan. Text and JSON are written from the same figures. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonx.h"
#include "plan/plan_api.h"
#include "report/plan_report.h"

/* ---- --fix ------------------------------------------------------------------------------------------------ */

enum { NO_BIT = 99 };

/* The keys --fix takes (those of ap_plan_set but the batch) and the search field each holds. */
static const struct {
  const char *key;
  unsigned bit;
} fix_keys[] = {
    {"tp", COMPLETE_BIT_TP},
    {"pp", COMPLETE_BIT_PP},
    {"dp", COMPLETE_BIT_DP},
    {"cp", COMPLETE_BIT_CP},
    {"ep", COMPLETE_BIT_EP},
    {"etp", SEARCH_BIT_ETP},
    {"vpp", COMPLETE_BIT_VPP},
    {"mbs", COMPLETE_BIT_MBS},
    {"micro-batches", SEARCH_BIT_MICRO_BATCHES},
    {"schedule", COMPLETE_BIT_SCHEDULE},
    {"recompute", COMPLETE_BIT_RECOMPUTE},
    {"recompute-layers", SEARCH_BIT_RECOMPUTE_LAYERS},
    {"zero", COMPLETE_BIT_ZERO},
    {"precision", COMPLETE_BIT_PRECISION},
    {"sp", COMPLETE_BIT_SP},
    {"order", SEARCH_BIT_ORDER},
    {"stage-layers", SEARCH_BIT_SPLIT},
    {"tp-comm-overlap", NO_BIT},
    {"overlap-grad-reduce", NO_BIT},
    {"overlap-param-gather", NO_BIT},
    {"fused-loss", NO_BIT},
};

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
  if (strcmp(key, "gbs") == 0 || strcmp(key, "seq") == 0)
    return ctx_fail(ctx, AP_INVALID, "--fix: %s is part of the problem, not of the plan; give it with --%s", key, key);
  int found = -1;
  for (size_t i = 0; i < AP_COUNT(fix_keys); i++)
    if (strcmp(fix_keys[i].key, key) == 0) found = (int)i;
  if (found < 0) {
    const char *names[AP_COUNT(fix_keys)];
    for (size_t i = 0; i < AP_COUNT(fix_keys); i++) names[i] = fix_keys[i].key;
    char sugg[128];
    util_suggest(key, names, AP_COUNT(fix_keys), sugg, sizeof sugg);
    return ctx_fail(ctx, AP_INVALID, "--fix: unknown plan field \"%.64s\"%s%s%s (fields: tp, pp, dp, cp, ep, etp, vpp, mbs, "
                    "micro-batches, schedule, recompute, recompute-layers, zero, precision, sp, order, stage-layers, "
                    "tp-comm-overlap, overlap-grad-reduce, overlap-param-gather, fused-loss)",
                    key, *sugg ? "; did you mean " : "", sugg, *sugg ? "?" : "");
  }
  if (!*value) return ctx_fail(ctx, AP_INVALID, "--fix: %s needs a value (%s=VALUE)", key, key);
  if (*seen >> found & 1u) return ctx_fail(ctx, AP_INVALID, "--fix: %s given twice; give each field once", key);
  *seen |= (uint64_t)1 << found;
  ap_ctx scratch = ctx_child(ctx);
  if (ap_plan_set(&scratch, ap, key, value)) return ctx_fail(ctx, AP_INVALID, "--fix: %s", scratch.error);
  if (fix_keys[found].bit != NO_BIT) *mask |= 1u << fix_keys[found].bit;
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
  uint64_t seen = 0; /* fix_keys given so far */
  _Static_assert(AP_COUNT(fix_keys) <= 64, "seen holds one bit per key");
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

/* Keeps only plans the exporter can write (ap_plan_search's export_format). */
typedef struct {
  const ap_model *model;
  const char *format;
} admit_ctx;

static bool admit_export(void *user, const plan *p) {
  const admit_ctx *a = user;
  ap_ctx scratch = {0};
  ap_plan ap = {.p = *p, .dp_set = true, .n_micro_set = true, .gbs_set = true};
  char *text = NULL;
  ap_status st = ap_export(&scratch, a->model, &ap, a->format, &text);
  free(text);
  return st == AP_OK;
}

/* ---- Figures shared by the text and the JSON ----------------------------------------------------------------- */

static double gib(double bytes) { return bytes / 1073741824.0; }

/* The parts of the iteration time, as cost_result_json names them. */
static const struct {
  const char *label, *key;
  size_t offset;
} time_parts[] = {
    {"forward", "forward", offsetof(cost_time, forward)},
    {"backward", "backward", offsetof(cost_time, backward)},
    {"recompute", "recompute", offsetof(cost_time, recompute)},
    {"bubble", "bubble", offsetof(cost_time, bubble)},
    {"TP comm", "tp_comm_exposed", offsetof(cost_time, tp_comm)},
    {"CP comm", "cp_comm_exposed", offsetof(cost_time, cp_comm)},
    {"EP comm", "ep_comm_exposed", offsetof(cost_time, ep_comm)},
    {"PP comm", "pp_comm_exposed", offsetof(cost_time, pp_comm)},
    {"DP comm", "dp_comm_exposed", offsetof(cost_time, dp_comm)},
    {"optimizer", "optimizer", offsetof(cost_time, optimizer)},
};
enum { N_PARTS = AP_COUNT(time_parts), PART_BUBBLE = 3, FIRST_COMM = 4, LAST_COMM = 8 };

static double part(const cost_time *t, size_t i) {
  double v;
  memcpy(&v, (const char *)t + time_parts[i].offset, sizeof v);
  return v;
}

void plan_report_brief(const plan *p, char *out, size_t n) {
  strbuf sb = {0};
  sb_printf(&sb, "tp %lld, pp %lld, dp %lld", (long long)p->tp, (long long)p->pp, (long long)p->dp);
  if (p->cp > 1) sb_printf(&sb, ", cp %lld", (long long)p->cp);
  if (p->ep > 1 || (p->etp > 0 && p->etp != p->tp)) sb_printf(&sb, ", ep %lld etp %lld", (long long)p->ep, (long long)plan_etp(p));
  plan d;
  plan_defaults(&d);
  if (memcmp(d.order, p->order, sizeof d.order) != 0) {
    sb_puts(&sb, " (order ");
    for (int i = 0; i < PLAN_N_ORDER; i++) sb_printf(&sb, "%s%s", i ? "-" : "", plan_axis_name(p->order[i]));
    sb_puts(&sb, ")");
  }
  sb_printf(&sb, " | mbs %lld x %lld | %s", (long long)p->micro_batch_size, (long long)p->n_micro_batches,
            plan_schedule_name(p->schedule));
  if (p->vpp > 1) sb_printf(&sb, " vpp %lld", (long long)p->vpp);
  if (p->n_stage_layers > 0) {
    sb_puts(&sb, " [");
    for (int32_t c = 0; c < p->n_stage_layers && c < 12; c++) sb_printf(&sb, "%s%d", c ? "," : "", (int)p->stage_layers[c]);
    sb_puts(&sb, p->n_stage_layers > 12 ? ",...]" : "]");
  }
  if (p->sequence_parallel && p->tp > 1) sb_puts(&sb, " | sp");
  sb_printf(&sb, " | recompute %s", plan_recompute_name(p->recompute));
  if (p->recompute == PLAN_RECOMPUTE_FULL && p->n_chunk_recompute > 0) sb_puts(&sb, " (per chunk)");
  else if (p->recompute == PLAN_RECOMPUTE_FULL && p->recompute_layers > 0)
    sb_printf(&sb, " (%d layers per chunk)", (int)p->recompute_layers);
  sb_printf(&sb, " | ZeRO %d | %s", (int)p->zero_stage, plan_precision_name(p->precision));
  if (p->tp_comm_overlap && p->tp > 1) sb_puts(&sb, " | tp-comm-overlap");
  if (p->fused_loss) sb_puts(&sb, " | fused loss");
  char *s = sb_take(&sb);
  snprintf(out, n, "%s", s ? s : "?");
  free(s);
}

/* What bounds the plan, in words: the cost model's verdict with the share that earns it. */
static void bound_text(const cost_result *r, char *out, size_t n) {
  const cost_time *t = &r->time;
  double it = r->iter_s > 0 ? r->iter_s : 1;
  if (!r->fits) {
    snprintf(out, n, "memory (%.1f GiB needed of %.1f)", gib(r->peak_mem_bytes), gib(r->capacity_bytes));
    return;
  }
  double comm = 0, top = 0;
  size_t top_i = FIRST_COMM;
  for (size_t i = FIRST_COMM; i <= LAST_COMM; i++) {
    comm += part(t, i);
    if (part(t, i) > top) top = part(t, i), top_i = i;
  }
  const char *b = r->bound ? r->bound : "compute";
  if (strcmp(b, "bubble") == 0)
    snprintf(out, n, "bubble: the pipeline idles %.1f%% of the iteration", 100 * t->bubble / it);
  else if (strcmp(b, "communication") == 0)
    snprintf(out, n, "communication: %.1f%% exposed, most of it %s", 100 * comm / it, time_parts[top_i].label);
  else
    snprintf(out, n, "%s: forward, backward and recompute take %.1f%% of the iteration", b,
             100 * (t->forward + t->backward + t->recompute) / it);
}

/* ---- Text ------------------------------------------------------------------------------------------------------ */

static void text_breakdown(strbuf *sb, const cost_result *r) {
  sb_puts(sb, "    time      ");
  int k = 0;
  for (size_t i = 0; i < N_PARTS; i++) {
    double v = part(&r->time, i);
    if (v <= 1e-6 * r->iter_s) continue;
    sb_printf(sb, "%s%s %.3g s (%.1f%%)", k++ ? ", " : "", time_parts[i].label, v, 100 * v / r->iter_s);
  }
  sb_puts(sb, "\n");
}

static void text_memory(strbuf *sb, const cost_result *r, double limit) {
  sb_printf(sb, "    memory    peak %.1f GiB on stage %d (limit %.1f GiB)", gib(r->peak_mem_bytes), r->peak_rank, gib(limit));
  if (r->n_ranks > 1) {
    if (r->n_ranks <= 16) {
      sb_puts(sb, "; per stage");
      for (int i = 0; i < r->n_ranks; i++) sb_printf(sb, " %.1f", gib(r->mem[i].total));
    } else {
      double lo = INFINITY;
      for (int i = 0; i < r->n_ranks; i++) lo = fmin(lo, r->mem[i].total);
      sb_printf(sb, "; stages from %.1f to %.1f over %d", gib(lo), gib(r->peak_mem_bytes), r->n_ranks);
    }
  }
  const cost_mem *m = &r->mem[r->peak_rank];
  sb_printf(sb, "\n              (peak stage: params %.1f, grads %.1f, optimizer %.1f, activations %.1f, logits %.1f, "
                "buffers %.1f, overhead %.1f GiB)\n",
            gib(m->params), gib(m->grads), gib(m->optimizer), gib(m->activations), gib(m->logits), gib(m->buffers),
            gib(m->overhead));
}

/* The parts where b is slower than a (positive deltas), largest first, then where it gains. */
static void loses_on(strbuf *sb, const cost_result *a, const cost_result *b) {
  double d[N_PARTS];
  size_t order[N_PARTS];
  for (size_t i = 0; i < N_PARTS; i++) {
    d[i] = part(&b->time, i) - part(&a->time, i);
    order[i] = i;
  }
  for (size_t i = 1; i < N_PARTS; i++)
    for (size_t j = i; j > 0 && d[order[j]] > d[order[j - 1]]; j--) {
      size_t t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  double eps = 1e-4 * a->iter_s;
  int k = 0;
  for (size_t i = 0; i < N_PARTS && k < 3; i++)
    if (d[order[i]] > eps) sb_printf(sb, "%s%s +%.3g s", k++ ? ", " : "", time_parts[order[i]].label, d[order[i]]);
  if (k == 0) sb_puts(sb, "no part slower");
  int g = 0;
  for (size_t i = N_PARTS; i-- > 0 && g < 2;)
    if (d[order[i]] < -eps) sb_printf(sb, "%s%s %.3g s", g++ ? ", " : "; gains ", time_parts[order[i]].label, d[order[i]]);
}

static void text_plan(strbuf *sb, int rank, const search_result *sr, const search_result *best, double limit,
                      bool memory_objective) {
  char b[512], bound[160];
  plan_report_brief(&sr->p, b, sizeof b);
  bound_text(&sr->r, bound, sizeof bound);
  const cost_result *r = &sr->r;
  sb_printf(sb, "#%d  %s   (%s)\n", rank, b, sr->found_by ? sr->found_by : "?");
  sb_printf(sb, "    predicted %.4g s per iteration, %.0f tokens/s, %.1f tokens/s per device, MFU %.1f%% (PaLM), "
                "%.1f TFLOP/s per device\n",
            r->iter_s, r->tokens_per_s, r->tokens_per_s_per_device, 100 * r->mfu_palm, r->tflops_per_device_palm);
  sb_printf(sb, "    bound     %s\n", bound);
  text_breakdown(sb, r);
  text_memory(sb, r, limit);
  if (best && best != sr) {
    double slower = r->iter_s / best->r.iter_s - 1;
    if (memory_objective)
      sb_printf(sb, "    vs #1     %+.1f GiB peak memory, %+.1f%% time: ", gib(r->peak_mem_bytes - best->r.peak_mem_bytes),
                100 * slower);
    else
      sb_printf(sb, "    vs #1     %.1f%% slower: ", 100 * slower);
    loses_on(sb, &best->r, r);
    sb_puts(sb, "\n");
  }
}

/* ---- When nothing fits: what would make a plan fit ----------------------------------------------------------- */

typedef struct {
  char change[96];
  double peak_bytes;
  bool fits, valid;
} fix_try;

/* Costs variants of p with more memory savers; up to 4 into out. */
static int try_fixes(const cost_env *env, const plan *p, double limit, fix_try *out) {
  int n = 0;
  plan v[4];
  const char *what[4];
  bool can_mbs = p->micro_batch_size > 1;
  bool can_rc = !(p->recompute == PLAN_RECOMPUTE_FULL && p->recompute_layers == 0 && p->n_chunk_recompute == 0);
  bool can_z = p->zero_stage < 3 && (p->dp * p->cp > 1 || plan_edp(p) > 1);
  if (can_mbs) {
    v[n] = *p;
    v[n].micro_batch_size = 1;
    v[n].n_micro_batches = p->n_micro_batches * p->micro_batch_size;
    what[n++] = "micro-batch size 1";
  }
  if (can_rc) {
    v[n] = *p;
    v[n].recompute = PLAN_RECOMPUTE_FULL;
    v[n].recompute_layers = 0;
    v[n].n_chunk_recompute = 0;
    what[n++] = "full recompute of every layer";
  }
  if (can_z) {
    v[n] = *p;
    v[n].zero_stage = 3;
    what[n++] = "ZeRO 3 (shard parameters, gradients and optimizer states)";
  }
  if (n >= 2) {
    v[n] = *p;
    if (can_mbs) {
      v[n].micro_batch_size = 1;
      v[n].n_micro_batches = p->n_micro_batches * p->micro_batch_size;
    }
    if (can_rc) {
      v[n].recompute = PLAN_RECOMPUTE_FULL;
      v[n].recompute_layers = 0;
      v[n].n_chunk_recompute = 0;
    }
    if (can_z) v[n].zero_stage = 3;
    what[n++] = "all of these together";
  }
  cost_result *cr = malloc(sizeof *cr);
  if (!cr) return 0;
  for (int i = 0; i < n; i++) {
    ap_ctx scratch = {0};
    snprintf(out[i].change, sizeof out[i].change, "%s", what[i]);
    out[i].valid = cost_estimate(&scratch, env, &v[i], cr) == AP_OK;
    out[i].peak_bytes = out[i].valid ? cr->peak_mem_bytes : NAN;
    out[i].fits = out[i].valid && cr->fits && cr->peak_mem_bytes <= limit;
  }
  free(cr);
  return n;
}

/* About how many devices the plan's mesh would need for its model states, sharded ZeRO-3 over more data-parallel
 * ranks, to leave room for what does not shrink (activations, logits, buffers, overhead); 0 when those alone
 * exceed the limit. An estimate: it scales the data-parallel degree only. */
static int64_t devices_needed(const cost_env *env, const plan *p, const cost_result *r, double limit) {
  const cost_mem *m = &r->mem[r->peak_rank];
  double n_dp = (double)(p->dp * p->cp);
  double per_param = 2.0 + cost_env_tuning(env)->memory.grad_bytes_per_param + 12.0;
  /* The rank's parameters, from the parameter bytes and how the plan shards them. */
  double params = m->params / 2.0 * (p->zero_stage >= 3 ? n_dp : 1);
  double rest = m->total - m->params - m->grads - m->optimizer;
  if (rest >= limit) return 0;
  double f = ceil(per_param * params / (n_dp * (limit - rest)));
  if (f < 1) f = 1;
  int64_t n = cost_env_cluster(env)->n_devices;
  double need = (double)n * f;
  return need > 1e15 ? INT64_MAX : (int64_t)need;
}

static void text_closest(strbuf *sb, const cost_env *env, const search_result *res, int n, double limit) {
  sb_puts(sb, "\nclosest plans (each with the most memory savers that help it):\n");
  for (int i = 0; i < n; i++) {
    const search_result *c = &res[i];
    char b[512];
    plan_report_brief(&c->p, b, sizeof b);
    const cost_mem *m = &c->r.mem[c->r.peak_rank];
    sb_printf(sb, "#%d  %s\n", i + 1, b);
    sb_printf(sb, "    needs %.1f GiB on stage %d: over the %.1f GiB limit by %.1f GiB (params %.1f, grads %.1f, "
                  "optimizer %.1f, activations %.1f, logits %.1f, buffers %.1f, overhead %.1f)\n",
              gib(c->r.peak_mem_bytes), c->r.peak_rank, gib(limit), gib(c->r.peak_mem_bytes - limit), gib(m->params),
              gib(m->grads), gib(m->optimizer), gib(m->activations), gib(m->logits), gib(m->buffers), gib(m->overhead));
    fix_try f[4];
    int nf = try_fixes(env, &c->p, limit, f);
    for (int k = 0; k < nf; k++) {
      if (!f[k].valid) continue;
      if (f[k].fits) sb_printf(sb, "    with %s it would fit: %.1f GiB\n", f[k].change, gib(f[k].peak_bytes));
      else sb_printf(sb, "    with %s: %.1f GiB, still %.1f over\n", f[k].change, gib(f[k].peak_bytes), gib(f[k].peak_bytes - limit));
    }
    int64_t need = devices_needed(env, &c->p, &c->r, limit);
    if (need > 0)
      sb_printf(sb, "    more devices: about %lld would hold its model states sharded (ZeRO 3) over more data-parallel ranks\n",
                (long long)need);
    else
      sb_printf(sb, "    more devices alone do not help: its activations, logits and buffers exceed the limit; split the "
                    "model further (tp, cp, pp) or shorten the micro-batch\n");
  }
}

/* ---- JSON ------------------------------------------------------------------------------------------------------ */

static void json_mem(strbuf *sb, const cost_mem *m) {
  sb_printf(sb,
            "{\"params_bytes\":%.6g,\"grads_bytes\":%.6g,\"optimizer_bytes\":%.6g,\"activations_bytes\":%.6g,"
            "\"logits_bytes\":%.6g,\"buffers_bytes\":%.6g,\"overhead_bytes\":%.6g,\"total_bytes\":%.6g}",
            m->params, m->grads, m->optimizer, m->activations, m->logits, m->buffers, m->overhead, m->total);
}

/* The figures of one costed plan (no enclosing braces). */
static void json_figures(strbuf *sb, const plan *p, const cost_result *r) {
  char b[512], bound[160];
  plan_report_brief(p, b, sizeof b);
  bound_text(r, bound, sizeof bound);
  sb_puts(sb, "\"summary\":");
  jx_sb_str(sb, b);
  sb_puts(sb, ",\"plan\":");
  plan_to_json(p, sb);
  sb_puts(sb, ",\"iteration_time_s\":");
  jx_sb_num(sb, r->iter_s);
  sb_puts(sb, ",\"tokens_per_s\":");
  jx_sb_num(sb, r->tokens_per_s);
  sb_puts(sb, ",\"tokens_per_s_per_device\":");
  jx_sb_num(sb, r->tokens_per_s_per_device);
  sb_puts(sb, ",\"mfu\":{\"palm\":");
  jx_sb_num(sb, r->mfu_palm);
  sb_puts(sb, ",\"megatron\":");
  jx_sb_num(sb, r->mfu_megatron);
  sb_puts(sb, ",\"hardware\":");
  jx_sb_num(sb, r->hfu);
  sb_puts(sb, "},\"tflops_per_device\":");
  jx_sb_num(sb, r->tflops_per_device_palm);
  sb_printf(sb, ",\"bound\":\"%s\",\"bound_detail\":", r->bound ? r->bound : "compute");
  jx_sb_str(sb, bound);
  sb_puts(sb, ",\"time_breakdown_s\":{");
  for (size_t i = 0; i < N_PARTS; i++) {
    sb_printf(sb, "%s\"%s\":", i ? "," : "", time_parts[i].key);
    jx_sb_num(sb, part(&r->time, i));
  }
  sb_puts(sb, "},\"peak_mem_bytes\":");
  jx_sb_num(sb, r->peak_mem_bytes);
  sb_printf(sb, ",\"peak_stage\":%d,\"fits\":%s,\"stage_mem_bytes\":[", r->peak_rank, r->fits ? "true" : "false");
  for (int i = 0; i < r->n_ranks; i++) {
    if (i) sb_puts(sb, ",");
    jx_sb_num(sb, r->mem[i].total);
  }
  sb_puts(sb, "],\"peak_stage_memory\":");
  json_mem(sb, &r->mem[r->peak_rank]);
}

static void json_vs(strbuf *sb, const cost_result *best, const cost_result *r) {
  sb_puts(sb, "{\"slowdown\":");
  jx_sb_num(sb, r->iter_s / best->iter_s - 1);
  sb_puts(sb, ",\"peak_mem_delta_bytes\":");
  jx_sb_num(sb, r->peak_mem_bytes - best->peak_mem_bytes);
  sb_puts(sb, ",\"delta_s\":{");
  for (size_t i = 0; i < N_PARTS; i++) {
    sb_printf(sb, "%s\"%s\":", i ? "," : "", time_parts[i].key);
    jx_sb_num(sb, part(&r->time, i) - part(&best->time, i));
  }
  sb_puts(sb, "}}");
}

static void json_closest(strbuf *sb, const cost_env *env, const search_result *res, int n, double limit) {
  sb_puts(sb, ",\"closest\":[");
  for (int i = 0; i < n; i++) {
    const search_result *c = &res[i];
    sb_printf(sb, "%s{\"rank\":%d,", i ? "," : "", i + 1);
    json_figures(sb, &c->p, &c->r);
    sb_puts(sb, ",\"over_bytes\":");
    jx_sb_num(sb, c->r.peak_mem_bytes - limit);
    sb_puts(sb, ",\"fixes\":[");
    fix_try f[4];
    int nf = try_fixes(env, &c->p, limit, f);
    int k = 0;
    for (int j = 0; j < nf; j++) {
      if (!f[j].valid) continue;
      sb_puts(sb, k++ ? ",{\"change\":" : "{\"change\":");
      jx_sb_str(sb, f[j].change);
      sb_puts(sb, ",\"peak_mem_bytes\":");
      jx_sb_num(sb, f[j].peak_bytes);
      sb_printf(sb, ",\"fits\":%s}", f[j].fits ? "true" : "false");
    }
    int64_t need = devices_needed(env, &c->p, &c->r, limit);
    sb_puts(sb, "],\"devices_needed_estimate\":");
    if (need > 0) sb_printf(sb, "%lld", (long long)need);
    else sb_puts(sb, "null");
    sb_puts(sb, "}");
  }
  sb_puts(sb, "]");
}

/* ---- The comparison with a given plan -------------------------------------------------------------------------- */

typedef struct {
  bool have;
  bool valid;
  char error[1024];
  plan p;
  cost_result *r;
  bool batch_differs;
} compare_t;

static void compare_cost(const cost_env *env, const ap_plan *given, const search_opts *so, compare_t *c) {
  ap_plan copy = *given;
  plan_resolve(&copy, cost_env_cluster(env)->n_devices);
  c->have = true;
  c->p = copy.p;
  int64_t seq = so->seq_length > 0 ? so->seq_length : cost_env_graph(env)->default_seq;
  int64_t pseq = c->p.seq_length > 0 ? c->p.seq_length : cost_env_graph(env)->default_seq;
  c->batch_differs = c->p.global_batch_size != so->global_batch_size || pseq != seq;
  ap_ctx scratch = {0};
  c->valid = cost_estimate(&scratch, env, &c->p, c->r) == AP_OK;
  if (!c->valid) snprintf(c->error, sizeof c->error, "%s", scratch.error);
}

static void text_compare(strbuf *sb, const compare_t *c, const search_result *best) {
  sb_puts(sb, "\ncompare: the given plan against #1\n");
  char b[512];
  plan_report_brief(&c->p, b, sizeof b);
  sb_printf(sb, "  given  %s\n", b);
  if (!c->valid) {
    sb_printf(sb, "  the given plan cannot run here: %s\n", c->error);
    return;
  }
  if (c->batch_differs) sb_puts(sb, "  note: its global batch or sequence length differs from the search's\n");
  if (!best) {
    sb_printf(sb, "  %.4g s per iteration, %.1f tokens/s per device, peak %.1f GiB%s\n", c->r->iter_s,
              c->r->tokens_per_s_per_device, gib(c->r->peak_mem_bytes), c->r->fits ? "" : " (does not fit)");
    return;
  }
  const cost_result *a = c->r, *w = &best->r;
  sb_printf(sb, "  %-24s %14s %14s %14s\n", "", "given", "#1", "#1 - given");
  sb_printf(sb, "  %-24s %14.4g %14.4g %+14.4g\n", "iteration (s)", a->iter_s, w->iter_s, w->iter_s - a->iter_s);
  sb_printf(sb, "  %-24s %14.1f %14.1f %+14.1f\n", "tokens/s per device", a->tokens_per_s_per_device,
            w->tokens_per_s_per_device, w->tokens_per_s_per_device - a->tokens_per_s_per_device);
  sb_printf(sb, "  %-24s %13.1f%% %13.1f%% %+13.1f%%\n", "MFU (PaLM)", 100 * a->mfu_palm, 100 * w->mfu_palm,
            100 * (w->mfu_palm - a->mfu_palm));
  for (size_t i = 0; i < N_PARTS; i++) {
    double x = part(&a->time, i), y = part(&w->time, i);
    if (x <= 0 && y <= 0) continue;
    char label[48];
    snprintf(label, sizeof label, "%s (s)", time_parts[i].label);
    sb_printf(sb, "  %-24s %14.4g %14.4g %+14.4g\n", label, x, y, y - x);
  }
  sb_printf(sb, "  %-24s %14.1f %14.1f %+14.1f%s\n", "peak memory (GiB)", gib(a->peak_mem_bytes), gib(w->peak_mem_bytes),
            gib(w->peak_mem_bytes - a->peak_mem_bytes), a->fits ? "" : "   (the given plan does not fit)");
  if (a->iter_s > w->iter_s) {
    sb_printf(sb, "  #1 is %.1f%% faster; the given plan loses on: ", 100 * (a->iter_s / w->iter_s - 1));
    loses_on(sb, w, a);
    sb_puts(sb, "\n");
  } else {
    sb_puts(sb, "  the given plan is at least as fast as #1 under the cost model");
    sb_puts(sb, a->fits ? " (the search may have been cut by its time budget or a fixed field)\n" : ", but does not fit\n");
  }
}

static void json_compare(strbuf *sb, const compare_t *c, const search_result *best) {
  sb_puts(sb, ",\"compare\":{\"valid\":");
  sb_puts(sb, c->valid ? "true" : "false");
  sb_printf(sb, ",\"batch_differs\":%s", c->batch_differs ? "true" : "false");
  if (!c->valid) {
    sb_puts(sb, ",\"error\":");
    jx_sb_str(sb, c->error);
    sb_puts(sb, ",\"plan\":");
    plan_to_json(&c->p, sb);
    sb_puts(sb, "}");
    return;
  }
  sb_puts(sb, ",");
  json_figures(sb, &c->p, c->r);
  if (best) {
    sb_puts(sb, ",\"best_vs_given\":");
    json_vs(sb, c->r, &best->r);
  }
  sb_puts(sb, "}");
}

/* ---- The report ------------------------------------------------------------------------------------------------ */

typedef struct {
  const cost_env *env;
  const search_opts *so;
  const search_stats *stats;
  const search_result *res;
  int n;
  ap_status st;
  const char *message; /* the search's one-line verdict when it failed */
  const compare_t *cmp;
  const char *cluster_spec;
} report_in;

static void strategies_run(const search_stats *st, strbuf *sb, bool json) {
  size_t n_reg;
  const search_strategy *const *reg = search_strategies(&n_reg);
  int k = 0;
  for (size_t i = 0; i < n_reg && i < 32; i++)
    if ((st->strategies_run >> i) & 1u) {
      if (json) {
        sb_puts(sb, k++ ? "," : "");
        jx_sb_str(sb, reg[i]->name);
      } else {
        sb_printf(sb, "%s%s", k++ ? ", " : "", reg[i]->name);
      }
    }
}

static char *report_text(const report_in *in) {
  strbuf sb = {0};
  const graph *g = cost_env_graph(in->env);
  const hw_cluster *hc = cost_env_cluster(in->env);
  const search_stats *st = in->stats;
  double limit = (double)hc->groups[0].device.mem_bytes * in->so->max_mem_fraction;
  int64_t seq = in->so->seq_length > 0 ? in->so->seq_length : g->default_seq;
  sb_printf(&sb, "autopar plan: %s on %s (%lld x %s, %.1f GiB each), global batch %lld x %lld tokens\n", g->name,
            in->cluster_spec, (long long)hc->n_devices, hc->groups[0].device.name,
            gib((double)hc->groups[0].device.mem_bytes), (long long)in->so->global_batch_size, (long long)seq);
  sb_puts(&sb, "search: ");
  strategies_run(st, &sb, false);
  sb_printf(&sb, "; %lld plans costed in %.2f s (%.0f per second), %lld fit; objective %s\n", (long long)st->n_evaluated,
            st->elapsed_s, st->elapsed_s > 0 ? (double)st->n_evaluated / st->elapsed_s : 0, (long long)st->n_fit,
            search_objective_name(in->so->objective));
  if (st->truncated)
    sb_printf(&sb, "note: the time budget of %.3g s ran out; these are the best plans found so far\n",
              in->so->time_budget_s);
  if (st->cancelled) sb_puts(&sb, "note: the search was cancelled; these are the best plans found so far\n");
  if (in->st == AP_INFEASIBLE) {
    sb_printf(&sb, "\n%s\n", in->message);
    text_closest(&sb, in->env, in->res, in->n, limit);
  } else {
    sb_puts(&sb, "\n");
    for (int i = 0; i < in->n; i++) {
      text_plan(&sb, i + 1, &in->res[i], &in->res[0], limit, in->so->objective == SEARCH_OBJ_MEMORY);
      sb_puts(&sb, "\n");
    }
  }
  if (in->cmp && in->cmp->have) text_compare(&sb, in->cmp, in->st == AP_INFEASIBLE || in->n == 0 ? NULL : &in->res[0]);
  return sb_take(&sb);
}

static char *report_json(const report_in *in) {
  strbuf sb = {0};
  const graph *g = cost_env_graph(in->env);
  const hw_cluster *hc = cost_env_cluster(in->env);
  const search_stats *st = in->stats;
  double limit = (double)hc->groups[0].device.mem_bytes * in->so->max_mem_fraction;
  int64_t seq = in->so->seq_length > 0 ? in->so->seq_length : g->default_seq;
  sb_puts(&sb, "{\"format\":\"autopar-search/1\",\"model\":");
  jx_sb_str(&sb, g->name);
  sb_puts(&sb, ",\"cluster\":");
  jx_sb_str(&sb, in->cluster_spec);
  sb_printf(&sb, ",\"n_devices\":%lld,\"device\":", (long long)hc->n_devices);
  jx_sb_str(&sb, hc->groups[0].device.name);
  sb_printf(&sb, ",\"device_memory_bytes\":%lld,\"mem_limit_bytes\":", (long long)hc->groups[0].device.mem_bytes);
  jx_sb_num(&sb, limit);
  sb_printf(&sb, ",\"global_batch_size\":%lld,\"seq_length\":%lld,\"objective\":\"%s\"",
            (long long)in->so->global_batch_size, (long long)seq, search_objective_name(in->so->objective));
  sb_puts(&sb, ",\"search\":{\"strategies\":[");
  strategies_run(st, &sb, true);
  sb_printf(&sb, "],\"n_offered\":%lld,\"n_rejected\":%lld,\"n_evaluated\":%lld,\"n_fit\":%lld,\"elapsed_s\":",
            (long long)st->n_offered, (long long)st->n_rejected, (long long)st->n_evaluated, (long long)st->n_fit);
  jx_sb_num(&sb, st->elapsed_s);
  sb_puts(&sb, ",\"plans_per_s\":");
  jx_sb_num(&sb, st->elapsed_s > 0 ? (double)st->n_evaluated / st->elapsed_s : NAN);
  sb_printf(&sb, ",\"truncated\":%s,\"cancelled\":%s,\"arena_bytes\":%zu}", st->truncated ? "true" : "false",
            st->cancelled ? "true" : "false", st->arena_bytes);
  bool feasible = in->st != AP_INFEASIBLE && in->n > 0;
  sb_printf(&sb, ",\"feasible\":%s", feasible ? "true" : "false");
  if (!feasible) {
    sb_puts(&sb, ",\"message\":");
    jx_sb_str(&sb, in->message ? in->message : "");
  }
  sb_puts(&sb, ",\"plans\":[");
  for (int i = 0; feasible && i < in->n; i++) {
    const search_result *r = &in->res[i];
    sb_printf(&sb, "%s{\"rank\":%d,\"found_by\":", i ? "," : "", i + 1);
    jx_sb_str(&sb, r->found_by ? r->found_by : "");
    sb_puts(&sb, ",");
    json_figures(&sb, &r->p, &r->r);
    if (i > 0) {
      sb_puts(&sb, ",\"vs_best\":");
      json_vs(&sb, &in->res[0].r, &r->r);
    }
    sb_puts(&sb, "}");
  }
  sb_puts(&sb, "]");
  if (in->st == AP_INFEASIBLE) json_closest(&sb, in->env, in->res, in->n, limit);
  if (in->cmp && in->cmp->have) json_compare(&sb, in->cmp, feasible ? &in->res[0] : NULL);
  sb_puts(&sb, "}\n");
  return sb_take(&sb);
}

/* ---- Public API --------------------------------------------------------------------------------------------------- */

static ap_status build_opts(ap_ctx *ctx, const ap_model *model, const hw_cluster *hc, const ap_search_opts *o,
                            search_opts *so, const char *spec) {
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
  snprintf(so->fixed.model, sizeof so->fixed.model, "%s", ap_model_name(model));
  snprintf(so->fixed.cluster, sizeof so->fixed.cluster, "%s", spec);
  so->fixed.global_batch_size = o->global_batch_size;
  so->fixed.seq_length = o->seq_length;
  (void)hc;
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
  search_opts so;
  ap_status st = build_opts(ctx, model, hc, o, &so, spec);
  if (st) return st;
  admit_ctx adm = {model, o->export_format};
  if (o->export_format) {
    /* An unknown format fails now, not as "nothing fits". */
    ap_ctx probe = ctx_child(ctx);
    ap_plan dummy = {.dp_set = true, .n_micro_set = true, .gbs_set = true};
    plan_defaults(&dummy.p);
    char *text = NULL;
    if (ap_export(&probe, model, &dummy, o->export_format, &text) && strstr(probe.error, "unknown export format"))
      return ctx_fail(ctx, AP_INVALID, "--export: %s", probe.error);
    free(text);
    so.admit = admit_export;
    so.admit_user = &adm;
  }
  cost_env *env = NULL;
  if ((st = cost_env_new(ctx, model, cluster, NULL, &env))) return st;
  compare_t cmp = {0};
  if (o->compare && !(cmp.r = malloc(sizeof *cmp.r))) {
    cost_env_free(env);
    return ctx_fail(ctx, AP_NOMEM, "out of memory");
  }
  if (o->compare) compare_cost(env, o->compare, &so, &cmp);

  search_result *res = NULL;
  int n = 0;
  search_stats stats;
  st = search_run_all(ctx, env, &so, &res, &n, &stats);
  if (st == AP_UNSUPPORTED && o->export_format && stats.n_not_admitted > 0)
    st = ctx_fail(ctx, AP_UNSUPPORTED, "--export %s: none of the plans that fit can be written as %s (docs/exports.md "
                  "lists what it cannot express; --fix can steer the search to what it can)",
                  o->export_format, o->export_format);
  char message[1024];
  snprintf(message, sizeof message, "%s", ap_ctx_error(ctx));
  if (st == AP_OK || st == AP_INFEASIBLE || (st == AP_CANCELLED && n > 0)) {
    report_in in = {env, &so, &stats, res, n, st, message, o->compare ? &cmp : NULL, spec};
    *out = format == AP_OUT_JSON ? report_json(&in) : report_text(&in);
    if (!*out) st = ctx_fail(ctx, AP_NOMEM, "out of memory");
    /* Helpers that write "?" when their buffer fails (plan_report_brief) leave the mark (core/alloc.h). */
    if (*out && mem_failed()) st = ctx_fail(ctx, AP_NOMEM, "out of memory writing the report");
    if (best && *out && st != AP_INFEASIBLE && n > 0) {
      ap_plan *bp = calloc(1, sizeof *bp);
      if (!bp) {
        st = ctx_fail(ctx, AP_NOMEM, "out of memory");
      } else {
        bp->p = res[0].p;
        bp->dp_set = bp->n_micro_set = bp->gbs_set = true;
        *best = bp;
      }
    }
    /* The verdict stays in the context for the caller (the CLI prints it on failure). */
    if (st == AP_INFEASIBLE || st == AP_CANCELLED) ctx_fail(ctx, st, "%s", message);
  }
  if (st == AP_NOMEM) {
    free(*out);
    *out = NULL;
    if (best) {
      free(*best);
      *best = NULL;
    }
  }
  free(res);
  free(cmp.r);
  cost_env_free(env);
  return st;
}
