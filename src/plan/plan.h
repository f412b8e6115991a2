// A Plan is the AlltoAllV schedule of DESIGN.md §2 as plain data: for every rank, a list of ops
// on four lanes with explicit dependencies. It is computed by pure code from the byte-count
// matrix and the topology (planner.h), checked by the verifier (verifier.h), printed by
// dump(), and run by the executor (src/exec). Nothing here does I/O or touches a device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/topology.h"

namespace rmacc::plan {

// The four independent streams of work of a rank. Each lane runs its ops in list order; an op
// also waits for its deps (ops of the same rank on any lane).
enum class Lane : uint8_t { kCePut, kCeWait, kProxyPut, kProxyWait };
constexpr int kNumLanes = 4;

// Where bytes are, relative to one call's buffers.
enum class Region : uint8_t {
  kNone,
  kSend,   // the rank's send block for destination `block`: sendbuff + sdispls[block]
  kRecv,   // the rank's receive block from origin `block`: recvbuff + rdispls[block]
  kRelay,  // the rank's relay buffer (offset from its start)
};

struct Loc {
  Region region = Region::kNone;
  int block = -1;       // kSend: destination rank; kRecv: origin rank; else -1
  uint64_t offset = 0;  // bytes into the block (kSend, kRecv) or into the relay buffer
};

// Signal indices inside the collective context (net/signals.h kCtxColl).
enum CollSignal : int {
  kSigData = 0,   // bytes landed in the receiver's recv buffer (direct put or forward)
  kSigRelay = 1,  // bytes landed in the receiver's relay buffer
};

// Signal indices inside the credit context (net/signals.h kCtxCredit).
enum CreditSignal : int {
  kSigStep = 0,     // a relay step's slot is free for its writer (DESIGN.md §2 credits)
  kSigRelease = 1,  // the relay's slots for the next call's first steps are free (Options::
                    // releaseRelayUpTo, plan_build.h releasedSteps)
};

enum class OpKind : uint8_t {
  kPut,   // move `bytes` (may be 0) from src on this rank to dst on `peer`, then bump the
          // signal (ctx, sigIdx, source = this rank) at `peer`. kCePut lane: copy engine to a
          // rank of the same node; kProxyPut lane: the proxy, to a rank of another node.
  kCopy,  // move `bytes` from src to dst, both on this rank (the block a rank sends itself)
  kWait,  // wait until `count` more signals (ctx, sigIdx) from `peer` have arrived than the
          // waits before it on this rank consumed; kCeWait for local peers, kProxyWait remote,
          // but a writer's wait for a relay credit on kProxyPut, before the put it gates, and
          // every completion wait (sig kSigData) on kCeWait
};

// One source of a gathering put: `bytes` from `src`.
struct Segment {
  Loc src;
  uint64_t bytes = 0;
};

struct Op {
  OpKind kind = OpKind::kPut;
  Lane lane = Lane::kCePut;
  int batch = 0;  // pipeline step it belongs to, for dumps and traces
  int peer = -1;
  Loc src;
  Loc dst;
  uint64_t bytes = 0;
  int ctx = 0;
  int sigIdx = 0;
  uint32_t count = 0;
  std::vector<int> deps;  // indices into RankPlan::ops, all smaller than this op's index
  // A kPut that gathers: these sources, in order, make up its `bytes`, written back to back
  // from dst (a relay chunk made of several send blocks' segments, one put and one signal
  // instead of one of each per segment; `src` is then unused). Empty: the put reads src.
  std::vector<Segment> gather;
  // A kCePut put with data whose signal write is left to the next put on its lane to the
  // same peer and signal, in the same call (Options::quietPuts): the signal still counts it,
  // but its value reaches the peer only with that later put's, whose copy runs after this
  // one's (a lane is in order). Nothing may wait for the count it reaches alone.
  bool quiet = false;
};

// Calls f(src, dstOffset, bytes) for each source of a put or copy: its gather segments, or src
// alone; dstOffset counts from op.dst.
template <typename F>
void forEachSource(const Op& op, F&& f) {
  if (op.gather.empty()) {
    f(op.src, uint64_t{0}, op.bytes);
    return;
  }
  uint64_t at = 0;
  for (const Segment& s : op.gather) {
    f(s.src, at, s.bytes);
    at += s.bytes;
  }
}

struct RankPlan {
  std::vector<Op> ops;
};

// What the planner needs besides the counts.
struct Options {
  uint64_t slotBytes = 16ull << 20;    // relay slot size: RMACC_RELAY_BYTES / RMACC_RELAY_SLOTS
  int slots = 4;                       // RMACC_RELAY_SLOTS (>= 2)
  uint64_t maxPutBytes = 1ull << 30;   // RMACC_MAX_PUT_BYTES: larger puts are split
  bool entrySignals = true;            // per-call entry readiness signals (RMACC_ENTRY_SYNC);
                                       // false: the executor runs a barrier before the plan
  // Node rounds whose busiest relay takes at most one slot share a pipeline position (batch),
  // up to this many per position; 0: slots / 2, the most that keeps a slot's reuse two positions
  // after its previous step (planner.cc); 1: one round per position. Larger values are capped.
  int roundsPerBatch = 0;
  // Pacing: a relay writer puts its relay step t only after the relay has forwarded step
  // t - creditWindow (a credit, as for slot reuse, which is the case creditWindow = slots). A
  // smaller window keeps a relay from receiving more than that many steps (node rounds, when
  // they take one chunk) at once. 0: slots (no pacing beyond slot reuse); else capped at slots,
  // at least 2. It also caps roundsPerBatch at window / 2 (planner.cc). Default 0: with a queue
  // per peer, as the proxy posts every released put, chunks in flight share the writer's NIC,
  // and a narrower window only stalls the credit loop (docs/decisions.md#credit-window).
  int creditWindow = 0;
  // Smaller chunks for large rounds. A relay forwards a chunk only once all of it has landed, so
  // a writer's round payload that fits one slot is one chunk, and the wire and the forwards of
  // that round take turns. Cutting each payload into at least this many chunks lets the
  // forwards of chunk c overlap the wire of chunk c+1. A chunk still fills at most one slot, and
  // is not cut below minChunkBytes (small rounds stay whole: per-op costs would eat the
  // overlap); it is a multiple of minChunkBytes, or of half of it for a share of one to two (so
  // that power-of-two blocks are not cut, plan_build.cc). 0 or 1: chunks of one slot.
  // chunkBytes() (plan_build.h) applies it; docs/decisions.md#min-chunks.
  int minChunksPerRound = 0;
  uint64_t minChunkBytes = 1ull << 20;
  // The same for the call's last node round alone (the larger of the two applies there): the
  // forwards of its last chunk are the call's tail, with nothing left on the wire to hide them.
  int lastRoundMinChunks = 0;
  // And the unit of the last round's chunks where lastRoundMinChunks > 0 (0: minChunkBytes):
  // its blocks are the call's smallest payloads cut by the most chunks, so a unit of a whole
  // MiB would leave small last rounds in one chunk (docs/decisions.md#last-round-chunks).
  uint64_t lastRoundMinChunkBytes = 0;
  // Entry signals to remote writers go out this many pipeline positions before the round whose
  // direct put needs them, and the writer waits for one just before that round, instead of all
  // at the start, where each proxy would send and take in one per remote rail peer before its
  // first put and the round-1 puts would wait for all of them. Negative: all at the start.
  // Entry signals between node-mates stay at the start (CE, cheap, and the first round's
  // forwards need them). Default 1: a larger lead lets writers run ahead and the rounds drift
  // (docs/decisions.md#entry-lead).
  int entryLead = 1;
  // Fitted slots, on communicators of at least this many nodes (0: never): a call whose every
  // relay payload fits in half a slot gets twice the slots of half the size (callOptions,
  // plan_build.h), so that twice as many relay steps are in flight in the same relay memory;
  // chunk counts do not change (no payload of such a call needs more than one chunk). Because
  // the geometry may then differ from one call to the next, every relay step waits for a credit
  // there, the first window of a relay's steps in a call for one sent at the start of the
  // relay's call (a fresh relay's first window needs none only while the geometry stays: with
  // another, a slot it takes may hold an earlier call's bytes). The library sets 4 x slots + 2
  // and orders the node rounds in pairs there (plan::usePairedRounds;
  // docs/decisions.md#fitted-slots).
  int fitSlotsFrom = 0;
  // Deeper fitting: a fitted call halves its slots again (up to 8 x slots) while its largest
  // payload still fits half a slot and the slots hold less than this many bytes of it (0: one
  // halving only). The credit window is the slot count, and a relay's credit loop (a chunk's
  // write out and in, its forwards, the credit's write out and in) is fixed in time, so small
  // chunks need more of them in flight; a wider window costs where the chunks already cover the
  // loop and for skewed traffic, whose largest payload keeps the slots few here. The library
  // sets libraryFitWindowBytes() (docs/decisions.md#fit-window).
  uint64_t fitWindowBytes = 0;
  // And, for a largest payload below this many bytes, again (up to 8 x slots) while the node
  // rounds outnumber four times the slots (0: never). With payloads this small a node round
  // costs the proxy about as much as the wire, its queues stretch the credit loop, and more
  // steps in flight keep the NIC busy; above it, or with few rounds, deeper costs. The library
  // sets libraryDeepFitBelow() (docs/decisions.md#deep-fit).
  uint64_t deepFitBelow = 0;
  // Relay release, on communicators of 2 .. this many nodes whose slots are not fitted (0:
  // never). A call's first relay steps reuse slots of the call before, so each would wait for a
  // credit the relay sends once it has started the call (proxy, wire, proxy) before the first
  // relay put of every call. Instead each relay sends its first writer of the next call (its
  // rail peer on round 1's sending node, whatever the counts) one release credit once the slots
  // of that call's first releasedSteps() steps are free, and that writer waits for it among its
  // completion waits: its first steps of the next call then wait for nothing (releasedHere).
  // The library sets 17 (plan_build.h; docs/decisions.md#relay-release).
  int releaseRelayUpTo = 0;
  // Joined forwards of chunks below this many bytes (0: never): where a relay has several steps
  // at one position (small rounds sharing it), each of such chunks, each step's forwards also
  // wait for the other steps' chunks and each step's credit for all of their forwards, so that
  // the relay's copy stream runs them as one batch of copies and one of signal writes, a write
  // per receiver (the executor merges writes to one signal in a batch), instead of a batch per
  // step. Small chunks only: a step's batch costs the stream about as much as a few hundred KiB
  // take on the wire, and larger ones only wait longer for their forwards and credits. The
  // library sets libraryJoinForwardsBelow() (docs/decisions.md#joined-forwards).
  uint64_t joinForwardsBelow = 0;
  // The most steps one joined batch takes (0: every such step of the position). Each step's
  // credit waits for the group's last chunk, so a whole position of 4 rounds would hold the
  // first step's credit back by 3 chunks of wire, and the writers' puts two positions on would
  // wait for it: pairs keep most of the batching and little of that wait.
  int joinForwardsSteps = 2;
  // Quiet puts: a rank's CE puts with data to one receiver signal only with the last of them in
  // the call (Op::quiet). The receiver waits for each source's data once, for its total, at the
  // end (completion waits), so the signal writes of earlier puts would tell it nothing and cost
  // a memory-op item each on the copy stream (docs/decisions.md#quiet-puts).
  bool quietPuts = true;
};

// Rounds per batch that `options` allows: roundsPerBatch capped at creditWindow(options) / 2,
// at least 1.
int roundsPerBatch(const Options& options);
// Relay steps a writer may run ahead of the relay's forwards: creditWindow, or slots for 0,
// within [2, slots].
int creditWindow(const Options& options);

// State carried from one call to the next: the number of relay steps (chunks written into a
// rank's relay buffer) that earlier calls made, per relay rank. Every rank derives the same
// values because every rank plans from the same global count matrix.
struct Carry {
  std::vector<uint64_t> relaySteps;  // indexed by relay rank
};

struct Plan {
  Topology topo;
  Options options;
  std::vector<uint64_t> bytes;  // bytes[src * nRanks + dst], what this plan moves
  Carry before;                 // carry the plan was made for
  Carry after;                  // carry for the next call
  std::vector<RankPlan> ranks;  // one per rank
  int nBatches = 0;
  uint64_t relayBytes = 0;      // relay memory a rank needs: slots * slotBytes at most

  // Human-readable listing of one rank's ops (RMACC_DUMP_PLAN), or of all ranks with -1.
  std::string dump(int rank = -1) const;
};

const char* laneName(Lane lane);

}  // namespace rmacc::plan
