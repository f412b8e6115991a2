#!/usr/bin/env bash
# One H200, 2 ranks under MPS: host cost per call and a small sweep (the path works; not a peer comparison).
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 FI_PROVIDER=tcp FI_TCP_IFACE=lo RMACC_NET_PROVIDER=tcp CUDA_DEVICE_MAX_CONNECTIONS=16
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DRMACC_WITH_CUDA=ON \
  -DRMACC_FABRIC_ROOT="$PWD/.deps" -DGTest_DIR="$PWD/.deps/usr/lib/x86_64-linux-gnu/cmake/GTest" >/dev/null 2>&1
cmake --build build-gpu -j 32 > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
export RMACC_LIB=$PWD/build-gpu/librmacc.so CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY; nvidia-cuda-mps-control -d
for lc in engines direct; do
  RMACC_LOCAL_COPY=$lc RMACC_DEBUG=INFO RMACC_DEBUG_SUBSYS=COLL,INIT timeout 100 tools/rmacc-run -n 2 --nodes 1 -- \
    build-gpu/tools/rmacc-perf alltoallv -b 1K -e 1K -n 300 -w 20 > $OUT/cost-$lc.log 2>&1
  echo "$lc: $(python3 bench/call_cost.py $OUT/cost-$lc.log 2>&1 | tail -3)"
  grep "^\[0\] " $OUT/cost-$lc.log | grep -E "^\[0\] +[0-9]" | tail -2
done
RMACC_LOCAL_COPY=engines timeout 100 tools/rmacc-run -n 2 --nodes 1 -- build-gpu/tools/rmacc-perf alltoall -b 1K -e 256M -f 4 -n 20 -w 5 2>&1 | grep -E "^\[0\] +[0-9]|wrong" | tail -12
echo quit | nvidia-cuda-mps-control
