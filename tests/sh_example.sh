#!/bin/sh
# The build's output and `make example` (README "Two commands"); prints TAP lines. Usage: tests/sh_example.sh BIN
# Quiet by default (one short line per step, as Kbuild's), every command with V=1: checked on a one-file target
# in a scratch build folder. `make example` prints one line for the build (its log in build/), then the command
# and the plan; run only for the default build (bin/autopar), whose `all` make test has just built.
bin=${1:-bin/autopar}
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; printf '%s\n' "$3" | head -20 | sed 's/^/  /'; fi; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset MAKEFLAGS MAKELEVEL MFLAGS
out=$(make BUILD="$tmp/b" "$tmp/b/tools/embed" 2>&1)
[ "$out" = "  CC      tools/embed.c" ]; ok $? "make prints one short line per step by default" "$out"
rm -rf "$tmp/b"
out=$(make V=1 BUILD="$tmp/b" "$tmp/b/tools/embed" 2>&1)
printf '%s\n' "$out" | grep -q -- '-std=c11 -O1 .* -o .*tools/embed tools/embed.c'; ok $? "make V=1 prints every command in full" "$out"
case "$bin" in
bin/autopar | ./bin/autopar) ;;
*) echo "ok $((n + 1)) - # SKIP make example runs on the default build only ($bin)"; exit 0 ;;
esac
out=$(make example 2>&1)
rc=$?
ok $rc "make example exits 0" "$out"
first=$(printf '%s\n' "$out" | sed -n 1p)
[ "$first" = "make example: building (log: build/example-build.log) ... done" ]; ok $? "make example: the build is one line" "$first"
printf '%s\n' "$out" | sed -n 2p | grep -q '^\$ bin/autopar plan --model llama-3-70b --cluster dgx-h100:8x8'
ok $? "make example: then the command it runs" "$out"
printf '%s\n' "$out" | sed -n 3p | grep -q '^autopar plan: llama-3-70b on dgx-h100:8x8'; ok $? "make example: then the plan" "$out"
printf '%s\n' "$out" | grep -q '^#1 '; ok $? "make example: the winner is shown" "$out"
! printf '%s\n' "$out" | grep -q -e '^cc ' -e '^  CC ' -e 'Werror'; ok $? "make example shows no compile lines" "$out"
