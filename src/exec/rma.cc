#include "exec/rma.h"

#include <algorithm>

#include "core/error.h"
#include "core/proxy_routing.h"
#include "exec/signal_space.h"

namespace rmacc {

RmaEngine::RmaEngine(const EngineContext& ctx) : ctx_(ctx) {}

RmaEngine::Route& RmaEngine::routeFor(Stream& stream, int thread) {
  auto it = lanes_.find(&stream);
  if (it == lanes_.end()) {
    Lane lane(ctx_.proxy->threads());
    if (!idle_.empty()) {
      lane = std::move(idle_.back());
      idle_.pop_back();
    }
    it = lanes_.emplace(&stream, std::move(lane)).first;
  }
  Route& route = it->second[thread];
  if (!route.queue) {
    route.queue = ctx_.proxy->createQueue(thread);
    ++queuesCreated_;
  }
  return route;
}

int RmaEngine::threadOf(const ProxyPut& put) const {
  if (put.landing.valid()) return 0;
  return proxyThreadOf(ctx_.topo.nodeOf(ctx_.rank), ctx_.topo.nodeOf(put.peer),
                       ctx_.proxy->threads(), ctx_.topo.nNodes());
}

ProxyQueue& RmaEngine::queueFor(Stream& stream, const ProxyPut& put) {
  std::lock_guard<std::mutex> lock(mu_);
  return *routeFor(stream, threadOf(put)).queue;
}

// A pooled queue keeps counting from where its last stream left it: its puts were all released
// (the stream synchronized), so the next stream's posts simply follow them. A pooled ring's
// regions wait on that queue's done flag before reuse, whichever stream reserves them.
void RmaEngine::forgetStream(Stream& stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = lanes_.find(&stream);
  if (it == lanes_.end()) return;
  for (Route& r : it->second) r.lastReading = 0;
  idle_.push_back(std::move(it->second));
  lanes_.erase(it);
}

size_t RmaEngine::queuesCreated() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queuesCreated_;
}

size_t RmaEngine::streamsHeld() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lanes_.size();
}

bool RmaEngine::staged(const ProxyPut& put) const {
  if (put.bytes == 0) return false;
  if (ctx_.cfg.bounceAlways) return true;
  if (put.gather.empty()) return !ctx_.backend.nicAccessible(put.src);
  for (const FabricIov& g : put.gather)
    if (!ctx_.backend.nicAccessible(g.src)) return true;
  return false;
}

namespace {

// Calls f(src, bytes, at) for the sources of put bytes [off, off + len), `at` counting from off.
template <typename F>
void forEachSourceRange(const ProxyPut& put, size_t off, size_t len, F&& f) {
  if (put.gather.empty()) {
    f(static_cast<const char*>(put.src) + off, len, size_t{0});
    return;
  }
  size_t start = 0;  // of the current source in the put
  for (const FabricIov& g : put.gather) {
    const size_t lo = std::max(off, start), hi = std::min(off + len, start + g.bytes);
    if (lo < hi) f(static_cast<const char*>(g.src) + (lo - start), hi - lo, lo - off);
    start += g.bytes;
  }
}

}  // namespace

uint64_t RmaEngine::post(Stream& stream, ProxyQueue& q, const ProxyPut& put) {
  ProxyPut p = put;
  // Providers that need sources registered: an rmaccMemAlloc source's registration is made
  // once and cached with the buffer, instead of once per put on the proxy thread.
  if (p.bytes > 0 && ctx_.proxy->needsSourceRegistration()) {
    if (p.gather.empty() && !p.srcDesc) p.srcDesc = ctx_.memory.sourceDesc(p.src, p.bytes);
    for (FabricIov& g : p.gather)
      if (!g.desc) g.desc = ctx_.memory.sourceDesc(g.src, g.bytes);
  }
  uint64_t seq = q.post(p);
  // Only a put that reads the caller's memory in place holds the stream (now or at
  // waitProxyDone) until it completed locally: a pure signal reads nothing. Waiting on those
  // anyway made every call end one network completion later (an ack round trip).
  if (put.bytes > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    routeFor(stream, threadOf(put)).lastReading = seq;
  }
  return seq;
}

void RmaEngine::proxyPut(Stream& stream, const ProxyPut& put, bool waitDone) {
  ProxyQueue& q = queueFor(stream, put);
  if (staged(put)) {
    stagedPut(stream, q, put);
    return;
  }
  uint64_t seq = post(stream, q, put);
  stream.writeValue(q.ready(), seq);
  if (waitDone && put.bytes > 0) {
    WaitDesc w{q.done(), seq};
    stream.waitValues(&w, 1);
  }
}

bool RmaEngine::postUnreleased(Stream& stream, const void* src, size_t bytes, int peer,
                               const PeerTarget& target, uint64_t offset, int ctx, int sigIdx,
                               WriteDesc* ready) {
  return postReady(stream, makeProxyPut(src, bytes, peer, target, offset, ctx, sigIdx), ready);
}

bool RmaEngine::postUnreleased(Stream& stream, const FabricIov* srcs, size_t n, int peer,
                               const PeerTarget& target, uint64_t offset, int ctx, int sigIdx,
                               WriteDesc* ready) {
  return postReady(stream, makeGatherPut(srcs, n, peer, target, offset, ctx, sigIdx), ready);
}

bool RmaEngine::postReady(Stream& stream, const ProxyPut& p, WriteDesc* ready) {
  if (staged(p)) return false;
  ProxyQueue& q = queueFor(stream, p);
  *ready = WriteDesc{q.ready(), post(stream, q, p)};
  return true;
}

void RmaEngine::putGather(Stream& stream, const FabricIov* srcs, size_t n, int peer,
                          const PeerTarget& target, uint64_t offset, int ctx, int sigIdx,
                          bool waitDone) {
  proxyPut(stream, makeGatherPut(srcs, n, peer, target, offset, ctx, sigIdx), waitDone);
}

// Device memory the network cannot read: the stream stages it in pinned memory chunk by chunk
// and releases each chunk to the proxy once staged, so that staging chunk k+1 overlaps sending
// chunk k; the peer's signal fires when the last chunk and all before it landed (ProxyPut's
// final / priorPieces). The caller's memory is free once the last copy ran, so nothing waits for
// the network here; the ring waits before it reuses a region.
void RmaEngine::stagedPut(Stream& stream, ProxyQueue& q, const ProxyPut& put) {
  BounceRing* ring;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& r = routeFor(stream, threadOf(put)).ring;
    if (!r) r = std::make_unique<BounceRing>(ctx_.backend, *ctx_.proxy, ctx_.cfg.bounceBytes);
    ring = r.get();
  }
  // One piece per chunk, at most 255 chunks: the completion data counts 255 pieces a put.
  constexpr size_t kMaxChunks = 255;
  const size_t pieceMax = ctx_.proxy->maxPieceBytes();
  const size_t chunk = std::min(
      pieceMax, std::max(ctx_.cfg.bounceChunkBytes, (put.bytes + kMaxChunks - 1) / kMaxChunks));
  // Refused whole, before any part is posted (a put with no final part would never signal).
  RMACC_ARG_CHECK((put.bytes + chunk - 1) / chunk <= kMaxChunks,
                  "put of %zu bytes needs more than %zu pieces of at most %zu bytes; the completion "
                  "data counts at most %zu (the provider's largest message is too small)",
                  put.bytes, kMaxChunks, pieceMax, kMaxChunks);
  // A gather is staged back to back: each part is plain, from the bounce ring.
  std::vector<CopyDesc> copies;
  uint32_t prior = 0;
  for (size_t off = 0; off < put.bytes; off += chunk, ++prior) {
    ProxyPut part = put;
    part.gather.clear();
    part.bytes = std::min(chunk, put.bytes - off);
    part.dstOffset = put.dstOffset + off;
    part.final = off + part.bytes == put.bytes;
    part.priorPieces = part.final ? prior : 0;
    char* staged = ring->reserve(stream, part.bytes, q.done());
    copies.clear();
    forEachSourceRange(put, off, part.bytes, [&](const char* src, size_t len, size_t at) {
      copies.push_back({staged + at, src, len});
    });
    stream.copy(copies.data(), copies.size());
    part.src = staged;
    part.srcDesc = ring->desc();
    uint64_t seq = q.post(part);
    ring->used(seq);
    stream.writeValue(q.ready(), seq);
  }
}

std::vector<WaitDesc> RmaEngine::proxyDoneWaits(Stream& stream) {
  std::vector<WaitDesc> waits;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = lanes_.find(&stream);
  if (it == lanes_.end()) return waits;
  for (const Route& r : it->second)
    if (r.lastReading > 0) waits.push_back(WaitDesc{r.queue->done(), r.lastReading});
  return waits;
}

void RmaEngine::waitProxyDone(Stream& stream) {
  std::vector<WaitDesc> w = proxyDoneWaits(stream);
  if (!w.empty()) stream.waitValues(w.data(), w.size());
}

void RmaEngine::put(Stream& stream, const void* src, size_t bytes, int peer,
                    const PeerTarget& target, uint64_t offset, int ctx, int sigIdx,
                    bool waitDone) {
  if (ctx_.topo.sameNode(peer, ctx_.rank)) {
    if (bytes > 0) {
      CopyDesc c{static_cast<char*>(target.local) + offset, src, bytes};
      stream.copy(&c, 1);
    }
    ctx_.signals.enqueueCeSignal(stream, peer, ctx, sigIdx);
    return;
  }
  proxyPut(stream, makeProxyPut(src, bytes, peer, target, offset, ctx, sigIdx), waitDone);
}

ProxyPut RmaEngine::makeProxyPut(const void* src, size_t bytes, int peer,
                                  const PeerTarget& target, uint64_t offset, int ctx,
                                  int sigIdx) const {
  ProxyPut p;
  p.peer = peer;
  p.src = src;
  p.bytes = bytes;
  p.dst = target.remote;
  p.dstOffset = offset;
  if (bytes == 0) {
    // Nothing to write: a pure signal, carried to the peer's signal pad, as within a node where
    // it is only the signal. The target window may be empty and registered nowhere.
    p.dst = ctx_.signalTargets[peer];
    p.dstOffset = 0;
  } else if (target.landing.valid()) {
    p.landing = target.landing;
    p.dst = target.landing.region;
  }
  p.ctx = ctx;
  p.sigIdx = sigIdx;
  if (bytes == 0 && pureSignalContext(ctx) && !ctx_.signalArrays.empty() &&
      ctx_.signalArrays[peer].size > 0) {
    p.dst = ctx_.signalArrays[peer];
    p.dstOffset = 0;
    p.writesValue = true;
  }
  return p;
}

ProxyPut RmaEngine::makeGatherPut(const FabricIov* srcs, size_t n, int peer,
                                   const PeerTarget& target, uint64_t offset, int ctx,
                                   int sigIdx) const {
  RMACC_ENFORCE(!ctx_.topo.sameNode(peer, ctx_.rank) && !target.landing.valid(),
                "a gathering put goes to a registered region on another node (rank %d)", peer);
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) total += srcs[i].bytes;
  ProxyPut p = makeProxyPut(nullptr, total, peer, target, offset, ctx, sigIdx);
  RMACC_ENFORCE(!p.writesValue, "a gathering put in signal context %d", ctx);
  p.bytes = 0;  // counted again below, as the sources are merged
  for (size_t i = 0; i < n; ++i) {
    if (srcs[i].bytes == 0) continue;
    FabricIov* last = p.gather.empty() ? nullptr : &p.gather.back();
    if (last && static_cast<const char*>(last->src) + last->bytes == srcs[i].src)
      last->bytes += srcs[i].bytes;  // contiguous in memory (an alltoall's send blocks)
    else
      p.gather.push_back({srcs[i].src, srcs[i].bytes, nullptr});
    p.bytes += srcs[i].bytes;
  }
  if (p.gather.size() == 1) {  // nothing left to gather
    p.src = p.gather[0].src;
    p.gather.clear();
  }
  return p;
}

void RmaEngine::signal(Stream& stream, int peer, int ctx, int sigIdx, bool waitDone) {
  PeerTarget t;
  if (!ctx_.topo.sameNode(peer, ctx_.rank)) t.remote = ctx_.signalTargets[peer];
  put(stream, nullptr, 0, peer, t, 0, ctx, sigIdx, waitDone);
}

void RmaEngine::wait(Stream& stream, const SignalWait* waits, size_t n) {
  std::vector<WaitDesc> descs;
  descs.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (waits[i].count == 0) continue;
    descs.push_back(ctx_.signals.consume(waits[i].peer, waits[i].ctx, waits[i].sigIdx,
                                            waits[i].count));
  }
  if (!descs.empty()) stream.waitValues(descs.data(), descs.size());
}

void RmaEngine::barrier(Stream& stream, int ctx) {
  const Topology& topo = ctx_.topo;
  const int me = ctx_.rank;
  const int node = topo.nodeOf(me);
  std::vector<SignalWait> waits;
  // Phase 1: the node. Every rank signals every other rank of its node and waits for them.
  for (int l = 0; l < topo.nodeSize(node); ++l) {
    int peer = topo.rankAt(node, l);
    if (peer == me) continue;
    signal(stream, peer, ctx, 0);
    waits.push_back({peer, ctx, 0, 1});
  }
  wait(stream, waits.data(), waits.size());
  // Phase 2: the rails (Topology::railPeer). A rank enters it only after its whole node
  // arrived. It signals its relay on every other node and its writers there (the ranks whose
  // relay it is), and waits for the same ranks: the relation is symmetric, so the signals
  // match the waits, and every rank hears from at least one rank of every node (its relay),
  // so when they have signalled, every rank of every node has arrived. With equal node sizes
  // the relay and the one writer are the same rank.
  waits.clear();
  const int local = topo.localRankOf(me), size = topo.nodeSize(node);
  for (int other = 0; other < topo.nNodes(); ++other) {
    if (other == node) continue;
    const int relay = topo.railPeer(me, other);
    signal(stream, relay, ctx, 1, /*waitDone=*/false);
    waits.push_back({relay, ctx, 1, 1});
    for (int l = local; l < topo.nodeSize(other); l += size) {
      const int writer = topo.rankAt(other, l);
      if (writer == relay) continue;
      signal(stream, writer, ctx, 1, /*waitDone=*/false);
      waits.push_back({writer, ctx, 1, 1});
    }
  }
  wait(stream, waits.data(), waits.size());
  waitProxyDone(stream);
}

}  // namespace rmacc
