/* A cost result as a document, and its text rendering (cost layer; result_doc.h). The result is written as
 * JSON once, here (cost_result_put): estimate, simulate and plan all carry that object, and every text
 * output of a cost result is rendered from the document, never from the struct, so text and JSON cannot
 * disagree. The JSON keys carry their units (docs/json.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonx.h"
#include "cost/calib.h"
#include "cost/internal.h"
#include "cost/result_doc.h"
#include "plan/summary.h"

static const cost_time_part parts[COST_N_TIME_PARTS] = {
    {"forward", "forward", "forward", offsetof(cost_time, forward)},
    {"backward", "backward", "backward", offsetof(cost_time, backward)},
    {"recompute", "recompute", "recompute", offsetof(cost_time, recompute)},
    {"bubble", "bubble", "pipeline bubble", offsetof(cost_time, bubble)},
    {"tp_comm_exposed", "TP comm", "TP comm (exposed)", offsetof(cost_time, tp_comm)},
    {"cp_comm_exposed", "CP comm", "CP comm (exposed)", offsetof(cost_time, cp_comm)},
    {"ep_comm_exposed", "EP comm", "EP comm (exposed)", offsetof(cost_time, ep_comm)},
    {"pp_comm_exposed", "PP comm", "PP comm (exposed)", offsetof(cost_time, pp_comm)},
    {"dp_comm_exposed", "DP comm", "DP comm (exposed)", offsetof(cost_time, dp_comm)},
    {"optimizer", "optimizer", "optimizer step", offsetof(cost_time, optimizer)},
    {"offload", "offload", "offload (host)", offsetof(cost_time, offload)},
};
enum { FIRST_COMM = 4, LAST_COMM = 8 };
_Static_assert(sizeof(cost_time) == COST_N_TIME_PARTS * sizeof(double), "every part of cost_time is in parts[]");

const cost_time_part *cost_time_parts(void) { return parts; }

double cost_time_part_s(const cost_time *t, size_t i) {
  double v;
  memcpy(&v, (const char *)t + parts[i].offset, sizeof v);
  return v;
}

static double gib(double b) { return b / 1073741824.0; }

void cost_result_bound_text(const cost_result *r, char *out, size_t n) {
  const cost_time *t = &r->time;
  double it = r->iter_s > 0 ? r->iter_s : 1;
  if (!r->fits && r->nvme_capacity_bytes > 0 && r->nvme_bytes > r->nvme_capacity_bytes) {
    snprintf(out, n, "NVMe (%.1f TB per node needed for offload, of %.1f)", r->nvme_bytes / 1e12, r->nvme_capacity_bytes / 1e12);
    return;
  }
  if (!r->fits && r->host_mem_bytes > r->host_capacity_bytes) {
    snprintf(out, n, "host memory (%.1f GiB per node needed for offload, of %.1f)", gib(r->host_mem_bytes),
             gib(r->host_capacity_bytes));
    return;
  }
  if (!r->fits) {
    snprintf(out, n, "memory (%.1f GiB needed of %.1f)", gib(r->peak_mem_bytes), gib(r->capacity_bytes));
    return;
  }
  double comm = 0, top = 0;
  size_t top_i = FIRST_COMM;
  for (size_t i = FIRST_COMM; i <= LAST_COMM; i++) {
    comm += cost_time_part_s(t, i);
    if (cost_time_part_s(t, i) > top) top = cost_time_part_s(t, i), top_i = i;
  }
  const char *b = r->bound ? r->bound : "compute";
  if (strcmp(b, "offload") == 0)
    snprintf(out, n, "offload: the moved states' host-link transfers, the CPU's optimizer step and NVMe take %.1f%% of the "
                     "iteration", 100 * t->offload / it);
  else if (strcmp(b, "bubble") == 0)
    snprintf(out, n, "bubble: the pipeline idles %.1f%% of the iteration", 100 * t->bubble / it);
  else if (strcmp(b, "communication") == 0)
    snprintf(out, n, "communication: %.1f%% exposed, most of it %s", 100 * comm / it, parts[top_i].label);
  else
    snprintf(out, n, "%s: forward, backward and recompute take %.1f%% of the iteration", b,
             100 * (t->forward + t->backward + t->recompute) / it);
}

/* The parts of one stage's memory, in the order of the text table; they add up to total_bytes. */
static const cost_mem_part mem_parts[] = {
    {"params_bytes", "params", "parameters", offsetof(cost_mem, params)},
    {"grads_bytes", "grads", "gradients", offsetof(cost_mem, grads)},
    {"optimizer_bytes", "optim", "optimizer states", offsetof(cost_mem, optimizer)},
    {"activations_bytes", "activ", "activations", offsetof(cost_mem, activations)},
    {"logits_bytes", "logits", "logits / loss", offsetof(cost_mem, logits)},
    {"buffers_bytes", "buffers", "buffers", offsetof(cost_mem, buffers)},
    {"step_bytes", "step", "optimizer step copies", offsetof(cost_mem, step)},
    {"workspace_bytes", "wkspace", "library workspaces", offsetof(cost_mem, workspace)},
    {"reserve_bytes", "reserve", "allocator reserve", offsetof(cost_mem, reserve)},
    {"context_bytes", "context", "CUDA context, NCCL", offsetof(cost_mem, context)},
    {"total_bytes", "total", "total", offsetof(cost_mem, total)},
};
_Static_assert(sizeof(cost_mem) == AP_COUNT(mem_parts) * sizeof(double), "every part of cost_mem is in mem_parts[]");

const cost_mem_part *cost_mem_parts(size_t *n) {
  *n = AP_COUNT(mem_parts) - 1; /* the last row is the total */
  return mem_parts;
}

void cost_result_put(jd *d, json_t *o, const cost_result *r) {
  jd_num(d, o, "iteration_time_s", r->iter_s);
  json_t *tb = jd_obj(d, o, "time_breakdown_s");
  for (size_t i = 0; i < COST_N_TIME_PARTS; i++) jd_num(d, tb, parts[i].key, cost_time_part_s(&r->time, i));
  jd_num(d, o, "tokens_per_iteration", r->tokens_per_iter);
  jd_num(d, o, "tokens_per_s", r->tokens_per_s);
  jd_num(d, o, "tokens_per_s_per_device", r->tokens_per_s_per_device);
  json_t *f = jd_obj(d, o, "flop_per_iteration");
  jd_num(d, f, "palm", r->flop_palm);
  jd_num(d, f, "megatron", r->flop_megatron);
  jd_num(d, f, "hardware", r->flop_hardware);
  jd_num(d, f, "graph", r->flop_graph);
  json_t *mfu = jd_obj(d, o, "mfu");
  jd_num(d, mfu, "palm", r->mfu_palm);
  jd_num(d, mfu, "megatron", r->mfu_megatron);
  jd_num(d, mfu, "hardware", r->hfu);
  jd_num(d, mfu, "graph", r->mfu_graph);
  jd_str(d, mfu, "headline", r->headline_graph ? "graph" : "palm");
  jd_str(d, mfu, "peak", "dense bf16");
  json_t *tf = jd_obj(d, o, "tflops_per_device");
  jd_num(d, tf, "palm", r->tflops_per_device_palm);
  jd_num(d, tf, "megatron", r->tflops_per_device_megatron);
  json_t *m = jd_obj(d, o, "memory");
  jd_num(d, m, "capacity_bytes", r->capacity_bytes);
  jd_num(d, m, "peak_bytes", r->peak_mem_bytes);
  jd_int(d, m, "peak_stage", r->peak_rank);
  jd_bool(d, m, "fits", r->fits);
  jd_num(d, m, "reserve_fraction", r->reserve_fraction);
  if (r->nvme_bytes > 0) { /* offload to NVMe: the drives' bytes per node it takes, and their capacity (null: not stated) */
    jd_num(d, m, "nvme_bytes", r->nvme_bytes);
    jd_num(d, m, "nvme_capacity_bytes", r->nvme_capacity_bytes > 0 ? r->nvme_capacity_bytes : NAN);
  }
  if (r->host_mem_bytes > 0) { /* offload (cost/offload.c): the host memory per node it takes, and the node's */
    jd_num(d, m, "host_bytes", r->host_mem_bytes);
    jd_num(d, m, "host_capacity_bytes", r->host_capacity_bytes);
  }
  json_t *stages = jd_arr(d, m, "stages");
  for (int i = 0; i < r->n_ranks; i++) {
    json_t *s = jd_obj(d, stages, NULL);
    for (size_t k = 0; k < AP_COUNT(mem_parts); k++) {
      double v;
      memcpy(&v, (const char *)&r->mem[i] + mem_parts[k].offset, sizeof v);
      jd_num(d, s, mem_parts[k].key, v);
    }
  }
  jd_str(d, o, "bound", r->bound ? r->bound : "compute");
  char bound[160];
  cost_result_bound_text(r, bound, sizeof bound);
  jd_str(d, o, "bound_detail", bound);
}

void cost_doc_plan(jd *d, json_t *o, const char *key, const plan *p) {
  strbuf sb = {0};
  plan_to_json(p, &sb);
  char *text = sb_take(&sb);
  jd_raw(d, o, key, text);
  free(text);
}

/* The header every document about one plan on one cluster opens with. */
void cost_stack_put(jd *d, json_t *o, plan_stack stack, const char *source, const char *why) {
  char note[256];
  bool other = strcmp(source, "--stack") != 0 && strcmp(source, "plan") != 0;
  snprintf(note, sizeof note, "%s%s", strcmp(source, "plan") == 0 ? "stated by the plan" : why,
           other ? "; --stack NAME for another" : "");
  jd_str(d, o, "stack", plan_stack_name(stack));
  jd_str(d, o, "stack_source", source);
  jd_str(d, o, "stack_note", note);
}

static void plan_header(jd *d, const cost_env *env, const plan *p, const cost_plan_note *note) {
  const graph *g = cost_env_graph(env);
  const hw_cluster *hc = cost_env_cluster(env);
  jd_str(d, d->root, "model", g->name);
  jd_str(d, d->root, "cluster", hc->name);
  jd_int(d, d->root, "n_devices", hc->n_devices);
  jd_str(d, d->root, "device", hc->groups[0].device.name);
  if (note && note->devices_used > 0) {
    jd_int(d, d->root, "devices_used", note->devices_used);
    jd_int(d, d->root, "cluster_devices", note->devices_of);
  }
  const char *why = NULL;
  plan_stack stk = cost_env_stack(env, p, &why);
  cost_stack_put(d, d->root, stk, note && note->stack_source ? note->stack_source : "plan",
                 note && note->stack_why ? note->stack_why : why);
  char summary[512];
  plan_summary(p, PLAN_SUMMARY_LINE, NULL, NULL, summary, sizeof summary);
  jd_str(d, d->root, "summary", summary);
  jd_int(d, d->root, "global_batch_size", p->global_batch_size);
  jd_int(d, d->root, "seq_length", p->seq_length ? p->seq_length : g->default_seq);
  cost_doc_plan(d, d->root, "plan", p);
}

static const char *const how_names[] = {
    [CALIB_FITTED] = "fitted", [CALIB_SIBLING] = "sibling", [CALIB_VENDOR] = "vendor", [CALIB_DEFAULTS] = "defaults",
    [CALIB_GIVEN] = "given"};

void cost_calibration_put(jd *d, json_t *o, const cost_env *env, const plan *p, const cost_result *r) {
  const calib_origin *org = cost_env_origin(env);
  json_t *c = jd_obj(d, o, "calibration");
  jd_str(d, c, "chip", org->chip);
  jd_str(d, c, "family", org->family);
  jd_str(d, c, "constants", cost_exec_cpu_on(env, 0, p) ? "executor" : how_names[org->how]);
  jd_str(d, c, "from_chip", org->how == CALIB_SIBLING || org->how == CALIB_VENDOR ? org->from : NULL);
  char note[256];
  bool exec = cost_exec_cpu_on(env, 0, p);
  if (exec) cost_exec_cpu_origin(env, note, sizeof note);
  else calib_origin_text(org, note, sizeof note);
  jd_str(d, c, "note", note);
  /* The band of the runs most like this plan (cost_env_point_band: the neighbour rule of validate's rows), from
   * the calibration's cross-validated residuals; a calibration without them falls back to its in-sample band of
   * the device family and stack, and says so. A residual r = ln(predicted / measured) puts the measured
   * throughput at predicted / e^r, the measured time at predicted · e^r and the measured peak at predicted / e^r. */
  calib_near_band nb, mb;
  int got = cost_env_point_band(env, p, false, &nb), mgot = got > 0 ? cost_env_point_band(env, p, true, &mb) : 0;
  const calib_band *b = got == 0 && env->n_points == 0 ? cost_env_band(env, p) : NULL;
  if (got <= 0 && !b) {
    jd_null(d, c, "band");
    return;
  }
  double e_lo, e_hi;
  json_t *bo = jd_obj(d, c, "band");
  jd_num(d, bo, "level", CALIB_BAND_LEVEL);
  if (got > 0) {
    calib_point t;
    cost_env_point(env, p, &t);
    jd_str(d, bo, "built_from", "cross-validated residuals");
    jd_str(d, bo, "family", t.family);
    jd_str(d, bo, "stack", t.stack);
    jd_int(d, bo, "rows", nb.k);
    jd_num(d, bo, "mean_distance", nb.mean_distance);
    jd_num(d, bo, "widen", nb.widen);
    jd_str(d, bo, "from", nb.from);
    e_lo = expm1(nb.r_lo);
    e_hi = expm1(nb.r_hi);
  } else {
    jd_str(d, bo, "built_from", "in-sample family/stack band: the calibration carries no cross-validated residuals");
    jd_str(d, bo, "family", b->family);
    jd_str(d, bo, "stack", b->stack);
    jd_int(d, bo, "rows", b->rows);
    jd_num(d, bo, "mape", b->mape);
    e_lo = b->error_low;
    e_hi = b->error_high;
  }
  jd_num(d, bo, "error_low", e_lo);
  jd_num(d, bo, "error_high", e_hi);
  double up = 1 + e_lo > 0 ? 1 / (1 + e_lo) : INFINITY, down = 1 / (1 + e_hi);
  jd_num(d, bo, "tokens_per_s_low", r->tokens_per_s * down);
  jd_num(d, bo, "tokens_per_s_high", r->tokens_per_s * up);
  jd_num(d, bo, "tokens_per_s_per_device_low", r->tokens_per_s_per_device * down);
  jd_num(d, bo, "tokens_per_s_per_device_high", r->tokens_per_s_per_device * up);
  jd_num(d, bo, "iteration_time_s_low", r->iter_s * (1 + e_lo));
  jd_num(d, bo, "iteration_time_s_high", r->iter_s * (1 + e_hi));
  if (mgot > 0 && r->peak_mem_bytes > 0) {
    jd_str(d, bo, "mem_from", mb.from);
    jd_num(d, bo, "peak_mem_bytes_low", r->peak_mem_bytes / exp(mb.r_hi));
    jd_num(d, bo, "peak_mem_bytes_high", r->peak_mem_bytes / exp(mb.r_lo));
    jd_num(d, bo, "capacity_bytes", r->capacity_bytes);
    jd_bool(d, bo, "fits_at_band_high", r->fits && r->peak_mem_bytes / exp(mb.r_lo) <= r->capacity_bytes);
  }
}

void cost_calibration_text(strbuf *sb, const json_t *c, const char *indent, int width) {
  if (!c) return;
  char first[64], cont[64];
  snprintf(cont, sizeof cont, "%*s", (int)strlen(indent) + width, "");
  snprintf(first, sizeof first, "%s%-*s", indent, width, "constants");
  sb_wrap(sb, first, cont, jd_gets(c, "note"), AP_TEXT_WIDTH);
  snprintf(first, sizeof first, "%s%-*s", indent, width, "band");
  const json_t *b = jd_at(c, "band");
  if (!b || json_is_null(b)) {
    sb_wrap(sb, first, cont, "none: no validate residuals for these constants in the calibration", AP_TEXT_WIDTH);
    return;
  }
  char t[1200];
  double e_lo = jd_getn(b, "error_low"), e_hi = jd_getn(b, "error_high");
  const char *from = jd_at(b, "from") ? jd_gets(b, "from") : NULL;
  if (from)
    snprintf(t, sizeof t, "%.1f to %.1f tokens/s/device (%.0f%% band: %+.1f%% to %+.1f%% of the prediction), from the %s",
             jd_getn(b, "tokens_per_s_per_device_low"), jd_getn(b, "tokens_per_s_per_device_high"), 100 * jd_getn(b, "level"),
             -100 * e_hi / (1 + e_hi), -100 * e_lo / (1 + e_lo), from);
  else
    snprintf(t, sizeof t, "%.1f to %.1f tokens/s/device; 80%% of %lld validate rows on %s/%s were within %+.1f%% to "
                          "%+.1f%% of the prediction (in sample: the calibration carries no cross-validated residuals)",
             jd_getn(b, "tokens_per_s_per_device_low"), jd_getn(b, "tokens_per_s_per_device_high"), (long long)jd_geti(b, "rows"),
             jd_gets(b, "family"), jd_gets(b, "stack"), -100 * e_hi / (1 + e_hi), -100 * e_lo / (1 + e_lo));
  sb_wrap(sb, first, cont, t, AP_TEXT_WIDTH);
  const char *mfrom = jd_at(b, "mem_from") ? jd_gets(b, "mem_from") : NULL;
  if (!mfrom) return;
  snprintf(first, sizeof first, "%s%-*s", indent, width, "mem band");
  snprintf(t, sizeof t, "peak %.1f to %.1f GiB per device of %.1f (%s at the band's upper edge), from the %s",
           gib(jd_getn(b, "peak_mem_bytes_low")), gib(jd_getn(b, "peak_mem_bytes_high")), gib(jd_getn(b, "capacity_bytes")),
           jd_getb(b, "fits_at_band_high") ? "fits" : "does not fit", mfrom);
  sb_wrap(sb, first, cont, t, AP_TEXT_WIDTH);
}

void cost_estimate_doc(jd *d, const cost_env *env, const plan *p, const cost_result *r, const cost_plan_note *note) {
  jd_init(d, "autopar-estimate/1");
  plan_header(d, env, p, note);
  cost_assumptions_put(d, d->root, env, p, r, p->seq_length == 0);
  cost_warnings_put(d, d->root, env, r);
  cost_result_put(d, d->root, r);
  cost_calibration_put(d, d->root, env, p, r);
}

char *cost_result_json(const cost_env *env, const plan *p, const cost_result *r, const cost_plan_note *note) {
  jd d;
  cost_estimate_doc(&d, env, p, r, note);
  char *s = jd_dump(&d);
  jd_free(&d);
  return s;
}

/* The estimate's text, every figure read from the document. */
static void estimate_text(strbuf *sb, const json_t *doc) {
  sb_printf(sb, "model    %s on %s (%lld x %s)\n", jd_gets(doc, "model"), jd_gets(doc, "cluster"),
            (long long)jd_geti(doc, "n_devices"), jd_gets(doc, "device"));
  if (jd_geti(doc, "devices_used") > 0)
    sb_printf(sb, "devices  the plan takes %lld of the cluster's %lld ranks: it runs on the first %lld\n",
              (long long)jd_geti(doc, "devices_used"), (long long)jd_geti(doc, "cluster_devices"),
              (long long)jd_geti(doc, "devices_used"));
  sb_wrap(sb, "plan     ", "           ", jd_gets(doc, "summary"), AP_TEXT_WIDTH);
  sb_printf(sb, "stack    %s (%s)\n", jd_gets(doc, "stack"), jd_gets(doc, "stack_note"));
  sb_printf(sb, "batch    %lld sequences of %lld tokens\n", (long long)jd_geti(doc, "global_batch_size"),
            (long long)jd_geti(doc, "seq_length"));
  cost_notes_text(sb, doc, "", 9);
  double it = jd_getn(doc, "iteration_time_s");
  sb_printf(sb, "\niteration  %.4f s   %.0f tokens/s   %.1f tokens/s/device   bound: %s\n", it,
            jd_getn(doc, "tokens_per_s"), jd_getn(doc, "tokens_per_s_per_device"), jd_gets(doc, "bound"));
  cost_calibration_text(sb, jd_at(doc, "calibration"), "", 11);
  const char *headline = jd_gets(doc, "mfu.headline");
  char mfu[320];
  if (headline && strcmp(headline, "graph") == 0)
    snprintf(mfu, sizeof mfu, "%.1f%% (graph FLOPs: every op's forward and backward); HFU %.1f%%, both of dense bf16 peak; "
                              "(PaLM's 6N: %.1f%%)",
             100 * jd_getn(doc, "mfu.graph"), 100 * jd_getn(doc, "mfu.hardware"), 100 * jd_getn(doc, "mfu.palm"));
  else
    snprintf(mfu, sizeof mfu, "%.1f%% (PaLM: 6N + attention, no causal discount); %.1f%% (Megatron: causal /2); "
                              "HFU %.1f%%, each of dense bf16 peak",
             100 * jd_getn(doc, "mfu.palm"), 100 * jd_getn(doc, "mfu.megatron"), 100 * jd_getn(doc, "mfu.hardware"));
  sb_wrap(sb, "MFU        ", "           ", mfu, AP_TEXT_WIDTH);
  sb_printf(sb, "TFLOP/s    %.1f per device (PaLM), %.1f (Megatron)\n\n", jd_getn(doc, "tflops_per_device.palm"),
            jd_getn(doc, "tflops_per_device.megatron"));
  sb_puts(sb, "time breakdown (critical pipeline rank)\n");
  const json_t *tb = jd_at(doc, "time_breakdown_s");
  for (size_t i = 0; i < COST_N_TIME_PARTS; i++) {
    double v = jd_getn(tb, parts[i].key);
    if (v > 0) sb_printf(sb, "  %-20s %9.4f s  %5.1f%%\n", parts[i].long_label, v, 100 * v / it);
  }
  const json_t *m = jd_at(doc, "memory");
  double host = jd_getn(m, "host_bytes"), host_cap = jd_getn(m, "host_capacity_bytes");
  bool host_short = host > host_cap;
  sb_printf(sb, "\nmemory per device (GiB), capacity %.1f: %s\n", gib(jd_getn(m, "capacity_bytes")),
            jd_getn(m, "peak_bytes") <= jd_getn(m, "capacity_bytes") ? "fits" : "DOES NOT FIT");
  char res[200];
  snprintf(res, sizeof res, "allocator reserve %.0f%% of the transient bytes (activations, logits, buffers, step copies; "
                            "memory.reserve_fraction, fitted by calibration)",
           100 * jd_getn(m, "reserve_fraction"));
  sb_wrap(sb, "", "  ", res, AP_TEXT_WIDTH);
  if (host > 0)
    sb_printf(sb, "host memory per node for offload: %.1f GiB of %.1f: %s\n", gib(host), gib(host_cap),
              host_short ? "DOES NOT FIT" : "fits");
  double nvme = jd_getn(m, "nvme_bytes"), nvme_cap = jd_getn(m, "nvme_capacity_bytes");
  if (nvme > 0 && nvme_cap > 0)
    sb_printf(sb, "NVMe per node for offload: %.2f TB of %.2f: %s\n", nvme / 1e12, nvme_cap / 1e12,
              nvme > nvme_cap ? "DOES NOT FIT" : "fits");
  else if (nvme > 0)
    sb_printf(sb, "NVMe per node for offload: %.2f TB, capacity not stated (not checked)\n", nvme / 1e12);
  sb_printf(sb, "  %-6s", "stage");
  for (size_t k = 0; k < AP_COUNT(mem_parts); k++) sb_printf(sb, " %8s", mem_parts[k].column);
  sb_puts(sb, "\n");
  const json_t *stages = jd_at(m, "stages");
  int64_t peak = jd_geti(m, "peak_stage");
  for (size_t i = 0; i < json_array_size(stages); i++) {
    sb_printf(sb, "  %-6zu", i);
    for (size_t k = 0; k < AP_COUNT(mem_parts); k++)
      sb_printf(sb, " %8.2f", gib(jd_getn(json_array_get(stages, i), mem_parts[k].key)));
    sb_puts(sb, (int64_t)i == peak ? "  <- peak\n" : "\n");
  }
}

char *cost_estimate_text(const json_t *doc) {
  strbuf sb = {0};
  estimate_text(&sb, doc);
  return sb_take(&sb);
}

char *cost_result_text(const cost_env *env, const plan *p, const cost_result *r, const cost_plan_note *note) {
  jd d;
  cost_estimate_doc(&d, env, p, r, note);
  char *s = d.failed ? NULL : cost_estimate_text(d.root);
  jd_free(&d);
  return s;
}

char *cost_simulate_out(const plan *p, const cost_result *r, double sim_pipeline_s, const char *trace_path,
                        int format) {
  jd d;
  jd_init(&d, "autopar-simulate/1");
  double iter_sim = sim_pipeline_s + r->time.dp_comm + r->time.optimizer;
  jd_num(&d, d.root, "simulated_pipeline_s", sim_pipeline_s);
  jd_num(&d, d.root, "closed_form_pipeline_s", r->pipeline_s);
  jd_num(&d, d.root, "simulated_iteration_time_s", iter_sim);
  jd_num(&d, d.root, "closed_form_iteration_time_s", r->iter_s);
  jd_num(&d, d.root, "exposed_dp_comm_s", r->time.dp_comm);
  jd_num(&d, d.root, "optimizer_s", r->time.optimizer);
  jd_num(&d, d.root, "tokens_per_s_per_device", r->tokens_per_iter / iter_sim / (double)plan_n_devices(p));
  jd_str(&d, d.root, "trace", trace_path);
  char *out = NULL;
  if (format == AP_OUT_JSON) {
    out = jd_dump(&d);
  } else if (!d.failed) {
    const json_t *doc = d.root;
    double sim = jd_getn(doc, "simulated_pipeline_s"), cf = jd_getn(doc, "closed_form_pipeline_s");
    strbuf sb = {0};
    sb_printf(&sb,
              "pipeline   %.4f s simulated, %.4f s closed form (%+.2f%%)\niteration  %.4f s simulated (with %.4f s "
              "exposed DP sync and %.4f s optimizer)\n",
              sim, cf, 100 * (sim - cf) / cf, jd_getn(doc, "simulated_iteration_time_s"), jd_getn(doc, "exposed_dp_comm_s"),
              jd_getn(doc, "optimizer_s"));
    if (*jd_gets(doc, "trace")) sb_printf(&sb, "trace      %s\n", jd_gets(doc, "trace"));
    out = sb_take(&sb);
  }
  jd_free(&d);
  return out;
}
