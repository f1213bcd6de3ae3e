#!/usr/bin/env python3
"""bench/graph_executor: op-level plans of ONNX graphs, predicted against measured (issue 21, item 5; `make
bench-graph-executor`, not part of `make test`). Standard library only.

1. `autopar profile --ranks 2 -o CLUSTER` measures this machine (unless --cluster names a profile already written).
2. For each case (the fixtures of tests/data/graph/ at a global batch that makes a step take milliseconds to a
   second here), `autopar plan --model NET.onnx --cluster CLUSTER --gbs N [--annotate ...] --json` writes the
   plan: the planner's own, and plans with output specs fixed (data parallel, channel/column splits);
   its predicted iteration time is the plan's `time.iteration_s` (the graph cost model on the profile).
3. `autopar run --model NET.onnx --plan PLAN --data ... --steps S --json` measures it, in a session of its own
   whose CFS autogroup nice is --nice (default -10, as bench/executor.py; the 2 ranks then get the cores they
   need on a machine shared with other jobs): the median of the steps after the --warmup first (default 2).
   The executor pins OpenBLAS to 1 thread per rank, as the profile measured.

Prints per case the predicted and measured iteration time and their ratio, the slowest rank's CPU time per step
(median after the first; a diagnostic: on a machine shared with other jobs wall time includes preemption), then
the MAPE of predicted against
measured (|pred - meas| / meas, mean over cases) and the 1-minute load average at the start and end.
Usage: python3 bench/graph_executor.py [--bin bin/autopar] [--cluster PROFILE.json] [--steps 6]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data", "graph")

# model, global batch, annotations (None: the planner's own plan), what the plan is. The global batches make a
# step take about 0.1-1 s here, so that the step is the graph's work and not the fixed cost of a few MPI calls
# (the fixtures' data files hold 24 samples; the executor takes the batches in order and wraps around).
CASES = [
    ("cnn", 1024, None, "planner"),
    ("cnn", 2048, None, "planner"),
    ("cnn", 2048, "/stem/Conv=S0,R,R,R;/bn0/BatchNormalization=S0,R,R,R;/Concat=S0,R,R,R;"
     "/bn1/BatchNormalization=S0,R,R,R;/down/Conv=S0,R,R,R;/head/Gemm=S0,R", "data parallel"),
    ("cnn", 2048, "/b2/Conv=R,S0,R,R;/b3/Conv=R,S0,R,R;/down/Conv=R,S0,R,R", "channel splits"),
    ("mlp", 65536, None, "planner"),
    ("mlp", 65536, "/fc1/Gemm=S0,R;/Relu=S0,R;/fc2/Gemm=S0,R;/Tanh=S0,R;/fc3/Gemm=S0,R", "data parallel"),
    ("mlp", 65536, "/fc1/Gemm=R,S0;/Relu=R,S0", "column split"),
    # No encoder case: tests/data/graph/encoder.onnx runs with its batch of 8 whole on every rank only (its
    # attention Reshapes hold the export's batch; docs/executor.md "Limits"), and the plans the planner makes for
    # it on a 2-rank profile split the sequence, which the executor refuses (the positional Add does not
    # broadcast over a split sequence; a Reshape gets a spec of the wrong rank).
]


def session(nice):
    """A preexec_fn: a new session (its own CFS autogroup) whose autogroup nice is `nice`, as bench/executor.py
    starts each run (Linux /proc/self/autogroup, sched(7) "The autogroup feature"); left at the default where
    that is refused."""
    def start():
        os.setsid()
        try:
            with open("/proc/self/autogroup", "w") as f:
                f.write(str(nice))
        except OSError:
            pass
    return start


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def run(cmd, nice=None):
    p = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=session(nice) if nice is not None else None)
    if p.returncode:
        raise SystemExit("graph_executor: %s: exit %d: %s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
    return p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "bin", "autopar"))
    ap.add_argument("--cluster")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2, help="leading steps left out of the median (default 2)")
    ap.add_argument("--nice", type=int, default=-10, help="autogroup nice of each run's own session (default -10)")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="graph-bench.")
    cluster = a.cluster
    if not cluster:
        cluster = os.path.join(work, "profile.json")
        run([a.bin, "profile", "--ranks", "2", "-o", cluster], a.nice)
    ag = subprocess.run(["cat", "/proc/self/autogroup"], preexec_fn=session(a.nice), capture_output=True, text=True)
    print("each run in a session of its own: %s (asked nice %d); warm-up steps left out: %d; median of %d steps"
          % (ag.stdout.strip() or "no autogroup", a.nice, a.warmup, max(a.steps - a.warmup, 1)))
    load0 = os.getloadavg()[0]
    errs, cerrs = [], []
    print("%-4s %5s %-15s %-6s %12s %12s %7s %10s" % ("net", "gbs", "plan", "mesh", "predicted_s", "measured_s", "ratio",
                                                     "cpu_s"))
    for i, (model, gbs, ann, what) in enumerate(CASES):
        onnx = os.path.join(DATA, model + ".onnx")
        cmd = [a.bin, "plan", "--model", onnx, "--cluster", cluster, "--gbs", str(gbs), "--json"]
        if ann:
            cmd += ["--annotate", ann]
        doc = json.loads(run(cmd))
        path = os.path.join(work, "%d.json" % i)
        with open(path, "w") as f:
            json.dump(doc, f)
        pred = doc["time"]["iteration_s"]
        res = json.loads(run([a.bin, "run", "--model", onnx, "--plan", path, "--data",
                              os.path.join(DATA, model + ".data.safetensors"), "--steps", str(a.steps),
                              "--optimizer", "sgd", "--json"], a.nice))
        kept = res["steps"][a.warmup:] or res["steps"][-1:]
        meas = median([s["time_s"] for s in kept])
        cpu = median([s["cpu_s"] for s in kept])
        errs.append(abs(pred - meas) / meas)
        cerrs.append(abs(pred - cpu) / cpu)
        print("%-4s %5d %-15s %-6s %12.5f %12.5f %7.2f %10.5f" % (model, gbs, what, "x".join(map(str, doc["mesh"]["shape"])),
                                                                pred, meas, pred / meas, cpu))
    print("MAPE %.1f%% over %d op-level plans against wall time; %.1f%% against the slowest rank's CPU time "
          "(load average %.1f -> %.1f)" % (100 * sum(errs) / len(errs), len(errs), 100 * sum(cerrs) / len(cerrs),
                                           load0, os.getloadavg()[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
