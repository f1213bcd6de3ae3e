#!/usr/bin/env python3
"""tests/graph_exec.py: the graph executor's proof in `make test` (issue 21, item 5), run by tests/sh_graph_exec.sh.

On the three models of tests/data/graph/ (an MLP, a CNN with five branches concatenated and BatchNormalization,
a transformer encoder as torch.onnx.export writes it in training mode; made by tests/torch_graph_reference.py):

* the serial run (`autopar plan --cluster h100:1 --export json -o`, then `autopar run`) equals PyTorch's losses
  recorded in tests/data/graph/torch_losses.json (relative 1e-5 on every step);
* every plan kind equals the serial run (relative 1e-5 on every step): the planner's own plan on 2 devices,
  data parallelism, column and row splits with their pending sums, 2-D splits (S0, S1, S01) on a [2, 2] mesh,
  resharding between ops, SyncBN statistics, a Concat of 5 split on either axis. Each plan is the planner's,
  with some ops' output specs fixed by --annotate; the test checks that the plan has the kind it is there for;
* a plan the executor cannot run exits 2 naming what it refuses (several pipeline stages; a spec);
* packed projections (tests/data/graph/packed.*, written by tests/gen_packed_model.py with float64 reference
  losses in packed_losses.json): the plan reads them in parts (<MatMul>#q), the serial run equals the
  reference, and the parts split by columns (heads), by rows (pending sum, the bias after it), on a [2, 2] mesh
  and over 2 stages each equal the serial run; a plan missing a part exits 2 naming the MatMul.

Prints TAP lines ("ok N - ..."). Standard library only.
Usage: python3 tests/graph_exec.py BIN
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "graph")
REF = json.load(open(os.path.join(DATA, "torch_losses.json")))
N = 0


def tap(ok, msg):
    global N
    N += 1
    print("%s %d - %s" % ("ok" if ok else "not ok", N, msg))
    sys.stdout.flush()


def plan(bin_, model, cluster, out, annotate=None):
    cmd = [bin_, "plan", "--model", os.path.join(DATA, model + ".onnx"), "--cluster", cluster, "--gbs",
           str(REF["gbs"]), "--json"]
    if annotate:
        cmd += ["--annotate", annotate]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        return None, p.stderr.strip()
    with open(out, "w") as f:
        f.write(p.stdout)
    return json.loads(p.stdout), ""


def train(bin_, model, plan_path):
    m = REF["models"][model]
    cmd = [bin_, "run", "--model", os.path.join(DATA, model + ".onnx"), "--plan", plan_path, "--data",
           os.path.join(DATA, model + ".data.safetensors"), "--init", os.path.join(DATA, model + ".init.safetensors"),
           "--steps", str(REF["steps"]), "--lr", str(REF["lr"]), "--optimizer", m["optimizer"], "--json"]
    if m["optimizer"] == "adamw":
        cmd += ["--beta1", str(REF["beta1"]), "--beta2", str(REF["beta2"]), "--eps", str(REF["eps"]),
                "--weight-decay", str(REF["weight_decay"])]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        return None, "exit %d: %s" % (p.returncode, p.stderr.strip())
    return [s["loss"] for s in json.loads(p.stdout)["steps"]], ""


def rel(a, b):
    return max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b)) if a and len(a) == len(b) else float("inf")


def kinds(doc):
    """The plan kinds a plan/2 document holds."""
    k = set()
    flat = json.dumps([(o["output_spec"], o["input_specs"], o.get("weight_specs"), o.get("weight_spec")) for o in doc["ops"]])
    if '"S0"' in flat and '"S1"' in flat:
        k.add("2-D")
    prod = {}
    for o in doc["ops"]:
        outs = o["output_spec"] if o["output_spec"] and isinstance(o["output_spec"][0], list) else [o["output_spec"]]
        ws = list((o.get("weight_specs") or {}).values()) + ([o["weight_spec"]] if "weight_spec" in o else [])
        specs = [d for s in outs + o["input_specs"] + ws for d in s]
        if any(d == "S01" for d in specs):
            k.add("2-D S01")
        if o["partial"]:
            k.add("row (pending sum)")
        if any(d != "R" for w in ws for d in w):
            k.add("split weight")
        if outs[0] and outs[0][0] != "R" and all(d == "R" for w in ws for d in w) and ws:
            k.add("data parallel")
        if any(o["comm"]) and any(c["kind"] in ("all-gather", "all-to-all", "reduce-scatter") for c in o["comm"]):
            k.add("resharding")
        if o["op_type"] == "Concat" and outs[0][0] != "R" or o["op_type"] == "Concat" and any(d != "R" for d in outs[0]):
            k.add("split concat")
        if o["op_type"] == "BatchNormalization" and outs[0][0] != "R":
            k.add("syncbn")
        prod[o["name"]] = outs[0]
    return k


CASES = [
    # model, cluster, annotate, kinds the plan must hold
    ("mlp", "h100:2", None, set()),
    ("mlp", "h100:2", "/fc1/Gemm=S0,R;/Relu=S0,R;/fc2/Gemm=S0,R;/Tanh=S0,R;/fc3/Gemm=S0,R", {"data parallel"}),
    ("mlp", "h100:2", "/fc1/Gemm=R,S0;/fc2/Gemm=R,R", {"split weight", "resharding"}),
    # Megatron's column-then-row MLP on a 1-axis mesh: the planner's column plan with fc2 edited to the row split
    # (its weight [N, K] split on K, its input on K, a pending sum); `estimate --plan` checks it is legal.
    ("mlp", "h100:2", None, {"split weight", "row (pending sum)"}, "row"),
    ("encoder", "h100:4", "/enc/layers.0/linear1/MatMul=S0,R,S1;/enc/layers.1/linear1/MatMul=R,R,S01;/emb/Gather=S0,R,R",
     {"2-D", "2-D S01", "row (pending sum)", "split weight", "resharding"}),
    ("cnn", "h100:4", "/stem/Conv=S0,R,R,R;/bn0/BatchNormalization=S0,R,R,R;/b2/Conv=R,S1,R,R;/Concat=S1,R,R,R;"
     "/bn1/BatchNormalization=R,S01,R,R;/head/Gemm=R,S0",
     {"2-D", "2-D S01", "row (pending sum)", "syncbn", "split concat", "resharding"}),
    ("cnn", "h100:2", "/stem/Conv=S0,R,R,R;/bn0/BatchNormalization=S0,R,R,R;/Concat=S0,R,R,R;/bn1/BatchNormalization=S0,R,R,R;"
     "/down/Conv=S0,R,R,R;/head/Gemm=S0,R", {"data parallel", "syncbn", "split concat"}),
]


PIPES = [
    # model, annotations of the one-axis plan, the first op of each stage after the first (a name part), micro-batches
    ("mlp", "/fc1/Gemm=R,S0;/fc2/Gemm=R,R", ["/fc2/Gemm"], 2, {"split weight"}),
    # One micro-batch: torch.onnx.export writes the attention's Reshape targets with the export's batch of 8.
    ("encoder", "/emb/Gather=S0,R,R;/enc/layers.1/linear1/MatMul=R,R,S0", ["layers.1/"], 1, {"data parallel", "split weight"}),
    ("cnn", "/stem/Conv=S0,R,R,R;/bn0/BatchNormalization=S0,R,R,R;/b2/Conv=R,S0,R,R;/down/Conv=S0,R,R,R",
     ["/Concat", "/down/Conv"], 2, {"syncbn", "split weight"}),
]


PACKED = json.load(open(os.path.join(DATA, "packed_losses.json")))
PACKED_PARTS = ["/qkv/MatMul#0", "/qkv/MatMul#1", "/qkv/MatMul#2", "/glu/MatMul#0", "/glu/MatMul#1"]


def packed_train(bin_, plan_path):
    cmd = [bin_, "run", "--model", os.path.join(DATA, "packed.onnx"), "--plan", plan_path, "--data",
           os.path.join(DATA, "packed.data.safetensors"), "--init", os.path.join(DATA, "packed.init.safetensors"),
           "--steps", str(PACKED["steps"]), "--lr", str(PACKED["lr"]), "--optimizer", "sgd", "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        return None, "exit %d: %s" % (p.returncode, p.stderr.strip())
    return [s["loss"] for s in json.loads(p.stdout)["steps"]], ""


def packed_plan(bin_, cluster, out, annotate=None):
    cmd = [bin_, "plan", "--model", os.path.join(DATA, "packed.onnx"), "--cluster", cluster, "--gbs",
           str(PACKED["gbs"]), "--json"] + (["--annotate", annotate] if annotate else [])
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        return None
    with open(out, "w") as f:
        f.write(p.stdout)
    return json.loads(p.stdout)


def packed_cases(bin_, work):
    """Packed projections (src/model/onnx_packed.c): the plan names one MatMul per part ("<MatMul>#q"); the
    executor runs each part under its spec on its slice of the packed weight (src/exec/graph/gx_packed.c)."""
    path = os.path.join(work, "packed.serial.json")
    doc = packed_plan(bin_, "h100:1", path)
    names = [o["name"] for o in doc["ops"]] if doc else []
    tap(doc is not None and all(n in names for n in PACKED_PARTS),
        "packed: the plan reads both packed projections in parts (ops %s)" % names)
    serial, err = packed_train(bin_, path)
    r = rel(serial, PACKED["losses"])
    tap(r <= 1e-5, "packed: the serial run equals the float64 reference of tests/gen_packed_model.py (%d steps, max "
        "relative difference %.2e) %s" % (PACKED["steps"], r, err))
    cases = [
        ("h100:2", None, None, set()),
        # heads/parts split: each part's columns on S0 (the qkv weight stored [3N, K] as torch's Linear, the glu
        # weight [K, 2N]); the head then row-parallel with its pending sum.
        ("h100:2", "/qkv/MatMul#0=R,S0;/glu/MatMul#0=R,S0", None, {"split weight", "row (pending sum)", "resharding"}),
        ("h100:4", "/qkv/MatMul#0=S0,S1;/Tanh=S0,S1;/glu/MatMul#0=S1,S0", None, {"2-D", "2-D S01", "split weight"}),
        # each qkv part row-parallel (its input and weight split on K, a pending sum) and its bias added once
        # after the sum (the executor's bias Add of the part, gx_packed.c)
        ("h100:2", None, "row", {"split weight", "row (pending sum)"}),
    ]
    for i, (cluster, ann, edit, need) in enumerate(cases):
        path = os.path.join(work, "packed.%d.json" % i)
        doc = packed_plan(bin_, cluster, path, ann)
        if doc is None:
            tap(False, "packed on %s: plan failed" % cluster)
            continue
        if edit == "row":
            for o in doc["ops"]:
                if o["name"].startswith("/qkv/MatMul#"):
                    o["input_specs"], o["output_spec"], o["partial"] = [["R", "S0"]], ["R", "R"], [0]
                    o["weight_specs"] = {"qkv.weight": ["R", "S0"], "qkv.bias": ["R"]}
                    o["weight_spec"] = ["R", "S0"]
            # An executor check only: `estimate --plan` refuses this edit ("its specs must be those of op
            # /qkv/MatMul#0, which it shares one strategy with"), though every part carries the same specs.
            json.dump(doc, open(path, "w"))
        have = kinds(doc)
        parts_split = any(d != "R" for o in doc["ops"] if o["name"] in PACKED_PARTS
                          for w in (o.get("weight_specs") or {"w": o.get("weight_spec") or []}).values() for d in w)
        if ann or edit:
            have = have | ({"parts split"} if parts_split else set())
            need = need | {"parts split"}
        tap(need <= have, "packed on %s mesh %s: the plan holds %s (has %s)" %
            (cluster, doc["mesh"]["shape"], sorted(need), sorted(have)))
        got, err = packed_train(bin_, path)
        r = rel(got, serial)
        tap(r <= 1e-5, "packed on %s mesh %s (%s): equals the serial run over %d steps, max relative difference %.2e %s"
            % (cluster, doc["mesh"]["shape"], ", ".join(sorted(have)) or "replicated", PACKED["steps"], r, err))
    # Two stages cut between the two packed projections, 2 micro-batches.
    path = os.path.join(work, "packed.pipe.json")
    doc = packed_plan(bin_, "h100:2", path, "/qkv/MatMul#0=R,S0;/glu/MatMul#0=R,S0")
    if doc is not None:
        names = [o["name"] for o in doc["ops"]]
        cut = names.index("/glu/MatMul#0")
        doc["stages"] = [{"first_op": names[0], "last_op": names[cut - 1], "submesh": [1, 2], "mesh": [2]},
                         {"first_op": names[cut], "last_op": names[-1], "submesh": [1, 2], "mesh": [2]}]
        doc["micro_batches"] = 2
        json.dump(doc, open(path, "w"))
        got, err = packed_train(bin_, path)
        r = rel(got, serial)
        tap(r <= 1e-5, "packed: 2 stages of mesh [2] on 4 ranks, 2 micro-batches: equals the serial run, max relative "
            "difference %.2e %s" % (r, err))
    else:
        tap(False, "packed: pipeline plan failed")
    # A plan that names some parts of a packed MatMul but not all: exit 2 naming the MatMul.
    doc = json.load(open(os.path.join(work, "packed.serial.json")))
    doc["ops"] = [o for o in doc["ops"] if o["name"] != "/qkv/MatMul#2"]
    bad = os.path.join(work, "packed.bad.json")
    json.dump(doc, open(bad, "w"))
    got, err = packed_train(bin_, bad)
    tap(got is None and "exit 2" in err and "/qkv/MatMul" in err and "part" in err,
        "packed: a plan missing a part exits 2 naming the MatMul: %s" % err[:300])


def main():
    bin_ = sys.argv[1]
    rank_prog = os.path.join(os.path.dirname(os.path.abspath(bin_)), "autopar-rank")
    if not os.access(rank_prog, os.X_OK):
        tap(True, "# SKIP the executor is not built (no %s)" % rank_prog)
        return 0
    work = tempfile.mkdtemp(prefix="graph-exec.")
    serial = {}
    for model in ("mlp", "cnn", "encoder"):
        path = os.path.join(work, model + ".serial.json")
        p = subprocess.run([bin_, "plan", "--model", os.path.join(DATA, model + ".onnx"), "--cluster", "h100:1",
                            "--gbs", str(REF["gbs"]), "--export", "json", "-o", path], capture_output=True, text=True)
        ok = p.returncode == 0 and json.load(open(path))["format"] == "autopar-plan/2"
        tap(ok, "%s: plan --export json -o writes the autopar-plan/2 document %s" % (model, p.stderr.strip()[:200]))
        got, err = train(bin_, model, path)
        serial[model] = got
        want = REF["models"][model]["losses"]
        r = rel(got, want)
        tap(r <= 1e-5, "%s: the serial run equals PyTorch (%s steps, max relative difference %.2e) %s" %
            (model, REF["steps"], r, err))
    for i, case in enumerate(CASES):
        model, cluster, ann, need = case[:4]
        path = os.path.join(work, "%s.%d.json" % (model, i))
        doc, err = plan(bin_, model, cluster, path, ann)
        if doc is None:
            tap(False, "%s on %s: plan failed: %s" % (model, cluster, err))
            continue
        if len(case) > 4 and case[4] == "row":
            for o in doc["ops"]:
                if o["name"] == "/fc1/Gemm":  # column: weight [N, K] split on N, the output on N
                    o["weight_specs"] = {"fc1.weight": ["S0", "R"], "fc1.bias": ["S0"]}
                    o["weight_spec"] = ["S0", "R"]
                    o["output_spec"] = ["R", "S0"]
                if o["name"] == "/Relu":
                    o["output_spec"], o["input_specs"] = ["R", "S0"], [["R", "S0"]]
                if o["name"] == "/fc2/Gemm":
                    o["weight_specs"] = {"fc2.weight": ["R", "S0"], "fc2.bias": ["R"]}
                    o["weight_spec"] = ["R", "S0"]
                    o["input_specs"] = [["R", "S0"]]
                    o["partial"] = [0]
            json.dump(doc, open(path, "w"))
            p = subprocess.run([bin_, "estimate", "--plan", path, "--model", os.path.join(DATA, model + ".onnx"),
                                "--cluster", cluster], capture_output=True, text=True)
            tap(p.returncode == 0, "mlp: the row-parallel fc2 is a legal plan (estimate --plan reads it) %s" %
                p.stderr.strip()[:300])
        have = kinds(doc)
        tap(need <= have, "%s on %s mesh %s: the plan holds %s (has %s)" %
            (model, cluster, doc["mesh"]["shape"], sorted(need), sorted(have)))
        got, err = train(bin_, model, path)
        r = rel(got, serial[model])
        tap(r <= 1e-5, "%s on %s mesh %s (%s): equals the serial run over %d steps, max relative difference %.2e %s" %
            (model, cluster, doc["mesh"]["shape"], ", ".join(sorted(have)) or "replicated", REF["steps"], r, err))
    # Inter-op stages: a one-axis plan of the planner's (with annotations) cut into stages of that mesh each, on
    # consecutive ranks, with micro-batches (GPipe's order). BatchNormalization normalises per micro-batch, so
    # the CNN's serial run takes the same micro-batches.
    for model, ann, cuts, mbs, need in PIPES:
        path = os.path.join(work, "%s.pipe.json" % model)
        doc, err = plan(bin_, model, "h100:2", path, ann)
        if doc is None:
            tap(False, "%s: plan failed: %s" % (model, err))
            continue
        names = [o["name"] for o in doc["ops"]]
        idx = [0] + [next(i for i, n in enumerate(names) if c in n) for c in cuts] + [len(names)]
        doc["stages"] = [{"first_op": names[idx[j]], "last_op": names[idx[j + 1] - 1], "submesh": [1, 2], "mesh": [2]}
                         for j in range(len(idx) - 1)]
        doc["micro_batches"] = mbs
        json.dump(doc, open(path, "w"))
        have = kinds(doc)
        ref = serial[model]
        if model == "cnn":
            sp = os.path.join(work, "cnn.serial.mb.json")
            sd = json.load(open(os.path.join(work, "cnn.serial.json")))
            sd["micro_batches"] = mbs
            json.dump(sd, open(sp, "w"))
            ref, err = train(bin_, model, sp)
        tap(need <= have, "%s: the stages' plan holds %s (has %s)" % (model, sorted(need), sorted(have)))
        got, err = train(bin_, model, path)
        r = rel(got, ref)
        tap(r <= 1e-5, "%s: %d stages of mesh [2] on %d ranks, %d micro-batches (%s): equals the serial run over %d "
            "steps, max relative difference %.2e %s" % (model, len(idx) - 1, 2 * (len(idx) - 1), mbs,
                                                        ", ".join(sorted(have)), REF["steps"], r, err))
    # An annotated plan written with --export json -o reads back (issue 21: it failed on search.followers, the
    # reader building the problem without the annotations, where a fixed op is no follower): the file records
    # them as search.annotate, estimate --plan reads it, and it runs equal to the serial run.
    ann = "/fc1/Gemm=R,S0;/Relu=R,S0"
    path = os.path.join(work, "mlp.annotated.json")
    p = subprocess.run([bin_, "plan", "--model", os.path.join(DATA, "mlp.onnx"), "--cluster", "h100:2", "--gbs",
                        str(REF["gbs"]), "--annotate", ann, "--export", "json", "-o", path], capture_output=True, text=True)
    doc = json.load(open(path)) if os.path.exists(path) else {}
    tap(p.returncode == 0 and doc.get("search", {}).get("annotate") == ann,
        "an annotated plan: --export json -o exits 0 and records search.annotate %s" % p.stderr.strip()[:300])
    p = subprocess.run([bin_, "estimate", "--plan", path, "--model", os.path.join(DATA, "mlp.onnx"), "--cluster",
                        "h100:2"], capture_output=True, text=True)
    tap(p.returncode == 0, "an annotated plan: estimate --plan reads it back %s" % p.stderr.strip()[:300])
    got, err = train(bin_, "mlp", path)
    r = rel(got, serial["mlp"]) if got else float("inf")
    tap(r <= 1e-5, "an annotated plan runs equal to the serial run (max relative difference %.2e) %s" % (r, err))
    packed_cases(bin_, work)
    # Refusals: one line naming what is refused, exit 2.
    doc = json.load(open(os.path.join(work, "mlp.1.json")))
    two = dict(doc, stages=[doc["stages"][0], doc["stages"][0]])  # both from the first op: not in order
    bad = os.path.join(work, "two_stages.json")
    json.dump(two, open(bad, "w"))
    p = subprocess.run([bin_, "run", "--model", os.path.join(DATA, "mlp.onnx"), "--plan", bad, "--data",
                        os.path.join(DATA, "mlp.data.safetensors")], capture_output=True, text=True)
    tap(p.returncode == 2 and "stages" in p.stderr, "stages out of order exit 2 naming stages: %s" % p.stderr.strip())
    doc["ops"][0]["output_spec"] = ["S2", "R"]
    bad = os.path.join(work, "bad_spec.json")
    json.dump(doc, open(bad, "w"))
    p = subprocess.run([bin_, "run", "--model", os.path.join(DATA, "mlp.onnx"), "--plan", bad, "--data",
                        os.path.join(DATA, "mlp.data.safetensors")], capture_output=True, text=True)
    tap(p.returncode == 2 and "/fc1/Gemm" in p.stderr and "S2" in p.stderr,
        "a spec the executor cannot run exits 2 naming the op and the spec: %s" % p.stderr.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
