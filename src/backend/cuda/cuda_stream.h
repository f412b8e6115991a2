// CUDA streams and events behind the Backend interface. Only runtime/driver API calls: copies
// go to the copy engines (cudaMemcpyAsync / cudaMemcpyBatchAsync), signals are stream memory
// operations (cuStreamWriteValue64 / cuStreamBatchMemOp wait). No kernel runs in the data path,
// so the SMs stay with the user's compute.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <map>
#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_check.h"

namespace rmacc::cuda {

class CudaEvent : public Event {
 public:
  explicit CudaEvent(std::shared_ptr<BackendState> state);
  ~CudaEvent() override;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t event() const { return event_; }

 private:
  std::shared_ptr<BackendState> state_;
  cudaEvent_t event_ = nullptr;
};

// One cudaStream_t, owned (createStream) or borrowed from the user (userStream). Registered in
// the BackendState from construction to destruction so that abort() can find its waits.
class CudaStream : public Stream {
 public:
  // owned: destroy the stream with the wrapper.
  CudaStream(std::shared_ptr<BackendState> state, cudaStream_t stream, bool owned);
  ~CudaStream() override;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  void copy(const CopyDesc* ops, size_t n) override;
  void writeValue(volatile uint64_t* addr, uint64_t value) override;
  void writeValues(const WriteDesc* ops, size_t n) override;
  void waitValues(const WaitDesc* ops, size_t n) override;
  void memOps(const MemOpDesc* ops, size_t n) override;
  void record(Event& event) override;
  void waitEvent(Event& event) override;
  void hostCallback(std::function<void()> fn) override;
  void hostFunction(void (*fn)(void*), void* arg) override;
  void tieToCapture(void (*release)(void*), void* arg) override;
  void synchronize() override;
  bool capturing() override;
  bool query() override;
  void* handle() override { return (void*)stream_; }

  // abort(): the largest value this stream may still be waiting for, per address. Entries are
  // dropped when the stream is seen idle, so the map is bounded by the signal slots in use.
  // Caller holds state->mutex.
  const std::map<const volatile uint64_t*, uint64_t>& pendingWaitsLocked() const {
    return pending_;
  }

 private:
  // Throws rmaccRemoteError once the backend was aborted: nothing new is enqueued after that.
  void checkNotAborted() const;
  void copyLoop(const CopyDesc* ops, size_t n);
  bool batchAllowed();
  // cudaStreamQuery once: true when idle (then forgets the pending waits), false when busy;
  // throws on a CUDA error or after abort.
  bool pollOnce();

  std::shared_ptr<BackendState> state_;
  cudaStream_t stream_;
  bool owned_;
  bool batchBroken_ = false;  // cudaMemcpyBatchAsync failed where the plain loop worked
  std::map<const volatile uint64_t*, uint64_t> pending_;  // guarded by state_->mutex
  // Reused argument arrays: copy() and waitValues() run once per op list of every batch.
  std::vector<void*> dsts_;
  std::vector<const void*> srcs_;
  std::vector<size_t> sizes_;
  void enqueueMemOps(size_t n, const std::function<void(size_t, CUstreamBatchMemOpParams&)>& fill,
                     const std::function<void(CUstreamBatchMemOpParams&)>& last);
  std::vector<CUstreamBatchMemOpParams> memOps_;
};

}  // namespace rmacc::cuda
