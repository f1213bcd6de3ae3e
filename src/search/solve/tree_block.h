/* Tree-block moves for the stochastic searches on sharding problems (search layer; mcmc.c uses it): a random
 * set of groups whose pairs form a forest (an induced forest of the problem's group graph) set all at once to
 * their exact best given the other groups, by min-sum dynamic programming on the forest. The blocks are those
 * of the tree sampler of Hamze & de Freitas ("From Fields to Trees", UAI 2004), which draws such a block from
 * its exact conditional by sum-product message passing; this takes the zero-temperature limit (max-product),
 * because at FlexFlow's temperature (1.2 per ms) a block of tens of groups drawn from its conditional is
 * usually worse than where the chain stands (many slightly worse states outnumber the best; measured on the
 * shipped ONNX models, bench/search.txt), while its exact best is never worse. A block move changes many
 * coupled groups together (a layer moving its batch split from one mesh axis to the other), which single-group
 * moves reach only through states of higher cost. The block's cost counts its groups' own costs and every
 * pair that touches them, not memory terms: the caller scores the result. Everything lives in the caller's
 * arena. */
#ifndef AP_SEARCH_TREE_BLOCK_H
#define AP_SEARCH_TREE_BLOCK_H

#include "search/solve/solve.h"

typedef struct {
  const sp_problem *p;
  int32_t *const *allowed;
  const int32_t *n_allowed;
  int32_t n_block;
  int32_t *order;   /* the block's groups, parents before children */
  int32_t *parent;  /* per group: its parent in the block's forest, -1 for a root */
  int32_t *up_pair; /* per group: the pair to its parent */
  uint32_t *mark;   /* per group: == stamp when in the block */
  uint32_t stamp;
  int32_t *uf;      /* union-find over groups, for building the forest */
  int32_t *perm;    /* scratch: a random order of the groups */
  int32_t *queue;
  double **cost;    /* per group, per allowed index: own terms + the children's messages (least subtree cost) */
  double *msg;      /* scratch, the largest strategy count */
  int32_t *best;    /* per group of the block: its strategy in the block's best */
} tblock;

/* Builds the scratch; false when out of memory. allowed/n_allowed are solve_allowed_lists'. */
AP_HIDDEN bool tblock_init(tblock *t, arena *a, const sp_problem *p, int32_t *const *allowed, const int32_t *n_allowed);
/* Picks a random maximal induced forest of the groups with two or more allowed strategies (groups taken in a
 * random order, each kept when its neighbours already kept lie in distinct trees) and finds the block's best
 * strategies given choice for the others: t->order[0 .. t->n_block) are the groups, t->best[g] the strategy of
 * group g of the block (its strategy in choice on a tie, and where every completion is forbidden). */
AP_HIDDEN void tblock_best(tblock *t, const int32_t *choice, rng *rg);

#endif
