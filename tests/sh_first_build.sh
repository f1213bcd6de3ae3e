#!/bin/sh
# The first build on a bare machine (issue 19, class 10): a copy of this tree is built from nothing with
# `make -j8 example` and the parts' test programs while the packages scripts/deps.sh installs are hidden: the
# pkg-config files of MPI, OpenBLAS, protobuf-c and CBC (PKG_CONFIG_LIBDIR points at an empty folder) and
# onnx.proto (ONNX_PROTO names a file that does not exist yet) appear only when a stand-in deps step runs
# (DEPS_SCRIPT: it copies them in, after a second's wait). A Makefile that asks pkg-config or looks for the
# proto before its deps step ran stops (mpi.h not found; "No rule to make target …onnx.proto"), as a real bare
# Debian 12 did. The build must pass at the first try, the stand-in must have run exactly once (the sub-makes
# inherit it), and `make clean` must not run it. Prints TAP lines. Usage: tests/sh_first_build.sh [BIN]
bin=${1:-bin/autopar}
case "$bin" in
bin/autopar | ./bin/autopar) ;;
*) echo "ok 1 - # SKIP the first-build check runs with the plain build (make test), not with $bin"; exit 0 ;;
esac
for t in pkg-config tar make cc; do
  command -v $t >/dev/null 2>&1 || { echo "ok 1 - # SKIP $t is not installed"; exit 0; }
done
proto=/usr/include/onnx/onnx.proto
pcdirs=$(pkg-config --variable pc_path pkg-config | tr ':' ' ')
if [ ! -f "$proto" ] || ! pkg-config --exists ompi openblas libprotobuf-c; then
  echo "ok 1 - # SKIP the packages of scripts/deps.sh are not installed here (nothing to hide)"
  exit 0
fi
S=$(mktemp -d)
trap 'rm -rf "$S"' EXIT
mkdir -p "$S/src" "$S/pc" "$S/proto"
# The tree as it is (tracked and untracked files, not the ignored build outputs), else the whole folder.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -co --exclude-standard | tar -cf - -T - 2>/dev/null | tar -xf - -C "$S/src"
else
  tar -cf - --exclude=./build --exclude=./bin . | tar -xf - -C "$S/src"
fi
cat >"$S/deps.sh" <<EOF
#!/bin/sh
# The stand-in of scripts/deps.sh: "installs" the hidden files, late.
echo run >>"$S/deps-ran"
sleep 1
for d in $pcdirs; do [ -d "\$d" ] && cp "\$d"/*.pc "$S/pc/" 2>/dev/null; done
cp "$proto" "$S/proto/onnx.proto"
EOF
n=0
# A bare machine's first make, not a sub-make of `make test`: nothing inherited from the calling make.
unset AUTOPAR_DEPS_DONE MAKEFLAGS MFLAGS MAKELEVEL
export PKG_CONFIG_LIBDIR="$S/pc"
args="DEPS_SCRIPT=$S/deps.sh ONNX_PROTO=$S/proto/onnx.proto OPT=-O0"
# shellcheck disable=SC2086
if nice make -C "$S/src" -j8 $args example build/tests/test_exec build/tests/test_onnx build/tests/test_solve_ilp \
  >"$S/log" 2>&1; then
  n=$((n + 1)); echo "ok $n - make -j8 example and the parts' tests build at the first try with the packages hidden"
else
  n=$((n + 1)); echo "not ok $n - make -j8 example failed on the first try with the packages hidden"
  grep -E 'error|No rule|Error' "$S/log" | head -5 | sed 's/^/  /'
fi
ran=$(wc -l <"$S/deps-ran" 2>/dev/null || echo 0)
n=$((n + 1))
if [ "$ran" -eq 1 ]; then echo "ok $n - the deps step ran once"; else echo "not ok $n - the deps step ran $ran times, want 1"; fi
: >"$S/deps-ran"
# shellcheck disable=SC2086
make -C "$S/src" $args clean >/dev/null 2>&1
n=$((n + 1))
if [ ! -s "$S/deps-ran" ] && [ ! -d "$S/src/build" ]; then echo "ok $n - make clean cleans without the deps step"; else
  echo "not ok $n - make clean ran the deps step or left build/"; fi
