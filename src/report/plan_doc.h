/* `plan`'s answer as one document (report layer): plan_doc builds the autopar-search/2 document from a
 * search's result (docs/json.md "autopar-search/2"), and plan_doc_text renders the text explanation from that
 * document alone, so `plan` and `plan --json` cannot disagree; the HTML report renders from it too.
 * ap_plan_search (plan_report.c) runs the search and calls these. Internal header: not installed. */
#ifndef AP_REPORT_PLAN_DOC_H
#define AP_REPORT_PLAN_DOC_H

#include "core/jdoc.h"
#include "search/recipe/search.h"

/* The plan given with --compare, costed beside the winner. */
typedef struct {
  bool have;
  bool valid;
  char error[1024];
  plan p;
  cost_result *r;
  bool batch_differs;
  /* Why the search did not return the given plan although it is no slower than #1 ("" when it is slower, or
   * when nothing fits): plan_report.c's compare_reason. */
  char reason[1200];
} plan_compare;

/* A sample of the explored space: every plan the search costs passes through plan_space_observe (the search's
 * observe hook), which keeps a uniform sample of at most PLAN_SPACE_MAX of them (reservoir sampling with a
 * fixed-seed generator, so the same search gives the same sample). TUNING: 512 points draw a dense scatter
 * and add about 100 kB to `plan --json`; the grid costs up to tens of thousands of plans. */
enum { PLAN_SPACE_MAX = 512 };
typedef struct {
  plan p;
  double iter_s, peak_mem_bytes;
  bool fits;
} plan_space_point;
typedef struct {
  plan_space_point *pts; /* PLAN_SPACE_MAX, allocated at the first plan; NULL when out of memory */
  int n;
  int64_t n_seen;
  uint64_t rng;
  bool failed; /* out of memory: the sample is left out */
} plan_space;
/* search_opts.observe: user is a plan_space, zeroed before the search; free its pts with free(). */
AP_HIDDEN void plan_space_observe(void *user, const plan *p, const cost_result *r);

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
  const plan_space *space;     /* the sample of costed plans; NULL = none */
  const char *stack_source;    /* where the search's stack came from: "--stack", "--export", "cluster", "default" */
  const char *stack_why;       /* the phrase saying so ("from --export torchtitan", "the default") */
} plan_doc_in;

/* Builds the document into d (jd_init is done here); the caller frees it with jd_free. */
AP_HIDDEN void plan_doc(jd *d, const plan_doc_in *in);
/* The text explanation of an autopar-search document; NULL when out of memory. The caller frees it. */
AP_HIDDEN char *plan_doc_text(const json_t *doc);

#endif
