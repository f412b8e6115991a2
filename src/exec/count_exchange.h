// The per-call count exchange in O(n) bytes per rank (DESIGN.md §2 "Metadata", issue 18).
//
// Each rank already knows its own send and receive counts. Besides them it needs: as a relay,
// the counts its writers send to its node; as a writer, where its relay chunks start at each
// relay (relay steps) and the receive targets it writes into; and the few global facts that fix
// the common timing (relay chunks per round). Rails follow Topology::railPeer: local rank i of
// a node reaches a node of L ranks through that node's local rank i mod L (its relay there);
// the relay's writers from a node are that node's local ranks i', i' + L, ... (one each way when
// nodes have equal sizes). Every count is checked by the rank that sees both sides: a receiver
// checks its node-mates' counts to it, a relay checks its writers' counts to its node-mates
// against their expectations. The steps, none of which moves n^2 data:
//   1. node gather: header, relay chunks per round, sends, receive expectations and receive
//      offsets. Each rank reads from each mate only the entries of its own writers.
//   2. rail, writer -> relay: to its relay on node B, this rank's counts to B's ranks and its
//      node's largest relay load of round B (node B collects the maximum of round B). The relay
//      checks the counts against its node's expectations.
//  2b. node gather, only when node sizes differ: the verdict and the maximum of round (own
//      node) so far. A rank of a larger node hears from no writer of a smaller node whose
//      ranks are fewer than its local rank; its mates did.
//   3. rail, relay -> writers: the verdict so far, the maximum of round (own node), where the
//      writer's chunks start here (relay step) and the relay's network receive target with the
//      offset of the writer's block in it (the writer puts that block there directly).
//   4. node gather: the verdict, and the forward signals this rank sends to each mate.
// On one node only step 1 runs: every rank checks all of the node's pairs from the records of
// step 1 (checkWholeNode), which gives every rank the same verdict at once.
// A verdict (the lowest rejecting rank, the first mismatching (sender, receiver) pair) known to
// any rank after step 2 reaches its node (step 2b, or with equal sizes its rail peers in step 3
// and their mates in step 4), every node in step 3 (every rank has a relay on every node) and
// every rank in step 4: every rank ends with the same verdict, and on failure nothing moves.
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
    // [local rank][o]: offset in that mate's target of the block from origin o, for o = this
    // rank (index 0) and its writers (index 1 + t, writers()[t]): what this rank writes there.
    std::vector<std::vector<uint64_t>> localOffset;
    std::vector<RemoteRegion> railRemote;  // [node] the network target of this rank's relay there
    std::vector<uint64_t> railOffset;      // [node] offset there of this rank's block
    ExchangeBytes bytes;
  };
  // Call `seq` (1, 2, ...). `rejected` calls take part with zero counts. Throws on a lost or
  // late peer (rmaccRemoteError, rmaccTimeout), like the node gather and the bootstrap.
  void exchange(uint64_t seq, const Mine& mine, Result& out);
  // After a call that runs: its relay steps are used up.
  void commit(const Result& r) { relaySteps_ += relayChunksThisCall_; }
  // The ranks whose relay payloads this rank forwards: round k, m-th writer of that round
  // (RankInputs::relayIn's row (k * writerSlots() + m)), in round then rank order.
  struct Writer {
    int k, m, rank;
  };
  const std::vector<Writer>& writers() const { return writers_; }
  int writerSlots() const { return W_; }
  void abort() {
    if (gather_) gather_->abort();
  }

 private:
  struct Verdict;
  void nodePhase1(uint64_t seq, const Mine& mine, Result& out, Verdict& v);
  void checkWholeNode(uint64_t gs, const Mine& mine, Result& out, Verdict& v);
  void railPhase1(uint64_t seq, const Mine& mine, Result& out, Verdict& v);
  void nodeRoundMax(uint64_t seq, Result& out, Verdict& v);
  void railPhase2(uint64_t seq, const Mine& mine, Result& out, Verdict& v);
  void nodePhase2(uint64_t seq, Result& out, Verdict& v);

  Bootstrap& boot_;
  const Topology& topo_;
  const int rank_, n_, node_, local_, L_, nNodes_;
  const int W_;                          // plan::relayWriterSlots
  const uint64_t gathersPerCall_;        // 1 on one node; 3 when node sizes differ (step 2b); else 2
  std::vector<Writer> writers_;
  const plan::Options options_;
  std::unique_ptr<NodeGather> gather_;
  uint64_t relaySteps_ = 0;          // relay steps of the calls that ran
  uint64_t relayChunksThisCall_ = 0;
  // Scratch of one call.
  std::vector<uint64_t> aggChunks_;  // [round] the node's largest relay payload in chunks
  std::vector<uint64_t> expect_;     // [t * L + j]: mate j expects from writers_[t]
  uint64_t roundMaxHere_ = 0;        // max chunks of round (this node), gathered in phase 1
  std::vector<uint64_t> myChunks_;   // [round] this rank's own relay payload chunks
  std::vector<const char*> mateRecords_;  // checkWholeNode: [local rank] its step-1 record
};

}  // namespace rmacc
