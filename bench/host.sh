#!/usr/bin/env bash
# Host-backend benchmarks on this machine, each rmacc figure beside its peer in the same run:
#  1. network layer: raw fi_writedata (lab/fi-netbench) vs put+signal through rmacc.h
#     (lab/rmacc-netbench), and rmacc-perf putsignal across 2 emulated nodes;
#  2. rmacc-perf alltoallv (4 ranks as 2x2 emulated nodes) vs Open MPI MPI_Alltoallv (4 ranks),
#     uniform, random and zipf counts;
#  3. the per-call count-exchange (metadata) cost, from the library's COLL log.
# Logs go to $OUT (default bench/out/); build first with scripts/build.sh -DRMACC_BUILD_LAB=ON.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench/out}
mkdir -p "$OUT"
B=${BUILD:-build}
export FI_PROVIDER=tcp FI_TCP_IFACE=lo RMACC_NET_PROVIDER=tcp OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
git log -1 --format='commit %H' > "$OUT/host-machine.txt"; nproc >> "$OUT/host-machine.txt"
RUN="tools/rmacc-run --timeout 600"

{ "$B/lab/fi-netbench" -b 8 -e 256M -f 8 && "$B/lab/rmacc-netbench" -b 8 -e 256M -f 8; } > "$OUT/netbench.log" 2>&1
$RUN -n 2 --nodes 2 -- "$B/tools/rmacc-perf" putsignal -b 8 -e 256M -f 8 -n 20 -w 5 > "$OUT/putsignal-2x1.log" 2>&1
for pattern in uniform random zipf; do
  $RUN -n 4 --nodes 2 -- "$B/tools/rmacc-perf" alltoallv --pattern $pattern -b 1K -e 64M -f 8 -n 10 -w 3 \
    > "$OUT/alltoallv-$pattern-2x2.log" 2>&1
  mpirun -np 4 --oversubscribe --bind-to none "$B/lab/mpi-alltoallv" --pattern $pattern -b 1K -e 64M -f 8 -n 10 -w 3 \
    > "$OUT/mpi-alltoallv-$pattern.log" 2>&1
done
RMACC_DEBUG=INFO RMACC_DEBUG_SUBSYS=COLL $RUN -n 4 --nodes 2 -- "$B/tools/rmacc-perf" alltoallv -b 1K -e 1K -n 200 -w 10 \
  > "$OUT/metadata-2x2.log" 2>&1
python3 bench/call_cost.py "$OUT/metadata-2x2.log" | tee "$OUT/metadata-summary.txt"
