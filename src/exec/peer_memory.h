// Peers' memory as the engines see it: where a peer's bytes can be written, and the registry
// that maps, finds and registers memory for them. The communicator's window registry
// (comm/window.h) is that registry; the engines know only this view of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "net/fabric.h"
#include "net/landing.h"

namespace rmacc {

// Where a peer's bytes can be written: `local` for a rank of this node (mapped pointer),
// `remote` for a rank of another node (registered region). Offsets are added by the user.
struct PeerTarget {
  void* local = nullptr;
  RemoteRegion remote;
  size_t size = 0;
  // Valid when the peer's window is memory the network cannot write (device memory without a
  // GPU-direct provider, or RMACC_NET_LANDING=always): puts go through its landing zone.
  LandingTarget landing;
};

class PeerMemory {
 public:
  // The allocation holding [ptr, ptr+bytes), and the offset of ptr in it; nullptr if none.
  virtual const Allocation* find(const void* ptr, size_t bytes, size_t* offset) const = 0;
  // Maps a peer's allocation (cached by handle: repeated calls return the same mapping).
  virtual std::shared_ptr<Mapping> importPeer(const ExportHandle& handle) = 0;
  // Registers memory for remote writes (cached by range: the whole allocation when `ptr` lies
  // in one). Requires a multi-node communicator.
  virtual RemoteRegion registerRemote(void* ptr, size_t bytes, uint64_t* offsetOut) = 0;
  // The local descriptor of a registration covering [ptr, ptr+bytes), made once per buffer and
  // cached with it, when that memory is an rmaccMemAlloc buffer; nullptr otherwise. For the
  // sources of network writes on providers that need them registered (FI_MR_LOCAL).
  virtual void* sourceDesc(const void* ptr, size_t bytes) = 0;

 protected:
  ~PeerMemory() = default;  // not owned through this view
};

}  // namespace rmacc
