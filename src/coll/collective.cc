#include "coll/collective.h"

#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "coll/captured_calls.h"
#include "coll/in_graph_calls.h"
#include "exec/signal_space.h"
#include "exec/trace.h"
#include "plan/plan_build.h"
#include "plan/plan_internal.h"
#include "plan/rank_planner.h"

namespace rmacc {

namespace {

std::atomic<CountRecordHook> countRecordHook{nullptr};

constexpr size_t kPlanCacheSize = 16;
// The done and start flags sit this far apart (a cache line each).
constexpr size_t kFlagStride = 128;
// Peer mappings kept before the least recently used are unmapped (evictPeerMappings).
constexpr size_t kPeerMapCacheSize = 256;

}  // namespace

void setCountRecordHookForTest(CountRecordHook hook) { countRecordHook.store(hook); }

CollectiveEngine::CollectiveEngine(const EngineContext& ctx, RmaEngine& rma)
    : ctx_(ctx), planCache_(ctx_.topo, kPlanCacheSize) {
  const Topology& topo = ctx_.topo;
  const int n = ctx_.nRanks;
  checkPlanOptionsAgree();
  doneAlloc_ = ctx_.backend.allocateHostVisible(sizeof(uint64_t));
  doneFlag_ = static_cast<volatile uint64_t*>(doneAlloc_->ptr());
  *doneFlag_ = 0;
  doneDeviceAlloc_ = ctx_.backend.allocate(2 * kFlagStride);  // zeroed
  doneDevice_ = static_cast<volatile uint64_t*>(doneDeviceAlloc_->ptr());
  startDevice_ = doneDevice_ + kFlagStride / sizeof(uint64_t);
  peerRelay_.resize(n);
  // Relays exist only when data crosses nodes on a rail other than its destination's.
  if (topo.nNodes() > 1 && topo.maxNodeSize() > 1) {
    relayAlloc_ = ctx_.backend.allocateNicVisible(ctx_.cfg.relayBytes);
    relayMr_ = ctx_.proxy->registerMemory(relayAlloc_->ptr(), relayAlloc_->size());
    std::vector<RemoteRegion> regions(n);
    regions[ctx_.rank] = relayMr_->remote();
    ctx_.bootstrap.allGather(regions.data(), sizeof(RemoteRegion));
    for (int r = 0; r < n; ++r) peerRelay_[r].remote = regions[r];
    INFO(kSubsysColl, "relay buffer %zu bytes in %d slots", relayAlloc_->size(),
         ctx_.cfg.relaySlots);
  }
  Backend& be = ctx_.backend;
  localStaging_ = std::make_unique<StagingBuffer>([&be](size_t b) { return be.allocate(b); }, nullptr);
  remoteStaging_ = std::make_unique<StagingBuffer>(
      [&be](size_t b) { return be.allocateNicVisible(b); }, ctx_.proxy);
  executor_ = std::make_unique<Executor>(ctx, rma);
  dynamic_ = std::make_unique<DynamicCounts>(ctx_.backend, ctx_.bootstrap, ctx_.rank,
                                             ctx_.nRanks, ctx_.cfg.timeoutS);
  counts_ = std::make_unique<CountExchange>(ctx_.bootstrap, topo, ctx_.rank, planOptions(),
                                            ctx_.cfg.timeoutS);
  inGraph_ = std::make_unique<InGraphCalls>(ctx_);
  captured_ = std::make_unique<CapturedCalls>(ctx_.backend, n, this, &CollectiveEngine::onTrigger);
  thread_ = std::thread([this] { progressLoop(); });
}

CollectiveEngine::~CollectiveEngine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  executor_.reset();
}

// A caller that runs far ahead of the device fills the command queues of its streams, and CUDA
// then blocks it inside a stream call, while it holds mu_ (and with it the progress thread, whose
// work the device waits for): a deadlock, seen on an H200 after a few calls of a 3,000-call loop
// across 2 nodes. Waiting here, on the host and holding nothing, keeps the backlog bounded.
void CollectiveEngine::waitForRoom() {
  const uint64_t limit = (uint64_t)ctx_.cfg.maxCallsInFlight;
  uint64_t next;
  {
    std::lock_guard<std::mutex> lock(mu_);
    next = nextSeq_ + 1;
  }
  if (next <= doneSeq() + limit) return;
  const double deadline = monotonicSeconds() + ctx_.cfg.timeoutS;
  while (next > doneSeq() + limit) {
    if (ctx_.failures.asyncError() != rmaccSuccess) return;  // the call fails with the rest
    if (monotonicSeconds() > deadline)
      RMACC_THROW(rmaccTimeout, "call %llu: %llu earlier calls did not finish within %.1f s",
                  (unsigned long long)next, (unsigned long long)(next - 1 - doneSeq()),
                  ctx_.cfg.timeoutS);
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void CollectiveEngine::abort() {
  if (counts_) counts_->abort();
  captured_->releaseAll();
  inGraph_->releaseAll();
}

// Which calls are triggered by their stream: those being captured; and, while a graph holds a
// captured call of this communicator, every call on a stream. A call numbered when it is made
// would otherwise overtake the replays its stream has yet to reach: its number would come
// before theirs though its stream runs it after them, and each would wait for the other.
bool CollectiveEngine::triggeredBy(Stream& user) {
  // The host backend's NULL stream runs the call before it returns: never triggered.
  if (!user.handle() && ctx_.backend.caps().synchronousNullStream) return false;
  return user.capturing() || ctx_.cfg.streamTriggerAlways || captured_->inGraphs();
}

uint64_t CollectiveEngine::alltoallv(Stream* user, AlltoallvArgs args) {
  if (user && inGraph_->takes(*user, args)) {
    try {
      if (inGraph_->record(*user, args)) return 0;
    } catch (const Error&) {
      if (args.rejected.empty()) throw;
      return 0;  // the caller reports its own rejection; its peers' calls failed with it
    }
  }
  if (user && triggeredBy(*user)) {
    auto [site, run] = captured_->record(*user, std::move(args));
    // Outside a capture the caller is still here: as for any call (below), wait a while for
    // the run's work to be enqueued, here once the stream reaches it.
    if (run && ctx_.cfg.enqueueWaitMs > 0) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_until(lock, std::chrono::steady_clock::now() + std::chrono::milliseconds(ctx_.cfg.enqueueWaitMs),
                     [&] { return site->runsEnqueued >= run || stop_; });
    }
    return 0;
  }
  if (!args.rejected.empty()) user = nullptr;  // it moves nothing on the stream
  if (user) waitForRoom();
  Task task;
  task.args = std::move(args);
  std::unique_lock<std::mutex> lock(mu_);
  task.seq = ++nextSeq_;
  task.queuedAt = monotonicSeconds();
  if (task.args.rejected.empty()) {
    const uint64_t calls0 = streamCallsOfThisThread();
    // The call on the user's stream: from its start to its completion, one batch of memory
    // ops. The call starts once the previous one is complete (the executor relies on it), and
    // later work on the user's stream waits for this one.
    TraceWriter::span(ctx_.trace, *user, task.seq, -1, "user", "call", -1, 0, [&] {
      if (task.args.dynamic) dynamic_->enqueueRead(*user, task.seq, *task.args.dynamic, doneDevice_);
      const MemOpDesc ops[3] = {{true, doneDevice_, task.seq - 1},
                                {false, startDevice_, task.seq},
                                {true, doneDevice_, task.seq}};
      user->memOps(ops, 3);
    });
    task.userCalls = streamCallsOfThisThread() - calls0;
  }
  const uint64_t seq = task.seq;
  // With counts on the device the work is enqueued once the stream reaches the call: the wait
  // below then also waits (as long) for the device to get there.
  const bool waitForEnqueue = user && ctx_.cfg.enqueueWaitMs > 0;
  queue_.push_back(std::move(task));
  cv_.notify_all();  // callers may wait on cv_ too
  // The user's stream now waits for work the progress thread has yet to enqueue. Until it has,
  // a CUDA call of this thread that waits for the device (a synchronous copy to pageable
  // memory, cudaFree, a kernel's first lazy load) would keep that work out for good: a
  // deadlock (docs/decisions.md#enqueue-wait). Peers (and device counts) that arrive within
  // RMACC_ENQUEUE_WAIT_MS close the window before the call returns; later ones leave it open
  // (docs/limits.md).
  if (waitForEnqueue) {
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(ctx_.cfg.enqueueWaitMs);
    cv_.wait_until(lock, until, [&] { return enqueuedSeq_ >= seq || stop_; });
  }
  return seq;
}

void CollectiveEngine::onTrigger(void* engine, CapturedCall& site, AlltoallvArgs args) {
  static_cast<CollectiveEngine*>(engine)->trigger(site, std::move(args));
}

// The stream has reached a captured call: everything before it on the stream is done. The call
// gets its number now, in stream order (DESIGN.md §4.1: the ranks' calls must come in the same
// order). A communicator that failed or is closing releases the stream at once; the failure is
// what rmaccCommGetAsyncError reports.
void CollectiveEngine::trigger(CapturedCall& site, AlltoallvArgs args) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_ || ctx_.failures.asyncError() != rmaccSuccess) {
    captured_->release(site);
    ++site.runsEnqueued;
    cv_.notify_all();
    return;
  }
  Task task;
  task.seq = ++nextSeq_;
  task.args = std::move(args);
  task.queuedAt = monotonicSeconds();
  task.site = &site;
  queue_.push_back(std::move(task));
  cv_.notify_all();
}

CallDone CollectiveEngine::doneOf(const Task& task) const {
  return CallDone{{doneFlag_, doneDevice_}, task.seq, task.site ? task.site->done : nullptr};
}

rmaccResult_t CollectiveEngine::takeCallError(uint64_t seq, std::string* text) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = callErrors_.find(seq);
  if (it == callErrors_.end()) return rmaccSuccess;
  rmaccResult_t code = it->second.first;
  if (text) *text = it->second.second;
  callErrors_.erase(it);
  return code;
}

rmaccResult_t CollectiveEngine::takeAnyCallError(std::string* text, uint64_t* seq) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = callErrors_.begin();
  const uint64_t done = doneSeq();
  while (it != callErrors_.end() && it->first > done) ++it;
  if (it == callErrors_.end()) return rmaccSuccess;
  rmaccResult_t code = it->second.first;
  if (text) *text = it->second.second;
  if (seq) *seq = it->first;
  callErrors_.erase(it);
  return code;
}

void CollectiveEngine::fail(uint64_t seq, rmaccResult_t code, const std::string& text) {
  std::lock_guard<std::mutex> lock(mu_);
  callErrors_[seq] = {code, text};
}

void CollectiveEngine::progressLoop() {
  // Its short sleeps (device counts, quiet waits) should last what they ask for, not Linux's
  // default 50 us timer slack (the proxy thread does the same).
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  ctx_.backend.enterInternalThread();
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ with nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    try {
      runTask(task);
    } catch (const Error& e) {
      // The exchange or the setup failed: the communicator cannot go on (a peer is gone or
      // timed out). Release everything waiting on it with the error.
      std::string text = strprintf("rank %d: AlltoAllv (collective call #%llu): %s", ctx_.rank,
                                   (unsigned long long)task.args.callSeq, e.what());
      // Ranks out of step wait for each other until the timeout: say where each one is.
      if (e.code() == rmaccTimeout && ctx_.failures.asyncError() == rmaccSuccess)
        text += "; where the ranks are: " + ctx_.failures.describeRanks();
      fail(task.seq, e.code(), text);
      ctx_.failures.poison(e.code(), text);
    } catch (const std::exception& e) {
      fail(task.seq, rmaccInternalError, e.what());
      ctx_.failures.poison(rmaccInternalError, e.what());
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_ = false;
      enqueuedSeq_ = task.seq;
      if (task.site) ++task.site->runsEnqueued;
    }
    cv_.notify_all();
  }
}

void CollectiveEngine::quiesce() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !busy_ && (queue_.empty() || stop_); });
  }
  executor_->drain();
  inGraph_->drain();
}

// Every rank plans only its own part, from the same inputs: the knobs that shape plans must be
// equal on every rank, or the parts would not fit together (a wait for a signal nobody sends,
// or a relay slot reused early). One all-gather at init; every rank sees the same table, so
// every rank fails alike.
void CollectiveEngine::checkPlanOptionsAgree() {
  struct Shape {
    uint64_t relayBytes, maxPutBytes;
    int32_t slots, creditWindow, entrySignals, pad;
  };
  const Config& cfg = ctx_.cfg;
  std::vector<Shape> all(ctx_.nRanks);
  all[ctx_.rank] = Shape{cfg.relayBytes, cfg.maxPutBytes, cfg.relaySlots, cfg.creditWindow,
                         cfg.entrySync == EntrySync::kSignals, 0};
  ctx_.bootstrap.allGather(all.data(), sizeof(Shape));
  auto describe = [](const Shape& s) {
    return strprintf("RMACC_RELAY_BYTES=%llu RMACC_RELAY_SLOTS=%d RMACC_MAX_PUT_BYTES=%llu "
                     "RMACC_ENTRY_SYNC=%s RMACC_CREDIT_WINDOW=%d",
                     (unsigned long long)s.relayBytes, s.slots, (unsigned long long)s.maxPutBytes,
                     s.entrySignals ? "signals" : "barrier", s.creditWindow);
  };
  for (int r = 1; r < ctx_.nRanks; ++r)
    if (memcmp(&all[r], &all[0], sizeof(Shape)) != 0)
      RMACC_THROW(rmaccInvalidUsage, "the ranks plan AlltoAllV with different settings, which must be "
                  "equal on every rank: rank 0 has %s; rank %d has %s", describe(all[0]).c_str(), r,
                  describe(all[r]).c_str());
}

plan::Options CollectiveEngine::planOptions() const {
  return planOptionsOf(ctx_.cfg, ctx_.topo.nNodes());
}

plan::Options planOptionsOf(const Config& cfg, int nNodes) {
  plan::Options opt;
  opt.slots = cfg.relaySlots;
  opt.slotBytes = cfg.relayBytes / cfg.relaySlots;
  opt.maxPutBytes = cfg.maxPutBytes;
  opt.entrySignals = cfg.entrySync == EntrySync::kSignals;
  opt.creditWindow = cfg.creditWindow;
  opt.fitSlotsFrom = plan::libraryFitSlotsFrom(opt.slots);
  opt.minChunksPerRound = plan::libraryMinChunks(nNodes);
  opt.lastRoundMinChunks = plan::libraryLastRoundMinChunks(nNodes);
  opt.lastRoundMinChunkBytes = plan::libraryLastRoundMinChunkBytes();
  opt.releaseRelayUpTo = plan::libraryReleaseRelayUpTo();
  opt.joinForwardsBelow = plan::libraryJoinForwardsBelow();
  opt.fitWindowBytes = plan::libraryFitWindowBytes();
  opt.deepFitBelow = plan::libraryDeepFitBelow();
  return opt;
}

// This rank's part of the plan (plan/rank_planner.h), from the cache (coll/plan_cache.h: a
// miss plans into the storage of the least recently used entry).
std::shared_ptr<const plan::RankPlan> CollectiveEngine::planFor(const plan::RankInputs& in) {
  bool planned = false;
  std::shared_ptr<const plan::RankPlan> p = planCache_.get(planOptions(), in, &planned);
  if (planned && ctx_.cfg.dumpPlan) {
    std::string text;
    for (size_t i = 0; i < p->ops.size(); ++i) text += plan::formatOp(p->ops[i], ctx_.rank, (int)i) + "\n";
    fprintf(stderr, "%s", text.c_str());
  }
  return p;
}

// Where this rank's receive blocks land this call. A block from origin o is written by o itself
// when o is a rail peer on another node (the network writes it), else by a rank of this node
// (o, or the relay that forwards o's data): each kind goes to memory that writer can reach.
struct CollectiveEngine::Targets {
  MetaHeader header{};
  std::vector<uint64_t> offset;  // by origin, in the target its writer uses
  std::vector<CopyDesc> finish;  // staged blocks to copy into the caller's buffer
};

void CollectiveEngine::chooseTargets(const Task& task, Targets& t) {
  const int n = ctx_.nRanks, me = ctx_.rank;
  const Topology& topo = ctx_.topo;
  const AlltoallvArgs& a = task.args;
  t.offset.assign(n, 0);
  // Topology::railPeer: o puts its block to this rank itself when this rank is its relay here.
  auto remoteWriter = [&](int o) {
    return !topo.sameNode(o, me) && topo.railPeer(o, topo.nodeOf(me)) == me;
  };
  uint64_t localBytes = 0, remoteBytes = 0, span = 0;
  for (int o = 0; o < n; ++o) {
    if (o == me || a.recvBytes[o] == 0) continue;
    (remoteWriter(o) ? remoteBytes : localBytes) += a.recvBytes[o];
    span = std::max(span, a.recvOffset[o] + a.recvBytes[o]);
  }
  size_t allocOffset = 0;
  const Allocation* alloc = span ? ctx_.memory.find(a.recvbuff, span, &allocOffset) : nullptr;
  // Memory the caller allocated itself (cudaMalloc, PyTorch) that peers can map: their copies
  // land in it directly, as in rmaccMemAlloc memory, instead of in staging.
  std::optional<std::pair<ExportHandle, size_t>> user;
  if (!alloc && localBytes > 0) user = ctx_.backend.exportUserMemory(a.recvbuff, span);
  bool localDirect = alloc != nullptr || user.has_value();
  bool remoteDirect = alloc && ctx_.backend.nicAccessible(a.recvbuff);
  char* localStage = nullptr;
  char* remoteStage = nullptr;
  if (localBytes > 0) {
    t.header.exportable = 1;
    if (localDirect) {
      t.header.handle = HandleRecord::from(alloc ? alloc->exportHandle() : user->first);
      t.header.targetBase = alloc ? allocOffset : user->second;
    } else {
      localStage = localStaging_->reserve(localBytes);
      t.header.handle = HandleRecord::from(localStaging_->allocation().exportHandle());
    }
  }
  if (remoteBytes > 0) {
    if (remoteDirect) {
      uint64_t regOffset = 0;
      t.header.remote = ctx_.memory.registerRemote(a.recvbuff, span, &regOffset);
      t.header.remote.base += regOffset;  // offsets below are relative to recvbuff
      t.header.remote.size -= regOffset;
    } else {
      remoteStage = remoteStaging_->reserve(remoteBytes);
      t.header.remote = remoteStaging_->remote();
    }
  }
  uint64_t packedLocal = 0, packedRemote = 0;
  for (int o = 0; o < n; ++o) {
    if (o == me || a.recvBytes[o] == 0) continue;
    bool remote = remoteWriter(o);
    char* stage = remote ? remoteStage : localStage;
    if (!stage) {
      t.offset[o] = a.recvOffset[o];
      continue;
    }
    uint64_t& packed = remote ? packedRemote : packedLocal;
    t.offset[o] = packed;
    t.finish.push_back({static_cast<char*>(a.recvbuff) + a.recvOffset[o], stage + packed,
                        a.recvBytes[o]});
    packed += a.recvBytes[o];
  }
}

// A mate's receive offsets are checked against the memory it exported before this rank copies
// anything there (DESIGN.md §4): a broken peer must not make this rank write out of bounds.
// This rank writes its own block and the blocks it forwards for its writers
// (CountExchange::writers). (Offsets into network targets are checked by the proxy.)
void CollectiveEngine::checkPeerTarget(int j, const CountExchange::Result& x, size_t mapped) const {
  const Topology& topo = ctx_.topo;
  const int me = ctx_.rank, node = topo.nodeOf(me);
  const int r = topo.rankAt(node, j), L = topo.nodeSize(node), W = counts_->writerSlots();
  const MetaHeader& h = x.localHeader[j];
  const std::vector<CountExchange::Writer>& writers = counts_->writers();
  for (size_t t = 0; t <= writers.size(); ++t) {
    const CountExchange::Writer* w = t ? &writers[t - 1] : nullptr;
    const uint64_t len = w ? x.inputs.relayIn[((size_t)w->k * W + w->m) * L + j] : x.inputs.send[r];
    const uint64_t off = x.localOffset[j][t];
    if (len == 0) continue;
    if (h.targetBase > mapped || off > mapped - h.targetBase || len > mapped - h.targetBase - off)
      RMACC_THROW(rmaccRemoteError,
                  "rank %d asked for %llu bytes from rank %d at offset %llu of a %zu-byte buffer",
                  r, (unsigned long long)len, w ? w->rank : me,
                  (unsigned long long)(h.targetBase + off), mapped);
  }
}

// Where this call's ops read and write: this rank's buffers, its mates' targets (mapped and
// checked) with the offsets of the blocks this rank writes there, its relays' targets.
void CollectiveEngine::setBuffers(const Task& task, const CountExchange::Result& x,
                                  const plan::RankPlan& plan, CallBuffers& b) {
  const int n = ctx_.nRanks, me = ctx_.rank;
  const Topology& topo = ctx_.topo;
  const int node = topo.nodeOf(me);
  const AlltoallvArgs& a = task.args;
  const std::vector<CountExchange::Writer>& writers = counts_->writers();
  b.send = static_cast<const char*>(a.sendbuff);
  b.recv = static_cast<char*>(a.recvbuff);
  b.sendOffset = a.sendOffset;
  b.recvOffset = a.recvOffset;
  b.relay = relayAlloc_ ? static_cast<char*>(relayAlloc_->ptr()) : nullptr;
  b.peerRelay = peerRelay_;
  b.peerRecv.assign(n, PeerTarget{});
  // Rows only for the ranks this one writes into, kept from call to call: each call writes the
  // entries its ops read (its own block at every peer, the blocks it forwards for its writers),
  // so nothing is cleared (at 1,024 ranks a fresh table was ~1 MB allocated and zeroed a call).
  b.peerRecvOffset.resize(n);
  auto row = [&](int r) -> std::vector<uint64_t>& {
    if (b.peerRecvOffset[r].size() != (size_t)n) b.peerRecvOffset[r].assign(n, 0);
    return b.peerRecvOffset[r];
  };
  // Map a node mate's receive buffer only when this call writes bytes into it (a signal needs
  // no mapping): a mate that gets no bytes from this rank may have finished its call and freed
  // the buffer before this rank gets here, and the import would then fail.
  std::vector<char>& writesInto = writesInto_;  // kept: no allocation per call
  writesInto.assign(n, 0);
  for (const plan::Op& op : plan.ops)
    if (op.kind == plan::OpKind::kPut && op.bytes > 0 && op.dst.region == plan::Region::kRecv)
      writesInto[op.peer] = 1;
  for (int j = 0; j < topo.nodeSize(node); ++j) {
    const int r = topo.rankAt(node, j);
    if (r == me) continue;
    std::vector<uint64_t>& at = row(r);
    at[me] = x.localOffset[j][0];
    for (size_t t = 0; t < writers.size(); ++t) at[writers[t].rank] = x.localOffset[j][t + 1];
    const MetaHeader& hr = x.localHeader[j];
    if (!hr.exportable || !writesInto[r]) continue;
    auto m = peerMapping(hr.handle.handle(), task.seq);
    checkPeerTarget(j, x, m->size());
    b.peerRecv[r].local = static_cast<char*>(m->ptr()) + hr.targetBase;
  }
  for (int nd = 0; nd < topo.nNodes(); ++nd) {
    if (nd == node) continue;
    const int r = topo.railPeer(me, nd);
    row(r)[me] = x.railOffset[nd];
    b.peerRecv[r].remote = x.railRemote[nd];
  }
}

void CollectiveEngine::runTask(Task& task) {
  const int n = ctx_.nRanks;
  AlltoallvArgs& a = task.args;
  double t0 = monotonicSeconds();
  bool bad = !a.rejected.empty();
  // Counts on the device: known once the stream reached the call. Blocks that do not fit fail
  // the call on every rank (rmaccInvalidUsage, reported when the stream is synchronised), but
  // recvcounts and rdispls are still written.
  std::vector<CopyDesc> writeBack;
  bool dynamicRejected = false;
  if (!bad && a.dynamic) {
    a.rejected = dynamic_->resolve(task.seq, *a.dynamic, task.site ? task.site->counts : nullptr,
                                   a, writeBack,
                                   [&] { return ctx_.failures.asyncError() != rmaccSuccess; });
    bad = dynamicRejected = !a.rejected.empty();
  }
  Targets targets;
  if (!bad) chooseTargets(task, targets);
  else targets.offset.assign(n, 0);
  targets.finish.insert(targets.finish.end(), writeBack.begin(), writeBack.end());
  MetaHeader& h = targets.header;
  h.seq = task.seq;
  h.callSeq = a.callSeq;
  h.rejected = bad;
  const std::vector<CopyDesc>& finish = targets.finish;

  // --- The count exchange (count_exchange.h): O(n) bytes per rank; every rank gets the same
  // verdict, so on a mismatch nothing moves anywhere.
  const std::vector<uint64_t> zeros(bad ? n : 0, 0);
  std::vector<uint64_t> offsets = targets.offset;
  if (CountRecordHook hook = countRecordHook.load()) {
    // Tests corrupt this rank's record: rows of sends, receives and receive offsets.
    std::vector<uint64_t> rows(3 * (size_t)n, 0);
    std::copy(offsets.begin(), offsets.end(), rows.begin() + 2 * n);
    hook(task.seq, rows.data(), n);
    std::copy(rows.begin() + 2 * n, rows.end(), offsets.begin());
  }
  const CountExchange::Mine mine{h, bad ? zeros.data() : a.sendBytes.data(),
                                 bad ? zeros.data() : a.recvBytes.data(), offsets.data(),
                                 a.elementBytes};
  CountExchange::Result x;
  counts_->exchange(task.seq, mine, x);
  const double exchanged = monotonicSeconds();
  if (x.code != rmaccSuccess) {
    // Nothing moves; the user's stream is released in call order. Every rank's caller gets
    // the error as its return code (or from the stream's synchronisation): no log line too.
    if (dynamicRejected) fail(task.seq, rmaccInvalidUsage, a.rejected);
    else if (!bad) fail(task.seq, x.code, x.error);
    executor_->complete(doneOf(task), writeBack);
    return;
  }
  counts_->commit(x);

  // --- Plan this rank's part and run it.
  const uint64_t calls0 = streamCallsOfThisThread();
  std::shared_ptr<const plan::RankPlan> p = planFor(x.inputs);
  CallBuffers& b = callBuffers_;
  setBuffers(task, x, *p, b);
  // A call starts once its stream reached it and the previous call is complete. The user's
  // stream says both with the start flag; a captured call's stream reached it before it was
  // queued, so only the previous call's done flag is left to wait for.
  const WaitDesc start = task.site ? WaitDesc{doneDevice_, task.seq - 1} : WaitDesc{startDevice_, task.seq};
  executor_->run(*p, b, start, ctx_.cfg.entrySync == EntrySync::kBarrier, finish, doneOf(task),
                 task.seq);
  const uint64_t engineCalls = streamCallsOfThisThread() - calls0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    lastCost_ = CallCost{task.seq, task.userCalls, engineCalls, p->ops.size()};
  }
  evictPeerMappings(task.seq);
  // Where a call's host time goes (bench/host.sh and bench/gpu.sh average these).
  INFO(kSubsysColl, "call %llu: queued %.1f us, count exchange %.1f us (%llu B: sent %llu, received %llu, shared %llu), plan+enqueue %.1f us, %zu ops, backend calls %llu (user stream %llu)",
       (unsigned long long)task.seq, (t0 - task.queuedAt) * 1e6, (exchanged - t0) * 1e6,
       (unsigned long long)x.bytes.total(), (unsigned long long)x.bytes.sent,
       (unsigned long long)x.bytes.received, (unsigned long long)x.bytes.sharedRead,
       (monotonicSeconds() - exchanged) * 1e6, p->ops.size(),
       (unsigned long long)(task.userCalls + engineCalls), (unsigned long long)task.userCalls);
}

std::shared_ptr<Mapping> CollectiveEngine::peerMapping(const ExportHandle& handle, uint64_t seq) {
  std::string key(handle.begin(), handle.end());
  auto it = peerMaps_.find(key);
  if (it != peerMaps_.end()) {
    it->second.lastUse = seq;
    return it->second.mapping;
  }
  auto m = ctx_.memory.importPeer(handle);
  peerMaps_[key] = PeerMap{m, seq};
  return m;
}

}  // namespace rmacc

namespace rmacc {

// Unmapping a peer's memory (cuMemUnmap, cudaIpcCloseMemHandle) waits for device work queued
// before it, and while it waits the driver holds back this process's other calls: with a call
// in flight whose user stream waits for work this thread has yet to enqueue, every rank stalled
// for good (seen on an H200 at the first eviction, also with the unmapping moved to a thread of
// its own). So the cache is trimmed only when this rank is quiet: the call just enqueued is
// done and no other call is queued; the user's thread is held off (mu_) meanwhile. A rank that
// is never quiet keeps its mappings a while longer.
void CollectiveEngine::evictPeerMappings(uint64_t seq) {
  if (peerMaps_.size() < kPeerMapCacheSize) return;
  std::unique_lock<std::mutex> lock(mu_);
  if (!queue_.empty() || nextSeq_ != seq) return;
  const double deadline = monotonicSeconds() + ctx_.cfg.timeoutS;
  while (doneSeq() < seq) {
    if (ctx_.failures.asyncError() != rmaccSuccess || monotonicSeconds() > deadline) return;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  // The least recently used half goes.
  std::vector<std::pair<uint64_t, std::string>> byUse;
  for (const auto& [key, m] : peerMaps_) byUse.emplace_back(m.lastUse, key);
  std::sort(byUse.begin(), byUse.end());
  for (size_t i = 0; i < byUse.size() / 2; ++i) peerMaps_.erase(byUse[i].second);
  INFO(kSubsysColl, "after call %llu: unmapped %zu peer buffers of %zu", (unsigned long long)seq,
       byUse.size() / 2, byUse.size());
}

}  // namespace rmacc
