/* Readers of the two solver problem formats (search layer; formats in docs/solve.md, types in problem.h).
 * Strict: unknown keys, wrong types, wrong lengths, indices out of range, follower chains that loop or change
 * the strategy count, and duplicate nodes in a liveness set are each reported as one line naming the file
 * and the field ("p.json: nodes[3].compute[1]: must be a number in [0, 1e18] or null"). Sizes are taken from the
 * arrays themselves and checked against each other, so that no allocation exceeds what the file spells out.
 * The reduction of a sharding problem to groups lives in problem_reduce.c. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "search/solve/problem.h"

/* TUNING: caps that keep a hostile file from asking for tables larger than any real instance; Alpa's largest
 * published graphs have tens of thousands of nodes and tens of strategies per node. */
enum { MAX_NODES = 1 << 22, MAX_STRATEGIES = 1 << 16, MAX_LAYERS = 1024, MAX_DEVICES = 1 << 16 };

AP_HIDDEN ap_status sp_reduce(ap_ctx *ctx, sp_problem *p);

/* Fails with "file: where: message" (where is a full field path such as nodes[3].compute[1]). */
static ap_status bad(ap_ctx *ctx, const char *file, const char *where, const char *msg) {
  return ctx_fail(ctx, AP_INVALID, "%s: %s: %s", file, where, msg);
}

/* Rejects any key of obj not in the NULL-terminated list, in core's one wording (jx_unknown_key: "unknown
 * field (did you mean …?); fields here: …"), the key named by its full path (nodes[3].folow). */
static ap_status only_keys(ap_ctx *ctx, const char *file, const char *where, json_t *obj, const char *const *keys) {
  size_t n = 0;
  while (keys[n]) n++;
  char key[128], msg[512];
  if (!jx_unknown_key(obj, keys, n, 0, key, sizeof key, msg, sizeof msg)) return AP_OK;
  char w[256];
  snprintf(w, sizeof w, "%s%s%s", where, *where ? "." : "", key);
  return bad(ctx, file, w, msg);
}

/* The array at obj[key] (where names obj); *n_out its length. Required unless optional, then NULL. */
static ap_status get_array(ap_ctx *ctx, const char *file, const char *where, json_t *obj, const char *key,
                           bool required, json_t **out, size_t *n_out) {
  char w[256];
  snprintf(w, sizeof w, "%s%s%s", where, *where ? "." : "", key);
  json_t *v = json_object_get(obj, key);
  *out = NULL;
  *n_out = 0;
  if (!v) return required ? bad(ctx, file, w, "required field missing") : AP_OK;
  if (!json_is_array(v)) return bad(ctx, file, w, "must be an array");
  *out = v;
  *n_out = json_array_size(v);
  return AP_OK;
}

/* The largest cost, memory or budget a problem may state. TUNING: CLP asserts on objective coefficients of
 * 1e25 and more (ClpSimplex.cpp, "fabs(obj[i]) < 1.0e25"), and a penalty per byte times a byte count must stay
 * below that; 1e18 bytes is an exabyte and 1e18 cost units far beyond any iteration time, so the bounds refuse
 * only nonsense while keeping every product in a solver's range. */
#define PROBLEM_MAX_VALUE 1e18
#define PROBLEM_MAX_PENALTY 1e6

/* A cost or memory entry: a finite number in [0, PROBLEM_MAX_VALUE], or null (NAN). */
static ap_status num_or_null(ap_ctx *ctx, const char *file, const char *where, json_t *v, double *out) {
  if (json_is_null(v)) {
    *out = NAN;
    return AP_OK;
  }
  if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < 0 ||
      json_number_value(v) > PROBLEM_MAX_VALUE)
    return bad(ctx, file, where, "must be a number in [0, 1e18] or null");
  *out = json_number_value(v);
  return AP_OK;
}

/* An integer index in [0, n) at obj[key]. */
static ap_status get_index(ap_ctx *ctx, const char *file, const char *where, json_t *obj, const char *key,
                           int32_t n, const char *what, int32_t *out) {
  jx_src s = {ctx, file, where};
  int64_t x = 0;
  if (n <= 0) return jx_fail(&s, key, "there are no %s to refer to", what);
  ap_status st = jx_i64(&s, obj, key, true, 0, n - 1, &x, NULL);
  if (st) return st;
  *out = (int32_t)x;
  return AP_OK;
}

/* A vector of n_want entries (n_want < 0: any length >= 1, returned in *n) of numbers >= 0 or null. */
static ap_status get_vec(ap_ctx *ctx, arena *a, const char *file, const char *where, json_t *obj, const char *key,
                         int32_t n_want, double **out, int32_t *n) {
  json_t *arr;
  size_t len;
  ap_status st = get_array(ctx, file, where, obj, key, true, &arr, &len);
  if (st) return st;
  char w[256];
  snprintf(w, sizeof w, "%s.%s", where, key);
  if (n_want < 0 && (len < 1 || len > MAX_STRATEGIES)) return bad(ctx, file, w, "must list 1 to 65536 strategies");
  if (n_want >= 0 && len != (size_t)n_want) {
    char msg[128];
    snprintf(msg, sizeof msg, "must have %d entries (one per strategy), has %zu", n_want, len);
    return bad(ctx, file, w, msg);
  }
  double *x = arena_alloc(a, len * sizeof *x);
  if (!x) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", file);
  for (size_t k = 0; k < len; k++) {
    snprintf(w, sizeof w, "%s.%s[%zu]", where, key, k);
    if ((st = num_or_null(ctx, file, w, json_array_get(arr, k), &x[k]))) return st;
  }
  *out = x;
  *n = (int32_t)len;
  return AP_OK;
}

static ap_status read_nodes(ap_ctx *ctx, sp_problem *p, json_t *root) {
  static const char *const keys[] = {"name", "compute", "communication", "memory_bytes", "follow", NULL};
  json_t *arr;
  size_t n;
  ap_status st = get_array(ctx, p->file, "", root, "nodes", true, &arr, &n);
  if (st) return st;
  if (n < 1 || n > MAX_NODES) return bad(ctx, p->file, "nodes", "must list at least one node (and at most 4194304)");
  p->n_nodes = (int32_t)n;
  p->nodes = arena_alloc(p->a, n * sizeof *p->nodes);
  if (!p->nodes) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
  char w[64];
  for (size_t i = 0; i < n; i++) {
    json_t *o = json_array_get(arr, i);
    sp_node *nd = &p->nodes[i];
    snprintf(w, sizeof w, "nodes[%zu]", i);
    if (!json_is_object(o)) return bad(ctx, p->file, w, "must be an object");
    if ((st = only_keys(ctx, p->file, w, o, keys))) return st;
    double *comp = NULL, *comm = NULL;
    int32_t ns = 0;
    if ((st = get_vec(ctx, p->a, p->file, w, o, "compute", -1, &comp, &ns))) return st;
    if ((st = get_vec(ctx, p->a, p->file, w, o, "communication", ns, &comm, &ns))) return st;
    if ((st = get_vec(ctx, p->a, p->file, w, o, "memory_bytes", ns, &nd->mem_bytes, &ns))) return st;
    nd->n_strategies = ns;
    nd->cost = comp;
    for (int32_t k = 0; k < ns; k++) nd->cost[k] = comp[k] + comm[k]; /* NAN stays NAN */
    nd->follow = -1;
    if (json_object_get(o, "follow") && !json_is_null(json_object_get(o, "follow"))) {
      if ((st = get_index(ctx, p->file, w, o, "follow", p->n_nodes, "nodes", &nd->follow))) return st;
      if (nd->follow == (int32_t)i) return bad(ctx, p->file, w, "follow: a node cannot follow itself");
    }
  }
  /* Followers: same strategy count as the node followed, and no cycle (a chain longer than n loops). */
  for (int32_t i = 0; i < p->n_nodes; i++) {
    const sp_node *nd = &p->nodes[i];
    snprintf(w, sizeof w, "nodes[%d].follow", i);
    if (nd->follow >= 0 && p->nodes[nd->follow].n_strategies != nd->n_strategies) {
      char msg[160];
      snprintf(msg, sizeof msg, "node %d has %d strategies but the node it follows (%d) has %d", i,
               nd->n_strategies, nd->follow, p->nodes[nd->follow].n_strategies);
      return bad(ctx, p->file, w, msg);
    }
    int32_t at = i, steps = 0;
    while (p->nodes[at].follow >= 0 && steps <= p->n_nodes) {
      at = p->nodes[at].follow;
      steps++;
    }
    if (steps > p->n_nodes) return bad(ctx, p->file, w, "the chain of follows from this node is a cycle");
  }
  return AP_OK;
}

/* A matrix of rows x cols at obj[key]: numbers >= 0 or null (NAN), or (as_bits) integers 0/1. */
static ap_status get_matrix(ap_ctx *ctx, arena *a, const char *file, const char *where, json_t *obj,
                            const char *key, int32_t rows, int32_t cols, bool as_bits, double **num_out,
                            uint8_t **bits_out) {
  json_t *arr;
  size_t n;
  ap_status st = get_array(ctx, file, where, obj, key, true, &arr, &n);
  if (st) return st;
  char w[256], msg[160];
  snprintf(w, sizeof w, "%s.%s", where, key);
  if (n != (size_t)rows) {
    snprintf(msg, sizeof msg, "must have %d rows (the strategies of the first node), has %zu", rows, n);
    return bad(ctx, file, w, msg);
  }
  size_t total = (size_t)rows * (size_t)cols;
  double *num = as_bits ? NULL : arena_alloc(a, total * sizeof *num);
  uint8_t *bits = as_bits ? arena_alloc(a, total) : NULL;
  if (!num && !bits) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", file);
  for (int32_t r = 0; r < rows; r++) {
    json_t *row = json_array_get(arr, (size_t)r);
    snprintf(w, sizeof w, "%s.%s[%d]", where, key, r);
    if (!json_is_array(row) || json_array_size(row) != (size_t)cols) {
      snprintf(msg, sizeof msg, "must be an array of %d entries (the strategies of the second node)", cols);
      return bad(ctx, file, w, msg);
    }
    for (int32_t c = 0; c < cols; c++) {
      json_t *v = json_array_get(row, (size_t)c);
      snprintf(w, sizeof w, "%s.%s[%d][%d]", where, key, r, c);
      size_t at = (size_t)r * (size_t)cols + (size_t)c;
      if (as_bits) {
        if (!json_is_integer(v) || (json_integer_value(v) != 0 && json_integer_value(v) != 1))
          return bad(ctx, file, w, "must be 0 or 1");
        bits[at] = (uint8_t)json_integer_value(v);
      } else if ((st = num_or_null(ctx, file, w, v, &num[at]))) {
        return st;
      }
    }
  }
  if (num_out) *num_out = num;
  if (bits_out) *bits_out = bits;
  return AP_OK;
}

/* The two ends of an edge or an alias (keys[0] and keys[1] of an object that holds only keys): node indices that
 * differ. what names the pair in the message ("an edge"). */
static ap_status read_pair(ap_ctx *ctx, const sp_problem *p, const char *w, json_t *o, const char *const *keys,
                           const char *what, int32_t *x, int32_t *y) {
  if (!json_is_object(o)) return bad(ctx, p->file, w, "must be an object");
  ap_status st = only_keys(ctx, p->file, w, o, keys);
  if (!st) st = get_index(ctx, p->file, w, o, keys[0], p->n_nodes, "nodes", x);
  if (!st) st = get_index(ctx, p->file, w, o, keys[1], p->n_nodes, "nodes", y);
  if (!st && *x == *y) {
    char msg[64];
    snprintf(msg, sizeof msg, "%s must join two different nodes", what);
    return bad(ctx, p->file, w, msg);
  }
  return st;
}

static ap_status read_edges(ap_ctx *ctx, sp_problem *p, json_t *root) {
  static const char *const ekeys[] = {"from", "to", "cost", NULL}, *const akeys[] = {"a", "b", "forbidden", NULL};
  json_t *arr;
  size_t n;
  char w[64];
  ap_status st = get_array(ctx, p->file, "", root, "edges", false, &arr, &n);
  if (st) return st;
  p->n_edges = (int32_t)n;
  p->edges = arena_alloc(p->a, (n + 1) * sizeof *p->edges);
  if (!p->edges) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
  for (size_t e = 0; e < n; e++) {
    json_t *o = json_array_get(arr, e);
    sp_edge *ed = &p->edges[e];
    snprintf(w, sizeof w, "edges[%zu]", e);
    if ((st = read_pair(ctx, p, w, o, ekeys, "an edge", &ed->from, &ed->to))) return st;
    if ((st = get_matrix(ctx, p->a, p->file, w, o, "cost", p->nodes[ed->from].n_strategies,
                         p->nodes[ed->to].n_strategies, false, &ed->cost, NULL)))
      return st;
  }
  if ((st = get_array(ctx, p->file, "", root, "aliases", false, &arr, &n))) return st;
  p->n_aliases = (int32_t)n;
  p->aliases = arena_alloc(p->a, (n + 1) * sizeof *p->aliases);
  if (!p->aliases) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
  for (size_t e = 0; e < n; e++) {
    json_t *o = json_array_get(arr, e);
    sp_alias *al = &p->aliases[e];
    snprintf(w, sizeof w, "aliases[%zu]", e);
    if ((st = read_pair(ctx, p, w, o, akeys, "an alias", &al->a, &al->b))) return st;
    if ((st = get_matrix(ctx, p->a, p->file, w, o, "forbidden", p->nodes[al->a].n_strategies,
                         p->nodes[al->b].n_strategies, true, NULL, &al->forbidden)))
      return st;
  }
  return AP_OK;
}

static ap_status read_liveness(ap_ctx *ctx, sp_problem *p, json_t *root) {
  json_t *arr;
  size_t n;
  char w[96];
  ap_status st = get_array(ctx, p->file, "", root, "liveness", false, &arr, &n);
  if (st) return st;
  p->n_points = (int32_t)n;
  p->points = arena_alloc(p->a, (n + 1) * sizeof *p->points);
  uint32_t *seen = arena_alloc(p->a, (size_t)p->n_nodes * sizeof *seen); /* point index + 1 that saw it */
  if (!p->points || !seen) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
  for (size_t t = 0; t < n; t++) {
    json_t *set = json_array_get(arr, t);
    snprintf(w, sizeof w, "liveness[%zu]", t);
    if (!json_is_array(set)) return bad(ctx, p->file, w, "must be an array of node indices");
    sp_point *pt = &p->points[t];
    pt->n = (int32_t)json_array_size(set);
    pt->nodes = arena_alloc(p->a, ((size_t)pt->n + 1) * sizeof *pt->nodes);
    if (!pt->nodes) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
    for (int32_t k = 0; k < pt->n; k++) {
      json_t *v = json_array_get(set, (size_t)k);
      snprintf(w, sizeof w, "liveness[%zu][%d]", t, k);
      if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= p->n_nodes) {
        char msg[96];
        snprintf(msg, sizeof msg, "must be a node index in [0, %d)", p->n_nodes);
        return bad(ctx, p->file, w, msg);
      }
      int32_t i = (int32_t)json_integer_value(v);
      if (seen[i] == (uint32_t)t + 1) return bad(ctx, p->file, w, "lists a node already in this set");
      seen[i] = (uint32_t)t + 1;
      pt->nodes[k] = i;
    }
  }
  return AP_OK;
}

ap_status sp_from_json(ap_ctx *ctx, arena *a, const char *file, json_t *root, sp_problem *p) {
  static const char *const keys[] = {"format", "name", "nodes", "edges", "aliases", "liveness",
                                     "memory_budget_bytes", "overbudget_cost_per_byte", NULL};
  memset(p, 0, sizeof *p);
  p->a = a;
  p->file = file;
  jx_src s = {ctx, file, ""};
  if (!json_is_object(root)) return ctx_fail(ctx, AP_INVALID, "%s: a problem file must be a JSON object", file);
  const char *fmt = NULL;
  ap_status st = jx_str(&s, root, "format", true, &fmt, NULL);
  if (st) return st;
  if (strcmp(fmt, SP_FORMAT) != 0) return jx_fail(&s, "format", "expected \"%s\", got \"%s\"", SP_FORMAT, fmt);
  if ((st = only_keys(ctx, file, "", root, keys))) return st;
  if (json_object_get(root, "name") && !json_is_string(json_object_get(root, "name")))
    return jx_fail(&s, "name", "expected a string");
  if ((st = read_nodes(ctx, p, root)) || (st = read_edges(ctx, p, root)) || (st = read_liveness(ctx, p, root)))
    return st;
  if ((st = jx_f64(&s, root, "memory_budget_bytes", false, 0, PROBLEM_MAX_VALUE, &p->budget_bytes, &p->has_budget))) return st;
  if ((st = jx_f64(&s, root, "overbudget_cost_per_byte", false, 0, PROBLEM_MAX_PENALTY, &p->penalty_per_byte, &p->has_penalty)))
    return st;
  if (p->has_penalty && !p->has_budget)
    return jx_fail(&s, "overbudget_cost_per_byte", "needs memory_budget_bytes (the budget it penalises going over)");
  return sp_reduce(ctx, p);
}

/* ---- Stage problems ---- */

/* Checks that v (at path w, len chars long) is a 4-deep array of the sizes dims[d..3], before anything is
 * allocated for it. */
static ap_status check_shape(ap_ctx *ctx, const stp_problem *p, json_t *v, int d, const int32_t *dims, char *w,
                             size_t w_n, int len) {
  static const char *const what[4] = {"first layer i", "last layer j", "submesh", "config"};
  if (d == 4) return AP_OK;
  if (!json_is_array(v) || json_array_size(v) != (size_t)dims[d]) {
    char msg[128];
    snprintf(msg, sizeof msg, "must be an array of %d entries (one per %s)", dims[d], what[d]);
    return bad(ctx, p->file, w, msg);
  }
  for (int32_t k = 0; k < dims[d]; k++) {
    int l2 = len + snprintf(w + len, w_n - (size_t)len, "[%d]", k);
    ap_status st = check_shape(ctx, p, json_array_get(v, (size_t)k), d + 1, dims, w, w_n, l2);
    if (st) return st;
    w[len] = '\0';
  }
  return AP_OK;
}

/* The 4-deep array stage_cost_s or max_succ_stages into num or cnt (stp_at order), its shape checked first. */
static ap_status read_stage_table(ap_ctx *ctx, stp_problem *p, json_t *root, const char *key, bool ints,
                                  double **num_out, int32_t **cnt_out) {
  const int32_t dims[4] = {p->n_layers, p->n_layers, p->n_submeshes, p->n_configs};
  char w[128];
  int len = snprintf(w, sizeof w, "%s", key);
  json_t *top = json_object_get(root, key);
  if (!top) return bad(ctx, p->file, key, "required field missing");
  ap_status st = check_shape(ctx, p, top, 0, dims, w, sizeof w, len);
  if (st) return st;
  size_t total = (size_t)dims[0] * (size_t)dims[1] * (size_t)dims[2] * (size_t)dims[3];
  double *num = ints ? NULL : arena_alloc(p->a, total * sizeof *num);
  int32_t *cnt = ints ? arena_alloc(p->a, total * sizeof *cnt) : NULL;
  if (!num && !cnt) return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", p->file);
  for (int32_t i = 0; i < dims[0]; i++)
    for (int32_t j = 0; j < dims[1]; j++)
      for (int32_t m = 0; m < dims[2]; m++)
        for (int32_t c = 0; c < dims[3]; c++) {
          json_t *v = json_array_get(json_array_get(json_array_get(json_array_get(top, (size_t)i), (size_t)j),
                                                    (size_t)m), (size_t)c);
          size_t at = stp_at(p, i, j, m, c);
          snprintf(w, sizeof w, "%s[%d][%d][%d][%d]", key, i, j, m, c);
          if (ints) {
            if (json_is_null(v)) cnt[at] = -1;
            else if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= INT32_MAX)
              cnt[at] = (int32_t)json_integer_value(v);
            else return bad(ctx, p->file, w, "must be an integer >= 0 or null");
          } else {
            if ((st = num_or_null(ctx, p->file, w, v, &num[at]))) return st;
            if (j < i) num[at] = NAN; /* j < i: ignored */
          }
        }
  if (num_out) *num_out = num;
  if (cnt_out) *cnt_out = cnt;
  return AP_OK;
}

ap_status stp_from_json(ap_ctx *ctx, arena *a, const char *file, json_t *root, stp_problem *p) {
  static const char *const keys[] = {"format", "name", "n_layers", "n_devices", "n_micro_batches", "submeshes",
                                     "n_configs", "stage_cost_s", "max_succ_stages", NULL};
  memset(p, 0, sizeof *p);
  p->a = a;
  p->file = file;
  jx_src s = {ctx, file, ""};
  if (!json_is_object(root)) return ctx_fail(ctx, AP_INVALID, "%s: a problem file must be a JSON object", file);
  const char *fmt = NULL;
  ap_status st = jx_str(&s, root, "format", true, &fmt, NULL);
  if (st) return st;
  if (strcmp(fmt, STP_FORMAT) != 0) return jx_fail(&s, "format", "expected \"%s\", got \"%s\"", STP_FORMAT, fmt);
  if ((st = only_keys(ctx, file, "", root, keys))) return st;
  if (json_object_get(root, "name") && !json_is_string(json_object_get(root, "name")))
    return jx_fail(&s, "name", "expected a string");
  int64_t x[4] = {0};
  if ((st = jx_i64(&s, root, "n_layers", true, 1, MAX_LAYERS, &x[0], NULL)) ||
      (st = jx_i64(&s, root, "n_devices", true, 1, MAX_DEVICES, &x[1], NULL)) ||
      (st = jx_i64(&s, root, "n_micro_batches", true, 1, INT32_MAX, &x[2], NULL)) ||
      (st = jx_i64(&s, root, "n_configs", true, 1, 4096, &x[3], NULL)))
    return st;
  p->n_layers = (int32_t)x[0];
  p->n_devices = (int32_t)x[1];
  p->n_micro_batches = (int32_t)x[2];
  p->n_configs = (int32_t)x[3];
  json_t *arr;
  size_t n;
  if ((st = get_array(ctx, file, "", root, "submeshes", true, &arr, &n))) return st;
  if (n < 1 || n > 4096) return bad(ctx, file, "submeshes", "must list 1 to 4096 submeshes");
  p->n_submeshes = (int32_t)n;
  p->submesh_hosts = arena_alloc(a, n * sizeof(int32_t));
  p->submesh_devices_per_host = arena_alloc(a, n * sizeof(int32_t));
  p->submesh_size = arena_alloc(a, n * sizeof(int32_t));
  if (!p->submesh_hosts || !p->submesh_devices_per_host || !p->submesh_size)
    return ctx_fail(ctx, AP_NOMEM, "%s: out of memory", file);
  for (size_t m = 0; m < n; m++) {
    json_t *v = json_array_get(arr, m);
    char w[64];
    snprintf(w, sizeof w, "submeshes[%zu]", m);
    json_t *h = json_array_get(v, 0), *d = json_array_get(v, 1);
    /* Each factor is bounded before the product (issue 19, class 5: [2^32, 2^32] overflowed to a [0x0] mesh). */
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_integer(h) || !json_is_integer(d) ||
        json_integer_value(h) < 1 || json_integer_value(d) < 1 || json_integer_value(h) > MAX_DEVICES ||
        json_integer_value(d) > MAX_DEVICES || json_integer_value(h) * json_integer_value(d) > MAX_DEVICES)
      return bad(ctx, file, w, "must be [hosts, devices per host], two integers >= 1 (at most 65536 devices)");
    p->submesh_hosts[m] = (int32_t)json_integer_value(h);
    p->submesh_devices_per_host[m] = (int32_t)json_integer_value(d);
    p->submesh_size[m] = p->submesh_hosts[m] * p->submesh_devices_per_host[m];
  }
  if ((st = read_stage_table(ctx, p, root, "stage_cost_s", false, &p->cost, NULL))) return st;
  json_t *ms = json_object_get(root, "max_succ_stages");
  if (ms && !json_is_null(ms) && (st = read_stage_table(ctx, p, root, "max_succ_stages", true, NULL, &p->max_succ)))
    return st;
  return AP_OK;
}

const char *problem_format(ap_ctx *ctx, const char *file, json_t *root) {
  json_t *f = json_is_object(root) ? json_object_get(root, "format") : NULL;
  if (!json_is_string(f)) {
    ctx_fail(ctx, AP_INVALID, "%s: format: expected \"%s\" or \"%s\"", file, SP_FORMAT, STP_FORMAT);
    return NULL;
  }
  const char *s = json_string_value(f);
  if (strcmp(s, SP_FORMAT) == 0) return SP_FORMAT;
  if (strcmp(s, STP_FORMAT) == 0) return STP_FORMAT;
  ctx_fail(ctx, AP_INVALID, "%s: format: expected \"%s\" or \"%s\", got \"%s\"", file, SP_FORMAT, STP_FORMAT, s);
  return NULL;
}
