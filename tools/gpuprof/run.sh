#!/usr/bin/env bash
# Build the GPU profiler with nvcc on this machine and run it; writes the autopar-profile/1 JSON to $1.
#   bash tools/gpuprof/run.sh data/profiles/h200.json
# Needs an NVIDIA GPU (sm_90 build: H100/H200), nvcc and cuBLAS/cuBLASLt. Extra arguments go to gpuprof.
set -euo pipefail
out=${1:?usage: run.sh OUT.json [gpuprof options]}
shift
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if ! command -v nvcc >/dev/null 2>&1; then
    export PATH="${CUDA_HOME:-/usr/local/cuda}/bin:$PATH"
fi
mkdir -p "$(dirname "$out")"
echo "== gpuprof run.sh: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
nvcc --version | tail -n 2
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv || true
t0=$(date +%s)
make -B -C "$here"   # always rebuild here: a binary from another machine may not run on this one
echo "== build took $(( $(date +%s) - t0 )) s"
# clocks, power and throttle reasons every 0.5 s while the profiler runs (not under data/: the top-level
# build embeds every data/**/*.csv)
clog=${GPUPROF_CLOCK_LOG:-$here/last-run.clocks.csv}
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv -lms 500 >"$clog" 2>&1 &
smi_pid=$!
rc=0
"$here/gpuprof" -o "$out" "$@" || rc=$?
kill "$smi_pid" 2>/dev/null || true
wait "$smi_pid" 2>/dev/null || true
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv || true
echo "== gpuprof exit $rc after $(( $(date +%s) - t0 )) s total"
exit $rc
