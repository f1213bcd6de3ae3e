/* `validate`'s answer as one document (report layer): validate_doc builds autopar-validate/1 (docs/json.md)
 * from a validate_report, and validate_doc_text renders the text table and summary from that document alone,
 * so `validate` and `validate --json` cannot disagree; the HTML report renders from it too.
 * Reading order: the row object (put_row), the summary (put_summary, with the data floor), then the text. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/jdoc.h"
#include "cost/result_doc.h"
#include "plan/stack.h"
#include "plan/summary.h"
#include "report/validate.h"
#include "search/recipe/complete.h"

/* ---- The document -------------------------------------------------------------------------------------------- */

static void put_row(jd *d, json_t *rows, const validate_row *v) {
  json_t *o = jd_obj(d, rows, NULL);
  bool ok = !v->error;
  jd_str(d, o, "id", v->id);
  jd_num(d, o, "predicted_tokens_per_s_per_gpu", ok ? v->predicted_tokens : NAN);
  jd_num(d, o, "measured_tokens_per_s_per_gpu", v->has_measured ? v->measured_tokens : NAN);
  jd_num(d, o, "ape", v->ape);
  jd_str(d, o, "predicted_outcome", !ok ? NULL : v->fits ? "ok" : "oom");
  /* Bytes are whole numbers; rounding a prediction to the byte loses nothing that a figure could show. */
  jd_num(d, o, "predicted_peak_mem_bytes", ok ? round(v->predicted_peak_mem_bytes) : NAN);
  jd_int(d, o, "line", v->line);
  jd_str(d, o, "model", v->model);
  jd_str(d, o, "gpu", v->gpu);
  /* The stack the row was predicted on: its stack column (or --stack), else the default of a transformer's. */
  jd_str(d, o, "stack", plan_stack_name(v->plan.stack == PLAN_STACK_DEFAULT ? plan_stack_default(true) : v->plan.stack));
  jd_bool(d, o, "stack_stated", v->plan.stack != PLAN_STACK_DEFAULT);
  jd_int(d, o, "num_gpus", v->num_gpus);
  jd_str(d, o, "outcome", v->measured_oom ? "oom" : "ok");
  if (v->has_mem) {
    jd_num(d, o, "measured_peak_mem_bytes", round(v->measured_mem_bytes));
    jd_str(d, o, "mem_convention", validate_mem_name(v->mem_convention));
    jd_num(d, o, "compared_mem_bytes", ok ? round(v->compared_mem_bytes) : NAN);
    jd_num(d, o, "mem_ape", v->mem_ape);
  }
  if (ok) {
    char brief[160];
    validate_plan_brief(&v->plan, v->stated, brief, sizeof brief);
    jd_str(d, o, "plan", brief);
    json_t *chosen = jd_arr(d, o, "chosen");
    for (int b = 0; b < COMPLETE_N_FIELDS; b++)
      if (!((v->stated >> b) & 1u)) jd_str(d, chosen, NULL, plan_field_name((plan_field_id)b));
    jd_int(d, o, "n_evaluated", v->n_evaluated);
    jd_num(d, o, "iter_s", v->iter_s);
    jd_num(d, o, "mfu_palm", v->mfu_palm);
    jd_str(d, o, "bound", v->bound ? v->bound : "");
  }
  if (ok && v->searched) {
    jd_num(d, o, "best_predicted_tokens_per_s_per_gpu", v->has_best ? v->best_tokens : NAN);
    jd_num(d, o, "best_vs_plan", v->has_best && v->predicted_tokens > 0 ? v->best_tokens / v->predicted_tokens : NAN);
    if (v->has_best) {
      char best[200];
      plan_summary(&v->best_plan, PLAN_SUMMARY_COMPACT | PLAN_SUMMARY_SCHEDULE, NULL, NULL, best, sizeof best);
      cost_doc_plan(d, o, "best_plan", &v->best_plan);
      jd_str(d, o, "best_plan_summary", best);
    } else {
      jd_null(d, o, "best_plan");
    }
    if (v->search_note) jd_str(d, o, "search_note", v->search_note);
  }
  if (ok && v->has_band) {
    jd_num(d, o, "band_low", v->band_low);
    jd_num(d, o, "band_high", v->band_high);
  }
  if (ok && v->has_mem_band) {
    jd_num(d, o, "mem_band_low_bytes", round(v->mem_band_low_bytes));
    jd_num(d, o, "mem_band_high_bytes", round(v->mem_band_high_bytes));
    jd_num(d, o, "peak_band_high_bytes", round(v->peak_band_high_bytes));
    jd_num(d, o, "capacity_bytes", round(v->capacity_bytes));
    jd_str(d, o, "predicted_outcome_at_band_high", v->fits_band_high ? "ok" : "oom");
  }
  if (ok && v->band_from) jd_str(d, o, "band_from", v->band_from);
  if (v->fold) {
    jd_str(d, o, "cv_group", v->fold);
    jd_bool(d, o, "chip_unseen", v->chip_unseen);
  }
  if (v->note) jd_str(d, o, "note", v->note);
  if (v->error) jd_str(d, o, "error", v->error);
}

/* summary.data_floor: what rows with identical inputs force on any prediction (data_floor.h). */
static void put_floor(jd *d, json_t *sum, const data_floor *f) {
  json_t *o = jd_obj(d, sum, "data_floor");
  jd_int(d, o, "identical_input_groups", f->n_groups);
  jd_int(d, o, "rows_in_them", f->n_rows_grouped);
  jd_num(d, o, "mape_floor", f->mape_floor);
  jd_num(d, o, "ape_bar", f->bar);
  jd_int(d, o, "min_rows_over_bar", f->min_rows_over);
  json_t *groups = jd_arr(d, o, "groups_over_bar");
  for (int64_t g = 0; g < f->n_listed; g++) {
    const floor_group *fg = &f->listed[g];
    json_t *go = jd_obj(d, groups, NULL);
    jd_int(d, go, "rows_over_bar", fg->n_over);
    json_t *ids = jd_arr(d, go, "ids"), *meas = NULL;
    for (int64_t k = 0; k < fg->n; k++) jd_str(d, ids, NULL, fg->ids[k]);
    meas = jd_arr(d, go, "measured");
    for (int64_t k = 0; k < fg->n; k++) jd_num(d, meas, NULL, fg->measured[k]);
  }
}

static void put_summary(jd *d, const validate_summary *s) {
  json_t *o = jd_obj(d, d->root, "summary");
  jd_num(d, o, "mape", s->mape);
  jd_num(d, o, "median_ape", s->median_ape);
  jd_int(d, o, "n", s->n);
  jd_int(d, o, "n_rows", s->n_rows);
  jd_int(d, o, "n_errors", s->n_errors);
  jd_num(d, o, "miss_ape", validate_miss_ape());
  jd_num(d, o, "mean_signed_error", s->mean_signed_error);
  if (s->worst_id) {
    json_t *w = jd_obj(d, o, "worst");
    jd_str(d, w, "id", s->worst_id);
    jd_num(d, w, "ape", s->worst_ape);
  } else {
    jd_null(d, o, "worst");
  }
  jd_num(d, o, "spearman", s->spearman);
  jd_int(d, o, "spearman_groups", s->n_ranked);
  json_t *groups = jd_arr(d, o, "spearman_by_group");
  for (int64_t g = 0; g < s->n_groups; g++) {
    json_t *go = jd_obj(d, groups, NULL);
    jd_str(d, go, "model", s->groups[g].model);
    jd_str(d, go, "gpu", s->groups[g].gpu);
    jd_int(d, go, "n", s->groups[g].n);
    jd_num(d, go, "rho", s->groups[g].rho);
  }
  json_t *oom = jd_obj(d, o, "oom");
  jd_int(d, oom, "oom_rows", s->oom_rows);
  jd_int(d, oom, "oom_predicted_oom", s->oom_predicted_oom);
  jd_int(d, oom, "ok_rows", s->ok_rows);
  jd_int(d, oom, "ok_predicted_fit", s->ok_predicted_fit);
  json_t *mem = jd_obj(d, o, "memory");
  jd_int(d, mem, "n", s->mem_n);
  jd_num(d, mem, "mape", s->mem_mape);
  json_t *by = jd_obj(d, mem, "by_convention");
  for (int k = 0; k < VALIDATE_MEM_COUNT_; k++) {
    if (k == VALIDATE_MEM_RSS && s->mem_n_by[k] == 0) continue; /* the executor's convention: only when used */
    json_t *c = jd_obj(d, by, validate_mem_name((validate_mem_convention)k));
    jd_int(d, c, "n", s->mem_n_by[k]);
    jd_num(d, c, "mape", s->mem_mape_by[k]);
  }
  jd_str(d, mem, "compared",
         "predicted total per device (fixed overhead and allocator reserve included); nvidia-smi rows: the first "
         "node's most loaded pipeline rank; max_memory_reserved rows: the peak over all ranks");
  put_floor(d, o, &s->floor);
  json_t *band = jd_obj(d, o, "band");
  jd_num(d, band, "level", s->band_level);
  jd_int(d, band, "n", s->band_n);
  jd_int(d, band, "covered", s->band_covered);
  jd_num(d, band, "coverage", s->band_n ? (double)s->band_covered / (double)s->band_n : NAN);
  jd_int(d, band, "mem_n", s->mem_band_n);
  jd_int(d, band, "mem_covered", s->mem_band_covered);
  jd_num(d, band, "mem_coverage", s->mem_band_n ? (double)s->mem_band_covered / (double)s->mem_band_n : NAN);
  jd_int(d, band, "oom_rows_fit_at_band_high", s->oom_fit_band_high);
  jd_int(d, band, "ok_rows_fit_at_band_high", s->ok_fit_band_high);
  if (s->cv) {
    json_t *cv = jd_obj(d, o, "cv");
    jd_str(d, cv, "grouping", s->cv);
    jd_str(d, cv, "method", "each group predicted by constants fitted without it (memory, then throughput), from the "
                            "starting constants; a chip no other group measures takes the nearest fitted chip's");
    json_t *cv_groups = jd_arr(d, cv, "groups");
    for (int64_t k = 0; k < s->n_folds; k++) {
      const validate_fold *f = &s->folds[k];
      json_t *go = jd_obj(d, cv_groups, NULL);
      jd_str(d, go, "group", f->name);
      jd_int(d, go, "n", f->n);
      jd_num(d, go, "mape", f->mape);
      jd_int(d, go, "chips_unseen", f->chips_unseen);
      jd_int(d, go, "mem_n", f->mem_n);
      jd_num(d, go, "memory_mape", f->mem_mape);
    }
  }
  if (s->searched) {
    json_t *se = jd_obj(d, o, "search");
    jd_int(d, se, "compared", s->search_compared);
    jd_int(d, se, "at_least_as_fast", s->search_at_least);
    jd_int(d, se, "slower", s->search_slower);
    jd_int(d, se, "stated_plan_unfit", s->search_stated_unfit);
    jd_int(d, se, "no_plan_fits", s->search_none_fit);
    jd_int(d, se, "cut_by_budget", s->search_truncated);
    if (s->search_worst_id) {
      json_t *w = jd_obj(d, se, "worst");
      jd_str(d, w, "id", s->search_worst_id);
      jd_num(d, w, "best_vs_plan", s->search_worst_ratio);
    } else {
      jd_null(d, se, "worst");
    }
  }
}

void validate_doc(jd *d, const validate_report *r) {
  jd_init(d, "autopar-validate/1");
  json_t *rows = jd_arr(d, d->root, "rows");
  for (int64_t i = 0; i < validate_report_n_rows(r); i++) put_row(d, rows, validate_report_row(r, i));
  put_summary(d, validate_report_summary(r));
}

/* ---- Text, from the document alone --------------------------------------------------------------------------- */

/* A percentage for the text table, or "-" when not a number. */
static const char *pct(double x, char *buf, size_t n) {
  if (isfinite(x)) snprintf(buf, n, "%.1f%%", 100.0 * x);
  else snprintf(buf, n, "-");
  return buf;
}

static const char *gib(double bytes, char *buf, size_t n) {
  if (isfinite(bytes) && bytes > 0) snprintf(buf, n, "%.1f", bytes / 1073741824.0);
  else snprintf(buf, n, "-");
  return buf;
}

static void text_row(strbuf *sb, const json_t *v, int w, bool searched) {
  char meas[32], ape[32], mem[48], a[16], b[16];
  const char *id = jd_gets(v, "id");
  double measured = jd_getn(v, "measured_tokens_per_s_per_gpu");
  bool measured_oom = strcmp(jd_gets(v, "outcome"), "oom") == 0;
  if (isfinite(measured)) snprintf(meas, sizeof meas, "%.1f", measured);
  else snprintf(meas, sizeof meas, "-");
  if (jd_at(v, "error")) {
    sb_printf(sb, "%-*.*s %12s %12s %8s  %-7s %13s  error: %s\n", w, w, id, "-", meas, "miss",
              measured_oom ? "-/oom" : "-/ok", "-", jd_gets(v, "error"));
    return;
  }
  bool has_mem = jd_at(v, "measured_peak_mem_bytes") != NULL;
  snprintf(mem, sizeof mem, "%s/%s",
           gib(jd_getn(v, has_mem ? "compared_mem_bytes" : "predicted_peak_mem_bytes"), a, sizeof a),
           gib(has_mem ? jd_getn(v, "measured_peak_mem_bytes") : NAN, b, sizeof b));
  char outcome[16];
  snprintf(outcome, sizeof outcome, "%s/%s", jd_gets(v, "predicted_outcome"), measured_oom ? "oom" : "ok");
  double predicted = jd_getn(v, "predicted_tokens_per_s_per_gpu");
  sb_printf(sb, "%-*.*s %12.1f %12s %8s  %-7s %13s", w, w, id, predicted, meas, pct(jd_getn(v, "ape"), ape, sizeof ape),
            outcome, mem);
  bool has_best = json_is_object(jd_at(v, "best_plan"));
  if (searched) {
    if (has_best) {
      double best = jd_getn(v, "best_predicted_tokens_per_s_per_gpu");
      sb_printf(sb, " %12.1f %8.3fx", best, best / predicted);
    } else {
      sb_printf(sb, " %12s %9s", "-", "-");
    }
  }
  const char *note = jd_gets(v, "note");
  sb_printf(sb, "  %s%s%s", jd_gets(v, "plan"), *note ? "  note: " : "", note);
  if (searched && has_best) sb_printf(sb, "  best: %s", jd_gets(v, "best_plan_summary"));
  if (searched && jd_at(v, "search_note")) sb_printf(sb, "  search: %s", jd_gets(v, "search_note"));
  sb_puts(sb, "\n");
}

static void text_summary(strbuf *sb, const json_t *s) {
  char p1[32], p2[32], p3[32];
  long long n_rows = (long long)jd_geti(s, "n_rows"), n = (long long)jd_geti(s, "n");
  sb_printf(sb, "\nrows: %lld (%lld with a measured throughput, %lld measured oom, %lld errors)\n", n_rows, n, n_rows - n,
            (long long)jd_geti(s, "n_errors"));
  sb_printf(sb, "throughput: MAPE %s, median %s over %lld rows (an error counts as %.0f%%); mean signed error %s\n",
            pct(jd_getn(s, "mape"), p1, sizeof p1), pct(jd_getn(s, "median_ape"), p2, sizeof p2), n,
            100 * jd_getn(s, "miss_ape"), pct(jd_getn(s, "mean_signed_error"), p3, sizeof p3));
  if (json_is_object(jd_at(s, "worst")))
    sb_printf(sb, "worst: %s (ape %s)\n", jd_gets(s, "worst.id"), pct(jd_getn(s, "worst.ape"), p1, sizeof p1));
  double rho = jd_getn(s, "spearman");
  long long n_ranked = (long long)jd_geti(s, "spearman_groups");
  if (isfinite(rho))
    sb_printf(sb, "spearman: mean %.3f over %lld groups (same model and gpu, at least 3 rows; %lld more without "
              "spread left out)\n", rho, n_ranked, (long long)json_array_size(jd_at(s, "spearman_by_group")) - n_ranked);
  else sb_printf(sb, "spearman: no group of at least 3 rows on the same model and gpu\n");
  sb_printf(sb, "oom agreement: %lld of %lld oom rows predicted oom; %lld of %lld ok rows predicted to fit\n",
            (long long)jd_geti(s, "oom.oom_predicted_oom"), (long long)jd_geti(s, "oom.oom_rows"),
            (long long)jd_geti(s, "oom.ok_predicted_fit"), (long long)jd_geti(s, "oom.ok_rows"));
  sb_printf(sb, "memory: MAPE %s over %lld rows", pct(jd_getn(s, "memory.mape"), p1, sizeof p1),
            (long long)jd_geti(s, "memory.n"));
  const char *conv;
  json_t *c;
  int k = 0;
  json_object_foreach(jd_at(s, "memory.by_convention"), conv, c) {
    sb_printf(sb, "%s%s %s over %lld", k++ ? "; " : " (", conv, pct(jd_getn(c, "mape"), p1, sizeof p1),
              (long long)jd_geti(c, "n"));
  }
  sb_puts(sb, "); predicted total with overhead and allocator reserve\n");
  const json_t *f = jd_at(s, "data_floor");
  if (jd_geti(f, "identical_input_groups") > 0) {
    sb_printf(sb, "data floor: %lld groups of rows with identical inputs (%lld rows) measured apart; no prediction "
                  "from the rows' fields can do better than MAPE %s, nor leave fewer than %lld rows above %s\n",
              (long long)jd_geti(f, "identical_input_groups"), (long long)jd_geti(f, "rows_in_them"),
              pct(jd_getn(f, "mape_floor"), p1, sizeof p1), (long long)jd_geti(f, "min_rows_over_bar"),
              pct(jd_getn(f, "ape_bar"), p2, sizeof p2));
    const json_t *groups = jd_at(f, "groups_over_bar");
    for (size_t g = 0; g < json_array_size(groups); g++) {
      const json_t *fg = json_array_get(groups, g);
      sb_printf(sb, "data floor: at least %lld above %s whatever the prediction:", (long long)jd_geti(fg, "rows_over_bar"),
                pct(jd_getn(f, "ape_bar"), p2, sizeof p2));
      const json_t *ids = jd_at(fg, "ids"), *meas = jd_at(fg, "measured");
      for (size_t i = 0; i < json_array_size(ids); i++)
        sb_printf(sb, "%s %s %.0f", i ? "," : "", json_string_value(json_array_get(ids, i)),
                  json_number_value(json_array_get(meas, i)));
      sb_puts(sb, "\n");
    }
  }
  if (jd_geti(s, "band.n") > 0 || jd_geti(s, "band.mem_n") > 0)
    sb_printf(sb, "bands (%.0f%%): throughput %lld of %lld rows inside theirs (%s); memory %lld of %lld (%s)\n",
              100 * jd_getn(s, "band.level"), (long long)jd_geti(s, "band.covered"), (long long)jd_geti(s, "band.n"),
              pct(jd_getn(s, "band.coverage"), p1, sizeof p1), (long long)jd_geti(s, "band.mem_covered"),
              (long long)jd_geti(s, "band.mem_n"), pct(jd_getn(s, "band.mem_coverage"), p2, sizeof p2));
  if (jd_geti(s, "band.mem_n") > 0)
    sb_printf(sb, "fit test at the memory band's upper edge: %lld of %lld oom rows pass it; %lld of %lld ok rows\n",
              (long long)jd_geti(s, "band.oom_rows_fit_at_band_high"), (long long)jd_geti(s, "oom.oom_rows"),
              (long long)jd_geti(s, "band.ok_rows_fit_at_band_high"), (long long)jd_geti(s, "oom.ok_rows"));
  const json_t *cv = jd_at(s, "cv");
  if (cv) {
    const json_t *groups = jd_at(cv, "groups");
    sb_printf(sb, "cross-validation (--cv %s): each of %zu groups predicted by constants fitted without it\n",
              jd_gets(cv, "grouping"), json_array_size(groups));
    for (size_t q = 0; q < json_array_size(groups); q++) {
      const json_t *go = json_array_get(groups, q);
      sb_printf(sb, "  %-40s %4lld rows MAPE %7s", jd_gets(go, "group"), (long long)jd_geti(go, "n"),
                pct(jd_getn(go, "mape"), p1, sizeof p1));
      if (jd_geti(go, "chips_unseen") > 0) sb_printf(sb, " (%lld on a chip no fit measured)", (long long)jd_geti(go, "chips_unseen"));
      if (jd_geti(go, "mem_n") > 0)
        sb_printf(sb, "; memory %lld rows MAPE %s", (long long)jd_geti(go, "mem_n"), pct(jd_getn(go, "memory_mape"), p2, sizeof p2));
      sb_puts(sb, "\n");
    }
  }
  const json_t *se = jd_at(s, "search");
  if (se) {
    sb_printf(sb, "search: the planner's best is at least as fast as the row's plan on %lld of %lld rows whose plan fits "
                  "(slower on %lld); %lld rows' plans do not fit under the cost model; no plan fits on %lld; %lld "
                  "searches stopped at the time budget\n",
              (long long)jd_geti(se, "at_least_as_fast"), (long long)jd_geti(se, "compared"), (long long)jd_geti(se, "slower"),
              (long long)jd_geti(se, "stated_plan_unfit"), (long long)jd_geti(se, "no_plan_fits"),
              (long long)jd_geti(se, "cut_by_budget"));
    if (json_is_object(jd_at(se, "worst")))
      sb_printf(sb, "search: lags most on %s (best/plan %.4f)\n", jd_gets(se, "worst.id"), jd_getn(se, "worst.best_vs_plan"));
  }
}

char *validate_doc_text(const json_t *doc) {
  strbuf sb = {0};
  const json_t *rows = jd_at(doc, "rows");
  bool searched = jd_at(doc, "summary.search") != NULL;
  size_t n = json_array_size(rows);
  int w = 4;
  for (size_t i = 0; i < n; i++) {
    int len = (int)strlen(jd_gets(json_array_get(rows, i), "id"));
    if (len > w) w = len < 48 ? len : 48;
  }
  if (searched) {
    sb_printf(&sb, "%-*s %12s %12s %8s  %-7s %13s %12s %9s  %s\n", w, "id", "predicted", "measured", "ape", "outcome",
              "mem GiB", "best plan", "best/plan", "plan (* = chosen by autopar)");
    sb_printf(&sb, "%-*s %12s %12s %8s  %-7s %13s %12s\n", w, "", "tok/s/GPU", "tok/s/GPU", "", "pred/run", "pred/run",
              "tok/s/GPU");
  } else {
    sb_printf(&sb, "%-*s %12s %12s %8s  %-7s %13s  %s\n", w, "id", "predicted", "measured", "ape", "outcome",
              "mem GiB", "plan (* = chosen by autopar)");
    sb_printf(&sb, "%-*s %12s %12s %8s  %-7s %13s\n", w, "", "tok/s/GPU", "tok/s/GPU", "", "pred/run", "pred/run");
  }
  for (size_t i = 0; i < n; i++) text_row(&sb, json_array_get(rows, i), w, searched);
  text_summary(&sb, jd_at(doc, "summary"));
  return sb_take(&sb);
}

char *validate_report_json(const validate_report *r) {
  jd d;
  validate_doc(&d, r);
  char *s = jd_dump(&d);
  jd_free(&d);
  return s;
}

char *validate_report_text(const validate_report *r) {
  jd d;
  validate_doc(&d, r);
  char *s = d.failed ? NULL : validate_doc_text(d.root);
  jd_free(&d);
  return s;
}
