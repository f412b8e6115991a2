// Issuing released puts: the source's registration, and the split into pieces of at most
// maxPieceBytes whose last one carries the signal.
#include "net/proxy_impl.h"

#include "core/error.h"

namespace rmacc::proxy_internal {

// Issues released puts in seq order until the provider pushes back (-FI_EAGAIN), the
// outstanding cap is reached, or all are issued. A stalled queue never blocks the others.
bool ProxyImpl::issue(Queue& q) {
  bool any = false;
  while (q.issueCursor_ < q.active_.size()) {
    InFlight& f = *q.active_[q.issueCursor_];
    // The last part of a chunked put, on an unordered endpoint: its final piece may only go once
    // every earlier part landed (their completions mean delivery), as for a split put's pieces.
    f.predecessorsDone = ordered_ || f.put.priorPieces == 0 || priorPartsDone(q, q.issueCursor_);
    if (!f.pieces) {
      f.pieces.reset(new Piece[f.nPieces]);
      f.desc = f.put.srcDesc;
      if (!f.desc && f.put.bytes > 0 && (localReg_ || fabric_.deviceNeedsRegistration())) {
        // FI_MR_LOCAL wants every source registered, FI_MR_HMEM only device ones.
        void* src = const_cast<void*>(f.put.src);
        if (localReg_ || backend_.placeOf(src).onDevice()) {
          f.tempMr = registerMemory(src, f.put.bytes);
          sourceRegistrations_.fetch_add(1, std::memory_order_relaxed);
          f.desc = f.tempMr->desc();
        }
      }
    }
    while (!f.fullyIssued()) {
      if (outstanding_ >= kMaxOutstanding) return any;
      if (!(f.landing() ? issueLandingWrite(q, f) : issuePiece(f))) return any;
      any = true;
    }
    ++q.issueCursor_;
  }
  return any;
}

// Whether every put of `q` before position `index` of active_ completed (the parts of a chunked
// put are consecutive in their queue, and active_ holds every released put not yet retired).
bool ProxyImpl::priorPartsDone(const Queue& q, size_t index) const {
  for (size_t i = 0; i < index; ++i)
    if (!q.active_[i]->finished()) return false;
  return true;
}

bool ProxyImpl::issuePiece(InFlight& f) {
  uint32_t i = f.issued;
  bool last = i + 1 == f.nPieces;
  // Unordered writes: the signalling piece goes last in time, once its siblings have landed
  // (their completions mean delivery, see Fabric::orderedWrites).
  if (last && !ordered_ && (f.completed < f.nPieces - 1 || !f.predecessorsDone)) return false;
  size_t offset = (size_t)i * f.pieceBytes;
  size_t len = last ? f.put.bytes - offset : f.pieceBytes;
  const char* src = f.put.bytes ? (const char*)f.put.src + offset : nullptr;
  const bool signals = last && f.put.final;
  uint32_t data = ImmData::encode(rank_, f.put.ctx, f.put.sigIdx,
                                  signals ? (int)(f.nPieces + f.put.priorPieces) : 0);
  Piece& piece = f.pieces[i];
  piece.put = &f;
  uint64_t remote = f.put.dst.addrOf(f.put.dstOffset + offset);
  if (!fabric_.write(f.put.peer, src, len, f.desc, remote, f.put.dst.key, data, &piece)) {
    ++eagains_;  // rxm connects lazily; the next round polls (progress) and retries
    return false;
  }
  ++f.issued;
  ++outstanding_;
  ++piecesIssued_;
  return true;
}

}  // namespace rmacc::proxy_internal
