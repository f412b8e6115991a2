#include "core/window.h"

#include <cstring>

#include "core/comm.h"
#include "core/error.h"
#include "core/log.h"
#include "exec/signal_space.h"

namespace rmacc {

namespace {

// What each rank contributes when a window is registered.
struct WindowRecord {
  uint64_t size;
  uint64_t allocOffset;  // offset of the window in its exportable allocation
  uint8_t exportable;    // the node's other ranks can map it
  RemoteRegion remote;   // valid on multi-node communicators when the network writes it
  // Set when other nodes' puts must land in this rank's landing zone (net/landing.h).
  RemoteRegion landing;
  uint32_t landingSlots;
  uint64_t landingSlotBytes;
  uint64_t base;         // the window's address in its owner's process
  HandleRecord handle;
};

}  // namespace

WindowRegistry::WindowRegistry(Comm& comm) : comm_(comm) {}
WindowRegistry::~WindowRegistry() = default;

void* WindowRegistry::alloc(size_t bytes) {
  auto a = comm_.backend().allocate(bytes);
  void* p = a->ptr();
  std::lock_guard<std::mutex> lock(mu_);
  allocs_[static_cast<const char*>(p)] = std::move(a);
  INFO(kSubsysAlloc, "rmaccMemAlloc %zu bytes at %p", bytes, p);
  return p;
}

void WindowRegistry::free(void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocs_.find(static_cast<const char*>(ptr));
  RMACC_ARG_CHECK(it != allocs_.end(), "rmaccMemFree(%p): not a pointer rmaccMemAlloc returned", ptr);
  nicRegions_.erase(it->first);
  allocs_.erase(it);
}

const Allocation* WindowRegistry::find(const void* ptr, size_t bytes, size_t* offset) const {
  std::lock_guard<std::mutex> lock(mu_);
  const char* p = static_cast<const char*>(ptr);
  auto it = allocs_.upper_bound(p);
  if (it == allocs_.begin()) return nullptr;
  --it;
  const Allocation& a = *it->second;
  if (p < it->first || p + bytes > it->first + a.size()) return nullptr;
  if (offset) *offset = (size_t)(p - it->first);
  return &a;
}

std::shared_ptr<Mapping> WindowRegistry::importPeer(const ExportHandle& handle) {
  std::string key(handle.begin(), handle.end());
  std::lock_guard<std::mutex> lock(mu_);
  if (auto m = imports_[key].lock()) return m;
  std::shared_ptr<Mapping> m = comm_.backend().import(handle);
  imports_[key] = m;
  return m;
}

RemoteRegion WindowRegistry::registerRemote(void* ptr, size_t bytes, uint64_t* offsetOut) {
  RMACC_ENFORCE(comm_.proxy() != nullptr, "remote registration on a single-node communicator");
  size_t offset = 0;
  const Allocation* a = find(ptr, bytes, &offset);
  char* start = a ? static_cast<char*>(a->ptr()) : static_cast<char*>(ptr);
  size_t size = a ? a->size() : bytes;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nicRegions_.find(start);
  if (it == nicRegions_.end() || it->second->size() < (a ? size : bytes)) {
    nicRegions_[start] = comm_.proxy()->registerMemory(start, size);
    it = nicRegions_.find(start);
  }
  *offsetOut = a ? offset : 0;
  return it->second->remote();
}

Window* WindowRegistry::registerWindow(void* buff, size_t bytes) {
  RMACC_ARG_CHECK(buff != nullptr || bytes == 0, "window of %zu bytes at NULL", bytes);
  const Topology& topo = comm_.topo();
  const int n = comm_.nRanks(), me = comm_.rank();
  auto win = std::make_unique<Window>();
  win->base = buff;
  win->size = bytes;

  // Every rank enters the all-gather even when its own input is bad, so that a bad argument
  // on one rank fails the call everywhere instead of leaving the others waiting.
  WindowRecord rec{};
  rec.size = bytes;
  size_t offset = 0;
  const Allocation* a = bytes ? find(buff, bytes, &offset) : nullptr;
  rec.exportable = a != nullptr;
  if (a) {
    rec.allocOffset = offset;
    rec.handle = HandleRecord::from(a->exportHandle());
  }
  bool needsExport = topo.localSize() > 1 && bytes > 0;
  bool ok = !needsExport || a != nullptr;
  rec.base = (uint64_t)(uintptr_t)buff;
  // Memory the network cannot write (device memory without a GPU-direct provider) takes other
  // nodes' puts through this rank's landing zone.
  const bool landed = ok && comm_.multiNode() && bytes > 0 &&
                      (!comm_.backend().nicAccessible(buff) || comm_.cfg().landingAlways);
  if (landed) {
    LandingZone& zone = comm_.landingZone();
    zone.allow(buff, bytes);
    rec.landing = zone.remote();
    rec.landingSlots = zone.slots();
    rec.landingSlotBytes = zone.slotBytes();
  } else if (ok && comm_.multiNode() && bytes > 0) {
    uint64_t regOffset = 0;
    rec.remote = registerRemote(buff, bytes, &regOffset);
    rec.remote.base += regOffset;
    rec.remote.size = bytes;
  }
  std::vector<WindowRecord> all(n);
  all[me] = rec;
  all[me].size = ok ? bytes : UINT64_MAX;  // UINT64_MAX: this rank's input was rejected
  comm_.bootstrap().allGather(all.data(), sizeof(WindowRecord));
  for (int r = 0; r < n; ++r) {
    if (all[r].size != UINT64_MAX) continue;
    if (landed) comm_.landingZone().forbid(buff);
    if (r == me)
      RMACC_THROW(rmaccInvalidArgument,
                  "window memory %p must come from rmaccMemAlloc: ranks of the same node map it",
                  buff);
    RMACC_THROW(rmaccInvalidUsage, "rank %d passed window memory peers cannot map", r);
  }

  win->peers.resize(n);
  for (int r = 0; r < n; ++r) {
    PeerTarget& t = win->peers[r];
    t.size = all[r].size;
    if (r == me) {
      t.local = buff;
    } else if (topo.sameNode(r, me) && all[r].size > 0) {
      auto m = importPeer(all[r].handle.handle());
      t.local = static_cast<char*>(m->ptr()) + all[r].allocOffset;
      win->mappings.push_back(std::move(m));
    }
    if (!topo.sameNode(r, me) && all[r].landing.size > 0) {
      LandingTarget& l = t.landing;
      l.region = all[r].landing;
      l.slots = all[r].landingSlots;
      l.slotBytes = all[r].landingSlotBytes;
      l.sourceRow = (uint32_t)topo.remoteIndex(r, me);
      l.windowBase = all[r].base;
      l.windowBytes = all[r].size;
    } else if (!topo.sameNode(r, me)) {
      t.remote = all[r].remote;
    }
  }
  win->landed = landed;
  Window* raw = win.get();
  std::lock_guard<std::mutex> lock(mu_);
  windows_[raw] = std::move(win);
  INFO(kSubsysAlloc, "window %p registered: %zu bytes at %p", (void*)raw, bytes, buff);
  return raw;
}

void WindowRegistry::deregisterWindow(Window* win) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    RMACC_ARG_CHECK(windows_.count(win), "window %p is not registered", (void*)win);
  }
  // Nobody may still write into it: every rank leaves only when all have stopped using it.
  comm_.bootstrap().barrier();
  if (win->landed) comm_.landingZone().forbid(win->base);
  std::lock_guard<std::mutex> lock(mu_);
  windows_.erase(win);
}

Window& WindowRegistry::get(rmaccWindow_t handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = windows_.find(static_cast<Window*>(handle));
  RMACC_ARG_CHECK(handle && it != windows_.end(), "window %p is not registered on this communicator",
                  (void*)handle);
  return *it->second;
}

}  // namespace rmacc
