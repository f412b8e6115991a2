#include "gemm.h"
#include "cuda_check.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace rmacc::overlap {
namespace {

void cublasCheck(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  fprintf(stderr, "rmacc-overlap: %s failed: cuBLAS status %d\n", what, static_cast<int>(s));
  exit(1);
}

// Fills `bytes` of device memory with bf16 values in [-1, 1): a 2 MiB random tile, repeated.
void fillRandomBf16(void* dst, size_t bytes, uint32_t seed) {
  std::vector<uint16_t> tile(1 << 20);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (uint16_t& v : tile) {
    float f = dist(gen);
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    v = static_cast<uint16_t>(bits >> 16);  // bf16 is the upper half of a float
  }
  const size_t tileBytes = tile.size() * sizeof(uint16_t);
  for (size_t off = 0; off < bytes; off += tileBytes) {
    size_t n = bytes - off < tileBytes ? bytes - off : tileBytes;
    cudaCheck(cudaMemcpy(static_cast<char*>(dst) + off, tile.data(), n, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
}

}  // namespace

GemmLoop::GemmLoop(int dim, int count) : dim_(dim), count_(count) {
  const size_t bytes = static_cast<size_t>(dim) * dim * 2;
  cudaCheck(cudaMalloc(&a_, bytes), "cudaMalloc");
  cudaCheck(cudaMalloc(&b_, bytes), "cudaMalloc");
  cudaCheck(cudaMalloc(&c_, bytes), "cudaMalloc");
  fillRandomBf16(a_, bytes, 1);
  fillRandomBf16(b_, bytes, 2);
  cudaCheck(cudaMemset(c_, 0, bytes), "cudaMemset");
  cublasCheck(cublasCreate(&handle_), "cublasCreate");
}

GemmLoop::~GemmLoop() {
  if (handle_) cublasDestroy(handle_);
  cudaFree(a_);
  cudaFree(b_);
  cudaFree(c_);
}

void GemmLoop::enqueue(cudaStream_t stream) {
  cublasCheck(cublasSetStream(handle_, stream), "cublasSetStream");
  const float alpha = 1.0f, beta = 0.0f;
  for (int i = 0; i < count_; ++i) {
    cublasCheck(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, dim_, dim_, dim_, &alpha, a_, CUDA_R_16BF, dim_, b_,
                             CUDA_R_16BF, dim_, &beta, c_, CUDA_R_16BF, dim_, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                "cublasGemmEx");
  }
}

}  // namespace rmacc::overlap
