#!/usr/bin/env bash
# GPU tests only (one GPU: the ranks share it under MPS).
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export FI_PROVIDER=tcp FI_TCP_IFACE=lo RMACC_NET_PROVIDER=tcp CUDA_DEVICE_MAX_CONNECTIONS=16
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DRMACC_WITH_CUDA=ON \
  -DRMACC_FABRIC_ROOT="$PWD/.deps" -DGTest_DIR="$PWD/.deps/usr/lib/x86_64-linux-gnu/cmake/GTest" >/dev/null 2>&1
cmake --build build-gpu -j 32 > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
ngpu=$(nvidia-smi -L | grep -c GPU)
# One-process tests that need a GPU context of their own (they skip, naming MPS, under it).
(cd build-gpu && timeout 200 ctest -R "CudaBackendTest.WaitingUserStreams" --output-on-failure) > $OUT/gpu-tests-no-mps.log 2>&1
echo "gpu tests without MPS: exit $?"; grep -E "tests passed|tests failed|Test +#" $OUT/gpu-tests-no-mps.log
(( ngpu < 2 )) && nvidia-cuda-mps-control -d
(cd build-gpu && RMACC_TIMEOUT_S=60 timeout 400 ctest -R "Cuda|Gpu" --output-on-failure --timeout 200) > $OUT/gpu-tests.log 2>&1
echo "gpu tests: exit $?"; grep -E "tests passed|tests failed|Test +#" $OUT/gpu-tests.log | tail -16
(( ngpu < 2 )) && echo quit | nvidia-cuda-mps-control
