#include "exec/bounce.h"

#include <algorithm>

#include "core/log.h"

namespace rmacc {

char* BounceRing::reserve(Stream& stream, size_t bytes, volatile uint64_t* done) {
  uint64_t finished = *done;
  if (!buffer_ || buffer_->size() < bytes) {
    // Grow. The old ring is kept until the communicator goes: puts in flight may read it,
    // and freeing pinned memory synchronises the device, which may wait for this thread.
    if (buffer_) retired_.push_back({std::move(buffer_), std::move(mr_)});
    size_t size = std::max<size_t>(64ull << 20, 2 * bytes);
    buffer_ = backend_.allocateHostVisible(size);
    mr_ = proxy_.registerMemory(buffer_->ptr(), size);
    inFlight_.clear();
    head_ = 0;
    INFO(kSubsysProxy, "bounce ring of %zu bytes", size);
  }
  if (head_ + bytes > buffer_->size()) head_ = 0;  // wrap
  // The puts that read [head_, head_ + bytes) must be done before the copy overwrites it.
  uint64_t waitFor = 0;
  while (!inFlight_.empty()) {
    const Segment& s = inFlight_.front();
    bool overlaps = s.offset < head_ + bytes && head_ < s.offset + s.bytes;
    if (!overlaps && s.offset >= head_ + bytes) break;
    if (overlaps) waitFor = std::max(waitFor, s.seq);
    inFlight_.pop_front();
  }
  if (waitFor > finished) {
    WaitDesc w{done, waitFor};
    stream.waitValues(&w, 1);
  }
  pending_ = Segment{head_, bytes, 0};
  char* p = static_cast<char*>(buffer_->ptr()) + head_;
  head_ += bytes;
  return p;
}

void BounceRing::used(uint64_t seq) {
  pending_.seq = seq;
  inFlight_.push_back(pending_);
}

}  // namespace rmacc
