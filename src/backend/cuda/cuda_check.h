// Private to backend/cuda: error checks for the runtime and driver APIs, and the device context
// every object of the CUDA backend issues its calls in.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_driver.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <set>

#include "core/error.h"
#include "core/log.h"

namespace rmacc::cuda {

inline const char* cuErrorString(CUresult res) {
  const char* s = nullptr;
  if (driver().cuGetErrorString(res, &s) != CUDA_SUCCESS || !s) s = "unknown CUresult";
  return s;
}

// Clears the runtime's last-error slot so that a non-sticky error of ours does not show up in
// the user's next cudaGetLastError(); sticky errors stay whatever we do.
[[noreturn]] inline void throwCudaError(cudaError_t err, const char* call, const char* file,
                                        int line) {
  (void)cudaGetLastError();
  throwError(rmaccUnhandledCudaError, file, line,
             strprintf("%s failed: %s (%d)", call, cudaGetErrorString(err), (int)err));
}

[[noreturn]] inline void throwCuError(CUresult res, const char* call, const char* file, int line) {
  throwError(rmaccUnhandledCudaError, file, line,
             strprintf("%s failed: %s (%d)", call, cuErrorString(res), (int)res));
}

}  // namespace rmacc::cuda

// Every CUDA call of the backend goes through one of these: a failure throws
// Error(rmaccUnhandledCudaError, "<call> failed: <error string>").
#define RMACC_CUDA_CHECK(call)                                                        \
  do {                                                                                \
    cudaError_t e_ = (call);                                                          \
    if (e_ != cudaSuccess) ::rmacc::cuda::throwCudaError(e_, #call, __FILE__, __LINE__); \
  } while (0)

#define RMACC_CU_CHECK(call)                                                          \
  do {                                                                                \
    CUresult r_ = (call);                                                             \
    if (r_ != CUDA_SUCCESS) ::rmacc::cuda::throwCuError(r_, #call, __FILE__, __LINE__); \
  } while (0)

// For destructors and abort(), which must not throw: a failure is logged and skipped.
#define RMACC_CUDA_WARN(call)                                                         \
  do {                                                                                \
    cudaError_t e_ = (call);                                                          \
    if (e_ != cudaSuccess) {                                                          \
      (void)cudaGetLastError();                                                       \
      WARN("%s failed: %s", #call, cudaGetErrorString(e_));                           \
    }                                                                                 \
  } while (0)

#define RMACC_CU_WARN(call)                                                           \
  do {                                                                                \
    CUresult r_ = (call);                                                             \
    if (r_ != CUDA_SUCCESS) WARN("%s failed: %s", #call, ::rmacc::cuda::cuErrorString(r_)); \
  } while (0)

namespace rmacc::cuda {

class CudaStream;

// What a backend shares with every stream, allocation and mapping it made: they hold it by
// shared_ptr, so an object that outlives its Backend still finds its context to clean up in.
struct BackendState {
  int device = -1;           // runtime ordinal of the device current when the backend was made
  CUcontext ctx = nullptr;   // its primary context (retained), made current around every call
  double timeoutS = 300;
  bool canFlushRemoteWrites = false;  // CU_STREAM_WAIT_VALUE_FLUSH is supported
  bool rdmaCapableVmm = false;        // cuMemCreate may ask for gpuDirectRDMACapable
  // Private high-priority non-blocking stream: zeroes new allocations (synchronously) and
  // carries abort()'s releasing writes. Nothing else runs on it, so it is never stuck.
  cudaStream_t utilStream = nullptr;
  int internalPriority = 0;  // the device's greatest: rmacc's own streams (createStream)

  std::atomic<bool> aborted{false};
  std::mutex mutex;               // guards `streams` and every stream's pending waits
  std::set<CudaStream*> streams;  // every live stream of the backend, for abort()

  ~BackendState();
};

// Makes the backend's primary context current on this thread for a scope and restores the
// previous one. The executor, proxy and API threads all call into the backend, and a thread
// that never touched CUDA has no current context (driver calls would fail) or is on device 0
// (runtime calls would go to the wrong GPU).
class ContextGuard {
 public:
  explicit ContextGuard(const BackendState& state) {
    RMACC_CU_CHECK(driver().cuCtxGetCurrent(&prev_));
    if (prev_ != state.ctx) {
      RMACC_CU_CHECK(driver().cuCtxSetCurrent(state.ctx));
      switched_ = true;
    }
  }
  ~ContextGuard() {
    if (switched_) RMACC_CU_WARN(driver().cuCtxSetCurrent(prev_));
  }
  ContextGuard(const ContextGuard&) = delete;
  ContextGuard& operator=(const ContextGuard&) = delete;

 private:
  CUcontext prev_ = nullptr;
  bool switched_ = false;
};

// Non-throwing twin for destructors.
class QuietContextGuard {
 public:
  explicit QuietContextGuard(const BackendState& state) {
    if (driver().cuCtxGetCurrent(&prev_) == CUDA_SUCCESS && prev_ != state.ctx)
      switched_ = driver().cuCtxSetCurrent(state.ctx) == CUDA_SUCCESS;
  }
  ~QuietContextGuard() {
    if (switched_) (void)driver().cuCtxSetCurrent(prev_);
  }
  QuietContextGuard(const QuietContextGuard&) = delete;
  QuietContextGuard& operator=(const QuietContextGuard&) = delete;

 private:
  CUcontext prev_ = nullptr;
  bool switched_ = false;
};

// GEQ waits of the stream memops compare cyclically: satisfied when (int64_t)(*addr - v) >= 0.
// Signal counters start at 0 and only grow, so this equals the unsigned ">=" the Backend
// interface promises for any value below 2^63.
inline bool cyclicLess(uint64_t a, uint64_t b) { return (int64_t)(a - b) < 0; }

}  // namespace rmacc::cuda
