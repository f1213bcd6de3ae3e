#!/usr/bin/env python3
"""CLI tests of the answer documents (docs/json.md): for each command, `--json` parses, carries its format tag,
and the text output's key figures equal the document's, rounded as the text prints them. Text and JSON are
both rendered from one document, so any disagreement is a bug in one of the renderers. Prints one TAP line
per case ("ok N - ..." / "not ok N - ..."); tests/cli.sh runs it after its own table.

Usage: tests/cli_json.py BIN TMPDIR (standard library only)."""
import json
import math
import os
import re
import subprocess
import sys

BIN = sys.argv[1] if len(sys.argv) > 1 else "bin/autopar"
TMP = sys.argv[2] if len(sys.argv) > 2 else "/tmp"
RUNS = "../shared/reference/runs.csv"
PLAN = "data/plans/llama-3-70b-64xh100.json"
GIB = 1073741824.0
n_case = 0


def run(args):
    p = subprocess.run([BIN] + args, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def report(ok, name, why=""):
    global n_case
    n_case += 1
    print(("ok %d - %s" if ok else "not ok %d - %s") % (n_case, name))
    if not ok:
        print("  " + why[:600])


class Mismatch(Exception):
    pass


def same(what, text_value, json_value, fmt):
    """The text shows json_value formatted with fmt (a printf format)."""
    want = fmt % json_value
    if text_value != want:
        raise Mismatch("%s: text shows %s, the document holds %r (%s)" % (what, text_value, json_value, want))


def find(pattern, text, what):
    m = re.search(pattern, text, re.M)
    if not m:
        raise Mismatch("%s: pattern %r not in the text:\n%s" % (what, pattern, text[:400]))
    return m


def case(name, args, tag, check, want_rc=0):
    """Runs args with --json and without, and check(doc, text) compares them."""
    try:
        rc, js, err = run(args + ["--json"])
        if rc != want_rc:
            raise Mismatch("--json: exit %d, want %d: %s" % (rc, want_rc, err.strip()))
        doc = json.loads(js)
        if doc.get("format") != tag:
            raise Mismatch('format is %r, want "%s"' % (doc.get("format"), tag))
        rc, text, err = run(args)
        if rc != want_rc:
            raise Mismatch("text: exit %d, want %d: %s" % (rc, want_rc, err.strip()))
        check(doc, text)
        report(True, name)
    except (Mismatch, ValueError, KeyError, TypeError, IndexError) as e:
        report(False, name, "%s: %s" % (type(e).__name__, e))


def check_estimate(doc, text):
    m = find(r"^iteration  (\S+) s   (\S+) tokens/s   (\S+) tokens/s/device   bound: (\w+)", text, "iteration")
    same("iteration", m.group(1), doc["iteration_time_s"], "%.4f")
    same("tokens/s", m.group(2), doc["tokens_per_s"], "%.0f")
    same("tokens/s/device", m.group(3), doc["tokens_per_s_per_device"], "%.1f")
    if m.group(4) != doc["bound"]:
        raise Mismatch("bound %s vs %s" % (m.group(4), doc["bound"]))
    m = find(r"^MFU        (\S+)% \(PaLM", text, "MFU")
    same("MFU", m.group(1), 100 * doc["mfu"]["palm"], "%.1f")
    if find(r"^plan     (.*)$", text, "plan").group(1) != doc["summary"]:
        raise Mismatch("the plan line is not the document's summary")
    forward = find(r"^  forward +(\S+) s", text, "forward").group(1)
    same("forward", forward, doc["time_breakdown_s"]["forward"], "%.4f")
    stages = re.findall(r"^  (\d+) +([\d. ]+?)(?:  <- peak)?$", text, re.M)
    if len(stages) != len(doc["memory"]["stages"]):
        raise Mismatch("%d stage rows, %d stages in the document" % (len(stages), len(doc["memory"]["stages"])))
    for i, cols in stages:
        st = doc["memory"]["stages"][int(i)]
        same("stage %s total" % i, cols.split()[-1], st["total_bytes"] / GIB, "%.2f")
        parts = sum(v for k, v in st.items() if k != "total_bytes")
        if abs(parts - st["total_bytes"]) > 1e-6 * st["total_bytes"]:
            raise Mismatch("stage %s: the parts add up to %r, the total is %r" % (i, parts, st["total_bytes"]))


def check_simulate(doc, text):
    m = find(r"^pipeline   (\S+) s simulated, (\S+) s closed form", text, "pipeline")
    same("simulated", m.group(1), doc["simulated_pipeline_s"], "%.4f")
    same("closed form", m.group(2), doc["closed_form_pipeline_s"], "%.4f")
    rc, js, err = run(["estimate", "--plan", PLAN, "--model", "llama-3-70b", "--cluster", "h100:64", "--json"])
    if json.loads(js)["iteration_time_s"] != doc["closed_form_iteration_time_s"]:
        raise Mismatch("the closed form differs from estimate's iteration_time_s")


def unwrap(text):
    """The text with its wrapped lines joined: a continuation starts with 6 or more spaces (plan_text.c)."""
    return re.sub(r"\n {6,}(?=\S)", " ", text)


def check_plan(doc, text):
    text = unwrap(text)
    blocks = re.findall(r"^#(\d+)  (.*)   \((\S+)\)\n    predicted (\S+) s per iteration, (\S+) tokens/s, (\S+) tokens/s "
                        r"per device, MFU (\S+)% \(PaLM\)", text, re.M)
    if len(blocks) != len(doc["plans"]) or not blocks:
        raise Mismatch("%d plans in the text, %d in the document" % (len(blocks), len(doc["plans"])))
    for (rank, summary, found_by, it, tps, tpd, mfu), p in zip(blocks, doc["plans"]):
        if int(rank) != p["rank"] or summary != p["summary"] or found_by != p["found_by"]:
            raise Mismatch("plan #%s: %r (%s) vs %r (%s)" % (rank, summary, found_by, p["summary"], p["found_by"]))
        same("#%s iteration" % rank, it, p["iteration_time_s"], "%.4g")
        same("#%s tokens/s" % rank, tps, p["tokens_per_s"], "%.0f")
        same("#%s tokens/s per device" % rank, tpd, p["tokens_per_s_per_device"], "%.1f")
        same("#%s MFU" % rank, mfu, 100 * p["mfu"]["palm"], "%.1f")
    peak = find(r"^    memory    peak (\S+) GiB on stage (\d+)", text, "memory").groups()
    same("#1 peak memory", peak[0], doc["plans"][0]["memory"]["peak_bytes"] / GIB, "%.1f")
    if int(peak[1]) != doc["plans"][0]["memory"]["peak_stage"]:
        raise Mismatch("peak stage")
    m = find(r"plans costed in .*, (\d+) fit; objective (\w+)", text, "search")
    if int(m.group(1)) != doc["search"]["n_fit"] or m.group(2) != doc["objective"]:
        raise Mismatch("search line")
    slow = re.findall(r"^    vs #1     (\S+)% slower", text, re.M)
    for s, p in zip(slow, doc["plans"][1:]):
        same("slowdown", s, 100 * p["vs_best"]["slowdown"], "%.1f")


def check_infeasible(doc, text):
    if doc["feasible"] or doc["plans"]:
        raise Mismatch("feasible or plans listed")
    needs = re.findall(r"^    needs (\S+) GiB on stage (\d+): over the (\S+) GiB limit by (\S+) GiB", text, re.M)
    if len(needs) != len(doc["closest"]) or not needs:
        raise Mismatch("%d closest in the text, %d in the document" % (len(needs), len(doc["closest"])))
    for (need, stage, limit, over), c in zip(needs, doc["closest"]):
        same("needs", need, c["memory"]["peak_bytes"] / GIB, "%.1f")
        same("over", over, c["over_bytes"] / GIB, "%.1f")
        same("limit", limit, doc["mem_limit_bytes"] / GIB, "%.1f")
    if doc["message"] not in text:
        raise Mismatch("the message is not in the text")


def check_compare(doc, text):
    c = doc["compare"]
    m = find(r"^  iteration \(s\) +(\S+) +(\S+) +(\S+)", text, "compare iteration")
    same("given", m.group(1), c["iteration_time_s"], "%.4g")
    same("#1", m.group(2), doc["plans"][0]["iteration_time_s"], "%.4g")
    if find(r"^  given  (.*)$", text, "given").group(1) != c["summary"]:
        raise Mismatch("given summary")


def check_validate(doc, text):
    rows = {r["id"]: r for r in doc["rows"]}
    seen = 0
    for line in text.splitlines()[2:]:
        if not line.strip():
            break
        parts = line.split()
        r = rows.get(parts[0])
        if r is None:
            raise Mismatch("row %s is not in the document" % parts[0])
        seen += 1
        if "error" in r:
            continue
        same(parts[0] + " predicted", parts[1], r["predicted_tokens_per_s_per_gpu"], "%.1f")
        if r["ape"] is not None:
            same(parts[0] + " ape", parts[3], 100 * r["ape"], "%.1f%%")
        if (" " + r["plan"]) not in line:
            raise Mismatch("row %s lacks its plan %r" % (parts[0], r["plan"]))
    if seen != len(doc["rows"]):
        raise Mismatch("%d rows in the text, %d in the document" % (seen, len(doc["rows"])))
    s = doc["summary"]
    m = find(r"^throughput: MAPE (\S+)%, median (\S+)% over (\d+) rows", text, "MAPE")
    same("MAPE", m.group(1), 100 * s["mape"], "%.1f")
    same("median", m.group(2), 100 * s["median_ape"], "%.1f")
    if int(m.group(3)) != s["n"]:
        raise Mismatch("n")
    m = find(r"^oom agreement: (\d+) of (\d+) oom rows predicted oom; (\d+) of (\d+)", text, "oom")
    o = s["oom"]
    if [int(x) for x in m.groups()] != [o["oom_predicted_oom"], o["oom_rows"], o["ok_predicted_fit"], o["ok_rows"]]:
        raise Mismatch("oom agreement")
    if s["spearman"] is not None:
        same("spearman", find(r"^spearman: mean (\S+)", text, "spearman").group(1), s["spearman"], "%.3f")


def check_calibrate(doc, text):
    same("before", find(r"^MAPE before +(\S+)%", text, "before").group(1), 100 * doc["mape_before"], "%.1f")
    same("after", find(r"^MAPE after +(\S+)%", text, "after").group(1), 100 * doc["mape_after"], "%.1f")
    if int(find(r"^calibrated (\d+) rows", text, "rows").group(1)) != doc["rows"]:
        raise Mismatch("rows")


def check_describe(doc, text):
    m = find(r"^parameters   \S+ total \((\d+)\), \S+ active per token \((\d+)\)", text, "parameters")
    if int(m.group(1)) != doc["params_total"] or int(m.group(2)) != doc["params_active"]:
        raise Mismatch("parameters")
    m = find(r"^FLOP per token: forward (\S+), training (\S+)", text, "FLOP")
    same("forward FLOP", m.group(1), doc["flop_per_token"]["forward"], "%.4g")
    same("train FLOP", m.group(2), doc["flop_per_token"]["train"], "%.4g")
    if int(find(r"^sequence     (\d+) tokens", text, "seq").group(1)) != doc["seq"]:
        raise Mismatch("seq")


def check_models(doc, text):
    names = [l.split()[0] for l in text.splitlines()[1:] if l.strip()]
    if names != [m["name"] for m in doc["models"]]:
        raise Mismatch("the text lists other presets than the document")


def check_clusters(doc, text):
    names = re.findall(r"^  (\S+) ", text.split("\nDevices")[0], re.M)[1:]
    if names != [c["name"] for c in doc["clusters"]]:
        raise Mismatch("clusters %s vs %s" % (names, [c["name"] for c in doc["clusters"]]))


def check_compare_clusters(doc, text):
    rows = re.findall(r"^(\d+) +(\S+) +(\d+)  (\S+) +(\d+) ", text, re.M)
    by_rank = {c["rank_by_time"]: c for c in doc["clusters"]}
    feasible = [c for c in doc["clusters"] if c["feasible"]]
    if len(rows) != len(feasible) or not rows:
        raise Mismatch("%d ranked rows in the text, %d feasible clusters" % (len(rows), len(feasible)))
    for rank, name, n_dev, device, tps in rows:
        c = by_rank[int(rank)]
        if name != c["cluster"] or int(n_dev) != c["n_devices"] or device != c["device"]:
            raise Mismatch("rank %s: %s vs %s" % (rank, name, c["cluster"]))
        same(name + " tokens/s", tps, c["tokens_per_s"], "%.0f")
        if c["best_plan"] not in text:
            raise Mismatch("the best plan of %s is not in the text" % name)
    for c in doc["clusters"]:
        if c["rank_by_cost"] is not None:
            m = find(r" %d\. %s \((\d+)\)" % (c["rank_by_cost"], re.escape(c["cluster"])), text, "by cost")
            same(c["cluster"] + " cost", m.group(1), c["train"]["cost"], "%.0f")


def numbers(v):
    if isinstance(v, dict):
        for x in v.values():
            yield from numbers(x)
    elif isinstance(v, list):
        for x in v:
            yield from numbers(x)
    elif isinstance(v, float):
        yield v


def precision_case():
    """Full precision: some reals of the estimate need more than 10 significant digits, and every real reads
    back unchanged when written with repr (the shortest round-trip form), so none was rounded."""
    try:
        rc, js, err = run(["estimate", "--plan", PLAN, "--model", "llama-3-70b", "--cluster", "h100:64", "--json"])
        doc = json.loads(js)
        reals = list(numbers(doc))
        long = [x for x in reals if len(repr(abs(x)).replace(".", "").split("e")[0].lstrip("0")) > 10]
        if len(long) < len(reals) // 2:
            raise Mismatch("only %d of %d reals carry more than 10 digits: rounded output?" % (len(long), len(reals)))
        raw = re.findall(r'(?<=[:\[,])(-?\d[0-9.eE+-]*)', js)
        for t in raw:
            if float(t) != float(repr(float(t))) or (("." in t or "e" in t) and len(t.lstrip("-")) > 24):
                raise Mismatch("number %s is not a shortest round-trip form" % t)
        report(True, "full-precision numbers in estimate --json")
    except (Mismatch, ValueError) as e:
        report(False, "full-precision numbers in estimate --json", str(e))


small = os.path.join(TMP, "json_runs.csv")
with open(small, "w") as f:
    f.write("id,model,arch,num_layers,hidden_size,num_attention_heads,vocab_size,seq_length,mlp,gpu,num_gpus,"
            "global_batch_size,micro_batch_size,tp,pp,dp,recompute,zero_stage,precision,outcome,"
            "measured_tokens_per_s_per_gpu\n"
            "gpt-1,GPT 1.3B,dense,24,2048,16,51200,2048,gelu,a100-80gb,8,512,4,1,1,8,none,1,bf16,ok,10000\n"
            "llama-16,Llama 1B,dense,16,2048,16,32000,4096,swiglu,h100-sxm,16,64,,,,,,,,ok,20000\n")

est = ["estimate", "--plan", PLAN, "--model", "llama-3-70b", "--cluster", "h100:64"]
def check_train(doc, text):
    """--tokens: the train object follows from the document's own throughput, and the text shows it."""
    text = unwrap(text)
    tps = doc["tokens_per_s"] if doc["format"] == "autopar-estimate/1" else doc["plans"][0]["tokens_per_s"]
    t = doc["train"]
    if abs(t["time_s"] - t["tokens"] / tps) > 1e-9 * t["time_s"]:
        raise Mismatch("time_s %r is not tokens / tokens_per_s (%r)" % (t["time_s"], t["tokens"] / tps))
    if abs(t["gpu_hours"] - t["time_s"] * doc["n_devices"] / 3600) > 1e-9 * t["gpu_hours"]:
        raise Mismatch("gpu_hours %r is not time_s x devices / 3600" % t["gpu_hours"])
    m = find(r"^time to train on \S+ tokens: .* \((\S+) s\) on (\d+) devices, (\S+) device-hours(?:, cost (\S+))?", text,
             "train")
    same("time to train", m.group(1), t["time_s"], "%.4g")
    same("device-hours", m.group(3), t["gpu_hours"], "%.4g")
    if t["cost"] is not None:
        same("cost", m.group(4), t["cost"], "%.2f")
        if abs(t["cost"] - t["gpu_hours"] * t["price_per_gpu_hour"]) > 1e-9 * t["cost"]:
            raise Mismatch("cost is not gpu_hours x price")


case("estimate", est, "autopar-estimate/1", check_estimate)
case("estimate --tokens", est + ["--tokens", "1T", "--price-per-gpu-hour", "2.5"], "autopar-estimate/1",
     lambda d, t: (check_estimate(d, t), check_train(d, t)))
case("plan --tokens", ["plan", "--model", "llama-3-8b", "--cluster", "h100:16", "--gbs", "64", "--seq", "4096", "--top", "2",
                       "--tokens", "2.5e11"], "autopar-search/2", lambda d, t: (check_plan(d, t), check_train(d, t)))
case("estimate, MoE on 2 stages", ["estimate", "--model", "mixtral-8x7b", "--cluster", "h100:16", "--tp", "2", "--pp", "2",
                                   "--ep", "4", "--sp", "1", "--gbs", "64", "--seq", "4096"], "autopar-estimate/1", check_estimate)
case("simulate", ["simulate", "--plan", PLAN, "--model", "llama-3-70b", "--cluster", "h100:64", "--trace",
                  os.path.join(TMP, "json_trace.json")], "autopar-simulate/1", check_simulate)
case("plan", ["plan", "--model", "llama-3-70b", "--cluster", "h100:64", "--gbs", "128", "--seq", "8192", "--top", "3"],
     "autopar-search/2", check_plan)
case("plan --compare", ["plan", "--model", "llama-3-70b", "--cluster", "h100:64", "--gbs", "128", "--seq", "8192", "--top",
                        "1", "--compare", PLAN], "autopar-search/2", check_compare)
case("plan, nothing fits", ["plan", "--model", "llama-3-70b", "--cluster", "h100:8", "--gbs", "64", "--seq", "4096",
                            "--fix", "offload_optimizer=none,offload_param=none"],
     "autopar-search/2", check_infeasible, want_rc=1)
case("validate", ["validate", RUNS], "autopar-validate/1", check_validate)
case("validate --search", ["validate", small, "--search"], "autopar-validate/1", check_validate)
case("calibrate", ["calibrate", small, "-o", os.path.join(TMP, "json_cal.json")], "autopar-calibrate/1", check_calibrate)
case("compare-clusters", ["compare-clusters", "--model", "llama-3-8b", "--clusters", "h100:8,a100-80gb:16", "--gbs", "64",
                          "--seq", "4096", "--tokens", "1T", "--price-per-gpu-hour", "2.5,1.5"],
     "autopar-compare-clusters/1", check_compare_clusters)
case("describe", ["describe", "--model", "deepseek-v3"], "autopar-describe/1", check_describe)
case("models", ["models"], "autopar-models/1", check_models)
case("clusters", ["clusters"], "autopar-clusters/1", check_clusters)
try:
    rc, js, err = run(["clusters", "--show", "dgx-h100:8x8", "--json"])
    tag = json.loads(js).get("format")
    report(tag == "autopar-cluster/1", "clusters --show carries its tag", "format %r" % tag)
    rc, js, err = run(["export", "--plan", PLAN, "--format", "json"])
    tag = json.loads(js).get("format")
    report(tag == "autopar-plan/1", "export --format json carries its tag", "format %r" % tag)
except ValueError as e:
    report(False, "clusters --show / export json parse", str(e))
def offload_case():
    """Offload appears only when nothing fits otherwise, and its time is at least the host-link transfer of
    the states it moves: each iteration the rank's gradient shard goes down and its parameter shard comes up,
    2 + 2 bytes per parameter of its optimizer shard, over the device's host link (64 GB/s per direction for
    h100-sxm, data/devices/h100-sxm.json)."""
    try:
        a = ["--model", "llama-3-70b", "--cluster", "h100:8", "--gbs", "64", "--seq", "4096"]
        rc, js, err = run(["plan"] + a + ["--fix", "offload_optimizer=none,offload_param=none", "--json"])
        if rc != 1 or json.loads(js)["feasible"]:
            raise Mismatch("without offload something fits (exit %d)" % rc)
        rc, js, err = run(["plan"] + a + ["--fix", "pp=1", "--top", "1", "--json"])
        doc = json.loads(js)
        if rc != 0 or not doc["feasible"]:
            raise Mismatch("with offload nothing fits (exit %d): %s" % (rc, err))
        best = doc["plans"][0]
        opt = best["plan"]["optimizer"]
        if opt.get("offload_optimizer", "none") == "none":
            raise Mismatch("the winner does not offload: %s" % best["summary"])
        rc, js, err = run(["describe", "--model", "llama-3-70b", "--json"])
        params = json.loads(js)["params_total"]
        par = best["plan"]["parallel"]
        shard = params / (par["tp"] * par["dp"])  # a lower bound of the rank's shard (replicated norms add)
        floor_s = 4.0 * shard / 64e9
        got = best["time_breakdown_s"]["offload"]
        if not got >= floor_s:
            raise Mismatch("offload %.4g s is below the host-link transfer %.4g s" % (got, floor_s))
        if best["iteration_time_s"] < floor_s:
            raise Mismatch("the iteration is shorter than the host-link transfer")
        stage = best["memory"]["stages"][0]
        if stage["optimizer_bytes"] != 0:
            raise Mismatch("offloaded optimizer states still count in device memory: %r" % stage["optimizer_bytes"])
        report(True, "offload: only when nothing fits, at least the host-link transfer (%.3g >= %.3g s)" % (got, floor_s))
    except (Mismatch, ValueError, KeyError, TypeError, IndexError) as e:
        report(False, "offload", "%s: %s" % (type(e).__name__, e))


precision_case()
offload_case()
