// The compute side of bench/overlap: a loop of bf16 GEMMs through cuBLAS (8192^3 by default, the
// shape of issue 11's torch.matmul loop), enqueued on a given stream.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace rmacc::overlap {

class GemmLoop {
 public:
  // dim x dim x dim, `count` GEMMs per loop; A and B hold random values in [-1, 1) (zeros would
  // draw less power and run faster than real activations).
  GemmLoop(int dim, int count);
  ~GemmLoop();
  GemmLoop(const GemmLoop&) = delete;
  GemmLoop& operator=(const GemmLoop&) = delete;

  // Enqueues the `count` GEMMs on `stream`.
  void enqueue(cudaStream_t stream);
  int count() const { return count_; }
  int dim() const { return dim_; }

 private:
  int dim_, count_;
  void* a_ = nullptr;
  void* b_ = nullptr;
  void* c_ = nullptr;
  cublasHandle_t handle_ = nullptr;
};

}  // namespace rmacc::overlap
