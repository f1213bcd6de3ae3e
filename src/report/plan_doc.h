/* `plan`'s answer as one document (report layer): plan_doc builds the autopar-search/2 document from a
 * search's result (docs/json.md "autopar-search/2"), and plan_doc_text renders the text explanation from that
 * document alone, so `plan` and `plan --json` cannot disagree; the HTML report renders from it too.
 * ap_plan_search (plan_report.c) runs the search and calls these. Internal header: not installed. */
#ifndef AP_REPORT_PLAN_DOC_H
#define AP_REPORT_PLAN_DOC_H

#include "core/jdoc.h"
#include "search/search.h"

/* The plan given with --compare, costed beside the winner. */
typedef struct {
  bool have;
  bool valid;
  char error[1024];
  plan p;
  cost_result *r;
  bool batch_differs;
} plan_compare;

/* Everything the document says. */
typedef struct {
  const cost_env *env;
  const search_opts *so;
  const search_stats *stats;
  const search_result *res; /* the plans found, best first (when nothing fits: the closest) */
  int n;
  ap_status st;                /* the search's status: AP_INFEASIBLE when nothing fits */
  const char *message;         /* the search's one-line verdict when it failed */
  const plan_compare *cmp;     /* NULL without --compare */
  const char *cluster_spec;    /* the cluster as the user named it */
} plan_doc_in;

/* Builds the document into d (jd_init is done here); the caller frees it with jd_free. */
AP_HIDDEN void plan_doc(jd *d, const plan_doc_in *in);
/* The text explanation of an autopar-search document; NULL when out of memory. The caller frees it. */
AP_HIDDEN char *plan_doc_text(const json_t *doc);

#endif
