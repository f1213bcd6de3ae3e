/* The rank lists of a plan's groups and the links they cross (cost/groups.c), against a brute-force enumeration
 * of the rank lists themselves: every rank's coordinates in the plan's order (Megatron's numbering,
 * parallel_state.py generate_masked_orthogonal_rank_groups), the groups as the ranks that agree on every other
 * coordinate, and each group's members counted domain by domain from the cluster's node groups. Then two plans
 * the previous rule (a group of `size` ranks `stride` apart, a pipeline hop as the pair of ranks one stride
 * apart inside blocks of two) costed on the wrong link: the cost now follows the rank lists. */
#include <stdlib.h>

#include "cost/groups.h"
#include "cost/internal.h"
#include "hw/hw.h"
#include "testutil.h"
#include "cost_fixture.h"

/* ---- The brute force ---- */

/* The key of rank r's domain at link level `level` (its node when level < 0), from the node groups alone. */
static int64_t domain_key(const hw_cluster *c, int level, int64_t r) {
  if (level >= c->n_levels - 1) return 0;
  for (int gi = 0; gi < c->n_groups; gi++) {
    const hw_node_group *g = &c->groups[gi];
    if (r < g->first_rank || r >= g->first_rank + g->n_devices) continue;
    int64_t d = level < 0 ? g->devices_per_node : g->levels[level].domain_devices;
    return (int64_t)gi * HW_MAX_DEVICES + (r - g->first_rank) / d;
  }
  fail_msg("rank %lld is in no node group", (long long)r);
  return -1;
}

/* The coordinates of rank r in order token order (tp, cp, ep, dp, pp) of one mesh. */
static void coords(const plan *p, bool expert, int64_t r, int64_t *out) {
  for (int i = 0; i < PLAN_N_ORDER; i++) {
    plan_axis t = p->order[i];
    int64_t d = plan_mesh_degree(p, expert, t);
    out[t] = r % d;
    r /= d;
  }
}

typedef struct {
  int64_t group, domain;
} pair;

static int pair_cmp(const void *a, const void *b) {
  const pair *x = a, *y = b;
  if (x->group != y->group) return x->group < y->group ? -1 : 1;
  return x->domain < y->domain ? -1 : x->domain > y->domain;
}

/* The most ranks one (group, domain) pair holds, and the most distinct domains one group has. */
static void count_pairs(pair *v, int64_t n, int64_t *most_in, int64_t *most_domains) {
  qsort(v, (size_t)n, sizeof *v, pair_cmp);
  *most_in = 0;
  *most_domains = 0;
  int64_t run = 0, domains = 0;
  for (int64_t i = 0; i < n; i++) {
    bool same_group = i > 0 && v[i].group == v[i - 1].group;
    run = same_group && v[i].domain == v[i - 1].domain ? run + 1 : 1;
    domains = !same_group ? 1 : v[i].domain == v[i - 1].domain ? domains : domains + 1;
    if (run > *most_in) *most_in = run;
    if (domains > *most_domains) *most_domains = domains;
  }
}

/* The geometry of the groups of `axes`, by listing every group's ranks: a group is the ranks whose coordinates
 * off the axes agree. */
static group_geom brute_geom(const hw_cluster *c, const plan *p, unsigned axes) {
  bool expert = (axes & (1u << PLAN_AXIS_ETP | 1u << PLAN_AXIS_EP | 1u << PLAN_AXIS_EDP)) != 0;
  unsigned tokens = 0;
  for (int a = 0; a < PLAN_AXIS_COUNT_; a++)
    if (axes & (1u << a)) tokens |= 1u << plan_axis_token((plan_axis)a);
  int64_t n = c->n_devices;
  pair *v = calloc((size_t)n, sizeof *v);
  int64_t *key = calloc((size_t)n, sizeof *key);
  assert_true(v && key);
  for (int64_t r = 0; r < n; r++) {
    int64_t x[PLAN_N_ORDER];
    coords(p, expert, r, x);
    int64_t k = 0;
    for (int t = 0; t < PLAN_N_ORDER; t++) /* mixed radix over the coordinates off the axes */
      k = k * plan_mesh_degree(p, expert, (plan_axis)t) + ((tokens & (1u << t)) ? 0 : x[t]);
    key[r] = k;
  }
  group_geom g;
  memset(&g, 0, sizeof g);
  int64_t unused;
  for (int l = -1; l < c->n_levels; l++) {
    for (int64_t r = 0; r < n; r++) v[r] = (pair){key[r], domain_key(c, l, r)};
    count_pairs(v, n, l < 0 ? &g.per_node : &g.per_level[l], l < 0 ? &g.nodes : &unused);
  }
  g.n_ranks = g.per_level[c->n_levels - 1];
  free(v);
  free(key);
  return g;
}

/* The level of each pipeline hop h -> (h+1) mod pp, by checking every rank and its neighbour. */
static void brute_hops(const hw_cluster *c, const plan *p, uint8_t *level) {
  int64_t stride = plan_axis_stride(p, PLAN_AXIS_PP);
  memset(level, 0, (size_t)p->pp);
  for (int64_t r = 0; r < c->n_devices; r++) {
    int64_t x[PLAN_N_ORDER];
    coords(p, false, r, x);
    int64_t h = x[PLAN_AXIS_PP], next = r + ((h + 1) % p->pp - h) * stride;
    int l = 0;
    while (l < c->n_levels - 1 && domain_key(c, l, r) != domain_key(c, l, next)) l++;
    if (l > level[h]) level[h] = (uint8_t)l;
  }
}

/* ---- Plans over many shapes ---- */

static const char *const ORDERS[] = {
    "tp-cp-ep-dp-pp", /* Megatron's default, DeepSpeed's pipe-data-model, torchtitan's pp-dp-cp-tp */
    "tp-cp-ep-pp-dp", /* Megatron --use-tp-pp-dp-mapping */
    "dp-tp-cp-ep-pp", "pp-cp-tp-dp-ep", "cp-dp-tp-ep-pp",
};

static void set_order(plan *p, const char *text) {
  plan_axis a;
  char buf[32];
  snprintf(buf, sizeof buf, "%s", text);
  int i = 0;
  for (char *tok = strtok(buf, "-"); tok; tok = strtok(NULL, "-")) {
    assert_true(plan_axis_from_name(tok, &a));
    p->order[i++] = a;
  }
  assert_int_equal(i, PLAN_N_ORDER);
}

static void check_plan(ap_ctx *ctx, const hw_cluster *c, const plan *p, int *n_checked) {
  static const unsigned sets[] = {
      1u << PLAN_AXIS_TP, 1u << PLAN_AXIS_CP, 1u << PLAN_AXIS_DP | 1u << PLAN_AXIS_CP, 1u << PLAN_AXIS_DP,
      1u << PLAN_AXIS_PP, 1u << PLAN_AXIS_EP, 1u << PLAN_AXIS_ETP, 1u << PLAN_AXIS_EDP,
  };
  for (size_t k = 0; k < AP_COUNT(sets); k++) {
    rank_shape s;
    assert_true(rank_shape_of_axes(p, sets[k], &s));
    group_geom got, want = brute_geom(c, p, sets[k]);
    assert_int_equal(group_geom_of(ctx, c, &s, &got), AP_OK);
    bool same = got.n_ranks == want.n_ranks && got.per_node == want.per_node && got.nodes == want.nodes;
    for (int l = 0; l < c->n_levels; l++) same = same && got.per_level[l] == want.per_level[l];
    if (!same)
      fail_msg("%s: tp %lld cp %lld dp %lld pp %lld ep %lld etp %lld, axes 0x%x: got %lld ranks, %lld per node, %lld "
               "nodes, %lld in level 0; brute force %lld, %lld, %lld, %lld",
               c->name, (long long)p->tp, (long long)p->cp, (long long)p->dp, (long long)p->pp, (long long)p->ep,
               (long long)plan_etp(p), sets[k], (long long)got.n_ranks, (long long)got.per_node, (long long)got.nodes,
               (long long)got.per_level[0], (long long)want.n_ranks, (long long)want.per_node, (long long)want.nodes,
               (long long)want.per_level[0]);
    (*n_checked)++;
  }
  if (p->pp > 1) {
    rank_shape s;
    rank_shape_of_pipe(p, &s);
    uint8_t got[PLAN_MAX_CHUNKS], want[PLAN_MAX_CHUNKS];
    assert_int_equal(pipe_hops_of(ctx, c, &s, got), AP_OK);
    brute_hops(c, p, want);
    for (int64_t h = 0; h < p->pp; h++)
      if (got[h] != want[h])
        fail_msg("%s: tp %lld cp %lld dp %lld pp %lld: hop %lld crosses level %d, brute force %d", c->name,
                 (long long)p->tp, (long long)p->cp, (long long)p->dp, (long long)p->pp, (long long)h, got[h], want[h]);
    (*n_checked)++;
  }
}

/* Every split of the cluster's devices into tp, cp, dp, pp (and ep, etp folded into tp·cp·dp) under several
 * orders, on clusters of aligned and unaligned domains: the derived geometry and hop levels equal the brute
 * force's. */
static void test_geometry_equals_brute_force(void **state) {
  (void)state;
  static const char *const clusters[] = {
      "dgx-h100:4x8",    /* 8-GPU NVLink nodes */
      "dgx-h100:3x8",    /* three nodes: degrees of 3 */
      "gb200-nvl72:144", /* 4-GPU trays inside 72-GPU NVLink domains: the period is 72 */
      "gb200-nvl72:128", /* two racks of 64 */
      "mi300x:2x8",      /* a mesh inside the node */
      "mixed",           /* two node groups of different nodes */
  };
  static const char mixed[] = "{\"name\": \"mixed\", \"node_groups\": [{\"node\": \"dgx-a100-80gb\", \"n_nodes\": 2},"
                              " {\"node\": \"gb200-nvl72\", \"n_nodes\": 6}]}";
  ap_ctx *ctx = ap_ctx_new();
  int n_checked = 0;
  for (size_t ci = 0; ci < AP_COUNT(clusters); ci++) {
    ap_cluster *cl = NULL;
    if (strcmp(clusters[ci], "mixed") == 0)
      assert_int_equal(hw_cluster_parse(ctx, "mixed.json", mixed, strlen(mixed), &cl), AP_OK);
    else
      assert_int_equal(ap_cluster_load(ctx, clusters[ci], &cl), AP_OK);
    const hw_cluster *c = hw_cluster_of(cl);
    int64_t n = c->n_devices;
    for (int64_t tp = 1; tp <= n; tp++) {
      if (n % tp) continue;
      for (int64_t cp = 1; cp <= n / tp; cp++) {
        if ((n / tp) % cp) continue;
        for (int64_t pp = 1; pp <= n / (tp * cp); pp++) {
          if ((n / (tp * cp)) % pp) continue;
          int64_t dp = n / (tp * cp * pp);
          for (size_t oi = 0; oi < AP_COUNT(ORDERS); oi++) {
            plan p;
            plan_defaults(&p);
            p.tp = tp, p.cp = cp, p.pp = pp, p.dp = dp;
            set_order(&p, ORDERS[oi]);
            /* Experts: ep over the dense ranks with etp = tp or 1, when it divides. */
            int64_t dense = tp * cp * dp;
            p.ep = dense % 4 == 0 ? 4 : dense % 2 == 0 ? 2 : 1;
            p.etp = (oi % 2 == 0 || dense % (p.ep * tp) != 0) ? 1 : 0;
            check_plan(ctx, c, &p, &n_checked);
          }
        }
      }
    }
    ap_cluster_free(cl);
  }
  print_message("# %d geometries and hop sets equal the brute force\n", n_checked);
  assert_true(n_checked > 1000);
  ap_ctx_free(ctx);
}

/* A group of `size` ranks `stride` apart that sits the same way in every domain (one mesh axis of a regular
 * plan): comm_group_from_counts over its geometry is the group comm_group_from_cluster describes. */
static void test_counts_match_stride_groups(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  static const struct {
    const char *cluster;
    int64_t tp, cp, dp, pp;
  } cases[] = {
      {"dgx-h100:4x8", 8, 1, 4, 1}, {"dgx-h100:4x8", 4, 1, 8, 1}, {"dgx-h100:4x8", 2, 2, 4, 2},
      {"mi300x:2x8", 4, 1, 4, 1},   {"gb200-nvl72:144", 4, 1, 36, 1}, {"gb200-nvl72:128", 2, 1, 16, 4},
  };
  for (size_t i = 0; i < AP_COUNT(cases); i++) {
    ap_cluster *cl = NULL;
    assert_int_equal(ap_cluster_load(ctx, cases[i].cluster, &cl), AP_OK);
    const hw_cluster *c = hw_cluster_of(cl);
    plan p;
    plan_defaults(&p);
    p.tp = cases[i].tp, p.cp = cases[i].cp, p.dp = cases[i].dp, p.pp = cases[i].pp;
    static const plan_axis axes[] = {PLAN_AXIS_TP, PLAN_AXIS_CP, PLAN_AXIS_DP, PLAN_AXIS_PP};
    for (size_t k = 0; k < AP_COUNT(axes); k++) {
      int64_t size = plan_axis_size(&p, axes[k]);
      if (size <= 1) continue;
      rank_shape s;
      group_geom geo;
      comm_group got, want;
      assert_true(rank_shape_of_axes(&p, 1u << axes[k], &s));
      assert_int_equal(group_geom_of(ctx, c, &s, &geo), AP_OK);
      assert_int_equal(comm_group_from_counts(ctx, c, geo.n_ranks, geo.per_level, 0, &got), AP_OK);
      assert_int_equal(comm_group_from_cluster(ctx, c, plan_axis_stride(&p, axes[k]), size, 0, &want), AP_OK);
      assert_int_equal(got.n_ranks, want.n_ranks);
      assert_int_equal(got.n_levels, want.n_levels);
      for (int l = 0; l < got.n_levels; l++) {
        assert_int_equal(got.levels[l].hw_level, want.levels[l].hw_level);
        assert_int_equal(got.levels[l].members, want.levels[l].members);
        assert_rel_close(got.levels[l].bw_Bps, want.levels[l].bw_Bps, 1e-12);
        assert_rel_close(got.levels[l].latency_s, want.levels[l].latency_s, 1e-12);
      }
    }
    ap_cluster_free(cl);
  }
  ap_ctx_free(ctx);
}

/* ---- Plans the previous rule mis-costed ---- */

/* tp 2, dp 2, pp 4 on two nodes of 8 (Megatron's default order): a pipeline stage is 4 ranks, so the hop from
 * stage 1 (ranks 4-7) to stage 2 (ranks 8-11) leaves the node, though pp's stride (4) is below the node. The
 * previous rule took the pairs one stride apart inside blocks of two strides ({0,4}, {8,12}: all in a node) and
 * priced every hop at NVLink speed. Now stages 1 and 2 send over the network, stages 0 and 3 over NVLink, and the
 * slowest send/recv, which the closed form prices every hop at, is the network's. */
static void test_pp_hop_crossing_nodes(void **state) {
  (void)state;
  env_fixture f;
  env_open(&f, "llama-3.1-8b", "dgx-h100:2x8");
  plan p;
  plan_defaults(&p);
  p.tp = 2, p.dp = 2, p.pp = 4, p.sequence_parallel = true;
  p.micro_batch_size = 1, p.n_micro_batches = 8, p.global_batch_size = 16, p.seq_length = 8192;
  plan_groups pg;
  assert_int_equal(cost_plan_groups(f.ctx, f.env, &p, &pg), AP_OK);
  const hw_cluster *c = cost_env_cluster(f.env);
  int net = c->n_levels - 1;
  assert_int_equal(pg.pp_level[0], 0);
  assert_int_equal(pg.pp_level[1], net);
  assert_int_equal(pg.pp_level[2], net);
  assert_int_equal(pg.pp_level[3], 0);
  assert_int_equal(cost_pp_group(&pg, 1)->levels[0].link, COMM_LINK_NETWORK);
  assert_int_equal(cost_pp_group(&pg, 0)->levels[0].link, COMM_LINK_SCALE_UP);
  /* The previous rule's group, for the direction of the change. */
  comm_group old;
  assert_int_equal(comm_group_from_cluster(f.ctx, c, plan_axis_stride(&p, PLAN_AXIS_PP), 2, 0, &old), AP_OK);
  assert_int_equal(old.levels[old.n_levels - 1].link, COMM_LINK_SCALE_UP);
  cost_result r;
  assert_int_equal(cost_estimate(f.ctx, f.env, &p, &r), AP_OK);
  double bytes = cost_boundary_bytes(f.env, &p, 1, 8192, true);
  const comm_tuning *ct = &cost_env_tuning(f.env)->comm;
  double net_s = comm_time_s(cost_pp_group(&pg, 1), COMM_SENDRECV, COMM_AUTO, bytes, ct);
  double old_s = comm_time_s(&old, COMM_SENDRECV, COMM_AUTO, bytes, ct);
  print_message("# pp hop: network %.3g s, the previous rule's NVLink %.3g s\n", net_s, old_s);
  assert_true(net_s > 2 * old_s);
  assert_rel_close(r.p2p_s, cost_p2p_exposed_s(f.env, &p, net_s), 1e-12);
  /* With pp outermost over whole nodes (tp 8, pp 2) the hop crosses the network as before. */
  p.tp = 8, p.dp = 1, p.pp = 2;
  assert_int_equal(cost_plan_groups(f.ctx, f.env, &p, &pg), AP_OK);
  assert_int_equal(pg.pp_level[0], net);
  env_close(&f);
}

/* tp 2, cp 2, pp 2, dp 2 on two nodes of 8 with Megatron's --use-tp-pp-dp-mapping (tp-cp-ep-pp-dp): pp lies
 * between cp and dp, so the dp-cp group that reduces gradients (parallel_state.py get_ranks("dp-cp")) is
 * {0, 2, 8, 10}: four ranks, two in each node. The previous rule could not state it as one (stride, size) group
 * and costed the reduction over dp alone ({0, 8}: two ranks, one per node). Now it is the four-rank group on
 * NVLink inside the node and the network across; with two members per node pooling their NICs, the ring's
 * network edge carries (n-1)/n = 3/4 of the buffer over two NICs instead of 1/2 over one, so the reduction is
 * faster than the previous rule said, and equals the four-rank group's time exactly. */
static void test_dp_cp_split_by_pp(void **state) {
  (void)state;
  env_fixture f;
  env_open(&f, "llama-3.1-8b", "dgx-h100:2x8");
  plan p;
  plan_defaults(&p);
  p.tp = 2, p.cp = 2, p.pp = 2, p.dp = 2, p.sequence_parallel = true;
  p.micro_batch_size = 1, p.n_micro_batches = 4, p.global_batch_size = 8, p.seq_length = 8192;
  set_order(&p, "tp-cp-ep-pp-dp");
  plan_groups pg;
  assert_int_equal(cost_plan_groups(f.ctx, f.env, &p, &pg), AP_OK);
  assert_int_equal(pg.dp.n_ranks, 4);
  assert_int_equal(pg.dp.n_levels, 2);
  assert_int_equal(pg.dp.levels[0].members, 2);
  assert_int_equal(pg.dp.levels[0].link, COMM_LINK_SCALE_UP);
  assert_int_equal(pg.dp.levels[1].link, COMM_LINK_NETWORK);
  const hw_cluster *c = cost_env_cluster(f.env);
  comm_group old;
  assert_int_equal(comm_group_from_cluster(f.ctx, c, plan_axis_stride(&p, PLAN_AXIS_DP), 2, 0, &old), AP_OK);
  const comm_tuning *ct = &cost_env_tuning(f.env)->comm;
  double bytes = 4e9;
  double now_s = comm_time_s(&pg.dp, COMM_REDUCE_SCATTER, COMM_AUTO, bytes, ct);
  double old_s = comm_time_s(&old, COMM_REDUCE_SCATTER, COMM_AUTO, bytes, ct);
  print_message("# dp-cp reduce-scatter of 4 GB: %.4g s over {0,2,8,10}, %.4g s over dp alone\n", now_s, old_s);
  assert_true(now_s < old_s);
  /* The pipeline hop of this order joins ranks 4 apart inside a node. */
  assert_int_equal(pg.pp_level[0], 0);
  /* The default order keeps dp and cp adjacent: the same four ranks' worth, {0, 2, 4, 6}, inside one node. */
  set_order(&p, "tp-cp-ep-dp-pp");
  assert_int_equal(cost_plan_groups(f.ctx, f.env, &p, &pg), AP_OK);
  assert_int_equal(pg.dp.n_ranks, 4);
  assert_int_equal(pg.dp.n_levels, 1);
  assert_int_equal(pg.pp_level[0], c->n_levels - 1);
  env_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_geometry_equals_brute_force),
      cmocka_unit_test(test_counts_match_stride_groups),
      cmocka_unit_test(test_pp_hop_crossing_nodes),
      cmocka_unit_test(test_dp_cp_split_by_pp),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
