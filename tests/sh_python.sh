#!/bin/sh
# The Python module (python/autopar) against the CLI; prints TAP lines. Usage: tests/sh_python.sh BIN
# The library beside BIN is used (bin/autopar -> build/lib; build/X/bin/autopar -> build/X/lib). A sanitizer
# build's library cannot be loaded into an uninstrumented python3, so that run is skipped, said as such.
bin=${1:-bin/autopar}
case "$bin" in
bin/autopar | ./bin/autopar) lib=build/lib/libautopar-full.so ;;
*) lib=$(dirname "$bin")/../lib/libautopar-full.so ;;
esac
if ! command -v python3 >/dev/null 2>&1; then echo "ok 1 - # SKIP python3 is not installed"; exit 0; fi
if ldd "$lib" 2>/dev/null | grep -q 'libasan\|libtsan'; then
  echo "ok 1 - # SKIP the python module is not loaded into python3 from a sanitizer build ($lib)"
  exit 0
fi
out=$(AUTOPAR_LIB=$lib python3 tests/python/test_autopar.py "$bin" 2>&1)
printf '%s\n' "$out"
# The argument checks (issue 19, class 7), numbered on from the module's tests.
AUTOPAR_LIB=$lib TAP_FIRST=$(printf '%s\n' "$out" | grep -c '^\(not \)\{0,1\}ok ') python3 tests/python/test_args.py "$bin"
