/* The compare-search document's text (report layer; ap_compare_search in compare_search.c builds the document,
 * docs/json.md "autopar-compare-search/1"; ap_render renders one handed back). Internal header. */
#ifndef AP_REPORT_COMPARE_SEARCH_H
#define AP_REPORT_COMPARE_SEARCH_H

#include "core/jdoc.h"

/* The text `autopar compare-search` prints, from its document; NULL when out of memory. Frees with free. */
AP_HIDDEN char *compare_search_text(const json_t *doc);

#endif
