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
#include "core/window.h"
#include "exec/bounce.h"
#include "net/proxy.h"

namespace rmacc {

class Comm;

struct SignalWait {
  int peer;
  int ctx;
  int sigIdx;
  uint64_t count;
};

class RmaEngine {
 public:
  explicit RmaEngine(Comm& comm);

  // Enqueues: copy `bytes` from `src` to `target` + `offset` on `peer`, then signal
  // (ctx, sigIdx) there. With waitDone, later work of `stream` starts only once `src` may be
  // reused (the proxy finished reading it, or it was staged); otherwise call waitProxyDone
  // before reusing it.
  void put(Stream& stream, const void* src, size_t bytes, int peer, const PeerTarget& target,
           uint64_t offset, int ctx, int sigIdx, bool waitDone = true);
  void signal(Stream& stream, int peer, int ctx, int sigIdx, bool waitDone = true);
  void wait(Stream& stream, const SignalWait* waits, size_t n);
  // Holds `stream` until every proxy put it posted so far no longer reads the caller's memory.
  void waitProxyDone(Stream& stream);
  // Global barrier on `stream`: the node's ranks, then the rails (DESIGN.md §2 "Barrier").
  void barrier(Stream& stream, int ctx);

 private:
  // The proxy queue of a stream: one per posting stream so that one stream's readiness never
  // holds back another's puts.
  ProxyQueue& queueFor(Stream& stream);
  void proxyPut(Stream& stream, const ProxyPut& put, bool waitDone);
  void stagedPut(Stream& stream, ProxyQueue& q, const ProxyPut& put);

  Comm& comm_;
  std::mutex mu_;
  std::map<Stream*, ProxyQueue*> queues_;
  std::map<Stream*, std::unique_ptr<BounceRing>> bounces_;
  std::map<Stream*, uint64_t> lastSeq_;
};

}  // namespace rmacc
