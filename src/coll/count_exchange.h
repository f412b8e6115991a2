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
// against their expectations.
// Between two nodes the control plane carries one message each way per step, not one per rail:
// the pair (node A, node B) is handled on A by local rank B mod L_A and on B by local rank
// A mod L_B, which send for and spread to their whole node through the node gather. A rank
// sends and receives 4 (nodes - 1) / L messages per call on average (8 x 128 nodes: ~64, where
// one message per rail and step took 508), for three more node gathers (two more where node
// sizes differ: the old step 2b is gone), which cost microseconds in shared memory. The steps,
// none of which moves n^2 data:
//   1. node gather: header, relay chunks per round, sends, receive expectations and receive
//      offsets. Each rank reads from each mate only the entries of its own writers.
//   2. rail, node -> node (handlers): every count from this node's ranks to that node's ranks,
//      read from the step-1 records, and this node's share of that node's round maximum.
//      Node gather 2 spreads what a node's handlers received: each relay reads its writers'
//      counts and checks them against its node's expectations; every rank takes the round
//      maximum of its own node from every node's share.
//   3. node gather 3: each relay's schedule for its writers (relay step of their first chunk,
//      steps of the round before theirs, where their own block lands here) and its verdict.
//   4. rail, node -> node (handlers): the node's verdict, its round maximum and its relays'
//      entries for the other node's writers. Node gather 4 spreads the replies; each writer
//      reads its own entry from each node and every round's maximum.
//   5. node gather: the verdict, and the forward signals this rank sends to each mate.
// On one node only step 1 runs: every rank checks all of the node's pairs from the records of
// step 1 (checkWholeNode), which gives every rank the same verdict at once.
// A verdict (the lowest rejecting rank, the first mismatching (sender, receiver) pair) known to
// any rank of a node after step 2's checks is the whole node's after gather 3; step 4 carries
// it to every other node, gather 4 to all their ranks: every rank ends with the same verdict,
// and on failure nothing moves.
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
  ~CountExchange();

  struct Mine {
    MetaHeader header;
    const uint64_t* send;    // [n]
    const uint64_t* recv;    // [n]
    const uint64_t* offset;  // [n] by origin: where its block lands in this rank's target
    uint64_t elementBytes = 1;  // the call's datatype size: a mismatch is told in elements
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
  // exchange() in steps, so that a caller can wait a while and leave the rest to another
  // thread (coll/direct_calls.h): start() publishes this rank's part; advance() takes the
  // exchange as far as the peers allow by `deadline` (monotonicSeconds; infinity: to the end)
  // and returns true once `out` is complete, false when a peer's part had not come by then
  // (call it again, from any thread, one at a time). `mine`'s arrays and `out` must stay put
  // until then. Errors are thrown as by exchange(); no other call may start in between.
  void start(uint64_t seq, const Mine& mine, Result& out);
  bool advance(double deadline);
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
  // Where advance() goes on: each stage waits for the peers' part it names first.
  enum class Stage { kIdle, kGather1, kRail1, kGather2, kGather3, kRail2, kGather4, kGather5, kDone };
  void nodePhase1Publish(uint64_t seq, const Mine& mine, Result& out, Verdict& v);
  void nodePhase1Read(uint64_t seq, const Mine& mine, Result& out, Verdict& v);
  void checkWholeNode(uint64_t gs, const Mine& mine, Result& out, Verdict& v);
  void railSendCounts(uint64_t seq, const Mine& mine, Result& out, const Verdict& v);
  void railTakeCounts(uint64_t seq, const Mine& mine, Result& out, Verdict& v);
  void railGatherCounts(uint64_t seq, const Mine& mine, Result& out, Verdict& v);
  void relaySchedule(uint64_t seq, const Mine& mine, Result& out, Verdict& v);
  void relayScheduleRead(uint64_t seq, Verdict& v, Result& out);
  void railReplies(uint64_t seq, const Mine& mine, Result& out, Verdict& v);
  void railTakeReplies(uint64_t seq, Result& out, Verdict& v);
  void railGatherReplies(uint64_t seq, Result& out, Verdict& v);
  void nodePhase2Publish(uint64_t seq, Result& out, Verdict& v);
  void nodePhase2Read(uint64_t seq, Result& out, Verdict& v);
  void finish(const Mine& mine, Result& out, const Verdict& v);
  uint64_t gatherSeq(uint64_t seq, int step) const { return gathersPerCall_ * (seq - 1) + (uint64_t)step; }
  void publishStep(uint64_t seq, int step, const std::vector<char>& mine);
  const char* const* stepRecords(uint64_t seq, int step, const std::vector<char>& mine);
  bool gatherArrived(uint64_t seq, int step, double deadline);
  bool railArrived(uint32_t tag, double deadline);
  // The rank of node a that handles the pair (a, this node): its local rank (this node) mod L_a.
  int partnerOn(int a) const { return topo_.rankAt(a, node_ % topo_.nodeSize(a)); }

  Bootstrap& boot_;
  const Topology& topo_;
  const int rank_, n_, node_, local_, L_, nNodes_;
  const int W_;                          // plan::relayWriterSlots
  const uint64_t gathersPerCall_;        // 1 on one node, else 5
  std::vector<Writer> writers_;
  std::vector<int> handled_;             // the nodes whose rail this rank handles
  std::vector<size_t> offset2_, offset4_;   // [node] its block in its handler's gather 2 / 4 record
  std::vector<size_t> recordBytes2_, recordBytes4_;  // [local rank] that handler's record sizes
  std::vector<int> writerIndex_;         // [j * nNodes + node]: relay j's first writer from node
  const plan::Options options_;
  std::unique_ptr<NodeGather> gather_;
  uint64_t relaySteps_ = 0;          // relay steps of the calls that ran
  uint64_t relayChunksThisCall_ = 0;
  // Scratch of one call.
  std::vector<uint64_t> aggChunks_;  // [round] the node's largest relay payload in chunks
  std::vector<uint64_t> expect_;     // [t * L + j]: mate j expects from writers_[t]
  uint64_t roundMaxHere_ = 0;        // max chunks of round (this node), gathered in phase 1
  std::vector<uint64_t> myChunks_;   // [round] this rank's own relay payload chunks ([0]: its
                                     // largest payload in bytes)
  uint64_t nodeLargest_ = 0;         // the largest relay payload of this node's writers
  std::vector<const char*> mateRecords_;  // [local rank] its step-1 record (own: nullptr)
  std::vector<const char*> records_;      // gatherStep's result
  std::vector<const char*> relayRecords_;  // [local rank] its gather-3 record
  std::vector<char> relayRecord_;         // this rank's gather-3 record
  std::vector<char> stepRecord_;          // this rank's record of the other gathers
  std::vector<uint64_t> mateChunks_;      // [local rank * nNodes + k] (nodePhase1)
  // The call advance() is at.
  Stage stage_ = Stage::kIdle;
  uint64_t seq_ = 0;
  Mine mine_{};
  Result* out_ = nullptr;
  std::unique_ptr<Verdict> v_;
  std::vector<std::vector<char>> railGot_;  // [handled_ index] this rail step's message
  std::vector<char> railHave_;              // [handled_ index] it came
};

}  // namespace rmacc
