// Error checks of the stand-alone CUDA probes in bench/ (copy_probe.cu, batch_probe.cu): a
// failing call prints where and why, and the probe exits 1.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                             \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)
#define CU(x)                                                        \
  do {                                                               \
    CUresult r_ = (x);                                               \
    if (r_ != CUDA_SUCCESS) {                                        \
      fprintf(stderr, "%s:%d %s: %d\n", __FILE__, __LINE__, #x, (int)r_); \
      exit(1);                                                       \
    }                                                                \
  } while (0)
