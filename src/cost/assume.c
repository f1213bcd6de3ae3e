/* What an answer took that its input did not say, and what makes a feasible answer absurd (cost layer;
 * result_doc.h; docs/json.md "Assumptions and warnings"). Every document about a plan carries both lists, each
 * entry {"about", "text"}, and its text prints them ("assumed  …", "warning  …"), so that no default is silent
 * and no answer that fits but could never be run passes without a word.
 *
 * Assumptions: the sequence length (the model's pretraining context, graph.default_seq_from), a cluster
 * shorthand without a count (hw_cluster.assumed), sequence parallelism turned on with tp (plan_default_sp), and
 * an NVMe capacity that the cluster file does not state (offload to NVMe is then not checked against it).
 * Warnings: an offload-bound iteration, and a training time beyond a year for the model's compute-optimal
 * token budget (20 tokens per parameter, Hoffmann et al. 2022, "Training Compute-Optimal Large Language
 * Models", Table 3: 20.2 tokens per parameter at 1.4B to 10T parameters) or for the budget asked (--tokens,
 * report/doc_render.c). A year: no published pretraining run of a large model took one (Llama 3 405B: 54 days,
 * "The Llama 3 Herd of Models" §3.3.4). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cost/internal.h"
#include "cost/result_doc.h"

#define YEAR_S (365.25 * 86400.0)
#define CHINCHILLA_TOKENS_PER_PARAM 20.0
#define OFFLOAD_BOUND_SHARE 0.5

void cost_note_add(jd *d, json_t *o, const char *list, const char *about, const char *text) {
  json_t *a = json_object_get(o, list);
  if (!a) a = jd_arr(d, o, list);
  json_t *e = jd_obj(d, a, NULL);
  jd_str(d, e, "about", about);
  jd_str(d, e, "text", text);
}

void cost_assumptions_put(jd *d, json_t *o, const cost_env *env, const plan *p, const cost_result *r,
                          bool seq_default) {
  const graph *g = cost_env_graph(env);
  const hw_cluster *hc = cost_env_cluster(env);
  jd_arr(d, o, "assumptions");
  char t[640];
  if (seq_default && g->default_seq_from && *g->default_seq_from) {
    snprintf(t, sizeof t, "sequence length %lld tokens, %s; --seq for another (8k = 8192)", (long long)g->default_seq,
             g->default_seq_from);
    cost_note_add(d, o, "assumptions", "seq_length", t);
  }
  if (hc->assumed) cost_note_add(d, o, "assumptions", "cluster", hc->assumed);
  if (p && p->sp_assumed) {
    snprintf(t, sizeof t, "sequence parallelism on with tp %lld: the plan did not say, and Megatron-LM runs tensor "
                          "parallelism with it (--sequence-parallel; the same traffic, less memory); --sp 0 for none",
             (long long)p->tp);
    cost_note_add(d, o, "assumptions", "sequence_parallel", t);
  }
  if (r && r->nvme_bytes > 0 && !(r->nvme_capacity_bytes > 0)) {
    snprintf(t, sizeof t, "the NVMe capacity of %s's nodes is not stated (host.nvme_bytes): the %.2f TB per node this "
                          "offload keeps there is not checked against it",
             hc->name, r->nvme_bytes / 1e12);
    cost_note_add(d, o, "assumptions", "nvme_capacity", t);
  }
}

/* "390 years", "2.3 years", "45 days". */
static void duration(double s, char *out, size_t n) {
  if (s >= 2 * YEAR_S) snprintf(out, n, "%.0f years", s / YEAR_S);
  else if (s >= YEAR_S) snprintf(out, n, "%.1f years", s / YEAR_S);
  else snprintf(out, n, "%.0f days", s / 86400);
}

void cost_warnings_put(jd *d, json_t *o, const cost_env *env, const cost_result *r) {
  jd_arr(d, o, "warnings");
  if (!r || !r->fits || !(r->iter_s > 0)) return;
  char t[512];
  if (r->time.offload > OFFLOAD_BOUND_SHARE * r->iter_s) {
    snprintf(t, sizeof t, "offload-bound: moving the offloaded states over the host link, the CPU's optimizer step and "
                          "NVMe take %.0f%% of every iteration (%.3g of %.3g s); it fits, but more devices would train "
                          "far faster",
             100 * r->time.offload / r->iter_s, r->time.offload, r->iter_s);
    cost_note_add(d, o, "warnings", "offload_bound", t);
  }
  double params = (double)graph_params_total(cost_env_graph(env)), tokens = CHINCHILLA_TOKENS_PER_PARAM * params;
  double time_s = r->tokens_per_s > 0 ? tokens / r->tokens_per_s : INFINITY;
  if (time_s > YEAR_S) {
    char dur[64];
    duration(time_s, dur, sizeof dur);
    snprintf(t, sizeof t, "%s to train on %.3g tokens (20 per parameter, the compute-optimal budget of Hoffmann et "
                          "al. 2022) at %.4g tokens/s: feasible, not practical",
             dur, tokens, r->tokens_per_s);
    cost_note_add(d, o, "warnings", "years_to_train", t);
  }
}

void cost_years_warning(jd *d, json_t *o, double tokens, double time_s) {
  if (!(time_s > YEAR_S)) return;
  char dur[64], t[256];
  duration(time_s, dur, sizeof dur);
  snprintf(t, sizeof t, "%s to train on the %.3g tokens asked: feasible, not practical", dur, tokens);
  cost_note_add(d, o, "warnings", "years_to_train", t);
}

void cost_notes_text(strbuf *sb, const json_t *o, const char *indent, int width) {
  static const char *const lists[][2] = {{"assumptions", "assumed"}, {"warnings", "warning"}};
  for (size_t l = 0; l < 2; l++) {
    const json_t *a = json_object_get(o, lists[l][0]);
    for (size_t i = 0; i < json_array_size(a); i++) {
      char first[64], cont[64];
      snprintf(first, sizeof first, "%s%-*s", indent, width, lists[l][1]);
      snprintf(cont, sizeof cont, "%*s", (int)(strlen(indent) + (size_t)width), "");
      sb_wrap(sb, first, cont, jd_gets(json_array_get(a, i), "text"), AP_TEXT_WIDTH);
    }
  }
}
