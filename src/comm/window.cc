#include "comm/window.h"

#include <cstring>

#include "comm/comm.h"
#include "core/error.h"
#include "core/log.h"
#include "exec/signal_space.h"

namespace rmacc {

namespace {

// Opens every rank's record of a collective window call: ranks out of step (another call, or
// another kind of call) are told apart from ranks that rejected their arguments.
struct CallStamp {
  uint64_t seq;
  uint32_t kind;      // 1: register, 2: deregister
  uint32_t rejected;  // this rank's arguments were bad: every rank fails the call
};

const char* kindName(uint32_t kind) {
  return kind == 1 ? "rmaccCommWindowRegister" : kind == 2 ? "rmaccCommWindowDeregister" : "?";
}

// Throws when the stamps disagree (after poisoning: the calls are out of step for good) or
// when a rank rejected its arguments (mine: rmaccInvalidArgument with `reason`).
void checkStamps(Comm& comm, const char* records, size_t stride, const std::string& reason) {
  const int n = comm.nRanks(), me = comm.rank();
  const CallStamp& mine = *reinterpret_cast<const CallStamp*>(records + stride * me);
  for (int r = 0; r < n; ++r) {
    const CallStamp& s = *reinterpret_cast<const CallStamp*>(records + stride * r);
    if (s.seq == mine.seq && s.kind == mine.kind) continue;
    std::string text = strprintf(
        "collective calls out of step: rank %d is in call #%llu (%s), rank %d in call #%llu (%s)",
        r, (unsigned long long)s.seq, kindName(s.kind), me, (unsigned long long)mine.seq,
        kindName(mine.kind));
    comm.poison(rmaccInvalidUsage, text);
    RMACC_THROW(rmaccInvalidUsage, "%s", text.c_str());
  }
  if (mine.rejected) RMACC_THROW(rmaccInvalidArgument, "%s", reason.c_str());
  for (int r = 0; r < n; ++r)
    if (reinterpret_cast<const CallStamp*>(records + stride * r)->rejected)
      RMACC_THROW(rmaccInvalidUsage, "rank %d rejected its arguments of %s (call #%llu)", r,
                  kindName(mine.kind), (unsigned long long)mine.seq);
}

// What each rank contributes when a window is registered.
struct WindowRecord {
  CallStamp stamp;
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
  // In offsets: p + bytes may wrap around for a huge size.
  if (p < it->first || (size_t)(p - it->first) > a.size() || bytes > a.size() - (size_t)(p - it->first))
    return nullptr;
  if (offset) *offset = (size_t)(p - it->first);
  return &a;
}

uint64_t WindowRegistry::overrun(const void* ptr, uint64_t bytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  const char* p = static_cast<const char*>(ptr);
  auto it = allocs_.upper_bound(p);
  if (it == allocs_.begin()) return 0;
  --it;
  const uint64_t offset = (uint64_t)(p - it->first), size = it->second->size();
  if (offset >= size) return 0;  // not in this buffer
  return bytes > size - offset ? bytes - (size - offset) : 0;
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
  return nicRegion(ptr, bytes, offsetOut).remote();
}

void* WindowRegistry::sourceDesc(const void* ptr, size_t bytes) {
  // Only rmaccMemAlloc buffers: their registration lives exactly as long as they do. Other
  // memory may be freed and its addresses reused without our knowing (no memory hooks here).
  if (!find(ptr, bytes, nullptr)) return nullptr;
  uint64_t offset;
  return nicRegion(const_cast<void*>(ptr), bytes, &offset).desc();
}

const MemoryRegion& WindowRegistry::nicRegion(void* ptr, size_t bytes, uint64_t* offsetOut) {
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
  return *it->second;
}

Window* WindowRegistry::registerWindow(void* buff, size_t bytes, uint64_t callSeq,
                                       const std::string& rejected) {
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
  bool needsExport = topo.nodeSize(topo.nodeOf(me)) > 1 && bytes > 0;
  std::string reason = rejected;
  if (!reason.empty()) {
  } else if (!buff && bytes > 0) {
    reason = strprintf("window of %zu bytes at NULL", bytes);
  } else if (uint64_t past = bytes ? overrun(buff, bytes) : 0) {
    reason = strprintf("window of %zu bytes at %p runs %llu bytes past the end of its rmaccMemAlloc "
                       "buffer", bytes, buff, (unsigned long long)past);
  } else if (needsExport && !a) {
    reason = strprintf("window memory %p must come from rmaccMemAlloc: ranks of the same node map it",
                       buff);
  }
  bool ok = reason.empty();
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
  rec.stamp = CallStamp{callSeq, 1, ok ? 0u : 1u};
  std::vector<WindowRecord> all(n);
  all[me] = rec;
  comm_.bootstrap().allGather(all.data(), sizeof(WindowRecord));
  try {
    checkStamps(comm_, reinterpret_cast<const char*>(all.data()), sizeof(WindowRecord), reason);
  } catch (...) {
    if (landed) comm_.landingZone().forbid(buff);
    throw;
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

void WindowRegistry::deregisterWindow(rmaccWindow_t handle, uint64_t callSeq) {
  Window* win = static_cast<Window*>(handle);
  bool known;
  {
    std::lock_guard<std::mutex> lock(mu_);
    known = handle && windows_.count(win);
  }
  // Nobody may still write into it: every rank leaves only when all have stopped using it.
  // A bad handle still joins, so that every rank fails the call instead of waiting.
  std::vector<CallStamp> all(comm_.nRanks());
  all[comm_.rank()] = CallStamp{callSeq, 2, known ? 0u : 1u};
  comm_.bootstrap().allGather(all.data(), sizeof(CallStamp));
  checkStamps(comm_, reinterpret_cast<const char*>(all.data()), sizeof(CallStamp),
              strprintf("window %p is not registered on this communicator", (void*)handle));
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
