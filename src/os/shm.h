// Shared memory between the processes of one node: a memfd mapped MAP_SHARED, which another
// process maps by fetching the owner's fd (os/peer_fd.h). The host backend's allocations and
// the node gather's segments are both made of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace rmacc::os {

// What a peer needs to map a segment: enough to fetch our fd and to check it got the memory it
// asked for (the fd number may have been reused by a later segment). Plain bytes: it travels
// through all-gathers as it is.
struct ShmHandle {
  static constexpr uint64_t kMagic = 0x726d6163634d4531ull;  // "rmaccME1"
  uint64_t magic;
  int32_t pid;
  int32_t fd;
  uint64_t size;
  uint64_t id;  // unique on the node: (pid << 32) | per-process counter; names the memfd
};

// A memfd of `bytes` bytes mapped read-write with every page faulted in; the fd stays open for
// as long as the segment lives, because importers fetch it from this process.
class ShmSegment {
 public:
  explicit ShmSegment(size_t bytes);
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  void* ptr() const { return ptr_; }
  size_t size() const { return size_; }
  ShmHandle handle() const;

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
  uint64_t id_ = 0;
};

// A peer's segment mapped here; the fd is closed right after mmap (the mapping keeps the pages
// alive even after the owner frees them).
class ShmMapping {
 public:
  // Throws rmaccInvalidArgument for a handle that is not one, rmaccSystemError when the owner's
  // fd cannot be fetched or is not that segment.
  explicit ShmMapping(const ShmHandle& handle);
  ~ShmMapping();
  ShmMapping(const ShmMapping&) = delete;
  ShmMapping& operator=(const ShmMapping&) = delete;

  void* ptr() const { return ptr_; }
  size_t size() const { return size_; }

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace rmacc::os
