/* Memory guidance for the stochastic searches (search layer; mem_guide.h). The terms are the reduced
 * problem's (problem_reduce.c: per program point, per group, its members' summed memory per strategy), so a
 * bound here is exactly what sp_eval will count once every group is decided. */
#include <string.h>

#include "search/solve/mem_guide.h"

bool mg_init(mem_guide *m, arena *a, const sp_problem *p, int32_t *const *allowed, const int32_t *n_allowed) {
  memset(m, 0, sizeof *m);
  m->p = p;
  m->active = p->mem_active && p->n_points > 0;
  if (!m->active) return true;
  int32_t G = p->n_groups, T = p->n_points, n_terms = 0;
  for (int32_t t = 0; t < T; t++) n_terms += p->mem[t].n_terms;
  m->term_start = arena_alloc(a, (size_t)(G + 1) * sizeof *m->term_start);
  m->terms = arena_alloc(a, (size_t)(n_terms > 0 ? n_terms : 1) * sizeof *m->terms);
  m->used = arena_alloc(a, (size_t)T * sizeof *m->used);
  m->rest = arena_alloc(a, (size_t)T * sizeof *m->rest);
  m->rest_full = arena_alloc(a, (size_t)T * sizeof *m->rest_full);
  if (!m->term_start || !m->terms || !m->used || !m->rest || !m->rest_full) return false;
  /* Count per group, then place (CSR). */
  memset(m->term_start, 0, (size_t)(G + 1) * sizeof *m->term_start);
  for (int32_t t = 0; t < T; t++)
    for (int32_t i = 0; i < p->mem[t].n_terms; i++) m->term_start[p->mem[t].terms[i].g + 1]++;
  for (int32_t g = 0; g < G; g++) m->term_start[g + 1] += m->term_start[g];
  int32_t *fill = arena_alloc(a, (size_t)(G > 0 ? G : 1) * sizeof *fill);
  if (!fill) return false;
  memcpy(fill, m->term_start, (size_t)G * sizeof *fill);
  for (int32_t t = 0; t < T; t++) {
    m->rest_full[t] = 0;
    for (int32_t i = 0; i < p->mem[t].n_terms; i++) {
      const sp_memterm *x = &p->mem[t].terms[i];
      double mn = n_allowed[x->g] > 0 ? INFINITY : 0;
      for (int32_t j = 0; j < n_allowed[x->g]; j++) mn = fmin(mn, x->mem_bytes[allowed[x->g][j]]);
      m->terms[fill[x->g]++] = (mg_term){t, x->mem_bytes, mn};
      m->rest_full[t] += mn;
    }
  }
  /* The price that makes a group's memory spread weigh like its cost spread, summed over the groups. */
  double cost_spread = 0, mem_spread = 0;
  for (int32_t g = 0; g < G; g++) {
    if (n_allowed[g] < 2) continue;
    cost_spread += p->unary[g][allowed[g][n_allowed[g] - 1]] - p->unary[g][allowed[g][0]];
    for (int32_t i = m->term_start[g]; i < m->term_start[g + 1]; i++) {
      double mx = 0;
      for (int32_t j = 0; j < n_allowed[g]; j++) mx = fmax(mx, m->terms[i].mem_bytes[allowed[g][j]]);
      mem_spread += mx - m->terms[i].min_bytes;
    }
  }
  m->unit_price = mem_spread > 0 ? cost_spread / mem_spread : 0;
  mg_reset(m);
  return true;
}

void mg_reset(mem_guide *m) {
  if (!m->active) return;
  size_t T = (size_t)m->p->n_points;
  memset(m->used, 0, T * sizeof *m->used);
  memcpy(m->rest, m->rest_full, T * sizeof *m->rest);
}

void mg_set(mem_guide *m, int32_t g, int32_t k) {
  if (!m->active) return;
  for (int32_t i = m->term_start[g]; i < m->term_start[g + 1]; i++) {
    const mg_term *x = &m->terms[i];
    m->used[x->point] += x->mem_bytes[k];
    m->rest[x->point] -= x->min_bytes;
  }
}

double mg_excess_bytes(const mem_guide *m, int32_t g, int32_t k) {
  if (!m->active) return -INFINITY;
  const sp_problem *p = m->p;
  double peak = 0;
  int32_t i = m->term_start[g], end = m->term_start[g + 1];
  /* Terms are placed in point order, so one pass over the points meets g's terms in order. */
  for (int32_t t = 0; t < p->n_points; t++) {
    double x = m->used[t] + m->rest[t];
    if (i < end && m->terms[i].point == t) {
      x += m->terms[i].mem_bytes[k] - m->terms[i].min_bytes;
      i++;
    }
    if (x > peak) peak = x;
  }
  return peak - p->budget_bytes;
}

double mg_extra_cost(const mem_guide *m, int32_t g, int32_t k) {
  if (!m->active) return 0;
  double priced = 0;
  if (m->price > 0)
    for (int32_t i = m->term_start[g]; i < m->term_start[g + 1]; i++)
      priced += m->price * (m->terms[i].mem_bytes[k] - m->terms[i].min_bytes);
  double over = mg_excess_bytes(m, g, k);
  if (over <= 0) return priced;
  if (!m->p->has_penalty) return INFINITY;
  /* Only the excess beyond the bound's present one is g's doing: the bound with g at its leanest. */
  double now = 0;
  for (int32_t t = 0; t < m->p->n_points; t++) now = fmax(now, m->used[t] + m->rest[t]);
  double base = now - m->p->budget_bytes;
  return priced + m->p->penalty_per_byte * (over - (base > 0 ? base : 0));
}

int32_t mg_peak_point(const mem_guide *m, const int32_t *choice, double *peak_bytes) {
  *peak_bytes = 0;
  if (!m->active) return -1;
  const sp_problem *p = m->p;
  int32_t best = -1;
  for (int32_t t = 0; t < p->n_points; t++) {
    double x = 0;
    for (int32_t i = 0; i < p->mem[t].n_terms; i++) x += p->mem[t].terms[i].mem_bytes[choice[p->mem[t].terms[i].g]];
    if (best < 0 || x > *peak_bytes) best = t, *peak_bytes = x;
  }
  return best;
}

double mg_mem_at(const mem_guide *m, int32_t g, int32_t k, int32_t t) {
  if (!m->active) return 0;
  for (int32_t i = m->term_start[g]; i < m->term_start[g + 1]; i++)
    if (m->terms[i].point == t) return m->terms[i].mem_bytes[k];
  return 0;
}
