#!/usr/bin/env bash
# 2xH200, one rank per GPU, no MPS: rmacc (engines / direct local copies) beside NCCL's C API (kernel, CE), same call.
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FI_PROVIDER=tcp FI_TCP_IFACE=lo RMACC_NET_PROVIDER=tcp CUDA_DEVICE_MAX_CONNECTIONS=16
export RMACC_NCCL_LIB=${RMACC_NCCL_LIB:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2}
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DRMACC_WITH_CUDA=ON -DRMACC_BUILD_LAB=ON \
  -DRMACC_FABRIC_ROOT="$PWD/.deps" -DGTest_DIR="$PWD/.deps/usr/lib/x86_64-linux-gnu/cmake/GTest" >/dev/null 2>&1
cmake --build build-gpu -j 32 --target rmacc-perf nccl-perf > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
export RMACC_LIB=$PWD/build-gpu/librmacc.so
for lc in engines direct; do
  echo "== rmacc alltoall, RMACC_LOCAL_COPY=$lc"
  RMACC_LOCAL_COPY=$lc timeout 60 tools/rmacc-run -n 2 --nodes 1 -- build-gpu/tools/rmacc-perf alltoall -b 64K -e 1G -f 4 -n 10 -w 3 2>&1 | grep -E "^\[0\] +[0-9]" | cut -c4-
done
echo "== nccl C API (kernel, then CE)"
timeout 80 tools/rmacc-run -n 2 --nodes 1 -- build-gpu/lab/nccl-perf -b 64K -e 1G -f 4 -n 10 -w 3 2>&1 | grep -E "^\[0\] +[0-9]|^\[0\] # (nccl|path|kernel|ce)" | cut -c4- | head -20
