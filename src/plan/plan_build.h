// Private to src/plan: the pieces both planners build ops from (planner.cc, the global
// reference, and rank_planner.cc, one rank's part). Sharing them keeps the two from
// disagreeing on what an op looks like; what ops exist and in which order each planner decides
// on its own, and tests/rank_planner_test.cc checks that they agree.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "plan/plan.h"

namespace rmacc::plan {

// Sort key of an op: (raw batch, phase). See planner.cc for why this order is deadlock-free.
enum Phase : int {
  kPhaseStart = 0,   // entry signals and carried credits: no deps
  kPhaseEntryWait,   // waits for entry signals
  kPhaseRelayWait,   // relay data of a chunk put in the previous batch
  kPhaseForward,     // CE forwards of that chunk
  kPhasePut,         // intra-node CE puts, self copy, relay and direct proxy puts; a writer's
                     // wait for the credit of a relay chunk too, drafted right before that
                     // chunk's put: on its proxy-put lane (on the proxy-wait lane it would
                     // queue behind the relay-data waits of the rank's own forwards), and in
                     // the same phase, so that where small rounds share a position each
                     // round's put follows its own credit, not every round's
                     // (docs/decisions.md#credit-wait-lane)
  kPhaseCredit,      // credit for the step that reuses the slot, after those forwards; after
                     // this batch's puts, which share its proxy-put lane and must not queue
                     // behind forwards they do not depend on
  kPhaseFinal,       // receive completion waits (completionKeyBatch)
  kNumPhases
};
constexpr int kFinalBatch = INT_MAX / kNumPhases - 1;  // bounds the pipeline's positions

// The sort batch of a rank's completion wait on a source whose last data to it is put or
// forwarded at batch `last`: the next position, on the CE-wait lane, which nothing else uses
// after the entry waits. So the waits are checked while the call's data arrives, the direct
// puts' from remote rail peers round by round, on a stream of their own where a rank has
// sources on two or more other nodes (plan/completion_waits.h), and a call's tail is the waits
// on its last round's sources alone. At the end of the lanes they would run one after another
// (~1 us of stream time each) once the last relay wait or the last forward was through; on the
// proxy-wait lane a wait on a large, late direct put would hold up the relay waits behind it
// (docs/decisions.md#completion-waits).
inline int completionKeyBatch(int last) { return last + 1; }

// Local rank of the m-th block (m = 0 .. L-2) of a relay payload, on a node of L ranks, into
// the relay of local rank `relay`: the relay's node-mates in local-rank order starting after the
// relay (its own block goes direct). Rotated so that the relays of a node, forwarding at the
// same time, start on different peers and end on different peers: in plain local order every
// relay's first forward would go to local rank 0 and its last to rank L-1, whose NVLink
// ingress would then carry L-1 forwards at once (docs/decisions.md#payload-order). Every party
// that lays out or reads a payload uses this order.
inline int payloadLocal(int relay, int L, int m) { return (relay + 1 + m) % L; }

// Order of a rank's completion waits on sources whose last data comes in the same batch: a
// node-mate's last forwards (payloadLocal) and its intra-node puts (Planner::addIntraNode) both
// reach local rank `me` from local rank j at position (me - j - 1) mod L, so waiting in that
// order lets the later signals land while the earlier waits are checked; in local-rank order
// the first wait would often be on the last signal to land and the other waits, each ~1 us of
// stream time, would all come after it. Remote sources, where they tie with those, come after
// them in the order of the node rounds their data comes in (rank order within a round): the
// last position's direct puts land round after round (docs/decisions.md#completion-waits).
inline int64_t finalWaitOrder(const Topology& topo, int me, int src) {
  if (!topo.sameNode(me, src)) {
    const int round = topo.recvRound(topo.nodeOf(me), topo.nodeOf(src));
    return (int64_t)topo.nodeSize(topo.nodeOf(me)) + (int64_t)round * topo.nRanks() + src;
  }
  const int L = topo.nodeSize(topo.nodeOf(me));
  return (topo.localRankOf(me) - topo.localRankOf(src) - 1 + 2 * L) % L;
}

// The order both planners draft rank `me`'s completion waits in: by completionKeyBatch of the
// source's last data batch `last`, then finalWaitOrder.
inline std::pair<int, int64_t> completionWaitOrder(const Topology& topo, int me, int src,
                                                   int last) {
  return {completionKeyBatch(last), finalWaitOrder(topo, me, src)};
}

// One block of a round payload: the bytes the writer sends to `dest`, at `start` in the payload.
struct Block {
  int dest;
  uint64_t start;
  uint64_t len;
};

struct Draft {
  Op op;
  int64_t key;
};

Op putOp(Lane lane, int peer, Loc src, Loc dst, uint64_t bytes, int ctx, int sig,
         std::vector<int> deps);
Op waitOp(Lane lane, int peer, int ctx, int sig, uint64_t count);
// The block `rank` sends itself: send block `rank` to receive block `rank`, on the CE lane.
Op selfCopyOp(int rank, uint64_t bytes);
std::vector<int> depsOf(std::initializer_list<int> ids);

// Calls f(offset, length) for the pieces of at most maxPut bytes that cover [0, len).
template <typename F>
void forEachPiece(uint64_t len, uint64_t maxPut, F&& f) {
  for (uint64_t off = 0; off < len; off += maxPut) f(off, std::min(maxPut, len - off));
}
inline uint64_t pieceCount(uint64_t len, uint64_t maxPut) { return (len + maxPut - 1) / maxPut; }
// Appends to `out` the sources of payload bytes [lo, hi): one segment per block they overlap,
// in payload order.
void appendSegments(const std::vector<Block>& blocks, uint64_t lo, uint64_t hi,
                    std::vector<Segment>& out);
// A put whose gather holds one segment reads it as its plain src (nothing to gather).
void settleGather(Op& op);
// Bytes per relay chunk of one writer's round payload of `total` bytes (its bytes for one relay
// in one node round): a slot, or less to make Options::minChunksPerRound chunks of at least
// minChunkBytes (in the call's last round, `lastRound`, at least lastRoundMinChunks). A function
// of the total and of whether the round is the last alone, so the global planner, the per-rank
// planner, the count exchange and the verifier, which all see both, cut a payload the same way.
uint64_t chunkBytes(uint64_t total, const Options& options, bool lastRound);
// Relay chunks (relay steps) of such a payload: chunk c is [c * chunkBytes, (c+1) * chunkBytes).
inline uint64_t chunkCount(uint64_t total, const Options& options, bool lastRound) {
  const uint64_t chunk = chunkBytes(total, options, lastRound);
  return (total + chunk - 1) / chunk;
}
// Whether node round k (of 1 .. nNodes - 1, in schedule order) is a call's last.
inline bool isLastRound(int k, int nNodes) { return k == nNodes - 1; }
// The relay's forwards of one block at [start, start + len) of a payload cut into chunks of
// `chunk` bytes, each part cut again at maxPut: how many (a signal each), and one past the last
// chunk the block touches (0 for an empty block). The count exchange and MatrixInputs both
// derive a receiver's forward signals from it.
struct BlockForwards {
  uint64_t pieces = 0;
  uint64_t endChunk = 0;
};
inline BlockForwards blockForwards(uint64_t start, uint64_t len, uint64_t chunk, uint64_t maxPut) {
  BlockForwards f;
  for (uint64_t c = start / chunk; len > 0 && c * chunk < start + len; ++c) {
    const uint64_t lo = std::max(start, c * chunk), hi = std::min(start + len, (c + 1) * chunk);
    f.pieces += pieceCount(hi - lo, maxPut);
    f.endChunk = c + 1;
  }
  return f;
}

// Whether a communicator of nNodes orders its node rounds 1, N-1, 2, N-2, ...
// (Topology::pairedRoundDeltas): where slots are fitted (fitsSlots). The two directions
// between a pair of nodes then go in adjacent rounds, so a relay's credits and entry signals to
// a writer of the other node go out before its own data to that writer, not behind it on their
// queue pair (with NCCL's triangular order the reverse round falls anywhere).
bool usePairedRounds(int nNodes, const Options& options);
// The options one call is planned with: `base`, or where slots are fitted (fitsSlots) and every
// relay payload of the call (one writer's bytes for one relay in one round,
// communicator-wide) is at most half a slot, twice the slots of half the size. Every party that
// plans or checks a call derives its options from the same largest payload.
Options callOptions(const Options& base, uint64_t largestPayload, int nNodes);
// Whether callOptions gave a call planned with `call` fitted slots (from `base`).
inline bool slotsFitted(const Options& base, const Options& call) {
  return call.slots != base.slots;
}
// Options::fitSlotsFrom as the library sets it for `slots` slots: more node rounds than four
// times the slots (docs/decisions.md#fitted-slots). rmacc-sim plans with the same.
inline int libraryFitSlotsFrom(int slots) { return 4 * slots + 2; }
// Options::fitWindowBytes as the library sets it: 2 MiB, 40 us of a 50 GB/s NIC, about a
// relay's credit loop (docs/decisions.md#fit-window).
inline uint64_t libraryFitWindowBytes() { return 2ull << 20; }
// Options::deepFitBelow as the library sets it: 160 KiB, between the payloads that gain from
// the deepest slots and those that lose (docs/decisions.md#deep-fit).
inline uint64_t libraryDeepFitBelow() { return 160ull << 10; }
// Options::minChunksPerRound as the library sets it on nNodes: 2 up to 5 nodes, else 0 (chunks
// of a slot). With few node rounds the last chunk's forwards are the call's tail; two chunks,
// with the direct put after them at 2 nodes (directPositions), overlap them with the wire; with
// more rounds other rounds hide them and the extra ops cost (docs/decisions.md#min-chunks).
// rmacc-sim plans with the same.
inline int libraryMinChunks(int nNodes) { return nNodes <= 5 ? 2 : 0; }
// Options::lastRoundMinChunks and ::lastRoundMinChunkBytes as the library sets them on nNodes:
// 3 chunks of whole 512 KiB from 3 nodes, off on 2 (its one round is also the first, cut by
// minChunksPerRound). The last round's forwards are the call's tail on every node count;
// cutting only that round costs a put, a wait and a credit or two more per relay and call.
// Units of a whole MiB would leave it whole below 2 MiB (docs/decisions.md#last-round-chunks).
// rmacc-sim plans with the same.
inline int libraryLastRoundMinChunks(int nNodes) { return nNodes > 2 ? 3 : 0; }
inline uint64_t libraryLastRoundMinChunkBytes() { return 512ull << 10; }
// Whether calls on nNodes may get fitted slots (Options::fitSlotsFrom).
inline bool fitsSlots(int nNodes, const Options& options) {
  return options.fitSlotsFrom > 0 && nNodes >= options.fitSlotsFrom;
}
// Whether relays release themselves at the end of each call (Options::releaseRelayUpTo): on
// 2 .. releaseRelayUpTo nodes whose slots are not fitted, where there are relays (a node of two
// ranks or more).
inline bool releasesRelay(const Topology& topo, const Options& options) {
  const int nNodes = topo.nNodes();
  return nNodes >= 2 && nNodes <= options.releaseRelayUpTo && !fitsSlots(nNodes, options) &&
         topo.maxNodeSize() > 1;
}
// The rank a relay's release goes to: its first writer of round 1, whose chunks are the relay's
// first steps of a call whatever the counts (the rank of round 1's sending node on its rail
// with the lowest local rank), or -1 (none).
inline int releaseWriterOf(const Topology& topo, int relay) {
  const int node = topo.nodeOf(relay), i = topo.localRankOf(relay);
  if (topo.nNodes() < 2 || topo.nodeSize(node) < 2) return -1;
  const int from = topo.recvNode(node, 1);
  return i < topo.nodeSize(from) ? topo.rankAt(from, i) : -1;
}
// The relay whose release goes to `writer` (releaseWriterOf), or -1 (none): its rail peer on
// round 1's receiving node, where it is that relay's first writer of the round.
inline int releaseRelayOf(const Topology& topo, int writer) {
  if (topo.nNodes() < 2) return -1;
  const int b = topo.sendNode(topo.nodeOf(writer), 1), i = topo.localRankOf(writer);
  return topo.nodeSize(b) > 1 && i < topo.nodeSize(b) ? topo.rankAt(b, i) : -1;
}
// The steps of a call that the release of the call before frees (Options::releaseRelayUpTo):
// its first round's chunks where that round is cut into Options::minChunksPerRound of them
// (counts may differ from call to call, so the number cannot follow them), within the window.
inline uint64_t releasedSteps(const Options& options) {
  return (uint64_t)std::clamp(options.minChunksPerRound, 1, creditWindow(options));
}
// Calls f(v) for the relay's steps of this call (v < have) whose forwards free the slot of its
// step u (counted from the call's first): u - W, and u - S where the window W is narrower than
// the slots S. What a credit for step u waits for (planners' addCredits, addRelease).
template <typename F>
void forEachFreeingStep(size_t u, size_t have, const Options& options, F&& f) {
  const size_t window = (size_t)creditWindow(options), slots = (size_t)options.slots;
  if (u >= window && u - window < have) f(u - window);
  if (window < slots && u >= slots && u - slots < have) f(u - slots);
}
// Calls f(from, to) for each run [from, to) of two or more of a relay's consecutive steps
// (0 .. n - 1) at one position (posOf(s)) whose chunks (bytesOf(s)) are all below Options::
// joinForwardsBelow, at most Options::joinForwardsSteps of them: their forwards leave together
// (planners' joinForwards).
template <typename PosOf, typename BytesOf, typename F>
void forEachJoinedGroup(size_t n, const Options& options, PosOf&& posOf, BytesOf&& bytesOf,
                        F&& f) {
  auto small = [&](size_t s) { return bytesOf(s) < options.joinForwardsBelow; };
  const size_t most = options.joinForwardsSteps > 0 ? (size_t)options.joinForwardsSteps : n;
  for (size_t from = 0, to; from < n; from = to) {
    to = from + 1;
    if (!small(from)) continue;
    while (to < n && to - from < most && posOf(to) == posOf(from) && small(to)) ++to;
    if (to - from > 1) f(from, to);
  }
}
// Options::joinForwardsBelow as the library sets it: 384 KiB, below the chunk sizes whose
// forwards lose by waiting for each other (docs/decisions.md#joined-forwards).
inline uint64_t libraryJoinForwardsBelow() { return 384ull << 10; }
// Options::releaseRelayUpTo as the library sets it: every node count whose slots are not
// fitted with the default 4 slots (libraryFitSlotsFrom(4) - 1), where the release goes to each
// relay's first writer alone (releasedHere). At 2 the one round is cut into minChunksPerRound =
// 2 chunks, so the release frees a call's whole round; on 3 it needs the entry signals to other
// peers after the first relay puts (earlySignalPhase). One writer only: a release to every
// writer costs N - 1 writes out and in per call (docs/decisions.md#relay-release).
inline int libraryReleaseRelayUpTo() { return 17; }
// The steps of a call at a relay that the release of the call before freed: the release goes
// to one writer, the relay's first writer of round 1 (the rank of round 1's sending node on its
// rail, whose chunks are the call's first steps there), and frees the slots of the first
// releasedSteps() steps, as many of them as that writer puts (`firstWriterChunks`; the counts
// decide it, and both ends know them). Other writers' steps keep their credits.
inline uint64_t releasedHere(const Topology& topo, const Options& options,
                             uint64_t firstWriterChunks) {
  return releasesRelay(topo, options) ? std::min(releasedSteps(options), firstWriterChunks) : 0;
}
// Whether relay step t (counted over calls; callStep: counted from the relay's first step of
// this call) waits for a credit: past the window, or always where slots are fitted; not the
// call's first `released` steps (releasedHere: the release of the call before freed their
// slots).
inline bool stepNeedsCredit(uint64_t callStep, uint64_t t, const Options& options, int nNodes,
                            uint64_t released) {
  if (callStep < released) return false;
  return fitsSlots(nNodes, options) || t >= (uint64_t)creditWindow(options);
}

// Whether a writer's entry wait on its relay of another node (the rank it also puts straight
// into) is its credit wait for its first chunk there, step `callStep` of the relay's call
// (absolute step t). A credit says the relay entered the call: one carried from the relay's
// start is sent with no deps at the start of its call, one of this call after forwards of this
// call, and the relay cannot finish the call before the direct put landed (it waits for it).
// The relay then sends no entry signal to that writer: one signal fewer for each proxy, out and
// in, per pair of nodes and call. Used for carried credits (the first window), and for every
// credit in a call whose slots are fitted (`fitted`, callOptions): calls of small payloads on
// many nodes, which are proxy-bound. Past the first window of other calls the entry signals
// stay: they keep the nodes' rounds in step (docs/decisions.md#entry-by-credit).
inline bool entryByCredit(uint64_t callStep, uint64_t t, const Options& options, int nNodes,
                          bool fitted, uint64_t released) {
  return options.entrySignals && (fitted || callStep < (uint64_t)creditWindow(options)) &&
         stepNeedsCredit(callStep, t, options, nNodes, released);
}

// Whether `rank` puts to `peer` at pipeline position `pos` (roundBases' result): the rail peer
// of a round whose positions hold `pos` takes its relay chunks and its direct put.
inline bool putsToAt(const Topology& topo, int rank, const std::vector<int>& roundBase, int pos,
                     int peer) {
  const int node = topo.nodeOf(rank), nNodes = topo.nNodes();
  for (int k = 1; k < nNodes; ++k)
    if (roundBase[k] <= pos && pos < std::max(roundBase[k + 1], roundBase[k] + 1) &&
        topo.railPeer(rank, topo.sendNode(node, k)) == peer)
      return true;
  return false;
}
// Where a signal without deps that rank `from` sends `to` at position `pos`, for a wait at
// position `waitPos`, goes on its proxy-put lane: at the position's start, or where relays
// release themselves (the position's relay puts wait for nothing) and the wait comes at a later
// position, after the position's puts (kPhaseCredit, still below the wait's key), so that the
// first data leaves first: each of the proxy's signals would hold it up by a write out while
// the proxy also takes in its peers', and the signals are needed a round later. Not where
// those puts go to `to` itself: a signal does not pass data to its own peer, and behind a
// chunk on a wire without pacing it would come late. Not without relays (one rank a node,
// releasesRelay): there the position's puts are direct puts, which small calls would wait on
// (docs/decisions.md#early-signal-phase).
inline Phase earlySignalPhase(const Topology& topo, const Options& options,
                              const std::vector<int>& roundBase, int from, int to, int pos,
                              int waitPos) {
  const bool after = pos < waitPos && releasesRelay(topo, options) &&
                     !putsToAt(topo, from, roundBase, pos, to);
  return after ? kPhaseCredit : kPhaseStart;
}

// Pipeline positions of the entry signal and of the entry wait between a writer and a rank of
// another node into which it puts directly in round k (Options::entryLead), from the round's
// first position: the wait just before the round's puts, the signal entryLead positions earlier
// (at the start when negative). Either way the signal's key (signal, signalPhase) is below the
// wait's (wait, kPhaseEntryWait), which is all planner.cc's deadlock argument asks of it
// (earlySignalPhase).
struct EntryPositions {
  int signal, wait;
  Phase signalPhase = kPhaseStart;
};
// From `dest` to its remote writer `writer` whose direct put is at position `directPos`.
inline EntryPositions remoteEntryPositions(int directPos, const Options& options,
                                           const Topology& topo,
                                           const std::vector<int>& roundBase, int dest,
                                           int writer) {
  if (options.entryLead < 0) return {0, 0};
  const int signal = std::max(0, directPos - options.entryLead);
  return {signal, directPos,
          earlySignalPhase(topo, options, roundBase, dest, writer, signal, directPos)};
}

// Marks Op::quiet (Options::quietPuts) on rank `rank`'s ops in lane order: every CE put with
// data on the data signal but the last to each receiver. Both planners call it on their sorted
// lists: it reads nothing but the rank's own ops.
void quietEarlierPuts(const Topology& topo, int rank, const Options& options,
                      std::vector<Op>& ops);

// Orders one rank's drafts by key (stable) and remaps deps to the new indices. `rank` is for
// error messages only.
std::vector<Op> sortDrafts(std::vector<Draft>& drafts, int rank);

// First pipeline position of each round (index nNodes: one past the last), from the number of
// relay chunks each round k >= 1 takes at its busiest relay. A round takes that many positions,
// at least one (for the direct puts); consecutive rounds of at most one chunk share a position,
// roundsPerBatch(options) of them at most (fewer batches when rounds carry little data).
std::vector<int> roundBases(const std::vector<uint64_t>& roundChunks, const Options& options);
// Pipeline position of each round's direct puts (index 0 unused), from roundBases' result and
// the same chunk counts: the round's last, so that they leave after the round's relay chunks and
// the forwards of the last chunk overlap them on the wire instead of following it. With one
// node round (2 nodes) only where the round's chunks fit the credit window `window` (none waits
// for a credit freed in the call); else its first: nothing else then fills the writer's NIC
// while the round's later chunks wait for credits, and a large direct block (a hot receiver's)
// at the end would be the call's tail (docs/decisions.md#direct-after-chunks).
std::vector<int> directPositions(const std::vector<int>& base,
                                 const std::vector<uint64_t>& roundChunks, int window);

}  // namespace rmacc::plan
