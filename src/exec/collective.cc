#include "exec/collective.h"

#include <cstring>

#include "core/comm.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "exec/signal_space.h"
#include "exec/trace.h"
#include "plan/plan_internal.h"
#include "plan/rank_planner.h"

namespace rmacc {

// What every rank contributes to a call's count exchange. Followed by three arrays of nRanks
// u64: send bytes by destination, receive bytes by origin, and the offset in this rank's
// receive target where the block from each origin must land.
struct MetaHeader {
  uint64_t seq;
  uint32_t rejected;     // this rank's arguments were invalid: every rank skips the call
  uint32_t exportable;   // `handle` maps the target of blocks written by this node's ranks
  uint64_t targetBase;   // offset of that target in the exported allocation
  RemoteRegion remote;   // the target of blocks written by rail peers of other nodes
  HandleRecord handle;
};

namespace {

// One rank's part of a call's count exchange: its header, then its send counts, receive
// counts and receive-target offsets, n of each.
size_t recordBytes(int n) { return sizeof(MetaHeader) + 3 * (size_t)n * sizeof(uint64_t); }

// Control-plane tag of the count exchange's rail messages (one stream of them per peer pair;
// messages of one (peer, tag) arrive in order, which orders the calls).
constexpr uint32_t kCountsTag = 0x434e5453;  // "CNTS"

constexpr size_t kPlanCacheSize = 16;
constexpr size_t kPeerMapCacheSize = 64;

}  // namespace

CollectiveEngine::CollectiveEngine(Comm& comm) : comm_(comm) {
  const Topology& topo = comm.topo();
  const int n = comm.nRanks();
  doneAlloc_ = comm.backend().allocateHostVisible(sizeof(uint64_t));
  doneFlag_ = static_cast<volatile uint64_t*>(doneAlloc_->ptr());
  *doneFlag_ = 0;
  peerRelay_.resize(n);
  carry_.relaySteps.assign(n, 0);
  // Relays exist only when data crosses nodes on a rail other than its destination's.
  if (topo.nNodes() > 1 && topo.localSize() > 1) {
    relayAlloc_ = comm.backend().allocateNicVisible(comm.cfg().relayBytes);
    relayMr_ = comm.proxy()->registerMemory(relayAlloc_->ptr(), relayAlloc_->size());
    std::vector<RemoteRegion> regions(n);
    regions[comm.rank()] = relayMr_->remote();
    comm.bootstrap().allGather(regions.data(), sizeof(RemoteRegion));
    for (int r = 0; r < n; ++r) peerRelay_[r].remote = regions[r];
    INFO(kSubsysColl, "relay buffer %zu bytes in %d slots", relayAlloc_->size(),
         comm.cfg().relaySlots);
  }
  Backend& be = comm.backend();
  localStaging_ = std::make_unique<StagingBuffer>([&be](size_t b) { return be.allocate(b); }, nullptr);
  remoteStaging_ = std::make_unique<StagingBuffer>(
      [&be](size_t b) { return be.allocateNicVisible(b); }, comm.proxy());
  executor_ = std::make_unique<Executor>(comm);
  if (topo.localSize() > 1)
    nodeGather_ = std::make_unique<NodeGather>(comm.bootstrap(), topo, comm.rank(), recordBytes(n),
                                               comm.cfg().timeoutS);
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

uint64_t CollectiveEngine::alltoallv(Stream* user, AlltoallvArgs args) {
  Task task;
  task.args = std::move(args);
  std::lock_guard<std::mutex> lock(mu_);
  task.seq = ++nextSeq_;
  task.queuedAt = monotonicSeconds();
  if (task.args.rejected.empty()) {
    task.start = comm_.backend().createEvent();
    // The call on the user's stream: from its start to its completion.
    TraceWriter::span(comm_.trace(), *user, task.seq, -1, "user", "call", -1, 0, [&] {
      user->record(*task.start);
      WaitDesc w{doneFlag_, task.seq};
      user->waitValues(&w, 1);
    });
  }
  uint64_t seq = task.seq;
  queue_.push_back(std::move(task));
  cv_.notify_one();
  return seq;
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

rmaccResult_t CollectiveEngine::takeAnyCallError(std::string* text) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = callErrors_.begin();
  while (it != callErrors_.end() && it->first > *doneFlag_) ++it;
  if (it == callErrors_.end()) return rmaccSuccess;
  rmaccResult_t code = it->second.first;
  if (text) *text = it->second.second;
  callErrors_.erase(it);
  return code;
}

void CollectiveEngine::fail(uint64_t seq, rmaccResult_t code, const std::string& text) {
  std::lock_guard<std::mutex> lock(mu_);
  callErrors_[seq] = {code, text};
}

void CollectiveEngine::progressLoop() {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ with nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      runTask(task);
    } catch (const Error& e) {
      // The exchange or the setup failed: the communicator cannot go on (a peer is gone or
      // timed out). Release everything waiting on it with the error.
      fail(task.seq, e.code(), e.what());
      comm_.setAsyncError(e.code(), e.what());
      comm_.abort();
    } catch (const std::exception& e) {
      fail(task.seq, rmaccInternalError, e.what());
      comm_.setAsyncError(rmaccInternalError, e.what());
      comm_.abort();
    }
  }
}

// This rank's part of the plan (plan/rank_planner.h), cached by what it depends on: the
// inputs, with each relay step reduced to its slot and whether earlier steps exist.
std::shared_ptr<const plan::RankPlan> CollectiveEngine::planFor(const std::vector<uint64_t>& bytes) {
  const Config& cfg = comm_.cfg();
  plan::Options opt;
  opt.slots = cfg.relaySlots;
  opt.slotBytes = cfg.relayBytes / cfg.relaySlots;
  opt.maxPutBytes = cfg.maxPutBytes;
  opt.entrySignals = cfg.entrySync == EntrySync::kSignals;
  const plan::MatrixInputs inputs(comm_.topo(), bytes, opt, carry_);
  const plan::RankInputs in = inputs.of(comm_.rank());
  carry_ = inputs.after();
  std::string key;
  auto append = [&key](const auto& v) {
    key.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(v[0]));
  };
  std::vector<uint64_t> steps;
  for (uint64_t t : in.writerStep) steps.insert(steps.end(), {t % opt.slots, std::min<uint64_t>(t, opt.slots)});
  steps.insert(steps.end(), {in.relayStepsBefore % opt.slots, std::min<uint64_t>(in.relayStepsBefore, opt.slots)});
  for (const std::vector<uint64_t>* v : {&in.send, &in.recv, &in.relayIn, &in.roundChunks, &in.forwardSignals})
    append(*v);
  append(steps);
  append(in.forwardLastBatch);
  for (auto it = planCache_.begin(); it != planCache_.end(); ++it) {
    if (it->first != key) continue;
    planCache_.splice(planCache_.begin(), planCache_, it);
    return it->second;
  }
  auto p = std::make_shared<const plan::RankPlan>(plan::makeRankPlan(comm_.topo(), opt, in).plan);
  if (cfg.dumpPlan) {
    std::string text;
    for (size_t i = 0; i < p->ops.size(); ++i) text += plan::formatOp(p->ops[i], comm_.rank(), (int)i) + "\n";
    fprintf(stderr, "%s", text.c_str());
  }
  planCache_.emplace_front(key, p);
  if (planCache_.size() > kPlanCacheSize) planCache_.pop_back();
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
  const int n = comm_.nRanks(), me = comm_.rank();
  const Topology& topo = comm_.topo();
  const AlltoallvArgs& a = task.args;
  t.offset.assign(n, 0);
  auto remoteWriter = [&](int o) {
    return !topo.sameNode(o, me) && topo.localRankOf(o) == topo.localRankOf(me);
  };
  uint64_t localBytes = 0, remoteBytes = 0, span = 0;
  for (int o = 0; o < n; ++o) {
    if (o == me || a.recvBytes[o] == 0) continue;
    (remoteWriter(o) ? remoteBytes : localBytes) += a.recvBytes[o];
    span = std::max(span, a.recvOffset[o] + a.recvBytes[o]);
  }
  size_t allocOffset = 0;
  const Allocation* alloc = span ? comm_.windows().find(a.recvbuff, span, &allocOffset) : nullptr;
  bool localDirect = alloc != nullptr;
  bool remoteDirect = alloc && comm_.backend().nicAccessible(a.recvbuff);
  char* localStage = nullptr;
  char* remoteStage = nullptr;
  if (localBytes > 0) {
    t.header.exportable = 1;
    if (localDirect) {
      t.header.handle = HandleRecord::from(alloc->exportHandle());
      t.header.targetBase = allocOffset;
    } else {
      localStage = localStaging_->reserve(localBytes);
      t.header.handle = HandleRecord::from(localStaging_->allocation().exportHandle());
    }
  }
  if (remoteBytes > 0) {
    if (remoteDirect) {
      uint64_t regOffset = 0;
      t.header.remote = comm_.windows().registerRemote(a.recvbuff, span, &regOffset);
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

// A peer's receive offsets are checked against the memory it exported before this rank copies
// anything there (DESIGN.md §4): a broken peer must not make this rank write out of bounds.
// (Offsets into network targets are checked by the proxy against the registered region.)
void CollectiveEngine::checkPeerTarget(int r, const MetaHeader& h, const uint64_t* offsets,
                                       const std::vector<uint64_t>& bytes, size_t mapped) const {
  const Topology& topo = comm_.topo();
  const int n = comm_.nRanks();
  for (int o = 0; o < n; ++o) {
    uint64_t len = bytes[(size_t)o * n + r];
    bool networkWritten = !topo.sameNode(o, r) && topo.localRankOf(o) == topo.localRankOf(r);
    if (o == r || len == 0 || networkWritten) continue;
    if (h.targetBase > mapped || offsets[o] > mapped - h.targetBase ||
        len > mapped - h.targetBase - offsets[o])
      RMACC_THROW(rmaccRemoteError,
                  "rank %d asked for %llu bytes from rank %d at offset %llu of a %zu-byte buffer",
                  r, (unsigned long long)len, o, (unsigned long long)(h.targetBase + offsets[o]),
                  mapped);
  }
}

// The count exchange (DESIGN.md §2 "Metadata"): the node's ranks through shared memory, then
// each rank trades its whole node's records with its rail peers on the control plane, so a
// rank sends nNodes - 1 messages a call instead of nRanks - 1. On return `all` holds every
// rank's record (this rank's was already in place).
void CollectiveEngine::exchangeCounts(uint64_t seq, std::vector<char>& all, size_t recSize) {
  const Topology& topo = comm_.topo();
  const int me = comm_.rank(), node = topo.nodeOf(me), local = topo.localRankOf(me);
  const int nLocal = topo.localSize();
  if (nodeGather_) nodeGather_->exchange(seq, all.data() + recSize * me, all.data());
  if (topo.nNodes() == 1) return;
  std::vector<char> pack(recSize * nLocal);
  for (int l = 0; l < nLocal; ++l)
    memcpy(pack.data() + recSize * l, all.data() + recSize * topo.rankAt(node, l), recSize);
  Bootstrap& boot = comm_.bootstrap();
  for (int b = 0; b < topo.nNodes(); ++b)
    if (b != node) boot.send(topo.rankAt(b, local), kCountsTag, pack.data(), pack.size());
  for (int b = 0; b < topo.nNodes(); ++b) {
    if (b == node) continue;
    const int peer = topo.rankAt(b, local);
    std::vector<char> theirs = boot.recv(peer, kCountsTag);
    RMACC_ENFORCE(theirs.size() == pack.size(), "count exchange of call %llu: rank %d sent %zu bytes, expected %zu",
                  (unsigned long long)seq, peer, theirs.size(), pack.size());
    for (int l = 0; l < nLocal; ++l)
      memcpy(all.data() + recSize * topo.rankAt(b, l), theirs.data() + recSize * l, recSize);
  }
}

void CollectiveEngine::runTask(Task& task) {
  const int n = comm_.nRanks(), me = comm_.rank();
  const Topology& topo = comm_.topo();
  AlltoallvArgs& a = task.args;
  double t0 = monotonicSeconds();
  bool bad = !a.rejected.empty();
  Targets targets;
  if (!bad) chooseTargets(task, targets);
  else targets.offset.assign(n, 0);
  MetaHeader& h = targets.header;
  h.seq = task.seq;
  h.rejected = bad;
  const std::vector<uint64_t>& targetOffset = targets.offset;
  const std::vector<CopyDesc>& finish = targets.finish;

  // --- The count exchange: every rank learns every rank's counts and receive target.
  const size_t recSize = recordBytes(n);
  std::vector<char> all(recSize * n);
  char* mine = all.data() + recSize * me;
  memcpy(mine, &h, sizeof(h));
  uint64_t* rows = reinterpret_cast<uint64_t*>(mine + sizeof(MetaHeader));
  for (int p = 0; p < n; ++p) {
    rows[p] = bad ? 0 : a.sendBytes[p];
    rows[n + p] = bad ? 0 : a.recvBytes[p];
    rows[2 * n + p] = targetOffset[p];
  }
  exchangeCounts(task.seq, all, recSize);
  auto header = [&](int r) { return reinterpret_cast<const MetaHeader*>(all.data() + recSize * r); };
  auto row = [&](int r) {
    return reinterpret_cast<const uint64_t*>(all.data() + recSize * r + sizeof(MetaHeader));
  };
  const double exchanged = monotonicSeconds();

  // --- Validation: identical on every rank, so every rank reaches the same verdict.
  std::string error;
  rmaccResult_t code = rmaccSuccess;
  for (int r = 0; r < n && error.empty(); ++r) {
    RMACC_ENFORCE(header(r)->seq == task.seq, "rank %d is at call %llu, rank %d at %llu", r,
                  (unsigned long long)header(r)->seq, me, (unsigned long long)task.seq);
    if (header(r)->rejected) {
      code = r == me ? rmaccInvalidArgument : rmaccInvalidUsage;
      error = r == me ? a.rejected : strprintf("rank %d rejected its arguments of this call", r);
    }
  }
  std::vector<uint64_t> bytes(n * n);
  for (int i = 0; i < n && error.empty(); ++i) {
    for (int j = 0; j < n; ++j) {
      bytes[i * n + j] = row(i)[j];
      if (row(i)[j] != row(j)[n + i]) {
        code = rmaccInvalidUsage;
        error = strprintf("count mismatch: rank %d sends %llu bytes to rank %d, which expects %llu",
                          i, (unsigned long long)row(i)[j], j, (unsigned long long)row(j)[n + i]);
        break;
      }
    }
  }
  if (!error.empty()) {
    // Nothing moves; the user's stream is released in call order.
    if (code == rmaccInvalidUsage) WARN("AlltoAllv call %llu: %s", (unsigned long long)task.seq, error.c_str());
    if (!bad) fail(task.seq, code, error);
    executor_->complete(doneFlag_, task.seq);
    return;
  }

  // --- Plan and run.
  std::shared_ptr<const plan::RankPlan> p = planFor(bytes);

  CallBuffers b;
  b.send = static_cast<const char*>(a.sendbuff);
  b.recv = static_cast<char*>(a.recvbuff);
  b.sendOffset = a.sendOffset;
  b.recvOffset = a.recvOffset;
  b.relay = relayAlloc_ ? static_cast<char*>(relayAlloc_->ptr()) : nullptr;
  b.peerRelay = peerRelay_;
  b.peerRecv.resize(n);
  b.peerRecvOffset.assign(n, std::vector<uint64_t>(n, 0));
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    const uint64_t* offsets = row(r) + 2 * n;
    b.peerRecvOffset[r].assign(offsets, offsets + n);
    if (topo.sameNode(r, me) && header(r)->exportable) {
      auto m = peerMapping(header(r)->handle.handle(), task.seq);
      checkPeerTarget(r, *header(r), offsets, bytes, m->size());
      b.peerRecv[r].local = static_cast<char*>(m->ptr()) + header(r)->targetBase;
    } else if (!topo.sameNode(r, me)) {
      b.peerRecv[r].remote = header(r)->remote;
    }
  }
  executor_->run(*p, b, *task.start, comm_.cfg().entrySync == EntrySync::kBarrier, finish,
                 doneFlag_, task.seq, task.seq);
  // Where a call's host time goes (bench/host.sh and bench/gpu.sh average these).
  INFO(kSubsysColl, "call %llu: queued %.1f us, count exchange %.1f us, plan+enqueue %.1f us",
       (unsigned long long)task.seq, (t0 - task.queuedAt) * 1e6, (exchanged - t0) * 1e6,
       (monotonicSeconds() - exchanged) * 1e6);
}

std::shared_ptr<Mapping> CollectiveEngine::peerMapping(const ExportHandle& handle, uint64_t seq) {
  std::string key(handle.begin(), handle.end());
  auto it = peerMaps_.find(key);
  if (it != peerMaps_.end()) {
    it->second.lastUse = seq;
    return it->second.mapping;
  }
  if (peerMaps_.size() >= kPeerMapCacheSize) {
    // Unmap only what no call still in flight uses: the streams may not have run it yet.
    uint64_t done = *doneFlag_;
    std::erase_if(peerMaps_, [&](const auto& kv) { return kv.second.lastUse <= done; });
  }
  auto m = comm_.windows().importPeer(handle);
  peerMaps_[key] = PeerMap{m, seq};
  return m;
}

}  // namespace rmacc
