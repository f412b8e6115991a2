// Runs one rank's part of a Plan on backend streams and the proxy: one executor for every
// backend (DESIGN.md §3). Each lane of the plan is an in-order stream; a dependency between
// ops of different lanes becomes an event; nothing else orders them.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "core/window.h"
#include "exec/trace.h"
#include "plan/plan.h"

namespace rmacc {

class Comm;

// Where one call's Regions are, for this rank and its peers.
struct CallBuffers {
  const char* send = nullptr;               // this rank's send buffer
  char* recv = nullptr;                     // this rank's receive buffer
  std::vector<uint64_t> sendOffset;         // by destination: byte offset of the send block
  std::vector<uint64_t> recvOffset;         // by origin: byte offset of the receive block
  std::vector<PeerTarget> peerRecv;         // by rank: where to write its receive blocks
  std::vector<std::vector<uint64_t>> peerRecvOffset;  // [rank][origin]: offset in peerRecv
  char* relay = nullptr;                    // this rank's relay buffer
  std::vector<PeerTarget> peerRelay;        // by rank: relay buffers of other nodes' ranks
};

class Executor {
 public:
  explicit Executor(Comm& comm);
  ~Executor();

  // Enqueues this rank's ops (plan/rank_planner.h). Every lane first waits for `start` (the user's
  // work before the call) and for the previous call's completion; when all lanes are done,
  // `join` runs `finish` work (copies) then writes `doneValue` to `doneFlag`.
  void run(const plan::RankPlan& plan, const CallBuffers& buffers, Event& start, bool entryBarrier,
           const std::vector<CopyDesc>& finish, volatile uint64_t* doneFlag, uint64_t doneValue,
           uint64_t callSeq);
  // The highest relay byte this rank has written into any peer's relay buffer (end offset),
  // over the communicator's life: measured, for the bound RMACC_RELAY_BYTES.
  uint64_t relayHighWater() const { return relayHighWater_; }

  // Completes a call that moves nothing (rejected or mismatched counts), in call order.
  void complete(volatile uint64_t* doneFlag, uint64_t doneValue);

 private:
  Stream& streamFor(const plan::Op& op);
  void enqueueOp(Stream& s, const plan::Op& op, const CallBuffers& b);
  Event& nextEvent();

  Comm& comm_;
  std::vector<std::unique_ptr<Stream>> ceStreams_;  // CE puts, by destination
  std::unique_ptr<Stream> ceWait_;
  std::unique_ptr<Stream> proxyPut_;
  std::unique_ptr<Stream> proxyWait_;
  std::unique_ptr<Stream> join_;
  std::vector<Stream*> lanes_;  // every stream above but join_
  std::vector<std::unique_ptr<Event>> events_;  // reused each call (see nextEvent)
  size_t nextEvent_ = 0;
  std::unique_ptr<Event> joined_;  // the previous call's completion, recorded on join_
  bool anyCall_ = false;
  uint64_t relayHighWater_ = 0;
  TraceWriter* trace_ = nullptr;  // the communicator's, when RMACC_TRACE_FILE is set
};

}  // namespace rmacc
