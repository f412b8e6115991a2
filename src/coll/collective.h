// AlltoAllV and AlltoAll (DESIGN.md §2): the communicator's collective engine, a façade over the
// three paths a call can take, each a sibling file of this one:
//
//   enqueued (coll/enqueued_calls.h): the progress thread (coll/progress_thread.h) exchanges
//     the counts, checks them, plans (cached by shape) and hands the plan to the executor; the
//     call returns once it has, or after RMACC_ENQUEUE_WAIT_MS when a peer is late (never
//     waiting for peers longer). The user's stream waits, on the device, for a done flag that
//     the executor's join stream writes;
//   triggered at replay (coll/captured_calls.h): a call captured into a CUDA graph, numbered
//     and enqueued as above each time its stream reaches it;
//   in the graph (coll/in_graph_calls.h): a captured call with fixed counts on one node, whose
//     whole work is recorded into the graph.
//
// This file only picks the path and owns the parts; what must hold for each is in its file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "coll/call_args.h"
#include "coll/enqueued_calls.h"
#include "coll/progress_thread.h"
#include "exec/engine_context.h"
#include "exec/executor.h"

namespace rmacc {

class CapturedCalls;
struct CapturedCall;
class InGraphCalls;

class CollectiveEngine {
 public:
  // Collective: sets up the relay buffer.
  CollectiveEngine(const EngineContext& ctx, RmaEngine& rma);
  ~CollectiveEngine();

  // Enqueues the call on `user` and returns its sequence number. A call whose arguments were
  // rejected locally still takes part in the count exchange, so that every rank skips it.
  // On a stream being captured into a CUDA graph (or any stream with RMACC_STREAM_TRIGGER=
  // always) the call is recorded instead: with fixed counts on one node, its copies and flags
  // go into the graph (coll/in_graph_calls.h); otherwise it is numbered, exchanged and enqueued
  // each time the stream reaches it (coll/captured_calls.h). It returns 0.
  uint64_t alltoallv(Stream* user, AlltoallvArgs args);  // user may be NULL when rejected
  // Once call `seq` is complete on the stream: its error (rmaccSuccess for a good call).
  // The error of a call is reported once.
  rmaccResult_t takeCallError(uint64_t seq, std::string* text) {
    return enqueued_->takeCallError(seq, text);
  }
  // The last call whose work completed (numbers as alltoallv returns them).
  uint64_t completedSeq() const { return enqueued_->completedSeq(); }
  // Errors of completed calls that nobody collected yet (rmaccStreamSynchronize reports them).
  // `seq`, when given, gets the call's number.
  rmaccResult_t takeAnyCallError(std::string* text, uint64_t* seq = nullptr) {
    return enqueued_->takeAnyCallError(text, seq);
  }
  uint64_t relayBytes() const { return enqueued_->relayBytes(); }
  // Releases a count exchange blocked on a peer of this node (the communicator aborts).
  void abort();
  // Returns once no call is being set up and every call's work has finished or failed: after
  // the communicator was poisoned, nothing queued touches a caller's memory any more.
  void quiesce();
  // End offset of the highest relay byte this rank wrote into a peer's relay (measured).
  uint64_t relayHighWater() const { return enqueued_->relayHighWater(); }
  // The cost of the last call that moved data (set once its work is enqueued).
  CallCost lastCallCost() { return enqueued_->lastCallCost(); }

 private:
  // A captured call's stream reached it (CapturedCalls::Trigger; the host-function thread).
  static void onTrigger(void* engine, CapturedCall& site, AlltoallvArgs args);
  void trigger(CapturedCall& site, AlltoallvArgs args);
  bool triggeredBy(Stream& user);

  const EngineContext ctx_;
  ProgressThread progress_;
  std::unique_ptr<EnqueuedCalls> enqueued_;
  // Captured fixed-count calls on one node whose work is all in the graph (coll/in_graph_calls.h).
  std::unique_ptr<InGraphCalls> inGraph_;
  // Last: its destructor detaches the sites graphs still hold before anything they reach goes.
  std::unique_ptr<CapturedCalls> captured_;
};

}  // namespace rmacc
