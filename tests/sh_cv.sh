#!/bin/sh
# The cross-validated figures (validate --cv source|chip|release|stack) against issue 20's targets and the figures
# reached (tools/cv_check.py); prints TAP lines. Usage: tests/sh_cv.sh BIN.
if ! command -v python3 >/dev/null 2>&1; then echo "ok 1 - # SKIP python3 is not installed"; exit 0; fi
exec python3 tools/cv_check.py "${1:-bin/autopar}"
