#include "exec/staging.h"

#include <algorithm>

#include "core/log.h"

namespace rmacc {

char* StagingBuffer::reserve(uint64_t bytes) {
  if (!current_ || current_->size() < bytes) {
    // The old buffer is freed only with the communicator: freeing pinned or device memory
    // synchronises the whole device on CUDA, and this (progress) thread must never wait for
    // streams that wait for it (seen on an H200 as a hang at the first growth).
    if (current_) retired_.push_back({std::move(current_), std::move(mr_)});
    // Grow by half again, so that slowly growing calls do not reallocate every time.
    uint64_t size = std::max<uint64_t>(bytes + bytes / 2, 1 << 20);
    current_ = alloc_(size);
    if (proxy_) mr_ = proxy_->registerMemory(current_->ptr(), current_->size());
    INFO(kSubsysColl, "staging buffer grown to %llu bytes", (unsigned long long)size);
  }
  return static_cast<char*>(current_->ptr());
}

}  // namespace rmacc
