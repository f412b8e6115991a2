#include "exec/signal_space.h"

#include <cstring>

#include "core/error.h"
#include "core/log.h"

namespace rmacc {

HandleRecord HandleRecord::from(const ExportHandle& h) {
  RMACC_ENFORCE(h.size() <= kMaxBytes, "export handle of %zu bytes", h.size());
  HandleRecord r;
  r.size = h.size();
  memcpy(r.bytes, h.data(), h.size());
  return r;
}

SignalSpace::SignalSpace(Backend& backend, Bootstrap& bootstrap, const Topology& topo, int rank)
    : topo_(topo), rank_(rank), layout_{topo.nRanks()} {
  const int n = topo.nRanks();
  ceAlloc_ = backend.allocate(layout_.bytes());
  proxyAlloc_ = backend.allocateHostVisible(layout_.bytes());
  ce_ = static_cast<volatile uint64_t*>(ceAlloc_->ptr());
  proxy_ = static_cast<volatile uint64_t*>(proxyAlloc_->ptr());
  // Device memory is not zeroed by allocation: clear it before any peer can signal (peers
  // map it only after the all-gather below, which this rank enters after the clear).
  if (backend.isHostMemory(ceAlloc_->ptr())) {
    memset((void*)ce_, 0, layout_.bytes());
  } else {
    std::vector<uint64_t> zeros(layout_.count(), 0);
    auto stream = backend.createStream();
    CopyDesc c{ceAlloc_->ptr(), zeros.data(), layout_.bytes()};
    stream->copy(&c, 1);
    stream->synchronize();
  }
  memset((void*)proxy_, 0, layout_.bytes());

  std::vector<HandleRecord> records(n);
  records[rank] = HandleRecord::from(ceAlloc_->exportHandle());
  bootstrap.allGather(records.data(), sizeof(HandleRecord));
  peerCe_.resize(n);
  peerCeArray_.assign(n, nullptr);
  for (int r = 0; r < n; ++r) {
    if (!topo.sameNode(r, rank)) continue;
    if (r == rank) {
      peerCeArray_[r] = ce_;
      continue;
    }
    peerCe_[r] = backend.import(records[r].handle());
    peerCeArray_[r] = static_cast<volatile uint64_t*>(peerCe_[r]->ptr());
  }
  sent_.assign(layout_.count(), 0);
  expected_.assign(layout_.count(), 0);
  INFO(kSubsysInit, "signal space: %zu counters per array", layout_.count());
}

WriteDesc SignalSpace::ceSignal(int peer, int ctx, int sigIdx) {
  RMACC_ENFORCE(peerCeArray_[peer] != nullptr, "CE signal to rank %d of another node", peer);
  // The peer's slot for signals from this rank is indexed by this rank.
  uint64_t value = ++sent_[slot(peer, ctx, sigIdx)];
  return WriteDesc{peerCeArray_[peer] + layout_.index(ctx, sigIdx, rank_), value};
}

void SignalSpace::enqueueCeSignal(Stream& stream, int peer, int ctx, int sigIdx) {
  WriteDesc w = ceSignal(peer, ctx, sigIdx);
  stream.writeValue(w.addr, w.value);
}

WaitDesc SignalSpace::consume(int peer, int ctx, int sigIdx, uint64_t count) {
  size_t s = slot(peer, ctx, sigIdx);
  expected_[s] += count;
  volatile uint64_t* array = topo_.sameNode(peer, rank_) ? ce_ : proxy_;
  return WaitDesc{array + s, expected_[s]};
}

}  // namespace rmacc
