/* The simulated timeline as a Chrome trace-event document (report layer), and `autopar simulate`'s answer
 * (ap_simulate): the event-driven simulator of cost/sim.c run over the plan's schedule (plan/schedule.h). */
#ifndef AP_REPORT_TRACE_H
#define AP_REPORT_TRACE_H

#include "cost/cost.h"

/* The events of one simulated iteration as a Chrome trace-event JSON document: one process per pipeline
 * stage with a compute and a communication thread, each pass an "X" event, each send of an activation (or its
 * gradient) on the communication thread, then the exposed data-parallel synchronisation and the optimizer step
 * after the pipeline. The caller frees the document with free(); NULL when out of memory. */
AP_HIDDEN char *report_trace_json(const char *model, const char *cluster, const plan *p, const cost_result *r,
                                  const sim_event *ev, size_t n_events, double pipeline_s);

#endif
