// A buffer the library stages data through (receive blocks for callers whose buffers peers
// cannot reach, proxy sources in device memory). It grows on demand; a replaced buffer stays
// alive until the calls that used it are complete.
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

  // At least `bytes` for call `seq`; `done` is the last completed call.
  char* reserve(uint64_t bytes, uint64_t seq, uint64_t done);
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
    uint64_t lastUser;
  };
  std::vector<Retired> retired_;
};

}  // namespace rmacc
