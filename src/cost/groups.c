/* The rank lists of a plan's parallel groups and their place on the cluster (cost layer; groups.h has the
 * numbering and its sources). The search asks for thousands of plans' groups, so the work is bounded: a shape is
 * derived once per (order, degrees) key (env.c memoises it), and a geometry walks only the ranks below the first
 * point of the mixed radix that is a multiple of every domain size (the lower block), which holds every pattern
 * of the whole mesh when domains are aligned blocks: a domain of a size dividing the block lies inside one block,
 * and the blocks differ only by the upper digits, each block holding the same picture. */
#include "cost/groups.h"

#include <string.h>

/* ---- Shapes ---- */

/* Appends an axis, leaving out degree 1 and merging a neighbour of the same kind (never two pipeline axes). */
static void shape_push(rank_shape *s, int64_t degree, rank_axis_kind kind) {
  if (degree <= 1) return;
  if (s->n_axes > 0 && s->kind[s->n_axes - 1] == kind && kind != RANK_AXIS_PIPE) {
    s->degree[s->n_axes - 1] *= degree;
    return;
  }
  s->degree[s->n_axes] = degree;
  s->kind[s->n_axes] = (uint8_t)kind;
  s->n_axes++;
}

static bool order_ok(const plan *p) {
  unsigned seen = 0;
  for (int i = 0; i < PLAN_N_ORDER; i++) {
    if ((unsigned)p->order[i] >= PLAN_N_ORDER) return false;
    seen |= 1u << p->order[i];
  }
  return seen == (1u << PLAN_N_ORDER) - 1;
}

bool rank_shape_of_axes(const plan *p, unsigned axes, rank_shape *out) {
  memset(out, 0, sizeof *out);
  if (!order_ok(p) || (axes & ~((1u << PLAN_AXIS_COUNT_) - 1))) return false;
  bool expert = false, dense = false;
  unsigned tokens = 0;
  for (int a = 0; a < PLAN_AXIS_COUNT_; a++) {
    if (!(axes & (1u << a))) continue;
    if (plan_axis_is_expert((plan_axis)a)) expert = true;
    else if (a != PLAN_AXIS_PP) dense = true;
    tokens |= 1u << plan_axis_token((plan_axis)a);
  }
  if (expert && dense) return false;
  for (int i = 0; i < PLAN_N_ORDER; i++) {
    plan_axis t = p->order[i];
    shape_push(out, plan_mesh_degree(p, expert, t), (tokens & (1u << t)) ? RANK_AXIS_MEMBER : RANK_AXIS_OTHER);
  }
  return true;
}

void rank_shape_of_pipe(const plan *p, rank_shape *out) {
  memset(out, 0, sizeof *out);
  if (!order_ok(p)) return;
  for (int i = 0; i < PLAN_N_ORDER; i++) {
    plan_axis t = p->order[i];
    shape_push(out, plan_mesh_degree(p, false, t), t == PLAN_AXIS_PP ? RANK_AXIS_PIPE : RANK_AXIS_OTHER);
  }
}

int64_t rank_shape_devices(const rank_shape *s) {
  int64_t n = 1;
  for (int i = 0; i < s->n_axes; i++) n = n <= INT64_MAX / s->degree[i] ? n * s->degree[i] : INT64_MAX;
  return n;
}

/* ---- The lower block ---- */

/* The period of the cluster's domains: the least common multiple of the node size and every inner level's
 * domain size, when every node group has the same ones and starts at a multiple of it (then every such domain is
 * an aligned block of its size counted from rank 0); 0 when not, or past the cluster. */
static int64_t domain_period(const hw_cluster *c) {
  const hw_node_group *g0 = &c->groups[0];
  int64_t lam = g0->devices_per_node;
  for (int l = 0; l + 1 < c->n_levels; l++) {
    int64_t d = g0->levels[l].domain_devices;
    if (d < 1) return 0;
    lam = lam / ap_gcd_i64(lam, d) * d;
    if (lam > c->n_devices) return 0;
  }
  for (int gi = 0; gi < c->n_groups; gi++) {
    const hw_node_group *g = &c->groups[gi];
    if (g->devices_per_node != g0->devices_per_node || g->first_rank % lam != 0) return 0;
    for (int l = 0; l + 1 < c->n_levels; l++)
      if (g->levels[l].domain_devices != g0->levels[l].domain_devices) return 0;
  }
  return lam;
}

/* The shape cut at the lower block: axes below `split` whole, axis `split` with degree *f (a divisor of its own
 * degree), the rest left out. Returns split, or s->n_axes (and *f = 1) when no prefix of the mixed radix is a
 * multiple of the period (or there is none): then the whole mesh is walked. */
static int lower_block(const rank_shape *s, int64_t period, int64_t *f) {
  *f = 1;
  if (period <= 0) return s->n_axes;
  int64_t below = 1;
  for (int i = 0; i < s->n_axes; i++) {
    int64_t need = period / ap_gcd_i64(below, period), d = s->degree[i];
    for (int64_t k = need; k <= d; k += need)
      if (d % k == 0) {
        *f = k;
        return i;
      }
    below *= d;
  }
  return s->n_axes;
}

/* ---- Walking rank lists ---- */

/* How ranks map to domains while walking: aligned blocks (sizes from the first node group) or the cluster's own
 * domains. Level -1 is the node. */
typedef struct {
  const hw_cluster *c;
  bool aligned;
  int n_inner; /* link levels below the outermost */
  int64_t size[HW_MAX_LEVELS + 1];
} domains;

static domains domains_of(const hw_cluster *c, bool aligned) {
  domains d = {.c = c, .aligned = aligned, .n_inner = c->n_levels - 1};
  d.size[0] = c->groups[0].devices_per_node;
  for (int l = 0; l < d.n_inner; l++) d.size[l + 1] = c->groups[0].levels[l].domain_devices;
  return d;
}

/* An id of the domain holding rank at slot k (0: the node, k: inner level k-1). */
static int64_t domain_id(const domains *d, int k, int64_t rank) {
  return d->aligned ? rank / d->size[k] : hw_cluster_domain_first(d->c, k - 1, rank);
}

/* The rank with the given digits of the axes of `kind`, index taken as a mixed-radix number over them. */
static int64_t rank_of(const rank_shape *s, int n_axes, const int64_t *stride, int64_t index, rank_axis_kind kind) {
  int64_t r = 0;
  for (int i = 0; i < n_axes; i++) {
    if (s->kind[i] != kind) continue;
    r += index % s->degree[i] * stride[i];
    index /= s->degree[i];
  }
  return r;
}

ap_status group_geom_of(ap_ctx *ctx, const hw_cluster *c, const rank_shape *s, group_geom *out) {
  memset(out, 0, sizeof *out);
  if (!c || rank_shape_devices(s) != c->n_devices)
    return ctx_fail(ctx, AP_INVALID, "groups: the mesh numbers %lld devices, the cluster has %lld",
                    (long long)rank_shape_devices(s), c ? (long long)c->n_devices : 0LL);
  int64_t period = domain_period(c), f = 1;
  int split = lower_block(s, period, &f);
  domains d = domains_of(c, split < s->n_axes);
  /* The walked shape: the lower block, or all of it. */
  rank_shape w = *s;
  int64_t upper_members = 1;
  if (split < s->n_axes) {
    for (int i = split; i < s->n_axes; i++) {
      int64_t kept = i == split ? f : 1;
      if (s->kind[i] == RANK_AXIS_MEMBER) upper_members *= s->degree[i] / kept;
      w.degree[i] = kept;
    }
  }
  int64_t stride[RANK_SHAPE_MAX_AXES], n_members = 1, n_walked = 1;
  for (int i = 0; i < w.n_axes; i++) {
    stride[i] = n_walked;
    n_walked *= w.degree[i];
    if (w.kind[i] == RANK_AXIS_MEMBER) n_members *= w.degree[i];
  }
  int64_t best[HW_MAX_LEVELS + 1] = {0}, nodes = 0;
  for (int64_t gi = 0; gi < n_walked / n_members; gi++) {
    int64_t base = rank_of(&w, w.n_axes, stride, gi, RANK_AXIS_OTHER);
    int64_t prev[HW_MAX_LEVELS + 1], run[HW_MAX_LEVELS + 1] = {0}, n_nodes = 0;
    for (int k = 0; k <= d.n_inner; k++) prev[k] = -1;
    /* Members come in increasing rank order, so the members inside one domain come one after another. */
    for (int64_t mi = 0; mi < n_members; mi++) {
      int64_t r = base + rank_of(&w, w.n_axes, stride, mi, RANK_AXIS_MEMBER);
      for (int k = 0; k <= d.n_inner; k++) {
        int64_t id = domain_id(&d, k, r);
        if (id != prev[k]) {
          prev[k] = id;
          run[k] = 0;
          if (k == 0) n_nodes++;
        }
        if (++run[k] > best[k]) best[k] = run[k];
      }
    }
    if (n_nodes > nodes) nodes = n_nodes;
  }
  out->n_ranks = n_members * upper_members;
  out->per_node = best[0];
  out->nodes = nodes * upper_members; /* each upper digit's members lie in blocks of their own */
  for (int l = 0; l < d.n_inner; l++) out->per_level[l] = best[l + 1];
  out->per_level[c->n_levels - 1] = out->n_ranks;
  return AP_OK;
}

/* The innermost link level whose domain holds both a and b. */
static uint8_t shared_level(const domains *d, int64_t a, int64_t b) {
  for (int l = 0; l < d->n_inner; l++)
    if (domain_id(d, l + 1, a) == domain_id(d, l + 1, b)) return (uint8_t)l;
  return (uint8_t)d->n_inner;
}

ap_status pipe_hops_of(ap_ctx *ctx, const hw_cluster *c, const rank_shape *s, uint8_t *level) {
  if (!c || rank_shape_devices(s) != c->n_devices)
    return ctx_fail(ctx, AP_INVALID, "groups: the mesh numbers %lld devices, the cluster has %lld",
                    (long long)rank_shape_devices(s), c ? (long long)c->n_devices : 0LL);
  int k = -1;
  for (int i = 0; i < s->n_axes; i++)
    if (s->kind[i] == RANK_AXIS_PIPE) k = i;
  if (k < 0) return ctx_fail(ctx, AP_INVALID, "groups: the mesh has no pipeline axis");
  int64_t pp = s->degree[k], period = domain_period(c), f = 1;
  int split = lower_block(s, period, &f);
  domains d = domains_of(c, split < s->n_axes);
  uint8_t top = (uint8_t)(c->n_levels - 1);
  /* Pipeline digits kept in the walked block: all of them below the split, f at it, none above (every hop of
   * those crosses from one block to another, so every inner level). */
  int64_t kept = split > k ? pp : split == k ? f : 1;
  for (int64_t h = 0; h < pp; h++) level[h] = top;
  if (kept <= 1) return AP_OK;
  int n_walk = split < s->n_axes ? split + 1 : s->n_axes;
  int64_t stride[RANK_SHAPE_MAX_AXES], n_walked = 1;
  for (int i = 0; i < n_walk; i++) {
    stride[i] = n_walked;
    n_walked *= i == split ? f : s->degree[i];
  }
  /* Walked hops: h to h+1 inside the kept digits, and the wrap back when all pp digits are kept. */
  uint8_t walked[PLAN_MAX_CHUNKS];
  memset(walked, 0, sizeof walked);
  if (kept > PLAN_MAX_CHUNKS) kept = PLAN_MAX_CHUNKS;
  for (int64_t r = 0; r < n_walked; r++) {
    int64_t h = r / stride[k] % kept;
    int64_t partner = h + 1 < kept ? r + stride[k] : r - (kept - 1) * stride[k];
    if (h + 1 >= kept && kept < pp) continue; /* the last kept digit's hop leaves the block */
    uint8_t l = shared_level(&d, r, partner);
    if (l > walked[h]) walked[h] = l;
  }
  for (int64_t h = 0; h < pp; h++) {
    int64_t lo = h % kept;
    bool inside = kept == pp || (lo + 1 < kept && h + 1 < pp);
    level[h] = inside ? walked[lo] : top;
  }
  return AP_OK;
}
