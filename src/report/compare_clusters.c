/* ap_compare_clusters (report layer): "64 H100 or 128 A100?" in one table. Each cluster is planned with the
 * same options through ap_plan_search; its winner's throughput gives the time and device-hours to train on the
 * token budget (train_cost.c) and, with a price, the cost. Clusters are ranked by time (throughput when no
 * budget is given) and by cost. The answer is one document (autopar-compare-clusters/1, docs/json.md); the text
 * table is rendered from it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jdoc.h"
#include "core/jsonx.h"
#include "cost/result_doc.h"
#include "report/train_cost.h"

enum { MAX_CLUSTERS = 64 };

typedef struct {
  char spec[256];
  bool feasible;
  int64_t n_devices;
  char device[64], summary[512];
  double iteration_time_s, tokens_per_s, peak_mem_bytes, price;
  train_cost tc;
  int rank_time, rank_cost;
  json_t *notes; /* {"assumptions": […], "warnings": […]} of its search and winner (docs/json.md); NULL when none */
} entry;

/* Splits a comma list into at most max fields of at most field_n bytes; false on an empty field or too many. */
static bool split(const char *list, char (*fields)[256], size_t max, size_t *n) {
  *n = 0;
  const char *p = list;
  while (*p) {
    const char *c = strchr(p, ',');
    size_t len = c ? (size_t)(c - p) : strlen(p);
    if (len == 0 || len >= 256 || *n == max) return false;
    memcpy(fields[*n], p, len);
    fields[*n][len] = '\0';
    (*n)++;
    if (!c) break;
    p = c + 1;
    if (!*p) return false;
  }
  return *n > 0;
}

static ap_status plan_one(ap_ctx *ctx, const ap_model *model, entry *e, const ap_search_opts *opts, double tokens) {
  ap_cluster *cl = NULL;
  ap_status st = ap_cluster_load(ctx, e->spec, &cl);
  if (st) return st;
  e->n_devices = ap_cluster_n_devices(cl);
  char *doc = NULL;
  st = ap_plan_search(ctx, model, cl, opts, AP_OUT_JSON, &doc, NULL);
  ap_cluster_free(cl);
  if (st == AP_INFEASIBLE) st = AP_OK, ctx_clear(ctx);
  if (st) {
    free(doc);
    return st;
  }
  json_t *j = json_loads(doc ? doc : "", 0, NULL);
  free(doc);
  if (!j) return ctx_fail(ctx, AP_INTERNAL, "compare-clusters: %s: the search document does not parse", e->spec);
  json_t *best = json_array_get(json_object_get(j, "plans"), 0);
  /* What its answer assumed and warns of, kept for the document (each cluster's own). */
  e->notes = json_pack("{s:O?, s:O?}", "assumptions", json_object_get(j, "assumptions"), "warnings",
                       best ? json_object_get(best, "warnings") : NULL);
  if (!e->notes) {
    json_decref(j);
    return ctx_fail(ctx, AP_NOMEM, "compare-clusters: out of memory");
  }
  const char *dev = json_string_value(json_object_get(j, "device"));
  snprintf(e->device, sizeof e->device, "%s", dev ? dev : "?");
  e->feasible = json_is_true(json_object_get(j, "feasible")) && best;
  if (e->feasible) {
    const char *sum = json_string_value(json_object_get(best, "summary"));
    snprintf(e->summary, sizeof e->summary, "%s", sum ? sum : "");
    e->iteration_time_s = json_number_value(json_object_get(best, "iteration_time_s"));
    e->tokens_per_s = json_number_value(json_object_get(best, "tokens_per_s"));
    e->peak_mem_bytes = jd_getn(best, "memory.peak_bytes"); /* autopar-search/2: the cost result's memory */
  } else {
    e->tokens_per_s = 0;
  }
  train_cost_compute(tokens > 0 ? tokens : 1e9, e->tokens_per_s, (double)e->n_devices, e->price, &e->tc);
  json_decref(j);
  return AP_OK;
}

/* Ranks 1.. by key ascending (infeasible last, in input order). */
static void rank_by(entry *es, size_t n, bool by_cost) {
  for (size_t a = 0; a < n; a++) {
    int r = 1;
    double ka = by_cost ? es[a].tc.cost : es[a].tc.time_s;
    for (size_t b = 0; b < n; b++) {
      if (b == a) continue;
      double kb = by_cost ? es[b].tc.cost : es[b].tc.time_s;
      bool before = es[b].feasible && (!es[a].feasible || kb < ka || (kb == ka && b < a));
      if (!es[a].feasible && !es[b].feasible) before = b < a;
      r += before;
    }
    if (by_cost) es[a].rank_cost = r;
    else es[a].rank_time = r;
  }
}

/* The answer as one document (autopar-compare-clusters/1, docs/json.md), clusters in the order given. */
static void compare_doc(jd *d, const entry *es, size_t n, double tokens, bool priced) {
  jd_init(d, "autopar-compare-clusters/1");
  jd_num(d, d->root, "tokens", tokens > 0 ? tokens : NAN);
  json_t *arr = jd_arr(d, d->root, "clusters");
  for (size_t i = 0; i < n; i++) {
    const entry *e = &es[i];
    json_t *o = jd_obj(d, arr, NULL);
    jd_str(d, o, "cluster", e->spec);
    jd_int(d, o, "n_devices", e->n_devices);
    jd_str(d, o, "device", e->device);
    jd_bool(d, o, "feasible", e->feasible);
    jd_int(d, o, "rank_by_time", e->rank_time);
    if (priced) jd_int(d, o, "rank_by_cost", e->rank_cost);
    else jd_null(d, o, "rank_by_cost");
    jd_str(d, o, "best_plan", e->feasible ? e->summary : NULL);
    jd_num(d, o, "iteration_time_s", e->feasible ? e->iteration_time_s : NAN);
    jd_num(d, o, "tokens_per_s", e->feasible ? e->tokens_per_s : NAN);
    jd_num(d, o, "tokens_per_s_per_device", e->feasible ? e->tokens_per_s / (double)e->n_devices : NAN);
    jd_num(d, o, "peak_mem_bytes", e->feasible ? e->peak_mem_bytes : NAN);
    train_cost_put(d, o, "train", &e->tc);
    json_t *a = e->notes ? json_object_get(e->notes, "assumptions") : NULL, *w = e->notes ? json_object_get(e->notes, "warnings") : NULL;
    jd_put(d, o, "assumptions", a ? json_deep_copy(a) : json_array());
    jd_put(d, o, "warnings", w ? json_deep_copy(w) : json_array());
    if (tokens > 0 && e->feasible) cost_years_warning(d, o, tokens, e->tc.time_s);
  }
}

/* The table, every figure read from the document. */
static void compare_text(strbuf *sb, const json_t *doc) {
  char dur[64];
  double tokens = jd_getn(doc, "tokens");
  const json_t *arr = jd_at(doc, "clusters");
  size_t n = json_array_size(arr);
  bool priced = n > 0 && jd_at(json_array_get(arr, 0), "rank_by_cost") &&
                !json_is_null(jd_at(json_array_get(arr, 0), "rank_by_cost"));
  if (isfinite(tokens)) sb_printf(sb, "time and cost to train on %.3g tokens", tokens);
  else sb_puts(sb, "per 10^9 tokens (give --tokens for a budget)");
  sb_puts(sb, "\n\n");
  sb_printf(sb, "%-4s %-22s %8s  %-10s %12s %14s %14s %12s", "rank", "cluster", "devices", "device", "tokens/s",
            isfinite(tokens) ? "time to train" : "time", "device-hours", priced ? "cost" : "");
  sb_puts(sb, "  best plan\n");
  strbuf plans = {0}; /* the best plans below the table, one wrapped line each: the table stays narrow */
  for (int64_t r = 1; r <= (int64_t)n; r++)
    for (size_t i = 0; i < n; i++) {
      const json_t *e = json_array_get(arr, i);
      if (jd_geti(e, "rank_by_time") != r) continue;
      if (!jd_getb(e, "feasible")) {
        sb_printf(sb, "%-4s %-22s %8lld  %-10s %12s %14s %14s %12s  no plan fits\n", "-", jd_gets(e, "cluster"),
                  (long long)jd_geti(e, "n_devices"), jd_gets(e, "device"), "-", "-", "-", "");
        continue;
      }
      train_format_duration(jd_getn(e, "train.time_s"), dur, sizeof dur);
      char cost[32] = "";
      if (priced) snprintf(cost, sizeof cost, "%.0f", jd_getn(e, "train.cost"));
      sb_printf(sb, "%-4lld %-22s %8lld  %-10s %12.0f %14s %14.0f %12s  #%lld below\n", (long long)r, jd_gets(e, "cluster"),
                (long long)jd_geti(e, "n_devices"), jd_gets(e, "device"), jd_getn(e, "tokens_per_s"), dur,
                jd_getn(e, "train.gpu_hours"), cost, (long long)r);
      char first[64];
      snprintf(first, sizeof first, "#%-3lld ", (long long)r);
      sb_wrap(&plans, first, "          ", jd_gets(e, "best_plan"), AP_TEXT_WIDTH);
    }
  if (plans.buf) sb_printf(sb, "\nbest plans:\n%s", plans.buf);
  sb_free(&plans);
  /* What each cluster's answer assumed and warns of, "cluster: text", each text once. */
  bool first = true;
  for (size_t i = 0; i < n; i++) {
    const json_t *e = json_array_get(arr, i);
    static const char *const lists[][2] = {{"assumptions", "assumed"}, {"warnings", "warning"}};
    for (size_t l = 0; l < 2; l++) {
      const json_t *a = jd_at(e, lists[l][0]);
      for (size_t k = 0; k < json_array_size(a); k++) {
        const char *t = jd_gets(json_array_get(a, k), "text");
        bool seen = false;
        for (size_t i2 = 0; i2 < i && !seen; i2++) {
          const json_t *a2 = jd_at(json_array_get(arr, i2), lists[l][0]);
          for (size_t k2 = 0; k2 < json_array_size(a2) && !seen; k2++) seen = strcmp(jd_gets(json_array_get(a2, k2), "text"), t) == 0;
        }
        if (seen) continue;
        size_t in_all = 0; /* every cluster's answer says it (the sequence length): no cluster named */
        for (size_t i2 = 0; i2 < n; i2++) {
          const json_t *a2 = jd_at(json_array_get(arr, i2), lists[l][0]);
          bool has = false;
          for (size_t k2 = 0; k2 < json_array_size(a2) && !has; k2++) has = strcmp(jd_gets(json_array_get(a2, k2), "text"), t) == 0;
          in_all += has;
        }
        char head[32], body[800];
        snprintf(head, sizeof head, "%s%-9s", first ? "\n" : "", lists[l][1]);
        if (in_all == n && n > 1) snprintf(body, sizeof body, "%s", t);
        else snprintf(body, sizeof body, "%s: %s", jd_gets(e, "cluster"), t);
        sb_wrap(sb, head, "         ", body, AP_TEXT_WIDTH);
        first = false;
      }
    }
  }
  if (priced) {
    sb_puts(sb, "\nby cost:");
    for (int64_t r = 1; r <= (int64_t)n; r++)
      for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(arr, i);
        if (jd_geti(e, "rank_by_cost") == r && jd_getb(e, "feasible"))
          sb_printf(sb, " %lld. %s (%.0f)", (long long)r, jd_gets(e, "cluster"), jd_getn(e, "train.cost"));
      }
    sb_puts(sb, "\n");
  }
  sb_puts(sb, "(rank by time to train, fastest first; time and device-hours from the best plan's predicted throughput)\n");
}

ap_status ap_compare_clusters(ap_ctx *ctx, const ap_model *model, const char *clusters, const ap_search_opts *opts,
                              const char *tokens_s, const char *prices, int format, char **out) {
  API_ENTER(ctx);
  if (out) *out = NULL;
  if (!ctx) return AP_INVALID;
  if (!model || !clusters || !opts || !out)
    return ctx_fail(ctx, AP_INVALID, "ap_compare_clusters: model, clusters, opts and out must not be NULL");
  *out = NULL;
  ctx_clear(ctx);
  if (format != AP_OUT_TEXT && format != AP_OUT_JSON)
    return ctx_fail(ctx, AP_INVALID, "ap_compare_clusters: format must be AP_OUT_TEXT or AP_OUT_JSON");
  double tokens = 0;
  if (tokens_s && !train_parse_amount(tokens_s, &tokens))
    return ctx_fail(ctx, AP_INVALID, "--tokens: expected a positive amount such as 1T or 300B, got \"%s\"", tokens_s);
  char (*specs)[256] = calloc(MAX_CLUSTERS, 256), (*ps)[256] = calloc(MAX_CLUSTERS, 256);
  entry *es = calloc(MAX_CLUSTERS, sizeof *es);
  ap_status st = AP_OK;
  size_t n = 0, np = 0;
  if (!specs || !ps || !es) {
    st = ctx_fail(ctx, AP_NOMEM, "compare-clusters: out of memory");
    goto done;
  }
  if (!split(clusters, specs, MAX_CLUSTERS, &n)) {
    st = ctx_fail(ctx, AP_INVALID, "--clusters: expected a comma-separated list of 1 to %d clusters, got \"%s\"", MAX_CLUSTERS,
                  clusters);
    goto done;
  }
  if (prices && *prices && (!split(prices, ps, MAX_CLUSTERS, &np) || (np != 1 && np != n))) {
    st = ctx_fail(ctx, AP_INVALID, "--price-per-gpu-hour: expected one price or one per cluster (%zu), got \"%s\"", n, prices);
    goto done;
  }
  for (size_t i = 0; i < n && !st; i++) {
    memcpy(es[i].spec, specs[i], sizeof es[i].spec);
    es[i].price = NAN;
    if (np) {
      char *end = NULL;
      double v = strtod(ps[np == 1 ? 0 : i], &end);
      if (end == ps[np == 1 ? 0 : i] || *end || !(v > 0) || !isfinite(v)) {
        st = ctx_fail(ctx, AP_INVALID, "--price-per-gpu-hour: expected a price > 0, got \"%s\"", ps[np == 1 ? 0 : i]);
        break;
      }
      es[i].price = v;
    }
    st = plan_one(ctx, model, &es[i], opts, tokens);
    if (st && st != AP_NOMEM && st != AP_CANCELLED) {
      char msg[1024];
      snprintf(msg, sizeof msg, "%s", ap_ctx_error(ctx));
      st = ctx_fail(ctx, st, "--clusters: %s: %s", es[i].spec, msg);
    }
  }
  if (st) goto done;
  rank_by(es, n, false);
  if (np) rank_by(es, n, true);
  jd doc;
  compare_doc(&doc, es, n, tokens, np > 0);
  if (format == AP_OUT_JSON) {
    *out = jd_dump(&doc);
  } else if (!doc.failed) {
    strbuf sb = {0};
    compare_text(&sb, doc.root);
    *out = sb_take(&sb);
  }
  jd_free(&doc);
  if (!*out) {
    st = ctx_fail(ctx, AP_NOMEM, "compare-clusters: out of memory");
    goto done;
  }
done:
  free(specs);
  free(ps);
  for (size_t i = 0; es && i < MAX_CLUSTERS; i++) json_decref(es[i].notes);
  free(es);
  return st;
}
