#!/usr/bin/env bash
# What an idle communicator costs (issue 50 item 6), host backend, libfabric tcp on loopback:
#  1. tests/idle_cpu_test: after init and one AlltoAll across 2 emulated nodes (2 x 1 and
#     2 x 2 ranks), each rank's process CPU time (every thread) over 2 s idle, in cores;
#  2. rmacc-perf --proxy-cpu: the rmacc-proxy thread's share during 1 KiB AlltoAllV calls and
#     over 1 s idle after them (2 x 1).
# Writes $OUT/idle-cpu.txt (default bench/out/); build first with scripts/build.sh.
# Exit status 0 when the test's bound (0.004 cores a rank) held.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench/out}
B=${BUILD:-build}
mkdir -p "$OUT"
export FI_PROVIDER=tcp FI_TCP_IFACE=lo RMACC_NET_PROVIDER=tcp
{
  git log -1 --format='commit %H'
  echo "cores $(nproc), $(uname -srm)"
  "$B/tests/idle_cpu_test" --gtest_filter='*RanksSleepAfterACall*' 2>&1 | grep -E "cores idle|^\[  (PASSED|FAILED)|thread "
  status=${PIPESTATUS[0]}
  tools/rmacc-run --timeout 120 -n 2 --nodes 2 -- "$B/tools/rmacc-perf" alltoallv -b 1K -e 1K -n 2000 -w 50 --proxy-cpu 2>&1 |
    grep -E "^\[0\] (#   rmacc-proxy| +1024)"
  exit "$status"
} | tee "$OUT/idle-cpu.txt"
exit "${PIPESTATUS[0]}"
