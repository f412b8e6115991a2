// The communication side of bench/overlap: the same all-to-all through rmacc or NCCL (its kernel
// path, and its copy-engine path where the loaded NCCL has one), on buffers of a given kind.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "harness.h"
#include "nccl_api.h"

namespace rmacc::overlap {

enum class Lib { kRmacc, kNcclKernel, kNcclCe };
// kCudaMalloc: one cudaMalloc per buffer (PyTorch, a fresh large block);
// kOffset: send and receive inside one larger cudaMalloc segment, at offsets that are multiples
//          of 512 bytes but not of 4 KiB (PyTorch's caching allocator hands out such blocks);
// kLibAlloc: the library's own memory: rmaccMemAlloc + window (rmacc), ncclMemAlloc +
//          symmetric window (NCCL's copy-engine path, which needs it).
enum class BufKind { kCudaMalloc, kOffset, kLibAlloc };

const char* libName(Lib lib);
const char* kindName(BufKind kind);

struct A2aBuffers {
  void* send = nullptr;
  void* recv = nullptr;
  size_t bytes = 0;  // per buffer
  void* segment = nullptr;               // kOffset: the cudaMalloc both live in
  perf::Buffer rmaccSend, rmaccRecv;     // rmacc kLibAlloc
  nccl::Window win[2] = {nullptr, nullptr};  // NCCL kLibAlloc
};

class Libs {
 public:
  // NCCL is optional: without it (not found, or fewer GPUs than ranks) only rmacc runs, and
  // ncclAvailable() says why not. Collective over ctx's ranks.
  Libs(perf::Context& ctx, const std::string& ncclLib);
  ~Libs();

  bool has(Lib lib) const;
  std::string ncclDescription() const { return ncclDesc_; }

  // Collective (registrations): every rank allocates the same configurations in the same order.
  A2aBuffers alloc(Lib lib, BufKind kind, size_t bytes);
  void release(Lib lib, BufKind kind, A2aBuffers* b);

  // One all-to-all of countPerPeer floats per peer on `stream`.
  void call(Lib lib, const A2aBuffers& b, size_t countPerPeer, cudaStream_t stream);
  // All ranks at the same point, the comm stream drained (rmaccBarrier).
  void barrier();

 private:
  perf::Context& ctx_;
  nccl::Api api_;
  nccl::Comm kernelComm_ = nullptr, ceComm_ = nullptr;
  std::string ncclDesc_;
};

}  // namespace rmacc::overlap
