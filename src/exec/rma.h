// The one-sided primitives on a stream (DESIGN.md §1): put-with-signal, signal, wait-signal
// and the two-phase barrier. A peer of this node is reached by the copy engine (CE path),
// a peer of another node through the proxy (proxy path); callers do not choose.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/backend.h"
#include "exec/engine_context.h"
#include "exec/bounce.h"
#include "net/proxy.h"

namespace rmacc {

struct SignalWait {
  int peer;
  int ctx;
  int sigIdx;
  uint64_t count;
};

class RmaEngine {
 public:
  explicit RmaEngine(const EngineContext& ctx);

  // Enqueues: copy `bytes` from `src` to `target` + `offset` on `peer`, then signal
  // (ctx, sigIdx) there. With waitDone, later work of `stream` starts only once `src` may be
  // reused (the proxy finished reading it, or it was staged); otherwise call waitProxyDone
  // before reusing it.
  void put(Stream& stream, const void* src, size_t bytes, int peer, const PeerTarget& target,
           uint64_t offset, int ctx, int sigIdx, bool waitDone = true);
  void signal(Stream& stream, int peer, int ctx, int sigIdx, bool waitDone = true);
  // A put (bytes may be 0: a signal) to a peer of another node, posted to `stream`'s proxy
  // queue but not released: the caller enqueues the store `*ready` on `stream` itself, in a
  // batch of memory ops (consecutive puts need only the last store: the proxy issues every
  // post up to the value stored). False, with nothing posted, when the put must be staged
  // (its source is memory the network cannot read): the caller then uses put().
  bool postUnreleased(Stream& stream, const void* src, size_t bytes, int peer,
                      const PeerTarget& target, uint64_t offset, int ctx, int sigIdx,
                      WriteDesc* ready);
  // The same for a put that gathers `n` sources (descs unset), written back to back from
  // `offset` with one signal for all (ProxyPut::gather); sources adjacent in memory become one.
  // The peer must be on another node and `target` a registered region (no landing zone).
  bool postUnreleased(Stream& stream, const FabricIov* srcs, size_t n, int peer,
                      const PeerTarget& target, uint64_t offset, int ctx, int sigIdx,
                      WriteDesc* ready);
  // put() of such a gather: staged when the sources need it, else posted and released.
  void putGather(Stream& stream, const FabricIov* srcs, size_t n, int peer,
                 const PeerTarget& target, uint64_t offset, int ctx, int sigIdx, bool waitDone);
  void wait(Stream& stream, const SignalWait* waits, size_t n);
  // Holds `stream` until every proxy put it posted so far no longer reads the caller's memory.
  void waitProxyDone(Stream& stream);
  // The waits waitProxyDone would enqueue (one per proxy queue of `stream` that carried such a
  // put), for a caller that batches them with other stream memory ops; empty when `stream`
  // posted no put that reads the caller's memory.
  std::vector<WaitDesc> proxyDoneWaits(Stream& stream);
  // Global barrier on `stream`: the node's ranks, then the rails (DESIGN.md §2 "Barrier").
  void barrier(Stream& stream, int ctx);
  // `stream` is going away and has synchronized (every put it posted is released to the
  // proxy): its proxy queue and bounce ring go to a pool that the next new stream draws from,
  // so destroyed streams neither keep queues the proxy scans nor rings of 64 MiB and more, and
  // a later stream at the same address does not inherit them.
  void forgetStream(Stream& stream);
  // Proxy queues this engine made so far (the pool bounds them by the streams alive at once),
  // and the streams it holds a queue for now.
  size_t queuesCreated() const;
  size_t streamsHeld() const;

 private:
  // What a posting stream uses on the proxy path, per proxy thread; it outlives the stream in
  // the pool.
  struct Route {
    ProxyQueue* queue = nullptr;       // made on the first put through the thread
    std::unique_ptr<BounceRing> ring;  // made on the first staged put
    uint64_t lastReading = 0;          // seq of the last put that reads the caller's memory
  };
  using Lane = std::vector<Route>;  // by proxy thread
  Route& routeFor(Stream& stream, int thread);  // mu_ held
  // The proxy queue of a stream towards a thread: one per posting stream so that one
  // stream's readiness never holds back another's puts, and one per thread so that a pair
  // of ranks always talks through the same thread at both ends.
  ProxyQueue& queueFor(Stream& stream, const ProxyPut& put);
  // The proxy thread of a put: by pair (proxyThreadOf); landing puts on thread 0 (Proxy).
  int threadOf(const ProxyPut& put) const;
  void proxyPut(Stream& stream, const ProxyPut& put, bool waitDone);
  ProxyPut makeProxyPut(const void* src, size_t bytes, int peer, const PeerTarget& target,
                        uint64_t offset, int ctx, int sigIdx) const;
  ProxyPut makeGatherPut(const FabricIov* srcs, size_t n, int peer, const PeerTarget& target,
                         uint64_t offset, int ctx, int sigIdx) const;
  bool staged(const ProxyPut& put) const;
  // Posts `p` unreleased unless it must be staged (then false, nothing posted).
  bool postReady(Stream& stream, const ProxyPut& p, WriteDesc* ready);
  // Posts an unstaged put and notes it for waitProxyDone; returns its sequence number.
  uint64_t post(Stream& stream, ProxyQueue& q, const ProxyPut& put);
  void stagedPut(Stream& stream, ProxyQueue& q, const ProxyPut& put);

  const EngineContext ctx_;
  mutable std::mutex mu_;
  std::map<Stream*, Lane> lanes_;
  std::vector<Lane> idle_;  // lanes of forgotten streams
  size_t queuesCreated_ = 0;
};

}  // namespace rmacc
