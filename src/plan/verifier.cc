// The verifier's dynamic part: runs a sequence of plans abstractly on every rank at once.
//
// Model (what the executor guarantees, and nothing more): each lane of a rank is an in-order
// queue; its head op runs once its deps are done and, for a wait, once the counter
// (self, ctx, sig, peer) has reached the rank's cumulative expectation. A put lands its bytes at
// once and then bumps the target's counter, but a quiet put's bump (Op::quiet) shows only with
// the next put's to that counter; counters only grow and are never reset. A rank
// starts call c+1 only after all its ops of call c are done, and without entry signals only
// after every rank finished call c (the executor's barrier).
//
// One execution order proves little about races, so the plans run twice under adversarial
// schedules, each free to pick any op that the model allows:
// - lazy forwards: forwards run only when nothing else can, and a rank that finished its call
//   enters the next one before any of them. A relay writer that does not wait for its credit
//   (in this call, carried from the last, or the last call's release) then overwrites
//   unforwarded bytes, and a writer that skips its entry wait writes into a rank still in the
//   previous call.
// - lazy writes: every data-moving op runs only when nothing else can (highest rank first), so
//   a forward without its data wait reads stale relay bytes, and a rank without its completion
//   waits finishes the call with its receive buffer incomplete.
#include <array>
#include <set>
#include <unordered_map>

#include "core/error.h"
#include "plan/plan_internal.h"
#include "plan/verifier.h"
#include "plan/verifier_internal.h"
#include "plan/verifier_memory.h"

namespace rmacc::plan {
namespace verify_detail {
namespace {

enum class Policy { kLazyForwards, kLazyWrites };

// Dense numbers for the signal counters (target, ctx, sig, source) the plans touch, and per op
// the counter it bumps (a put) or waits on (a wait): the engines then index small arrays.
class CounterIds {
 public:
  explicit CounterIds(const std::vector<Plan>& calls);
  uint32_t of(int call, int rank, int op) const { return ids_[call][rank][op]; }
  size_t size() const { return keys_.size(); }
  std::string describe(uint32_t id) const {
    const Key& k = keys_[id];
    return strprintf("r%d's counter (ctx %d, sig %d) from r%d", k.target, k.ctx, k.sig, k.src);
  }

 private:
  struct Key {
    int target, ctx, sig, src;
  };
  std::vector<std::vector<std::vector<uint32_t>>> ids_;  // [call][rank][op]
  std::vector<Key> keys_;
};

CounterIds::CounterIds(const std::vector<Plan>& calls) : ids_(calls.size()) {
  std::unordered_map<uint64_t, uint32_t> known;
  for (size_t c = 0; c < calls.size(); ++c) {
    const int n = calls[c].topo.nRanks();
    ids_[c].resize(n);
    for (int r = 0; r < n; ++r) {
      for (const Op& op : calls[c].ranks[r].ops) {
        if (op.kind == OpKind::kCopy) {
          ids_[c][r].push_back(UINT32_MAX);
          continue;
        }
        const Key k = op.kind == OpKind::kPut ? Key{op.peer, op.ctx, op.sigIdx, r}
                                              : Key{r, op.ctx, op.sigIdx, op.peer};
        const uint64_t flat =
            (((uint64_t)k.target * kPlanNumContexts + k.ctx) * RMACC_MAX_SIGNALS + k.sig) * n +
            k.src;
        auto [it, added] = known.emplace(flat, (uint32_t)keys_.size());
        if (added) keys_.push_back(k);
        ids_[c][r].push_back(it->second);
      }
    }
  }
}

class Engine {
 public:
  Engine(const std::vector<Plan>& calls, const std::vector<RelayOracle>& oracles,
         const CounterIds& counters, Policy policy);
  // Runs every call to the end; throws Violation on a race, a bad write or a deadlock.
  void run();
  // After run(): every signal sent must have been waited for.
  void checkSignals() const;

 private:
  // A lane's head that cannot run remembers why, so only the event it waits for (that op
  // done, that counter bumped) looks at the lane again.
  struct LaneQueue {
    std::vector<int> ops;
    size_t head = 0;
    int blockedDep = -1;
    size_t blockedCounter = SIZE_MAX;
  };
  struct RankState {
    int call = -1;          // the call the rank is in (-1: before the first)
    bool finished = true;   // all ops of `call` are done
    size_t remaining = 0;
    std::vector<uint8_t> done;
    std::array<LaneQueue, kNumLanes> lanes;
  };

  const Op& opAt(int r, int i) const { return calls_[st_[r].call].ranks[r].ops[i]; }
  uint64_t countOf(int call, int src, int dst) const {
    return calls_[call].bytes[(size_t)src * n_ + dst];
  }
  uint32_t counterOf(int r, int i) const { return counters_.of(st_[r].call, r, i); }
  bool ready(int r, LaneQueue& q, int i, const Op& op) const;
  bool lazy(const Op& op) const;
  void markDirty(int r, int lane);
  void markRank(int r);
  void drain();
  bool runLazy();
  bool enterNext();
  void enter(int r);
  void execute(int r, int lane);
  void applyData(int r, int i, const Op& op);
  void checkRecvTarget(int r, int i, int target, const Op& op);
  void writeRecv(int r, int i, int target, const Op& op);
  void writeRelay(int r, int i, const Loc& src, uint64_t at, uint64_t len);
  void forward(int r, int i, const Op& op);
  void finishCall(int r);
  void reportDeadlock() const;
  [[noreturn]] void failOp(int r, int i, const std::string& why) const;

  const std::vector<Plan>& calls_;
  const std::vector<RelayOracle>& oracles_;
  const CounterIds& counters_;
  const Policy policy_;
  const int n_;
  std::vector<RankState> st_;
  std::vector<uint64_t> arrived_;   // signals that reached each counter
  std::vector<uint64_t> held_;      // quiet puts' signals not yet carried by a later put (one
                                    // always follows: checkQuietPuts, verifier_checks.cc)
  std::vector<uint64_t> consumed_;  // what the waits of the counter's rank have consumed
  std::vector<RelayMemory> relay_;
  std::vector<std::vector<Coverage>> recv_;  // [call][dest * n + origin]
  std::vector<int> finishedCalls_;           // ranks that finished each call
  std::vector<int> dirty_;
  std::vector<uint8_t> isDirty_;
  std::set<int> lazyReady_;  // rank * kNumLanes + lane whose head is ready but lazy
};

Engine::Engine(const std::vector<Plan>& calls, const std::vector<RelayOracle>& oracles,
               const CounterIds& counters, Policy policy)
    : calls_(calls), oracles_(oracles), counters_(counters), policy_(policy),
      n_(calls[0].topo.nRanks()), st_(n_), arrived_(counters.size(), 0),
      held_(counters.size(), 0), consumed_(counters.size(), 0), relay_(n_), recv_(calls.size()),
      finishedCalls_(calls.size(), 0), isDirty_((size_t)n_ * kNumLanes, 0) {}

void Engine::failOp(int r, int i, const std::string& why) const {
  fail("call %d: r%d op #%d: %s\n  %s", st_[r].call, r, i, why.c_str(),
       formatOp(opAt(r, i), r, i).c_str());
}

bool Engine::ready(int r, LaneQueue& q, int i, const Op& op) const {
  q.blockedDep = -1;
  q.blockedCounter = SIZE_MAX;
  for (int dep : op.deps) {
    if (!st_[r].done[dep]) {
      q.blockedDep = dep;
      return false;
    }
  }
  if (op.kind != OpKind::kWait) return true;
  const uint32_t c = counterOf(r, i);
  if (arrived_[c] >= consumed_[c] + op.count) return true;
  q.blockedCounter = c;
  return false;
}

bool Engine::lazy(const Op& op) const {
  if (op.kind == OpKind::kWait || op.bytes == 0) return false;
  if (policy_ == Policy::kLazyWrites) return true;
  return op.src.region == Region::kRelay;
}

void Engine::markDirty(int r, int lane) {
  const int k = r * kNumLanes + lane;
  if (isDirty_[k]) return;
  isDirty_[k] = 1;
  dirty_.push_back(k);
}

void Engine::markRank(int r) {
  for (int l = 0; l < kNumLanes; ++l) markDirty(r, l);
}

// Runs every eager op that can run, lane by lane, until none can.
void Engine::drain() {
  while (!dirty_.empty()) {
    const int k = dirty_.back();
    dirty_.pop_back();
    isDirty_[k] = 0;
    const int r = k / kNumLanes, l = k % kNumLanes;
    LaneQueue& q = st_[r].lanes[l];
    while (q.head < q.ops.size()) {
      const int i = q.ops[q.head];
      const Op& op = opAt(r, i);
      if (!ready(r, q, i, op)) break;
      if (lazy(op)) {
        lazyReady_.insert(k);
        break;
      }
      execute(r, l);
    }
  }
}

// Runs one lazy op: the lowest rank's under lazy forwards, the highest rank's under lazy writes
// (two orders, so a race between a pair of ranks shows in one of the two runs).
bool Engine::runLazy() {
  if (lazyReady_.empty()) return false;
  auto it = policy_ == Policy::kLazyForwards ? lazyReady_.begin() : std::prev(lazyReady_.end());
  const int k = *it;
  lazyReady_.erase(it);
  execute(k / kNumLanes, k % kNumLanes);  // still ready: readiness never goes away
  markDirty(k / kNumLanes, k % kNumLanes);
  return true;
}

// Moves one rank that finished its call into the next call, when nothing else can run. Without
// entry signals the executor runs a barrier first: all ranks enter the call together, once
// every rank finished the call before it.
bool Engine::enterNext() {
  for (int s = 0; s < n_; ++s) {
    const int r = policy_ == Policy::kLazyForwards ? s : n_ - 1 - s;
    const int next = st_[r].call + 1;
    if (!st_[r].finished || next >= (int)calls_.size()) continue;
    if (calls_[next].options.entrySignals) {
      enter(r);
      return true;
    }
    if (next > 0 && finishedCalls_[next - 1] < n_) continue;
    for (int q = 0; q < n_; ++q) enter(q);
    return true;
  }
  return false;
}

void Engine::enter(int r) {
  RankState& st = st_[r];
  const int next = ++st.call;
  st.finished = false;
  const auto& ops = calls_[next].ranks[r].ops;
  st.done.assign(ops.size(), 0);
  st.remaining = ops.size();
  for (auto& q : st.lanes) q = LaneQueue{};
  for (int i = 0; i < (int)ops.size(); ++i) st.lanes[(int)ops[i].lane].ops.push_back(i);
  if (recv_[next].empty()) recv_[next].resize((size_t)n_ * n_);
  markRank(r);
  if (ops.empty()) finishCall(r);
}

void Engine::execute(int r, int lane) {
  RankState& st = st_[r];
  LaneQueue& q = st.lanes[lane];
  const int i = q.ops[q.head++];
  const Op& op = opAt(r, i);
  if (op.kind == OpKind::kWait) {
    consumed_[counterOf(r, i)] += op.count;
  } else {
    if (op.bytes > 0) applyData(r, i, op);
    if (op.kind == OpKind::kPut) {
      const uint32_t c = counterOf(r, i);
      if (op.quiet) {
        held_[c]++;
      } else {
        arrived_[c] += 1 + held_[c];
        held_[c] = 0;
      }
      for (int l = 0; l < kNumLanes; ++l)  // credit waits sit on the proxy-put lane
        if (st_[op.peer].lanes[l].blockedCounter == c) markDirty(op.peer, l);
    }
  }
  st.done[i] = 1;
  for (int l = 0; l < kNumLanes; ++l)
    if (st.lanes[l].blockedDep == i) markDirty(r, l);
  if (--st.remaining == 0) finishCall(r);
}

void Engine::applyData(int r, int i, const Op& op) {
  const int target = op.kind == OpKind::kCopy ? r : op.peer;
  if (op.dst.region == Region::kRelay) {
    forEachSource(op, [&](const Loc& src, uint64_t at, uint64_t len) {
      if (op.kind != OpKind::kPut || src.region != Region::kSend) {
        failOp(r, i, "only a put from send blocks may write a relay buffer");
      }
      writeRelay(r, i, src, op.dst.offset + at, len);
    });
    return;
  }
  if (op.dst.region != Region::kRecv) failOp(r, i, "data must land in a recv or relay buffer");
  checkRecvTarget(r, i, target, op);
  if (op.src.region == Region::kRelay) {
    if (op.kind != OpKind::kPut) failOp(r, i, "a local copy may not read the relay");
    forward(r, i, op);
  } else if (op.src.region == Region::kSend) {
    // Byte k of r's send block for src.block is byte (origin r, offset src.offset + k).
    if (op.src.block < 0 || op.src.block >= n_ || op.src.block != target ||
        op.dst.block != r || op.src.offset != op.dst.offset) {
      failOp(r, i, strprintf("send[%d]+%llu must land in r%d's recv[%d] at the same offset",
                             op.src.block, (unsigned long long)op.src.offset, op.src.block, r));
    }
  } else {
    failOp(r, i, "data must come from a send block or the relay");
  }
  writeRecv(r, i, target, op);
}

// Entry: a write into `target`'s receive buffer of this call is only safe once the target has
// entered the call and before it finished it (then its buffer is handed back to the user).
void Engine::checkRecvTarget(int r, int i, int target, const Op& op) {
  const int call = st_[r].call;
  const RankState& t = st_[target];
  if (t.call < call) {
    failOp(r, i, strprintf("writes into r%d's receive buffer before r%d entered call %d "
                           "(missing entry wait?)", target, target, call));
  }
  if (t.call > call || t.finished) {
    failOp(r, i, strprintf("writes into r%d's receive buffer after r%d completed call %d",
                           target, target, call));
  }
  const int origin = op.dst.block;
  if (origin < 0 || origin >= n_ ||
      op.dst.offset + op.bytes > countOf(call, origin, target) ||
      op.dst.offset + op.bytes < op.dst.offset) {
    failOp(r, i, strprintf("writes outside r%d's recv block from r%d (%llu bytes)", target,
                           origin, origin >= 0 && origin < n_
                                       ? (unsigned long long)countOf(call, origin, target)
                                       : 0ull));
  }
}

void Engine::writeRecv(int r, int i, int target, const Op& op) {
  const int call = st_[r].call;
  if (op.src.region == Region::kSend &&
      op.src.offset + op.bytes > countOf(call, r, op.src.block)) {
    failOp(r, i, "reads past the end of its send block");
  }
  Coverage& cov = recv_[call][(size_t)target * n_ + op.dst.block];
  if (!cov.add(op.dst.offset, op.dst.offset + op.bytes)) {
    failOp(r, i, strprintf("writes bytes of r%d's recv block from r%d a second time", target,
                           op.dst.block));
  }
}

// One source of a relay put, `len` bytes from `src` to relay+`at`: the bytes must belong to a
// pair this relay carries, land where the relay layout puts their step (slot step mod S), stay
// inside one chunk, and must not overwrite bytes the relay has not forwarded yet -- that is
// what credits are for.
void Engine::writeRelay(int r, int i, const Loc& src, uint64_t at, uint64_t len) {
  const Op& op = opAt(r, i);
  const int call = st_[r].call, relay = op.peer, dest = src.block;
  const RelayOracle& oracle = oracles_[call];
  const Plan& plan = calls_[call];
  if (dest < 0 || dest >= n_ || oracle.relayOf(r, dest) != relay) {
    failOp(r, i, strprintf("r%d does not relay the block r%d sends to r%d", relay, r, dest));
  }
  const uint64_t off = src.offset;
  if (off + len > countOf(call, r, dest)) failOp(r, i, "reads past the end of its send block");
  const uint64_t limit = std::min(plan.relayBytes,
                                  (uint64_t)plan.options.slots * plan.options.slotBytes);
  if (at + len > limit) {
    failOp(r, i, strprintf("writes past the relay buffer (%llu bytes)", (unsigned long long)limit));
  }
  const uint64_t step = oracle.stepOf(r, dest, off);
  if (oracle.stepOf(r, dest, off + len - 1) != step) failOp(r, i, "crosses a relay chunk");
  if (at != oracle.relayOffsetOf(r, dest, off)) {
    failOp(r, i, strprintf("relay step %llu belongs at relay+%#llx",
                           (unsigned long long)step,
                           (unsigned long long)oracle.relayOffsetOf(r, dest, off)));
  }
  relay_[relay].visit(at, at + len,
                      [&](uint64_t, uint64_t, const RelayTag& held) {
                        if (!held.pending) return;
                        failOp(r, i, strprintf("overwrites r%d's unforwarded relay bytes of step "
                                               "%llu (r%d -> r%d) (missing credit wait?)",
                                               relay, (unsigned long long)held.step,
                                               held.origin, held.dest));
                      });
  relay_[relay].write(at, at + len, RelayTag{r, dest, off, step, /*pending=*/true});
}

// A forward: the relay bytes it reads must be exactly the pending bytes of the step that holds
// (origin dst.block, dest peer, offset dst.offset + k).
void Engine::forward(int r, int i, const Op& op) {
  const int call = st_[r].call, origin = op.dst.block, dest = op.peer;
  const RelayOracle& oracle = oracles_[call];
  const Plan& plan = calls_[call];
  const uint64_t a = op.src.offset, b = a + op.bytes;
  if (b > (uint64_t)plan.options.slots * plan.options.slotBytes) {
    failOp(r, i, "reads past the relay buffer");
  }
  if (oracle.relayOf(origin, dest) != r) {
    failOp(r, i, strprintf("r%d does not relay the block r%d sends to r%d", r, origin, dest));
  }
  relay_[r].visit(a, b, [&](uint64_t sa, uint64_t, const RelayTag& held) {
    const uint64_t want = op.dst.offset + (sa - a);
    const uint64_t step = oracle.stepOf(origin, dest, want);
    if (held.origin < 0) failOp(r, i, "reads relay bytes that were never written");
    if (held.origin != origin || held.dest != dest || held.offset != want || held.step != step) {
      failOp(r, i, strprintf("reads relay bytes of r%d -> r%d +%llu step %llu, expected r%d -> "
                             "r%d +%llu step %llu",
                             held.origin, held.dest, (unsigned long long)held.offset,
                             (unsigned long long)held.step, origin, dest,
                             (unsigned long long)want, (unsigned long long)step));
    }
    if (!held.pending) failOp(r, i, "reads relay bytes already forwarded (missing data wait?)");
  });
  relay_[r].release(a, b);
}

// When a rank finished a call its receive buffer must be complete: its waits covered every
// write into it.
void Engine::finishCall(int r) {
  RankState& st = st_[r];
  st.finished = true;
  finishedCalls_[st.call]++;
  for (int origin = 0; origin < n_; ++origin) {
    const uint64_t want = countOf(st.call, origin, r);
    const uint64_t got = recv_[st.call][(size_t)r * n_ + origin].total();
    if (got != want) {
      fail("call %d: r%d finished with %llu of %llu bytes of its recv block from r%d "
           "(missing wait?)", st.call, r, (unsigned long long)got, (unsigned long long)want,
           origin);
    }
  }
}

// Names the first lane head that waits for a signal that never comes (the root of the cycle
// more often than a head that waits for an op of its own rank), or else the first stuck head.
void Engine::reportDeadlock() const {
  int stuckRanks = 0;
  size_t opsLeft = 0;
  std::string bySignal, byDep;
  for (int r = 0; r < n_; ++r) {
    const RankState& st = st_[r];
    if (st.finished && st.call + 1 == (int)calls_.size()) continue;
    ++stuckRanks;
    opsLeft += st.remaining;
    for (int l = 0; l < kNumLanes; ++l) {
      const LaneQueue& q = st.lanes[l];
      if (q.head >= q.ops.size()) continue;
      const int i = q.ops[q.head];
      const Op& op = opAt(r, i);
      const std::string where = strprintf("call %d: r%d op #%d blocked", st.call, r, i);
      if (q.blockedDep >= 0 && byDep.empty()) {
        byDep = strprintf("%s (op #%d not done)\n  %s", where.c_str(), q.blockedDep,
                          formatOp(op, r, i).c_str());
      } else if (q.blockedCounter != SIZE_MAX && bySignal.empty()) {
        const uint32_t c = counterOf(r, i);
        bySignal = strprintf("%s (%s at %llu, needs %llu)\n  %s", where.c_str(),
                             counters_.describe(c).c_str(), (unsigned long long)arrived_[c],
                             (unsigned long long)(consumed_[c] + op.count),
                             formatOp(op, r, i).c_str());
      }
    }
  }
  fail("deadlock: %zu ops left on %d ranks and none can run; %s", opsLeft, stuckRanks,
       (bySignal.empty() ? byDep : bySignal).c_str());
}

// After the last call every signal sent must have been waited for: a stray signal would
// satisfy a wait of a later call too early.
void Engine::checkSignals() const {
  for (uint32_t c = 0; c < arrived_.size(); ++c) {
    if (arrived_[c] == consumed_[c]) continue;
    fail("%s got %llu signals but its waits consumed %llu", counters_.describe(c).c_str(),
         (unsigned long long)arrived_[c], (unsigned long long)consumed_[c]);
  }
}

void Engine::run() {
  for (;;) {
    drain();
    // Lazy forwards: a rank that finished its call enters the next before any held-back
    // forward runs, so a writer's next call meets the relay bytes of this one still
    // unforwarded (what carried credits guard).
    const bool moved = policy_ == Policy::kLazyForwards ? enterNext() || runLazy()
                                                        : runLazy() || enterNext();
    if (moved) continue;
    break;
  }
  for (const RankState& st : st_) {
    if (!st.finished || st.call + 1 != (int)calls_.size()) reportDeadlock();
  }
}

}  // namespace
}  // namespace verify_detail

Verdict verify(const std::vector<Plan>& calls) {
  using namespace verify_detail;
  if (calls.empty()) return {};
  try {
    std::vector<RelayOracle> oracles;
    for (const Plan& p : calls) oracles.emplace_back(p);
    checkStatic(calls, oracles);
    // Both schedules first: a race or a missing wait is a clearer report than the stray
    // signal it may leave behind.
    const CounterIds counters(calls);
    Engine lazyForwards(calls, oracles, counters, Policy::kLazyForwards);
    lazyForwards.run();
    Engine(calls, oracles, counters, Policy::kLazyWrites).run();
    lazyForwards.checkSignals();
  } catch (const Violation& v) {
    return {false, v.text};
  }
  return {};
}

}  // namespace rmacc::plan
