// Where rmacc-perf's buffers and stream live: plain host memory with an rmacc host-backend
// stream, or a CUDA device (device_cuda.cc, compiled only when the toolkit was found). All CUDA
// calls of the tool are behind this interface, so the tests themselves are backend-agnostic.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "rmacc.h"

namespace rmacc::perf {

class Device {
 public:
  virtual ~Device() = default;
  virtual const char* kind() const = 0;  // "host" or "cuda"
  virtual int index() const = 0;         // CUDA device ordinal, 0 on the host
  virtual std::string description() const = 0;

  // Plain memory of the backend (malloc or cudaMalloc); rmaccMemAlloc is the harness's job.
  virtual void* alloc(size_t bytes) = 0;
  virtual void release(void* ptr) = 0;
  // Host memory the device can reach (pinned on CUDA), for windows in host memory.
  virtual void* allocHost(size_t bytes) = 0;
  virtual void releaseHost(void* ptr) = 0;
  virtual void copyToDevice(void* dst, const void* hostSrc, size_t bytes) = 0;
  virtual void copyToHost(void* hostDst, const void* src, size_t bytes) = 0;

  // The stream rmacc calls are enqueued on (a cudaStream_t on CUDA).
  virtual rmaccStream_t createStream(rmaccComm_t comm) = 0;
  virtual void destroyStream(rmaccComm_t comm, rmaccStream_t stream) = 0;

  // --graph: what `enqueue` puts on `stream`, captured into an executable CUDA graph, then
  // launched on the stream and destroyed. Exits with a message where there are no graphs.
  virtual void* captureGraph(rmaccStream_t stream, const std::function<void()>& enqueue) = 0;
  virtual void launchGraph(void* graph, rmaccStream_t stream) = 0;
  virtual void destroyGraph(void* graph) = 0;
};

// Picks the device before the communicator exists: CUDA when compiled in, a GPU is present and
// RMACC_BACKEND is not "host" (the CUDA device becomes current: local rank % device count, so
// the library selects its CUDA backend); the host otherwise.
std::unique_ptr<Device> makeDevice(int localRank);

#ifdef RMACC_PERF_CUDA
// nullptr when no GPU is usable.
std::unique_ptr<Device> makeCudaDevice(int localRank);
#endif

}  // namespace rmacc::perf
