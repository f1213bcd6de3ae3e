/* The finishing local descent of the stochastic searches (search layer; descent.h). */
#include "search/solve/descent.h"

void solve_descend(const sp_problem *p, int32_t *const *allowed, const int32_t *n_allowed, int32_t *choice,
                   sp_score *s, solve_budget *b) {
  bool improved = true;
  while (improved && !b->out) {
    improved = false;
    for (int32_t g = 0; g < p->n_groups && !b->out; g++) {
      int32_t keep = choice[g];
      for (int32_t i = 0; i < n_allowed[g] && !b->out; i++) {
        int32_t k = allowed[g][i];
        if (k == keep) continue;
        choice[g] = k;
        sp_score t = sp_eval(p, choice);
        solve_budget_spend(b);
        if (sp_better(t, *s)) {
          *s = t;
          keep = k;
          improved = true;
        }
      }
      choice[g] = keep;
    }
  }
}

void solve_budget_reserve(solve_budget *b, solve_reserve *r) {
  r->max_evals = b->max_evals;
  r->limit_s = b->limit_s;
  if (b->max_evals > 0) b->max_evals -= b->max_evals / 10;
  if (b->limit_s > 0) b->limit_s *= 0.9;
}

void solve_budget_release(solve_budget *b, const solve_reserve *r) {
  bool by_evals = b->max_evals > 0 && b->n_evals >= b->max_evals;
  bool by_clock = b->limit_s > 0 && solve_clock_s() - b->t0_s >= b->limit_s;
  bool stopped = b->out && !by_evals && !by_clock; /* the progress callback said stop */
  b->max_evals = r->max_evals;
  b->limit_s = r->limit_s;
  b->out = stopped || (b->max_evals > 0 && b->n_evals >= b->max_evals) ||
           (b->limit_s > 0 && solve_clock_s() - b->t0_s >= b->limit_s);
}
