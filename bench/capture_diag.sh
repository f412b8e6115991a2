#!/usr/bin/env bash
# Where do back-to-back replays of a captured rmaccAlltoAllvDynamic hang
# (docs/decisions.md#replay-triggered-limit)?
# One device call (carry .deps): build (bench/gpu.sh), rmacc-perf --graph against the uncaptured
# call (PERF_N calls a size), then the GpuCapture test at 1 x 1 (no MPS) with each of WINDOWS
# replays launched per synchronisation. A case still running after 8 s writes every thread's
# stack from inside (RMACC_TEST_STACKS_AFTER_S; cuda-gdb attached but printed nothing, and there
# is no gdb on the device), resolved with addr2line into $OUT/resolved-NAME.txt; the first hung
# case ends the script (its process may keep the GPU).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/rmacc-out}
mkdir -p "$OUT"
STEPS=none bash bench/gpu.sh > "$OUT/gpu-build.txt" 2>&1 || { tail -20 "$OUT/gpu-build.txt"; exit 1; }
echo "built in ${SECONDS}s"
export FI_PROVIDER=tcp FI_TCP_IFACE=lo RMACC_NET_PROVIDER=tcp NCCL_NVLS_ENABLE=0 CUDA_DEVICE_MAX_CONNECTIONS=16
export RMACC_LIB=$PWD/build-gpu/librmacc.so
case_run() {  # case_run WINDOW: fails if it hung
  local log=$OUT/case-w$1.log
  RMACC_TEST_WINDOW=$1 RMACC_TEST_STACKS_AFTER_S=8 RMACC_DEBUG=${DEBUG:-WARN} timeout 16 \
    build-gpu/tests/cuda_capture_test --gtest_filter='Shapes/GpuCapture.*/1x1_window8' > "$log" 2>&1
  local rc=$?
  echo "== window $1: exit $rc: $(grep -E '^\[  (PASSED|FAILED) ' "$log" | tr '\n' ' ')"
  grep -q "== stack of thread" "$log" || return 0
  grep -oE "^[^ ]*\.so[^(]*\(\+0x[0-9a-f]+\)" "$log" | sort -u | while read -r f; do
    lib=${f%%(*}; off=${f##*(+}; off=${off%)}
    echo "$f $(addr2line -f -C -e "$lib" "$off" 2>/dev/null | head -1)"
  done > "$OUT/resolved-w$1.txt"
  return 1
}
perf() {  # perf NAME ARGS...: one rank
  local name=$1; shift
  timeout 40 tools/rmacc-run -n 1 --nodes 1 --timeout 35 -- build-gpu/tools/rmacc-perf "$@" > "$OUT/perf-$name.log" 2>&1
  echo "== perf $name (exit $?)"; grep -E "^\[0\]" "$OUT/perf-$name.log" | grep -v "\[rmacc\]" | tail -12
}
perf a2a alltoall -b 1K -e 64M -f 8 -n ${PERF_N:-8} -w 2
perf a2a-graph alltoall -b 1K -e 64M -f 8 -n ${PERF_N:-8} -w 2 --graph
perf dyn-graph alltoallv --pattern zipf --counts device -b 1K -e 64M -f 8 -n ${PERF_N:-8} -w 2 --graph
for w in ${WINDOWS:-8 16 32 48 100}; do
  case_run "$w" || exit 0
done
