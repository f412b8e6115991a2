#include "backend/cuda/cuda_memory.h"

#include <atomic>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "os/peer_fd.h"

namespace rmacc::cuda {

namespace {

CUmemAllocationProp allocationProp(const BackendState& state) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = state.device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  // Lets the proxy register the buffer with the NIC (zero-copy FI_HMEM) where supported.
  prop.allocFlags.gpuDirectRDMACapable = state.rdmaCapableVmm ? 1 : 0;
  return prop;
}

size_t recommendedGranularity(const CUmemAllocationProp& prop) {
  size_t g = 0;
  RMACC_CU_CHECK(
      driver().cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  RMACC_ENFORCE(g > 0, "zero allocation granularity");
  return g;
}

}  // namespace

void VmmRange::map(CUmemGenericAllocationHandle handle, size_t bytes, size_t alignment,
                   int device) {
  RMACC_CU_CHECK(driver().cuMemAddressReserve(&va, bytes, alignment, 0, 0));
  size = bytes;
  RMACC_CU_CHECK(driver().cuMemMap(va, bytes, 0, handle, 0));
  mapped = true;
  // Access for this process's device only: every rank sets its own, whether the memory sits
  // on its GPU or on a peer GPU reached over NVLink.
  CUmemAccessDesc access = {};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  RMACC_CU_CHECK(driver().cuMemSetAccess(va, bytes, &access, 1));
}

void VmmRange::unmap() noexcept {
  if (mapped) RMACC_CU_WARN(driver().cuMemUnmap(va, size));
  if (va) RMACC_CU_WARN(driver().cuMemAddressFree(va, size));
  mapped = false;
  va = 0;
  size = 0;
}

DeviceAllocation::DeviceAllocation(std::shared_ptr<BackendState> state, size_t bytes)
    : state_(std::move(state)), size_(bytes) {
  ContextGuard guard(*state_);
  CUmemAllocationProp prop = allocationProp(*state_);
  size_t gran = recommendedGranularity(prop);
  // A 0-byte allocation still gets one granule: a valid, distinct, exportable address.
  allocSize_ = std::max<size_t>(1, (bytes + gran - 1) / gran) * gran;
  try {
    RMACC_CU_CHECK(driver().cuMemCreate(&handle_, allocSize_, &prop, 0));
    range_.map(handle_, allocSize_, gran, state_->device);
    // Kept open for as long as the allocation lives: importers fetch it from this process.
    RMACC_CU_CHECK(driver().cuMemExportToShareableHandle(&fd_, handle_,
                                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    struct stat st;
    RMACC_SYSCHECK(fstat(fd_, &st), "fstat of the exported fd");
    static std::atomic<uint64_t> nextSerial{1};
    serial_ = nextSerial.fetch_add(1);
    fdDev_ = (uint64_t)st.st_dev;
    fdIno_ = (uint64_t)st.st_ino;
    // Zeroed like the host backend's memfd pages (signal counters start at 0). On the private
    // stream, synchronously: a memset on the legacy stream would not be ordered with the
    // non-blocking streams that use the memory next.
    RMACC_CU_CHECK(driver().cuMemsetD8Async(range_.va, 0, allocSize_, (CUstream)state_->utilStream));
    RMACC_CU_CHECK(driver().cuStreamSynchronize((CUstream)state_->utilStream));
  } catch (...) {
    release();
    throw;
  }
  INFO(kSubsysAlloc, "cuda: allocated %zu bytes (%zu mapped) at %p on device %d, fd %d", size_,
       allocSize_, ptr(), state_->device, fd_);
}

DeviceAllocation::~DeviceAllocation() {
  INFO(kSubsysAlloc, "cuda: freeing %zu bytes at %p", size_, ptr());
  release();
}

// Unmapping does not wait for the device: freeing memory that streams still use is the
// caller's error, as with cudaFree.
void DeviceAllocation::release() noexcept {
  QuietContextGuard guard(*state_);
  range_.unmap();
  if (handle_) RMACC_CU_WARN(driver().cuMemRelease(handle_));
  handle_ = 0;
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

ExportHandle DeviceAllocation::exportHandle() const {
  CudaWireHandle h = {};
  h.magic = CudaWireHandle::kMagic;
  h.pid = (int32_t)getpid();
  h.fd = fd_;
  h.size = size_;
  h.allocSize = allocSize_;
  h.device = state_->device;
  h.fdDev = fdDev_;
  h.fdIno = fdIno_;
  h.serial = serial_;
  ExportHandle bytes(sizeof(h));
  memcpy(bytes.data(), &h, sizeof(h));
  return bytes;
}

DeviceMapping::DeviceMapping(std::shared_ptr<BackendState> state, const CudaWireHandle& h)
    : state_(std::move(state)), size_(h.size) {
  ContextGuard guard(*state_);
  std::string why;
  // Our own allocation (a rank importing what it exported) is simply dup'ed.
  int fd = h.pid == getpid() ? fcntl(h.fd, F_DUPFD_CLOEXEC, 0) : fetchPeerFd(h.pid, h.fd, &why);
  if (fd < 0 && h.pid == getpid()) why = strprintf("dup of own fd: %s", strerror(errno));
  if (fd < 0)
    RMACC_THROW(rmaccSystemError, "import: cannot fetch fd %d of pid %d: %s", h.fd, h.pid,
                why.c_str());
  try {
    struct stat st;
    RMACC_SYSCHECK(fstat(fd, &st), "fstat of the imported fd");
    if ((uint64_t)st.st_dev != h.fdDev || (uint64_t)st.st_ino != h.fdIno)
      RMACC_THROW(rmaccSystemError,
                  "import: fd %d of pid %d is not the exported allocation (freed by its owner?)",
                  h.fd, h.pid);
    RMACC_CU_CHECK(driver().cuMemImportFromShareableHandle(&handle_, (void*)(uintptr_t)fd,
                                                  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  } catch (...) {
    close(fd);
    throw;
  }
  // The imported handle holds its own reference to the physical memory.
  close(fd);
  try {
    size_t gran = recommendedGranularity(allocationProp(*state_));
    range_.map(handle_, h.allocSize, gran, state_->device);
  } catch (...) {
    release();
    throw;
  }
  INFO(kSubsysAlloc,
       "cuda: mapped %llu bytes of pid %d (its device %d) at %p for device %d",
       (unsigned long long)h.size, h.pid, h.device, ptr(), state_->device);
}

DeviceMapping::~DeviceMapping() { release(); }

void DeviceMapping::release() noexcept {
  QuietContextGuard guard(*state_);
  range_.unmap();
  if (handle_) RMACC_CU_WARN(driver().cuMemRelease(handle_));
  handle_ = 0;
}

std::unique_ptr<Mapping> importDeviceAllocation(std::shared_ptr<BackendState> state,
                                                const ExportHandle& bytes) {
  CudaWireHandle h;
  RMACC_ARG_CHECK(bytes.size() == sizeof(h),
                  "import: %zu bytes are not a CUDA export handle (%zu expected)", bytes.size(),
                  sizeof(h));
  memcpy(&h, bytes.data(), sizeof(h));
  RMACC_ARG_CHECK(h.magic == CudaWireHandle::kMagic, "import: not a CUDA export handle");
  RMACC_ARG_CHECK(h.allocSize > 0 && h.allocSize >= h.size && h.pid > 0 && h.fd >= 0,
                  "import: malformed CUDA export handle (size %llu, mapped %llu, pid %d, fd %d)",
                  (unsigned long long)h.size, (unsigned long long)h.allocSize, h.pid, h.fd);
  return std::make_unique<DeviceMapping>(std::move(state), h);
}

PinnedHostAllocation::PinnedHostAllocation(std::shared_ptr<BackendState> state, size_t bytes)
    : state_(std::move(state)), size_(bytes) {
  ContextGuard guard(*state_);
  // Portable: pinned for every context of the process, not only the current one.
  size_t allocBytes = std::max<size_t>(bytes, 64);
  // A captured call allocates its site while the caller's stream is being captured, perhaps in
  // cudaStreamCaptureModeGlobal, which may forbid this thread an allocation; it touches no
  // stream, so relax the mode for it.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  RMACC_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  cudaError_t alloc = cudaHostAlloc(&ptr_, allocBytes, cudaHostAllocMapped | cudaHostAllocPortable);
  RMACC_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  RMACC_CUDA_CHECK(alloc);
  memset(ptr_, 0, allocBytes);
  void* dev = nullptr;
  cudaError_t err = cudaHostGetDevicePointer(&dev, ptr_, 0);
  if (err != cudaSuccess || dev != ptr_) {
    (void)cudaGetLastError();
    RMACC_CUDA_WARN(cudaFreeHost(ptr_));
    ptr_ = nullptr;
    RMACC_THROW(rmaccSystemError,
                "pinned host memory is not addressed alike by host and device (%s; no UVA?): "
                "the CUDA backend needs unified addressing",
                cudaGetErrorString(err));
  }
  INFO(kSubsysAlloc, "cuda: allocated %zu bytes of host-visible memory at %p", bytes, ptr_);
}

PinnedHostAllocation::~PinnedHostAllocation() {
  QuietContextGuard guard(*state_);
  if (ptr_) RMACC_CUDA_WARN(cudaFreeHost(ptr_));
}

ExportHandle PinnedHostAllocation::exportHandle() const {
  RMACC_THROW(rmaccInvalidUsage,
              "host-visible memory of the CUDA backend is private to its process");
}

}  // namespace rmacc::cuda
