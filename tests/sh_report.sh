#!/bin/sh
# The HTML report in headless Chromium (tests/python/test_report.py); prints TAP lines. Usage: tests/sh_report.sh BIN
bin=${1:-bin/autopar}
case "$bin" in
bin/autopar | ./bin/autopar) lib=build/lib/libautopar-full.so ;;
*) lib=$(dirname "$bin")/../lib/libautopar-full.so ;;
esac
if ldd "$lib" 2>/dev/null | grep -q 'libasan\|libtsan'; then
  echo "ok 1 - # SKIP the report test drives the library from python3, which a sanitizer build cannot be loaded into"
  exit 0
fi
AUTOPAR_LIB=$lib exec python3 tests/python/test_report.py "$bin"
