// Picks the backend (DESIGN.md §4): CUDA when rmacc was built with it and a device is current,
// otherwise the host backend; RMACC_BACKEND=host|cuda forces one.
#include "backend/backend.h"

#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

namespace rmacc {

uint64_t& streamCallsOfThisThread() {
  thread_local uint64_t calls = 0;
  return calls;
}

void Stream::memOps(const MemOpDesc* ops, size_t n) {
  std::vector<WriteDesc> writes;
  std::vector<WaitDesc> waits;
  for (size_t i = 0; i < n; ++i) {
    if (ops[i].wait) {
      if (!writes.empty()) writeValues(writes.data(), writes.size()), writes.clear();
      waits.push_back({ops[i].addr, ops[i].value});
    } else {
      if (!waits.empty()) waitValues(waits.data(), waits.size()), waits.clear();
      writes.push_back({ops[i].addr, ops[i].value});
    }
  }
  if (!writes.empty()) writeValues(writes.data(), writes.size());
  if (!waits.empty()) waitValues(waits.data(), waits.size());
}

std::unique_ptr<Backend> createBackend(double timeoutS) {
  switch (config().backend) {
    case BackendKind::kHost:
      return createHostBackend(timeoutS);
    case BackendKind::kCuda: {
      std::unique_ptr<Backend> b = cudaBackendAvailable() ? createCudaBackend(timeoutS) : nullptr;
      if (!b)
        RMACC_THROW(rmaccInvalidUsage,
                    "RMACC_BACKEND=cuda, but rmacc was built without CUDA or no CUDA device is "
                    "current in this process");
      return b;
    }
    case BackendKind::kAuto:
      break;
  }
  if (cudaBackendAvailable()) {
    if (std::unique_ptr<Backend> b = createCudaBackend(timeoutS)) return b;
    INFO(kSubsysInit, "CUDA backend available but not created; using the host backend");
  }
  return createHostBackend(timeoutS);
}

#ifndef RMACC_HAVE_CUDA
// Built without CUDA: src/backend/cuda/ is not compiled and these stand in for it.
std::unique_ptr<Backend> createCudaBackend(double) { return nullptr; }
bool cudaBackendAvailable() { return false; }
#endif

}  // namespace rmacc
