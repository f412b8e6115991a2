// rmaccAlltoAllvPadded (docs/padded-alltoallv-design.md): an all-to-all whose layout is fixed
// by a capacity, so that its counts can stay on the device. Each rank's send buffer holds one
// slot of `capacity` elements per peer; the whole slot moves, whatever its count says, and the
// count word moves beside it. Both moves are fixed-count all-to-alls, so the call is two
// CollectiveEngine calls on the caller's stream, one after the other:
//
//   the slots:  capacity x esize bytes from sendbuff + j x slot to rank j's recvbuff + me x slot
//   the counts: 8 bytes from sendcounts + j to rank j's recvcounts + me
//
// and each takes the path a fixed-count call takes: enqueued by the progress thread, or,
// captured on one node, recorded whole into the graph (coll/in_graph_calls.h: copies and
// memory operations, nothing at replay), or triggered at replay across nodes
// (coll/captured_calls.h). No count is read by the CPU on the way.
//
// Counts above the capacity. Nothing on the device compares them (no kernel), and the copies
// move exactly `capacity` elements, so nothing lands outside a slot. To report them, the
// stream first zeroes recvcounts (a failed call then leaves zeros, not stale words), and after
// the call copies the call's sendcounts and the recvcounts it received into a host-visible
// mirror and stamps it; check() reads every stamped mirror and fails the communicator
// (rmaccInvalidUsage, naming sender, receiver, count and capacity) when a count exceeds the
// capacity. Uncaptured calls take mirrors from a ring, one per call, each checked once; a
// captured call gets a mirror of its own, which every replay overwrites, so a check sees the
// replay that ran last. check() runs at rmaccStreamSynchronize and rmaccCommGetAsyncError, at
// the next padded call, and every 20 ms on a thread of its own while graphs hold mirrors.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "exec/engine_context.h"

namespace rmacc {

class CollectiveEngine;
struct PaddedLink;

// One padded call's arguments, as the C API checked them.
struct PaddedArgs {
  const void* sendbuff = nullptr;
  const size_t* sendcounts = nullptr;  // [n] elements, device memory (host on the host backend)
  size_t capacity = 0;                 // elements per slot
  void* recvbuff = nullptr;
  size_t* recvcounts = nullptr;  // [n] written by the call
  size_t esize = 0;              // the datatype's size; 0 only in a rejected call
  uint64_t callSeq = 0;          // the communicator's collective call number (Comm::beginCall)
  std::string rejected;          // non-empty: this rank's arguments were bad (the reason)
};

class PaddedCalls {
 public:
  PaddedCalls(Backend& backend, CollectiveEngine& engine, FailureSink& failures, int rank,
              int nRanks, double timeoutS);
  // Waits for the checker thread. Mirrors that CUDA graphs still hold stay allocated (a replay
  // after the communicator's end still writes them).
  ~PaddedCalls();

  // Enqueues the call on `user` (nullptr when the stream was bad: the call then joins as
  // rejected, so that its peers skip it too). Returns the CollectiveEngine numbers of the calls
  // it made (0 for those recorded into a graph or triggered by their stream). A rejected call
  // still makes both engine calls, as every rank does. Throws what CollectiveEngine::alltoallv
  // throws. Caller's thread, one call at a time per communicator.
  std::vector<uint64_t> enqueue(Stream* user, const PaddedArgs& a);

  // Reads every mirror the stream has stamped since; a count above its capacity poisons the
  // communicator (rmaccInvalidUsage), so that what checks the async error next reports it.
  // Any thread.
  void check();

  // The error of engine call `seq` was reported: when it was a padded call's slots, the error
  // its counts' call got with it (a peer's rejection fails both) is dropped, so that one
  // synchronisation reports one padded call. Caller's thread.
  void reported(uint64_t seq);

 private:
  struct Mirror;
  Mirror* ringMirror();  // the next ring slot, checked first if it is still in use
  Mirror* graphMirror(Stream& user);
  void arm(Stream& user, Mirror& m, const PaddedArgs& a);
  // The first count above its capacity in `m` (stamped), or "".
  std::string overCapacity(const Mirror& m) const;
  void watch();  // the checker thread
  static void onGraphDestroyed(void* mirror);

  Backend& backend_;
  CollectiveEngine& engine_;
  FailureSink& failures_;
  const int rank_, n_;
  const double timeoutS_;

  std::mutex mu_;  // the mirrors and their states (enqueue, check, graph destruction)
  std::vector<std::unique_ptr<Mirror>> ring_;
  size_t nextRing_ = 0;
  uint64_t nextTicket_ = 0;
  std::vector<Mirror*> graphs_;  // owned: freed at the end unless a graph still holds one
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread checker_;  // started with the first mirror a graph holds
  std::shared_ptr<PaddedLink> link_;  // what graphs' destruction callbacks reach
  std::deque<uint64_t> slotCalls_;  // recent uncaptured calls' slots' engine numbers (reported)
};

}  // namespace rmacc
