// Memory the caller allocated itself (cudaMalloc, PyTorch's caching allocator) made reachable
// by the node's other ranks, so that their copies land in it directly instead of in staging
// (a second, same-device copy). The exporter hands out a legacy CUDA IPC handle for the whole
// allocation holding a buffer, cached by allocation: the driver's buffer id (unique per
// allocation of a process) tells a new allocation at a freed one's address from the old one,
// so a stale handle is never reused, and peers, which cache mappings by handle bytes, map the
// new allocation afresh (NCCL's user-buffer registration keys its cache the same way).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "backend/backend.h"
#include "backend/cuda/cuda_check.h"

namespace rmacc::cuda {

struct CudaIpcWireHandle {
  static constexpr uint64_t kMagic = 0x726d616363495043ull;  // "rmaccIPC"
  uint64_t magic;
  cudaIpcMemHandle_t ipc;
  uint64_t size;      // bytes of the whole allocation
  uint64_t bufferId;  // CU_POINTER_ATTRIBUTE_BUFFER_ID in the owner
  int32_t pid;        // the owner (for messages)
  int32_t device;     // the owner's device ordinal
};

class IpcExporter {
 public:
  explicit IpcExporter(std::shared_ptr<BackendState> state) : state_(std::move(state)) {}
  // The handle of the allocation holding [ptr, ptr + bytes) and ptr's offset in it; nullopt
  // for memory that is not this device's or cannot be shared through legacy IPC (VMM memory).
  std::optional<std::pair<ExportHandle, size_t>> exportRange(const void* ptr, size_t bytes);

 private:
  struct Entry {
    uint64_t bufferId;
    ExportHandle handle;
  };
  std::shared_ptr<BackendState> state_;
  std::mutex mu_;
  std::map<uintptr_t, Entry> byBase_;  // allocations seen, by start address
};

// A peer's allocation opened through its IPC handle; closed on destruction.
std::unique_ptr<Mapping> importIpcAllocation(std::shared_ptr<BackendState> state,
                                             const ExportHandle& handle);
bool isIpcHandle(const ExportHandle& handle);

}  // namespace rmacc::cuda
