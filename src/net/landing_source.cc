// The source side of the landing protocol (net/landing.h), on the proxy thread: a landing put
// goes chunk by chunk into free slots of the peer's zone, each followed by the header that
// makes the peer's proxy copy it into place; credits give the slots back.
#include "net/proxy_impl.h"

#include <algorithm>
#include <thread>

namespace rmacc::proxy_internal {

// One table of headers for every peer's slots (nRanks x kMaxLandingSlots x 64 B: 4 MiB at 1,024
// ranks, made only once a landing put exists), allocated and registered by the thread posting
// the first landing put: pinned allocation and registration can stall in the driver, and the
// proxy thread's rounds must not.
void ProxyImpl::prepareLandingHeaders() {
  std::lock_guard<std::mutex> lock(landingHeadersMu_);
  if (landingHeaders_) return;
  if (std::this_thread::get_id() == thread_.get_id())
    proxyThreadAllocations_.fetch_add(1, std::memory_order_relaxed);
  auto table = backend_.allocateNicVisible((size_t)nRanks_ * kMaxLandingSlots * kLandingHeaderBytes);
  landingHeadersMr_ = fabric_.registerMemory(table->ptr(), table->size());
  landingHeaders_ = std::move(table);
}

LandingSource& ProxyImpl::landingSource(int peer, uint32_t slots) {
  LandingSource& s = landingSources_[peer];
  if (!s.headers) {
    prepareLandingHeaders();  // made already by whoever posted the put
    s.freeSlots = slots == 64 ? ~0ull : (1ull << slots) - 1;
    s.headers = static_cast<LandingHeader*>(landingHeaders_->ptr()) + (size_t)peer * kMaxLandingSlots;
  }
  return s;
}

// The next write of a landing put: a chunk into a free slot (none free: wait for a credit),
// or the header that makes the target copy it. On an unordered network the header waits until
// its chunk has landed, as a split put's signalling piece does.
bool ProxyImpl::issueLandingWrite(Queue& q, InFlight& f) {
  const LandingTarget& t = f.put.landing;
  LandingSource& s = landingSource(f.put.peer, t.slots);
  const uint32_t w = f.issued, chunk = w / 2;
  const size_t offset = (size_t)chunk * f.pieceBytes;
  const size_t len = f.landingChunkLength(chunk);
  Piece& piece = f.pieces[w];
  piece.put = &f;
  if (w % 2 == 0) {
    if (!s.freeSlots) return false;
    int slot = __builtin_ctzll(s.freeSlots);
    if (!fabric_.write(ep_, f.put.peer, (const char*)f.put.src + offset, len, f.desc,
                       t.region.addrOf(t.chunkOffset(slot)), t.region.key,
                       ImmData::encodeSlot(rank_, slot, 0, ImmKind::kLanding), &piece)) {
      ++eagains_;
      return false;
    }
    s.freeSlots &= ~(1ull << slot);
    f.slotOf[chunk] = (int8_t)slot;
  } else {
    if (!ordered_ && f.completed < w) return false;
    const int slot = f.slotOf[chunk];
    const bool lastOfPut = w + 1 == f.nPieces && f.put.final;
    LandingHeader& h = s.headers[slot];
    h = LandingHeader{};
    h.dstAddr = t.windowBase + f.put.dstOffset + offset;
    h.bytes = len;
    h.putId = q.openPutId_ ? q.openPutId_ : s.nextPutId;
    h.putChunks = lastOfPut ? q.openPutChunks_ + 1 : 0;
    h.ctx = f.put.ctx;
    h.sigIdx = f.put.sigIdx;
    h.check = h.checksum();
    if (!fabric_.write(ep_, f.put.peer, &h, sizeof(h), landingHeadersMr_->desc(),
                       t.region.addrOf(t.headerOffset(slot)), t.region.key,
                       ImmData::encodeSlot(rank_, slot, 2, ImmKind::kLanding), &piece)) {
      ++eagains_;
      return false;
    }
    if (!q.openPutId_) q.openPutId_ = s.nextPutId++;
    ++q.openPutChunks_;
    if (lastOfPut) q.openPutId_ = 0, q.openPutChunks_ = 0;
  }
  ++f.issued;
  ++outstanding_;
  ++piecesIssued_;
  return true;
}

}  // namespace rmacc::proxy_internal
