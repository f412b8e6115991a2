#!/usr/bin/env bash
# The issue #17 reliability campaign on this machine (host backend, 4 ranks = 2 emulated nodes
# x 2, libfabric tcp on loopback, RMACC_TIMEOUT_S=10): bad input on every entry point, then a
# rank killed during init, a barrier and a cross-node AlltoAllV (REPEATS runs each), then
# the lifecycle orders of issue 50 (destroy or abort before, during and after a call, from
# another thread, after a timeout or a peer's death; one node and 2 emulated nodes), then
# destroy after a call timed out on a paused (SIGSTOP) peer, the memory that 20 init/destroy
# cycles keep (tests/timeout_teardown_test, tests/comm_cycles_test), and what an idle
# communicator costs (bench/idle_cpu.sh's test: at most 0.004 cores a rank).
# Writes $OUT/reliability.txt (default bench/out/); build first with scripts/build.sh.
# Exit status 0: no crash, no hang, no success with wrong data, every survivor within 1 s,
# every lifecycle order clean, every idle rank within its CPU bound.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench/out}
B=${BUILD:-build}
mkdir -p "$OUT"
{
  git log -1 --format='commit %H'
  echo "cores $(nproc), $(uname -srm)"
  "$B/tests/reliability-campaign" "${REPEATS:-3}"
  rc=$?
  for t in timeout_teardown_test comm_cycles_test; do
    echo "== $t"
    "$B/tests/$t" 2>&1 | grep -E '^rank [0-9]+:|^\[ +(OK|FAILED) +\]|Failure'
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
  done
  echo "idle communicator, CPU of each rank's process over 2 s idle after one AlltoAll:"
  FI_PROVIDER=tcp FI_TCP_IFACE=lo RMACC_NET_PROVIDER=tcp \
    "$B/tests/idle_cpu_test" --gtest_filter='*RanksSleepAfterACall*' 2>&1 |
    grep -E "cores idle|^\[  (PASSED|FAILED)|thread "
  [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
  exit $rc
} 2>/dev/null | tee "$OUT/reliability.txt"
exit "${PIPESTATUS[0]}"
