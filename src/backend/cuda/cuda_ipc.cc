#include "backend/cuda/cuda_ipc.h"

#include <unistd.h>

#include <cstring>

#include "backend/cuda/cuda_driver.h"

namespace rmacc::cuda {

namespace {

// Allocations kept in the exporter's cache: a program that allocates without end (no caching
// allocator) must not grow it without bound.
constexpr size_t kMaxCachedAllocations = 4096;

class IpcMapping : public Mapping {
 public:
  IpcMapping(std::shared_ptr<BackendState> state, const CudaIpcWireHandle& h)
      : state_(std::move(state)), size_(h.size) {
    ContextGuard guard(*state_);
    // Lazy peer access: the mapping of another GPU's memory enables peer access on first use.
    cudaError_t err = cudaIpcOpenMemHandle(&ptr_, h.ipc, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      RMACC_THROW(rmaccUnhandledCudaError,
                  "cudaIpcOpenMemHandle of a %llu-byte buffer of pid %d (device %d): %s",
                  (unsigned long long)h.size, h.pid, h.device, cudaGetErrorString(err));
    }
  }
  ~IpcMapping() override {
    QuietContextGuard guard(*state_);
    RMACC_CUDA_WARN(cudaIpcCloseMemHandle(ptr_));
  }
  void* ptr() const override { return ptr_; }
  size_t size() const override { return size_; }

 private:
  std::shared_ptr<BackendState> state_;
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace

std::optional<std::pair<ExportHandle, size_t>> IpcExporter::exportRange(const void* ptr,
                                                                        size_t bytes) {
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 CU_POINTER_ATTRIBUTE_BUFFER_ID, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                 CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                 CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE};
  unsigned int memType = 0;
  int ordinal = -1;
  unsigned long long bufferId = 0;
  CUdeviceptr base = 0;
  size_t size = 0;
  int ipcCapable = 0;
  void* out[] = {&memType, &ordinal, &bufferId, &base, &size, &ipcCapable};
  {
    ContextGuard guard(*state_);
    if (driver().cuPointerGetAttributes(6, attrs, out, (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS)
      return std::nullopt;  // not memory the driver knows (plain host memory)
  }
  if (memType != CU_MEMORYTYPE_DEVICE || ordinal != state_->device || !ipcCapable || base == 0)
    return std::nullopt;
  size_t offset = (uintptr_t)ptr - (uintptr_t)base;
  if (offset > size || bytes > size - offset) return std::nullopt;  // spans allocations

  std::lock_guard<std::mutex> lk(mu_);
  auto it = byBase_.find((uintptr_t)base);
  if (it != byBase_.end() && it->second.bufferId == bufferId) return {{it->second.handle, offset}};
  CudaIpcWireHandle h = {};
  h.magic = CudaIpcWireHandle::kMagic;
  {
    ContextGuard guard(*state_);
    cudaError_t err = cudaIpcGetMemHandle(&h.ipc, (void*)(uintptr_t)base);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return std::nullopt;
    }
  }
  h.size = size;
  h.bufferId = bufferId;
  h.pid = (int32_t)getpid();
  h.device = state_->device;
  ExportHandle bytesOut(sizeof(h));
  memcpy(bytesOut.data(), &h, sizeof(h));
  if (byBase_.size() >= kMaxCachedAllocations) byBase_.clear();
  byBase_[(uintptr_t)base] = {bufferId, bytesOut};
  return {{bytesOut, offset}};
}

bool isIpcHandle(const ExportHandle& handle) {
  uint64_t magic = 0;
  if (handle.size() != sizeof(CudaIpcWireHandle)) return false;
  memcpy(&magic, handle.data(), sizeof(magic));
  return magic == CudaIpcWireHandle::kMagic;
}

std::unique_ptr<Mapping> importIpcAllocation(std::shared_ptr<BackendState> state,
                                             const ExportHandle& handle) {
  CudaIpcWireHandle h;
  RMACC_ARG_CHECK(isIpcHandle(handle), "import: not a CUDA IPC handle");
  memcpy(&h, handle.data(), sizeof(h));
  RMACC_ARG_CHECK(h.size > 0, "import: a CUDA IPC handle of an empty allocation");
  return std::make_unique<IpcMapping>(std::move(state), h);
}

}  // namespace rmacc::cuda
