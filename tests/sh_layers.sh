#!/bin/sh
# The layering check (tools/check_layers.py, docs/architecture.md "Who may include whom"): no two .c files in src/
# call each other, includes and calls go inward only, no file in src/ over 700 lines. It reads the objects of the
# build under test (build/obj for bin/autopar, build/X/obj for build/X/bin/autopar). Prints TAP lines.
# Usage: tests/sh_layers.sh BIN
bin=${1:-bin/autopar}
case "$bin" in
bin/autopar | ./bin/autopar) obj=build/obj ;;
*) obj=$(dirname "$(dirname "$bin")")/obj ;;
esac
if ! command -v python3 >/dev/null 2>&1; then echo "ok 1 - # SKIP python3 is not installed"; exit 0; fi
if ! command -v nm >/dev/null 2>&1; then echo "not ok 1 - nm (binutils) is not installed"; exit 0; fi
python3 tools/check_layers.py --tap --obj "$obj"
