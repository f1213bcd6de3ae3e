#!/usr/bin/env python3
"""The layering check of src/ (docs/architecture.md "Who may include whom"; DESIGN.md "Who may include whom").

From the compiled objects' symbol tables (`nm` on build/obj/src/**/*.o: the global symbols each object defines
and the ones it leaves undefined) it builds the graph of which .c file calls (or reads data of) which, and from
the #include "..." lines of src/**/*.[ch] the graph of which file includes which. It reports:
  (a) cycle:    two .c files that call each other;
  (b) outward:  an include or a call that goes against the module order
                cli -> report, exec -> search -> cost -> plan -> model, hw -> core
                (a module may use its own files and any module to its right; model and hw are peers that may
                not use each other, and so are report and exec);
  (c) length:   a file in src/ over 700 lines.
Each finding is one line; the exit status is 1 when there is any. `--tap` prints one TAP line per kind of
check instead (tests/sh_layers.sh). Standard library only; needs `nm` (binutils) and a built tree (make).

Usage: tools/check_layers.py [--tap] [--root DIR] [--obj DIR]
"""
import argparse
import os
import re
import subprocess
import sys

# Rank of each module: a file may use files of its own module or of a module of lower rank.
RANK = {"core": 0, "model": 1, "hw": 1, "plan": 2, "cost": 3, "search": 4, "report": 5, "exec": 5, "cli": 6}
MAX_LINES = 700
# Registries: files whose table names the entry points of the files it dispatches to (a strategy, an exporter,
# a command). The files named call back into the registry's helpers; that pair is allowed (DESIGN.md "Search").
REGISTRIES = {"src/cli/main.c", "src/plan/export_api.c", "src/search/recipe/registry.c", "src/search/solve/solve.c"}
# Known pairs that call each other, left to fix (docs/architecture.md "Known exceptions"): each one is printed as
# "known", not counted as a failure; a new pair fails. Remove a line once its pair is fixed.
KNOWN_FILE = "tools/layers_known.txt"
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def module_of(path):
    """'src/cost/calib.c' -> 'cost'; None for a file outside a known module (e.g. generated code)."""
    parts = path.split("/")
    if len(parts) >= 3 and parts[0] == "src" and parts[1] in RANK:
        return parts[1]
    return None


def allowed(src_mod, dst_mod):
    return src_mod == dst_mod or RANK[dst_mod] < RANK[src_mod]


def source_files(root):
    out = []
    for dirpath, _, names in os.walk(os.path.join(root, "src")):
        for n in names:
            if n.endswith((".c", ".h")):
                out.append(os.path.relpath(os.path.join(dirpath, n), root))
    return sorted(out)


def symbols(obj):
    """(defined, undefined) global symbol sets of one object file."""
    res = subprocess.run(["nm", "-P", "-g", obj], capture_output=True, text=True, check=True)
    defined, undefined = {}, set()
    for line in res.stdout.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        name, kind = f[0], f[1]
        if kind == "U":
            undefined.add(name)
        elif kind not in ("w", "v"):
            defined[name] = kind
    return defined, undefined


def call_graph(root, objdir):
    """({src .c path: set of src .c paths whose symbols it uses}, the same for functions only). A use of a data
    symbol only (a registry row naming a strategy's `const` entry point) is a use but not a call."""
    base = os.path.join(root, objdir)
    objs = {}
    for dirpath, _, names in os.walk(base):
        for n in names:
            if n.endswith(".o"):
                o = os.path.join(dirpath, n)
                src = os.path.relpath(o, base)[:-2] + ".c"  # build/obj/src/x/y.o -> src/x/y.c
                if module_of(src) and os.path.exists(os.path.join(root, src)):
                    objs[src] = symbols(o)
    owner, is_func = {}, {}
    for src, (defined, _) in objs.items():
        for s, kind in defined.items():
            owner.setdefault(s, src)
            is_func.setdefault(s, kind in ("T", "t"))
    uses, calls = {}, {}
    for src, (_, undefined) in objs.items():
        mine = [s for s in undefined if s in owner and owner[s] != src]
        uses[src] = {owner[s] for s in mine}
        calls[src] = {owner[s] for s in mine if is_func[s]}
    return uses, calls


def check(root, objdir):
    findings = {"cycle": [], "outward": [], "length": []}
    files = source_files(root)
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            lines = fh.read().split("\n")
        n = len(lines) - (1 if lines and lines[-1] == "" else 0)
        if n > MAX_LINES:
            findings["length"].append(f"{f}: {n} lines (at most {MAX_LINES})")
        m = module_of(f)
        if not m:
            continue
        for i, line in enumerate(lines, 1):
            inc = INCLUDE_RE.match(line)
            if not inc:
                continue
            target = inc.group(1)
            tm = target.split("/")[0] if "/" in target else None
            if tm in RANK and not allowed(m, tm):
                findings["outward"].append(f"{f}:{i}: includes {target} ({m} may not include {tm})")
    graph, calls = call_graph(root, objdir)
    if not graph:
        raise SystemExit(f"check_layers: no objects under {os.path.join(root, objdir)} (run make first)")
    for a in sorted(graph):
        for b in sorted(graph[a]):
            ma, mb = module_of(a), module_of(b)
            if not allowed(ma, mb):
                findings["outward"].append(f"{a}: calls into {b} ({ma} may not use {mb})")
            if a < b and b in calls[a] and a in calls.get(b, ()) and not ({a, b} & REGISTRIES):
                findings["cycle"].append(f"{a} <-> {b}: the two files call each other")
    return findings


def known_pairs(root):
    out = set()
    path = os.path.join(root, KNOWN_FILE)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                line = line.split("#", 1)[0].strip()
                if line:
                    out.add(line)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tap", action="store_true", help="print TAP lines, one per kind of check")
    ap.add_argument("--root", default=".", help="repository root (default .)")
    ap.add_argument("--obj", default="build/obj", help="object folder under the root (default build/obj)")
    a = ap.parse_args()
    findings = check(a.root, a.obj)
    known = known_pairs(a.root)
    seen = {f.split(":")[0] for k in findings for f in findings[k]}
    for pair in sorted(known - seen):
        print(f"# known pair no longer found, remove it from {KNOWN_FILE}: {pair}")
    for k in findings:
        for f in [f for f in findings[k] if f.split(":")[0] in known]:
            findings[k].remove(f)
            print(f"# known {k}: {f}")
    names = {"cycle": "no two .c files call each other", "outward": "includes and calls go inward only",
             "length": f"no file in src/ over {MAX_LINES} lines"}
    bad = False
    for i, k in enumerate(("cycle", "outward", "length"), 1):
        for f in findings[k]:
            print(f"{k}: {f}" if not a.tap else f"# {k}: {f}")
        bad |= bool(findings[k])
        if a.tap:
            print(f"{'not ok' if findings[k] else 'ok'} {i} - {names[k]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
