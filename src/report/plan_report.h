/* `autopar plan`'s library side (report layer, above search): ap_plan_search turns the public options into a
 * search (search.h), runs it and explains the result in text or JSON (docs/planner.md "Output"). The pieces
 * below are internal, for the tests and for `validate --search`.
 * Internal header: not installed, not part of the public API. */
#ifndef AP_REPORT_PLAN_REPORT_H
#define AP_REPORT_PLAN_REPORT_H

#include "search/recipe/search.h"

/* Parses a --fix list, "tp=8,pp=4,order=tp,cp,ep,pp,dp": each key=value goes to ap_plan_set on *base and sets
 * its bit in *mask (complete_bit and SEARCH_BIT_*); a comma-separated token without '=' continues the value
 * before it. The overlap switches (tp-comm-overlap, overlap-grad-reduce, overlap-param-gather) set the template
 * only, since no strategy searches them. gbs and seq are not fields to fix (they are the problem's). AP_INVALID
 * names the bad key or value. fix may be NULL or "". */
AP_HIDDEN ap_status plan_fix_parse(ap_ctx *ctx, const char *fix, plan *base, unsigned *mask);

#endif
