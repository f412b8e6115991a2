// The signal counters of a rank (DESIGN.md §1) and the bookkeeping that makes them monotonic:
// a waiter tracks how many signals it has consumed per (peer, ctx, sigIdx) and waits for
// "at least that many more"; a CE signaller writes the absolute count it has sent. Nothing is
// ever reset, so consecutive calls never race on a memset.
//
// Two arrays, because two different agents write them: signals from ranks of this node are
// written by their copy engines into `ce` (device memory peers map); signals from other nodes
// are written by this rank's proxy thread into `proxy` (host-visible memory).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "bootstrap/bootstrap.h"
#include "core/topology.h"
#include "net/signals.h"

namespace rmacc {

class SignalSpace {
 public:
  // Collective: allocates this rank's arrays and maps the CE arrays of the node's other ranks.
  SignalSpace(Backend& backend, Bootstrap& bootstrap, const Topology& topo, int rank);

  volatile uint64_t* proxyArray() { return proxy_; }
  const SignalLayout& layout() const { return layout_; }

  // Enqueues on `stream` the CE signal (ctx, sigIdx) from this rank to `peer` (same node,
  // possibly this rank): a write of the next absolute count into the peer's array. All CE
  // signals to one peer must be enqueued on one stream so that the writes stay in order.
  void enqueueCeSignal(Stream& stream, int peer, int ctx, int sigIdx);
  // The same signal as a store for the caller to enqueue (in a batch, on that one stream).
  WriteDesc ceSignal(int peer, int ctx, int sigIdx);
  // The wait for `count` more signals (ctx, sigIdx) from `peer`; advances the expectation.
  WaitDesc consume(int peer, int ctx, int sigIdx, uint64_t count);

 private:
  size_t slot(int peer, int ctx, int sigIdx) const { return layout_.index(ctx, sigIdx, peer); }

  const Topology& topo_;
  int rank_;
  SignalLayout layout_;
  std::unique_ptr<Allocation> ceAlloc_;
  std::unique_ptr<Allocation> proxyAlloc_;
  volatile uint64_t* ce_ = nullptr;
  volatile uint64_t* proxy_ = nullptr;
  std::vector<std::unique_ptr<Mapping>> peerCe_;  // by rank; empty for other nodes and self
  std::vector<volatile uint64_t*> peerCeArray_;   // by rank; nullptr for other nodes
  std::vector<uint64_t> sent_;      // CE signals sent, by slot(peer, ctx, sig)
  std::vector<uint64_t> expected_;  // signals consumed by waits, by slot(peer, ctx, sig)
};

// Fixed-size record for exchanging an ExportHandle through allGather.
struct HandleRecord {
  static constexpr size_t kMaxBytes = 120;
  uint64_t size = 0;
  char bytes[kMaxBytes] = {};
  static HandleRecord from(const ExportHandle& h);
  ExportHandle handle() const { return ExportHandle(bytes, bytes + size); }
};

}  // namespace rmacc
