#include "exec/bounce.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"

namespace rmacc {

RingSpace::Region RingSpace::reserve(uint64_t bytes, uint64_t finished) {
  RMACC_ENFORCE(bytes <= capacity_, "ring region of %llu bytes in a ring of %llu",
                (unsigned long long)bytes, (unsigned long long)capacity_);
  if (head_ + bytes > capacity_) head_ = 0;  // wrap
  // Every earlier region that [head_, head_ + bytes) overlaps must be done being read. Any
  // of them may still be in flight, wherever it lies: a region behind head_ is reused only
  // after a wrap, so it is forgotten only once its put is done (an earlier version dropped
  // regions behind head_ early, and a wrap then overwrote bytes a slow put still read).
  uint64_t waitSeq = 0;
  auto keep = inFlight_.begin();
  for (const Segment& s : inFlight_) {
    bool overlaps = s.offset < head_ + bytes && head_ < s.offset + s.bytes;
    if (overlaps) waitSeq = std::max(waitSeq, s.seq);
    if (!overlaps && s.seq > finished) *keep++ = s;
  }
  inFlight_.erase(keep, inFlight_.end());
  pending_ = Segment{head_, bytes, 0};
  Region r{head_, waitSeq > finished ? waitSeq : 0};
  head_ += bytes;
  return r;
}

void RingSpace::used(uint64_t seq) {
  pending_.seq = seq;
  inFlight_.push_back(pending_);
}

char* BounceRing::reserve(Stream& stream, size_t bytes, volatile uint64_t* done) {
  if (!space_ || space_->capacity() < bytes) {
    // Grow. The old ring is kept until the communicator goes: puts in flight may read it,
    // and freeing pinned memory synchronises the device, which may wait for this thread.
    if (buffer_) retired_.push_back({std::move(buffer_), std::move(mr_)});
    size_t size = std::max<size_t>(minBytes_, 2 * bytes);
    buffer_ = backend_.allocateHostVisible(size);
    mr_ = proxy_.registerMemory(buffer_->ptr(), size);
    space_ = std::make_unique<RingSpace>(size);
    INFO(kSubsysProxy, "bounce ring of %zu bytes", size);
  }
  // Acquire: the proxy publishes done after its last read of the regions it frees, and this
  // thread's stream may overwrite them once it has seen it (a plain read raced, ThreadSanitizer).
  uint64_t finished = __atomic_load_n(const_cast<const uint64_t*>(done), __ATOMIC_ACQUIRE);
  RingSpace::Region r = space_->reserve(bytes, finished);
  if (r.waitSeq) {
    WaitDesc w{done, r.waitSeq};
    stream.waitValues(&w, 1);
  }
  return static_cast<char*>(buffer_->ptr()) + r.offset;
}

}  // namespace rmacc
