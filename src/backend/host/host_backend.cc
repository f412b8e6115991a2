#include "backend/host/host_backend.h"

#include <chrono>
#include <thread>

#include "os/futex.h"
#include "backend/host/host_memory.h"
#include "core/error.h"
#include "core/log.h"

namespace rmacc {

namespace host {

HostBackend::HostBackend(double timeoutS) : state_(std::make_shared<BackendState>(timeoutS)) {
  RMACC_ARG_CHECK(timeoutS > 0, "host backend: timeout must be positive, got %g", timeoutS);
  INFO(kSubsysInit, "host backend, stream wait timeout %.1f s", timeoutS);
}

// The default stream drains and joins here; streams handed out by createStream() are owned
// by their callers and keep the shared BackendState alive on their own.
HostBackend::~HostBackend() = default;

std::unique_ptr<Allocation> HostBackend::allocate(size_t bytes) {
  return std::make_unique<HostAllocation>(bytes);
}

std::unique_ptr<Mapping> HostBackend::import(const ExportHandle& handle) {
  return importAllocation(handle);
}

// The same shared memory as allocate(): page-aligned, CPU-visible, and exportable as well,
// which costs nothing here.
std::unique_ptr<Allocation> HostBackend::allocateHostVisible(size_t bytes) {
  return std::make_unique<HostAllocation>(bytes);
}

std::unique_ptr<Stream> HostBackend::createStream() {
  return std::make_unique<HostStream>(state_);
}

Stream* HostBackend::userStream(rmaccStream_t stream) {
  if (!stream) {
    std::lock_guard<std::mutex> lk(defaultMutex_);
    if (!defaultStream_) defaultStream_ = std::make_unique<HostStream>(state_);
    return defaultStream_.get();
  }
  std::lock_guard<std::mutex> lk(state_->mutex);
  auto it = state_->streams.find(stream);
  return it == state_->streams.end() ? nullptr : it->second;
}

std::unique_ptr<Event> HostBackend::createEvent() { return std::make_unique<HostEvent>(); }

void HostBackend::hostWrite(volatile uint64_t* addr, uint64_t value) { os::storeAndWake(addr, value); }

// Returns once no worker runs an op (BackendState::busyWorkers): a woken wait leaves within a
// wait slice, a copy or a store when it is done. Woken again each round: a worker that
// published its word after a wake is woken by the next.
void HostBackend::abort() {
  if (!state_->aborted.exchange(true)) WARN("host backend: abort, every stream wait now fails");
  for (;;) {
    {
      // Lock order: the registry before each stream's core (wakeForAbort takes the latter).
      std::lock_guard<std::mutex> lk(state_->mutex);
      for (auto& [handle, stream] : state_->streams) stream->wakeForAbort();
    }
    if (state_->busyWorkers.load() == 0) return;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace host

std::unique_ptr<Backend> createHostBackend(double timeoutS) {
  return std::make_unique<host::HostBackend>(timeoutS);
}

}  // namespace rmacc
