// The receive-side PXN AlltoAllV planner (DESIGN.md §2).
//
// Lane order. Ops are drafted with a sort key (raw batch, phase) and each rank's list is then
// stably sorted by key, which fixes the order of every lane. Every true dependency -- a dep on
// the same rank, or a signal from one rank to the wait it satisfies on another -- goes from a
// smaller (key, draft) to a larger one; across ranks, from a strictly smaller key:
//   entry signal (q,Start) -> entry wait (p,EntryWait), q <= p -> puts/forwards of batch p or
//   later (between node-mates q = p = 0; to a remote writer p is the position of its direct
//   put, directPositions, and q = p - entryLead, remoteEntryPositions in plan_build.h, which
//   moves the signal to (q,Credit) where q < p (earlySignalPhase); or the entry is
//   the writer's credit wait for its first chunk at that rank, entryByCredit);
//   credit wait (p,Put) -> relay put (p,Put), drafted after it -> relay wait (p+1,RelayWait)
//   -> forwards (p+1,Forward) -> credit for step t+W (p+1,Credit) -> its credit wait at
//   (p',Put) with p' >= p+2, because one relay takes at most W/2 steps per position
//   (one per position in a round of several chunks; small rounds share a position only
//   roundsPerBatch <= W/2 at a time, plan_build.cc roundBases). W = creditWindow(options) <= S
//   (S, the slot count, by default); the credit for step t+W also waits for the forwards of
//   step t+W-S when W < S, which have a smaller key still. A carried credit (0,Start), or
//   (0,Credit) for a step put after position 0 (earlySignalPhase) -> its credit wait (p,Put).
//   A relay's release credit (last position, Credit) follows forwards of this call only, and
//   the writer's wait for it is a completion wait: nothing depends on it (addRelease).
// Deps between equal keys go from a credit wait to puts drafted after it (its relay put; the
// direct put whose entry it is). So the unfinished op with the smallest (key, draft) never
// waits on anything unfinished: with lanes sorted that way there is no deadlock, whatever the
// counts. Matching waits to signals is also in key order on both ends, so cumulative counts
// pair each wait with the intended signals.
#include "plan/planner.h"

#include <algorithm>
#include <climits>
#include <map>
#include <numeric>

#include "core/error.h"
#include "plan/plan_build.h"
#include "plan/plan_internal.h"

namespace rmacc::plan {
namespace {

// What relay R receives in one round from one writer W: W's blocks for R's node-mates, back to
// back in local-rank order from R's successor on (payloadLocal), empty blocks skipped (PRIOR_ART §1.1 packing; R's own block goes
// direct). With nodes of different sizes R may have several writers in a round (all ranks of
// the sending node on R's rail, Topology::railLocal), or none.
struct Payload {
  int writer = -1;
  std::vector<Block> blocks;
  uint64_t total = 0;
};

// One relay step of this call on a relay rank: who wrote it, at which pipeline position, and
// the forward ops (draft ids) whose completion frees its slot.
struct Step {
  int writer;
  int pos;
  uint64_t bytes;  // of the chunk
  int data;        // the relay's wait for it
  std::vector<int> forwards;
};

class Planner {
 public:
  Planner(const Topology& topo, const std::vector<uint64_t>& bytes, const Options& options,
          const Carry& before)
      : topo_(topo), bytes_(bytes), opt_(options), n_(topo.nRanks()), drafts_(n_),
        entryWait_((size_t)n_ * n_, -1), dataCount_((size_t)n_ * n_, 0),
        lastDataBatch_((size_t)n_ * n_, 0), relaySteps_(n_) {
    steps_ = before.relaySteps.empty() ? std::vector<uint64_t>(n_, 0) : before.relaySteps;
    before_ = steps_;
  }

  Plan run();

 private:
  uint64_t count(int src, int dst) const { return bytes_[(size_t)src * n_ + dst]; }
  int add(int rank, Op op, int batch, Phase phase, int keyBatch = -1);
  std::vector<int> writersInto(int dest) const;
  std::vector<Payload> payloadsOf(int relay, int k) const;
  uint64_t largestPayload() const;
  void addEntry();
  void addIntraNode(int src);
  void layoutRounds();
  void addRelay(int relay, int k);
  // Chunk c of payload p (in round k) at pipeline position pos.
  void addChunk(int relay, int k, const Payload& p, uint64_t c, int pos);
  void addDirect(int src, int k);
  void joinForwards(int relay);
  void addCredits(int relay);
  void addRelease(int relay);
  void addReleaseWaits(int writer);
  void addFinalWaits(int dest);
  void noteData(int dest, int src, int batch);
  void finish(Plan& plan);

  const Topology& topo_;
  const std::vector<uint64_t>& bytes_;
  Options opt_;  // the call's (callOptions, set by run())
  const int n_;
  std::vector<std::vector<Draft>> drafts_;
  std::vector<int> entryWait_;          // [writer*n + dest]: writer's entry wait on dest, or -1
  std::vector<uint64_t> dataCount_;     // [dest*n + src]: kSigData signals dest gets from src
  std::vector<int> lastDataBatch_;      // [dest*n + src]: batch of the last of them
  std::vector<int> roundBase_;          // first pipeline position of round k
  std::vector<int> directPos_;          // position of round k's direct puts (directPositions)
  std::vector<uint64_t> before_;        // relay steps of earlier calls
  std::vector<uint64_t> steps_;         // next relay step per relay rank
  std::vector<std::vector<Step>> relaySteps_;  // this call's steps per relay rank
  std::vector<char> entryByCredit_;     // [writer*n + relay]: its first credit wait is the entry
  bool fitted_ = false;                 // the call's slots are fitted (callOptions)
  std::vector<uint64_t> released_;      // [relay]: its steps the last call's release freed
  void markReleased();
  void markEntryByCredit();
};

// The steps of each relay that the last call's release freed (releasedHere): as many of the
// first releasedSteps() as its first writer (releaseWriterOf, the first of its round-1
// payloads) puts there.
void Planner::markReleased() {
  released_.assign(n_, 0);
  if (!releasesRelay(topo_, opt_)) return;
  for (int r = 0; r < n_; ++r) {
    if (releaseWriterOf(topo_, r) < 0) continue;
    released_[r] = releasedHere(
        topo_, opt_, chunkCount(payloadsOf(r, 1)[0].total, opt_, isLastRound(1, topo_.nNodes())));
  }
}

// Which remote writers' entry is their first credit wait (entryByCredit): a relay's steps of
// this call come round by round, each round's writers in turn, chunk by chunk.
void Planner::markEntryByCredit() {
  entryByCredit_.assign((size_t)n_ * n_, 0);
  const uint64_t window = (uint64_t)creditWindow(opt_);
  for (int r = 0; r < n_; ++r) {
    uint64_t s = 0;
    for (int k = 1; k < topo_.nNodes() && (s < window || fitted_); ++k) {
      int pos = roundBase_[k];  // of the payload's first chunk: not after the direct put
      for (const Payload& p : payloadsOf(r, k)) {
        const uint64_t c = chunkCount(p.total, opt_, isLastRound(k, topo_.nNodes()));
        if (c > 0 && pos <= directPos_[k] &&
            entryByCredit(s, before_[r] + s, opt_, topo_.nNodes(), fitted_, released_[r]))
          entryByCredit_[(size_t)p.writer * n_ + r] = 1;
        s += c;
        pos += (int)c;
      }
    }
  }
}

int Planner::add(int rank, Op op, int batch, Phase phase, int keyBatch) {
  op.batch = batch;
  int64_t key = (int64_t)(keyBatch < 0 ? batch : keyBatch) * kNumPhases + phase;
  drafts_[rank].push_back({std::move(op), key});
  return (int)drafts_[rank].size() - 1;
}

void Planner::noteData(int dest, int src, int batch) {
  size_t k = (size_t)dest * n_ + src;
  dataCount_[k]++;
  lastDataBatch_[k] = std::max(lastDataBatch_[k], batch);
}

// The ranks that write into `dest`'s receive buffer this call: local senders, local relays
// that forward to it, and remote rail peers that put straight into it.
std::vector<int> Planner::writersInto(int dest) const {
  std::vector<int> writers;
  const int node = topo_.nodeOf(dest);
  for (int w = 0; w < n_; ++w) {
    if (w == dest) continue;
    bool writes = count(w, dest) > 0 &&
                  (topo_.sameNode(w, dest) || topo_.railPeer(w, node) == dest);
    // A node-mate also writes by forwarding what the ranks on its rail send here.
    const int L = topo_.nodeSize(node), lw = topo_.localRankOf(w);
    for (int a = 0; !writes && topo_.sameNode(w, dest) && a < topo_.nNodes(); ++a) {
      for (int i = lw; !writes && a != node && i < topo_.nodeSize(a); i += L)
        writes = count(topo_.rankAt(a, i), dest) > 0;
    }
    if (writes) writers.push_back(w);
  }
  return writers;
}

// Entry: until `dest` has entered this call its stream may still use its receive buffer (the
// seed notes' memset bug), so each writer waits for dest's zero-byte entry signal before its
// first write into dest. One signal per (dest, writer) pair and call; every write of that
// writer into dest depends on that one wait. Relay buffers need none: credits guard them.
// A remote writer's only write into dest is its direct put of one round, so its signal and
// wait are placed by that put (Options::entryLead) and the proxies send and take in one per
// round instead of all of them before the first put; where dest is also the writer's relay and
// the writer's first chunk there waits for a credit that says dest entered the call, that
// credit wait is the entry wait and dest sends no entry signal (entryByCredit).
void Planner::addEntry() {
  if (!opt_.entrySignals) return;
  std::vector<int> roundFrom(topo_.nNodes(), 0);  // [node]: the round whose writers sit there
  for (int d = 0; d < n_; ++d) {
    const int node = topo_.nodeOf(d);
    for (int k = 1; k < topo_.nNodes(); ++k) roundFrom[topo_.recvNode(node, k)] = k;
    for (int w : writersInto(d)) {
      const bool local = topo_.sameNode(w, d);
      if (!local && entryByCredit_[(size_t)w * n_ + d]) continue;  // its first credit wait
      // A remote writer only puts into d directly, in the round that pairs their nodes.
      const EntryPositions at =
          local ? EntryPositions{0, 0}
                : remoteEntryPositions(directPos_[roundFrom[topo_.nodeOf(w)]], opt_, topo_,
                                       roundBase_, d, w);
      add(d, putOp(local ? Lane::kCePut : Lane::kProxyPut, w, {}, {}, 0, kPlanCtxEntry, 0, {}),
          at.signal, at.signalPhase);
      entryWait_[(size_t)w * n_ + d] =
          add(w, waitOp(local ? Lane::kCeWait : Lane::kProxyWait, d, kPlanCtxEntry, 0, 1),
              at.wait, kPhaseEntryWait);
    }
  }
}

// Intra-node blocks: CE puts in rotated local order (rank i starts at i+1, so the node's
// ranks do not all hit the same peer first), the block to itself last, as a local copy.
void Planner::addIntraNode(int src) {
  const int node = topo_.nodeOf(src), i = topo_.localRankOf(src), L = topo_.nodeSize(node);
  for (int step = 1; step < L; ++step) {
    const int d = topo_.rankAt(node, (i + step) % L);
    const int entry = entryWait_[(size_t)src * n_ + d];
    forEachPiece(count(src, d), opt_.maxPutBytes, [&](uint64_t off, uint64_t len) {
      add(src,
          putOp(Lane::kCePut, d, {Region::kSend, d, off}, {Region::kRecv, src, off}, len,
                kPlanCtxColl, kSigData, depsOf({entry})),
          0, kPhasePut);
      noteData(d, src, 0);
    });
  }
  if (count(src, src) > 0) add(src, selfCopyOp(src, count(src, src)), 0, kPhasePut);
}

// The relay's round-k payloads, one per writer on its rail, writers in local-rank order.
std::vector<Payload> Planner::payloadsOf(int relay, int k) const {
  std::vector<Payload> ps;
  const int node = topo_.nodeOf(relay), i = topo_.localRankOf(relay), L = topo_.nodeSize(node);
  const int from = topo_.recvNode(node, k);
  for (int wi = i; wi < topo_.nodeSize(from) && L > 1; wi += L) {
    Payload p;
    p.writer = topo_.rankAt(from, wi);
    for (int m = 0; m + 1 < L; ++m) {
      const int d = topo_.rankAt(node, payloadLocal(i, L, m));
      const uint64_t len = count(p.writer, d);
      if (len == 0) continue;
      p.blocks.push_back({d, p.total, len});
      p.total += len;
    }
    ps.push_back(std::move(p));
  }
  return ps;
}

// The largest relay payload of the call (callOptions).
uint64_t Planner::largestPayload() const {
  uint64_t most = 0;
  for (int k = 1; k < topo_.nNodes(); ++k)
    for (int r = 0; r < n_; ++r)
      for (const Payload& p : payloadsOf(r, k)) most = std::max(most, p.total);
  return most;
}

// Round k occupies as many pipeline positions as the relay with the most chunks in it takes
// (at least one, for the direct puts). A relay's writers follow one another: chunk c of its
// m-th writer is put in batch roundBase_[k] + (chunks of writers 0..m-1) + c and forwarded in
// the next one, so a relay's steps of such a round occupy distinct positions (the deadlock
// argument above needs at most S/2 of them per position).
void Planner::layoutRounds() {
  std::vector<uint64_t> chunks(topo_.nNodes(), 0);
  for (int k = 1; k < topo_.nNodes(); ++k) {
    for (int r = 0; r < n_; ++r) {
      uint64_t total = 0;
      for (const Payload& p : payloadsOf(r, k))
        total += chunkCount(p.total, opt_, isLastRound(k, topo_.nNodes()));
      chunks[k] = std::max(chunks[k], total);
    }
  }
  roundBase_ = roundBases(chunks, opt_);
  directPos_ = directPositions(roundBase_, chunks, creditWindow(opt_));
}

void Planner::addRelay(int relay, int k) {
  int pos = roundBase_[k];
  for (const Payload& p : payloadsOf(relay, k)) {
    const uint64_t chunks = chunkCount(p.total, opt_, isLastRound(k, topo_.nNodes()));
    for (uint64_t c = 0; c < chunks; ++c) addChunk(relay, k, p, c, pos++);
  }
}

// One relay step: the writer's put of payload [c*chunk, ...) into slot t mod S of the relay,
// the relay's wait for it, and its forwards to the final receive blocks.
void Planner::addChunk(int relay, int k, const Payload& p, uint64_t c, int pos) {
  const uint64_t chunk = chunkBytes(p.total, opt_, isLastRound(k, topo_.nNodes()));
  const uint64_t t = steps_[relay]++;
  const uint64_t lo = c * chunk, hi = std::min(p.total, lo + chunk);
  const uint64_t slotOff = (t % (uint64_t)opt_.slots) * opt_.slotBytes;
  const int w = p.writer;
  // Slot reuse: step t overwrites step t-S, so the writer waits for the relay's credit; with
  // pacing it waits for step t-W's (W <= S), which also says step t-S is forwarded.
  int credit = -1;
  if (stepNeedsCredit(t - before_[relay], t, opt_, topo_.nNodes(), released_[relay])) {
    credit = add(w, waitOp(Lane::kProxyPut, relay, kPlanCtxCredit, kSigStep, 1), pos, kPhasePut);
    int& entry = entryWait_[(size_t)w * n_ + relay];
    if (c == 0 && entryByCredit_[(size_t)w * n_ + relay] && entry < 0) entry = credit;
  }
  // The chunk goes in one put (a gather of its blocks' segments) per maxPutBytes, each with
  // one signal: the relay waits for the pieces, not for every block of them.
  forEachPiece(hi - lo, opt_.maxPutBytes, [&](uint64_t off, uint64_t len) {
    Op put = putOp(Lane::kProxyPut, relay, {}, {Region::kRelay, -1, slotOff + off}, len,
                   kPlanCtxColl, kSigRelay, depsOf({credit}));
    appendSegments(p.blocks, lo + off, lo + off + len, put.gather);
    settleGather(put);
    add(w, std::move(put), pos, kPhasePut);
  });
  const int data = add(relay,
                       waitOp(Lane::kProxyWait, w, kPlanCtxColl, kSigRelay,
                              pieceCount(hi - lo, opt_.maxPutBytes)),
                       pos + 1, kPhaseRelayWait);
  Step step{w, pos, hi - lo, data, {}};
  for (const Block& b : p.blocks) {
    const uint64_t segLo = std::max(lo, b.start), segHi = std::min(hi, b.start + b.len);
    if (segLo >= segHi) continue;
    const int entry = entryWait_[(size_t)relay * n_ + b.dest];
    forEachPiece(segHi - segLo, opt_.maxPutBytes, [&](uint64_t off, uint64_t len) {
      step.forwards.push_back(add(
          relay,
          putOp(Lane::kCePut, b.dest, {Region::kRelay, -1, slotOff + segLo - lo + off},
                {Region::kRecv, w, segLo - b.start + off}, len, kPlanCtxColl, kSigData,
                depsOf({data, entry})),
          pos + 1, kPhaseForward));
      noteData(b.dest, relay, pos + 1);
    });
  }
  relaySteps_[relay].push_back(std::move(step));
}

// The block for the rail peer of the round's target node goes straight into its receive buffer,
// after the round's relay chunks (directPositions).
void Planner::addDirect(int src, int k) {
  const int d = topo_.railPeer(src, topo_.sendNode(topo_.nodeOf(src), k));
  const int entry = entryWait_[(size_t)src * n_ + d], pos = directPos_[k];
  forEachPiece(count(src, d), opt_.maxPutBytes, [&](uint64_t off, uint64_t len) {
    add(src,
        putOp(Lane::kProxyPut, d, {Region::kSend, d, off}, {Region::kRecv, src, off}, len,
              kPlanCtxColl, kSigData, depsOf({entry})),
        pos, kPhasePut);
    noteData(d, src, pos);
  });
}

// Where small rounds share a position (roundsPerBatch), a relay has several steps there; each
// step's forwards also wait for the others' chunks, and each step's credit for all of their
// forwards (forEachJoinedGroup), so that the relay's copy stream takes them as one batch of
// copies and then signal writes, one write per receiver (the executor merges writes to one
// signal in a batch), instead of a batch per step, whose signal writes would bound many-node
// calls (docs/decisions.md#joined-forwards). The chunks of one
// position arrive together anyway (the writers' puts share the relay's NIC).
void Planner::joinForwards(int relay) {
  auto& steps = relaySteps_[relay];
  forEachJoinedGroup(steps.size(), opt_, [&](size_t s) { return steps[s].pos; },
                     [&](size_t s) { return steps[s].bytes; },
                     [&](size_t from, size_t to) {
    std::vector<int> all;
    for (size_t s = from; s < to; ++s) {
      all.insert(all.end(), steps[s].forwards.begin(), steps[s].forwards.end());
      for (int f : steps[s].forwards)
        for (size_t o = from; o < to; ++o)
          if (o != s) drafts_[relay][f].op.deps.push_back(steps[o].data);
    }
    for (size_t s = from; s < to; ++s) steps[s].forwards = all;
  });
}

// Credits. The writer of step t >= S overwrites the slot of step t-S, so the relay tells it,
// with a zero-byte proxy put on the credit context, once every forward of step t-S is done.
// With pacing (window W < S) the credit of step t >= W waits for the forwards of step t-W
// too, and goes out after them. When step t-W belonged to an earlier call, the executor
// already guarantees that call is complete on the relay before any op of this one starts, so
// the credit is "carried": sent at the start of this call with no deps. Credits to one writer
// go out in step order (carried ones first, then by position), matching the order of that
// writer's credit waits, so the writer's cumulative count pairs each wait with the credit of
// its own step.
void Planner::addCredits(int relay) {
  const auto& steps = relaySteps_[relay];
  const uint64_t first = before_[relay], window = (uint64_t)creditWindow(opt_);
  for (size_t s = 0; s < steps.size(); ++s) {
    const uint64_t t = first + s;
    // A free relay's first window, or the steps the release of the call before freed.
    if (!stepNeedsCredit(s, t, opt_, topo_.nNodes(), released_[relay])) continue;
    Op credit = putOp(Lane::kProxyPut, steps[s].writer, {}, {}, 0, kPlanCtxCredit, kSigStep, {});
    if (s >= window) {  // step t - window is this call's
      forEachFreeingStep(s, s, opt_, [&](size_t v) {
        credit.deps.insert(credit.deps.end(), steps[v].forwards.begin(), steps[v].forwards.end());
      });
      add(relay, std::move(credit), steps[s - window].pos + 1, kPhaseCredit);
    } else {
      add(relay, std::move(credit), 0,
          earlySignalPhase(topo_, opt_, roundBase_, relay, steps[s].writer, 0, steps[s].pos));
    }
  }
}

// Release (Options::releaseRelayUpTo): one more credit from the relay to its first writer of
// the next call (releaseWriterOf, whatever the counts), for that call's first releasedSteps()
// steps: sent once the forwards of the steps their credits would wait for are done (none where
// those were an earlier call's), after the relay's last put of the call so that it holds up
// none. The writer waits for it among its completion waits, at the end; its first steps of the
// next call then need no credit carried from the relay's start of that call (releasedHere).
// One write out and one in per rank and call: a release to every writer of the next call would
// cost N - 1 of each (docs/decisions.md#relay-release).
void Planner::addRelease(int relay) {
  const int w = releaseWriterOf(topo_, relay);
  if (!releasesRelay(topo_, opt_) || w < 0) return;
  const auto& steps = relaySteps_[relay];
  // As addCredits for the next call's first steps, steps s + j of this one.
  const size_t s = steps.size();
  std::vector<int> deps;
  for (size_t u = s; u < s + releasedSteps(opt_); ++u)
    forEachFreeingStep(u, s, opt_, [&](size_t v) {
      deps.insert(deps.end(), steps[v].forwards.begin(), steps[v].forwards.end());
    });
  add(relay, putOp(Lane::kProxyPut, w, {}, {}, 0, kPlanCtxCredit, kSigRelease, deps),
      roundBase_[topo_.nNodes()], kPhaseCredit);
}

// The writer's side of addRelease: its wait for the release of the relay whose first writer it
// is (releaseRelayOf), a completion wait keyed after the last
// position's puts (and so after the release: a cross-rank dependency goes to a larger key,
// which serial lanes need).
void Planner::addReleaseWaits(int writer) {
  const int r = releaseRelayOf(topo_, writer);
  if (!releasesRelay(topo_, opt_) || r < 0) return;
  const int last = roundBase_[topo_.nNodes()] - 1;
  add(writer, waitOp(Lane::kCeWait, r, kPlanCtxCredit, kSigRelease, 1), last, kPhaseFinal,
      completionKeyBatch(last));
}

// Completion: one wait per source for all the kSigData signals it sends, so when every op of
// the rank is done its receive buffer is complete. Nothing depends on them; they go on the
// CE-wait lane, placed by completionKeyBatch, in completionWaitOrder.
void Planner::addFinalWaits(int dest) {
  std::vector<int> srcs;
  for (int s = 0; s < n_; ++s)
    if (dataCount_[(size_t)dest * n_ + s] > 0) srcs.push_back(s);
  auto order = [&](int s) {
    return completionWaitOrder(topo_, dest, s, lastDataBatch_[(size_t)dest * n_ + s]);
  };
  std::sort(srcs.begin(), srcs.end(), [&](int a, int b) { return order(a) < order(b); });
  for (int s : srcs) {
    const size_t k = (size_t)dest * n_ + s;
    add(dest, waitOp(Lane::kCeWait, s, kPlanCtxColl, kSigData, dataCount_[k]), lastDataBatch_[k],
        kPhaseFinal, completionKeyBatch(lastDataBatch_[k]));
  }
}

// Sorts each rank's drafts by key. Batches keep their raw pipeline positions (a position no
// rank uses is a gap in the numbering): every rank can then number its own ops without knowing
// which positions the others use.
void Planner::finish(Plan& plan) {
  plan.ranks.resize(n_);
  plan.nBatches = 0;
  for (int r = 0; r < n_; ++r) {
    plan.ranks[r].ops = sortDrafts(drafts_[r], r);
    quietEarlierPuts(topo_, r, opt_, plan.ranks[r].ops);
    for (const Op& op : plan.ranks[r].ops) plan.nBatches = std::max(plan.nBatches, op.batch + 1);
  }
}

Plan Planner::run() {
  Plan plan;
  plan.topo = topo_;
  const Options base = opt_;
  opt_ = callOptions(base, largestPayload(), topo_.nNodes());
  fitted_ = slotsFitted(base, opt_);
  plan.options = opt_;
  plan.bytes = bytes_;
  plan.before.relaySteps = before_;
  layoutRounds();  // first: entry signals and waits are placed by round
  markReleased();
  markEntryByCredit();
  addEntry();
  for (int s = 0; s < n_; ++s) addIntraNode(s);
  for (int k = 1; k < topo_.nNodes(); ++k) {
    for (int r = 0; r < n_; ++r) addRelay(r, k);
    for (int s = 0; s < n_; ++s) addDirect(s, k);
  }
  bool anyRelay = false;
  for (int r = 0; r < n_; ++r) {
    joinForwards(r);
    addCredits(r);
    anyRelay = anyRelay || !relaySteps_[r].empty();
  }
  for (int r = 0; r < n_; ++r) {
    addFinalWaits(r);
    addRelease(r);
    addReleaseWaits(r);
  }
  plan.after.relaySteps = steps_;
  plan.relayBytes = anyRelay ? (uint64_t)opt_.slots * opt_.slotBytes : 0;
  finish(plan);
  return plan;
}

}  // namespace

Plan makeAlltoallvPlan(const Topology& topo, const std::vector<uint64_t>& bytes,
                       const Options& options, const Carry& before) {
  const size_t n = (size_t)topo.nRanks();
  RMACC_ARG_CHECK(n > 0, "the topology has no ranks");
  RMACC_ARG_CHECK(bytes.size() == n * n, "byte matrix has %zu entries, expected %zu x %zu",
                  bytes.size(), n, n);
  RMACC_ARG_CHECK(options.slots >= 2, "relay slots must be >= 2, got %d", options.slots);
  RMACC_ARG_CHECK(options.slotBytes > 0, "relay slot size must be > 0");
  RMACC_ARG_CHECK(options.maxPutBytes > 0, "max put size must be > 0");
  RMACC_ARG_CHECK(before.relaySteps.empty() || before.relaySteps.size() == n,
                  "carry has %zu relay counters, expected 0 or %zu", before.relaySteps.size(), n);
  return Planner(topo, bytes, options, before).run();
}

}  // namespace rmacc::plan
