#!/usr/bin/env bash
# One call on a GPU machine (the device tool's run): build, GPU tests, benchmarks, logs under
# $OUT. Needs .deps/ carried (libfabric 1.17 and googletest headers, unpacked Debian packages:
# see bench/README.md). Ranks that share a GPU run under MPS.
#
# STEPS picks what runs (default: all of them, in this order):
#   sanitizer tests perf cost trace relay proxy gdr peer
# MAXSIZE caps the alltoall sweep (default 4G).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/rmacc-out}
STEPS=${STEPS:-sanitizer tests perf cost trace relay proxy gdr peer}
MAXSIZE=${MAXSIZE:-4G}
mkdir -p "$OUT"
has() { [[ " $STEPS " == *" $1 "* ]]; }
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export FI_PROVIDER=tcp FI_TCP_IFACE=lo RMACC_NET_PROVIDER=tcp
# rmacc's streams hold stream-memory waits and must not share hardware queues (README); 16 per
# process leaves room for 4 MPS clients on one GPU (4 x 32 ran out of channels).
export CUDA_DEVICE_MAX_CONNECTIONS=16
{
  nvidia-smi -L; nvidia-smi topo -m 2>/dev/null | head -5; git log -1 --format='commit %H'
  echo "steps: $STEPS"
} > "$OUT/machine.txt" 2>&1
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DRMACC_WITH_CUDA=ON \
  -DRMACC_FABRIC_ROOT="$PWD/.deps" -DGTest_DIR="$PWD/.deps/usr/lib/x86_64-linux-gnu/cmake/GTest" \
  > "$OUT/build.log" 2>&1 && cmake --build build-gpu -j "$(nproc)" >> "$OUT/build.log" 2>&1 \
  || { tail -30 "$OUT/build.log"; exit 1; }
export RMACC_LIB=$PWD/build-gpu/librmacc.so
ngpu=$(nvidia-smi -L | grep -c GPU)
local_ranks=$(( ngpu >= 2 ? ngpu : 2 ))  # 1 node: one rank per GPU, or 2 sharing one GPU

perf() {  # perf NAME NRANKS NODES ARGS...: rmacc-perf through rmacc-run, rank 0's table shown
  local name=$1 n=$2 nodes=$3; shift 3
  timeout 240 tools/rmacc-run -n "$n" --nodes "$nodes" --timeout 230 -- build-gpu/tools/rmacc-perf "$@" \
    > "$OUT/perf-$name.log" 2>&1
  echo "== $name (exit $?)"; grep -vE "^\[[0-9]+\] \[rmacc\]" "$OUT/perf-$name.log" | grep -E "^\[0\]" | tail -14
}

# compute-sanitizer before MPS (it does not run under MPS): one AlltoAllV across 2 emulated
# nodes x 1 rank (proxy + bounce) and one inside a node (CE), memcheck.
if has sanitizer; then
  for nodes in 1 2; do
    timeout 200 tools/rmacc-run -n 2 --nodes $nodes --timeout 190 -- compute-sanitizer --tool memcheck \
      --error-exitcode 9 build-gpu/tools/rmacc-perf alltoallv -b 1M -e 1M -n 2 -w 1 \
      > "$OUT/sanitizer-$nodes.log" 2>&1
    echo "compute-sanitizer memcheck, $nodes node(s): exit $?"; grep -E "ERROR SUMMARY" "$OUT/sanitizer-$nodes.log" | head -2
  done
  # put+signal into a device window of the other node (landing slots, H2D by its proxy).
  RMACC_DEBUG=INFO timeout 200 tools/rmacc-run -n 2 --nodes 2 --timeout 190 -- compute-sanitizer --tool memcheck \
    --error-exitcode 9 build-gpu/tools/rmacc-perf putsignal -b 8 -e 16M -f 16 -n 3 -w 1 \
    > "$OUT/sanitizer-putsignal.log" 2>&1
  echo "compute-sanitizer memcheck, putsignal 2 nodes: exit $?"; grep -E "ERROR SUMMARY" "$OUT/sanitizer-putsignal.log" | head -2
fi

# MPS only while ranks share a GPU: without it their contexts time-slice (a put+signal
# ping-pong 142 us instead of 4 us), with it one rank per GPU pays for it (1-node AlltoAll at
# 256 KiB-1 MiB: ~98 us a call under MPS, 35-55 us without; bench/RESULTS.md §5.1).
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
mps=off
mps_for() {  # mps_for NRANKS: MPS on when NRANKS ranks must share the GPUs, off otherwise
  if (( $1 > ngpu )) && [[ $mps == off ]]; then
    nvidia-cuda-mps-control -d && mps=on && echo "MPS on for $1 ranks" >> "$OUT/machine.txt"
  elif (( $1 <= ngpu )) && [[ $mps == on ]]; then
    echo quit | nvidia-cuda-mps-control; mps=off; sleep 1
  fi
}

if has tests; then
  mps_for 4  # the 2 x 2 cases
  (cd build-gpu && timeout 500 ctest -R "Cuda|Gpu" --output-on-failure --timeout 400) > "$OUT/gpu-tests.log" 2>&1
  echo "gpu tests: exit $?"; grep -E "tests passed|tests failed|Failed|Passed" "$OUT/gpu-tests.log" | tail -12
fi

if has perf; then
  mps_for "$local_ranks"
  perf putsignal-1node 2 1 putsignal -b 8 -e 64M -f 8 -n 100 -w 10
  perf alltoall-1node "$local_ranks" 1 alltoall -b 1K -e "$MAXSIZE" -f 4 -n 20 -w 5
  RMACC_LANES=serial perf alltoall-1node-serial "$local_ranks" 1 alltoall -b 1K -e 64M -f 8 -n 20 -w 5
  perf alltoallv-zipf-1node "$local_ranks" 1 alltoallv --pattern zipf -b 1K -e "$MAXSIZE" -f 4 -n 20 -w 5
  perf alltoallv-random-1node "$local_ranks" 1 alltoallv --pattern random -b 1K -e "$MAXSIZE" -f 4 -n 20 -w 5
fi

if has cost; then  # where a small call's host time goes: queued, count exchange, plan+enqueue
  mps_for 4
  for shape in "$local_ranks 1" "4 2"; do
    set -- $shape
    RMACC_DEBUG=INFO RMACC_DEBUG_SUBSYS=COLL,INIT,NET timeout 120 tools/rmacc-run -n $1 --nodes $2 --timeout 110 -- \
      build-gpu/tools/rmacc-perf alltoallv -b 1K -e 1K -n 200 -w 10 > "$OUT/cost-$1x$2.log" 2>&1
    echo "== call cost, $1 ranks on $2 node(s): $(python3 bench/call_cost.py "$OUT/cost-$1x$2.log" 2>&1)"
    grep -hoE "proxy polls [a-z -]+|wait fd -?[0-9]+" "$OUT/cost-$1x$2.log" | sort | uniq -c
    grep -E "^\[0\].*1024 " "$OUT/cost-$1x$2.log" | grep -v rmacc | tail -1
  done
fi

if has trace; then  # a timeline of small calls (stream ops and network hops), for bench/timeline.py
  mps_for 4
  for shape in "4 2" "4 4" "2 2" "4 1"; do
    set -- $shape
    RMACC_TRACE_FILE="$OUT/trace-$1x$2.%r.json" timeout 120 tools/rmacc-run -n $1 --nodes $2 --timeout 110 -- \
      build-gpu/tools/rmacc-perf alltoallv -b 1K -e 1K -n 30 -w 3 > "$OUT/trace-$1x$2.log" 2>&1
    perf small-$1x$2 $1 $2 alltoallv -b 1K -e 1M -f 32 -n 100 -w 10
  done
fi

# 2 emulated nodes x 2 ranks: the relay path, 4 ranks sharing the GPUs.
if has relay; then
  mps_for 4
  perf alltoallv-zipf-2x2 4 2 alltoallv --pattern zipf -b 1K -e 256M -f 4 -n 10 -w 3
  perf alltoallv-random-2x2 4 2 alltoallv --pattern random -b 1K -e 256M -f 16 -n 10 -w 3
  # Entry by barrier instead of per-peer signals: on one GPU shared by 4 MPS clients the
  # signals cost ~2 ms a call at small sizes (bench/RESULTS.md), the barrier ~0.25 ms.
  RMACC_ENTRY_SYNC=barrier perf alltoallv-zipf-2x2-barrier 4 2 alltoallv --pattern zipf -b 1K -e 256M -f 4 -n 10 -w 3
fi
if has proxy; then  # 2 emulated nodes x 1 (proxy path only)
  mps_for 2
  perf alltoallv-2x1 2 2 alltoallv -b 1K -e 256M -f 4 -n 10 -w 3
  # Staged sources sent whole (one chunk) instead of in 4 MiB chunks, for comparison.
  RMACC_NET_BOUNCE_CHUNK=1G perf alltoallv-2x1-onechunk 2 2 alltoallv -b 1K -e 256M -f 4 -n 10 -w 3
  # put+signal between device windows of two nodes: D2H staging, network, the target's landing
  # slots, H2D by the target's proxy.
  perf putsignal-2x1 2 2 putsignal -b 8 -e 256M -f 8 -n 20 -w 3
  # The same into pinned host windows: the network writes them directly (no landing).
  perf putsignal-2x1-hostwindow 2 2 putsignal --window host -b 8 -e 256M -f 8 -n 20 -w 3
fi
if has gdr; then  # what the GPU-direct probe finds: tcp (no FI_HMEM) and shm (FI_HMEM offered)
  mps_for 2
  for prov in tcp shm; do
    RMACC_NET_PROVIDER=$prov FI_PROVIDER=$prov RMACC_DEBUG=INFO RMACC_DEBUG_SUBSYS=NET timeout 60 \
      tools/rmacc-run -n 2 --nodes 2 --timeout 50 -- build-gpu/tools/rmacc-perf putsignal -b 8 -e 4K -f 8 -n 5 -w 1 \
      > "$OUT/gdr-$prov.log" 2>&1
    echo "== GPU-direct probe, provider $prov (exit $?)"; grep -hE "FI_HMEM|GPU-direct|hmem" "$OUT/gdr-$prov.log" | sort -u | cut -c1-400
  done
fi
mps_for 0

if has peer; then  # NCCL (needs one GPU per rank) and the copy-engine ceiling, without MPS
  timeout 300 python3 bench/nccl_peer.py -b 1K -e "$MAXSIZE" -f 4 > "$OUT/nccl-peer.log" 2>&1
  echo "== nccl/ce peer (exit $?)"; tail -24 "$OUT/nccl-peer.log"
fi

# The device tool brings back at most 8 files: everything goes back as one archive.
tar czf /tmp/rmacc-logs.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/rmacc-logs.tgz "$OUT/logs.tgz"
