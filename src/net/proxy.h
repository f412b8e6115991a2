// The proxy thread of a communicator (DESIGN.md §3, NCCL's rma_proxy): streams post puts, the
// proxy issues them as fi_writedata whose completion data names the signal, and it turns remote
// completion data into signal increments. Mechanism only: what to put comes from the caller.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "net/fabric.h"
#include "net/landing.h"
#include "net/signals.h"

namespace rmacc {

struct ProxyPut {
  int peer = -1;
  const void* src = nullptr;  // CPU-addressable source (host memory or a bounce buffer)
  size_t bytes = 0;           // may be 0: a pure signal
  // MemoryRegion::desc() of a registration covering the source, when the caller has one. When
  // the provider needs FI_MR_LOCAL and this is null, the proxy registers the source itself for
  // the duration of the put (correct, but slower).
  void* srcDesc = nullptr;
  // The peer's registered region. Required even when bytes == 0: a zero-byte write still
  // names a key, and tcp;ofi_rxm silently drops one whose key does not verify. A natural
  // target for pure signals is the peer's registered signal array (offset 0).
  RemoteRegion dst;
  uint64_t dstOffset = 0;
  int ctx = 0;
  int sigIdx = 0;
  // One logical put may be posted as several consecutive puts of one queue (a staged source
  // sent in chunks, so that staging chunk k+1 overlaps sending chunk k): every part but the
  // last has `final` false and raises nothing at the peer; the last carries in `priorPieces`
  // the pieces its predecessors sent, and the peer's signal fires once all of them landed.
  bool final = true;
  uint32_t priorPieces = 0;
  // Set by ProxyQueue::post: the put's place in the rank's posting order, which the proxy
  // threads keep between them for data writes (core/nic_pacer.h). Ignored on input.
  uint64_t order = 0;
  // Non-empty: the put gathers these sources, written back to back from dstOffset (a relay
  // chunk made of several send blocks), as few writes as the provider's iov limit and the
  // piece size allow, one signal for all; `src` and `srcDesc` are unused and `bytes` is their
  // total. A source without a desc is registered by the proxy when the provider needs it, as
  // for `src`. Not with `landing` or parts (`final`).
  std::vector<FabricIov> gather;
  // Valid for a window the network cannot write: the put goes through the peer's landing zone
  // (net/landing.h) chunk by chunk, `dst` is ignored and `dstOffset` is the offset in that
  // window. Needs bytes > 0 (a pure signal goes to the peer's signal region instead).
  LandingTarget landing;
  // A pure signal (bytes 0) that the NIC writes as the counter's next value into the peer's
  // signal array (`dst`: that array, registered; `dstOffset` unused), with no completion data,
  // so the peer's proxy does nothing for it (docs/decisions.md#signal-writes). The proxy numbers a pair's value writes in issue order (one thread
  // carries a pair: proxyThreadOf); where writes may land out of order (EFA's SRD) it keeps one
  // per counter in flight, whose completion means it landed (FI_DELIVERY_COMPLETE), so a lower
  // value never lands after a higher one. A sender sends every signal of one counter this way
  // or none of them.
  bool writesValue = false;
};

// The ordered queue of one posting stream. Handshake (NCCL's readySeq/doneSeq): the host thread
// post()s a put and gets its sequence number; the stream later writes ready = seq; the proxy
// issues every posted put whose seq <= ready, in order, and writes done = seq once that put
// and all before it completed locally (the source may be reused).
// Sequence numbers start at 1 per queue; ready and done start at 0. post() throws
// Error(rmaccInvalidArgument) for a put that can never be carried out (bad peer, context or
// signal, overrun of dst, more than 255 pieces) and the proxy's own error once it failed; a
// refused put takes no sequence number. post() may be called from any thread.
class ProxyQueue {
 public:
  virtual ~ProxyQueue() = default;
  virtual volatile uint64_t* ready() = 0;  // host-visible, written by the stream
  virtual volatile uint64_t* done() = 0;   // host-visible, written by the proxy
  virtual uint64_t post(const ProxyPut& put) = 0;
};

class Proxy {
 public:
  virtual ~Proxy() = default;
  // Proxy threads, one per fabric endpoint, issuing side by side (RMACC_PROXY_THREADS).
  virtual int threads() const = 0;
  // A new queue served by proxy thread `thread` (0 <= thread < threads()); valid until the
  // proxy is destroyed. A put goes out through the endpoint of its queue's thread and lands
  // on the peer's endpoint of the same index, whose thread takes it in: the caller picks the
  // thread by the two nodes (proxyThreadOf), and landing puts on thread 0 (below).
  virtual ProxyQueue* createQueue(int thread) = 0;
  ProxyQueue* createQueue() { return createQueue(0); }
  // Puts larger than this go out as several pieces (RMACC_MAX_PUT_BYTES, the provider's limit).
  virtual size_t maxPieceBytes() const = 0;
  // Whether a put's source must be registered (FI_MR_LOCAL: verbs, efa): a put without
  // ProxyPut::srcDesc then costs a registration and its close on the proxy thread.
  virtual bool needsSourceRegistration() const = 0;
  // How many such registrations of put sources the proxy made so far.
  virtual uint64_t sourceRegistrations() const = 0;
  // Memory the proxy threads allocated or registered for their own use (none is expected:
  // their rounds must not stall in the driver; tests check it).
  virtual uint64_t proxyThreadAllocations() const = 0;
  // Registers memory remote peers may write into (windows, relay, staging).
  virtual std::unique_ptr<MemoryRegion> registerMemory(void* ptr, size_t bytes) = 0;
  // The first error the proxy met (rmaccSuccess while healthy) and its text.
  virtual rmaccResult_t error(std::string* text = nullptr) const = 0;
  // Stops issuing, fails every later wait of this proxy.
  virtual void abort() = 0;
  // Returns once every put a stream released so far has completed (or the proxy failed, was
  // aborted, or the timeout passed). Streams do not wait for the network completion of puts
  // that read no caller memory, so whoever frees their sources (the bounce rings) or the proxy
  // itself calls this first.
  virtual void flush() = 0;
  // Called once, on the proxy thread that records the first error (not on abort()): the
  // communicator uses it to release stream waits (Backend::abort) instead of letting them run
  // into their timeout. Must not call back into the proxy. Set it before posting.
  virtual void setErrorHandler(std::function<void(rmaccResult_t, const std::string&)> fn) = 0;
  // Makes this rank a landing target: the proxy copies chunks that arrive in `zone` into place
  // and returns their slots through zero-byte writes to `peerSignals[src]` (every rank's
  // signal region). Once; `zone` must outlive the proxy. Landing traffic (chunks, headers,
  // slot credits) is thread 0's alone: landing puts must be posted to its queues.
  virtual void attachLanding(LandingZone* zone, std::vector<RemoteRegion> peerSignals) = 0;
};

// Starts the proxy threads. `signals` (host-visible, SignalLayout{nRanks}) receives the
// increments for remote sources; signal stores go through backend.hostWrite so that stream
// waits on the host backend wake up. Puts above the provider's maximum message or
// maxPieceBytes (1 GiB; lower in tests) are split; the receiving proxy counts the signal once every
// piece has landed. RMACC_MAX_PUT_BYTES is the planner's, not applied here a second time.
struct ProxyOptions {
  // Proxy threads, each driving the fabric endpoint of its index; 0: one per endpoint.
  int threads = 0;
  size_t maxPieceBytes = 1ull << 30;  // larger puts are split into pieces
  double timeoutS = 300;            // a put making no progress this long fails the proxy
  bool eagerPoll = false;           // poll without sleeping while puts are pending (proxy_backoff.h)
  // Data writes go to the NIC in order at this rate (nic_pacer.h); 0: as soon as released.
  double paceBytesPerSecond = 0;
  // Called on the proxy thread for every finished put ("net put": from the stream's release
  // to the last piece's completion) and incoming signal ("net recv", no duration), so a
  // RMACC_TRACE_FILE shows the network hops beside the stream ops. Times in µs, CLOCK_MONOTONIC.
  std::function<void(const char* name, int peer, uint64_t bytes, double startUs, double durUs)> trace;
};
// One proxy thread per endpoint of `fabric` (or the first ProxyOptions::threads). With several,
// incoming data from one peer may land on any of them, so signal increments take a lock they
// share.
std::unique_ptr<Proxy> startProxy(Fabric& fabric, Backend& backend, int rank, int nRanks,
                                  volatile uint64_t* signals, const ProxyOptions& options);

}  // namespace rmacc
