// Device-side work of the GPU tests (test_kernels.cu, built only with the CUDA toolkit): what a
// MoE router does on the stream before a dispatch, so that a test can change counts and data
// on the device between replays of a captured graph without the host seeing them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#ifdef __CUDACC__
#define RMACC_TEST_HD __host__ __device__
#else
#define RMACC_TEST_HD
#endif

namespace rmacc::test {

// Elements rank `from` sends rank `to` in replay `replay`: 0 to 400, often 0.
RMACC_TEST_HD inline size_t replayCount(int from, int to, int replay) {
  return (size_t)((from * 7 + to * 3 + replay * 5) % 9) * 50;
}
// Element k of that block.
RMACC_TEST_HD inline int32_t replayValue(int from, int to, size_t k, int replay) {
  return from * 1000003 + to * 10007 + (int32_t)k * 7 + replay * 131;
}

// On `stream`: writes rank `me`'s sendcounts and sdispls (n each, blocks back to back) and its
// send blocks for `replay`, by the two functions above.
void launchReplayFill(cudaStream_t stream, int n, int me, int replay, size_t* sendcounts,
                      size_t* sdispls, int32_t* send);

}  // namespace rmacc::test
