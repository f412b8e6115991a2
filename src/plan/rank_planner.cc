// One rank's part of the plan (rank_planner.h). It drafts exactly the ops that planner.cc
// drafts for this rank, in the same order, with the same sort keys, from RankInputs instead of
// the byte matrix; planner.cc explains the schedule and why it cannot deadlock.
#include "plan/rank_planner.h"

#include "core/error.h"
#include "plan/plan_build.h"
#include "plan/plan_internal.h"

namespace rmacc::plan {
namespace {

// entryWait_ of a relay whose credit is this rank's entry, until that credit wait is drafted.
constexpr int kEntryIsCredit = -2;

// A source that writes into this rank's receive buffer, for its completion wait.
struct Source {
  int rank;
  uint64_t signals;
  int last;
};

// What planning a call needs besides its result, kept from call to call (one per thread): at
// 1,024 ranks a call drafts ~2,700 ops, and allocating drafts, dep lists, payload blocks and
// per-rank tables anew each time cost about as much as building the ops
// (docs/decisions.md#plan-scratch).
struct Scratch {
  struct Draft {
    Op op;  // op.deps and op.gather stay empty: the deps are deps[depAt .. depAt + depCount),
            // the gather segs[segAt .. segAt + segCount)
    int64_t key;
    int depAt, depCount;
    int segAt = 0, segCount = 0;
  };
  struct Step {
    int writer, pos;
    int fwdAt, fwdCount;  // its forward ops (draft ids) in `forwards`
    int data;             // the relay's wait for the chunk
    uint64_t bytes;       // of the chunk
  };
  std::vector<Draft> drafts;
  std::vector<int> deps, forwards, where, order, bucket;
  std::vector<Step> steps;
  std::vector<uint64_t> callStep;  // [k * W + m]: writer m's first chunk, as a step of the call
  std::vector<int> roundBase, directPos, entryWait, writers, targets, roundFrom, roundTo;
  std::vector<Block> blocks;
  std::vector<Segment> segs;
  std::vector<Source> srcs;
};

class RankPlanner {
 public:
  RankPlanner(const Topology& topo, const Options& opt, const RankInputs& in, Scratch& s)
      : topo_(topo), opt_(callOptions(opt, in.largestPayload, topo.nNodes())),
        fitted_(slotsFitted(opt, opt_)), in_(in),
        me_(in.rank), node_(topo.nodeOf(me_)),
        i_(topo.localRankOf(me_)), L_(topo.nodeSize(node_)), W_(relayWriterSlots(topo, me_)),
        nNodes_(topo.nNodes()), s_(s), drafts_(s.drafts), roundBase_(s.roundBase),
        directPos_(s.directPos),
        entryWait_(s.entryWait), steps_(s.steps), step_(in.relayStepsBefore) {
    drafts_.clear();
    s.deps.clear();
    s.segs.clear();
    s.forwards.clear();
    steps_.clear();
    entryWait_.assign(topo.nRanks(), -1);
  }

  void run(RankPlanResult& out);

 private:
  uint64_t send(int d) { ++work_.entriesRead; return in_.send[d]; }
  uint64_t recv(int s) { ++work_.entriesRead; return in_.recv[s]; }
  uint64_t relayIn(int k, int m, int j) {
    ++work_.entriesRead;
    return in_.relayIn[((size_t)k * W_ + m) * L_ + j];
  }
  // Local rank (on round k's sending node) of this rank's m-th round-k writer, or -1.
  int writerLocal(int k, int m) const {
    const int wi = i_ + m * L_;
    return wi < topo_.nodeSize(topo_.recvNode(node_, k)) ? wi : -1;
  }
  int add(Op op, int batch, Phase phase, std::initializer_list<int> deps = {}, int keyBatch = -1);
  int addDeps(const int* deps, int n);
  void sortInto(RankPlan& out);
  bool forwardsTo(int j);
  void relayCallSteps();
  void addEntry();
  void addIntraNode();
  const std::vector<Block>& payload(int k, int m, uint64_t* total);
  void addWriterChunks(int k);
  void addGather(const std::vector<Block>& blocks, uint64_t lo, uint64_t hi);
  void addRelayChunks(int k);
  void addRelayWriter(int k, int m, int& pos);
  void addDirect(int k);
  void joinForwards();
  void addCredits();
  void addFinalWaits();
  void addRelease();

  const Topology& topo_;
  const Options opt_;  // the call's (callOptions)
  const bool fitted_;  // its slots are fitted
  const RankInputs& in_;
  const int me_, node_, i_, L_, W_, nNodes_;
  Scratch& s_;
  std::vector<Scratch::Draft>& drafts_;
  std::vector<int>& roundBase_;
  std::vector<int>& directPos_;        // [k]: position of round k's direct puts (directPositions)
  std::vector<int>& entryWait_;        // [rank]: this rank's entry wait on it, or -1
  std::vector<Scratch::Step>& steps_;  // this call's relay steps on this rank
  uint64_t step_;               // next relay step
  uint64_t released_ = 0;       // this rank's relay steps the last call's release freed
  PlanWork work_;
  // Steps the last call's release freed at this rank's round-k relay for this rank's chunks
  // there (releasedHere): only at the relay whose release comes here (releaseRelayOf).
  uint64_t releasedAsWriter(int k, uint64_t chunks) const {
    const bool first = k == 1 && releaseRelayOf(topo_, me_) >= 0;
    return first ? releasedHere(topo_, opt_, chunks) : 0;
  }
};

// Drafts `op` with its deps (draft ids; negative ones mean none).
int RankPlanner::add(Op op, int batch, Phase phase, std::initializer_list<int> deps, int keyBatch) {
  op.batch = batch;
  const int64_t key = (int64_t)(keyBatch < 0 ? batch : keyBatch) * kNumPhases + phase;
  const int at = (int)s_.deps.size();
  for (int d : deps)
    if (d >= 0) s_.deps.push_back(d);
  drafts_.push_back({std::move(op), key, at, (int)s_.deps.size() - at});
  ++work_.opsBuilt;
  return (int)drafts_.size() - 1;
}

// Gives the last draft `n` more deps (they follow its own in `deps`: nothing was drafted since).
int RankPlanner::addDeps(const int* deps, int n) {
  s_.deps.insert(s_.deps.end(), deps, deps + n);
  drafts_.back().depCount += n;
  return (int)drafts_.size() - 1;
}

// Whether this rank, as a relay, forwards anything to local rank j in some round.
bool RankPlanner::forwardsTo(int j) {
  for (int k = 1; k < nNodes_; ++k)
    for (int m = 0; writerLocal(k, m) >= 0; ++m)
      if (relayIn(k, m, j) > 0) return true;
  return false;
}

// Where each writer's first chunk falls among this rank's relay steps of the call (s_.callStep),
// as far as entryByCredit looks (the credit window; every step in a fitted call), for writers
// whose first chunk is not put after their direct put (with unequal nodes a later writer of a
// round starts after the round's first position, where the direct put is with one node round).
void RankPlanner::relayCallSteps() {
  s_.callStep.assign((size_t)nNodes_ * W_, UINT64_MAX);
  const uint64_t window = (uint64_t)creditWindow(opt_);
  uint64_t s = 0;
  for (int k = 1; k < nNodes_ && (s < window || fitted_); ++k) {
    int pos = roundBase_[k];  // of writer m's first chunk: not after its direct put
    for (int m = 0; writerLocal(k, m) >= 0; ++m) {
      uint64_t total;
      payload(k, m, &total);
      const uint64_t chunks = chunkCount(total, opt_, isLastRound(k, nNodes_));
      if (chunks > 0 && pos <= directPos_[k]) s_.callStep[(size_t)k * W_ + m] = s;
      s += chunks;
      pos += (int)chunks;
    }
  }
}

// Entry signals to the ranks that write into this one, and entry waits on the ranks this one
// writes into, each in rank order (planner.cc addEntry walks (dest, writer) pairs in rank order),
// those with remote ranks at the positions of the round that pairs the two nodes.
void RankPlanner::addEntry() {
  if (!opt_.entrySignals) return;
  std::vector<int>& writers = s_.writers;
  std::vector<int>& targets = s_.targets;
  writers.clear();
  targets.clear();
  for (int j = 0; j < L_; ++j) {
    const int w = topo_.rankAt(node_, j);
    if (w == me_) continue;
    bool writes = recv(w) > 0;  // directly, or forwarding what the ranks on its rail send here
    for (int a = 0; !writes && a < nNodes_; ++a)
      for (int wi = j; !writes && a != node_ && wi < topo_.nodeSize(a); wi += L_)
        writes = recv(topo_.rankAt(a, wi)) > 0;
    if (writes) writers.push_back(w);
    if (send(w) > 0 || forwardsTo(j)) targets.push_back(w);
  }
  for (int a = 0; a < nNodes_; ++a) {
    if (a == node_) continue;
    for (int wi = i_; wi < topo_.nodeSize(a); wi += L_) {  // they put straight into this rank
      const int peer = topo_.rankAt(a, wi);
      if (recv(peer) > 0) writers.push_back(peer);
    }
    const int relay = topo_.railPeer(me_, a);
    if (send(relay) > 0) targets.push_back(relay);
  }
  std::sort(writers.begin(), writers.end());
  std::sort(targets.begin(), targets.end());
  // [node]: the round in which this rank receives from (sends to) that node's ranks directly.
  std::vector<int>& roundFrom = s_.roundFrom;
  std::vector<int>& roundTo = s_.roundTo;
  roundFrom.assign(nNodes_, 0);
  roundTo.assign(nNodes_, 0);
  for (int k = 1; k < nNodes_; ++k) {
    roundFrom[topo_.recvNode(node_, k)] = k;
    roundTo[topo_.sendNode(node_, k)] = k;
  }
  relayCallSteps();
  for (int w : writers) {
    const bool local = topo_.sameNode(w, me_);
    if (!local) {  // the credit for its first chunk here may be its entry (entryByCredit)
      const int k = roundFrom[topo_.nodeOf(w)], m = (topo_.localRankOf(w) - i_) / L_;
      const uint64_t s = s_.callStep[(size_t)k * W_ + m];
      if (s != UINT64_MAX &&
          entryByCredit(s, in_.relayStepsBefore + s, opt_, nNodes_, fitted_, released_))
        continue;
    }
    const EntryPositions at =
        local ? EntryPositions{0, 0}
              : remoteEntryPositions(directPos_[roundFrom[topo_.nodeOf(w)]], opt_, topo_,
                                     roundBase_, me_, w);
    add(putOp(local ? Lane::kCePut : Lane::kProxyPut, w, {}, {}, 0, kPlanCtxEntry, 0, {}),
        at.signal, at.signalPhase);
  }
  for (int d : targets) {
    const bool local = topo_.sameNode(d, me_);
    if (!local) {  // d is also this rank's relay there: its first credit may be the entry
      const int k = roundTo[topo_.nodeOf(d)];
      uint64_t total = 0;
      if (topo_.nodeSize(topo_.nodeOf(d)) > 1) payload(k, -1, &total);
      const bool before = roundBase_[k] + (int)in_.writerOffset[k] <= directPos_[k];
      const uint64_t chunks = chunkCount(total, opt_, isLastRound(k, nNodes_));
      if (chunks > 0 && before &&
          entryByCredit(in_.writerCallStep[k], in_.writerStep[k], opt_, nNodes_, fitted_,
                        releasedAsWriter(k, chunks))) {
        entryWait_[d] = kEntryIsCredit;  // set by addWriterChunks
        continue;
      }
    }
    const EntryPositions at =
        local ? EntryPositions{0, 0}
              : remoteEntryPositions(directPos_[roundTo[topo_.nodeOf(d)]], opt_, topo_,
                                     roundBase_, d, me_);
    entryWait_[d] = add(waitOp(local ? Lane::kCeWait : Lane::kProxyWait, d, kPlanCtxEntry, 0, 1),
                        at.wait, kPhaseEntryWait);
  }
}

void RankPlanner::addIntraNode() {
  for (int step = 1; step < L_; ++step) {
    const int d = topo_.rankAt(node_, (i_ + step) % L_);
    const int entry = entryWait_[d];
    forEachPiece(send(d), opt_.maxPutBytes, [&](uint64_t off, uint64_t len) {
      add(putOp(Lane::kCePut, d, {Region::kSend, d, off}, {Region::kRecv, me_, off}, len,
                kPlanCtxColl, kSigData, {}),
          0, kPhasePut, {entry});
    });
  }
  const uint64_t self = send(me_);
  if (self > 0) add(selfCopyOp(me_, self), 0, kPhasePut);
}

// The round-k relay payload this rank writes (m < 0) or forwards for its m-th writer: blocks
// for the local ranks of the receiving node but the relay's own, in payload order
// (payloadLocal), empty ones skipped.
const std::vector<Block>& RankPlanner::payload(int k, int m, uint64_t* total) {
  std::vector<Block>& blocks = s_.blocks;
  blocks.clear();
  const int node = m >= 0 ? node_ : topo_.sendNode(node_, k);
  const int skip = m >= 0 ? i_ : topo_.railLocal(i_, node), L = topo_.nodeSize(node);
  *total = 0;
  for (int q = 0; q + 1 < L; ++q) {
    const int j = payloadLocal(skip, L, q);
    const int d = topo_.rankAt(node, j);
    const uint64_t len = m >= 0 ? relayIn(k, m, j) : send(d);
    if (len == 0) continue;
    blocks.push_back({d, *total, len});
    *total += len;
  }
  return blocks;
}

void RankPlanner::addWriterChunks(int k) {
  uint64_t total;
  const std::vector<Block>& blocks = payload(k, -1, &total);
  const int relay = topo_.railPeer(me_, topo_.sendNode(node_, k));
  const bool last = isLastRound(k, nNodes_);
  const uint64_t chunk = chunkBytes(total, opt_, last), chunks = chunkCount(total, opt_, last);
  for (uint64_t c = 0; c < chunks; ++c) {
    const int pos = roundBase_[k] + (int)(in_.writerOffset[k] + c);
    const uint64_t t = in_.writerStep[k] + c, lo = c * chunk, hi = std::min(total, lo + chunk);
    const uint64_t slotOff = (t % (uint64_t)opt_.slots) * opt_.slotBytes;
    int credit = -1;
    if (stepNeedsCredit(in_.writerCallStep[k] + c, t, opt_, topo_.nNodes(),
                        releasedAsWriter(k, chunks)))
      credit = add(waitOp(Lane::kProxyPut, relay, kPlanCtxCredit, kSigStep, 1), pos, kPhasePut);
    if (c == 0 && entryWait_[relay] == kEntryIsCredit) entryWait_[relay] = credit;
    forEachPiece(hi - lo, opt_.maxPutBytes, [&](uint64_t off, uint64_t len) {
      add(putOp(Lane::kProxyPut, relay, {}, {Region::kRelay, -1, slotOff + off}, len,
                kPlanCtxColl, kSigRelay, {}),
          pos, kPhasePut, {credit});
      addGather(blocks, lo + off, lo + off + len);
    });
  }
}

// Gives the last draft, a relay put, the sources of payload bytes [lo, hi) (as the global
// planner's appendSegments and settleGather).
void RankPlanner::addGather(const std::vector<Block>& blocks, uint64_t lo, uint64_t hi) {
  Scratch::Draft& d = drafts_.back();
  d.segAt = (int)s_.segs.size();
  appendSegments(blocks, lo, hi, s_.segs);
  d.segCount = (int)s_.segs.size() - d.segAt;
  if (d.segCount == 1) {
    d.op.src = s_.segs.back().src;
    s_.segs.pop_back();
    d.segCount = 0;
  }
}

// The relay steps of round k on this rank: its writers' chunks one after another.
void RankPlanner::addRelayChunks(int k) {
  int pos = roundBase_[k];
  for (int m = 0; writerLocal(k, m) >= 0; ++m) addRelayWriter(k, m, pos);
}

void RankPlanner::addRelayWriter(int k, int m, int& pos) {
  uint64_t total;
  const std::vector<Block>& blocks = payload(k, m, &total);
  const int w = topo_.rankAt(topo_.recvNode(node_, k), writerLocal(k, m));
  const bool last = isLastRound(k, nNodes_);
  const uint64_t chunk = chunkBytes(total, opt_, last), chunks = chunkCount(total, opt_, last);
  for (uint64_t c = 0; c < chunks; ++c, ++pos) {
    const uint64_t t = step_++, lo = c * chunk, hi = std::min(total, lo + chunk);
    const uint64_t slotOff = (t % (uint64_t)opt_.slots) * opt_.slotBytes;
    const int data = add(waitOp(Lane::kProxyWait, w, kPlanCtxColl, kSigRelay,
                                pieceCount(hi - lo, opt_.maxPutBytes)),
                         pos + 1, kPhaseRelayWait);
    Scratch::Step step{w, pos, (int)s_.forwards.size(), 0, data, hi - lo};
    for (const Block& b : blocks) {
      const uint64_t segLo = std::max(lo, b.start), segHi = std::min(hi, b.start + b.len);
      if (segLo >= segHi) continue;
      const int entry = entryWait_[b.dest];
      forEachPiece(segHi - segLo, opt_.maxPutBytes, [&](uint64_t off, uint64_t len) {
        s_.forwards.push_back(
            add(putOp(Lane::kCePut, b.dest, {Region::kRelay, -1, slotOff + segLo - lo + off},
                      {Region::kRecv, w, segLo - b.start + off}, len, kPlanCtxColl, kSigData, {}),
                pos + 1, kPhaseForward, {data, entry}));
        ++step.fwdCount;
      });
    }
    steps_.push_back(step);
  }
}

void RankPlanner::addDirect(int k) {
  const int d = topo_.railPeer(me_, topo_.sendNode(node_, k));
  const int entry = entryWait_[d], pos = directPos_[k];
  forEachPiece(send(d), opt_.maxPutBytes, [&](uint64_t off, uint64_t len) {
    add(putOp(Lane::kProxyPut, d, {Region::kSend, d, off}, {Region::kRecv, me_, off}, len,
              kPlanCtxColl, kSigData, {}),
        pos, kPhasePut, {entry});
  });
}

// As planner.cc joinForwards, for this rank's steps: a joined forward's deps move to the end
// of `deps` with the group's other data waits after them; each step's forwards become the
// group's (contiguous: the group's steps are).
void RankPlanner::joinForwards() {
  forEachJoinedGroup(steps_.size(), opt_, [&](size_t s) { return steps_[s].pos; },
                     [&](size_t s) { return steps_[s].bytes; }, [&](size_t from, size_t to) {
    for (size_t s = from; s < to; ++s)
      for (int f = 0; f < steps_[s].fwdCount; ++f) {
        Scratch::Draft& d = drafts_[s_.forwards[steps_[s].fwdAt + f]];
        const int at = (int)s_.deps.size();
        for (int k = 0; k < d.depCount; ++k) s_.deps.push_back(s_.deps[d.depAt + k]);
        for (size_t o = from; o < to; ++o)
          if (o != s) s_.deps.push_back(steps_[o].data);
        d.depAt = at;
        d.depCount = (int)s_.deps.size() - at;
      }
    const int fwdAt = steps_[from].fwdAt;
    const int fwdCount = steps_[to - 1].fwdAt + steps_[to - 1].fwdCount - fwdAt;
    for (size_t s = from; s < to; ++s) steps_[s].fwdAt = fwdAt, steps_[s].fwdCount = fwdCount;
  });
}

// As planner.cc addCredits, for this rank's steps.
void RankPlanner::addCredits() {
  const uint64_t first = in_.relayStepsBefore, window = (uint64_t)creditWindow(opt_);
  for (size_t s = 0; s < steps_.size(); ++s) {
    const uint64_t t = first + s;
    if (!stepNeedsCredit(s, t, opt_, topo_.nNodes(), released_)) continue;
    Op credit = putOp(Lane::kProxyPut, steps_[s].writer, {}, {}, 0, kPlanCtxCredit, kSigStep, {});
    if (s >= window) {  // step t - window is this call's
      add(std::move(credit), steps_[s - window].pos + 1, kPhaseCredit);
      forEachFreeingStep(s, s, opt_, [&](size_t v) {
        addDeps(s_.forwards.data() + steps_[v].fwdAt, steps_[v].fwdCount);
      });
    } else {
      add(std::move(credit), 0,
          earlySignalPhase(topo_, opt_, roundBase_, me_, steps_[s].writer, 0, steps_[s].pos));
    }
  }
}

// One completion wait per source that writes here: local ranks (their own blocks at batch 0,
// plus what they forward, as RankInputs says) and rail peers of other nodes (direct puts in the
// round that pairs their node with this one). In completionWaitOrder.
void RankPlanner::addFinalWaits() {
  std::vector<Source>& srcs = s_.srcs;
  srcs.clear();
  std::vector<int>& roundFrom = s_.roundFrom;  // [node]: the round whose writers sit there
  roundFrom.assign(nNodes_, 0);
  for (int k = 1; k < nNodes_; ++k) roundFrom[topo_.recvNode(node_, k)] = k;
  for (int j = 0; j < L_; ++j) {
    const int s = topo_.rankAt(node_, j);
    if (s == me_) continue;
    const uint64_t direct = pieceCount(recv(s), opt_.maxPutBytes), fwd = in_.forwardSignals[j];
    work_.entriesRead += 2;
    if (direct + fwd > 0) srcs.push_back({s, direct + fwd, fwd ? std::max(0, in_.forwardLastBatch[j]) : 0});
  }
  for (int a = 0; a < nNodes_; ++a) {
    for (int wi = i_; a != node_ && wi < topo_.nodeSize(a); wi += L_) {
      const int s = topo_.rankAt(a, wi);
      const uint64_t direct = pieceCount(recv(s), opt_.maxPutBytes);
      if (direct > 0) srcs.push_back({s, direct, directPos_[roundFrom[a]]});
    }
  }
  std::sort(srcs.begin(), srcs.end(), [&](const Source& a, const Source& b) {
    return completionWaitOrder(topo_, me_, a.rank, a.last) <
           completionWaitOrder(topo_, me_, b.rank, b.last);
  });
  for (const Source& s : srcs)
    add(waitOp(Lane::kCeWait, s.rank, kPlanCtxColl, kSigData, s.signals), s.last, kPhaseFinal, {},
        completionKeyBatch(s.last));
}

// As planner.cc addRelease and addReleaseWaits: this rank's release credit as a relay, to its
// first writer of round 1, then its wait for the release of its round-1 relay where it is that
// relay's first writer.
void RankPlanner::addRelease() {
  if (!releasesRelay(topo_, opt_)) return;
  const size_t s = steps_.size();
  if (const int w = releaseWriterOf(topo_, me_); w >= 0) {
    add(putOp(Lane::kProxyPut, w, {}, {}, 0, kPlanCtxCredit, kSigRelease, {}),
        roundBase_[nNodes_], kPhaseCredit);
    for (size_t u = s; u < s + releasedSteps(opt_); ++u)
      forEachFreeingStep(u, s, opt_, [&](size_t v) {
        addDeps(s_.forwards.data() + steps_[v].fwdAt, steps_[v].fwdCount);
      });
  }
  if (const int r = releaseRelayOf(topo_, me_); r >= 0) {
    const int last = roundBase_[nNodes_] - 1;
    add(waitOp(Lane::kCeWait, r, kPlanCtxCredit, kSigRelease, 1), last, kPhaseFinal, {},
        completionKeyBatch(last));
  }
}

// Orders the drafts by key, stably, into `out` (sortDrafts' result, without its sort): keys
// are batch * kNumPhases + phase with batch <= roundBase_[nNodes] + 1 (a completion wait on
// the last position's forwards, completionKeyBatch), so a counting sort over those few buckets
// is linear. Ops of `out` are overwritten in place, keeping their dep and gather lists' memory.
void RankPlanner::sortInto(RankPlan& out) {
  const int buckets = (roundBase_[nNodes_] + 2) * kNumPhases;
  std::vector<int>& bucket = s_.bucket;
  std::vector<int>& where = s_.where;
  bucket.assign(buckets + 1, 0);
  auto bucketOf = [&](int64_t key) {
    RMACC_ENFORCE(key >= 0 && key < buckets, "r%d: op key %lld past the last batch", me_,
                  (long long)key);
    return (int)key;
  };
  for (const Scratch::Draft& d : drafts_) ++bucket[bucketOf(d.key) + 1];
  for (size_t b = 1; b < bucket.size(); ++b) bucket[b] += bucket[b - 1];
  std::vector<int>& order = s_.order;
  where.resize(drafts_.size());
  order.resize(drafts_.size());
  for (size_t i = 0; i < drafts_.size(); ++i) {
    where[i] = bucket[bucketOf(drafts_[i].key)]++;
    order[where[i]] = (int)i;
  }
  // Written in output order: the result is filled front to back, drafts are read in key order.
  out.ops.resize(drafts_.size());
  for (size_t at = 0; at < drafts_.size(); ++at) {
    Scratch::Draft& d = drafts_[order[at]];
    Op& op = out.ops[at];
    std::vector<int> deps = std::move(op.deps);
    std::vector<Segment> gather = std::move(op.gather);
    op = std::move(d.op);
    gather.assign(s_.segs.begin() + d.segAt, s_.segs.begin() + d.segAt + d.segCount);
    op.gather = std::move(gather);
    deps.clear();
    for (int k = 0; k < d.depCount; ++k) {
      const int dep = where[s_.deps[d.depAt + k]];
      RMACC_ENFORCE(dep < (int)at, "r%d op %zu depends on later op %d", me_, at, dep);
      deps.push_back(dep);
    }
    if (deps.size() > 1) std::sort(deps.begin(), deps.end());
    op.deps = std::move(deps);
  }
}

void RankPlanner::run(RankPlanResult& out) {
  work_.entriesRead += in_.roundChunks.size();
  roundBase_ = roundBases(in_.roundChunks, opt_);
  directPos_ = directPositions(roundBase_, in_.roundChunks, creditWindow(opt_));
  if (releaseWriterOf(topo_, me_) >= 0) {  // the first of its round-1 writers
    uint64_t total;
    payload(1, 0, &total);
    released_ = releasedHere(topo_, opt_, chunkCount(total, opt_, isLastRound(1, nNodes_)));
  }
  addEntry();
  addIntraNode();
  for (int k = 1; k < nNodes_; ++k) {
    if (topo_.nodeSize(topo_.sendNode(node_, k)) > 1) addWriterChunks(k);
    if (L_ > 1) addRelayChunks(k);
    addDirect(k);
  }
  joinForwards();
  addCredits();
  addFinalWaits();
  addRelease();
  sortInto(out.plan);
  quietEarlierPuts(topo_, me_, opt_, out.plan.ops);
  out.relayStepsAfter = step_;
  out.work = work_;
}

}  // namespace

RankPlanResult makeRankPlan(const Topology& topo, const Options& options, const RankInputs& in) {
  RankPlanResult out;
  makeRankPlan(topo, options, in, out);
  return out;
}

void makeRankPlan(const Topology& topo, const Options& options, const RankInputs& in,
                  RankPlanResult& out) {
  const size_t n = (size_t)topo.nRanks(), nNodes = (size_t)topo.nNodes();
  RMACC_ARG_CHECK(in.rank >= 0 && (size_t)in.rank < n, "rank %d outside 0..%zu", in.rank, n - 1);
  const size_t L = (size_t)topo.nodeSize(topo.nodeOf(in.rank));
  const size_t W = (size_t)relayWriterSlots(topo, in.rank);
  RMACC_ARG_CHECK(in.send.size() == n && in.recv.size() == n,
                  "send/recv counts have %zu/%zu entries, expected %zu", in.send.size(),
                  in.recv.size(), n);
  RMACC_ARG_CHECK(in.relayIn.size() == nNodes * W * L && in.roundChunks.size() == nNodes &&
                      in.writerStep.size() == nNodes && in.writerOffset.size() == nNodes,
                  "relay inputs sized %zu/%zu/%zu/%zu, expected %zu/%zu/%zu/%zu", in.relayIn.size(),
                  in.roundChunks.size(), in.writerStep.size(), in.writerOffset.size(),
                  nNodes * W * L, nNodes, nNodes, nNodes);
  RMACC_ARG_CHECK(in.forwardSignals.size() == L && in.forwardLastBatch.size() == L,
                  "forward inputs have %zu/%zu entries, expected %zu", in.forwardSignals.size(),
                  in.forwardLastBatch.size(), L);
  RMACC_ARG_CHECK(options.slots >= 2, "relay slots must be >= 2, got %d", options.slots);
  RMACC_ARG_CHECK(options.slotBytes > 0, "relay slot size must be > 0");
  RMACC_ARG_CHECK(options.maxPutBytes > 0, "max put size must be > 0");
  thread_local Scratch scratch;
  RankPlanner(topo, options, in, scratch).run(out);
}

}  // namespace rmacc::plan
