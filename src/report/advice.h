/* What would make a plan fit (report layer; advice.c): the memory savers tried on a plan that does not fit,
 * each costed by the cost model. plan_doc.c puts them in `plan`'s "closest" plans when nothing fits.
 * Internal header: not installed, not part of the public API. */
#ifndef AP_REPORT_ADVICE_H
#define AP_REPORT_ADVICE_H

#include <stdbool.h>

#include "cost/cost.h"
#include "plan/plan.h"

/* TUNING: three ZeRO stages, three recompute kinds, two micro-batch sizes, two offloads, two mesh changes and
 * the combination are 13; room for all. */
enum { ADVICE_MAX = 16 };

typedef struct {
  char change[96]; /* "ZeRO 1 (shard the optimizer states)" */
  plan p;          /* the plan with the change */
  double peak_bytes, iter_s;
  bool fits;       /* within the device memory and the limit, and offload within the host memory */
  bool host_short; /* offload needs more host memory per node than the node has */
} advice_fix;

/* Costs every memory saver on p (advice.c's header: each alone, then the ones that keep the mesh together)
 * that p's stack runs and that makes a valid plan, against limit bytes per device; writes at most ADVICE_MAX
 * into out and returns their count (0 when out of memory). */
AP_HIDDEN int advice_fixes(const cost_env *env, const plan *p, double limit, advice_fix *out);

#endif
