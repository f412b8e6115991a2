#include "support/test_kernels.h"

namespace rmacc::test {
namespace {

// One block; thread j writes destination j's count, displacement and block.
__global__ void replayFill(int n, int me, int replay, size_t* sendcounts, size_t* sdispls, int32_t* send) {
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    size_t at = 0;
    for (int p = 0; p < j; ++p) at += replayCount(me, p, replay);
    const size_t c = replayCount(me, j, replay);
    sendcounts[j] = c;
    sdispls[j] = at;
    for (size_t k = 0; k < c; ++k) send[at + k] = replayValue(me, j, k, replay);
  }
}

}  // namespace

void launchReplayFill(cudaStream_t stream, int n, int me, int replay, size_t* sendcounts,
                      size_t* sdispls, int32_t* send) {
  replayFill<<<1, 32, 0, stream>>>(n, me, replay, sendcounts, sdispls, send);
}

}  // namespace rmacc::test
