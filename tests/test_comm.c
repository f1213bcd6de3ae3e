/* Tests of the communication cost model (src/cost/comm.c): the flat algorithms against the textbook closed
 * forms of Thakur, Rabenseifner & Gropp 2005 and Patarasuk & Yuan 2009 (COSTMODEL.md §4.1), the tree and
 * multi-level forms against NCCL's model (COSTMODEL.md §4.3), hierarchical costs against the sum of their
 * phases, auto against every algorithm, and the groups built from cluster presets (which link level a mesh
 * axis crosses, NIC sharing). */
#include <stdlib.h>

#include "testutil.h"

#include "core/core.h"
#include "cost/comm.h"
#include "cost/cost.h"
#include "hw/hw.h"

/* ---- Helpers ------------------------------------------------------------------------------------------- */

/* A group of n_nodes * k ranks, k per node: level 0 with bw0/a0 (members k), level 1 with bw1/a1. */
static comm_group two_level(int64_t k, int64_t n_nodes, double bw0, double a0, double bw1, double a1) {
  comm_group g = comm_group_flat(k, bw0, a0, COMM_LINK_SCALE_UP);
  g.n_ranks = k * n_nodes;
  g.n_levels = 2;
  g.levels[1] = (comm_level){.hw_level = -1, .name = "network", .link = COMM_LINK_NETWORK,
                             .members = k * n_nodes, .bw_Bps = bw1, .latency_s = a1};
  return g;
}

static const comm_coll all_colls[] = {COMM_ALLREDUCE, COMM_REDUCE_SCATTER, COMM_ALLGATHER,
                                      COMM_ALLTOALL,  COMM_SENDRECV,       COMM_BROADCAST};

/* ---- Names and tuning table ------------------------------------------------------------------------------ */

static void test_names_round_trip(void **state) {
  (void)state;
  for (int i = 0; i < COMM_COLL_COUNT; i++) {
    comm_coll c;
    assert_true(comm_coll_from_name(comm_coll_name((comm_coll)i), &c));
    assert_int_equal(c, i);
  }
  for (int i = 0; i < COMM_ALGO_COUNT; i++) {
    comm_algo a;
    assert_true(comm_algo_from_name(comm_algo_name((comm_algo)i), &a));
    assert_int_equal(a, i);
  }
  comm_coll c;
  comm_algo a;
  assert_false(comm_coll_from_name("allreduse", &c));
  assert_false(comm_algo_from_name("butterfly", &a));
  assert_true(comm_algo_from_name("TREE", &a));
  assert_int_equal(a, COMM_TREE);
  assert_string_equal(comm_coll_name(COMM_COLL_COUNT), "?");
  assert_string_equal(comm_link_class_name(COMM_LINK_NETWORK), "network");
}

/* The cost model's one table of constants (tuning.c): every double of cost_tuning appears once, with a unit, a
 * default inside its range and a TUNING reason; the calibration-file constants come first; the defaults of
 * every part (comm_tuning_defaults among them) are the table's. */
static void test_tuning_table(void **state) {
  (void)state;
  size_t n = 0, n_files = 0;
  const cost_tuning_param *p = cost_tuning_params(&n, &n_files);
  assert_int_equal(n, sizeof(cost_tuning) / sizeof(double));
  cost_tuning d = cost_tuning_defaults();
  comm_tuning dc = comm_tuning_defaults();
  assert_memory_equal(&dc, &d.comm, sizeof dc);
  for (size_t i = 0; i < n; i++) {
    assert_non_null(p[i].unit);
    if (!strstr(p[i].source, "TUNING")) fail_msg("%s: source has no TUNING reason", p[i].name);
    if (!(p[i].min <= p[i].value && p[i].value <= p[i].max)) fail_msg("%s: default outside its range", p[i].name);
    assert_true(p[i].in_files == (i < n_files));
    assert_rel_close(*cost_tuning_ref(&d, &p[i]), p[i].value, 0);
    for (size_t j = 0; j < i; j++) {
      assert_true(strcmp(p[i].name, p[j].name) != 0);
      assert_true(p[i].offset != p[j].offset);
    }
  }
  assert_rel_close(d.comm.bus_eff[COMM_LINK_SCALE_UP], 0.82, 0);
  assert_rel_close(d.comm.bus_eff[COMM_LINK_NETWORK], 0.90, 0);
}

/* ---- Textbook closed forms on one level -------------------------------------------------------------------- */

/* One line per case: the collective, the algorithm, n, S (bytes), alpha (s), beta (B/s) and the time by hand
 * from the closed form named in the comment. */
static const struct {
  comm_coll coll;
  comm_algo algo;
  int64_t n;
  double bytes, alpha_s, bw_Bps, want_s;
} textbook[] = {
    /* ring all-reduce 2(n-1)a + 2(n-1)/n S/b */
    {COMM_ALLREDUCE, COMM_RING, 4, 4e9, 1e-6, 1e9, 6e-6 + 6.0},
    {COMM_ALLREDUCE, COMM_RING, 8, 8e9, 2e-6, 2e9, 28e-6 + 7.0},
    {COMM_ALLREDUCE, COMM_RING, 6, 6e9, 1e-6, 1e9, 10e-6 + 10.0},
    {COMM_ALLREDUCE, COMM_RING, 2, 1e9, 1e-6, 1e9, 2e-6 + 1.0},
    /* ring reduce-scatter and all-gather (n-1)a + (n-1)/n S/b, S the full buffer */
    {COMM_REDUCE_SCATTER, COMM_RING, 4, 4e9, 1e-6, 1e9, 3e-6 + 3.0},
    {COMM_REDUCE_SCATTER, COMM_RING, 8, 8e9, 2e-6, 2e9, 14e-6 + 3.5},
    {COMM_REDUCE_SCATTER, COMM_RING, 2, 1e9, 1e-6, 1e9, 1e-6 + 0.5},
    {COMM_ALLGATHER, COMM_RING, 4, 4e9, 1e-6, 1e9, 3e-6 + 3.0},
    {COMM_ALLGATHER, COMM_RING, 8, 8e9, 2e-6, 2e9, 14e-6 + 3.5},
    /* pairwise all-to-all (n-1)a + (n-1)/n S/b, S each rank's send buffer */
    {COMM_ALLTOALL, COMM_RING, 4, 4e9, 1e-6, 1e9, 3e-6 + 3.0},
    {COMM_ALLTOALL, COMM_RING, 8, 8e9, 2e-6, 2e9, 14e-6 + 3.5},
    /* send/recv a + S/b */
    {COMM_SENDRECV, COMM_RING, 4, 4e9, 1e-6, 1e9, 1e-6 + 4.0},
    {COMM_SENDRECV, COMM_RING, 2, 8e9, 2e-6, 2e9, 2e-6 + 4.0},
    /* pipelined chain broadcast (n-1)a + S/b */
    {COMM_BROADCAST, COMM_RING, 4, 4e9, 1e-6, 1e9, 3e-6 + 4.0},
    {COMM_BROADCAST, COMM_RING, 8, 8e9, 2e-6, 2e9, 14e-6 + 4.0},
    /* tree all-reduce 2 ceil(log2 n) a + 2 S/b */
    {COMM_ALLREDUCE, COMM_TREE, 4, 4e9, 1e-6, 1e9, 4e-6 + 8.0},
    {COMM_ALLREDUCE, COMM_TREE, 8, 8e9, 2e-6, 2e9, 12e-6 + 8.0},
    {COMM_ALLREDUCE, COMM_TREE, 6, 6e9, 1e-6, 1e9, 6e-6 + 12.0},
    {COMM_ALLREDUCE, COMM_TREE, 2, 1e9, 1e-6, 1e9, 2e-6 + 2.0},
    {COMM_ALLREDUCE, COMM_TREE, 1024, 1e9, 1e-6, 1e9, 20e-6 + 2.0},
    /* hierarchical on one level is the flat algorithm */
    {COMM_ALLREDUCE, COMM_HIERARCHICAL, 8, 8e9, 2e-6, 2e9, 28e-6 + 7.0},
    {COMM_ALLGATHER, COMM_HIERARCHICAL, 8, 8e9, 2e-6, 2e9, 14e-6 + 3.5},
    {COMM_ALLTOALL, COMM_HIERARCHICAL, 8, 8e9, 2e-6, 2e9, 14e-6 + 3.5},
    {COMM_BROADCAST, COMM_HIERARCHICAL, 8, 8e9, 2e-6, 2e9, 14e-6 + 4.0},
    {COMM_SENDRECV, COMM_TREE, 8, 8e9, 2e-6, 2e9, 2e-6 + 4.0},
};

static void test_textbook_table(void **state) {
  (void)state;
  comm_tuning ideal = comm_tuning_ideal();
  for (size_t i = 0; i < AP_COUNT(textbook); i++) {
    comm_group g = comm_group_flat(textbook[i].n, textbook[i].bw_Bps, textbook[i].alpha_s, COMM_LINK_SCALE_UP);
    double got = comm_time_s(&g, textbook[i].coll, textbook[i].algo, textbook[i].bytes, &ideal);
    print_message("# %s %s n=%lld: %.12g s\n", comm_coll_name(textbook[i].coll), comm_algo_name(textbook[i].algo),
                  (long long)textbook[i].n, got);
    assert_rel_close(got, textbook[i].want_s, 1e-12);
  }
}

/* The same closed forms, written out here, over a sweep of n and sizes. */
static double closed_form(comm_coll coll, comm_algo algo, double n, double S, double a, double b) {
  if (algo == COMM_TREE) return 2 * ceil(log2(n)) * a + 2 * S / b;
  switch (coll) {
  case COMM_ALLREDUCE: return 2 * (n - 1) * a + 2 * (n - 1) / n * S / b;
  case COMM_REDUCE_SCATTER:
  case COMM_ALLGATHER:
  case COMM_ALLTOALL: return (n - 1) * a + (n - 1) / n * S / b;
  case COMM_SENDRECV: return a + S / b;
  case COMM_BROADCAST: return (n - 1) * a + S / b;
  default: return NAN;
  }
}

static void test_textbook_sweep(void **state) {
  (void)state;
  comm_tuning ideal = comm_tuning_ideal();
  const double sizes[] = {1, 1000, 3.3e6, 1.7e9};
  int checked = 0;
  for (int64_t n = 2; n <= 600; n = n * 3 / 2 + 1)
    for (size_t s = 0; s < AP_COUNT(sizes); s++)
      for (size_t c = 0; c < AP_COUNT(all_colls); c++)
        for (int algo = COMM_RING; algo <= COMM_TREE; algo++) {
          if (algo == COMM_TREE && all_colls[c] != COMM_ALLREDUCE) continue;
          comm_group g = comm_group_flat(n, 37e9, 4.5e-6, COMM_LINK_NETWORK);
          double got = comm_time_s(&g, all_colls[c], (comm_algo)algo, sizes[s], &ideal);
          double want = closed_form(all_colls[c], (comm_algo)algo, (double)n, sizes[s], 4.5e-6, 37e9);
          assert_rel_close(got, want, 1e-12);
          checked++;
        }
  assert_true(checked > 200);
}

/* The efficiencies scale the bandwidth term only, the call latency is added once, and the tree factor only
 * touches the tree. */
static void test_tuning_applies(void **state) {
  (void)state;
  comm_tuning t = comm_tuning_ideal();
  t.bus_eff[COMM_LINK_NETWORK] = 0.5;
  t.tree_bw_factor = 0.8;
  t.call_latency_s = 7e-6;
  /* n = 8, S = 8 GB, b = 1 GB/s: ring 2*7 a + 2*7/8*8/b, b halved on the network; tree 2*3 a + 2*8/b with
   * b also times 0.8; 7 us once per call. */
  comm_group g = comm_group_flat(8, 1e9, 1e-6, COMM_LINK_NETWORK);
  assert_rel_close(comm_time_s(&g, COMM_ALLREDUCE, COMM_RING, 8e9, &t), 14e-6 + 14.0 / 0.5 + 7e-6, 1e-12);
  assert_rel_close(comm_time_s(&g, COMM_ALLREDUCE, COMM_TREE, 8e9, &t), 6e-6 + 16.0 / 0.4 + 7e-6, 1e-12);
  comm_group nv = comm_group_flat(8, 1e9, 1e-6, COMM_LINK_SCALE_UP);
  assert_rel_close(comm_time_s(&nv, COMM_ALLREDUCE, COMM_RING, 8e9, &t), 14e-6 + 14.0 + 7e-6, 1e-12);
  /* NULL means the defaults. */
  comm_tuning d = comm_tuning_defaults();
  assert_rel_close(comm_time_s(&g, COMM_ALLGATHER, COMM_RING, 1e8, NULL),
                   comm_time_s(&g, COMM_ALLGATHER, COMM_RING, 1e8, &d), 0);
}

/* ---- Multi-level forms -------------------------------------------------------------------------------- */

static const double NV_BW = 450e9, NV_A = 3.4e-6, NET_BW = 50e9, NET_A = 9.6e-6;

/* Hierarchical all-reduce = reduce-scatter inside the node + all-reduce across nodes on S/k + all-gather
 * inside the node, each on its own level's numbers; reduce-scatter and all-gather are their two phases. */
static void test_hierarchical_is_sum_of_phases(void **state) {
  (void)state;
  comm_tuning t = comm_tuning_defaults();
  t.call_latency_s = 0; /* one call here, three calls for the phases */
  const struct {
    int64_t k, nodes;
    double bytes;
  } cases[] = {{8, 4, 1e9}, {8, 2, 3e6}, {4, 16, 5e8}, {2, 3, 1e4}, {8, 128, 2e9}};
  for (size_t i = 0; i < AP_COUNT(cases); i++) {
    int64_t k = cases[i].k, nodes = cases[i].nodes;
    double S = cases[i].bytes;
    comm_group g = two_level(k, nodes, NV_BW, NV_A, NET_BW, NET_A);
    comm_group inner = comm_group_flat(k, NV_BW, NV_A, COMM_LINK_SCALE_UP);
    comm_group across = comm_group_flat(nodes, NET_BW, NET_A, COMM_LINK_NETWORK);
    double rs_in = comm_time_s(&inner, COMM_REDUCE_SCATTER, COMM_RING, S, &t);
    double ag_in = comm_time_s(&inner, COMM_ALLGATHER, COMM_RING, S, &t);
    double ar_out = comm_time_s(&across, COMM_ALLREDUCE, COMM_RING, S / (double)k, &t);
    double rs_out = comm_time_s(&across, COMM_REDUCE_SCATTER, COMM_RING, S / (double)k, &t);
    double ag_out = comm_time_s(&across, COMM_ALLGATHER, COMM_RING, S / (double)k, &t);
    assert_rel_close(comm_time_s(&g, COMM_ALLREDUCE, COMM_HIERARCHICAL, S, &t), rs_in + ar_out + ag_in, 1e-12);
    assert_rel_close(comm_time_s(&g, COMM_REDUCE_SCATTER, COMM_HIERARCHICAL, S, &t), rs_in + rs_out, 1e-12);
    assert_rel_close(comm_time_s(&g, COMM_ALLGATHER, COMM_HIERARCHICAL, S, &t), ag_out + ag_in, 1e-12);
    /* Two-phase all-to-all: the whole buffer inside the node, then the whole buffer across nodes, which moves
     * (n-k)/n of it through the network. */
    double a2a_in = comm_time_s(&inner, COMM_ALLTOALL, COMM_RING, S, &t);
    double a2a_out = comm_time_s(&across, COMM_ALLTOALL, COMM_RING, S, &t);
    assert_rel_close(comm_time_s(&g, COMM_ALLTOALL, COMM_HIERARCHICAL, S, &t), a2a_in + a2a_out, 1e-12);
    double n = (double)(k * nodes);
    double net_bw = NET_BW * t.bus_eff[COMM_LINK_NETWORK];
    assert_rel_close(a2a_out - (double)(nodes - 1) * NET_A, (n - (double)k) / n * S / net_bw, 1e-12);
  }
}

/* MoE dispatch, DeepEP style: the inner phase on the whole buffer, the network phase on the share of distinct
 * remote nodes, N(1 - (1 - 1/N)^k)/k of the copies; one expert per token is the plain all-to-all; the result
 * never exceeds the plain all-to-all (comm_dispatch_time_s takes the faster). */
static void test_dispatch_dedup(void **state) {
  (void)state;
  comm_tuning t = comm_tuning_defaults();
  t.call_latency_s = 0;
  const struct {
    int64_t k, nodes, top_k;
    double bytes;
  } cases[] = {{8, 2, 8, 1e9}, {8, 4, 8, 5e8}, {8, 8, 4, 2e8}, {4, 16, 6, 1e8}, {8, 3, 2, 4e8}};
  for (size_t i = 0; i < AP_COUNT(cases); i++) {
    int64_t k = cases[i].k, nodes = cases[i].nodes;
    double S = cases[i].bytes, N = (double)nodes, K = (double)cases[i].top_k;
    comm_group g = two_level(k, nodes, NV_BW, NV_A, NET_BW, NET_A);
    comm_group inner = comm_group_flat(k, NV_BW, NV_A, COMM_LINK_SCALE_UP);
    comm_group across = comm_group_flat(nodes, NET_BW, NET_A, COMM_LINK_NETWORK);
    double share = N * (1 - pow(1 - 1 / N, K)) / K;
    double want = comm_time_s(&inner, COMM_ALLTOALL, COMM_RING, S, &t) +
                  comm_time_s(&across, COMM_ALLTOALL, COMM_RING, S * share, &t);
    double plain = comm_time_s(&g, COMM_ALLTOALL, COMM_AUTO, S, &t);
    assert_rel_close(comm_dispatch_time_s(&g, S, cases[i].top_k, &t), fmin(want, plain), 1e-12);
    assert_true(comm_dispatch_time_s(&g, S, cases[i].top_k, &t) <= plain);
    assert_rel_close(comm_dispatch_time_s(&g, S, 1, &t), plain, 1e-12);
  }
  /* Two nodes, top-8: a token reaches the other node with probability 1 - 2^-8, so the network carries about
   * a quarter of the plain exchange's copies (4 of 8 land there). */
  comm_group g = two_level(8, 2, NV_BW, NV_A, NET_BW, NET_A);
  comm_group inner = comm_group_flat(8, NV_BW, NV_A, COMM_LINK_SCALE_UP);
  double net_plain = comm_time_s(&g, COMM_ALLTOALL, COMM_HIERARCHICAL, 1e9, &t) -
                     comm_time_s(&inner, COMM_ALLTOALL, COMM_RING, 1e9, &t) - NET_A;
  double net_dedup = comm_dispatch_time_s(&g, 1e9, 8, &t) - comm_time_s(&inner, COMM_ALLTOALL, COMM_RING, 1e9, &t) - NET_A;
  assert_rel_close(net_dedup / net_plain, 2 * (1 - pow(0.5, 8)) / 8, 1e-9);
}

/* The flat ring across nodes: 2(n-N) steps at NVLink latency and 2(N-1) at network latency (NCCL's
 * nInterSteps), bandwidth set by the slower of NVLink and the k NICs of a node; NCCL's tree: a chain in the
 * node and a tree across nodes. Ideal tuning, so the numbers are the raw alpha-beta ones. */
static void test_multilevel_ring_and_tree(void **state) {
  (void)state;
  comm_tuning ideal = comm_tuning_ideal();
  const struct {
    int64_t k, nodes;
    double net_bw;
  } cases[] = {{8, 2, NET_BW}, {8, 16, NET_BW}, {4, 5, NET_BW}, {8, 4, 100e9}, {2, 64, 25e9}};
  for (size_t i = 0; i < AP_COUNT(cases); i++) {
    double k = (double)cases[i].k, N = (double)cases[i].nodes, n = k * N, S = 1e9;
    comm_group g = two_level(cases[i].k, cases[i].nodes, NV_BW, NV_A, cases[i].net_bw, NET_A);
    double egress = fmin(NV_BW, k * cases[i].net_bw);
    double ring = 2 * (n - N) * NV_A + 2 * (N - 1) * NET_A + 2 * (n - 1) / n * S / egress;
    assert_rel_close(comm_time_s(&g, COMM_ALLREDUCE, COMM_RING, S, &ideal), ring, 1e-12);
    double rs = (n - N) * NV_A + (N - 1) * NET_A + (n - 1) / n * S / egress;
    assert_rel_close(comm_time_s(&g, COMM_REDUCE_SCATTER, COMM_RING, S, &ideal), rs, 1e-12);
    double tree = 2 * ((k - 1) * NV_A + ceil(log2(N)) * NET_A) + 2 * S / egress;
    assert_rel_close(comm_time_s(&g, COMM_ALLREDUCE, COMM_TREE, S, &ideal), tree, 1e-12);
    /* Flat all-to-all: each link level at once, each rank on its own NIC for (n-k)/n of its buffer. */
    double a2a = (k - 1) * NV_A + (n - k) * NET_A + fmax((k - 1) / n * S / NV_BW, (n - k) / n * S / cases[i].net_bw);
    assert_rel_close(comm_time_s(&g, COMM_ALLTOALL, COMM_RING, S, &ideal), a2a, 1e-12);
    /* Send/recv between neighbours: the slowest pair crosses the network on one device's link. */
    assert_rel_close(comm_time_s(&g, COMM_SENDRECV, COMM_AUTO, S, &ideal), NET_A + S / cases[i].net_bw, 1e-12);
  }
}

/* ---- Auto, monotonicity, degenerate groups ------------------------------------------------------------------ */

static void test_auto_is_minimum(void **state) {
  (void)state;
  comm_tuning d = comm_tuning_defaults();
  comm_group groups[] = {
      comm_group_flat(8, NV_BW, NV_A, COMM_LINK_SCALE_UP),
      comm_group_flat(64, NET_BW, NET_A, COMM_LINK_NETWORK),
      two_level(8, 4, NV_BW, NV_A, NET_BW, NET_A),
      two_level(8, 512, NV_BW, NV_A, NET_BW, NET_A),
      two_level(4, 2, NV_BW, NV_A, 12.5e9, 20e-6),
  };
  int picked[COMM_ALGO_COUNT] = {0};
  for (size_t gi = 0; gi < AP_COUNT(groups); gi++)
    for (size_t c = 0; c < AP_COUNT(all_colls); c++)
      for (double S = 16; S < 1e11; S *= 7) {
        double best = comm_time_s(&groups[gi], all_colls[c], COMM_AUTO, S, &d), lowest = INFINITY;
        for (int a = 0; a < COMM_AUTO; a++) {
          double x = comm_time_s(&groups[gi], all_colls[c], (comm_algo)a, S, &d);
          if (!comm_algo_applies(all_colls[c], (comm_algo)a)) {
            assert_true(isinf(x));
            continue;
          }
          assert_true(best <= x);
          lowest = fmin(lowest, x);
        }
        assert_rel_close(best, lowest, 0);
        comm_algo p = comm_algo_pick(&groups[gi], all_colls[c], S, &d);
        assert_rel_close(comm_time_s(&groups[gi], all_colls[c], p, S, &d), best, 0);
        picked[p]++;
      }
  /* Across these groups and sizes every algorithm wins somewhere: small all-reduces across many nodes go to
   * the tree or hierarchical, large ones to the ring. */
  assert_true(picked[COMM_RING] > 0 && picked[COMM_TREE] > 0 && picked[COMM_HIERARCHICAL] > 0);
}

static void test_monotonic_in_bytes(void **state) {
  (void)state;
  comm_tuning d = comm_tuning_defaults();
  comm_group groups[] = {comm_group_flat(16, NET_BW, NET_A, COMM_LINK_NETWORK),
                         two_level(8, 8, NV_BW, NV_A, NET_BW, NET_A)};
  for (size_t gi = 0; gi < AP_COUNT(groups); gi++)
    for (size_t c = 0; c < AP_COUNT(all_colls); c++)
      for (int a = 0; a < COMM_ALGO_COUNT; a++) {
        if (!comm_algo_applies(all_colls[c], (comm_algo)a)) continue;
        double prev = 0;
        for (double S = 0; S < 1e12; S = S * 1.9 + 1) {
          double x = comm_time_s(&groups[gi], all_colls[c], (comm_algo)a, S, &d);
          if (x < prev) fail_msg("%s %s: %.6g s at %.6g bytes < %.6g s below", comm_coll_name(all_colls[c]),
                                 comm_algo_name((comm_algo)a), x, S, prev);
          prev = x;
        }
      }
}

static void test_degenerate(void **state) {
  (void)state;
  comm_group one = comm_group_flat(1, NV_BW, NV_A, COMM_LINK_SCALE_UP);
  assert_int_equal(one.n_levels, 0);
  comm_group g = comm_group_flat(8, NV_BW, NV_A, COMM_LINK_SCALE_UP);
  for (size_t c = 0; c < AP_COUNT(all_colls); c++)
    for (int a = 0; a < COMM_ALGO_COUNT; a++) {
      if (!comm_algo_applies(all_colls[c], (comm_algo)a)) continue;
      assert_true(comm_time_s(&one, all_colls[c], (comm_algo)a, 1e9, NULL) == 0);
      assert_true(comm_time_s(&g, all_colls[c], (comm_algo)a, 0, NULL) == 0);
      assert_true(comm_time_s(&g, all_colls[c], (comm_algo)a, 1, NULL) > 0);
    }
  assert_true(isinf(comm_time_s(&g, COMM_ALLGATHER, COMM_TREE, 1e6, NULL)));
  assert_false(comm_algo_applies(COMM_BROADCAST, COMM_TREE));
  assert_true(comm_algo_applies(COMM_SENDRECV, COMM_TREE));
}

/* ---- Groups from clusters ------------------------------------------------------------------------------------ */

static ap_cluster *load(ap_ctx *ctx, const char *spec) {
  ap_cluster *cl = NULL;
  if (ap_cluster_load(ctx, spec, &cl)) fail_msg("%s: %s", spec, ap_ctx_error(ctx));
  return cl;
}

static void assert_level(const comm_level *lv, const char *name, comm_link_class link, int64_t members, double bw,
                         double lat) {
  assert_string_equal(lv->name, name);
  assert_int_equal(lv->link, link);
  assert_int_equal(lv->members, members);
  assert_rel_close(lv->bw_Bps, bw, 1e-12);
  assert_rel_close(lv->latency_s, lat, 1e-12);
}

/* On 4 DGX H100 nodes: tensor parallelism of 8 (stride 1) stays on NVLink; data parallelism with stride 8
 * crosses the network, one member per node, each on its own NIC; a group of 16 spans two nodes with 8
 * members each. */
static void test_dgx_h100_axes(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  ap_cluster *cl = load(ctx, "dgx-h100:4x8");
  const hw_cluster *c = hw_cluster_of(cl);
  comm_group g;

  assert_int_equal(comm_group_from_cluster(ctx, c, 1, 8, 0, &g), AP_OK);
  assert_int_equal(g.n_ranks, 8);
  assert_int_equal(g.n_levels, 1);
  assert_level(&g.levels[0], "nvlink", COMM_LINK_SCALE_UP, 8, 450e9, 3.4e-6);

  assert_int_equal(comm_group_from_cluster(ctx, c, 8, 4, 0, &g), AP_OK);
  assert_int_equal(g.n_levels, 1);
  assert_level(&g.levels[0], "network", COMM_LINK_NETWORK, 4, 50e9, 9.6e-6);
  assert_rel_close(g.nic_share, 1, 0);
  comm_group flat = comm_group_flat(4, 50e9, 9.6e-6, COMM_LINK_NETWORK);
  assert_rel_close(comm_time_s(&g, COMM_ALLREDUCE, COMM_AUTO, 1e9, NULL),
                   comm_time_s(&flat, COMM_ALLREDUCE, COMM_AUTO, 1e9, NULL), 1e-12);

  assert_int_equal(comm_group_from_cluster(ctx, c, 1, 16, 0, &g), AP_OK);
  assert_int_equal(g.n_levels, 2);
  assert_level(&g.levels[0], "nvlink", COMM_LINK_SCALE_UP, 8, 450e9, 3.4e-6);
  assert_level(&g.levels[1], "network", COMM_LINK_NETWORK, 16, 50e9, 9.6e-6);
  /* Its ring gets all eight NICs of a node: with ideal tuning the bottleneck is 8 x 50 GB/s, not 50. */
  comm_tuning ideal = comm_tuning_ideal();
  double want = 2 * 14 * 3.4e-6 + 2 * 9.6e-6 + 2 * 15.0 / 16.0 * 1e9 / 400e9;
  assert_rel_close(comm_time_s(&g, COMM_ALLREDUCE, COMM_RING, 1e9, &ideal), want, 1e-12);

  /* Stride 2, size 8: four members per node over two nodes. */
  assert_int_equal(comm_group_from_cluster(ctx, c, 2, 8, 0, &g), AP_OK);
  assert_int_equal(g.n_levels, 2);
  assert_int_equal(g.levels[0].members, 4);
  assert_int_equal(g.levels[1].members, 8);

  /* The axes helper gives the same groups. */
  comm_axis axes[] = {{1, 8, 0}, {8, 4, 0}, {1, 32, 0}};
  comm_group out[3];
  assert_int_equal(comm_groups_for_axes(ctx, c, axes, 3, out), AP_OK);
  assert_int_equal(out[0].levels[0].link, COMM_LINK_SCALE_UP);
  assert_int_equal(out[1].levels[0].link, COMM_LINK_NETWORK);
  assert_int_equal(out[2].n_levels, 2);
  assert_int_equal(out[2].levels[1].members, 32);

  /* A group of one rank has no levels and costs nothing. */
  assert_int_equal(comm_group_from_cluster(ctx, c, 8, 1, 0, &g), AP_OK);
  assert_int_equal(g.n_levels, 0);
  assert_true(comm_time_s(&g, COMM_ALLREDUCE, COMM_AUTO, 1e9, NULL) == 0);

  /* Bad input reports through the context. */
  assert_int_equal(comm_group_from_cluster(ctx, c, 0, 4, 0, &g), AP_INVALID);
  assert_int_equal(comm_group_from_cluster(ctx, c, 8, 5, 0, &g), AP_INVALID);
  assert_int_equal(comm_group_from_cluster(ctx, c, 8, 4, -1, &g), AP_INVALID);
  assert_error_contains(ctx, "net_users_per_node");
  ap_cluster_free(cl);
  ap_ctx_free(ctx);
}

/* NIC sharing: two collectives over the network at once halve each device's share; fewer users than devices
 * give each at most the NIC it sits behind, which on a DGX (one NIC per GPU) is what it had already. */
static void test_nic_sharing(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  ap_cluster *cl = load(ctx, "dgx-h100:4x8");
  comm_group g;
  assert_int_equal(comm_group_from_cluster(ctx, hw_cluster_of(cl), 8, 4, 16, &g), AP_OK);
  assert_rel_close(g.nic_share, 0.5, 0);
  assert_rel_close(g.levels[0].bw_Bps, 25e9, 1e-12);
  assert_int_equal(comm_group_from_cluster(ctx, hw_cluster_of(cl), 8, 4, 2, &g), AP_OK);
  assert_rel_close(g.levels[0].bw_Bps, 50e9, 1e-12);
  /* NVLink is not the NICs: a TP group inside the node keeps its bandwidth. */
  assert_int_equal(comm_group_from_cluster(ctx, hw_cluster_of(cl), 1, 8, 16, &g), AP_OK);
  assert_rel_close(g.levels[0].bw_Bps, 450e9, 1e-12);
  ap_cluster_free(cl);

  /* Four NICs for eight GPUs: 25 GB/s each when all send, a whole NIC when only four do. */
  static const char text[] =
      "{\"name\": \"half-nics\", \"node\": \"dgx-h100\", \"n_nodes\": 4,"
      " \"inter_node\": {\"nics_per_node\": 4, \"nic_bw_Bps\": 50e9}}";
  assert_int_equal(hw_cluster_parse(ctx, "half-nics.json", text, sizeof text - 1, &cl), AP_OK);
  assert_int_equal(comm_group_from_cluster(ctx, hw_cluster_of(cl), 8, 4, 0, &g), AP_OK);
  assert_rel_close(g.levels[0].bw_Bps, 25e9, 1e-12);
  assert_int_equal(comm_group_from_cluster(ctx, hw_cluster_of(cl), 8, 4, 4, &g), AP_OK);
  assert_rel_close(g.levels[0].bw_Bps, 50e9, 1e-12);
  assert_int_equal(comm_group_from_cluster(ctx, hw_cluster_of(cl), 8, 4, 1, &g), AP_OK);
  assert_rel_close(g.levels[0].bw_Bps, 50e9, 1e-12);
  ap_cluster_free(cl);
  ap_ctx_free(ctx);
}

/* NVL72: the NVLink domain spans 18 trays, so a group of 144 is 72 per NVLink domain, and the network
 * egress of a rack is 72 NICs; the MI300X mesh gives a group of 4 only 3 of each GPU's 7 links. */
static void test_other_presets(void **state) {
  (void)state;
  ap_ctx *ctx = ap_ctx_new();
  ap_cluster *cl = load(ctx, "gb200-nvl72:144");
  const hw_cluster *c = hw_cluster_of(cl);
  comm_group g;
  assert_int_equal(comm_group_from_cluster(ctx, c, 1, 144, 0, &g), AP_OK);
  assert_int_equal(g.n_levels, 2);
  assert_level(&g.levels[0], "nvlink", COMM_LINK_SCALE_UP, 72, 900e9, 3.4e-6);
  assert_int_equal(g.levels[1].members, 144);
  assert_int_equal(g.levels[1].link, COMM_LINK_NETWORK);
  assert_int_equal(comm_group_from_cluster(ctx, c, 4, 18, 0, &g), AP_OK); /* one GPU per tray, 18 trays: a rack */
  assert_int_equal(g.n_levels, 1);
  assert_int_equal(g.levels[0].link, COMM_LINK_SCALE_UP);
  assert_int_equal(comm_group_from_cluster(ctx, c, 72, 2, 0, &g), AP_OK);
  assert_int_equal(g.n_levels, 1);
  assert_int_equal(g.levels[0].link, COMM_LINK_NETWORK);
  ap_cluster_free(cl);

  cl = load(ctx, "mi300x:2x8");
  c = hw_cluster_of(cl);
  assert_int_equal(comm_group_from_cluster(ctx, c, 1, 4, 0, &g), AP_OK);
  assert_level(&g.levels[0], "xgmi", COMM_LINK_SCALE_UP, 4, 448e9 * 3 / 7, 3.4e-6);
  assert_int_equal(comm_group_from_cluster(ctx, c, 1, 16, 0, &g), AP_OK);
  assert_int_equal(g.n_levels, 2);
  assert_level(&g.levels[0], "xgmi", COMM_LINK_SCALE_UP, 8, 448e9, 3.4e-6);
  ap_cluster_free(cl);
  ap_ctx_free(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names_round_trip),
      cmocka_unit_test(test_tuning_table),
      cmocka_unit_test(test_textbook_table),
      cmocka_unit_test(test_textbook_sweep),
      cmocka_unit_test(test_tuning_applies),
      cmocka_unit_test(test_hierarchical_is_sum_of_phases),
      cmocka_unit_test(test_dispatch_dedup),
      cmocka_unit_test(test_multilevel_ring_and_tree),
      cmocka_unit_test(test_auto_is_minimum),
      cmocka_unit_test(test_monotonic_in_bytes),
      cmocka_unit_test(test_degenerate),
      cmocka_unit_test(test_dgx_h100_axes),
      cmocka_unit_test(test_nic_sharing),
      cmocka_unit_test(test_other_presets),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
