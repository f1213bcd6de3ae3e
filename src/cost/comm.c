/* Alpha-beta costs of collectives on hierarchical links (cost layer). The textbook forms are those of Thakur,
 * Rabenseifner & Gropp, "Optimization of Collective Communication Operations in MPICH", IJHPCA 19(1), 2005,
 * and Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations", JPDC 69(2),
 * 2009 (COSTMODEL.md §4.1); the tree and the multi-level forms follow NCCL's own performance model
 * (NVIDIA/nccl src/graph/tuning.cc, COSTMODEL.md §4.3). Notation, used in every comment below:
 *
 *   n        ranks in the group; S the bytes of comm_coll's definition;
 *   level i  the levels the group crosses, innermost first; m_i the group's members in one domain of level i
 *            (m_top = n), m_{i-1} those in one domain inside it (m_{-1} = 1), f_i = m_i / m_{i-1} the parts
 *            that level i joins;
 *   a_i      the level's latency per message step; b_i its bandwidth per member and direction times the
 *            bus efficiency of its link class (comm_tuning).
 *
 * On a single level (f = n, m_{-1} = 1) every formula reduces to the textbook one; tests/test_comm.c checks
 * that exactly. The model of NIC sharing is in comm_group_from_cluster. */
#include "cost/comm.h"

#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

/* ---- Names --------------------------------------------------------------------------------------------- */

static const char *const coll_names[] = {
    [COMM_ALLREDUCE] = "allreduce", [COMM_REDUCE_SCATTER] = "reduce_scatter", [COMM_ALLGATHER] = "allgather",
    [COMM_ALLTOALL] = "alltoall",   [COMM_SENDRECV] = "sendrecv",             [COMM_BROADCAST] = "broadcast",
};
_Static_assert(AP_COUNT(coll_names) == COMM_COLL_COUNT, "collective name table and comm_coll disagree");

static const char *const algo_names[] = {
    [COMM_RING] = "ring", [COMM_TREE] = "tree", [COMM_HIERARCHICAL] = "hierarchical", [COMM_AUTO] = "auto"};
_Static_assert(AP_COUNT(algo_names) == COMM_ALGO_COUNT, "algorithm name table and comm_algo disagree");

static const char *const link_names[] = {
    [COMM_LINK_SCALE_UP] = "scale_up", [COMM_LINK_PCIE] = "pcie", [COMM_LINK_NETWORK] = "network"};
_Static_assert(AP_COUNT(link_names) == COMM_LINK_COUNT, "link class name table and comm_link_class disagree");

/* Which algorithm runs which collective. NCCL's tree is an all-reduce algorithm only; send/recv has no
 * algorithm, so every choice gives the direct transfer. */
static const bool applies[COMM_COLL_COUNT][COMM_ALGO_COUNT] = {
    [COMM_ALLREDUCE] = {[COMM_RING] = true, [COMM_TREE] = true, [COMM_HIERARCHICAL] = true, [COMM_AUTO] = true},
    [COMM_REDUCE_SCATTER] = {[COMM_RING] = true, [COMM_HIERARCHICAL] = true, [COMM_AUTO] = true},
    [COMM_ALLGATHER] = {[COMM_RING] = true, [COMM_HIERARCHICAL] = true, [COMM_AUTO] = true},
    [COMM_ALLTOALL] = {[COMM_RING] = true, [COMM_HIERARCHICAL] = true, [COMM_AUTO] = true},
    [COMM_SENDRECV] = {[COMM_RING] = true, [COMM_TREE] = true, [COMM_HIERARCHICAL] = true, [COMM_AUTO] = true},
    [COMM_BROADCAST] = {[COMM_RING] = true, [COMM_HIERARCHICAL] = true, [COMM_AUTO] = true},
};

const char *comm_coll_name(comm_coll coll) {
  return (unsigned)coll < COMM_COLL_COUNT ? coll_names[coll] : "?";
}
const char *comm_algo_name(comm_algo algo) {
  return (unsigned)algo < COMM_ALGO_COUNT ? algo_names[algo] : "?";
}
const char *comm_link_class_name(comm_link_class link) {
  return (unsigned)link < COMM_LINK_COUNT ? link_names[link] : "?";
}

bool comm_coll_from_name(const char *name, comm_coll *out) {
  for (int i = 0; name && i < COMM_COLL_COUNT; i++)
    if (strcasecmp(name, coll_names[i]) == 0) return *out = (comm_coll)i, true;
  return false;
}

bool comm_algo_from_name(const char *name, comm_algo *out) {
  for (int i = 0; name && i < COMM_ALGO_COUNT; i++)
    if (strcasecmp(name, algo_names[i]) == 0) return *out = (comm_algo)i, true;
  return false;
}

bool comm_algo_applies(comm_coll coll, comm_algo algo) {
  return (unsigned)coll < COMM_COLL_COUNT && (unsigned)algo < COMM_ALGO_COUNT && applies[coll][algo];
}

/* ---- Tunable constants: their table and defaults are in tuning.c ----------------------------------- */

comm_tuning comm_tuning_ideal(void) {
  comm_tuning t;
  memset(&t, 0, sizeof t);
  for (int i = 0; i < COMM_LINK_COUNT; i++) t.bus_eff[i] = 1;
  t.tree_bw_factor = 1;
  t.call_latency_s = 0;
  return t;
}

/* ---- Building groups ---------------------------------------------------------------------------------- */

comm_group comm_group_flat(int64_t n_ranks, double bw_Bps, double latency_s, comm_link_class link) {
  comm_group g;
  memset(&g, 0, sizeof g);
  g.n_ranks = n_ranks;
  g.nic_share = 1;
  if (n_ranks <= 1) return g;
  g.n_levels = 1;
  g.levels[0] = (comm_level){.hw_level = -1, .name = comm_link_class_name(link), .link = link,
                             .members = n_ranks, .bw_Bps = bw_Bps, .latency_s = latency_s};
  return g;
}

static comm_link_class classify(const hw_cluster *c, int level, const char *name) {
  if (level >= c->n_levels - 1) return COMM_LINK_NETWORK;
  if (name && (strstr(name, "pci") || strstr(name, "PCI"))) return COMM_LINK_PCIE;
  return COMM_LINK_SCALE_UP;
}

/* The factor on the network bandwidth per device for NIC sharing. The hw layer's figure for the network
 * level is the node's NIC bandwidth divided by its devices (hw.h, hw_link_level.bw_Bps): right when every
 * device of the node sends at once, each in one collective. With u senders per node instead, each gets
 * devices_per_node / u of that figure (u > devices_per_node when collectives overlap, as a data-parallel
 * reduce under a pipeline transfer), but never more than the NIC it sits behind gives: max(1,
 * devices_per_nic) times the figure. The worst node group is taken. */
static double nic_share(const hw_cluster *c, int64_t users) {
  if (users <= 0) return 1;
  double share = INFINITY;
  for (int i = 0; i < c->n_groups; i++) {
    const hw_node_group *ng = &c->groups[i];
    double per_nic = ng->levels[ng->n_levels - 1].devices_per_nic;
    double s = (double)ng->devices_per_node / (double)users, cap = per_nic > 1 ? per_nic : 1;
    s = s < cap ? s : cap;
    share = s < share ? s : share;
  }
  return isfinite(share) ? share : 1;
}

/* The levels come outermost first: the hierarchy names the level that holds the whole group and the most
 * members inside one domain below it; that part is asked about in turn. The descent ends when that part
 * is the whole group (some groups of the axis fit a domain while the worst one straddles two) or crosses
 * the same level again (irregular strides): the level above is then charged as if each of its members
 * were alone in its inner domain, which can only make the estimate slower. */
ap_status comm_group_from_cluster(ap_ctx *ctx, const hw_cluster *c, int64_t stride, int64_t size,
                                  int64_t net_users_per_node, comm_group *out) {
  memset(out, 0, sizeof *out);
  out->nic_share = 1;
  if (!c) return ctx_fail(ctx, AP_INVALID, "comm group: no cluster");
  if (net_users_per_node < 0)
    return ctx_fail(ctx, AP_INVALID, "comm group: net_users_per_node must be >= 0, got %lld",
                    (long long)net_users_per_node);
  hw_group_link lk;
  ap_status st = hw_cluster_level_for_group(ctx, c, stride, size, &lk);
  if (st) return st;
  out->n_ranks = size;
  if (size <= 1) return AP_OK;

  comm_level outer_first[HW_MAX_LEVELS];
  int n = 0;
  int64_t members = size;
  for (;;) {
    const char *name = lk.level_name ? lk.level_name : "";
    outer_first[n++] = (comm_level){.hw_level = lk.level, .name = name, .link = classify(c, lk.level, name),
                                    .members = members, .bw_Bps = lk.bw_Bps, .latency_s = lk.latency_s};
    int64_t inner = lk.members_per_inner_domain;
    if (lk.level == 0 || inner <= 1 || inner >= members || n == HW_MAX_LEVELS) break;
    hw_group_link sub;
    st = hw_cluster_level_for_group(ctx, c, stride, inner, &sub);
    if (st) return st;
    if (sub.level >= lk.level) break;
    lk = sub;
    members = inner;
  }

  out->n_levels = n;
  out->nic_share = nic_share(c, net_users_per_node);
  for (int i = 0; i < n; i++) {
    out->levels[i] = outer_first[n - 1 - i];
    if (out->levels[i].link == COMM_LINK_NETWORK) out->levels[i].bw_Bps *= out->nic_share;
  }
  return AP_OK;
}

ap_status comm_group_from_counts(ap_ctx *ctx, const hw_cluster *c, int64_t n_ranks, const int64_t *per_level,
                                 int64_t net_users_per_node, comm_group *out) {
  memset(out, 0, sizeof *out);
  out->nic_share = 1;
  if (!c || n_ranks < 1 || c->n_levels < 1) return ctx_fail(ctx, AP_INVALID, "comm group: no cluster or no ranks");
  if (net_users_per_node < 0)
    return ctx_fail(ctx, AP_INVALID, "comm group: net_users_per_node must be >= 0, got %lld",
                    (long long)net_users_per_node);
  out->n_ranks = n_ranks;
  if (n_ranks <= 1) return AP_OK;
  out->nic_share = nic_share(c, net_users_per_node);
  int top = c->n_levels - 1;
  int64_t prev = 1;
  for (int l = 0; l <= top && out->n_levels < HW_MAX_LEVELS; l++) {
    int64_t m = l == top ? n_ranks : per_level[l] < n_ranks ? per_level[l] : n_ranks;
    if (m <= prev) continue; /* the level joins nothing: the group's parts already share its domains */
    hw_group_link lk;
    hw_cluster_level_link(c, l, NULL, m, &lk);
    const char *name = lk.level_name ? lk.level_name : "";
    comm_level *lv = &out->levels[out->n_levels++];
    *lv = (comm_level){.hw_level = l, .name = name, .link = classify(c, l, name), .members = m, .bw_Bps = lk.bw_Bps,
                       .latency_s = lk.latency_s};
    if (lv->link == COMM_LINK_NETWORK) lv->bw_Bps *= out->nic_share;
    prev = m;
  }
  return AP_OK;
}

ap_status comm_groups_for_axes(ap_ctx *ctx, const hw_cluster *c, const comm_axis *axes, int n_axes,
                               comm_group *out) {
  for (int i = 0; i < n_axes; i++) {
    ap_status st = comm_group_from_cluster(ctx, c, axes[i].stride, axes[i].size, axes[i].net_users_per_node, &out[i]);
    if (st) return st;
  }
  return AP_OK;
}

/* ---- Costs --------------------------------------------------------------------------------------------- */

/* The group's levels with the derived quantities of the notation above. */
typedef struct {
  int n_levels;
  double n;                     /* ranks */
  double m[HW_MAX_LEVELS];      /* m_i */
  double inner[HW_MAX_LEVELS];  /* m_{i-1} */
  double f[HW_MAX_LEVELS];      /* f_i = ceil(m_i / m_{i-1}); 1 means the level joins nothing */
  double a[HW_MAX_LEVELS];      /* a_i */
  double b[HW_MAX_LEVELS];      /* b_i, efficiency applied */
} view;

static void view_of(const comm_group *g, const comm_tuning *t, view *v) {
  v->n_levels = g->n_levels;
  v->n = (double)g->n_ranks;
  int64_t prev = 1;
  for (int i = 0; i < g->n_levels; i++) {
    const comm_level *lv = &g->levels[i];
    int64_t m = i == g->n_levels - 1 ? g->n_ranks : lv->members;
    if (m < prev) m = prev;
    v->m[i] = (double)m;
    v->inner[i] = (double)prev;
    v->f[i] = (double)((m + prev - 1) / prev);
    v->a[i] = lv->latency_s;
    v->b[i] = lv->bw_Bps * ((unsigned)lv->link < COMM_LINK_COUNT ? t->bus_eff[lv->link] : 1.0);
    prev = m;
  }
}

/* ceil(log2(x)) for x >= 1: the depth of a binary tree over x nodes (Thakur et al. write ⌈lg p⌉). */
static double ceil_log2(double x) {
  double d = 0;
  for (double p = 1; p < x; p *= 2) d++;
  return d;
}

/* The slowest egress among the levels the group crosses: at level i the traffic that leaves one inner domain
 * of the group can use the links of all m_{i-1} members there. For the network this is NCCL's behaviour: a
 * ring over several nodes runs one channel per NIC, so the node-to-node edge of the ring gets every NIC the
 * group holds in the node (COSTMODEL.md §4.1: "NCCL's flat ring over multiple nodes already behaves like this
 * for bandwidth, because every GPU uses its own NIC channel"; NVIDIA/nccl#1576: 8 x 200 Gb/s DGX-A100 nodes
 * give 192 GB/s all-reduce busBw per GPU, eight NICs' worth). */
static double egress_Bps(const view *v, double factor) {
  double best = INFINITY;
  for (int i = 0; i < v->n_levels; i++) {
    if (v->f[i] <= 1) continue;
    double bw = v->inner[i] * v->b[i] * factor;
    best = bw < best ? bw : best;
  }
  return best;
}

/* Flat algorithms over all n ranks.
 *  Ring all-reduce (Patarasuk & Yuan 2009; Thakur et al. 2005):  2(n-1)a + 2(n-1)/n * S/b.
 *  Ring reduce-scatter, all-gather (Thakur et al. 2005):           (n-1)a + (n-1)/n * S/b.
 *  Pipelined chain broadcast (COSTMODEL.md §4.1):                  (n-1)a + S/b.
 *  Pairwise all-to-all (Thakur et al. 2005):                       (n-1)a + (n-1)/n * S/b.
 *  Send/recv:                                                          a + S/b.
 * Across levels, a ring ordered domain by domain has (f_i - 1) * n/m_i of its n-1 edges on level i (NCCL's
 * nInterSteps = nNodes - 1 for two levels), each step paying that level's latency, and its bandwidth term is
 * set by the slowest egress. All-to-all sends (m_i - m_{i-1})/n of each rank's buffer over its own link at
 * level i, all levels at once (NCCL issues every peer's transfer together), so the slowest level sets the
 * time; a rank cannot pool other members' NICs for it (NVIDIA/nccl-tests#267: "Alltoall cannot aggregate the
 * bandwidth of multiple NICs"). Send/recv runs between neighbours of the group; the slowest pair crosses the
 * outermost level, where one device's link carries it. */
static double ring_time(const view *v, comm_coll coll, double S) {
  int top = v->n_levels - 1;
  double n = v->n;
  if (coll == COMM_SENDRECV) return v->a[top] + S / v->b[top];
  double lat = 0, bw = 0;
  if (coll == COMM_ALLTOALL) {
    for (int i = 0; i < v->n_levels; i++) {
      if (v->f[i] <= 1) continue;
      lat += (v->m[i] - v->inner[i]) * v->a[i];
      double t = (v->m[i] - v->inner[i]) / n * S / v->b[i];
      bw = t > bw ? t : bw;
    }
    return lat + bw;
  }
  double steps = coll == COMM_ALLREDUCE ? 2 : 1;
  double volume = coll == COMM_ALLREDUCE ? 2 * (n - 1) / n * S : coll == COMM_BROADCAST ? S : (n - 1) / n * S;
  for (int i = 0; i < v->n_levels; i++)
    if (v->f[i] > 1) lat += steps * (v->f[i] - 1) * ceil(n / v->m[i]) * v->a[i];
  return lat + volume / egress_Bps(v, 1);
}

/* NCCL's tree all-reduce: a chain through the members of each inner domain and a double binary tree across
 * the outermost level (Sanders, Speck & Träff, "Two-tree algorithms for full bandwidth broadcast, reduction
 * and scan", Parallel Computing 35(12), 2009; NCCL 2.4 blog, "Massively Scale Your Deep Learning Training
 * with NCCL 2.4", 2019). Latency as NCCL models it (tuning.cc): 2 * (sum over inner levels of (f_i - 1) a_i +
 * ceil(log2 f_top) a_top); bandwidth: algBw = busBw / 2 (NCCL's ratio 0.5 for tree), i.e. 2S over the slowest
 * egress, times tree_bw_factor. On one level: 2 ceil(log2 n) a + 2 S/b (COSTMODEL.md §4.1). */
static double tree_time(const view *v, double S, double tree_bw_factor) {
  int top = v->n_levels - 1;
  double lat = 0;
  for (int i = 0; i < top; i++) lat += (v->f[i] - 1) * v->a[i];
  lat += ceil_log2(v->f[top]) * v->a[top];
  return 2 * lat + 2 * S / egress_Bps(v, tree_bw_factor);
}

/* Level by level, each phase a flat algorithm among the f_i parts that level i joins, every member using its
 * own link there (the m_{i-1} members of an inner domain run side by side, one ring per "rail"):
 *  reduce-scatter: innermost first, on S/m_{i-1} at level i: sum of (f_i-1) a_i + (f_i-1)/f_i * S/(m_{i-1} b_i);
 *  all-gather: the same phases in reverse order, same sum;
 *  all-reduce: reduce-scatter inward-out, all-reduce at the top on S/m_{top-1}, all-gather back in = twice
 *    the reduce-scatter sum (COSTMODEL.md §4.1, "Hierarchical all-reduce");
 *  all-to-all: exchange inside each level in turn on the whole buffer (the two-phase all-to-all of Tutel and
 *    DeepEP): sum of (f_i-1) a_i + (f_i-1)/f_i * S/b_i; at the network this moves (n-k)/n of the data, k the
 *    members per node;
 *  broadcast: a pipelined chain at each level in turn: sum of (f_i-1) a_i + S/b_i;
 *  send/recv: as flat.
 * top_share scales what the outermost joining level carries: 1 for every collective (hier_time); less for
 * DeepEP's deduplicated dispatch (comm_dispatch_time_s). */
static double hier_time_share(const view *v, comm_coll coll, double S, double top_share) {
  if (coll == COMM_SENDRECV) return ring_time(v, coll, S);
  int top = v->n_levels - 1;
  while (top > 0 && v->f[top] <= 1) top--;
  double t = 0;
  for (int i = 0; i < v->n_levels; i++) {
    double f = v->f[i];
    if (f <= 1) continue;
    double part = coll == COMM_ALLTOALL || coll == COMM_BROADCAST ? S : S / v->inner[i];
    if (i == top) part *= top_share;
    double share = coll == COMM_BROADCAST ? 1 : (f - 1) / f;
    t += (f - 1) * v->a[i] + share * part / v->b[i];
  }
  return coll == COMM_ALLREDUCE ? 2 * t : t;
}

static double hier_time(const view *v, comm_coll coll, double S) { return hier_time_share(v, coll, S, 1.0); }

static double algo_time(const view *v, comm_coll coll, comm_algo algo, double S, const comm_tuning *t) {
  switch (algo) {
  case COMM_RING: return ring_time(v, coll, S);
  case COMM_TREE: return coll == COMM_SENDRECV ? ring_time(v, coll, S) : tree_time(v, S, t->tree_bw_factor);
  case COMM_HIERARCHICAL: return hier_time(v, coll, S);
  default: return INFINITY;
  }
}

/* The fastest applicable algorithm and its time (without the call latency). */
static comm_algo pick(const view *v, comm_coll coll, double S, const comm_tuning *t, double *time_out) {
  comm_algo best = COMM_RING;
  double best_t = INFINITY;
  for (int a = 0; a < COMM_AUTO; a++) {
    if (!applies[coll][a]) continue;
    double x = algo_time(v, coll, (comm_algo)a, S, t);
    if (x < best_t) best_t = x, best = (comm_algo)a;
  }
  *time_out = best_t;
  return best;
}

double comm_time_s(const comm_group *g, comm_coll coll, comm_algo algo, double bytes, const comm_tuning *t) {
  assert(g && (unsigned)coll < COMM_COLL_COUNT && (unsigned)algo < COMM_ALGO_COUNT);
  if ((unsigned)coll >= COMM_COLL_COUNT || (unsigned)algo >= COMM_ALGO_COUNT) return INFINITY;
  if (!applies[coll][algo]) return INFINITY;
  if (g->n_ranks <= 1 || g->n_levels <= 0 || !(bytes > 0)) return 0;
  comm_tuning defaults;
  if (!t) defaults = comm_tuning_defaults(), t = &defaults;
  view v;
  view_of(g, t, &v);
  double time = 0;
  if (algo == COMM_AUTO) pick(&v, coll, bytes, t, &time);
  else time = algo_time(&v, coll, algo, bytes, t);
  return time + t->call_latency_s;
}

/* DeepEP's internode dispatch (DeepSeek-V3 report §3.2.2; deepseek-ai/DeepEP README, "normal kernels"): each
 * token goes over the network once per distinct remote domain that holds one of its experts and is forwarded
 * to the experts there over the inner level, and the combine mirrors it. With top_k experts drawn evenly from
 * N outermost domains, a token reaches N·(1 - (1 - 1/N)^k) distinct domains on average (its own among them
 * with the same chance as any), so the outermost level carries that share, N·(1 - (1 - 1/N)^k)/k, of the
 * plain two-phase exchange's k copies per token; the inner levels carry the whole buffer as before. */
double comm_dispatch_time_s(const comm_group *g, double bytes, int64_t top_k, const comm_tuning *t) {
  double plain = comm_time_s(g, COMM_ALLTOALL, COMM_AUTO, bytes, t);
  if (g->n_ranks <= 1 || g->n_levels <= 0 || !(bytes > 0) || top_k <= 1) return plain;
  comm_tuning defaults;
  if (!t) defaults = comm_tuning_defaults(), t = &defaults;
  view v;
  view_of(g, t, &v);
  int top = v.n_levels - 1;
  while (top > 0 && v.f[top] <= 1) top--;
  double N = v.f[top], k = (double)top_k;
  if (N <= 1) return plain;
  double time = hier_time_share(&v, COMM_ALLTOALL, bytes, N * (1.0 - pow(1.0 - 1.0 / N, k)) / k) + t->call_latency_s;
  return time < plain ? time : plain;
}

comm_algo comm_algo_pick(const comm_group *g, comm_coll coll, double bytes, const comm_tuning *t) {
  if ((unsigned)coll >= COMM_COLL_COUNT || g->n_ranks <= 1 || g->n_levels <= 0 || !(bytes > 0)) return COMM_RING;
  comm_tuning defaults;
  if (!t) defaults = comm_tuning_defaults(), t = &defaults;
  view v;
  view_of(g, t, &v);
  double unused;
  return pick(&v, coll, bytes, t, &unused);
}
