/* The strategy registry (search layer): one row per search strategy, in the order the driver runs them. A
 * strategy is a file under src/search/ that defines one `const search_strategy` (search.h); adding one is
 * writing that file and adding its row here, touching no other strategy. DESIGN.md "Search". */
#include <string.h>

#include "search/recipe/search.h"

extern const search_strategy search_grid;     /* grid.c: every factorisation and knob, pruned by bounds */
extern const search_strategy search_hetero;   /* hetero.c: stages on node groups of different devices */
extern const search_strategy search_stage_dp; /* stage_dp.c: the optimal split of the layers into stages */
extern const search_strategy search_layer_dp; /* layer_dp.c: full recompute per chunk under the memory limit */

/* Grid first, so that its plans set the cutoff that the finer strategies (stage DP, layer DP, hetero) prune
 * against and the bases they refine. */
static const search_strategy *const registry[] = {
    &search_grid,
    &search_hetero,
    &search_stage_dp,
    &search_layer_dp,
};
_Static_assert(AP_COUNT(registry) <= SEARCH_MAX_STRATEGIES, "strategy bits are an unsigned");

const search_strategy *const *search_strategies(size_t *n_out) {
  *n_out = AP_COUNT(registry);
  return registry;
}

int search_strategy_find(const char *name) {
  for (size_t i = 0; i < AP_COUNT(registry); i++)
    if (name && strcmp(registry[i]->name, name) == 0) return (int)i;
  return -1;
}
