// The CUDA backend (DESIGN.md §3): the rank's current GPU. Compiled only with RMACC_HAVE_CUDA;
// backend/backend.cc holds the stand-ins for builds without CUDA.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>

#include "backend/backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_ipc.h"
#include "backend/cuda/cuda_memory.h"
#include "backend/cuda/cuda_stream.h"

namespace rmacc {

namespace cuda {

BackendState::~BackendState() {
  if (!ctx) return;
  QuietContextGuard guard(*this);
  if (utilStream) RMACC_CUDA_WARN(cudaStreamDestroy(utilStream));
  CUdevice dev;
  if (driver().cuDeviceGet(&dev, device) == CUDA_SUCCESS) RMACC_CU_WARN(driver().cuDevicePrimaryCtxRelease(dev));
}

namespace {

int deviceAttribute(CUdevice dev, CUdevice_attribute attr) {
  int v = 0;
  RMACC_CU_CHECK(driver().cuDeviceGetAttribute(&v, attr, dev));
  return v;
}

// A kernel's first launch under lazy loading waits for the whole context to go idle, and work
// enqueued meanwhile waits for the load (docs/decisions.md#eager-module-loading): a call whose work is still to
// be enqueued when its caller launches a new kernel (a peer later than RMACC_ENQUEUE_WAIT_MS,
// or counts on the device) deadlocks. Said once per process.
void warnIfLazyLoading() {
  static std::once_flag once;
  CUmoduleLoadingMode mode = CU_MODULE_EAGER_LOADING;
  if (driver().cuModuleGetLoadingMode(&mode) != CUDA_SUCCESS || mode != CU_MODULE_LAZY_LOADING) return;
  std::call_once(once, [] {
    WARN("CUDA loads modules lazily: a kernel launched for the first time while an rmacc call "
         "still waits for a late peer or for its device counts deadlocks; set "
         "CUDA_MODULE_LOADING=EAGER before CUDA starts (docs/limits.md)");
  });
}

}  // namespace

// Thread-safe: every method may be called from any thread; each call makes the backend's
// device context current for its duration (ContextGuard). Streams, events and memory it hands
// out share its state and may outlive it.
class CudaBackend : public Backend {
 public:
  explicit CudaBackend(double timeoutS);
  ~CudaBackend() override = default;

  const char* name() const override { return "cuda"; }
  std::unique_ptr<Allocation> allocate(size_t bytes) override {
    return std::make_unique<DeviceAllocation>(state_, bytes);
  }
  std::unique_ptr<Mapping> import(const ExportHandle& handle) override {
    if (isIpcHandle(handle)) return importIpcAllocation(state_, handle);
    return importDeviceAllocation(state_, handle);
  }
  std::optional<std::pair<ExportHandle, size_t>> exportUserMemory(const void* ptr,
                                                                  size_t bytes) override {
    return ipc_.exportRange(ptr, bytes);
  }
  std::unique_ptr<Allocation> allocateHostVisible(size_t bytes) override {
    return std::make_unique<PinnedHostAllocation>(state_, bytes);
  }
  std::unique_ptr<Stream> createStream() override;
  std::unique_ptr<Stream> createUserStream() override;
  Stream* userStream(rmaccStream_t stream) override;
  std::unique_ptr<Event> createEvent() override { return std::make_unique<CudaEvent>(state_); }
  bool isHostMemory(const void* ptr) const override;
  // Measured on H200s, driver 580: every same-GPU device-to-device copy is an SM kernel.
  BackendCaps caps() const override {
    return {.synchronousNullStream = false, .deviceCopyUsesCompute = true,
            .networkMayTouchDeviceMemory = true, .waitsSeeEveryStore = true};
  }
  std::string deviceIdentity() const override;
  bool isDeviceMemory(const void* ptr) const override {
    const MemoryPlace at = placeOf(ptr);
    return at.onDevice() && at.device == state_->device;
  }
  MemoryPlace placeOf(const void* ptr) const override;
  // Without a GPU-direct provider the network reaches host memory only: relay buffers and
  // network staging live in pinned host memory, and the copy engines move data across PCIe.
  std::unique_ptr<Allocation> allocateNicVisible(size_t bytes) override {
    return allocateHostVisible(bytes);
  }
  void hostWrite(volatile uint64_t* addr, uint64_t value) override;
  void abort() override;
  void releaseWait(volatile uint64_t* addr, uint64_t value) override;
  void runRelaxed(const std::function<void()>& fn) override {
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    RMACC_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    try {
      fn();
    } catch (...) {
      (void)cudaThreadExchangeStreamCaptureMode(&mode);
      throw;
    }
    RMACC_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  }
  // rmacc's threads enqueue on their own streams only, never on a stream being captured:
  // relaxed mode lets them do so while the user captures in global mode.
  void enterInternalThread() override {
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    RMACC_CUDA_WARN(cudaThreadExchangeStreamCaptureMode(&mode));
  }

 private:
  // Stores `value` at a host address unless the counter is already (cyclically) past it.
  static void hostStoreAtLeast(volatile uint64_t* addr, uint64_t value);

  std::shared_ptr<BackendState> state_;
  IpcExporter ipc_;  // after state_, which it shares
  std::mutex userMutex_;
  std::unordered_map<cudaStream_t, std::unique_ptr<CudaStream>> userStreams_;
  // Streams first seen while captured: not yet checked for their device, never run on.
  std::unordered_map<cudaStream_t, std::unique_ptr<CudaStream>> capturedStreams_;
};

CudaBackend::CudaBackend(double timeoutS)
    : state_(std::make_shared<BackendState>()), ipc_(state_) {
  RMACC_ARG_CHECK(timeoutS > 0, "cuda backend: timeout must be positive, got %g", timeoutS);
  state_->timeoutS = timeoutS;
  int device = -1;
  RMACC_CUDA_CHECK(cudaGetDevice(&device));
  // cudaSetDevice creates the primary context (CUDA >= 12); retaining it pins it for the
  // backend's life, and ContextGuard makes it current on whichever thread calls in.
  RMACC_CUDA_CHECK(cudaSetDevice(device));
  CUdevice dev;
  RMACC_CU_CHECK(driver().cuDeviceGet(&dev, device));
  RMACC_CU_CHECK(driver().cuDevicePrimaryCtxRetain(&state_->ctx, dev));
  state_->device = device;
  ContextGuard guard(*state_);

  if (!deviceAttribute(dev, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) ||
      !deviceAttribute(dev, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED))
    RMACC_THROW(rmaccSystemError,
                "cuda backend: device %d lacks VMM with POSIX fd export (needed for windows)",
                device);
  if (!deviceAttribute(dev, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS))
    RMACC_THROW(rmaccSystemError,
                "cuda backend: device %d lacks 64-bit stream memory operations (signals)", device);
  state_->canFlushRemoteWrites =
      deviceAttribute(dev, CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES) != 0;
  state_->rdmaCapableVmm =
      deviceAttribute(dev, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED) != 0;

  // Streams of different priorities never share a hardware queue; streams of one priority
  // share one with every 32nd stream of that priority created in the process (measured on an
  // H200, driver 580, whatever CUDA_DEVICE_MAX_CONNECTIONS says). A stream-memory wait blocks
  // its whole queue, so a user stream waiting for a call (enqueued before rmacc's streams get
  // the call's work, which the progress thread enqueues later) would block that work, and the
  // call, for good if one of rmacc's streams shared its queue: PyTorch makes 32 pool streams
  // per priority and NCCL more, so some would. rmacc's own streams therefore take the
  // device's greatest priority, which PyTorch's streams (priorities 0 to -3) and NCCL's do
  // not use; abort()'s releasing writes (utilStream) are then also ahead of queued copies.
  int leastPrio = 0;
  RMACC_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&leastPrio, &state_->internalPriority));
  RMACC_CUDA_CHECK(cudaStreamCreateWithPriority(&state_->utilStream, cudaStreamNonBlocking,
                                                state_->internalPriority));
  INFO(kSubsysInit, "cuda backend on device %d, stream timeout %.1f s, flush %d, rdma vmm %d",
       device, timeoutS, (int)state_->canFlushRemoteWrites, (int)state_->rdmaCapableVmm);
  warnIfLazyLoading();
}

// Non-blocking: no implicit synchronisation with the legacy stream the user may use.
std::unique_ptr<Stream> CudaBackend::createStream() {
  ContextGuard guard(*state_);
  cudaStream_t s = nullptr;
  RMACC_CUDA_CHECK(
      cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, state_->internalPriority));
  return std::make_unique<CudaStream>(state_, s, /*owned=*/true);
}

std::unique_ptr<Stream> CudaBackend::createUserStream() {
  ContextGuard guard(*state_);
  cudaStream_t s = nullptr;
  RMACC_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return std::make_unique<CudaStream>(state_, s, /*owned=*/true);
}

// Any cudaStream_t of the backend's device, wrapped without owning it; the wrapper is cached
// by handle value for the backend's life (a user stream destroyed and a new one created at the
// same address reuses the wrapper, which holds nothing but the handle and pending waits).
// NULL is the legacy default stream, as a cudaStream_t of 0 means to code built without
// --default-stream per-thread; cudaStreamPerThread and cudaStreamLegacy are accepted as such.
// A handle of another device, or one the runtime rejects, gives nullptr.
std::string CudaBackend::deviceIdentity() const {
  cudaDeviceProp prop{};
  RMACC_CUDA_CHECK(cudaGetDeviceProperties(&prop, state_->device));
  std::string hex;
  char byte[3];
  for (unsigned char b : prop.uuid.bytes) snprintf(byte, sizeof byte, "%02x", b), hex += byte;
  return hex;
}

Stream* CudaBackend::userStream(rmaccStream_t stream) {
  auto handle = (cudaStream_t)stream;
  std::lock_guard<std::mutex> lk(userMutex_);
  auto it = userStreams_.find(handle);
  if (it != userStreams_.end()) return it->second.get();
  if (handle != nullptr) {
    ContextGuard guard(*state_);
    // Under graph capture, asking a stream its device fails and invalidates the user's
    // capture (seen on an H200, CUDA 13.0): the caller only needs the wrapper to see the
    // capture and refuse, so it gets one whose device is checked once the capture is over.
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(handle, &capture) == cudaSuccess &&
        capture != cudaStreamCaptureStatusNone) {
      auto& probe = capturedStreams_[handle];
      if (!probe) probe = std::make_unique<CudaStream>(state_, handle, /*owned=*/false);
      return probe.get();
    }
    (void)cudaGetLastError();
    int dev = -1;
    cudaError_t err = cudaStreamGetDevice(handle, &dev);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      INFO(kSubsysExec, "cuda: stream %p rejected: %s", stream, cudaGetErrorString(err));
      return nullptr;
    }
    if (dev != state_->device) {
      INFO(kSubsysExec, "cuda: stream %p is on device %d, the communicator on %d", stream, dev,
           state_->device);
      return nullptr;
    }
    int prio = 0;
    if (cudaStreamGetPriority(handle, &prio) == cudaSuccess && prio == state_->internalPriority)
      WARN("cuda: stream %p has the device's greatest priority (%d), as rmacc's own streams: "
           "if it shares a hardware queue with one of them, a call on it can wait until "
           "RMACC_TIMEOUT_S; use a lower priority for streams that carry rmacc calls",
           stream, prio);
  }
  auto wrapper = std::make_unique<CudaStream>(state_, handle, /*owned=*/false);
  Stream* s = wrapper.get();
  userStreams_.emplace(handle, std::move(wrapper));
  return s;
}

// Unregistered host memory (malloc, stack) and pinned host memory are CPU-addressable;
// device memory, VMM mappings and managed memory are not treated as such.
bool CudaBackend::isHostMemory(const void* ptr) const {
  ContextGuard guard(*state_);
  cudaPointerAttributes attr = {};
  RMACC_CUDA_CHECK(cudaPointerGetAttributes(&attr, ptr));
  return attr.type == cudaMemoryTypeUnregistered || attr.type == cudaMemoryTypeHost;
}

MemoryPlace CudaBackend::placeOf(const void* ptr) const {
  ContextGuard guard(*state_);
  cudaPointerAttributes attr = {};
  RMACC_CUDA_CHECK(cudaPointerGetAttributes(&attr, ptr));
  if (attr.type != cudaMemoryTypeDevice) return {};
  return MemoryPlace{MemoryPlace::Kind::kCuda, attr.device};
}

// A release store: the CPU's earlier writes are ordered before it, and the GPU's stream wait
// reads pinned host memory coherently over PCIe/C2C, so no further step is needed here.
void CudaBackend::hostWrite(volatile uint64_t* addr, uint64_t value) {
  __atomic_store_n(addr, value, __ATOMIC_RELEASE);
}

void CudaBackend::hostStoreAtLeast(volatile uint64_t* addr, uint64_t value) {
  uint64_t cur = __atomic_load_n(addr, __ATOMIC_ACQUIRE);
  while (cyclicLess(cur, value) &&
         !__atomic_compare_exchange_n(addr, &cur, value, false, __ATOMIC_RELEASE,
                                      __ATOMIC_ACQUIRE)) {
  }
}

// How abort releases waits. A GPU stream stuck in a memop wait cannot be cancelled, and
// destroying the stream does not stop it: the only way out is to satisfy the wait. Every
// stream records (address, largest awaited value) for its waits since it was last seen idle;
// abort writes that value into each address: a CPU store for host memory, and for device
// memory (own, or a peer's mapping) a cuStreamWriteValue64 on the backend's private
// high-priority stream, which carries nothing that could be stuck. The value, not UINT64_MAX:
// GEQ compares cyclically, and UINT64_MAX is "before" any small value. `aborted` is set under
// the mutex waitValues() records under, so a wait is either released here or never enqueued;
// every later enqueue, query and synchronize throws rmaccRemoteError ("aborted").
// The memory the waits point to must stay allocated until abort() returns.
void CudaBackend::abort() {
  WARN("cuda backend: abort, releasing every stream wait");
  std::map<const volatile uint64_t*, uint64_t> release;
  {
    std::lock_guard<std::mutex> lk(state_->mutex);
    state_->aborted.store(true);
    for (CudaStream* s : state_->streams) {
      for (const auto& [addr, value] : s->pendingWaitsLocked()) {
        auto [it, fresh] = release.emplace(addr, value);
        if (!fresh && cyclicLess(it->second, value)) it->second = value;
      }
    }
  }
  for (const auto& [addr, value] : release) releaseWait(const_cast<volatile uint64_t*>(addr), value);
  INFO(kSubsysExec, "cuda backend: abort released %zu wait addresses", release.size());
}

void CudaBackend::releaseWait(volatile uint64_t* p, uint64_t value) {
  QuietContextGuard guard(*state_);
  cudaPointerAttributes attr = {};
  cudaError_t err = cudaPointerGetAttributes(&attr, (const void*)p);
  if (err != cudaSuccess) {
    // Not knowing what the address is, a CPU store could fault on device memory: skip it.
    (void)cudaGetLastError();
    WARN("cuda backend: cannot release the wait at %p: %s", (const void*)p, cudaGetErrorString(err));
  } else if (attr.type == cudaMemoryTypeHost || attr.type == cudaMemoryTypeUnregistered) {
    hostStoreAtLeast(p, value);
  } else {
    RMACC_CU_WARN(driver().cuStreamWriteValue64((CUstream)state_->utilStream, (CUdeviceptr)(uintptr_t)p,
                                       value, CU_STREAM_WRITE_VALUE_DEFAULT));
  }
}

}  // namespace cuda

std::unique_ptr<Backend> createCudaBackend(double timeoutS) {
  // Every internal stream holds stream-memory waits; streams that share one of the device's
  // CUDA_DEVICE_MAX_CONNECTIONS hardware queues can block each other's work for good (seen on
  // an H200 under MPS with the default). Say so once; the launcher sets 32.
  static bool warned = false;
  const char* conn = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  if (!warned && (!conn || atoi(conn) < 16)) {
    warned = true;
    WARN("CUDA_DEVICE_MAX_CONNECTIONS is %s: set it to 32 before CUDA starts, or rmacc's "
         "internal streams may share hardware queues and hang",
         conn ? conn : "unset (8)");
  }
  return std::make_unique<cuda::CudaBackend>(timeoutS);
}

// Needs a driver and at least one visible device. Note that this initialises CUDA in the
// calling process: a process that forks ranks afterwards must not use CUDA in the children.
bool cudaBackendAvailable() {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return n > 0;
}

}  // namespace rmacc
