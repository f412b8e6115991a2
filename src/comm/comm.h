// A communicator: the per-layer components of one rank, created collectively (MSCCL++'s
// Communicator, without NCCL's god object). Setup lives here; the data path lives in exec/.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "bootstrap/bootstrap.h"
#include "core/config.h"
#include "core/topology.h"
#include "exec/engine_context.h"
#include "net/fabric.h"
#include "net/proxy.h"

namespace rmacc {

class SignalSpace;
class WindowRegistry;
class RmaEngine;
class CollectiveEngine;
class PaddedCalls;
class TraceWriter;
struct ProcessRecord;  // who a rank's process is (comm.cc)

class Comm : public FailureSink {
 public:
  // Collective: every rank of the communicator calls it with the same id and nRanks.
  static std::unique_ptr<Comm> create(int nRanks, const rmaccUniqueId& id, int rank);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int rank() const { return rank_; }
  int nRanks() const { return nRanks_; }
  const Topology& topo() const { return topo_; }
  const Config& cfg() const { return cfg_; }
  Backend& backend() { return *backend_; }
  Bootstrap& bootstrap() { return *bootstrap_; }
  Proxy* proxy() { return proxy_.get(); }  // nullptr on a single node
  SignalSpace& signals() { return *signals_; }
  WindowRegistry& windows() { return *windows_; }
  RmaEngine& rma() { return *rma_; }
  CollectiveEngine& coll() { return *coll_; }
  PaddedCalls& padded() { return *padded_; }  // rmaccAlltoAllvPadded (coll/padded_calls.h)
  bool multiNode() const { return topo_.nNodes() > 1; }
  TraceWriter* trace() { return trace_.get(); }  // RMACC_TRACE_FILE; nullptr when unset
  // Where a zero-byte proxy put (a pure signal) to `peer` lands: providers verify the key of
  // even an empty write, so every rank registers a small region for them.
  const RemoteRegion& signalTarget(int peer) const { return signalTargets_[peer]; }
  // Where other nodes' puts into this rank's windows land when the network cannot write them
  // (net/landing.h): created on first use (a window registration), multi-node only.
  LandingZone& landingZone();

  // Streams handed out by rmaccStreamCreate, owned here.
  void* createUserStream();
  void destroyUserStream(void* handle);
  // The Stream behind a user's handle; throws rmaccInvalidArgument for a handle this backend
  // does not know, and, unless `captureOk` (the collectives: coll/captured_calls.h),
  // rmaccInvalidUsage for a stream being captured into a CUDA graph.
  Stream& streamOf(rmaccStream_t handle, bool captureOk = false);
  // A NULL stream on the host backend means "return when done" (DESIGN.md §4).
  bool synchronousStream(rmaccStream_t handle) const;

  // The readable cause of the last failed call on this communicator (rmaccGetLastError).
  void setLastError(const std::string& text);
  std::string lastError() const;

  // Fatal errors of background work (proxy, progress thread, streams): once set, every call
  // fails with it (rmaccCommGetAsyncError reports it).
  void setAsyncError(rmaccResult_t code, const std::string& text);
  // The first fatal error (and its text, when `text` is given); rmaccSuccess while healthy.
  rmaccResult_t asyncError(std::string* text = nullptr) const override;
  // Throws the async error, if any, so that calls on a broken communicator fail fast.
  void checkHealthy() const;
  void abort();
  // The communicator cannot go on (a peer died, a collective timed out or ran out of step):
  // records the first cause as the async error, releases every wait, and tells every peer
  // (their bootstraps see this rank abort with `text`), so each fails within a second.
  void poison(rmaccResult_t code, const std::string& text) override;
  // After a fatal error in a call: poisons the communicator (for a timeout, naming where every
  // rank is), then waits until no queued work can still touch the caller's memory. Returns
  // the text the call reports. Only on a user's thread.
  std::string failCall(rmaccResult_t code, const std::string& text);

  // Calls on a stream whose outcome the user has not been told yet (rmaccCommDestroy reports
  // them): `seq` is CollectiveEngine::alltoallv's number, made in the current collective call.
  void noteCallOnStream(uint64_t seq, rmaccStream_t stream);
  // The stream was synchronised: whatever that returned told the outcome of its calls so far.
  void noteStreamSynchronized(rmaccStream_t stream);
  // Before destroy: lets every enqueued call run to its end (each wait bounded by the
  // timeout), then returns rmaccSuccess, or the error of the first call on a stream that did
  // not complete or failed unreported, with `report` naming each such call.
  rmaccResult_t finish(std::string* report);

  // Collective calls are numbered alike on every rank (1, 2, ...); the number and the kind
  // travel with the call's control messages so that ranks out of step are told apart.
  uint64_t beginCall(const char* kind);
  void endCall();
  // "in call #7 (rmaccBarrier)", or "idle after call #7 (rmaccBarrier)".
  std::string callStatus() const;
  // Every rank's callStatus, asked over the control plane (waits at most a second).
  std::string describeRanks() override;

 private:
  bool eagerProxyPoll() const;  // RMACC_PROXY_POLL, `auto` resolved from the cores we may use
  // RMACC_PROXY_THREADS, `0` resolved from the node count. By default the fabric opens that
  // many endpoints only on a provider that reports its link speed (FabricOptions::
  // endpointsNeedLinkSpeed): on tcp one thread is faster, since tcp moves the bytes on the CPU
  // under the domain's locks (docs/decisions.md#proxy-threads).
  int wantedProxyThreads() const;
  void shareSignalArrays();     // RMACC_NET_SIGNAL_WRITES: EngineContext::signalArrays
  void probeGpuDirect();        // RMACC_NET_GDR=auto: may the network touch device memory?
  Comm() = default;
  void init(int nRanks, const rmaccUniqueId& id, int rank);

  int rank_ = -1;
  int nRanks_ = 0;
  Config cfg_;
  Topology topo_;
  std::unique_ptr<TraceWriter> trace_;  // first: the proxy and the executor write into it
  std::unique_ptr<Bootstrap> bootstrap_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Fabric> fabric_;
  std::unique_ptr<Proxy> proxy_;
  std::unique_ptr<Allocation> signalPad_;  // where pure signals from other nodes land
  std::unique_ptr<MemoryRegion> signalPadMr_;
  std::mutex landingMu_;
  std::unique_ptr<LandingZone> landing_;
  std::vector<RemoteRegion> signalTargets_;
  std::unique_ptr<MemoryRegion> signalArrayMr_;  // this rank's signal array, for value writes
  std::vector<RemoteRegion> signalArrays_;       // EngineContext::signalArrays
  std::unique_ptr<SignalSpace> signals_;
  std::unique_ptr<WindowRegistry> windows_;
  std::unique_ptr<RmaEngine> rma_;
  std::unique_ptr<CollectiveEngine> coll_;
  std::unique_ptr<PaddedCalls> padded_;  // makes its calls through coll_

  std::mutex streamsMu_;
  std::map<void*, std::unique_ptr<Stream>> userStreams_;
  mutable std::mutex errorMu_;
  std::string lastError_;
  std::atomic<int> asyncError_{rmaccSuccess};
  std::string asyncErrorText_;
  void watchLocalPeers(const std::vector<ProcessRecord>& procs);
  uint64_t callSeq_ = 0;                // guarded by errorMu_, as are the three below
  const char* callKind_ = "none";
  bool inCall_ = false;
  struct CallOnStream {
    uint64_t callSeq;
    const char* kind;
    rmaccStream_t stream;
  };
  std::map<uint64_t, CallOnStream> unreported_;  // by engine number (noteCallOnStream)
};

}  // namespace rmacc
