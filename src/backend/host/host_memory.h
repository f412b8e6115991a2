// Host-backend memory: every allocation is a memfd mapped MAP_SHARED, so another process of
// the node can map the same pages from an export handle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "backend/backend.h"

namespace rmacc::host {

// What exportHandle() puts in the bytes: enough for a peer to fetch our fd and to check it got
// the memory it asked for (the fd number may have been reused by a later allocation).
struct WireHandle {
  static constexpr uint64_t kMagic = 0x726d6163634d4531ull;  // "rmaccME1"
  uint64_t magic;
  int32_t pid;
  int32_t fd;
  uint64_t size;
  uint64_t id;  // unique on the node: (pid << 32) | per-process counter; names the memfd
};

// A memfd of `size` bytes mapped read-write; the fd stays open for as long as the allocation
// lives, because importers fetch it from this process.
class HostAllocation : public Allocation {
 public:
  explicit HostAllocation(size_t bytes);
  ~HostAllocation() override;
  HostAllocation(const HostAllocation&) = delete;
  HostAllocation& operator=(const HostAllocation&) = delete;

  void* ptr() const override { return ptr_; }
  size_t size() const override { return size_; }
  ExportHandle exportHandle() const override;

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
  uint64_t id_ = 0;
};

// A peer's allocation mapped here; the fd is closed right after mmap (the mapping keeps the
// pages alive even after the owner frees them).
class HostMapping : public Mapping {
 public:
  HostMapping(void* ptr, size_t size) : ptr_(ptr), size_(size) {}
  ~HostMapping() override;
  HostMapping(const HostMapping&) = delete;
  HostMapping& operator=(const HostMapping&) = delete;

  void* ptr() const override { return ptr_; }
  size_t size() const override { return size_; }

 private:
  void* ptr_;
  size_t size_;
};

// Maps the allocation that `handle` names. Throws rmaccInvalidArgument for bytes that are not
// a handle, rmaccSystemError when the owner's fd cannot be fetched or is not that allocation.
std::unique_ptr<Mapping> importAllocation(const ExportHandle& handle);

}  // namespace rmacc::host
