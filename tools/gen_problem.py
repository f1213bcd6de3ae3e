#!/usr/bin/env python3
"""Writes a large random autopar-sharding-problem/1 file (docs/solve.md) for the wall-clock budget tests
(issue 19, class 3: `solve --time-budget` on 1,000 and more nodes), with the standard library only.

Usage: gen_problem.py N S OUT [SEED]
  N nodes with S strategies each; node i has an edge from i-1 and, every third node, one from a random earlier
  node (a DAG that is not series-parallel, so that the exact DP refuses and the ILP has pairs to link); costs
  uniform in [0, 10) (compute, communication) and [0, 5) (edges), memory in [1e8, 1e9) bytes with one
  liveness set per 8 consecutive nodes under a budget that binds (70% of the largest set's worst case).
"""
import json
import random
import sys


def problem(n, s, seed):
    rnd = random.Random(seed)
    r = lambda hi: round(rnd.uniform(0, hi), 3)
    nodes = [{"compute": [r(10) for _ in range(s)], "communication": [r(10) for _ in range(s)],
              "memory_bytes": [float(rnd.randrange(100, 1000)) * 1e6 for _ in range(s)]} for _ in range(n)]
    edges = []
    for i in range(1, n):
        edges.append({"from": i - 1, "to": i, "cost": [[r(5) for _ in range(s)] for _ in range(s)]})
        if i % 3 == 0 and i > 2:
            edges.append({"from": rnd.randrange(0, i - 1), "to": i, "cost": [[r(5) for _ in range(s)] for _ in range(s)]})
    live = [list(range(k, min(n, k + 8))) for k in range(0, n, 8)]
    budget = 0.7 * max(sum(max(nodes[i]["memory_bytes"]) for i in pt) for pt in live)
    return {"format": "autopar-sharding-problem/1", "name": "generated %d x %d seed %d" % (n, s, seed),
            "nodes": nodes, "edges": edges, "liveness": live, "memory_budget_bytes": budget}


def main(argv):
    n, s, out = int(argv[1]), int(argv[2]), argv[3]
    seed = int(argv[4]) if len(argv) > 4 else 1
    with open(out, "w") as f:
        json.dump(problem(n, s, seed), f, separators=(",", ":"))


if __name__ == "__main__":
    main(sys.argv)
