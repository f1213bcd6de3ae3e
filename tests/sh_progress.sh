#!/bin/sh
# Progress on stderr: a bar on a terminal, nothing on a pipe or with --quiet (tests/python/test_progress.py);
# prints TAP lines. Usage: tests/sh_progress.sh BIN
if ! command -v python3 >/dev/null 2>&1; then echo "ok 1 - # SKIP python3 is not installed"; exit 0; fi
exec python3 tests/python/test_progress.py "${1:-bin/autopar}"
