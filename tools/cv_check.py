#!/usr/bin/env python3
"""The cross-validated figures of `autopar validate ../shared/reference/runs.csv --cv G` (G = source, chip,
release, stack) against issue 20's targets and against the figures reached (so that a change that loses
accuracy out of sample fails make test). One TAP line per check; the runs table's absence skips them. The
validations are shared with tools/readme_counts.py (build/cv/G.json, rerun when the binary or the table is newer).

Usage: cv_check.py [BIN]"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import readme_counts  # noqa: E402

# Issue 20's targets, held under every grouping unless named: the 80% band holds at least 80% of the left-out
# rows (throughput and memory), no row measured oom is predicted to fit, memory MAPE <= 8%; leave-one-chip-out
# throughput MAPE <= 15%.
BAND_COVERAGE_MIN = 0.80
MEMORY_MAPE_MAX = 0.08
CHIP_MAPE_MAX = 0.15
# The figures reached on runs.csv (make calibrate's constants), a tenth of a point above: throughput MAPE may
# not grow, Spearman may not fall by more than 0.01. Issue 20's targets where they are not met yet: source 9%,
# Spearman 0.8 (README's accuracy table).
REACHED = {
    "source": {"mape": 0.111, "spearman": 0.705},
    "chip": {"mape": 0.104, "spearman": 0.680},
    "release": {"mape": 0.100, "spearman": 0.622},
    "stack": {"mape": 0.111, "spearman": 0.705},
}


def main():
    bin_ = sys.argv[1] if len(sys.argv) > 1 else "bin/autopar"
    n = bad = 0

    def check(ok, what):
        nonlocal n, bad
        n += 1
        bad += not ok
        print("%s %d - %s" % ("ok" if ok else "not ok", n, what))

    if not os.path.exists(readme_counts.RUNS):
        print("ok 1 - cross-validation # SKIP %s is not here" % readme_counts.RUNS)
        print("1..1")
        return 0
    for g, reached in REACHED.items():
        try:
            s = readme_counts.cv(bin_, g)
        except RuntimeError as e:
            check(False, "validate --cv %s: %s" % (g, e))
            continue
        b = s["band"]
        check(s["mape"] <= reached["mape"], "--cv %s: throughput MAPE %.4f <= %.3f" % (g, s["mape"], reached["mape"]))
        check(s["spearman"] >= reached["spearman"], "--cv %s: Spearman %.3f >= %.3f" % (g, s["spearman"], reached["spearman"]))
        check(s["memory"]["mape"] <= MEMORY_MAPE_MAX, "--cv %s: memory MAPE %.4f <= %.2f" % (g, s["memory"]["mape"], MEMORY_MAPE_MAX))
        check(b["coverage"] >= BAND_COVERAGE_MIN, "--cv %s: the 80%% band holds %d of %d rows (%.3f >= %.2f)" %
              (g, b["covered"], b["n"], b["coverage"], BAND_COVERAGE_MIN))
        check(b["mem_coverage"] >= BAND_COVERAGE_MIN, "--cv %s: the memory band holds %d of %d rows (%.3f >= %.2f)" %
              (g, b["mem_covered"], b["mem_n"], b["mem_coverage"], BAND_COVERAGE_MIN))
        check(readme_counts.oom_fit(s) == 0, "--cv %s: %d of %d oom rows predicted to fit" %
              (g, readme_counts.oom_fit(s), s["oom"]["oom_rows"]))
        check(len(s["cv"]["groups"]) >= 2, "--cv %s: %d groups" % (g, len(s["cv"]["groups"])))
        if g == "chip":
            check(s["mape"] <= CHIP_MAPE_MAX, "--cv chip: throughput MAPE %.4f <= %.2f" % (s["mape"], CHIP_MAPE_MAX))
            unseen = sum(x["chips_unseen"] for x in s["cv"]["groups"])
            check(unseen == s["n"], "--cv chip: every throughput row predicted on a chip its fit did not see (%d of %d)" %
                  (unseen, s["n"]))
    # Plain validate with the shipped calibration: every modelled row carries both bands as absolute values, built
    # from the calibration's cross-validated residuals, and no row measured oom passes the fit test at the band's
    # upper edge.
    import json
    import subprocess
    p = subprocess.run([bin_, "validate", readme_counts.RUNS, "--json"], capture_output=True, text=True, timeout=600)
    check(p.returncode == 0, "validate --json runs (exit %d)" % p.returncode)
    if p.returncode == 0:
        doc = json.loads(p.stdout)
        rows = [r for r in doc["rows"] if "error" not in r]
        banded = [r for r in rows if 0 < r.get("band_low", 0) < r.get("band_high", 0) and
                  0 < r.get("mem_band_low_bytes", 0) < r.get("mem_band_high_bytes", 0) and r.get("band_from")]
        check(len(banded) == len(rows), "validate: %d of %d modelled rows carry band_low < band_high and "
              "mem_band_low_bytes < mem_band_high_bytes with band_from" % (len(banded), len(rows)))
        b = doc["summary"]["band"]
        check(b["oom_rows_fit_at_band_high"] == 0, "validate: %d oom rows pass the fit test at the band's upper edge" %
              b["oom_rows_fit_at_band_high"])
    print("1..%d" % n)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
