// CUDA-backend memory.
//
// rmaccMemAlloc memory is made with the VMM API (cuMemCreate + cuMemMap) rather than cudaMalloc:
// a VMM allocation exports as a POSIX file descriptor that another process imports and maps
// into its own address range, with access granted to ITS device only. That one mechanism
// covers ranks sharing a GPU and ranks on different GPUs of the node (peer mapping over NVLink
// without cudaDeviceEnablePeerAccess), gives the granularity-aligned buffers NCCL's symmetric
// windows use, and can be asked to be GPUDirect-RDMA capable for the NIC. (cudaIpc handles
// would need peer access enabled per device pair and cannot be combined with RDMA flags.)
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "backend/cuda/cuda_check.h"

namespace rmacc::cuda {

// What exportHandle() puts in the bytes.
struct CudaWireHandle {
  static constexpr uint64_t kMagic = 0x726d616363435531ull;  // "rmaccCU1"
  uint64_t magic;
  int32_t pid;         // the owner, whose fd the importer fetches
  int32_t fd;          // from cuMemExportToShareableHandle, open while the allocation lives
  uint64_t size;       // bytes asked for: Allocation::size() and Mapping::size()
  uint64_t allocSize;  // physical bytes: size rounded up to the granularity, at least one granule
  int32_t device;      // the owner's device ordinal (in the owner's numbering; for logs)
  int32_t reserved;
  uint64_t fdDev;      // st_dev and st_ino of the exported fd: the importer checks that the fd
  uint64_t fdIno;      // number it fetched still names that file
  // Unique per allocation of this process: fd numbers and the inodes of exported fds are
  // reused after a free, and peers cache mappings by handle, so without it a new allocation
  // could be taken for a freed one (seen on an H200: data went to a stale mapping).
  uint64_t serial;
};

// A reserved virtual range with one physical allocation mapped into it, read-write for one
// device. unmap() is idempotent and never throws.
struct VmmRange {
  CUdeviceptr va = 0;
  size_t size = 0;
  bool mapped = false;
  void map(CUmemGenericAllocationHandle handle, size_t bytes, size_t alignment, int device);
  void unmap() noexcept;
};

// Device memory of the backend's device, zeroed, exportable to processes of the node.
class DeviceAllocation : public Allocation {
 public:
  DeviceAllocation(std::shared_ptr<BackendState> state, size_t bytes);
  ~DeviceAllocation() override;
  DeviceAllocation(const DeviceAllocation&) = delete;
  DeviceAllocation& operator=(const DeviceAllocation&) = delete;

  void* ptr() const override { return (void*)(uintptr_t)range_.va; }
  size_t size() const override { return size_; }
  ExportHandle exportHandle() const override;

 private:
  void release() noexcept;

  std::shared_ptr<BackendState> state_;
  size_t size_ = 0;
  size_t allocSize_ = 0;
  CUmemGenericAllocationHandle handle_ = 0;
  VmmRange range_;
  int fd_ = -1;
  uint64_t fdDev_ = 0, fdIno_ = 0;
  uint64_t serial_ = 0;
};

// A peer's DeviceAllocation mapped here for this process's device. The imported handle keeps
// the physical memory alive after its owner frees it; unmapped and released on destruction.
class DeviceMapping : public Mapping {
 public:
  DeviceMapping(std::shared_ptr<BackendState> state, const CudaWireHandle& handle);
  ~DeviceMapping() override;
  DeviceMapping(const DeviceMapping&) = delete;
  DeviceMapping& operator=(const DeviceMapping&) = delete;

  void* ptr() const override { return (void*)(uintptr_t)range_.va; }
  size_t size() const override { return size_; }

 private:
  void release() noexcept;

  std::shared_ptr<BackendState> state_;
  size_t size_ = 0;
  CUmemGenericAllocationHandle handle_ = 0;
  VmmRange range_;
};

// Pinned, device-mapped host memory (cudaHostAlloc Mapped|Portable), zeroed: signal counters
// the proxy thread stores into and streams wait on, flags CPU threads poll. Under UVA the host
// pointer is the device address too (checked here), so streams' memops take it unchanged.
// Private to this process: exportHandle() throws rmaccInvalidUsage.
class PinnedHostAllocation : public Allocation {
 public:
  PinnedHostAllocation(std::shared_ptr<BackendState> state, size_t bytes);
  ~PinnedHostAllocation() override;
  PinnedHostAllocation(const PinnedHostAllocation&) = delete;
  PinnedHostAllocation& operator=(const PinnedHostAllocation&) = delete;

  void* ptr() const override { return ptr_; }
  size_t size() const override { return size_; }
  ExportHandle exportHandle() const override;

 private:
  std::shared_ptr<BackendState> state_;
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

// Maps the allocation `handle` names. Throws rmaccInvalidArgument for bytes that are not a CUDA
// export handle, rmaccSystemError when the owner's fd cannot be fetched, and
// rmaccUnhandledCudaError when the driver refuses the import or the mapping.
std::unique_ptr<Mapping> importDeviceAllocation(std::shared_ptr<BackendState> state,
                                                const ExportHandle& handle);

}  // namespace rmacc::cuda
