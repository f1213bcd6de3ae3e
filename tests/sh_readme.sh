#!/bin/sh
# README's counts and figures against what produces them (tools/readme_counts.py --check); prints TAP lines.
# Usage: tests/sh_readme.sh BIN. `make readme-counts` rewrites them.
if ! command -v python3 >/dev/null 2>&1; then echo "ok 1 - # SKIP python3 is not installed"; exit 0; fi
exec python3 tools/readme_counts.py --check "${1:-bin/autopar}"
