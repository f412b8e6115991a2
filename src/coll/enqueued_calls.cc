#include "coll/enqueued_calls.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>
#include <thread>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "coll/captured_calls.h"
#include "coll/direct_calls.h"
#include "core/test_hooks.h"
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

}  // namespace

void setCountRecordHookForTest(CountRecordHook hook) { countRecordHook.store(hook); }

EnqueuedCalls::EnqueuedCalls(const EngineContext& ctx, RmaEngine& rma, ProgressThread& progress)
    : ctx_(ctx), progress_(progress), planCache_(ctx_.topo, kPlanCacheSize) {
  checkPlanOptionsAgree();
  doneAlloc_ = ctx_.backend.allocateHostVisible(sizeof(uint64_t));
  doneFlag_ = static_cast<volatile uint64_t*>(doneAlloc_->ptr());
  *doneFlag_ = 0;
  doneDeviceAlloc_ = ctx_.backend.allocate(2 * kFlagStride);  // zeroed
  doneDevice_ = static_cast<volatile uint64_t*>(doneDeviceAlloc_->ptr());
  startDevice_ = doneDevice_ + kFlagStride / sizeof(uint64_t);
  targets_ = std::make_unique<CallTargets>(ctx_);
  executor_ = std::make_unique<Executor>(ctx, rma);
  dynamic_ = std::make_unique<DynamicCounts>(ctx_.backend, ctx_.bootstrap, ctx_.rank,
                                             ctx_.nRanks, ctx_.cfg.timeoutS);
  counts_ = std::make_unique<CountExchange>(ctx_.bootstrap, ctx_.topo, ctx_.rank, planOptions(),
                                            ctx_.cfg.timeoutS);
}

// Work still queued references the flags and buffers: the executor drains first.
EnqueuedCalls::~EnqueuedCalls() { executor_.reset(); }

// A caller that runs far ahead of the device fills the command queues of its streams, and CUDA
// then blocks it inside a stream call, while it holds the queue's lock (and with it the progress
// thread, whose work the device waits for): a deadlock. Waiting here, on the host and holding
// nothing, keeps the backlog bounded.
void EnqueuedCalls::waitForRoom() {
  const uint64_t limit = (uint64_t)ctx_.cfg.maxCallsInFlight;
  const uint64_t next = progress_.lastNumbered() + 1;
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

uint64_t EnqueuedCalls::call(Stream* user, AlltoallvArgs args) {
  if (!args.rejected.empty()) user = nullptr;  // it moves nothing on the stream
  if (user) waitForRoom();
  // With counts on the device the work is enqueued once the stream reaches the call: the wait
  // below then also waits (as long) for the device to get there.
  const bool waitForEnqueue = user && ctx_.cfg.enqueueWaitMs > 0;
  // The user's stream then waits for work the progress thread has yet to enqueue. Until it has,
  // a CUDA call of this thread that waits for the device (a synchronous copy to pageable
  // memory, cudaFree, a kernel's first lazy load) would keep that work out for good: a
  // deadlock (docs/decisions.md#enqueue-wait). Peers (and device counts) that arrive within
  // RMACC_ENQUEUE_WAIT_MS close the window before the call returns; later ones leave it open
  // (docs/limits.md).
  const bool mayClaim = directEligible(user, args);
  Task task{0, std::move(args)};
  bool claimed = false;
  const uint64_t seq = progress_.queueOrClaim(task, [&](Task& task) {
    if (!task.args.rejected.empty()) return;
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
  }, mayClaim, waitForEnqueue ? ctx_.cfg.enqueueWaitMs : 0, &claimed);
  if (claimed) runDirect(task);
  else countCallPath(CallPath::kQueued);
  return seq;
}

CallDone EnqueuedCalls::doneOf(const Task& task) const {
  return CallDone{{doneFlag_, doneDevice_}, task.seq, task.site ? task.site->done : nullptr};
}

rmaccResult_t EnqueuedCalls::takeCallError(uint64_t seq, std::string* text) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = callErrors_.find(seq);
  if (it == callErrors_.end()) return rmaccSuccess;
  rmaccResult_t code = it->second.first;
  if (text) *text = it->second.second;
  callErrors_.erase(it);
  return code;
}

rmaccResult_t EnqueuedCalls::takeAnyCallError(std::string* text, uint64_t* seq) {
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

void EnqueuedCalls::fail(uint64_t seq, rmaccResult_t code, const std::string& text) {
  std::lock_guard<std::mutex> lock(mu_);
  callErrors_[seq] = {code, text};
}

// The progress thread's handler: one call, whose failure ends the communicator.
void EnqueuedCalls::run(Task& task) {
  try {
    runTask(task);
  } catch (const Error& e) {
    failTask(task, e.code(), e.what());
  } catch (const std::exception& e) {
    failTask(task, rmaccInternalError, e.what());
  }
}

// Every rank plans only its own part, from the same inputs: the knobs that shape plans must be
// equal on every rank, or the parts would not fit together (a wait for a signal nobody sends,
// or a relay slot reused early). One all-gather at init; every rank sees the same table, so
// every rank fails alike.
void EnqueuedCalls::checkPlanOptionsAgree() {
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

plan::Options EnqueuedCalls::planOptions() const {
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
std::shared_ptr<const plan::RankPlan> EnqueuedCalls::planFor(const plan::RankInputs& in) {
  bool planned = false;
  std::shared_ptr<const plan::RankPlan> p = planCache_.get(planOptions(), in, &planned);
  if (planned && ctx_.cfg.dumpPlan) {
    std::string text;
    for (size_t i = 0; i < p->ops.size(); ++i) text += plan::formatOp(p->ops[i], ctx_.rank, (int)i) + "\n";
    fprintf(stderr, "%s", text.c_str());
  }
  return p;
}

void EnqueuedCalls::runTask(Task& task) {
  if (!task.setup) {
    task.setup = std::make_shared<CallSetup>();
    beginTask(task, *task.setup);
  }
  counts_->advance(std::numeric_limits<double>::infinity());
  endTask(task, *task.setup);
}

void EnqueuedCalls::beginTask(Task& task, CallSetup& s) {
  const int n = ctx_.nRanks;
  AlltoallvArgs& a = task.args;
  s.t0 = monotonicSeconds();
  bool bad = !a.rejected.empty();
  // Counts on the device: known once the stream reached the call. Blocks that do not fit fail
  // the call on every rank (rmaccInvalidUsage, reported when the stream is synchronised), but
  // recvcounts and rdispls are still written.
  std::vector<CopyDesc>& writeBack = s.writeBack;
  if (!bad && a.dynamic) {
    a.rejected = dynamic_->resolve(task.seq, *a.dynamic, task.site ? task.site->counts : nullptr,
                                   a, writeBack,
                                   [&] { return ctx_.failures.asyncError() != rmaccSuccess; });
    bad = s.dynamicRejected = !a.rejected.empty();
  }
  s.bad = bad;
  CallTargets::Targets targets;
  if (!bad) targets_->choose(task.args, targets);
  else targets.offset.assign(n, 0);
  targets.finish.insert(targets.finish.end(), writeBack.begin(), writeBack.end());
  MetaHeader& h = targets.header;
  h.seq = task.seq;
  h.callSeq = a.callSeq;
  h.rejected = bad;
  s.finish = std::move(targets.finish);

  // --- The count exchange (count_exchange.h): O(n) bytes per rank; every rank gets the same
  // verdict, so on a mismatch nothing moves anywhere. Its arrays stay put until it ends: `s`
  // holds them, and moving the task keeps its vectors' storage.
  s.zeros.assign(bad ? n : 0, 0);
  std::vector<uint64_t>& offsets = s.offsets;
  offsets = std::move(targets.offset);
  if (CountRecordHook hook = countRecordHook.load()) {
    // Tests corrupt this rank's record: rows of sends, receives and receive offsets.
    std::vector<uint64_t> rows(3 * (size_t)n, 0);
    std::copy(offsets.begin(), offsets.end(), rows.begin() + 2 * n);
    hook(task.seq, rows.data(), n);
    std::copy(rows.begin() + 2 * n, rows.end(), offsets.begin());
  }
  const CountExchange::Mine mine{h, bad ? s.zeros.data() : a.sendBytes.data(),
                                 bad ? s.zeros.data() : a.recvBytes.data(), offsets.data(),
                                 a.elementBytes};
  counts_->start(task.seq, mine, s.x);
}

void EnqueuedCalls::endTask(Task& task, CallSetup& s) {
  AlltoallvArgs& a = task.args;
  CountExchange::Result& x = s.x;
  const double exchanged = monotonicSeconds();
  if (x.code != rmaccSuccess) {
    // Nothing moves; the user's stream is released in call order. Every rank's caller gets
    // the error as its return code (or from the stream's synchronisation): no log line too.
    if (s.dynamicRejected) fail(task.seq, rmaccInvalidUsage, a.rejected);
    else if (!s.bad) fail(task.seq, x.code, x.error);
    executor_->complete(doneOf(task), s.writeBack);
    return;
  }
  counts_->commit(x);

  // --- Plan this rank's part and run it.
  const uint64_t calls0 = streamCallsOfThisThread();
  std::shared_ptr<const plan::RankPlan> p = planFor(x.inputs);
  CallBuffers& b = targets_->setBuffers(task.seq, a, x, *counts_, *p);
  // A call starts once its stream reached it and the previous call is complete. The user's
  // stream says both with the start flag; a captured call's stream reached it before it was
  // queued, so only the previous call's done flag is left to wait for.
  const WaitDesc start = task.site ? WaitDesc{doneDevice_, task.seq - 1} : WaitDesc{startDevice_, task.seq};
  executor_->run(*p, b, start, ctx_.cfg.entrySync == EntrySync::kBarrier, s.finish, doneOf(task),
                 task.seq);
  const uint64_t engineCalls = streamCallsOfThisThread() - calls0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    lastCost_ = CallCost{task.seq, task.userCalls, engineCalls, p->ops.size()};
  }
  evictPeerMappings(task.seq);
  // Where a call's host time goes (bench/host.sh and bench/gpu.sh average these).
  INFO(kSubsysColl, "call %llu: queued %.1f us, count exchange %.1f us (%llu B: sent %llu, received %llu, shared %llu), plan+enqueue %.1f us, %zu ops, backend calls %llu (user stream %llu)",
       (unsigned long long)task.seq, (s.t0 - task.queuedAt) * 1e6, (exchanged - s.t0) * 1e6,
       (unsigned long long)x.bytes.total(), (unsigned long long)x.bytes.sent,
       (unsigned long long)x.bytes.received, (unsigned long long)x.bytes.sharedRead,
       (monotonicSeconds() - exchanged) * 1e6, p->ops.size(),
       (unsigned long long)(task.userCalls + engineCalls), (unsigned long long)task.userCalls);
}

// Unmapping a peer's memory (cuMemUnmap, cudaIpcCloseMemHandle) waits for device work queued
// before it, and while it waits the driver holds back this process's other calls: with a call
// in flight whose user stream waits for work this thread has yet to enqueue, every rank stalled
// for good (seen on an H200 at the first eviction, also with the unmapping moved to a thread of
// its own). So the cache is trimmed only when this rank is quiet: the call just enqueued is
// done and no other call is queued; the user's thread is held off (ProgressThread::whileQuiet) meanwhile. A rank that
// is never quiet keeps its mappings a while longer.
void EnqueuedCalls::evictPeerMappings(uint64_t seq) {
  if (!targets_->peerMappingsFull()) return;
  progress_.whileQuiet(seq, [&] {
    const double deadline = monotonicSeconds() + ctx_.cfg.timeoutS;
    while (doneSeq() < seq) {
      if (ctx_.failures.asyncError() != rmaccSuccess || monotonicSeconds() > deadline) return;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    targets_->trimPeerMappings(seq);
  });
}

}  // namespace rmacc
