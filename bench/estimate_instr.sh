#!/bin/sh
# Instructions per estimate and per simulation (make bench): each case of bench_estimate run under callgrind,
# counting only the instructions inside ap_estimate (or ap_simulate) with --toggle-collect, once with the first
# call alone and once with CALLS more; the difference over CALLS is the cost of one call, the first call also
# builds the context's environment (device data, calibration, profile). Load-independent like plan_instr.sh:
# to compare with commit X, build bench_estimate.c against X's library (it needs only the public header; an
# older bench_estimate.c without the case arguments cannot be used) and run this script on it.
# usage: bench/estimate_instr.sh BENCH_ESTIMATE_BINARY [CALLS]   (skipped when valgrind is not installed)
set -eu
bin=${1:?usage: estimate_instr.sh BENCH_ESTIMATE_BINARY [CALLS]}
calls=${2:-20}
if ! command -v valgrind >/dev/null 2>&1; then
  echo "estimate_instr: valgrind not installed; instruction counts skipped"
  exit 0
fi
count() { # case calls kind function
  valgrind --tool=callgrind --toggle-collect="$4" --callgrind-out-file=/dev/null "$bin" "$1" "$2" "$3" 2>&1 |
    sed -n 's/.*Collected : *\([0-9]*\).*/\1/p'
}
for kind in estimate simulate; do
  i=0
  while "$bin" "$i" 0 "$kind" 2>/dev/null; do
    a=$(count "$i" 0 "$kind" "ap_$kind"); b=$(count "$i" "$calls" "$kind" "ap_$kind")
    awk -v k="$kind" -v i="$i" -v a="$a" -v b="$b" -v n="$calls" \
      'BEGIN { printf "instr %-9s case %d  %8.3f M instructions per call, first call %8.3f M\n", k, i, (b - a) / n / 1e6, a / 1e6 }'
    i=$((i + 1))
  done
done
