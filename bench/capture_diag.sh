#!/usr/bin/env bash
# Why did back-to-back replays of a captured rmaccAlltoAllvDynamic hang (bench/RESULTS.md §14.3)?
# One device call (carry .deps): build (bench/gpu.sh), then the GpuCapture test at 1 x 1 (no MPS)
# with RMACC_TEST_WINDOW replays launched per synchronisation.
#   DIAG=stacks [WINDOW=100] [DEBUG=INFO]: one case; a rank still running after 8 s writes every
#     thread's stack from inside (SIGUSR2 handler, no gdb on the device), addresses resolved
#     with addr2line into $OUT/resolved.txt.
#   otherwise: windows 32 and 48 (the latter with RMACC_MAX_CALLS_IN_FLIGHT=4096), graph replays
#     against uncaptured calls (rmacc-perf --graph, PERF_N calls a size), then WINDOWS in turn;
#     the first case still running at its bound has its threads' kernel waits (/proc) and
#     cuda-gdb stacks (which came back empty: "Selected thread is running") tarred into $OUT,
#     and ends the script.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/rmacc-out}
mkdir -p "$OUT"
STEPS=none bash bench/gpu.sh > "$OUT/gpu-build.txt" 2>&1 || { tail -20 "$OUT/gpu-build.txt"; exit 1; }
echo "built in ${SECONDS}s"
export FI_PROVIDER=tcp FI_TCP_IFACE=lo RMACC_NET_PROVIDER=tcp NCCL_NVLS_ENABLE=0 CUDA_DEVICE_MAX_CONNECTIONS=16
export RMACC_LIB=$PWD/build-gpu/librmacc.so
threads() {  # threads PID: each thread's name, kernel wait and system call
  for t in /proc/$1/task/*; do
    echo "$(basename $t) $(cat $t/comm) wchan=$(cat $t/wchan 2>/dev/null) syscall=$(cut -d' ' -f1 $t/syscall 2>/dev/null) state=$(awk '{print $3}' $t/stat)"
  done
}
stacks() {  # stacks NAME
  for p in $(pgrep -f cuda_alltoallv_test); do
    threads "$p" > "$OUT/threads-$1-$p.txt"
    timeout 20 cuda-gdb -p "$p" -batch -iex "set non-stop off" -iex "set pagination off" \
      -ex "thread apply all bt 16" > "$OUT/stack-$1-$p.txt" 2>&1
  done
}
case_run() {  # case_run NAME LIMIT_S FILTER [ENV...]: returns 1 if it hung
  local name=$1 limit=$2 filter=$3; shift 3
  env "$@" build-gpu/tests/cuda_alltoallv_test --gtest_filter="$filter" > "$OUT/case-$name.log" 2>&1 &
  local pid=$! t=0
  while kill -0 $pid 2>/dev/null && (( t < limit )); do sleep 1; t=$((t + 1)); done
  if kill -0 $pid 2>/dev/null; then
    echo "== $name: still running after ${limit}s: stacks"; stacks "$name"; (cd "$OUT" && tar czf hang-$name.tgz threads-* stack-* && rm -f threads-* stack-*); return 1
  fi
  wait $pid; echo "== $name: exit $? in ${t}s: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/case-$name.log" | tr '\n' ' ')"
  grep -hE "Failure|rmacc\] (WARN|ERROR)" "$OUT/case-$name.log" | head -4 | cut -c1-300
  return 0
}
perf() {  # perf NAME NRANKS ARGS...
  local name=$1 n=$2; shift 2
  timeout 40 tools/rmacc-run -n "$n" --nodes 1 --timeout 35 -- build-gpu/tools/rmacc-perf "$@" > "$OUT/perf-$name.log" 2>&1
  echo "== perf $name (exit $?)"; grep -E "^\[0\]" "$OUT/perf-$name.log" | grep -v "\[rmacc\]" | tail -12
}
if [[ ${DIAG:-} == stacks ]]; then  # one hanging case, its threads' stacks from inside, resolved
  RMACC_TEST_WINDOW=${WINDOW:-32} RMACC_TEST_STACKS_AFTER_S=8 RMACC_DEBUG=${DEBUG:-WARN} timeout 16 \
    build-gpu/tests/cuda_alltoallv_test --gtest_filter='Shapes/GpuCapture.*/1x1_window100' > "$OUT/case-stacks.log" 2>&1
  echo "== window ${WINDOW:-32}: exit $?"
  grep -oE "^[^ ]*\.so[^(]*\(\+0x[0-9a-f]+\)" "$OUT/case-stacks.log" | sort -u | while read -r f; do
    lib=${f%%(*}; off=${f##*(+}; off=${off%)}
    echo "$f $(addr2line -f -C -e "$lib" "$off" 2>/dev/null | head -1)"
  done > "$OUT/resolved.txt"
  exit 0
fi
case_run w${FIRST_WINDOW:-32} 25 'Shapes/GpuCapture.*/1x1_window100' RMACC_TEST_WINDOW=${FIRST_WINDOW:-32} || exit 0
case_run w48-inflight4096 25 'Shapes/GpuCapture.*/1x1_window100' RMACC_TEST_WINDOW=48 RMACC_MAX_CALLS_IN_FLIGHT=4096 || exit 0
perf a2a1 1 alltoall -b 1K -e 64M -f 8 -n ${PERF_N:-8} -w 2
perf a2a1-graph 1 alltoall -b 1K -e 64M -f 8 -n ${PERF_N:-8} -w 2 --graph
perf dyn1-graph 1 alltoallv --pattern zipf --counts device -b 1K -e 64M -f 8 -n ${PERF_N:-8} -w 2 --graph
for w in ${WINDOWS:-48}; do
  case_run w$w 25 'Shapes/GpuCapture.*/1x1_window100' RMACC_TEST_WINDOW=$w || exit 0
done
