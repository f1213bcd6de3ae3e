#!/bin/sh
# Every file autopar writes goes through the one safe writer (issue 19, class 1; src/core/write.c): each
# command that writes a file (profile -o, run --save, run --record, export -o, plan -o, the HTML reports,
# simulate --trace, calibrate -o) is run against hostile targets, under a 30 s limit each:
#  1. a character device (a node made with mknod as /dev/full's twin when root, else a link to /dev/full):
#     exit 2, one line naming the target, and the node (or link) is still there, still a device;
#  2. a FIFO with no reader: exit 2 at once, never a hang, the FIFO kept;
#  3. an existing file on a full file system (a tmpfs of 256 KiB filled up; root only): exit 2 and the file
#     byte for byte as it was, no temporary left beside it (a runs table that --record appends to included);
#  4. a target that cannot be written (a missing folder; a read-only file system when root): exit 2 before the
#     work, seen by a launcher (--mpirun) that leaves a mark when it is started, and with nothing on stdout.
# Prints TAP lines. Usage: tests/sh_safe_write.sh [BIN]
bin=${1:-bin/autopar}
T=$(mktemp -d)
mounted=""
cleanup() {
  for m in $mounted; do umount "$m" 2>/dev/null; done
  rm -rf "$T"
}
trap cleanup EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); printf 'not ok %d - %s\n' "$n" "$1"; [ -n "$2" ] && printf '  %s\n' "$2"; }
skip() { n=$((n + 1)); echo "ok $n - # SKIP $1"; }

LLAMA=tests/data/exec/tiny-llama.json
printf '{"global_batch_size":8,"seq_length":16,"precision":"fp32","pipeline":{"micro_batch_size":8}}' >"$T/ref.json"
# The launcher run and profile use: mpirun as autopar starts it, after leaving a mark.
cat >"$T/launcher" <<EOF
#!/bin/sh
touch "$T/launched"
exec mpirun --oversubscribe \$( [ "\$(id -u)" = 0 ] && echo --allow-run-as-root ) -x OPENBLAS_NUM_THREADS "\$@"
EOF
chmod +x "$T/launcher"
exec_built=1
[ -x "$(dirname "$bin")/autopar-rank" ] || exec_built=0

# NAME|ARGS, @OUT@ the target. The commands that need the executor come first.
cat >"$T/cases" <<EOF
profile -o|profile --ranks 1 --quick --mpirun $T/launcher -o @OUT@
run --save|run --model $LLAMA --plan $T/ref.json --mpirun $T/launcher --save @OUT@
run --record|run --model $LLAMA --plan $T/ref.json --mpirun $T/launcher --record @OUT@
export -o|export --plan data/plans/llama-3-70b-64xh100.json --format megatron -o @OUT@
plan -o|plan --model gpt2 --cluster h100:8 --gbs 8 --export megatron -o @OUT@
plan --report|plan --model gpt2 --cluster h100:8 --gbs 8 --report @OUT@
estimate --report|estimate --model gpt2 --cluster h100:8 --gbs 8 --report @OUT@
simulate --trace|simulate --model gpt2 --cluster h100:8 --gbs 8 --trace @OUT@
calibrate -o|calibrate tests/data/runs_small.csv -o @OUT@
validate --report|validate tests/data/runs_small.csv --report @OUT@
EOF

# run_case ARGS TARGET: runs the command with @OUT@ replaced; sets rc, out, err.
run_case() {
  a=$(printf '%s' "$1" | sed "s|@OUT@|$2|g")
  rm -f "$T/launched"
  # shellcheck disable=SC2086
  out=$(timeout 30 "$bin" $a 2>"$T/.err" </dev/null)
  rc=$?
  err=$(cat "$T/.err")
}

# A failure that is one line naming the target, exit 2.
one_line_naming() { # TARGET
  [ "$rc" -eq 2 ] || { why="exit $rc, want 2"; return 1; }
  [ "$(printf '%s\n' "$err" | grep -v ": warning: " | grep -c .)" -eq 1 ] || { why="error is not one line"; return 1; }
  case "$err" in *"$1"*) ;; *) why="error does not name $1"; return 1 ;; esac
  return 0
}

# 1. A character device, made again for each case (a command that removed it must not spoil the next case).
dev="$T/full"
make_dev() {
  rm -f "$dev"
  if [ "$(id -u)" = 0 ] && mknod "$dev" c 1 7 2>/dev/null && [ -c "$dev" ]; then kind="node"; else rm -f "$dev"; ln -s /dev/full "$dev"; kind="link"; fi
}
while IFS='|' read -r name args; do
  case "$args" in *launcher*) [ "$exec_built" = 1 ] || { skip "$name: the executor is not built"; continue; } ;; esac
  make_dev
  run_case "$args" "$dev"
  why=""
  one_line_naming "$dev" || true
  if [ "$kind" = node ]; then [ -c "$dev" ] || why="the device node was replaced or removed"; fi
  if [ "$kind" = link ]; then [ -L "$dev" ] && [ -c /dev/full ] || why="the link to /dev/full was replaced"; fi
  if [ -z "$why" ]; then ok "$name to a character device ($kind): exit 2, one line, kept"; else nok "$name to a character device ($kind): $why" "$err"; fi
done <"$T/cases"

# 2. A FIFO with no reader.
while IFS='|' read -r name args; do
  case "$args" in *launcher*) [ "$exec_built" = 1 ] || { skip "$name: the executor is not built"; continue; } ;; esac
  rm -f "$T/fifo"
  mkfifo "$T/fifo"
  run_case "$args" "$T/fifo"
  why=""
  [ "$rc" -eq 124 ] && why="hung (killed after 30 s)"
  [ -z "$why" ] && { one_line_naming "$T/fifo" || true; }
  [ -p "$T/fifo" ] || why="the FIFO was replaced or removed"
  if [ -z "$why" ]; then ok "$name to a FIFO without a reader: exit 2 at once"; else nok "$name to a FIFO without a reader: $why" "$err"; fi
done <"$T/cases"

# 3. An existing file on a full file system.
small="$T/small"
mkdir "$small"
if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size=256k tmpfs "$small" 2>/dev/null; then
  skip "a full file system needs root and a tmpfs mount"
else
  mounted="$small"
  # A runs table that --record appends to: one row written by a successful run (when the executor is built).
  : >"$T/rec.csv"
  if [ "$exec_built" = 1 ]; then "$bin" run --model $LLAMA --plan "$T/ref.json" --record "$T/rec.csv" >/dev/null 2>&1; fi
  while IFS='|' read -r name args; do
    case "$args" in *launcher*) [ "$exec_built" = 1 ] || { skip "$name: the executor is not built"; continue; } ;; esac
    rm -rf "${small:?}"/* "$small"/.[!.]* 2>/dev/null
    if [ "$name" = "run --record" ]; then cp "$T/rec.csv" "$small/target"; else printf 'precious\n' >"$small/target"; fi
    cp "$small/target" "$T/before"
    dd if=/dev/zero of="$small/filler" bs=4k 2>/dev/null # until the file system is full
    run_case "$args" "$small/target"
    why=""
    [ "$rc" -eq 2 ] || why="exit $rc, want 2"
    cmp -s "$small/target" "$T/before" || why="the existing file was changed ($(wc -c <"$small/target") bytes, was $(wc -c <"$T/before"))"
    left=$(ls -A "$small" | grep -v '^target$' | grep -v '^filler$')
    [ -n "$left" ] && why="left behind: $left"
    if [ -z "$why" ]; then ok "$name over a file on a full file system: exit 2, the file intact"; else nok "$name over a file on a full file system: $why" "$err"; fi
  done <"$T/cases"
fi

# 4. Targets that cannot be written are found before the work.
ro="$T/ro"
mkdir "$ro"
targets="$T/missing/folder/out"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o ro,size=64k tmpfs "$ro" 2>/dev/null; then
  mounted="$mounted $ro"
  targets="$targets $ro/out"
fi
printf 'id,model,gpu\nx,gpt2,h100\n' >"$T/other.csv"
for target in $targets; do
  while IFS='|' read -r name args; do
    case "$args" in *launcher*) [ "$exec_built" = 1 ] || { skip "$name: the executor is not built"; continue; } ;; esac
    run_case "$args" "$target"
    why=""
    one_line_naming "$target" || true
    [ -e "$T/launched" ] && why="the launcher was started before the target was refused"
    [ -n "$out" ] && why="printed before the target was refused: $(printf '%.80s' "$out")"
    if [ -z "$why" ]; then ok "$name to $target: refused before the work"; else nok "$name to $target: $why" "$err"; fi
  done <"$T/cases"
done
# A runs table with another header is refused before the training too.
if [ "$exec_built" = 1 ]; then
  run_case "run --model $LLAMA --plan $T/ref.json --mpirun $T/launcher --record @OUT@" "$T/other.csv"
  why=""
  one_line_naming "$T/other.csv" || true
  [ -e "$T/launched" ] && why="the launcher was started before the table was refused"
  printf 'id,model,gpu\nx,gpt2,h100\n' | cmp -s - "$T/other.csv" || why="the table was changed"
  if [ -z "$why" ]; then ok "run --record to a table of another header: refused before the training"; else nok "run --record to a table of another header: $why" "$err"; fi
fi
