#!/usr/bin/env python3
"""Every public function that takes a context enters it (issue 19, class 8; src/core/alloc.h API_ENTER).

API_ENTER(ctx) installs the context's allocator and, for the call, the "C" locale, so that the library's numbers
do not follow the host's locale. A public function (AP_API in include/autopar.h) whose parameters include
`ap_ctx *ctx` must have API_ENTER(ctx) in its body, or be one `return ap_other(...)` of a public function that
has. Prints one line per function that does neither and exits 1 when there is any; `--tap` prints one TAP line
instead (tests/sh_locale.sh). Standard library only.

Usage: tools/check_api_enter.py [--tap] [--root DIR]
"""
import argparse
import os
import re
import sys

DECL_RE = re.compile(r"AP_API\s+[^;(]*?\b(ap_\w+)\s*\(([^)]*)\)\s*;", re.S)


def definitions(root):
    """name -> body text of every function defined at the top level of src/**/*.c."""
    out = {}
    head = re.compile(r"^[A-Za-z_][\w \*]*?\b(ap_\w+)\s*\([^;{]*\)\s*\{", re.M | re.S)
    for dirpath, _, names in os.walk(os.path.join(root, "src")):
        for n in names:
            if not n.endswith(".c"):
                continue
            with open(os.path.join(dirpath, n), encoding="utf-8") as fh:
                text = fh.read()
            for m in head.finditer(text):
                end = text.find("\n}", m.end())
                out[m.group(1)] = (os.path.relpath(os.path.join(dirpath, n), root), text[m.end():end])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tap", action="store_true")
    ap.add_argument("--root", default=".")
    a = ap.parse_args()
    with open(os.path.join(a.root, "include", "autopar.h"), encoding="utf-8") as fh:
        header = fh.read()
    public = {m.group(1): m.group(2) for m in DECL_RE.finditer(header)}
    with_ctx = [f for f, params in public.items() if re.search(r"\bap_ctx\s*\*\s*ctx\b", params)]
    defs = definitions(a.root)
    entered, problems = {}, []

    def enters(f, depth=0):
        if f in entered:
            return entered[f]
        body = defs.get(f, (None, ""))[1]
        ok = "API_ENTER(ctx)" in body
        m = re.fullmatch(r"\s*return\s+(ap_\w+)\s*\([^;]*\);\s*", body)
        if not ok and m and m.group(1) in public and depth < 8:
            ok = enters(m.group(1), depth + 1)
        entered[f] = ok
        return ok

    # Functions that only hand back or free what the context owns, or set a field: no number is read or written.
    plain = {"ap_ctx_free", "ap_ctx_error", "ap_ctx_status", "ap_ctx_set_log", "ap_ctx_set_progress", "ap_ctx_add_part"}
    for f in sorted(with_ctx):
        if f in plain:
            continue
        if f not in defs:
            problems.append("%s: declared in include/autopar.h, defined nowhere in src/" % f)
        elif not enters(f):
            problems.append("%s (%s): takes a context but does not API_ENTER(ctx)" % (f, defs[f][0]))
    if a.tap:
        if problems:
            print("not ok 1 - every public function with a context enters it (API_ENTER)")
            for p in problems:
                print("  " + p)
        else:
            print("ok 1 - every public function with a context enters it (API_ENTER: %d functions)" %
                  (len(with_ctx) - len(plain)))
    else:
        for p in problems:
            print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
