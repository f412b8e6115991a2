// The host backend: the CPU as the "device" (DESIGN.md §3). Memory is memfd shared memory that
// processes of the node map from export handles; streams are worker threads with CUDA stream
// semantics. It runs the same executor as the CUDA backend, in CI and on laptops.
#pragma once

#include <memory>
#include <mutex>

#include "backend/backend.h"
#include "backend/host/host_stream.h"

namespace rmacc::host {

// Thread-safe: every method may be called from any thread (each Stream still takes its own
// enqueue calls from one thread at a time).
class HostBackend : public Backend {
 public:
  explicit HostBackend(double timeoutS);
  ~HostBackend() override;

  const char* name() const override { return "host"; }
  // Ops on the NULL stream run on the calling thread (HostStream's inline mode).
  BackendCaps caps() const override { return {.synchronousNullStream = true}; }
  std::unique_ptr<Allocation> allocate(size_t bytes) override;
  std::unique_ptr<Mapping> import(const ExportHandle& handle) override;
  std::unique_ptr<Allocation> allocateHostVisible(size_t bytes) override;
  std::unique_ptr<Stream> createStream() override;
  Stream* userStream(rmaccStream_t stream) override;
  std::unique_ptr<Event> createEvent() override;
  bool isHostMemory(const void* ptr) const override { return true; }
  void hostWrite(volatile uint64_t* addr, uint64_t value) override;
  void abort() override;

 private:
  std::shared_ptr<BackendState> state_;
  std::mutex defaultMutex_;
  std::unique_ptr<HostStream> defaultStream_;  // made on first use of userStream(nullptr)
};

}  // namespace rmacc::host
