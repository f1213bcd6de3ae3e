"""Defaults and inputs that mean what they say (issue 22), through the CLI: sequence lengths with binary
suffixes, the default sequence and every other assumption printed, sequence parallelism on with tp, a Hugging
Face folder or id as --model, offload checked against the NVMe capacity (or the assumption stated), warnings on
feasible but absurd answers, runner-ups folded by rank order, and text lines under 120 columns. Prints TAP
lines; run by tests/sh_inputs.sh. Usage: test_inputs.py BIN"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = sys.argv[1] if len(sys.argv) > 1 else "bin/autopar"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import check, count, failed  # noqa: E402


def run(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([BIN] + list(args), cwd=ROOT, capture_output=True, text=True, env=e, timeout=300)
    return p.returncode, p.stdout, p.stderr


def doc(*args, env=None):
    rc, out, err = run(*args, "--json", env=env)
    try:
        return rc, json.loads(out), err
    except ValueError:
        return rc, None, err + out


def about(d, key, what):
    return [a for a in (d or {}).get(key, []) if a.get("about") == what]


def unwrap(text):
    return re.sub(r"\n {6,}(?=\S)", " ", text)


def main():
    tmp = tempfile.mkdtemp()
    try:
        body(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def body(tmp):
    est = ["estimate", "--model", "llama-3-8b", "--cluster", "h100:8", "--gbs", "8"]
    # Sequence lengths as practitioners write them.
    for text, want in (("8k", 8192), ("4k", 4096), ("32k", 32768), ("128k", 131072), ("8192", 8192)):
        rc, d, err = doc(*est, "--seq", text)
        check("estimate --seq %s is %d tokens" % (text, want), rc == 0 and d["seq_length"] == want, err)
    rc, d, err = doc("plan", "--model", "gpt2", "--cluster", "h100:8", "--gbs", "8", "--seq", "2k", "--top", "1")
    check("plan --seq 2k is 2048 tokens", rc == 0 and d["seq_length"] == 2048, err)
    rc, d, err = doc(*est, "--seq", "4k", "--tokens", "1T")
    check("--tokens 1T stays decimal (1e12)", rc == 0 and d["train"]["tokens"] == 1e12, err)
    rc, out, _ = run("plan", "--help")
    check("plan --help says 8k = 8192", "8k = 8192" in out)
    # The default sequence: the model's pretraining context, said.
    for model, want, source in (("llama-3-8b", 8192, "max_position_embeddings"),
                                ("llama-3.1-405b", 8192, "original_max_position_embeddings"),
                                ("gpt2", 1024, "max_position_embeddings")):
        rc, d, err = doc("estimate", "--model", model, "--cluster", "h100:8", "--gbs", "8", "--tp", "4")
        a = about(d, "assumptions", "seq_length")
        check("%s without --seq trains at %d, its context, and says so (%s)" % (model, want, source),
              rc == 0 and d["seq_length"] == want and a and source in a[0]["text"] and str(want) in a[0]["text"], err)
    rc, out, _ = run("estimate", "--model", "llama-3-8b", "--cluster", "h100:8", "--gbs", "8")
    check("the text prints it: 'assumed  sequence length 8192 tokens'", "assumed  sequence length 8192 tokens" in out, out)
    rc, d, _ = doc(*est, "--seq", "4096")
    check("a stated --seq is no assumption", rc == 0 and not about(d, "assumptions", "seq_length"))
    # A cluster shorthand without a count.
    rc, d, err = doc("estimate", "--model", "gpt2", "--cluster", "h100", "--gbs", "8", "--seq", "1024")
    a = about(d, "assumptions", "cluster")
    check("--cluster h100 is one node of 8, said", rc == 0 and d["n_devices"] == 8 and a and
          "1 node of 8 h100-sxm" in a[0]["text"] and "h100:N" in a[0]["text"], err)
    rc, d, err = doc("plan", "--model", "gpt2", "--cluster", "h100", "--gbs", "8", "--seq", "1024", "--top", "1")
    check("plan on --cluster h100 says it too", rc == 0 and about(d, "assumptions", "cluster"), err)
    rc, d, err = doc("compare-clusters", "--model", "llama-3-70b", "--clusters", "h100,a100-80gb:128", "--gbs", "512",
                     "--tokens", "1T")
    cs = d["clusters"] if d else []
    check("compare-clusters carries each cluster's assumptions and warnings", rc == 0 and len(cs) == 2 and
          about(cs[0], "assumptions", "cluster") and about(cs[0], "assumptions", "seq_length") and
          about(cs[0], "warnings", "years_to_train") and not about(cs[1], "assumptions", "cluster"), err)
    rc, d, _ = doc("estimate", "--model", "gpt2", "--cluster", "h100:8", "--gbs", "8", "--seq", "1024")
    check("--cluster h100:8 is no assumption", rc == 0 and not about(d, "assumptions", "cluster"))
    # Sequence parallelism with tp, Megatron-LM's practice.
    tp8 = ["estimate", "--model", "llama-3-70b", "--cluster", "h100:64", "--gbs", "128", "--seq", "8192", "--tp", "8",
           "--pp", "4"]
    rc, d, err = doc(*tp8)
    check("the everyday tp 8, pp 4 plan of Llama-3-70B on 64 H100 runs sequence parallel and fits, said",
          rc == 0 and d["plan"]["sequence_parallel"] and d["memory"]["fits"] and
          about(d, "assumptions", "sequence_parallel"), err)
    rc, d, err = doc(*tp8, "--sp", "0")
    check("--sp 0 keeps it off, no assumption", rc == 0 and not d["plan"]["sequence_parallel"] and
          not about(d, "assumptions", "sequence_parallel"), err)
    rc, d, _ = doc("estimate", "--model", "gpt2", "--cluster", "h100:8", "--gbs", "8", "--seq", "1024")
    check("tp 1: no sequence parallelism, no assumption", rc == 0 and not d["plan"]["sequence_parallel"] and
          not about(d, "assumptions", "sequence_parallel"))
    hf_models(tmp)
    offload(tmp)
    absurd(tmp)
    folding_and_lines()


def hf_models(tmp):
    cfg = os.path.join(ROOT, "data", "models", "llama-3-8b.json")
    with open(cfg) as f:
        config = json.load(f)
    config.pop("autopar", None)
    folder = os.path.join(tmp, "Meta-Llama-3-8B")
    os.makedirs(folder)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    rc, d, err = doc("describe", "--model", folder)
    check("--model FOLDER reads FOLDER/config.json, named by the folder", rc == 0 and d["name"] == "Meta-Llama-3-8B" and
          d["params_total"] == 8030261248, err)
    empty = os.path.join(tmp, "empty")
    os.makedirs(empty)
    rc, out, err = run("describe", "--model", empty)
    check("a folder without a config.json: exit 2, one line saying so", rc == 2 and "a folder without a config.json" in err
          and err.count("\n") == 1, err)
    hub = os.path.join(tmp, "hf", "hub", "models--meta-llama--Meta-Llama-3-8B")
    os.makedirs(os.path.join(hub, "snapshots", "0123abc"))
    os.makedirs(os.path.join(hub, "refs"))
    shutil.copy(os.path.join(folder, "config.json"), os.path.join(hub, "snapshots", "0123abc", "config.json"))
    with open(os.path.join(hub, "refs", "main"), "w") as f:
        f.write("0123abc")
    env = {"HF_HOME": os.path.join(tmp, "hf")}
    rc, d, err = doc("describe", "--model", "meta-llama/Meta-Llama-3-8B", env=env)
    check("a Hugging Face id is read from the Hugging Face cache (HF_HOME/hub/models--ORG--NAME/snapshots/REV)",
          rc == 0 and d["name"] == "meta-llama/Meta-Llama-3-8B" and d["params_total"] == 8030261248, err)
    rc, d, err = doc("describe", "--model", "meta-llama/Meta-Llama-3-8B", env={"HF_HUB_CACHE": os.path.join(tmp, "hf", "hub")})
    check("... and from HF_HUB_CACHE", rc == 0 and d["name"] == "meta-llama/Meta-Llama-3-8B", err)
    rc, out, err = run("describe", "--model", "meta-llama/Llama-3.1-70B", env={"HF_HOME": os.path.join(tmp, "none")})
    want = os.path.join(tmp, "none", "hub", "models--meta-llama--Llama-3.1-70B", "snapshots")
    check("an id not on disk: exit 2, where to put its config.json, the closest presets", rc == 2 and want in err and
          "config.json" in err and "closest presets: llama-3.1-70b" in err and err.count("\n") == 1, err)


def offload(tmp):
    with open(os.path.join(ROOT, "data", "clusters", "dgx-h100.json")) as f:
        c = json.load(f)
    del c["host"]["nvme_bytes"]
    del c["host"]["sources"]["nvme_bytes"]
    c["name"], c["aliases"] = "no-nvme-size", []
    no_size = os.path.join(tmp, "no_nvme.json")
    with open(no_size, "w") as f:
        json.dump(c, f)
    small = os.path.join(tmp, "small_nvme.json")
    with open(small, "w") as f:
        json.dump({"node": "dgx-h100", "n_nodes": 1, "host": {"nvme_bytes": 1e12}}, f)
    nvme = ["--model", "llama-3.1-405b", "--gbs", "8", "--tp", "2", "--zero", "3", "--offload-optimizer", "nvme",
            "--offload-param", "nvme", "--recompute", "full"]
    rc, d, err = doc("estimate", "--cluster", "dgx-h100", *nvme)
    m = d["memory"] if d else {}
    check("offload to NVMe on DGX H100 is checked against its 30.72 TB (host.nvme_bytes)", rc == 0 and
          m.get("nvme_capacity_bytes") == 30.72e12 and 0 < m.get("nvme_bytes", 0) <= 30.72e12 and m["fits"], err)
    rc, d, err = doc("estimate", "--cluster", small, *nvme)
    check("... and does not fit 1 TB of NVMe", rc == 0 and not d["memory"]["fits"] and
          d["memory"]["nvme_bytes"] > 1e12 and "NVMe" in d["bound_detail"], err)
    rc, out, _ = run("estimate", "--cluster", small, *nvme)
    check("... the text says NVMe DOES NOT FIT", "NVMe per node for offload" in out and "DOES NOT FIT" in out, out[-400:])
    rc, d, err = doc("estimate", "--cluster", no_size, *nvme)
    check("a cluster file without host.nvme_bytes: not checked, and said", rc == 0 and
          about(d, "assumptions", "nvme_capacity") and d["memory"]["nvme_capacity_bytes"] is None, err)
    rc, d, err = doc("plan", "--model", "llama-3.1-405b", "--cluster", "mi300x:8", "--gbs", "8", "--seq", "8192")
    check("nothing fits on a cluster without a host side: says offload was not tried",
          rc == 1 and about(d, "assumptions", "host_memory"), err)


def absurd(tmp):
    a = ["plan", "--model", "llama-3.1-405b", "--cluster", "h100:2", "--gbs", "8", "--top", "1"]
    rc, d, err = doc(*a, "--tokens", "1T")
    w = d["plans"][0]["warnings"] if d and d.get("plans") else []
    years = about(d, "warnings", "years_to_train")
    check("405B on 2 H100 fits only by offload: warned offload-bound", rc == 0 and
          [x for x in w if x["about"] == "offload_bound"] and d["plans"][0]["bound"] == "offload", err)
    check("... and years to train 1T tokens, with the figure", years and re.search(r"\d+ years", years[0]["text"]) and
          d["train"]["time_s"] > 100 * 365 * 86400, years)
    check("... and years for its compute-optimal budget (20 tokens per parameter)",
          [x for x in w if x["about"] == "years_to_train" and "20 per parameter" in x["text"]], w)
    rc, out, _ = run(*a, "--tokens", "1T")
    check("the text warns too", "warning  " in out and "years to train" in unwrap(out) and "offload-bound" in unwrap(out), out)
    page = os.path.join(tmp, "absurd.html")
    rc, _, err = run(*a, "--tokens", "1T", "--report", page)
    html = open(page).read() if os.path.exists(page) else ""
    check("the report warns with the figures", rc == 0 and 'id="warnings"' in html and
          re.search(r"\d+ years to train on the 1e\+12 tokens asked", html) and "offload-bound" in html, err)
    rc, d, _ = doc("plan", "--model", "llama-3-8b", "--cluster", "h100:8", "--gbs", "64", "--seq", "4096", "--top", "1",
                   "--tokens", "1T")
    check("an ordinary plan gets no warning", rc == 0 and not d["warnings"] and not d["plans"][0]["warnings"])


def folding_and_lines():
    a = ["plan", "--model", "llama-3-70b", "--cluster", "dgx-h100:8x8", "--gbs", "512", "--seq", "8192", "--top", "4"]
    rc, d, err = doc(*a)
    plans = d["plans"] if d else []

    def key(p):
        q = dict(p["plan"])
        q["parallel"] = {k: v for k, v in q["parallel"].items() if k != "order"}
        return json.dumps(q, sort_keys=True)
    keys = [key(p) for p in plans]
    folded = d["search"]["folded_order_variants"] if d else -1
    check("runner-ups that differ only in the rank order are folded (%d folded, %d listed)" % (folded, len(plans)),
          rc == 0 and len(set(keys)) == len(keys) and folded >= 1 and len(plans) + folded == 4 and
          sum(len(p.get("order_variants", [])) for p in plans) == folded, err)
    rc, out, _ = run(*a)
    check("the text says how many were folded", re.search(r"folded +1 more plan that differs only in the rank order", out), out)
    page = os.path.join(tempfile.gettempdir(), "autopar-folded-%d.html" % os.getpid())
    rc, _, err = run(*a, "--report", page)
    html = open(page).read() if os.path.exists(page) else ""
    if os.path.exists(page):
        os.unlink(page)
    check("the report says so too", rc == 0 and re.search(r'<p id="folded">1 plan .* folded into it: #1 as order tp-cp-ep-pp-dp', html),
          err)
    readme = [
        ["plan", "--model", "llama-3-70b", "--cluster", "dgx-h100:8x8", "--gbs", "1024", "--seq", "8192"],
        ["plan", "--model", "llama-3-70b", "--cluster", "dgx-h100:8x8", "--gbs", "512", "--seq", "8192", "--tokens", "1T",
         "--price-per-gpu-hour", "2.5"],
        ["plan", "--model", "llama-3.1-405b", "--cluster", "h100:2", "--gbs", "8", "--tokens", "1T"],
        ["plan", "--model", "deepseek-v3", "--cluster", "h800:256", "--gbs", "1024"],
        ["estimate", "--model", "llama-3-70b", "--cluster", "h100:64", "--gbs", "128", "--tp", "8", "--pp", "4"],
        ["estimate", "--model", "llama-3.1-405b", "--cluster", "dgx-h100", "--gbs", "8", "--tp", "2", "--zero", "3",
         "--offload-optimizer", "nvme", "--offload-param", "nvme", "--recompute", "full"],
        ["clusters", "--show", "h100"],
        ["compare-clusters", "--model", "llama-3-70b", "--clusters", "h100:64,a100-80gb:128", "--gbs", "512", "--seq",
         "4096", "--tokens", "1T", "--price-per-gpu-hour", "2.5,1.3"],
    ]
    for args in readme:
        rc, out, err = run(*args)
        long = [ln for ln in out.splitlines() if len(ln) > 120]
        check("autopar %s: every line under 120 columns" % " ".join(args[:5]), rc in (0, 1) and out and not long,
              long[:2] or err)


if __name__ == "__main__":
    main()
    print("1..%d" % count())
    sys.exit(1 if failed() else 0)
