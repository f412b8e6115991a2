#include "exec/rma.h"

#include "core/comm.h"
#include "core/error.h"
#include "exec/signal_space.h"

namespace rmacc {

RmaEngine::RmaEngine(Comm& comm) : comm_(comm) {}

ProxyQueue& RmaEngine::queueFor(Stream& stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = queues_.find(&stream);
  if (it == queues_.end()) it = queues_.emplace(&stream, comm_.proxy()->createQueue()).first;
  return *it->second;
}

void RmaEngine::proxyPut(Stream& stream, const ProxyPut& putIn, bool waitDone) {
  ProxyQueue& q = queueFor(stream);
  ProxyPut put = putIn;
  BounceRing* bounce = nullptr;
  if (put.bytes > 0 && (comm_.cfg().bounceAlways || !comm_.backend().nicAccessible(put.src))) {
    // Device memory the network cannot read: the stream stages it in pinned memory first.
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto& ring = bounces_[&stream];
      if (!ring) ring = std::make_unique<BounceRing>(comm_.backend(), *comm_.proxy(), comm_.cfg().bounceBytes);
      bounce = ring.get();
    }
    char* staged = bounce->reserve(stream, put.bytes, q.done());
    CopyDesc c{staged, put.src, put.bytes};
    stream.copy(&c, 1);
    put.src = staged;
    put.srcDesc = bounce->desc();
  }
  uint64_t seq = q.post(put);
  if (bounce) bounce->used(seq);
  // Only a put that reads the caller's memory in place holds the stream (now or at
  // waitProxyDone) until it completed locally: a pure signal reads nothing, and a staged
  // source was already copied (the ring itself waits before reusing a region). Waiting on
  // those anyway made every call end one network completion later (an ack round trip).
  const bool readsCaller = put.bytes > 0 && !bounce;
  if (readsCaller) {
    std::lock_guard<std::mutex> lock(mu_);
    lastSeq_[&stream] = seq;
  }
  stream.writeValue(q.ready(), seq);
  if (waitDone && readsCaller) {
    WaitDesc w{q.done(), seq};
    stream.waitValues(&w, 1);
  }
}

void RmaEngine::waitProxyDone(Stream& stream) {
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = lastSeq_.find(&stream);
    if (it == lastSeq_.end()) return;
    seq = it->second;
  }
  WaitDesc w{queueFor(stream).done(), seq};
  stream.waitValues(&w, 1);
}

void RmaEngine::put(Stream& stream, const void* src, size_t bytes, int peer,
                    const PeerTarget& target, uint64_t offset, int ctx, int sigIdx,
                    bool waitDone) {
  if (comm_.topo().sameNode(peer, comm_.rank())) {
    if (bytes > 0) {
      CopyDesc c{static_cast<char*>(target.local) + offset, src, bytes};
      stream.copy(&c, 1);
    }
    comm_.signals().enqueueCeSignal(stream, peer, ctx, sigIdx);
    return;
  }
  ProxyPut p;
  p.peer = peer;
  p.src = src;
  p.bytes = bytes;
  p.dst = target.remote;
  p.dstOffset = offset;
  p.ctx = ctx;
  p.sigIdx = sigIdx;
  proxyPut(stream, p, waitDone);
}

void RmaEngine::signal(Stream& stream, int peer, int ctx, int sigIdx, bool waitDone) {
  PeerTarget t;
  if (!comm_.topo().sameNode(peer, comm_.rank())) t.remote = comm_.signalTarget(peer);
  put(stream, nullptr, 0, peer, t, 0, ctx, sigIdx, waitDone);
}

void RmaEngine::wait(Stream& stream, const SignalWait* waits, size_t n) {
  std::vector<WaitDesc> descs;
  descs.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (waits[i].count == 0) continue;
    descs.push_back(comm_.signals().consume(waits[i].peer, waits[i].ctx, waits[i].sigIdx,
                                            waits[i].count));
  }
  if (!descs.empty()) stream.waitValues(descs.data(), descs.size());
}

void RmaEngine::barrier(Stream& stream, int ctx) {
  const Topology& topo = comm_.topo();
  const int me = comm_.rank();
  const int node = topo.nodeOf(me);
  std::vector<SignalWait> waits;
  // Phase 1: the node. Every rank signals every other rank of its node and waits for them.
  for (int l = 0; l < topo.localSize(); ++l) {
    int peer = topo.rankAt(node, l);
    if (peer == me) continue;
    signal(stream, peer, ctx, 0);
    waits.push_back({peer, ctx, 0, 1});
  }
  wait(stream, waits.data(), waits.size());
  // Phase 2: the rail. A rank enters it only after its whole node arrived, so when its rail
  // peers have signalled, every rank of every node has arrived.
  waits.clear();
  for (int other = 0; other < topo.nNodes(); ++other) {
    if (other == node) continue;
    int peer = topo.rankAt(other, topo.localRankOf(me));
    signal(stream, peer, ctx, 1, /*waitDone=*/false);
    waits.push_back({peer, ctx, 1, 1});
  }
  wait(stream, waits.data(), waits.size());
  waitProxyDone(stream);
}

}  // namespace rmacc
