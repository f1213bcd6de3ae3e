"""The HTML report in a real browser: a report of a plan (estimate, search, simulated timeline) and of a
validate run is written through the library, opened in headless Chromium, and checked: the screenshot is
not blank (many colours, the charts' colours among them), the DOM after the script ran holds every part
(plan table, time breakdown, timeline lanes, memory bars with the capacity line, the explored space with
its Pareto front and winner, runner-ups, predicted-against-measured marks, error by device and stack), and
the file names no external URL. Prints TAP lines; run by tests/sh_report.sh. Usage: test_report.py BIN"""

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
import autopar  # noqa: E402

n = 0
failed = 0


def check(what, ok, detail=""):
    global n, failed
    n += 1
    if not ok:
        failed += 1
    print("%s %d - %s%s" % ("ok" if ok else "not ok", n, what, "" if ok or not detail else "\n  " + detail), flush=True)


def png_pixels(path):
    """Decodes an 8-bit RGB/RGBA PNG (what Chromium writes) with the standard library: (width, height, rows)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        ln, typ = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + ln]
        if typ == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), "unexpected PNG type"
            bpp = 3 if ctype == 2 else 4
        elif typ == b"IDAT":
            idat += body
        pos += 12 + ln
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(h):
        ft, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            if ft == 1:
                line[x] = (line[x] + a) & 255
            elif ft == 2:
                line[x] = (line[x] + b) & 255
            elif ft == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif ft == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def colours(path):
    w, h, bpp, rows = png_pixels(path)
    seen = set()
    for y in range(0, h, 3):
        r = rows[y]
        for x in range(0, w, 3):
            seen.add(r[x * bpp:x * bpp + 3])
    return seen


def cli_reports(d, common):
    """--report through the CLI: plan (search, the winner's estimate and simulation), estimate, simulate and
    validate each write a page that holds the parts of their documents, and the command's stdout is what it
    prints without --report."""
    bin_ = sys.argv[1] if len(sys.argv) > 1 else "bin/autopar"
    a = ["--model", "llama-3-8b", "--cluster", "dgx-h100:2x8", "--gbs", "64", "--seq", "4096"]
    csv = os.path.join(ROOT, "tests", "data", "runs_small.csv")
    cases = [
        ("plan", ["plan"] + a + ["--top", "4"],
         ("plan-table", "time-breakdown", "timeline", "memory", "space", "runner-ups")),
        ("estimate", ["estimate"] + a + ["--tp", "2", "--pp", "4"], ("plan-table", "time-breakdown", "timeline", "memory")),
        ("simulate", ["simulate"] + a[:4] + ["--gbs", "16", "--tp", "2", "--pp", "2", "--trace", os.path.join(d, "t.json")],
         ("timeline",)),
        ("validate", ["validate", csv], ("validate", "error-by-group")),
    ]
    for name, args, parts in cases:
        page = os.path.join(d, "cli-%s.html" % name)
        p = subprocess.run([bin_] + args + ["--report", page], capture_output=True, text=True, timeout=300)
        plain = subprocess.run([bin_] + args, capture_output=True, text=True, timeout=300)
        check("%s --report exits 0 and writes the page" % name, p.returncode == 0 and os.path.exists(page), p.stderr)
        strip = lambda t: re.sub(r"costed in .*? fit;", "", t)  # the search's own wall time differs run to run
        check("%s --report prints what %s prints without it" % (name, name), strip(p.stdout) == strip(plain.stdout))
        if not os.path.exists(page):
            continue
        dom = subprocess.run(common + ["--dump-dom", "file://" + page], capture_output=True, text=True,
                             timeout=120).stdout
        missing = [sid for sid in parts if 'id="%s"' % sid not in dom]
        check("%s --report: the DOM holds %s" % (name, ", ".join(parts)), not missing, "missing %s" % missing)
        if name in ("plan", "estimate"):
            check("%s --report: the plan table names the stack and why" % name,
                  "<th>stack</th><td>megatron-lm (the default; --stack NAME for another)</td>" in dom)
    page = os.path.join(d, "cli-plan.html")
    if os.path.exists(page):
        with open(page, encoding="utf-8") as f:
            html = f.read()
        check("plan --report: the winner's estimate and its simulated timeline are in the page",
              'class="idle"' in subprocess.run(common + ["--dump-dom", "file://" + page], capture_output=True,
                                               text=True, timeout=120).stdout and "autopar plan --model" in html)


def compare_search_report(d, common):
    """compare-search --report: the page holds the table (one row per family and baseline of the document)
    and the chart (one bar each, the baselines in their own colour, the LP bound line), the screenshot shows
    the bars, and the command prints the same table as without --report (timing columns aside)."""
    bin_ = sys.argv[1] if len(sys.argv) > 1 else "bin/autopar"
    model = os.path.join(ROOT, "examples", "onnx", "resnet50.onnx")
    a = ["compare-search", "--model", model, "--cluster", "h100-sxm:8", "--time-budget", "0.3", "--evals", "1000"]
    if subprocess.run([bin_, "describe", "--model", model], capture_output=True).returncode != 0:
        check("compare-search --report # SKIP built without the onnx part", True)
        return
    page = os.path.join(d, "cli-compare-search.html")
    p = subprocess.run([bin_] + a + ["--report", page], capture_output=True, text=True, timeout=300)
    plain = subprocess.run([bin_] + a, capture_output=True, text=True, timeout=300)
    check("compare-search --report exits 0 and writes the page", p.returncode == 0 and os.path.exists(page), p.stderr)
    # name and status of each row (times and evaluation counts under a time budget differ run to run)
    cols = lambda t: [ln[:36].split() for ln in t.splitlines()[2:]]
    check("compare-search --report prints what compare-search prints without it", cols(p.stdout) == cols(plain.stdout),
          "%r\n  %r" % (p.stdout, plain.stdout))
    js = subprocess.run([bin_] + a + ["--json"], capture_output=True, text=True, timeout=300)
    fams = json.loads(js.stdout)["families"] if js.returncode == 0 else []
    if not os.path.exists(page):
        return
    dom = subprocess.run(common + ["--dump-dom", "file://" + page], capture_output=True, text=True, timeout=120).stdout
    for sid in ("compare-search", "compare-table", "compare-chart", "lp-bound"):
        check("compare-search --report: the DOM holds #%s" % sid, 'id="%s"' % sid in dom)
    table = dom[dom.find('id="compare-table"'):dom.find("</table>", dom.find('id="compare-table"'))]
    check("the table has a row per family and baseline (%d)" % len(fams), len(fams) > 2 and table.count("<tr") == len(fams) + 1)
    n_base = sum(f["name"].startswith("baseline") for f in fams)
    check("the chart has a bar per family, the baselines apart",
          dom.count('class="cmp-fam"') == len(fams) - n_base and dom.count('class="cmp-base"') == n_base == 2)
    shot = os.path.join(d, "shot-cmp.png")
    subprocess.run(common + ["--screenshot=" + shot, "--window-size=1100,1000", "file://" + page], capture_output=True,
                   timeout=120)
    seen = colours(shot) if os.path.exists(shot) else set()
    check("the compare-search screenshot is not blank and shows both bar colours",
          len(seen) > 20 and bytes.fromhex("4e79a7") in seen and bytes.fromhex("bab0ac") in seen, "%d colours" % len(seen))


def graph_plan_report(d, common):
    """plan --report on an ONNX model (a general graph's op-level plan, autopar-plan/2): the page holds the
    plan table, the stages chart and table (one row per stage of the document), the peak memory against the
    limit and the heaviest ops, the screenshot shows the stage bars, and the command prints what it prints
    without --report (the text rendered from the document, one search)."""
    bin_ = sys.argv[1] if len(sys.argv) > 1 else "bin/autopar"
    model = os.path.join(ROOT, "examples", "onnx", "resnet50.onnx")
    if subprocess.run([bin_, "describe", "--model", model], capture_output=True).returncode != 0:
        check("plan --report of a general graph # SKIP built without the onnx part", True)
        return
    a = ["plan", "--model", model, "--cluster", "h100-sxm:8", "--gbs", "256"]
    page = os.path.join(d, "cli-graph.html")
    p = subprocess.run([bin_] + a + ["--report", page], capture_output=True, text=True, timeout=120)
    plain = subprocess.run([bin_] + a, capture_output=True, text=True, timeout=120)
    check("graph plan --report exits 0 and writes the page", p.returncode == 0 and os.path.exists(page), p.stderr)
    check("graph plan --report prints what plan prints without it", p.stdout == plain.stdout)
    js = subprocess.run([bin_] + a + ["--json"], capture_output=True, text=True, timeout=120)
    doc = json.loads(js.stdout) if js.returncode == 0 else {"stages": []}
    if os.path.exists(page):
        with open(page, encoding="utf-8") as f:
            html = f.read()
        urls = re.findall(r"(?:src|href)\s*=\s*[\"']?(?:https?:)?//", html)
        check("the graph-plan report names no external URL", not urls, str(urls[:3]))
        dom = subprocess.run(common + ["--dump-dom", "file://" + page], capture_output=True, text=True,
                             timeout=120).stdout
        for sid in ("graph-plan-table", "graph-stages", "graph-stages-chart", "graph-memory", "graph-capacity",
                    "graph-ops"):
            check("graph plan --report: the DOM holds #%s" % sid, 'id="%s"' % sid in dom)
        check("a stage bar and a table row per stage (%d)" % len(doc["stages"]),
              len(doc["stages"]) > 0 and dom.count("<title>stage ") >= len(doc["stages"]) and
              all(s["first_op"] in dom for s in doc["stages"]))
        heavy = max(doc.get("ops", []), key=lambda o: sum(c["bytes"] for c in o.get("comm", [])), default=None)
        check("the heaviest op by collective bytes is listed", heavy is not None and heavy["name"] in dom)
        check("what the document lacks is said, not drawn", "no memory per stage" in dom and "no schedule" in dom)
        shot = os.path.join(d, "shot-graph.png")
        subprocess.run(common + ["--screenshot=" + shot, "--window-size=1100,1400", "file://" + page],
                       capture_output=True, timeout=120)
        seen = colours(shot) if os.path.exists(shot) else set()
        check("the graph-plan screenshot is not blank and shows the stage and memory bars",
              len(seen) > 20 and bytes.fromhex("4e79a7") in seen and bytes.fromhex("59a14f") in seen,
              "%d colours" % len(seen))
    graph_plan_file_reports(d, common, bin_)


def graph_plan_file_reports(d, common, bin_):
    """estimate and simulate --report of an autopar-plan/2 file (a pipeline of several stages on dgx-h100:4x8):
    both write the graph plan's page from the document; the simulated one draws the pipeline timeline (#timeline,
    a compute and a comm lane per stage and an activations and a gradients lane per link between stages, the
    passes in the forward and backward colours), the estimated one says that only a simulation draws it."""
    model = os.path.join(ROOT, "examples", "onnx", "resnet50.onnx")
    js = subprocess.run([bin_, "plan", "--model", model, "--cluster", "dgx-h100:4x8", "--gbs", "256", "--strategy",
                         "greedy,inter-op", "--json"], capture_output=True, text=True, timeout=120)
    check("a multi-stage plan of resnet50 on dgx-h100:4x8", js.returncode == 0, js.stderr)
    if js.returncode != 0:
        return
    doc = json.loads(js.stdout)
    n_st = len(doc["stages"])
    check("the plan has several stages (%d)" % n_st, n_st > 1)
    plan = os.path.join(d, "graph-plan.json")
    with open(plan, "w") as f:
        f.write(js.stdout)
    for cmd in ("estimate", "simulate"):
        out = os.path.join(d, "graph-%s.html" % cmd)
        trace = os.path.join(d, "g.json")
        extra = ["--trace", trace] if cmd == "simulate" else []
        r = subprocess.run([bin_, cmd, "--model", model, "--cluster", "dgx-h100:4x8", "--plan", plan] + extra +
                           ["--report", out], capture_output=True, text=True, timeout=120)
        check("%s --report of an autopar-plan/2 plan exits 0 and writes the page" % cmd,
              r.returncode == 0 and os.path.exists(out), r.stderr)
        if not os.path.exists(out):
            continue
        dom = subprocess.run(common + ["--dump-dom", "file://" + out], capture_output=True, text=True,
                             timeout=120).stdout
        for sid in ("graph-plan-table", "graph-stages", "graph-memory", "graph-ops"):
            check("%s --report: the DOM holds #%s" % (cmd, sid), 'id="%s"' % sid in dom)
        check("%s --report: every stage's first op is listed" % cmd, all(s["first_op"] in dom for s in doc["stages"]))
        if cmd == "estimate":
            check("estimate --report draws no timeline and says a simulation draws one",
                  'id="timeline"' not in dom and "simulate --trace" in dom)
            continue
        with open(trace) as f:
            tr = json.load(f)
        work = [e for e in tr["traceEvents"] if e["ph"] == "X"]
        check("simulate --report: the timeline of the stages (#timeline)", 'id="timeline"' in dom)
        check("the timeline has 2 lanes per stage and per link (%d)" % (2 * (2 * n_st - 1)),
              dom.count('class="idle"') == 2 * (2 * n_st - 1))
        check("a work item per pass and send of the trace (%d)" % len(work), dom.count('class="work"') == len(work))
        check("the link lanes are labelled", ">link 0-1 activations<" in dom and ">link 0-1 gradients<" in dom)
        shot = os.path.join(d, "shot-graph-sim.png")
        subprocess.run(common + ["--screenshot=" + shot, "--window-size=1100,1600", "file://" + out],
                       capture_output=True, timeout=120)
        seen = colours(shot) if os.path.exists(shot) else set()
        check("the simulated graph report shows forward and backward passes",
              bytes.fromhex("4e79a7") in seen and bytes.fromhex("f28e2b") in seen, "%d colours" % len(seen))


def main():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        check("chromium is installed (scripts/deps.sh installs it)", False)
        return
    d = tempfile.mkdtemp()
    try:
        est = autopar.estimate("llama-3-8b", "dgx-h100:2x8", gbs=64, seq=4096, tp=2, pp=4, vpp=2,
                               schedule="interleaved-1f1b")
        search = autopar.plan("llama-3-8b", "dgx-h100:2x8", 64, seq=4096, top=8)
        tr = os.path.join(d, "trace.json")
        autopar.simulate("llama-3-8b", "dgx-h100:2x8", tr, gbs=16, seq=4096, tp=2, pp=4, vpp=2,
                         schedule="interleaved-1f1b")
        with open(tr) as f:
            trace = json.load(f)
        csv = os.path.join(ROOT, "tests", "data", "runs_small.csv")
        val = autopar.validate(csv) if os.path.exists(csv) else None
        page = os.path.join(d, "report.html")
        autopar.report_html(page, title="autopar plan: llama-3-8b on dgx-h100:2x8", command="autopar plan …",
                            estimate=est, search=search, trace=trace, validate=val)
        with open(page, encoding="utf-8") as f:
            html = f.read()
        urls = re.findall(r"(?:src|href)\s*=\s*[\"']?(?:https?:)?//", html) + re.findall(r"url\(\s*['\"]?https?:", html)
        check("the report names no external URL", not urls, str(urls[:3]))
        common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                  "--user-data-dir=" + os.path.join(d, "profile")]
        shot = os.path.join(d, "shot.png")
        subprocess.run(common + ["--screenshot=" + shot, "--window-size=1100,3200", "file://" + page],
                       capture_output=True, timeout=120)
        check("chromium wrote a screenshot", os.path.exists(shot) and os.path.getsize(shot) > 10000)
        if os.path.exists(shot):
            seen = colours(shot)
            check("the screenshot is not blank (%d colours)" % len(seen), len(seen) > 50)
            # The forward (#4e79a7) and backward (#f28e2b) colours of the charts appear.
            check("the charts are drawn (forward and backward colours on screen)",
                  bytes.fromhex("4e79a7") in seen and bytes.fromhex("f28e2b") in seen)
        dom = subprocess.run(common + ["--dump-dom", "file://" + page], capture_output=True, text=True,
                             timeout=120).stdout
        check("the script ran (data-rendered on body)", re.search(r'data-rendered="[1-9]', dom) is not None)
        for sid in ("plan-table", "time-breakdown", "timeline", "memory", "space", "runner-ups"):
            check("the DOM holds section #%s" % sid, 'id="%s"' % sid in dom)
        check("the timeline has one compute and one comm lane per stage (8 lanes)", dom.count('class="idle"') == 8)
        check("the timeline draws work items", dom.count('class="work"') > 50)
        check("memory bars for 4 stages and the capacity line", dom.count(">stage ") >= 4 and 'id="capacity"' in dom)
        check("the space marks the winner", 'id="winner"' in dom)
        check("runner-ups are listed with what they lose on", dom.count('class="runner-up"') == 7)
        if val is not None:
            check("the DOM holds section #validate with a mark per row",
                  'id="validate"' in dom and dom.count('<circle class="row') == len(val["rows"]))
            check("error per device and stack", 'id="error-by-group"' in dom)
        cli_reports(d, common)
        compare_search_report(d, common)
        graph_plan_report(d, common)
        try:
            autopar.report_html(os.path.join(d, "bad.html"), estimate={"format": "nope"})
            check("a document of the wrong format is refused", False)
        except autopar.Error as e:
            check("a document of the wrong format is refused", e.status == autopar.INVALID and "nope" in str(e) and
                  not os.path.exists(os.path.join(d, "bad.html")))
        try:
            autopar.report_html(os.path.join(d, "none.html"))
            check("a report of nothing is refused", False)
        except autopar.Error as e:
            check("a report of nothing is refused", e.status == autopar.INVALID and
                  not os.path.exists(os.path.join(d, "none.html")))
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
    sys.exit(1 if failed else 0)
