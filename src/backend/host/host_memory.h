// Host-backend memory: every allocation is a shared-memory segment (os/shm.h), so another
// process of the node can map the same pages from an export handle.
#pragma once

#include <cstddef>
#include <memory>

#include "backend/backend.h"
#include "os/shm.h"

namespace rmacc::host {

// What exportHandle() puts in the bytes.
using WireHandle = os::ShmHandle;

class HostAllocation : public Allocation {
 public:
  explicit HostAllocation(size_t bytes) : segment_(bytes) {}

  void* ptr() const override { return segment_.ptr(); }
  size_t size() const override { return segment_.size(); }
  ExportHandle exportHandle() const override;

 private:
  os::ShmSegment segment_;
};

class HostMapping : public Mapping {
 public:
  explicit HostMapping(const WireHandle& handle) : mapping_(handle) {}

  void* ptr() const override { return mapping_.ptr(); }
  size_t size() const override { return mapping_.size(); }

 private:
  os::ShmMapping mapping_;
};

// Maps the allocation that `handle` names. Throws rmaccInvalidArgument for bytes that are not
// a handle, rmaccSystemError when the owner's fd cannot be fetched or is not that allocation.
std::unique_ptr<Mapping> importAllocation(const ExportHandle& handle);

}  // namespace rmacc::host
