// Pinned staging for proxy puts whose source the network cannot read (device memory without a
// GPU-direct provider): the posting stream copies the bytes in, the proxy sends them from
// there. One ring per posting stream; a region is reused only after the proxy reported the
// put that read it done, and that wait is enqueued on the stream, never on the host.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "net/proxy.h"

namespace rmacc {

// Which bytes of a ring of `capacity` the next region takes, and which put must be done
// before they can be overwritten. Pure bookkeeping (no memory, no streams): tested alone.
class RingSpace {
 public:
  explicit RingSpace(uint64_t capacity) : capacity_(capacity) {}
  struct Region {
    uint64_t offset;
    uint64_t waitSeq;  // 0: free now; else the put with this seq (and all before) must be done
  };
  // `bytes` <= capacity. `finished`: every put up to this seq is done (the queue's done flag).
  Region reserve(uint64_t bytes, uint64_t finished);
  void used(uint64_t seq);  // the put reading the region just reserved has this seq
  uint64_t capacity() const { return capacity_; }

 private:
  struct Segment {
    uint64_t offset, bytes, seq;
  };
  uint64_t capacity_;
  uint64_t head_ = 0;
  std::vector<Segment> inFlight_;  // regions whose put may still be reading them
  Segment pending_{0, 0, 0};
};

class BounceRing {
 public:
  BounceRing(Backend& backend, Proxy& proxy, size_t minBytes)
      : backend_(backend), proxy_(proxy), minBytes_(minBytes) {}

  // Where the next `bytes` go; enqueues on `stream` a wait for `done` (the queue's done flag)
  // when the region still feeds an unfinished put. Call used() with that put's seq next.
  char* reserve(Stream& stream, size_t bytes, volatile uint64_t* done);
  void used(uint64_t seq) { space_->used(seq); }
  void* desc() const { return mr_ ? mr_->desc() : nullptr; }

 private:
  Backend& backend_;
  Proxy& proxy_;
  size_t minBytes_;
  std::unique_ptr<Allocation> buffer_;
  std::unique_ptr<MemoryRegion> mr_;
  std::unique_ptr<RingSpace> space_;
  struct Retired {
    std::unique_ptr<Allocation> buffer;
    std::unique_ptr<MemoryRegion> mr;
  };
  std::vector<Retired> retired_;
};

}  // namespace rmacc
