#!/usr/bin/env bash
# Host cost per small call on one emulated node, host backend (issue 11 item 4): rmacc-perf
# alltoallv at 1 KiB per rank, 300 calls, 1 x 2 and 1 x 4 ranks, with the COLL log, summarised
# by bench/call_cost.py (count exchange, plan + enqueue, backend calls per call), and the time
# per call from rmacc-perf's table. BUILD picks the build directory (default build/).
# Usage: bench/cost_host.sh [REPEATS]   (logs in $OUT, default bench/out/)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench/out}
B=${BUILD:-build}
mkdir -p "$OUT"
export FI_PROVIDER=tcp FI_TCP_IFACE=lo RMACC_NET_PROVIDER=tcp
for rep in $(seq 1 "${1:-1}"); do
  for np in 2 4; do
    log="$OUT/cost-host-1x$np-$rep.log"
    RMACC_DEBUG=INFO RMACC_DEBUG_SUBSYS=COLL tools/rmacc-run --timeout 300 -n "$np" -- \
      "$B/tools/rmacc-perf" alltoallv -b 1K -e 1K -n 300 -w 10 > "$log" 2>&1
    time_us=$(grep -E "^\[0\] +1024 " "$log" | awk '{print $5}')
    echo "1x$np run $rep: $time_us us per call (rank 0, rmacc-perf); $(python3 bench/call_cost.py "$log")"
  done
done
