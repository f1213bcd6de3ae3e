#!/bin/sh
# Runs every test binary (each in its own process, with a time limit) and the CLI tests, then prints one
# closing line "N passed, N failed". Usage: tests/run.sh BUILD_DIR TEST_BIN...
build=$1
shift
pass=0
fail=0
failed=""
log=$build/tests/log
mkdir -p "$log"
for t in "$@"; do
  n=$(basename "$t")
  CMOCKA_MESSAGE_OUTPUT=TAP timeout 300 "$t" >"$log/$n.out" 2>&1
  rc=$?
  p=$(grep -c '^ok ' "$log/$n.out")
  # cmocka's TAP writes a skipped test as "not ok N # SKIP": a skip, not a failure (a part not built).
  f=$(grep '^not ok ' "$log/$n.out" | grep -vc '# SKIP')
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  pass=$((pass + p))
  fail=$((fail + f))
  if [ "$f" -ne 0 ]; then
    failed="$failed $n"
    echo "FAIL $n (exit $rc):"
    grep -v '^ok ' "$log/$n.out" | head -40
  else
    echo "ok   $n ($p tests)"
  fi
done
# CLI tests: each line of tests/cli_cases.txt is one case run by tests/cli.sh.
out=$(sh tests/cli.sh "${AUTOPAR_BIN:-bin/autopar}" 2>&1)
cp=$(printf '%s\n' "$out" | grep -c '^ok ')
cf=$(printf '%s\n' "$out" | grep -c '^not ok ')
printf '%s\n' "$out" | grep '^not ok ' -A3 | head -60
echo "ok   cli ($cp cases, $cf failed)"
pass=$((pass + cp))
fail=$((fail + cf))
# Shell tests: each tests/sh_*.sh takes the binary and prints TAP lines ("ok N - …" / "not ok N - …").
for t in tests/sh_*.sh; do
  [ -f "$t" ] || continue
  n=$(basename "$t" .sh)
  out=$(sh "$t" "${AUTOPAR_BIN:-bin/autopar}" 2>&1)
  sp=$(printf '%s\n' "$out" | grep -c '^ok ')
  sf=$(printf '%s\n' "$out" | grep -c '^not ok ')
  [ "$sp" -eq 0 ] && [ "$sf" -eq 0 ] && sf=1
  printf '%s\n' "$out" | grep '^not ok ' | head -20
  echo "ok   $n ($sp cases, $sf failed)"
  pass=$((pass + sp))
  fail=$((fail + sf))
  [ "$sf" -ne 0 ] && failed="$failed $n"
done
[ -n "$failed" ] && echo "failed:$failed"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
