// rmacc-overlap's CUDA error check: a benchmark has nothing to recover, so it says what failed
// and exits.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

namespace rmacc::overlap {

inline void cudaCheck(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  fprintf(stderr, "rmacc-overlap: %s failed: %s\n", what, cudaGetErrorString(e));
  exit(1);
}

}  // namespace rmacc::overlap
