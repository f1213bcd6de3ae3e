#!/bin/sh
# Defaults and inputs that mean what they say (tests/python/test_inputs.py); prints TAP lines. Usage: tests/sh_inputs.sh BIN
if ! command -v python3 >/dev/null 2>&1; then echo "ok 1 - # SKIP python3 is not installed"; exit 0; fi
exec python3 tests/python/test_inputs.py "${1:-bin/autopar}"
