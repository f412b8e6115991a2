// The per-call count exchange in O(n) bytes per rank (DESIGN.md §2 "Metadata", issue 18).
//
// Each rank already knows its own send and receive counts. Besides them it needs: as a relay,
// the counts its rail peers send to its node; as a writer, where its relay chunks start at each
// relay (relay steps) and the receive targets it writes into; and the few global facts that fix
// the common timing (relay chunks per round). Every count is checked by the rank that sees both
// sides: a receiver checks its node-mates' counts to it, a relay checks its rail peers' counts
// to its node-mates against their expectations. Four steps, none of which moves n^2 data:
//   1. node gather: header, relay chunks per round, sends, receive expectations and receive
//      offsets. Each rank reads from each mate only the entries of its own rail: O(nNodes).
//   2. rail round: to the rail peer on node B, this rank's L counts to B's ranks, its receive
//      target for the peer, and the node's relay chunks of round B (a reduce-scatter: node B
//      gathers the maximum of round B). The peer checks the counts against its node's
//      expectations.
//   3. rail round: to each rail peer, the verdict so far, the maximum of round (own node), and
//      the relay step at which that peer's chunks start here.
//   4. node gather: the verdict, and the forward signals this rank sends to each mate.
// A verdict (the lowest rejecting rank, the first mismatching (sender, receiver) pair) known to
// any rank after step 2 reaches its rail peers in step 3 and their node-mates in step 4: every
// rank ends with the same verdict, and on failure nothing moves anywhere.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "core/topology.h"
#include "bootstrap/node_gather.h"
#include "exec/signal_space.h"
#include "net/fabric.h"
#include "plan/rank_planner.h"
#include "rmacc.h"

namespace rmacc {

// A rank's receive target for one call, as its writers need it.
struct MetaHeader {
  uint64_t seq;
  uint64_t callSeq;      // the communicator's collective call number (Comm::beginCall)
  uint32_t rejected;     // this rank's arguments were invalid: every rank skips the call
  uint32_t exportable;   // `handle` maps the target of blocks written by this node's ranks
  uint64_t targetBase;   // offset of that target in the exported allocation
  RemoteRegion remote;   // the target of blocks written by rail peers of other nodes
  HandleRecord handle;
};

// Bytes this rank moved through the exchange in one call: sent on the control plane plus
// received there plus read from its node-mates' shared records.
struct ExchangeBytes {
  uint64_t sent = 0, received = 0, sharedRead = 0;
  uint64_t total() const { return sent + received + sharedRead; }
};

class CountExchange {
 public:
  // Collective (sets up the node gather). plan options fix chunking (slot and put sizes).
  CountExchange(Bootstrap& boot, const Topology& topo, int rank, const plan::Options& options,
                double timeoutS);

  struct Mine {
    MetaHeader header;
    const uint64_t* send;    // [n]
    const uint64_t* recv;    // [n]
    const uint64_t* offset;  // [n] by origin: where its block lands in this rank's target
  };
  struct Result {
    rmaccResult_t code = rmaccSuccess;  // the common verdict (rejecting ranks see their own)
    std::string error;
    plan::RankInputs inputs;             // for plan::makeRankPlan when code is success
    std::vector<MetaHeader> localHeader;  // [local rank] node-mates' targets
    // [local rank][node]: offset in that mate's target of the block from origin rankAt(node, i)
    // (i = this rank's local rank; origin = this rank for its own node): what this rank writes.
    std::vector<std::vector<uint64_t>> localOffset;
    std::vector<RemoteRegion> railRemote;  // [node] the rail peer's network target
    std::vector<uint64_t> railOffset;      // [node] offset there of this rank's block
    ExchangeBytes bytes;
  };
  // Call `seq` (1, 2, ...). `rejected` calls take part with zero counts. Throws on a lost or
  // late peer (rmaccRemoteError, rmaccTimeout), like the node gather and the bootstrap.
  void exchange(uint64_t seq, const Mine& mine, Result& out);
  // After a call that runs: its relay steps are used up.
  void commit(const Result& r) { relaySteps_ += relayChunksThisCall_; }
  void abort() {
    if (gather_) gather_->abort();
  }

 private:
  struct Verdict;
  void nodePhase1(uint64_t seq, const Mine& mine, Result& out, Verdict& v);
  void railPhase1(uint64_t seq, const Mine& mine, Result& out, Verdict& v);
  void railPhase2(uint64_t seq, Result& out, Verdict& v);
  void nodePhase2(uint64_t seq, Result& out, Verdict& v);

  Bootstrap& boot_;
  const Topology& topo_;
  const int rank_, n_, node_, local_, L_, nNodes_;
  const plan::Options options_;
  std::unique_ptr<NodeGather> gather_;
  uint64_t relaySteps_ = 0;          // relay steps of the calls that ran
  uint64_t relayChunksThisCall_ = 0;
  // Scratch of one call.
  std::vector<uint64_t> aggChunks_;  // [round] the node's largest relay payload in chunks
  std::vector<uint64_t> expect_;     // [node * L + j]: mate j expects from rankAt(node, i)
  uint64_t roundMaxHere_ = 0;        // max chunks of round (this node), gathered in phase 1
  std::vector<uint64_t> myChunks_;   // [round] this rank's own relay payload chunks
};

}  // namespace rmacc
