// Pinned staging for proxy puts whose source the network cannot read (device memory without a
// GPU-direct provider): the posting stream copies the bytes in, the proxy sends them from
// there. One ring per posting stream; a region is reused only after the proxy reported the
// put that read it done, and that wait is enqueued on the stream, never on the host.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "net/proxy.h"

namespace rmacc {

class BounceRing {
 public:
  BounceRing(Backend& backend, Proxy& proxy) : backend_(backend), proxy_(proxy) {}

  // Where the next `bytes` go; enqueues on `stream` a wait for `done` (the queue's done flag)
  // when the region still feeds an unfinished put. Call used() with that put's seq next.
  char* reserve(Stream& stream, size_t bytes, volatile uint64_t* done);
  void used(uint64_t seq);
  void* desc() const { return mr_ ? mr_->desc() : nullptr; }

 private:
  struct Segment {
    uint64_t offset, bytes, seq;
  };
  Backend& backend_;
  Proxy& proxy_;
  std::unique_ptr<Allocation> buffer_;
  std::unique_ptr<MemoryRegion> mr_;
  struct Retired {
    std::unique_ptr<Allocation> buffer;
    std::unique_ptr<MemoryRegion> mr;
  };
  std::vector<Retired> retired_;
  std::deque<Segment> inFlight_;  // oldest first
  uint64_t head_ = 0;
  Segment pending_{0, 0, 0};
};

}  // namespace rmacc
