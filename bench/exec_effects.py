#!/usr/bin/env python3
"""bench/exec_effects: what separates the executor's measured step time from its cost model on this machine
(issue 11; `make bench-exec-effects`, not part of `make test`; a few minutes). Standard library only.

Each effect is measured by running the same plan twice with one thing changed, on bench/executor.py's 4-layer
hidden-256 Llama (global batch 8 x 128 tokens), and printed with the wall time, the slowest rank's CPU time per
step (median of the steps after the first) and the 1-minute load average before the run:

  A. CFS autogroups: a run in the caller's session against one in its own session whose autogroup nice is
     --nice. Linux shares the CPUs between sessions first and applies nice only inside a session
     (kernel/sched/autogroup.c, sched(7) "The autogroup feature"), so on a shared machine `nice` alone gives the
     ranks no priority: what they get is what the other sessions leave.
  B. Ranks against cores: dp 2 and dp 4 (4 ranks on the 2 cores, OpenMPI's yield when oversubscribed).
  C. OpenMPI's busy polling: pp 2 gpipe (stages wait in receives) with the default progress (a waiting rank
     spins: mpi_yield_when_idle is false unless oversubscribed, `ompi_info --param mpi all --level 9`) and with
     --mca mpi_yield_when_idle 1.
  D. Two processes at once: `autopar profile --quick` on 1 rank and on 2 ranks (both computing at once): the
     GEMM and kernel rates of the two.
  E. OpenBLAS threads: the threads of each rank process while it runs and the CPU time each used
     (/proc/PID/task), to show one computing thread per rank (OPENBLAS_NUM_THREADS=1 from `autopar run`).
  F. Page faults: tp 2 with sequence parallelism, pp 2 1f1b, and dp 2 ZeRO 2 with 2 micro-batches, under the
     executor's three allocation policies (AUTOPAR_MALLOC, src/exec/rank.c): glibc's default throughout, the
     default `cache` (glibc's for the first step, then trimming off: freed memory stays mapped for the next
     step) and `keep` (mmap threshold 32 MiB and no trimming from the start): minor faults, time and peak RSS.
  G. Collectives inside a step: tp 2 with sequence parallelism with AUTOPAR_MPI_SKEW=1 (a barrier before each
     collective, timed apart): each collective's own time per call against the profile's price at its size (its
     measured points interpolated, as src/cost/exec_cpu.c coll_s does), and the wait for the group's last rank (skew: preemption and noise, which the model has no term for).
  H. memcpy by the distance of destination from source modulo 4096 (libc's memcpy through ctypes, 256 KiB, the
     size the profile's copy rate is timed at): the profile's copy once used two blocks malloc'd one after the
     other, 16 bytes apart modulo 4096, which on this machine is a slow case.
"""
import ctypes
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import executor  # noqa: E402  (the sweep's model, plan helper, session and load helpers)


def coll_price(fit, b):
    """The cost model's price of one collective of b bytes from the profile's entry (src/cost/exec_cpu.c coll_s):
    its points interpolated linearly (the least point's time below it, the last segment's slope past the
    largest), the alpha-beta fit where it has fewer than two points."""
    pts = fit.get("points", [])
    if len(pts) < 2:
        return fit["alpha_s"] + b / fit["bw_Bps"]
    xs, ts = [p["bytes"] for p in pts], []
    for p in pts:
        ts.append(max(p["time_s"], ts[-1]) if ts else p["time_s"])
    if b <= xs[0]:
        return ts[0]
    k = 1
    while k < len(xs) - 1 and b > xs[k]:
        k += 1
    return ts[k - 1] + (b - xs[k - 1]) * (ts[k] - ts[k - 1]) / (xs[k] - xs[k - 1])


def run(a, work, name, plan, env=None, own_session=True, mpirun=None, watch=False):
    """One `autopar run` of plan (4 steps); returns a dict of its figures."""
    path = os.path.join(work, name + ".json")
    with open(path, "w") as f:
        json.dump(plan, f)
    cmd = [a.bin, "run", "--model", os.path.join(work, "llama.json"), "--plan", path, "--steps", str(a.steps), "--json"]
    if mpirun:
        cmd += ["--mpirun", mpirun]
    e = dict(os.environ, **(env or {}))
    l0 = executor.load1()
    pre = executor.session(a.nice) if own_session else None
    threads = {}
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e, preexec_fn=pre)
    if watch:  # sample the rank processes' threads (effect E)
        def sample():
            while p.poll() is None:
                for pid in os.listdir("/proc"):
                    if not pid.isdigit():
                        continue
                    try:
                        comm = open(f"/proc/{pid}/comm").read().strip()
                        if comm != "autopar-rank" or os.getsid(int(pid)) != p.pid:
                            continue
                        if b"--result" not in open(f"/proc/{pid}/cmdline", "rb").read():
                            continue  # the --check run before the launch
                        for tid in os.listdir(f"/proc/{pid}/task"):
                            st = open(f"/proc/{pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()
                            threads[(pid, tid)] = (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")
                    except (OSError, ValueError, IndexError):
                        continue
                time.sleep(0.2)
        th = threading.Thread(target=sample)
        th.start()
    out, err = p.communicate()
    if watch:
        th.join()
    if p.returncode != 0:
        return {"error": err.strip()[-300:]}
    d = json.loads(out)
    st = d["steps"][1:] or d["steps"]
    r = {"wall": d["iteration_time_s"], "cpu": statistics.median(s["cpu_s"] for s in st), "load": l0,
         "faults": d.get("minor_faults_per_step", float("nan")), "mpi": d.get("mpi", []), "steps": len(st),
         "rss": max(d.get("peak_rss_bytes", [0])) / 2**20}
    if watch:
        r["threads"] = threads
    return r


def line(label, r):
    if "error" in r:
        return f"  {label:42s} failed: {r['error']}"
    return (f"  {label:42s} wall {r['wall']:.3f} s  cpu {r['cpu']:.3f} s  cpu/wall {r['cpu'] / r['wall']:.2f}  "
            f"load {r['load']:.1f}")


def profile(a, work, ranks):
    out = os.path.join(work, f"prof{ranks}.json")
    subprocess.run([a.bin, "profile", "--ranks", str(ranks), "--quick", "-o", out], check=True, capture_output=True,
                   preexec_fn=executor.session(a.nice))
    with open(out) as f:
        return json.load(f)["device"]["profile"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="bin/autopar")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--nice", type=int, default=-10, help="autogroup nice of the runs' own sessions (default -10)")
    ap.add_argument("--keep", help="folder for the plans and profiles (default: a temporary one)")
    ap.add_argument("--only", default="ABCDEFGH", help="the effects to measure (letters, default all)")
    a = ap.parse_args()
    work = a.keep or tempfile.mkdtemp(prefix="autopar-exec-effects.")
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "llama.json"), "w") as f:
        json.dump(executor.LLAMA, f)
    plan = executor.plan
    dp2 = plan({"dp": 2}, {"micro_batch_size": 4}, {"zero_stage": 0})
    print(f"{os.cpu_count()} cores; {executor.autogroup_note(a.nice)}; load {executor.load1():.1f}", flush=True)
    if "A" in a.only:
        print("A. scheduler share (CFS autogroups), dp 2:")
        print(line("caller's session (its nice only)", run(a, work, "a-same", dp2, own_session=False)), flush=True)
        print(line(f"own session, autogroup nice {a.nice}", run(a, work, "a-own", dp2)), flush=True)
    if "B" in a.only:
        print("B. ranks against cores (same global batch):")
        print(line("dp 2 (2 ranks)", run(a, work, "b-dp2", dp2)), flush=True)
        print(line("dp 4 (4 ranks on the cores)", run(a, work, "b-dp4", plan({"dp": 4}, {"micro_batch_size": 2},
                                                                              {"zero_stage": 0}))), flush=True)
    if "C" in a.only:
        print("C. OpenMPI busy polling, pp 2 gpipe mbs 2 (stages wait in receives):")
        gp = plan({"pp": 2}, {"micro_batch_size": 2, "schedule": "gpipe"})
        root = " --allow-run-as-root" if os.geteuid() == 0 else ""
        base = f"mpirun --oversubscribe{root} -x OPENBLAS_NUM_THREADS"
        print(line("default (a waiting rank spins)", run(a, work, "c-spin", gp, mpirun=base)), flush=True)
        print(line("--mca mpi_yield_when_idle 1", run(a, work, "c-yield", gp,
                                                       mpirun=base + " --mca mpi_yield_when_idle 1")), flush=True)
    if "D" in a.only:
        print("D. one process against two at once (autopar profile --quick, thread CPU time):")
        p1, p2 = profile(a, work, 1), profile(a, work, 2)
        for g1, g2 in zip(p1["gemm"], p2["gemm"]):
            print(f"  gemm {g1['op']:8s} {g1['layout']} {g1['m']:>5d}x{g1['n']:<5d}x{g1['k']:<5d} 1 rank "
                  f"{g1['flop_per_s'] / 1e9:6.1f} GFLOP/s  2 ranks {g2['flop_per_s'] / 1e9:6.1f}  "
                  f"ratio {g2['time_s'] / g1['time_s']:.2f}")
        for k in ("norm_fwd_s", "swiglu_fwd_s", "attn_fwd_s", "attn_bwd_s", "xent_s", "adam_s", "copy_s"):
            print(f"  kernel {k:14s} 1 rank {p1['executor'][k]:.3g} s/unit  2 ranks {p2['executor'][k]:.3g}  "
                  f"ratio {p2['executor'][k] / p1['executor'][k]:.2f}")
        print(f"  memcpy bandwidth: 1 rank {p1['mem_bw_Bps'] / 1e9:.1f} GB/s, 2 ranks {p2['mem_bw_Bps'] / 1e9:.1f} GB/s "
              f"per rank", flush=True)
    if "E" in a.only:
        print("E. threads of each rank while dp 2 runs (CPU seconds per thread):")
        r = run(a, work, "e-threads", dp2, watch=True)
        print(line("dp 2", r))
        by = {}
        for (pid, tid), cpu in sorted(r.get("threads", {}).items()):
            by.setdefault(pid, []).append(cpu)
        for pid, cpus in by.items():
            cpus.sort(reverse=True)
            print(f"  rank pid {pid}: {len(cpus)} threads, CPU s {', '.join(f'{c:.2f}' for c in cpus)}")
        print(f"  OPENBLAS_NUM_THREADS=1 from autopar run: one thread computes, the others are OpenMPI's "
              f"(progress, event loop)", flush=True)
    tp = plan({"tp": 2}, {"micro_batch_size": 8}, None, {"sequence_parallel": True})
    if "F" in a.only:
        print("F. page faults and the heap policy:")
        z2 = plan({"dp": 2}, {"micro_batch_size": 2}, {"zero_stage": 2})
        pp = plan({"pp": 2}, {"micro_batch_size": 2, "schedule": "1f1b"})
        for label, pl in (("tp 2 sp", tp), ("pp 2 1f1b", pp), ("dp 2 ZeRO 2, 2 micro-batches", z2)):
            for pol in ("glibc", "cache", "keep"):
                r = run(a, work, "f-" + pol, pl, env={"AUTOPAR_MALLOC": pol})
                print(line(f"{label}, {pol}: {r.get('faults', 0):.0f} faults/step, {r.get('rss', 0):.1f} MiB", r),
                      flush=True)
    if "G" in a.only:
        print("G. collectives inside a step, tp 2 with sequence parallelism (AUTOPAR_MPI_SKEW=1):")
        cluster = os.path.join(work, "prof2.json")
        prof = profile(a, work, 2) if not os.path.exists(cluster) else json.load(open(cluster))["device"]["profile"]
        fits = {(c["op"], c["ranks"]): c for c in prof["comm"]}
        r = run(a, work, "g-skew", tp, env={"AUTOPAR_MPI_SKEW": "1"})
        print(line("tp 2 sp with a barrier before each collective", r))
        for m in r.get("mpi", []):
            per_step = m["time_s"] / r["steps"]
            if m["op"] == "skew":
                print(f"  {m['at']:9s} wait for the last rank: {1e3 * per_step:.1f} ms/step over {m['calls'] / r['steps']:.0f} calls")
                continue
            f = fits.get((m["op"], 2))
            b = m["bytes"] / m["calls"]
            fit = coll_price(f, b) if f else float("nan")
            print(f"  {m['at']:9s} {m['op']:14s} {m['calls'] / r['steps']:4.0f} calls/step of {b / 2**20:6.2f} MiB: "
                  f"{1e3 * m['time_s'] / m['calls']:.3f} ms/call measured, {1e3 * fit:.3f} ms the profile's price "
                  f"(x{m['time_s'] / m['calls'] / fit:.2f}); {1e3 * per_step:.1f} ms/step")
    if "H" in a.only:
        print("H. memcpy of 256 KiB by (destination - source) mod 4096 (libc memcpy via ctypes, thread CPU time):")
        libc = ctypes.CDLL(None)
        libc.memcpy.restype = ctypes.c_void_p
        libc.memcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        n = 256 << 10
        buf = ctypes.create_string_buffer(2 * n + 3 * 4096)
        base = (ctypes.addressof(buf) + 4095) // 4096 * 4096
        for off in (0, 16, 32, 64, 2048):
            src, dst = base, base + n + 4096 + off
            best = float("inf")
            for _ in range(5):
                t0 = time.thread_time()
                for _ in range(50):
                    libc.memcpy(dst, src, n)
                best = min(best, (time.thread_time() - t0) / 50)
            print(f"  distance {off:4d} mod 4096: {1e6 * best:6.1f} us ({best / n:.2g} s/byte)")
    print(f"files in {work}")


if __name__ == "__main__":
    main()
