#include "comm/comm.h"

#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>

#include "os/peer_fd.h"

#include "core/error.h"
#include "core/log.h"
#include "core/proxy_routing.h"
#include "comm/window.h"
#include "coll/collective.h"
#include "coll/padded_calls.h"
#include "exec/rma.h"
#include "exec/signal_space.h"
#include "exec/trace.h"
#include "plan/plan_build.h"

namespace rmacc {

namespace {

// Fixed-size slot for exchanging variable-length names and addresses.
struct NameRecord {
  uint32_t size;
  char bytes[256];
};

NameRecord toRecord(const std::vector<char>& v) {
  NameRecord r{};
  RMACC_ENFORCE(v.size() <= sizeof(r.bytes), "%zu-byte name", v.size());
  r.size = (uint32_t)v.size();
  memcpy(r.bytes, v.data(), v.size());
  return r;
}

std::string localHostname(const Config& cfg) {
  if (!cfg.hostname.empty()) return cfg.hostname;
  char host[256] = {0};
  RMACC_SYSCHECK(gethostname(host, sizeof(host) - 1), "gethostname");
  return host;
}

}  // namespace

// Enough to tell whether a peer's pid names a process this rank can watch: the same kernel
// (boot id) and the same pid namespace.
struct ProcessRecord {
  int64_t pid;
  uint64_t pidNamespace;
  uint64_t bootId;

  static ProcessRecord mine() {
    ProcessRecord r{getpid(), 0, 0};
    struct stat st;
    if (stat("/proc/self/ns/pid", &st) == 0) r.pidNamespace = st.st_ino;
    std::ifstream f("/proc/sys/kernel/random/boot_id");
    std::string id;
    if (f >> id) r.bootId = std::hash<std::string>()(id);
    return r;
  }
};

std::unique_ptr<Comm> Comm::create(int nRanks, const rmaccUniqueId& id, int rank) {
  RMACC_ARG_CHECK(nRanks > 0 && nRanks <= kMaxRanks, "nranks %d outside [1, %d]", nRanks, kMaxRanks);
  RMACC_ARG_CHECK(rank >= 0 && rank < nRanks, "rank %d outside [0, %d)", rank, nRanks);
  std::unique_ptr<Comm> comm(new Comm());
  comm->init(nRanks, id, rank);
  return comm;
}

void Comm::init(int nRanks, const rmaccUniqueId& id, int rank) {
  cfg_ = config();
  rank_ = rank;
  nRanks_ = nRanks;
  setLogRank(rank);
  bootstrap_ = createTcpBootstrap(id, rank, nRanks, cfg_.timeoutS);

  std::string host = localHostname(cfg_);
  std::vector<NameRecord> hosts(nRanks);
  hosts[rank] = toRecord(std::vector<char>(host.begin(), host.end()));
  bootstrap_->allGather(hosts.data(), sizeof(NameRecord));
  std::vector<std::string> names(nRanks);
  for (int r = 0; r < nRanks; ++r) names[r].assign(hosts[r].bytes, hosts[r].size);
  topo_ = Topology::fromHostnames(names);
  if (plan::usePairedRounds(topo_.nNodes(), planOptionsOf(cfg_, topo_.nNodes())))
    topo_.setRoundDeltas(Topology::pairedRoundDeltas(topo_.nNodes()));
  INFO(kSubsysInit, "topology: %s", topo_.describe().c_str());
  std::vector<ProcessRecord> procs(nRanks);
  procs[rank] = ProcessRecord::mine();
  bootstrap_->allGather(procs.data(), sizeof(ProcessRecord));

  if (!cfg_.traceFile.empty()) trace_ = std::make_unique<TraceWriter>(cfg_.traceFile, rank);
  backend_ = createBackend(cfg_.timeoutS);
  signals_ = std::make_unique<SignalSpace>(*backend_, *bootstrap_, topo_, rank);
  if (multiNode()) {
    FabricOptions fo;
    fo.wantHmem = cfg_.netGdr && backend_->caps().networkMayTouchDeviceMemory;
    fo.forceLocalRegistration = cfg_.netMrLocal;
    fo.universeSize = nRanks;
    fo.endpoints = wantedProxyThreads();
    // By default several threads only where the NIC moves the data itself; set: what it asks.
    fo.endpointsNeedLinkSpeed = cfg_.proxyThreads <= 0;
    fabric_ = std::make_unique<Fabric>(cfg_.netProvider, fo);
    // Both ends of a pair must pick the same thread (proxyThreadOf): every rank runs as many
    // as the rank that opened the fewest endpoints.
    std::vector<int> opened(nRanks);
    opened[rank] = fabric_->endpoints();
    bootstrap_->allGather(opened.data(), sizeof(int));
    const int threads = *std::min_element(opened.begin(), opened.end());
    std::vector<NameRecord> addrs((size_t)nRanks * threads);
    for (int t = 0; t < threads; ++t) addrs[(size_t)rank * threads + t] = toRecord(fabric_->address(t));
    bootstrap_->allGather(addrs.data(), sizeof(NameRecord) * threads);
    for (int t = 0; t < threads; ++t) {
      std::vector<std::vector<char>> peers(nRanks);
      for (int r = 0; r < nRanks; ++r) {
        const NameRecord& a = addrs[(size_t)r * threads + t];
        peers[r].assign(a.bytes, a.bytes + a.size);
      }
      fabric_->insertPeers(t, peers);
    }
    ProxyOptions po;
    po.threads = threads;
    po.timeoutS = cfg_.timeoutS;
    po.eagerPoll = eagerProxyPoll();
    po.paceBytesPerSecond = cfg_.netPaceGBps < 0 ? fabric_->linkBytesPerSecond() : cfg_.netPaceGBps * 1e9;
    if (po.paceBytesPerSecond > 0)
      INFO(kSubsysNet, "rank %d: data writes paced at %.1f GB/s (RMACC_NET_PACE_GBPS %s)", rank,
           po.paceBytesPerSecond / 1e9, cfg_.netPaceGBps < 0 ? "auto: the link speed" : "set");
    else INFO(kSubsysNet, "rank %d: data writes not paced (RMACC_NET_PACE_GBPS)", rank);
    if (trace_) {
      po.trace = [t = trace_.get()](const char* name, int peer, uint64_t bytes, double startUs,
                                    double durUs) {
        t->op(0, -1, "net", name, peer, bytes, startUs, durUs);
      };
    }
    proxy_ = startProxy(*fabric_, *backend_, rank, nRanks, signals_->proxyArray(), po);
    // A network failure is fatal for the communicator: release every stream wait and the
    // control plane now (peers then fail fast too) instead of letting waits run out.
    proxy_->setErrorHandler([this](rmaccResult_t code, const std::string& text) {
      setAsyncError(code, "network: " + text);
      backend_->abort();
      bootstrap_->abort("network: " + text);
    });
    signalPad_ = backend_->allocateNicVisible(64);
    signalPadMr_ = proxy_->registerMemory(signalPad_->ptr(), signalPad_->size());
    signalTargets_.assign(nRanks, RemoteRegion{});
    signalTargets_[rank] = signalPadMr_->remote();
    bootstrap_->allGather(signalTargets_.data(), sizeof(RemoteRegion));
    shareSignalArrays();
    INFO(kSubsysNet, "network provider %s", fabric_->providerName().c_str());
    if (fabric_->hmem()) probeGpuDirect();
  }
  windows_ = std::make_unique<WindowRegistry>(*this);
  const EngineContext ctx{rank,      nRanks,       cfg_,         topo_,          *backend_,
                          *bootstrap_, proxy_.get(), *signals_, trace_.get(), signalTargets_,
                          signalArrays_, *windows_, *this};
  rma_ = std::make_unique<RmaEngine>(ctx);
  coll_ = std::make_unique<CollectiveEngine>(ctx, *rma_);
  padded_ = std::make_unique<PaddedCalls>(*backend_, *coll_, *this, rank, nRanks, cfg_.timeoutS);
  bootstrap_->barrier();
  // From here on a lost peer fails this communicator at once (DESIGN.md §4).
  bootstrap_->setStatusProvider([this] { return callStatus(); });
  bootstrap_->setPeerLostHandler([this](int peer, const std::string& why) {
    (void)peer;
    poison(rmaccRemoteError, why);
  });
  watchLocalPeers(procs);
  INFO(kSubsysInit, "rank %d of %d ready: backend %s, node %d of %d, local rank %d of %d", rank,
       nRanks, backend_->name(), topo_.nodeOf(rank), topo_.nNodes(), topo_.localRankOf(rank),
       topo_.nodeSize(topo_.nodeOf(rank)));
}

Comm::~Comm() {
  // Leaving on purpose: peers must not take this rank's connections closing for a fault. No
  // fault handling from here on either: the handler would touch what is being torn down.
  if (bootstrap_) {
    bootstrap_->leave();
    bootstrap_->setPeerLostHandler(nullptr);
  }
  // Components go in the reverse order of their dependencies. The user's streams first: they
  // wait on the collective engine's flags (and run its triggered calls), so they must be done
  // and joined before the engine frees them (an aborted stream fails its waits at once).
  {
    std::lock_guard<std::mutex> lock(streamsMu_);
    for (auto& [h, st] : userStreams_) {
      try { st->synchronize(); } catch (...) {}
    }
    userStreams_.clear();
  }
  // A failed communicator's endpoints may be part way through a write from a peer that
  // stopped or left: they are not closed (Fabric::abandon), and once failed the proxy no
  // longer progresses them.
  if (fabric_ && asyncError() != rmaccSuccess) fabric_->abandon();
  // Then the progress thread and the executor's streams.
  padded_.reset();
  coll_.reset();
  // The last puts may still read the bounce rings the RMA engine owns (seen: EFAULT from the
  // provider when a communicator went right after its last call).
  if (proxy_) proxy_->flush();
  rma_.reset();
  windows_.reset();
  signalPadMr_.reset();
  signalArrayMr_.reset();
  proxy_.reset();  // before the landing zone: the proxy thread copies out of it
  landing_.reset();
  signalPad_.reset();
  fabric_.reset();
  signals_.reset();
  backend_.reset();
  bootstrap_.reset();
}

void Comm::noteCallOnStream(uint64_t seq, rmaccStream_t stream) {
  const uint64_t done = coll_->completedSeq();
  std::lock_guard<std::mutex> lock(errorMu_);
  // Completed calls need no report (a completed call's error stays with the engine until a
  // synchronisation or the destroy collects it).
  unreported_.erase(unreported_.begin(), unreported_.upper_bound(done));
  unreported_[seq] = CallOnStream{callSeq_, callKind_, stream};
}

void Comm::noteStreamSynchronized(rmaccStream_t stream) {
  std::lock_guard<std::mutex> lock(errorMu_);
  for (auto it = unreported_.begin(); it != unreported_.end();)
    it = it->second.stream == stream ? unreported_.erase(it) : std::next(it);
}

rmaccResult_t Comm::finish(std::string* report) {
  // What was enqueued runs to its end: the progress thread sets up the queued calls (a late
  // peer fails the exchange at the timeout), then the streams run their work.
  coll_->quiesce();
  {
    std::lock_guard<std::mutex> lock(streamsMu_);
    for (auto& [h, st] : userStreams_) {
      try { st->synchronize(); } catch (const Error&) {}  // its calls' errors are named below
    }
  }
  std::map<uint64_t, CallOnStream> calls;
  {
    std::lock_guard<std::mutex> lock(errorMu_);
    calls.swap(unreported_);
  }
  const uint64_t done = coll_->completedSeq();
  rmaccResult_t code = rmaccSuccess;
  std::vector<std::string> lost;
  auto add = [&](rmaccResult_t e, const std::string& what) {
    if (code == rmaccSuccess) code = e;
    lost.push_back(what);
  };
  for (const auto& [seq, call] : calls) {
    std::string why;
    rmaccResult_t e = coll_->takeCallError(seq, &why);
    if (e == rmaccSuccess && seq <= done) continue;
    if (e == rmaccSuccess) e = asyncError(&why);
    if (e == rmaccSuccess) e = rmaccInternalError, why = "its work did not complete";
    add(e, strprintf("call #%llu (%s) on stream %p: %s", (unsigned long long)call.callSeq,
                     call.kind, call.stream, why.c_str()));
  }
  // Completed calls that failed (rejected counts on the device) and whose stream was never
  // synchronised.
  std::string why;
  for (rmaccResult_t e; (e = coll_->takeAnyCallError(&why)) != rmaccSuccess;)
    add(e, "a call that failed: " + why);
  if (lost.empty()) return rmaccSuccess;
  std::string text = strprintf("%zu call%s on a stream did not complete or failed, and nothing "
                               "reported it (synchronise the stream before destroy to see each "
                               "call's error): ", lost.size(), lost.size() == 1 ? "" : "s");
  for (size_t i = 0; i < lost.size(); ++i) text += (i ? "; " : "") + lost[i];
  *report = text;
  return code;
}

// Each rank registers its signal array for value writes when its stream waits notice a NIC's
// store (or RMACC_NET_SIGNAL_WRITES=always) and its provider can inject them; a rank that
// cannot write values itself sends completion data to everyone instead.
void Comm::shareSignalArrays() {
  using Setting = SignalWritesSetting;
  const Setting setting = cfg_.netSignalWrites;
  const bool writes = setting != Setting::kOff && fabric_->canWriteValues();
  const bool takes = writes && (setting == Setting::kAlways || backend_->caps().waitsSeeEveryStore);
  signalArrays_.assign(nRanks_, RemoteRegion{});
  if (takes) {
    signalArrayMr_ = proxy_->registerMemory(const_cast<uint64_t*>(signals_->proxyArray()),
                                            signals_->layout().bytes());
    signalArrays_[rank_] = signalArrayMr_->remote();
  }
  bootstrap_->allGather(signalArrays_.data(), sizeof(RemoteRegion));
  if (!writes) signalArrays_.assign(nRanks_, RemoteRegion{});
  signalArrays_[rank_] = RemoteRegion{};  // no proxy puts to itself
  int remote = 0, taking = 0;
  for (int r = 0; r < nRanks_; ++r) {
    if (topo_.sameNode(r, rank_)) continue;
    ++remote;
    taking += signalArrays_[r].size > 0;
  }
  INFO(kSubsysNet, "rank %d: credits and entry signals to %d of the %d ranks on other nodes as "
       "value writes (RMACC_NET_SIGNAL_WRITES; the others as completion data)", rank_, taking,
       remote);
}

// FI_HMEM says the provider handles device memory in principle; whether it can register this
// GPU's memory (built with CUDA support, the NIC and the GPU on a common root) is known only by
// trying. Until it succeeds, device data is staged (nicAccessible stays false for it).
void Comm::probeGpuDirect() {
  auto probe = backend_->allocate(1 << 16);
  const MemoryPlace at = backend_->placeOf(probe->ptr());
  if (!at.onDevice()) return;
  const int device = at.device;
  try {
    proxy_->registerMemory(probe->ptr(), probe->size());  // as the device's memory
  } catch (const Error& e) {
    INFO(kSubsysNet, "provider %s offers FI_HMEM but cannot register device %d's memory (%s): "
         "device data is staged through pinned memory", fabric_->providerName().c_str(), device,
         e.what());
    return;
  }
  backend_->setNetworkReachesDevice(true);
  INFO(kSubsysNet, "GPU-direct: provider %s registers device %d's memory (FI_HMEM_CUDA); the "
       "network reads and writes it in place", fabric_->providerName().c_str(), device);
}

LandingZone& Comm::landingZone() {
  std::lock_guard<std::mutex> lock(landingMu_);
  if (landing_) return *landing_;
  RMACC_ENFORCE(proxy_ != nullptr, "landing zone on a single-node communicator");
  const int sources = nRanks_ - topo_.nodeSize(topo_.nodeOf(rank_));
  constexpr uint32_t kSlots = 4;  // per source: enough to keep a chunk on the wire while
                                  // earlier ones are copied in
  const uint64_t slotBytes = landingSlotBytes(cfg_.landingBytes, sources, kSlots, 4ull << 20);
  std::vector<int> rows(nRanks_);
  for (int r = 0; r < nRanks_; ++r) rows[r] = topo_.remoteIndex(rank_, r);
  auto memory = backend_->allocateNicVisible((size_t)sources * kSlots * (kLandingHeaderBytes + slotBytes));
  auto mr = proxy_->registerMemory(memory->ptr(), memory->size());
  landing_ = std::make_unique<LandingZone>(*backend_, std::move(memory), std::move(mr),
                                           std::move(rows), kSlots, slotBytes);
  proxy_->attachLanding(landing_.get(), signalTargets_);
  INFO(kSubsysNet, "landing zone: %d sources x %u slots of %llu bytes", sources, kSlots,
       (unsigned long long)slotBytes);
  return *landing_;
}

void* Comm::createUserStream() {
  auto s = backend_->createUserStream();
  void* handle = s->handle();
  std::lock_guard<std::mutex> lock(streamsMu_);
  userStreams_[handle] = std::move(s);
  return handle;
}

void Comm::destroyUserStream(void* handle) {
  std::unique_ptr<Stream> s;
  {
    std::lock_guard<std::mutex> lock(streamsMu_);
    auto it = userStreams_.find(handle);
    RMACC_ARG_CHECK(it != userStreams_.end(), "stream %p was not created by rmaccStreamCreate on this communicator", handle);
    s = std::move(it->second);
    userStreams_.erase(it);
  }
  s->synchronize();
  rma_->forgetStream(*s);
}

Stream& Comm::streamOf(rmaccStream_t handle, bool captureOk) {
  Stream* s = backend_->userStream(handle);
  RMACC_ARG_CHECK(s != nullptr, "stream %p is not a stream of this communicator's %s backend", handle,
                  backend_->name());
  // Puts, signals, waits and barriers count their signals on the host when they are made, so a
  // captured one would replay its first run's values: refuse at once rather than build a graph
  // that lies. The collectives are recorded to run anew at every replay instead.
  if (!captureOk && s->capturing())
    RMACC_THROW(rmaccInvalidUsage, "stream %p is being captured into a CUDA graph: only rmaccAlltoAll, "
                "rmaccAlltoAllv and rmaccAlltoAllvDynamic can be captured; make this call outside "
                "the capture", handle);
  return *s;
}

int Comm::wantedProxyThreads() const {
  return cfg_.proxyThreads > 0 ? cfg_.proxyThreads : defaultProxyThreads(topo_.nNodes());
}


bool Comm::eagerProxyPoll() const {
  if (cfg_.proxyPoll != Config::ProxyPoll::kAuto) return cfg_.proxyPoll == Config::ProxyPoll::kEager;
  cpu_set_t set;
  int cores = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
  const int local = topo_.nodeSize(topo_.nodeOf(rank_));
  bool eager = cores >= 4 * local;
  INFO(kSubsysInit, "proxy polls %s: %d cores for %d ranks on this node", eager ? "eagerly" : "with back-off",
       cores, local);
  return eager;
}

bool Comm::synchronousStream(rmaccStream_t handle) const {
  return handle == nullptr && backend_->caps().synchronousNullStream;
}

void Comm::setLastError(const std::string& text) {
  std::lock_guard<std::mutex> lock(errorMu_);
  lastError_ = text;
}

std::string Comm::lastError() const {
  std::lock_guard<std::mutex> lock(errorMu_);
  return lastError_;
}

void Comm::setAsyncError(rmaccResult_t code, const std::string& text) {
  std::lock_guard<std::mutex> lock(errorMu_);
  if (asyncError_.load() != rmaccSuccess) return;  // the first error is the cause
  asyncErrorText_ = text;
  asyncError_.store(code);
  WARN("communicator failed: %s", text.c_str());
}

// Reads only: the proxy's error handler records a network failure (setAsyncError) right after
// the proxy notes it; in between, the proxy's own error is the answer.
rmaccResult_t Comm::asyncError(std::string* text) const {
  {
    std::lock_guard<std::mutex> lock(errorMu_);
    const rmaccResult_t e = (rmaccResult_t)asyncError_.load();
    if (e != rmaccSuccess || !proxy_) {
      if (text) *text = asyncErrorText_;
      return e;
    }
  }
  std::string proxyText;
  const rmaccResult_t pe = proxy_->error(&proxyText);
  if (text) *text = "network: " + proxyText;
  return pe;
}

void Comm::checkHealthy() const {
  std::string text;
  rmaccResult_t e = asyncError(&text);
  if (e != rmaccSuccess) throw Error(e, "communicator failed earlier: " + text);
}

// The processes of this node's ranks are watched through pidfds: a rank killed while its
// connections stay open (a forked child holds them) is still seen at once.
void Comm::watchLocalPeers(const std::vector<ProcessRecord>& procs) {
  const ProcessRecord me = procs[rank_];
  for (int r = 0; r < nRanks_; ++r) {
    if (r == rank_ || !topo_.sameNode(r, rank_)) continue;
    if (procs[r].bootId != me.bootId || procs[r].pidNamespace != me.pidNamespace) continue;
    int fd = openPidfd((int)procs[r].pid);
    if (fd >= 0) bootstrap_->watchProcess(r, fd);
  }
}

void Comm::poison(rmaccResult_t code, const std::string& text) {
  setAsyncError(code, text);
  abort();
}

std::string Comm::failCall(rmaccResult_t code, const std::string& text) {
  std::string msg = text;
  if (asyncError() == rmaccSuccess) {
    if (code == rmaccTimeout) msg += "; where the ranks are: " + describeRanks();
    poison(code, strprintf("rank %d: %s", rank_, msg.c_str()));
  }
  {
    // Another failure may have come first (a peer's, while we asked where the ranks are).
    std::lock_guard<std::mutex> lock(errorMu_);
    if (asyncErrorText_.find(msg) == std::string::npos && msg.find(asyncErrorText_) == std::string::npos)
      msg += " (the communicator failed: " + asyncErrorText_ + ")";
  }
  // Nothing queued may touch the caller's memory once the call returned.
  if (coll_) coll_->quiesce();
  if (proxy_) proxy_->flush();
  return msg;
}

uint64_t Comm::beginCall(const char* kind) {
  std::lock_guard<std::mutex> lock(errorMu_);
  callKind_ = kind;
  inCall_ = true;
  return ++callSeq_;
}

void Comm::endCall() {
  std::lock_guard<std::mutex> lock(errorMu_);
  inCall_ = false;
}

std::string Comm::callStatus() const {
  std::lock_guard<std::mutex> lock(errorMu_);
  if (callSeq_ == 0) return "no collective call yet";
  return strprintf("%s call #%llu (%s)", inCall_ ? "in" : "idle after",
                   (unsigned long long)callSeq_, callKind_);
}

std::string Comm::describeRanks() {
  std::vector<std::string> all = bootstrap_->statusOfPeers(1.0);
  std::string s;
  for (size_t r = 0; r < all.size(); ++r)
    s += strprintf("%srank %zu %s", r ? "; " : "", r, all[r].c_str());
  return s;
}

void Comm::abort() {
  std::string reason;
  {
    std::lock_guard<std::mutex> lock(errorMu_);
    reason = asyncErrorText_.empty() ? "aborted" : asyncErrorText_;
  }
  if (bootstrap_) bootstrap_->abort(reason);
  if (coll_) coll_->abort();
  if (proxy_) proxy_->abort();
  if (backend_) backend_->abort();
}

}  // namespace rmacc
