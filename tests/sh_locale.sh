#!/bin/sh
# Numbers do not depend on the locale (issue 19, class 8). Prints TAP lines. Usage: tests/sh_locale.sh [BIN]
#  1. every public function that takes a context enters it (tools/check_api_enter.py: API_ENTER sets the "C"
#     locale for the call; tests/test_locale.c checks the library's output under de_DE.UTF-8 from C);
#  2. the CLI prints the same documents and texts under LC_ALL=de_DE.UTF-8 as under LC_ALL=C;
#  3. the Python module returns the same after locale.setlocale(LC_ALL, "de_DE.UTF-8") (tests/python/test_locale.py).
# The locale cases skip, saying so, where de_DE.UTF-8 is not installed (scripts/deps.sh generates it as root).
bin=${1:-bin/autopar}
case "$bin" in
bin/autopar | ./bin/autopar) lib=build/lib/libautopar-full.so ;;
*) lib=$(dirname "$bin")/../lib/libautopar-full.so ;;
esac
if command -v python3 >/dev/null 2>&1; then python3 tools/check_api_enter.py --tap; else echo "ok 1 - # SKIP python3 is not installed"; fi
de=$(locale -a 2>/dev/null | grep -ix 'de_DE\.utf-\?8' | head -1)
if [ -z "$de" ]; then
  echo "ok 2 - # SKIP no de_DE.UTF-8 locale on this machine (scripts/deps.sh generates it when run as root)"
  exit 0
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
n=1
while IFS='|' read -r name args; do
  [ -n "$name" ] || continue
  n=$((n + 1))
  # shellcheck disable=SC2086
  LC_ALL=C "$bin" $args >"$T/c" 2>&1 </dev/null
  # shellcheck disable=SC2086
  LC_ALL=$de "$bin" $args >"$T/de" 2>&1 </dev/null
  # a search document's wall-clock figures differ run to run
  sed -i 's/"elapsed_s":[^,}]*//; s/"plans_per_s":[^,}]*//' "$T/c" "$T/de"
  if cmp -s "$T/c" "$T/de"; then echo "ok $n - CLI $name: the same under LC_ALL=$de"; else
    echo "not ok $n - CLI $name differs under LC_ALL=$de"; diff "$T/c" "$T/de" | head -4 | sed 's/^/  /'; fi
done <<EOF
estimate --json|estimate --model gpt2 --cluster h100:8 --gbs 8 --seq 1024 --tp 2 --json
estimate text|estimate --model gpt2 --cluster h100:8 --gbs 8 --seq 1024 --tp 2 --tokens 2.5e11 --price-per-gpu-hour 2.5
plan --json|plan --model llama-3-8b --cluster h100:16 --gbs 128 --seq 4096 --top 2 --max-mem-fraction 0.75 --json
validate --json|validate tests/data/runs_small.csv --json
calibrated estimate|estimate --model gpt2 --cluster h100:8 --gbs 8 --calibration data/calibration/default.json --json
EOF
if ! command -v python3 >/dev/null 2>&1; then echo "ok $((n + 1)) - # SKIP python3 is not installed"; exit 0; fi
if ldd "$lib" 2>/dev/null | grep -q 'libasan\|libtsan'; then
  echo "ok $((n + 1)) - # SKIP the python module is not loaded into python3 from a sanitizer build ($lib)"
  exit 0
fi
AUTOPAR_LIB=$lib TAP_FIRST=$n python3 tests/python/test_locale.py "$bin"
