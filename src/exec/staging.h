// A buffer the library stages data through (receive blocks for callers whose buffers peers
// cannot reach). It grows on demand, by half again each time; a replaced buffer stays alive
// until the communicator goes (calls in flight may still use it, and freeing it early would
// synchronise the device from the progress thread).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "net/proxy.h"

namespace rmacc {

class StagingBuffer {
 public:
  using AllocFn = std::function<std::unique_ptr<Allocation>(size_t)>;
  // `proxy` (may be null) registers the buffer for remote writes.
  StagingBuffer(AllocFn alloc, Proxy* proxy) : alloc_(std::move(alloc)), proxy_(proxy) {}

  // At least `bytes` for the next call.
  char* reserve(uint64_t bytes);
  const Allocation& allocation() const { return *current_; }
  RemoteRegion remote() const { return mr_ ? mr_->remote() : RemoteRegion{}; }

 private:
  AllocFn alloc_;
  Proxy* proxy_;
  std::unique_ptr<Allocation> current_;
  std::unique_ptr<MemoryRegion> mr_;
  struct Retired {
    std::unique_ptr<Allocation> alloc;  // declared first: destroyed after its registration
    std::unique_ptr<MemoryRegion> mr;
  };
  std::vector<Retired> retired_;
};

}  // namespace rmacc
