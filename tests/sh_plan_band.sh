#!/bin/sh
# estimate's and plan's error band: built from the calibration's cross-validated residuals by validate's
# neighbour rule (src/cost/calib_band.c), naming what it was built from, widened for plans unlike the runs
# (offload, MoE, 16,384 GPUs, a chip without constants of its own); plan's winner carries the band estimate
# gives the same plan. Prints TAP lines. Usage: tests/sh_plan_band.sh BIN.
if ! command -v python3 >/dev/null 2>&1; then echo "ok 1 - # SKIP python3 is not installed"; exit 0; fi
exec python3 - "${1:-bin/autopar}" <<'PY'
import json, math, os, subprocess, sys, tempfile
bin_ = sys.argv[1]
n = 0
def ok(cond, what):
    global n
    n += 1
    print(("ok" if cond else "not ok") + " %d - %s" % (n, what))
def est(*args):
    out = subprocess.run([bin_, "estimate", "--json"] + list(args), capture_output=True, text=True)
    if out.returncode != 0:
        return None
    return json.loads(out.stdout)
base = ["--model", "llama-3-8b", "--gbs", "64", "--seq", "4096"]
cases = {
    "dense h100:8": base + ["--cluster", "h100:8"],
    "offload": base + ["--cluster", "h100:8", "--zero", "2", "--offload-optimizer", "cpu"],
    "unseen chip gb300:8": base + ["--cluster", "gb300:8"],
    "MoE mixtral-8x7b": ["--model", "mixtral-8x7b", "--cluster", "h100:64", "--gbs", "512", "--seq", "4096"],
    "16,384 GPUs": ["--model", "llama-3-70b", "--cluster", "b200:16384", "--gbs", "16384", "--seq", "4096", "--tp", "8", "--pp", "4"],
}
docs = {k: est(*v) for k, v in cases.items()}
for k, d in docs.items():
    b = d and d["calibration"]["band"]
    good = bool(b) and b["built_from"] == "cross-validated residuals" and b["rows"] == 20 and \
        b["from"].startswith("20 cross-validated residuals nearest") and \
        b["tokens_per_s_per_device_low"] < d["tokens_per_s_per_device"] < b["tokens_per_s_per_device_high"] and \
        b["peak_mem_bytes_low"] < b["peak_mem_bytes_high"]
    ok(good, "%s: band from 20 cross-validated residuals, named, around the prediction" % k)
ref = docs["dense h100:8"]["calibration"]["band"]
for k in ("offload", "unseen chip gb300:8", "MoE mixtral-8x7b", "16,384 GPUs"):
    b = docs[k]["calibration"]["band"]
    ok(b["mean_distance"] > ref["mean_distance"] and b["widen"] > ref["widen"],
       "%s: its runs are further (%.2f > %.2f) and the band is widened more (x%.2f > x%.2f)" %
       (k, b["mean_distance"], ref["mean_distance"], b["widen"], ref["widen"]))
ok("with the chip unseen" in docs["unseen chip gb300:8"]["calibration"]["band"]["from"], "unseen chip: the band says so")
ok("with offload" in docs["offload"]["calibration"]["band"]["from"], "offload: the band counts the offload runs")
# The plan's winner: the band estimate gives the same plan.
with tempfile.TemporaryDirectory() as tmp:
    pj = os.path.join(tmp, "best.json")
    pr = subprocess.run([bin_, "plan", "--json"] + base + ["--cluster", "h100:8", "--top", "1", "--export", "json", "-o", pj],
                        capture_output=True, text=True)
    sj = subprocess.run([bin_, "plan", "--json"] + base + ["--cluster", "h100:8", "--top", "1"], capture_output=True, text=True)
    e = est("--plan", pj, "--model", "llama-3-8b", "--cluster", "h100:8") if pr.returncode == 0 else None
    pb = json.loads(sj.stdout)["plans"][0]["calibration"]["band"] if sj.returncode == 0 else None
    eb = e and e["calibration"]["band"]
    ok(bool(pb) and bool(eb) and pb["from"] == eb["from"] and pb["error_low"] == eb["error_low"] and
       pb["error_high"] == eb["error_high"] and pb["mem_from"] == eb["mem_from"],
       "plan's winner carries the band estimate gives its plan")
txt = subprocess.run([bin_, "estimate"] + cases["dense h100:8"], capture_output=True, text=True).stdout
ok("from the 20 cross-validated residuals nearest" in txt and "mem band" in txt and "were within" not in txt,
   "estimate's text prints the cross-validated band, not the in-sample one")
PY
