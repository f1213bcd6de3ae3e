#!/bin/sh
# Instructions per plan search (make bench): each case of bench_plan run alone under callgrind, counting only the
# instructions executed inside ap_plan_search (--toggle-collect), printed beside the plans it costed. Unlike wall
# time, the count does not depend on the machine's load, so "no slower than commit X" can be checked on a shared
# machine: build bench_plan.c against X's library (it needs only the public header) and run this script on it.
# usage: bench/plan_instr.sh BENCH_PLAN_BINARY   (skipped, with a note, when valgrind is not installed)
set -eu
bin=${1:?usage: plan_instr.sh BENCH_PLAN_BINARY}
if ! command -v valgrind >/dev/null 2>&1; then
  echo "plan_instr: valgrind not installed; instruction counts skipped"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
i=0
while :; do
  if ! valgrind --tool=callgrind --toggle-collect=ap_plan_search --callgrind-out-file=/dev/null \
      "$bin" "$i" >"$tmp/out" 2>"$tmp/err"; then
    grep -q "expected no argument or a case number" "$tmp/err" && break
    cat "$tmp/err" >&2
    exit 1
  fi
  ir=$(sed -n 's/.*Collected : *\([0-9]*\).*/\1/p' "$tmp/err")
  awk -v ir="$ir" '{ for (k = 1; k <= NF; k++) if ($k == "plans") { n = $(k - 1); break }
    printf "instr %-15s on %-13s %8.3f G instructions  %7d plans  %8.2f M instructions per plan\n",
      $2, $4, ir / 1e9, n, (n > 0 ? ir / n / 1e6 : 0) }' "$tmp/out"
  i=$((i + 1))
done
