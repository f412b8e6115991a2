// Memory peers can reach: rmaccMemAlloc allocations (mappable by the node's other ranks) and
// registered windows (rmaccCommWindowRegister), which every rank knows how to write into:
// through a mapping for ranks of its node, through a NIC registration for the others.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "exec/peer_memory.h"
#include "net/fabric.h"
#include "net/landing.h"

struct rmaccWindow {};  // the public handle type; Window derives from it

namespace rmacc {

class Comm;

class Window : public rmaccWindow {
 public:
  void* base = nullptr;
  size_t size = 0;
  std::vector<PeerTarget> peers;  // by rank; peers[me].local == base
  bool landed = false;            // other nodes' puts arrive through the landing zone
  std::unique_ptr<MemoryRegion> mr;
  std::vector<std::shared_ptr<Mapping>> mappings;
};

class WindowRegistry : public PeerMemory {
 public:
  explicit WindowRegistry(Comm& comm);
  ~WindowRegistry();

  void* alloc(size_t bytes);
  void free(void* ptr);  // throws rmaccInvalidArgument for a pointer it did not allocate
  const Allocation* find(const void* ptr, size_t bytes, size_t* offset) const override;

  // How many bytes [ptr, ptr+bytes) runs past the end of the rmaccMemAlloc buffer that holds
  // ptr; 0 when it fits or ptr lies in no buffer this registry knows.
  uint64_t overrun(const void* ptr, uint64_t bytes) const;

  // Collective; `callSeq` numbers the call (Comm::beginCall). Every rank joins the exchange
  // even when its own arguments are bad, so that all ranks fail the call together.
  // `rejected`: the caller already refused the arguments (why); the call joins and fails.
  Window* registerWindow(void* buff, size_t bytes, uint64_t callSeq, const std::string& rejected = "");
  // Collective; `handle` may be bad on this rank (then every rank fails the call).
  void deregisterWindow(rmaccWindow_t handle, uint64_t callSeq);
  // The window behind a public handle; throws rmaccInvalidArgument when it is not live.
  Window& get(rmaccWindow_t win);

  std::shared_ptr<Mapping> importPeer(const ExportHandle& handle) override;
  RemoteRegion registerRemote(void* ptr, size_t bytes, uint64_t* offsetOut) override;
  void* sourceDesc(const void* ptr, size_t bytes) override;

 private:
  // The registration covering [ptr, ptr+bytes) (registerRemote's cache).
  const MemoryRegion& nicRegion(void* ptr, size_t bytes, uint64_t* offsetOut);

  Comm& comm_;
  mutable std::mutex mu_;
  std::map<const char*, std::unique_ptr<Allocation>> allocs_;  // by start address
  std::map<Window*, std::unique_ptr<Window>> windows_;
  std::map<std::string, std::weak_ptr<Mapping>> imports_;
  std::map<const char*, std::unique_ptr<MemoryRegion>> nicRegions_;  // by start address
};

}  // namespace rmacc
