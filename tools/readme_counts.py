#!/usr/bin/env python3
"""The counts and figures of README.md that a file of the repository or a command produces, checked against
that source or rewritten from it, so that README is never typed out of date (issue 22: it said 83 bad-input
cases where the test ran 84).

Each row of COUNTS names a pattern in README.md (its groups are the figures) and the function that produces
those figures now. --check (tests/sh_readme.sh, in make test) prints one TAP line per row and fails on a
difference; --write (make readme-counts) puts the produced figures in place. The validate figures need
../shared/reference/runs.csv and the binary; without the table their rows are skipped, said so.

Usage: readme_counts.py --check|--write [BIN]"""

import glob
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
RUNS = os.path.join(ROOT, "..", "shared", "reference", "runs.csv")


def lines_of(path, keep):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return [ln for ln in f if keep(ln)]


def bad_input_cases(_):
    # tests/sh_bad_input.sh runs every line that is not blank or a comment.
    return [len(lines_of("tests/bad_input.txt", lambda ln: ln.strip() and not ln.startswith("#")))]


def api_probes(_):
    # tests/test_api_args.c: one PROBE(...) statement per probe, no loops around them.
    return [len(lines_of("tests/test_api_args.c", lambda ln: ln.startswith("  PROBE(")))]


def fuzz_targets(_):
    return [len(glob.glob(os.path.join(ROOT, "fuzz", "fuzz_*.c")))]


_validated = {}


def validate(bin_, calibration=None):
    """The summary of `autopar validate ../shared/reference/runs.csv --json` (with a calibration file)."""
    if calibration in _validated:
        return _validated[calibration]
    args = [bin_, "validate", RUNS, "--json"] + (["--calibration", calibration] if calibration else [])
    p = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(args), p.returncode, p.stderr.strip()))
    _validated[calibration] = json.loads(p.stdout)["summary"]
    return _validated[calibration]


_defaults = None


def defaults(bin_):
    """The summary with the documented defaults: a calibration file holding only its format tag (README)."""
    global _defaults
    if _defaults is None:
        fd, _defaults = tempfile.mkstemp(suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump({"format": "autopar-calibration/2"}, f)
    return validate(bin_, _defaults)


def years_405b_on_2(bin_):
    """The years README's absurd example says: plan 405B on 2 H100 for 1T tokens, its train.time_s."""
    args = [bin_, "plan", "--model", "llama-3.1-405b", "--cluster", "h100:2", "--gbs", "8", "--tokens", "1T", "--json"]
    p = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(args), p.returncode, p.stderr.strip()))
    d = json.loads(p.stdout)
    return ["%.0f" % (d["train"]["time_s"] / (365.25 * 86400)), d["seq_length"]]


_cv = {}


def cv(bin_, grouping):
    """The summary of `autopar validate ../shared/reference/runs.csv --cv GROUPING --json`, kept in
    build/cv/GROUPING.json while it is newer than the binary, the runs table and its models (a cross-validation
    takes about a minute; tests/sh_cv.sh reads the same file)."""
    if grouping in _cv:
        return _cv[grouping]
    path = os.path.join(ROOT, "build", "cv", grouping + ".json")
    inputs = [os.path.join(ROOT, bin_), RUNS] + glob.glob(os.path.join(os.path.dirname(RUNS), "models", "*"))
    fresh = os.path.exists(path) and all(os.path.getmtime(path) > os.path.getmtime(f) for f in inputs if os.path.exists(f))
    if not fresh:
        args = [bin_, "validate", RUNS, "--cv", grouping, "--json"]
        p = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=1800)
        if p.returncode != 0:
            raise RuntimeError("%s: exit %d: %s" % (" ".join(args), p.returncode, p.stderr.strip()))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(p.stdout)
        os.replace(path + ".tmp", path)
    with open(path, encoding="utf-8") as f:
        _cv[grouping] = json.load(f)["summary"]
    return _cv[grouping]


def oom_fit(s):
    """Rows measured oom that are predicted to fit."""
    return s["oom"]["oom_rows"] - s["oom"]["oom_predicted_oom"]


def cv_row(grouping):
    """One cross-validation's figures as README's accuracy table writes them."""
    def produce(b):
        s = cv(b, grouping)
        return [pct(s["mape"]), pct(s["median_ape"]), pct(s["memory"]["mape"]), "%.3f" % s["spearman"],
                pct(s["band"]["coverage"]), pct(s["band"]["mem_coverage"]), oom_fit(s), s["oom"]["oom_rows"],
                len(s["cv"]["groups"])]
    return produce


def pct(x):
    return "%.1f" % (100 * x)


# (what, README pattern with one group per figure, producer(bin) -> figures as README writes them, needs the
# runs table)
COUNTS = [
    ("bad-input cases in tests/bad_input.txt", r"`tests/bad_input\.txt` is the catalogue \((\d+) cases", bad_input_cases, False),
    ("probes of tests/test_api_args.c", r"and empty names, (\d+) probes that all return", api_probes, False),
    ("fuzz targets (fuzz/fuzz_*.c)", r"Every one of the (\d+) targets has reached", fuzz_targets, False),
    ("runs with a measured throughput, and rows in all",
     r"\((\d+) runs with a measured throughput,\n(\d+) in all;",
     lambda b: [validate(b)["n"], validate(b)["n_rows"]], True),
    ("throughput MAPE and median, shipped calibration",
     r"\| throughput MAPE \(tokens/s per GPU\) \| [^|]* \| ([\d.]+)% \(median ([\d.]+)%;",
     lambda b: [pct(validate(b)["mape"]), pct(validate(b)["median_ape"])], True),
    ("throughput MAPE and median, documented defaults",
     r"\| throughput MAPE \(tokens/s per GPU\) \| ([\d.]+)% \(median ([\d.]+)%\)",
     lambda b: [pct(defaults(b)["mape"]), pct(defaults(b)["median_ape"])], True),
    ("memory rows and MAPE (defaults, shipped)", r"\| memory MAPE \((\d+) rows that report a peak\) \| ([\d.]+)% \| ([\d.]+)% \(target",
     lambda b: [validate(b)["memory"]["n"], pct(defaults(b)["memory"]["mape"]), pct(validate(b)["memory"]["mape"])], True),
    ("OOM agreement (defaults)", r"both oom rows predicted oom; (\d+) of (\d+) ok rows fit",
     lambda b: [defaults(b)["oom"]["ok_predicted_fit"], defaults(b)["oom"]["ok_rows"]], True),
    ("OOM agreement (shipped)", r"\| both; (\d+) of (\d+) \|",
     lambda b: [validate(b)["oom"]["ok_predicted_fit"], validate(b)["oom"]["ok_rows"]], True),
    ("Spearman within groups (defaults; shipped, its groups)",
     r"\| Spearman within model\+GPU groups \| ([\d.]+) \| ([\d.]+) \(([\d.]+), (\d+) groups\)",
     lambda b: ["%.2f" % defaults(b)["spearman"], "%.2f" % validate(b)["spearman"], "%.3f" % validate(b)["spearman"],
                validate(b)["spearman_groups"]], True),
    ("the absurd example's years and sequence", r"offload-bound, (\d+) years\n# to train 1T tokens\) and prints what it "
     r"assumed \(the sequence: the model's pretraining context, (\d+)\)", years_405b_on_2, False),
] + [
    ("leave-one-%s-out figures (validate --cv %s)" % (g, g),
     (r"\| leave-one-GROUP-out \(`autopar validate \.\./shared/reference/runs\.csv --cv GROUP`\) \| \| throughput MAPE "
     r"([\d.]+)% \(median ([\d.]+)%\), memory MAPE ([\d.]+)%, Spearman ([\d.]+), 80% band holds ([\d.]+)% of "
     r"the rows \(memory ([\d.]+)%\), (\d+) of (\d+) oom rows predicted to fit; (\d+) groups").replace("GROUP", g),
     cv_row(g), True) for g in ("source", "chip", "release", "stack")
] + [
    ("groups of rows with identical inputs", r"printed by `validate` itself: (\d+) groups",
     lambda b: [validate(b)["data_floor"]["identical_input_groups"]], True),
]


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "--check"
    bin_ = sys.argv[2] if len(sys.argv) > 2 else "bin/autopar"
    if mode not in ("--check", "--write"):
        sys.exit(__doc__)
    with open(README, encoding="utf-8") as f:
        text = f.read()
    n = bad = 0
    edits = []
    for what, pattern, produce, needs_runs in COUNTS:
        n += 1
        m = re.search(pattern, text)
        if not m:
            bad += 1
            print("not ok %d - README states %s (pattern %r not found)" % (n, what, pattern))
            continue
        if needs_runs and not os.path.exists(RUNS):
            print("ok %d - %s # SKIP %s is not here" % (n, what, RUNS))
            continue
        try:
            want = [str(x) for x in produce(bin_)]
        except (RuntimeError, KeyError, ValueError) as e:
            bad += 1
            print("not ok %d - %s: %s" % (n, what, e))
            continue
        have = list(m.groups())
        if have == want:
            print("ok %d - README's %s: %s" % (n, what, ", ".join(have)))
        elif mode == "--write":
            edits += [(m.start(i + 1), m.end(i + 1), want[i]) for i in range(len(want))]
            print("ok %d - README's %s: %s, written (was %s)" % (n, what, ", ".join(want), ", ".join(have)))
        else:
            bad += 1
            print("not ok %d - README's %s says %s, the source gives %s (make readme-counts writes them)" %
                  (n, what, ", ".join(have), ", ".join(want)))
    if edits:
        for start, end, value in sorted(edits, reverse=True):
            text = text[:start] + value + text[end:]
        with open(README, "w", encoding="utf-8") as f:
            f.write(text)
    if _defaults:
        os.unlink(_defaults)
    print("1..%d" % n)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
