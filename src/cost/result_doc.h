/* A cost result as a document (cost layer): the one JSON writer of cost_result, whose keys docs/json.md
 * documents once ("The cost result"), and the parts of the time breakdown in one table. `estimate` and
 * `simulate` build their documents here; `plan` (report/plan_doc.c) puts the same object in each of its plans.
 * Internal header: not installed, not part of the public API. */
#ifndef AP_COST_RESULT_DOC_H
#define AP_COST_RESULT_DOC_H

#include "core/jdoc.h"
#include "cost/cost.h"

/* One part of the iteration time: its JSON key under time_breakdown_s, its short label (plan's report) and
 * its long label (estimate's table). */
typedef struct {
  const char *key, *label, *long_label;
  size_t offset; /* in cost_time */
} cost_time_part;

enum { COST_N_TIME_PARTS = 11 };
/* The parts in cost_time's order: forward, backward, recompute, bubble, the five exposed communications
 * (tp, cp, ep, pp, dp), optimizer, offload. */
AP_HIDDEN const cost_time_part *cost_time_parts(void);
AP_HIDDEN double cost_time_part_s(const cost_time *t, size_t i);

/* One part of a stage's memory: its JSON key under memory.stages[], its column in estimate's table, its label
 * (the report's stacked bars) and its offset in cost_mem. */
typedef struct {
  const char *key, *column, *label;
  size_t offset;
} cost_mem_part;
/* The parts in cost_mem's order, without the total (*n of them); they add up to total_bytes. */
AP_HIDDEN const cost_mem_part *cost_mem_parts(size_t *n);

/* What bounds the plan, in words, with the share that earns it: "compute: forward, backward and recompute
 * take 95.5% of the iteration", "memory (90.1 GiB needed of 80.0)". */
AP_HIDDEN void cost_result_bound_text(const cost_result *r, char *out, size_t n);

/* Puts the cost result's keys into the object o (docs/json.md "The cost result"): iteration_time_s,
 * time_breakdown_s, tokens_per_iteration, tokens_per_s, tokens_per_s_per_device, flop_per_iteration, mfu,
 * tflops_per_device, memory (capacity, peak, peak stage, fits, every stage's parts), bound, bound_detail. */
AP_HIDDEN void cost_result_put(jd *d, json_t *o, const cost_result *r);
/* Puts plan p under key as its plan-format object (docs/plan-format.md). */
AP_HIDDEN void cost_doc_plan(jd *d, json_t *o, const char *key, const plan *p);

/* Puts "calibration" into o (docs/json.md): where the device's compute constants come from (its chip's fitted
 * entry, the nearest sibling's, the defaults) and the error band of the prediction r of plan p with the
 * throughput and iteration time it spans (null when the calibration holds none). */
AP_HIDDEN void cost_calibration_put(jd *d, json_t *o, const cost_env *env, const plan *p, const cost_result *r);
/* Its two text lines ("constants ...", "band ..."), rendered from such an object after indent, the labels
 * padded to width; nothing when c is NULL. */
AP_HIDDEN void cost_calibration_text(strbuf *sb, const json_t *c, const char *indent, int width);

/* Builds the document of `estimate` (autopar-estimate/1) into d (jd_init is done here); the caller frees it
 * with jd_free. */
AP_HIDDEN void cost_estimate_doc(jd *d, const cost_env *env, const plan *p, const cost_result *r,
                                 const cost_plan_note *note);
/* Puts "stack" (the name), "stack_source" ("plan", "--stack", "--export", "cluster", "default") and
 * "stack_note" (why, and how to take another: "the default; --stack NAME for another") into o. */
AP_HIDDEN void cost_stack_put(jd *d, json_t *o, plan_stack stack, const char *source, const char *why);
/* The text rendering of an autopar-estimate document; NULL when out of memory. The caller frees it. */
AP_HIDDEN char *cost_estimate_text(const json_t *doc);

/* The output of `simulate` (autopar-simulate/1: the simulated and closed-form times; `estimate --json` gives
 * the closed form's whole result) in format AP_OUT_TEXT or AP_OUT_JSON. sim_pipeline_s is the simulated
 * pipeline time, trace_path the written trace (NULL when none). NULL when out of memory; the caller frees it. */
AP_HIDDEN char *cost_simulate_out(const plan *p, const cost_result *r, double sim_pipeline_s, const char *trace_path,
                                  int format);

#endif
