// One rank's part of the AlltoAllV plan, built from what that rank knows (DESIGN.md §2
// "Per-rank planning"): its own counts, the counts it forwards as a relay, and a few facts
// about the others' timing. Work and memory are linear in the rank's own ops plus n; the
// global planner (planner.h) stays the reference, and for every input its result equals
// makeAlltoallvPlan(...).ranks[rank] (tests/rank_planner_test.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "plan/plan.h"

namespace rmacc::plan {

// Everything rank `rank` needs to plan a call. Node N = topo.nodeOf(rank), local rank i, L ranks
// on node N; round k = 1 .. nNodes-1 as in Topology; "the round-k writers" of this rank are the
// ranks rankAt(recvNode(N, k), i + m*L), m = 0, 1, ... while that node has them (one when nodes
// have equal sizes; Topology::railLocal), whose relay payloads this rank forwards in round k,
// and "the round-k relay" is railPeer(rank, sendNode(N, k)), the rank this rank's payload goes to.
struct RankInputs {
  int rank = -1;
  std::vector<uint64_t> send;  // [n] bytes this rank sends to each rank
  std::vector<uint64_t> recv;  // [n] bytes this rank receives from each rank
  // [(k * W + m) * L + j], W = relayWriterSlots(topo, rank): bytes the m-th round-k writer sends
  // to local rank j of node N (row k = 0 unused; writers that do not exist: zeros).
  std::vector<uint64_t> relayIn;
  // [k]: pipeline positions of round k are max(1, roundChunks[k]): the largest number of relay
  // chunks any relay of the communicator takes in round k (index 0 unused). Global: the same on
  // every rank.
  std::vector<uint64_t> roundChunks;
  uint64_t relayStepsBefore = 0;        // this rank's relay steps in earlier calls
  // [k]: relay step (at the round-k relay, counted over calls) of this rank's first chunk there.
  std::vector<uint64_t> writerStep;
  // [k]: the same step counted from the round-k relay's first step of this call (writerStep[k]
  // less that relay's steps in earlier calls): whether that chunk's credit is carried from the
  // relay's start, and then is also its entry signal (entryByCredit, plan_build.h).
  std::vector<uint64_t> writerCallStep;
  // [k]: pipeline positions taken at the round-k relay by the writers before this rank (the
  // ranks of node N on the same rail with a lower local rank; 0 when nodes have equal sizes).
  std::vector<uint64_t> writerOffset;
  // [j]: kSigData signals local relay j sends this rank by forwarding, and the batch of the last.
  std::vector<uint64_t> forwardSignals;
  std::vector<int> forwardLastBatch;
  // The largest relay payload of the call, communicator-wide (one writer's bytes for one relay
  // in one round): it decides the call's options (callOptions, Options::fitSlotsFrom).
  uint64_t largestPayload = 0;
};

// Instrumentation for the linear-work guard (tests/rank_planner_test.cc): what one call of
// makeRankPlan touched, counted, not timed.
struct PlanWork {
  uint64_t opsBuilt = 0;      // drafts created
  uint64_t entriesRead = 0;   // count entries (send, recv, relayIn, roundChunks ...) read
};

struct RankPlanResult {
  RankPlan plan;                    // == the global plan's ranks[rank]
  uint64_t relayStepsAfter = 0;     // this rank's relay steps after this call
  PlanWork work;
};

// The most writers a relay on `rank`'s node can have in one round: ceil(largest node / L).
inline int relayWriterSlots(const Topology& topo, int rank) {
  const int L = topo.nodeSize(topo.nodeOf(rank));
  return (topo.maxNodeSize() + L - 1) / L;
}

// Throws rmaccInvalidArgument on inconsistent inputs (sizes that do not match the topology).
// Work tables are kept per thread from call to call, so a call allocates little besides its
// result.
RankPlanResult makeRankPlan(const Topology& topo, const Options& options, const RankInputs& in);
// The same into `out`, whose ops (and their dep lists) are overwritten in place: a caller that
// keeps one result across calls allocates nothing once the shapes settle.
void makeRankPlan(const Topology& topo, const Options& options, const RankInputs& in,
                  RankPlanResult& out);

// The reference derivation of every rank's inputs from the whole byte matrix and the global
// carry (what the count exchange would deliver). O(n^2) once, then O(n) per rank.
class MatrixInputs {
 public:
  MatrixInputs(const Topology& topo, const std::vector<uint64_t>& bytes, const Options& options,
               const Carry& before);
  RankInputs of(int rank) const;
  // The carry after this call (every relay's steps), as Plan::after.
  const Carry& after() const { return after_; }
  const std::vector<uint64_t>& roundChunks() const { return roundChunks_; }

 private:
  uint64_t totalTo(int writer, int node) const { return totals_[(size_t)writer * nNodes_ + node]; }
  uint64_t chunksTo(int writer, int node, int k) const;
  // Relay steps the writers on `relay`'s rail of round k's sending node take there, for those
  // with a local rank below `below` (all with INT_MAX).
  uint64_t chunksAt(int relay, int k, int below) const;
  uint64_t count(int s, int d) const { return bytes_[(size_t)s * n_ + d]; }

  const Topology& topo_;
  const std::vector<uint64_t>& bytes_;
  Options options_;  // the call's (callOptions), once the payloads are known
  const int n_, nNodes_;
  uint64_t largest_ = 0;             // the largest relay payload (RankInputs::largestPayload)
  std::vector<uint64_t> totals_;     // [writer * nNodes + node]: relay payload bytes writer -> node
  std::vector<uint64_t> roundChunks_;
  std::vector<int> roundBase_;
  Carry before_, after_;
};

}  // namespace rmacc::plan
