#include "net/landing.h"

#include <algorithm>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/signal_contexts.h"

namespace rmacc {

uint32_t LandingHeader::checksum() const {
  // FNV-1a over the fields before `check`: a torn or stale header must not pass as a new one.
  const auto* p = reinterpret_cast<const unsigned char*>(this);
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < offsetof(LandingHeader, check); ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

uint64_t landingSlotBytes(size_t budget, int sources, uint32_t slots, size_t maxSlotBytes) {
  constexpr uint64_t kMin = 64 << 10;
  uint64_t per = budget / ((uint64_t)std::max(sources, 1) * std::max(slots, 1u));
  uint64_t bytes = kMin;
  while (bytes * 2 <= per && bytes * 2 <= maxSlotBytes) bytes *= 2;
  return bytes;
}

LandingZone::LandingZone(Backend& backend, std::unique_ptr<Allocation> memory,
                         std::unique_ptr<MemoryRegion> mr, std::vector<int> sourceRow,
                         uint32_t slots, uint64_t slotBytes)
    : backend_(backend), memory_(std::move(memory)), mr_(std::move(mr)),
      sourceRow_(std::move(sourceRow)), slots_(slots), slotBytes_(slotBytes) {
  RMACC_ENFORCE(slots_ > 0 && slots_ <= 64, "landing zone with %u slots", slots_);
  stream_ = backend_.createStream();
  doneWord_ = backend_.allocateHostVisible(sizeof(uint64_t));
  *static_cast<volatile uint64_t*>(doneWord_->ptr()) = 0;
}

LandingZone::~LandingZone() {
  try {
    stream_->synchronize();
  } catch (const std::exception& e) {
    WARN("landing zone: copies failed at teardown: %s", e.what());
  }
}

void LandingZone::allow(const void* base, size_t bytes) {
  std::lock_guard<std::mutex> lock(windowsMu_);
  windows_.emplace(static_cast<const char*>(base), bytes);
}

void LandingZone::forbid(const void* base) {
  std::lock_guard<std::mutex> lock(windowsMu_);
  auto it = windows_.find(static_cast<const char*>(base));
  if (it != windows_.end()) windows_.erase(it);
}

// A scan, not a lookup: windows may nest or overlap, and there are few of them beside the
// megabytes a chunk carries.
bool LandingZone::allowed(uint64_t addr, uint64_t bytes) const {
  std::lock_guard<std::mutex> lock(windowsMu_);
  for (const auto& [start, size] : windows_) {
    uint64_t base = (uint64_t)(uintptr_t)start;
    if (addr >= base && addr - base <= size && bytes <= size - (addr - base)) return true;
  }
  return false;
}

char* LandingZone::row(int src) const {
  return static_cast<char*>(memory_->ptr()) +
         (size_t)sourceRow_[src] * slots_ * (kLandingHeaderBytes + slotBytes_);
}

void LandingZone::arrived(int src, int slot) {
  if (src < 0 || (size_t)src >= sourceRow_.size() || sourceRow_[src] < 0 || slot < 0 ||
      slot >= (int)slots_)
    RMACC_THROW(rmaccRemoteError, "landing chunk from rank %d in slot %d: no such source or slot",
                src, slot);
  char* r = row(src);
  const auto& h = *reinterpret_cast<const LandingHeader*>(r + slot * kLandingHeaderBytes);
  // The proxy raises the put's signal by index into the signal array (SignalLayout): a context
  // or index past its end would be a write past the array, not an error.
  if (h.check != h.checksum() || h.bytes == 0 || h.bytes > slotBytes_ ||
      h.ctx < 0 || h.ctx >= kNumContexts || h.sigIdx < 0 || h.sigIdx >= RMACC_MAX_SIGNALS)
    RMACC_THROW(rmaccRemoteError,
                "rank %d: damaged landing header in slot %d (%llu bytes, ctx %d, signal %d)", src,
                slot, (unsigned long long)h.bytes, h.ctx, h.sigIdx);
  if (!allowed(h.dstAddr, h.bytes))
    RMACC_THROW(rmaccRemoteError,
                "rank %d put %llu bytes at %p, outside every window of this rank", src,
                (unsigned long long)h.bytes, reinterpret_cast<void*>(h.dstAddr));
  const char* chunk = r + slots_ * kLandingHeaderBytes + slot * slotBytes_;
  CopyDesc c{reinterpret_cast<void*>(h.dstAddr), chunk, h.bytes};
  stream_->copy(&c, 1);
  stream_->writeValue(static_cast<volatile uint64_t*>(doneWord_->ptr()), ++enqueued_);
  copying_.push_back({enqueued_, src, slot, h.putId});
  PutState& p = puts_[{src, h.putId}];
  if (h.putChunks) {
    p.chunks = h.putChunks;
    p.ctx = h.ctx;
    p.sigIdx = h.sigIdx;
  }
}

bool LandingZone::progress(const std::function<void(int, int)>& credit,
                           const std::function<void(int, int, int)>& signal) {
  if (copying_.empty()) return false;
  uint64_t done = __atomic_load_n(static_cast<uint64_t*>(doneWord_->ptr()), __ATOMIC_ACQUIRE);
  if (done < copying_.front().seq) {
    // A failed copy stream never writes doneWord: ask the stream now and then (it throws then),
    // not every round: an eagerly polling proxy would make a driver call per round for nothing.
    const double now = monotonicSeconds();
    if (now - lastQueryS_ > 0.01) {
      lastQueryS_ = now;
      stream_->query();
    }
    return false;
  }
  while (!copying_.empty() && copying_.front().seq <= done) {
    Copy c = copying_.front();
    copying_.pop_front();
    credit(c.src, c.slot);
    // The chunks of one put may be copied in any order (unordered networks); its signal fires
    // with the copy that completes the count its last chunk announced.
    auto it = puts_.find({c.src, c.putId});
    PutState& p = it->second;
    ++p.copied;
    if (p.chunks && p.copied == p.chunks) {
      signal(c.src, p.ctx, p.sigIdx);
      puts_.erase(it);
    }
  }
  return true;
}

}  // namespace rmacc
