// Issuing released puts: the source's registration, and the split into pieces of at most
// maxPieceBytes whose last one carries the signal.
#include "net/proxy_impl.h"

#include <algorithm>

#include "core/clock.h"
#include "core/error.h"

namespace rmacc::proxy_internal {

// Issues released puts in seq order until the provider pushes back (-FI_EAGAIN), the
// outstanding cap is reached, the pacer holds a data write, or all are issued. A stalled queue
// never blocks the others.
bool ProxyImpl::issue(Queue& q) {
  bool any = false;
  while (q.issueCursor_ < q.active_.size()) {
    InFlight& f = *q.active_[q.issueCursor_];
    // The last part of a chunked put, on an unordered endpoint: its final piece may only go once
    // every earlier part landed (their completions mean delivery), as for a split put's pieces.
    f.predecessorsDone = ordered_ || f.put.priorPieces == 0 || priorPartsDone(q, q.issueCursor_);
    const Issued how = issueThrough(q, f, any);
    if (how == Issued::kPaced) issueSignalsPastPaced(q, any);
    if (how != Issued::kAll) return any;
    ++q.issueCursor_;
  }
  return any;
}

// Bytes of the next write of `f`: what the pacer charges it (a landing header: none).
static size_t nextWriteBytes(const InFlight& f) {
  const uint32_t i = f.issued;
  if (f.landing()) return i % 2 ? 0 : f.landingChunkLength(i / 2);
  return f.spans.empty() ? f.pieceLength(i) : f.spans[i].bytes;
}

ProxyImpl::Issued ProxyImpl::issueThrough(Queue& q, InFlight& f, bool& any) {
  if (!f.pieces) {
    f.pieces.reset(new Piece[f.nPieces]);
    registerSources(f);
  }
  while (!f.fullyIssued()) {
    if (outstanding_ >= kMaxOutstanding) return Issued::kHeld;
    const size_t bytes = nextWriteBytes(f);
    const double now = pacer_.enabled() && bytes > 0 ? monotonicSeconds() : 0;
    if (bytes > 0 && (!pacer_.mayPost(now) || !pacer_.first((size_t)ep_, f.put.order))) {
      pacedHold_ = true;
      heldOrder_ = std::min(heldOrder_, f.put.order);
      return Issued::kPaced;
    }
    // Before the provider call, so that no sibling waits out its CPU; a write the provider
    // then refuses holds no sibling back, as none the provider holds does (nic_pacer.h).
    if (bytes > 0) pacer_.takenUp((size_t)ep_, f.put.order);
    const bool issued = f.landing()         ? issueLandingWrite(q, f)
                        : f.spans.empty()   ? issuePiece(f)
                                            : issueGatherPiece(f);
    if (!issued) return Issued::kHeld;
    pacer_.posted(bytes, now);
    any = true;
  }
  return Issued::kAll;
}

// While the pacer holds the queue's head, zero-byte puts behind it (credits, entry signals)
// need no wire time and go now, each unless a put to the same peer before it is still unissued
// (writes to one peer keep their order). Looks a bounded way ahead: the rounds come back.
void ProxyImpl::issueSignalsPastPaced(Queue& q, bool& any) {
  constexpr size_t kLookAhead = 64;
  std::vector<int>& blocked = pacedPeers_;
  blocked.clear();
  const size_t end = std::min(q.active_.size(), q.issueCursor_ + 1 + kLookAhead);
  for (size_t i = q.issueCursor_; i < end; ++i) {
    InFlight& g = *q.active_[i];
    if (g.fullyIssued()) continue;
    const bool signalOnly = g.put.bytes == 0 && g.put.gather.empty() && !g.landing() &&
                            g.put.priorPieces == 0;
    const bool free = std::find(blocked.begin(), blocked.end(), g.put.peer) == blocked.end();
    if (i > q.issueCursor_ && signalOnly && free && issueThrough(q, g, any) == Issued::kAll)
      continue;
    if (free) blocked.push_back(g.put.peer);
  }
}

// The sources' descriptors: the poster's, or the proxy's own registration where the provider
// needs one (FI_MR_LOCAL: every source; FI_MR_HMEM: device ones).
void ProxyImpl::registerSources(InFlight& f) {
  auto descOf = [&](const void* src, size_t bytes, void* given) -> void* {
    if (given || bytes == 0 || !(localReg_ || fabric_.deviceNeedsRegistration())) return given;
    void* p = const_cast<void*>(src);
    if (!localReg_ && !backend_.placeOf(p).onDevice()) return nullptr;
    f.tempMrs.push_back(registerMemory(p, bytes));
    sourceRegistrations_.fetch_add(1, std::memory_order_relaxed);
    return f.tempMrs.back()->desc();
  };
  f.desc = descOf(f.put.src, f.put.gather.empty() ? f.put.bytes : 0, f.put.srcDesc);
  for (FabricIov& g : f.put.gather) g.desc = descOf(g.src, g.bytes, g.desc);
}

std::vector<GatherSpan> ProxyImpl::gatherSpans(const ProxyPut& put) const {
  std::vector<GatherSpan> spans;
  GatherSpan cur;
  size_t sources = 0, at = 0;
  for (uint32_t i = 0; i < put.gather.size(); ++i) {
    for (size_t off = 0; off < put.gather[i].bytes;) {
      if (cur.bytes == pieceMax_ || sources == iovLimit_) {
        spans.push_back(cur);
        cur = GatherSpan{};
        sources = 0;
      }
      const size_t take = std::min(put.gather[i].bytes - off, pieceMax_ - cur.bytes);
      if (cur.bytes == 0) cur = GatherSpan{i, off, 0, at};
      cur.bytes += take;
      ++sources;
      off += take;
      at += take;
    }
  }
  if (cur.bytes > 0) spans.push_back(cur);
  return spans;
}

// Whether every put of `q` before position `index` of active_ completed (the parts of a chunked
// put are consecutive in their queue, and active_ holds every released put not yet retired).
bool ProxyImpl::priorPartsDone(const Queue& q, size_t index) const {
  for (size_t i = 0; i < index; ++i)
    if (!q.active_[i]->finished()) return false;
  return true;
}

// Unordered writes: the signalling piece goes last in time, once its siblings have landed
// (their completions mean delivery, see Fabric::orderedWrites).
static bool heldBack(const InFlight& f, bool ordered) {
  return f.issued + 1 == f.nPieces && !ordered && (f.completed < f.nPieces - 1 || !f.predecessorsDone);
}

// The completion data of piece `i`: the last piece of the last part signals, counting them all.
static uint32_t pieceData(const InFlight& f, int rank, uint32_t i) {
  const bool signals = i + 1 == f.nPieces && f.put.final;
  return ImmData::encode(rank, f.put.ctx, f.put.sigIdx,
                         signals ? (int)(f.nPieces + f.put.priorPieces) : 0);
}

// A signal as the NIC's write of the counter's next value at the peer (ProxyPut::writesValue):
// counted only once the provider took it, so the values leave in the order they were taken;
// unordered, the next waits until the last one to the counter landed (pollCompletions).
bool ProxyImpl::issueValue(InFlight& f) {
  const size_t at = valueIndex(f.put);
  if (!ordered_ && valueInFlight_[at]) return false;
  uint64_t& last = valuesWritten_[at];
  f.value = last + 1;
  Piece& piece = f.pieces[0];
  piece.put = &f;
  const uint64_t remote =
      f.put.dst.addrOf(layout_.index(f.put.ctx, f.put.sigIdx, rank_) * sizeof(uint64_t));
  if (!posted(f, fabric_.writeValue(ep_, f.put.peer, &f.value, remote, f.put.dst.key, &piece)))
    return false;
  last = f.value;
  if (!ordered_) valueInFlight_[at] = 1;
  return true;
}

bool ProxyImpl::issueGatherPiece(InFlight& f) {
  if (heldBack(f, ordered_)) return false;
  const uint32_t i = f.issued;
  const GatherSpan& span = f.spans[i];
  FabricIov iov[kMaxFabricIov];
  size_t n = 0;
  for (size_t left = span.bytes, src = span.source, off = span.offset; left > 0; ++src, off = 0) {
    const FabricIov& g = f.put.gather[src];
    const size_t len = std::min(left, g.bytes - off);
    iov[n++] = {(const char*)g.src + off, len, g.desc};
    left -= len;
  }
  Piece& piece = f.pieces[i];
  piece.put = &f;
  const uint64_t remote = f.put.dst.addrOf(f.put.dstOffset + span.at);
  return posted(f, fabric_.writev(ep_, f.put.peer, iov, n, remote, f.put.dst.key,
                                  pieceData(f, rank_, i), &piece));
}

bool ProxyImpl::posted(InFlight& f, bool accepted) {
  if (!accepted) {
    ++eagains_;  // rxm connects lazily; the next round polls (progress) and retries
    return false;
  }
  ++f.issued;
  ++outstanding_;
  ++piecesIssued_;
  return true;
}

bool ProxyImpl::issuePiece(InFlight& f) {
  uint32_t i = f.issued;
  if (heldBack(f, ordered_)) return false;
  if (f.put.writesValue) return issueValue(f);
  size_t offset = (size_t)i * f.pieceBytes;
  size_t len = f.pieceLength(i);
  const char* src = f.put.bytes ? (const char*)f.put.src + offset : nullptr;
  const uint32_t data = pieceData(f, rank_, i);
  Piece& piece = f.pieces[i];
  piece.put = &f;
  uint64_t remote = f.put.dst.addrOf(f.put.dstOffset + offset);
  return posted(f, fabric_.write(ep_, f.put.peer, src, len, f.desc, remote, f.put.dst.key, data, &piece));
}

}  // namespace rmacc::proxy_internal
