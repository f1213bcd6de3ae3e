/* The plan in one line for people (plan layer): the one summary every output uses, `plan`'s report and
 * `estimate` (PLAN_SUMMARY_LINE) as well as `validate`'s table column and its --search column
 * (PLAN_SUMMARY_COMPACT). Internal header: not installed, not part of the public API. */
#ifndef AP_PLAN_SUMMARY_H
#define AP_PLAN_SUMMARY_H

#include <stdbool.h>
#include <stddef.h>

#include "plan/plan.h"

enum {
  /* "tp 8, pp 4, dp 2 | mbs 1 x 64 | interleaved-1f1b vpp 5 | sp | recompute selective | ZeRO 1 | bf16", with
   * cp, ep/etp, the mesh order, the layer split, tp-comm-overlap and the fused loss where they are set. */
  PLAN_SUMMARY_LINE = 0,
  /* "tp8* pp1 dp8 mbs4 vpp1 sp0 rc=none z1": a table column; a field the chooser callback says autopar chose
   * (rather than the input stated) is marked with '*'. */
  PLAN_SUMMARY_COMPACT = 1,
  /* With PLAN_SUMMARY_COMPACT: the schedule and vpp appended ("… 1f1b vpp1"). */
  PLAN_SUMMARY_SCHEDULE = 2,
};

/* Says whether autopar chose a plan field (by its plan-format name: "tp", "micro_batch_size",
 * "sequence_parallel", "recompute", "zero_stage", "precision", …) rather than the input stating it. */
typedef bool (*plan_chosen_fn)(const void *user, const char *field);

/* Writes the summary of p into out (at most n bytes with the NUL, cut short if longer). style is a
 * PLAN_SUMMARY_* value or-ed with flags; chosen may be NULL (no marks). */
AP_HIDDEN void plan_summary(const plan *p, int style, plan_chosen_fn chosen, const void *user, char *out, size_t n);

#endif
