// The enqueued call path (DESIGN.md §2): what runs a call the progress thread was handed,
// whether its caller enqueued it or its stream triggered it at replay (coll/captured_calls.h).
// The caller's thread numbers the call and puts its part on the user's stream (wait for the
// previous call, raise the start flag, wait for this call's done flag); the progress thread
// then exchanges the counts (coll/count_exchange.h), chooses the targets and buffers
// (coll/call_targets.h), plans (cached by shape: coll/plan_cache.h) and hands the plan to the
// executor, whose join stream writes the done flag.
//
// What must hold: every rank takes part in every call's count exchange, a call whose arguments
// were rejected too (with zero counts), so every rank gets the same verdict and on a mismatch
// nothing moves anywhere.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "coll/call_args.h"
#include "coll/call_targets.h"
#include "coll/count_exchange.h"
#include "coll/dynamic_counts.h"
#include "coll/plan_cache.h"
#include "coll/progress_thread.h"
#include "exec/engine_context.h"
#include "exec/executor.h"
#include "plan/plan.h"

namespace rmacc {

// The planner's options from the configuration (RMACC_RELAY_*, RMACC_MAX_PUT_BYTES, ...) on
// nNodes nodes, the same on every rank (EnqueuedCalls checks it at init).
plan::Options planOptionsOf(const Config& cfg, int nNodes);

// Tests only: when set, called with this rank's count record of every AlltoAllV just before
// the exchange (`rows`: send bytes, receive bytes and receive-target offsets, nRanks each), so
// that a test rank can play a broken or malicious peer. Set it before the communicator's
// first call; a process-wide hook (every test rank is a process of its own).
using CountRecordHook = void (*)(uint64_t seq, uint64_t* rows, int nRanks);
void setCountRecordHookForTest(CountRecordHook hook);

// What one call cost the host in backend stream calls (streamCallsOfThisThread): those the
// caller's thread made on the user stream when it enqueued the call, and those the progress
// thread made to plan and enqueue it. Logged per call at INFO; tests bound it.
struct CallCost {
  uint64_t seq = 0;          // the call (CollectiveEngine::alltoallv's number); 0: none yet
  uint64_t userCalls = 0;    // on the caller's thread
  uint64_t engineCalls = 0;  // on the progress thread
  size_t ops = 0;            // plan ops this rank ran
};

class EnqueuedCalls {
 public:
  // Collective: checks that the ranks plan alike, sets up the relay buffer (coll/call_targets.h).
  // Calls are numbered and run by `progress`, which must be started with run() as its handler.
  EnqueuedCalls(const EngineContext& ctx, RmaEngine& rma, ProgressThread& progress);
  ~EnqueuedCalls();

  // The caller's thread: enqueues the call on `user` (NULL when rejected) and returns its
  // number; waits up to RMACC_ENQUEUE_WAIT_MS for its work to be enqueued.
  uint64_t call(Stream* user, AlltoallvArgs args);
  // The progress thread's handler: exchange, plan, enqueue. A call that fails records its error
  // (takeCallError) and poisons the communicator; nothing is thrown.
  void run(QueuedCall& task);

  rmaccResult_t takeCallError(uint64_t seq, std::string* text);
  rmaccResult_t takeAnyCallError(std::string* text, uint64_t* seq = nullptr);  // seq: its number
  uint64_t completedSeq() const { return doneSeq(); }
  uint64_t relayBytes() const { return targets_->relayBytes(); }
  uint64_t relayHighWater() const { return executor_->relayHighWater(); }
  CallCost lastCallCost() {
    std::lock_guard<std::mutex> lock(mu_);
    return lastCost_;
  }
  // Releases a count exchange blocked on a peer of this node.
  void abort() {
    if (counts_) counts_->abort();
  }
  // Returns once the executor's streams ran what they hold.
  void drain() { executor_->drain(); }

 private:
  using Task = QueuedCall;
  CallDone doneOf(const Task& task) const;
  // Holds the caller until fewer than RMACC_MAX_CALLS_IN_FLIGHT calls are unfinished.
  void waitForRoom();
  void runTask(Task& task);
  // runTask's halves: up to the start of the count exchange, and from its end to the enqueue.
  void beginTask(Task& task, CallSetup& s);
  void endTask(Task& task, CallSetup& s);
  // A direct call (coll/direct_calls.cc): whether `call` may be set up on its caller's thread,
  // and that setup, which the progress thread finishes when the peers are late.
  bool directEligible(const Stream* user, const AlltoallvArgs& args) const;
  void runDirect(Task& task);
  // A call's setup failed: the communicator cannot go on.
  void failTask(const Task& task, rmaccResult_t code, const char* what);
  void fail(uint64_t seq, rmaccResult_t code, const std::string& text);
  plan::Options planOptions() const;
  void checkPlanOptionsAgree();
  std::shared_ptr<const plan::RankPlan> planFor(const plan::RankInputs& in);
  void evictPeerMappings(uint64_t seq);  // after call `seq` was enqueued

  const EngineContext ctx_;
  ProgressThread& progress_;
  // The last completed call's sequence number, stored by the executor twice: where the CPU
  // reads it (pinned host memory) and where user streams wait on it (device memory: a device
  // polls its own memory faster than host memory across PCIe).
  std::unique_ptr<Allocation> doneAlloc_;
  volatile uint64_t* doneFlag_ = nullptr;
  // The last call done: an acquire load, since the stream's worker stores the flag (a plain
  // read raced with it: ThreadSanitizer, the mapping-cache trim).
  uint64_t doneSeq() const {
    return __atomic_load_n(const_cast<const uint64_t*>(doneFlag_), __ATOMIC_ACQUIRE);
  }
  std::unique_ptr<Allocation> doneDeviceAlloc_;
  volatile uint64_t* doneDevice_ = nullptr;
  // The last call whose user stream reached it, stored by that stream (in the same device
  // allocation, a cache line after doneDevice_): the executor's streams wait for it instead of
  // an event, so the user stream's part of a call is one batch of memory ops.
  volatile uint64_t* startDevice_ = nullptr;
  std::unique_ptr<CallTargets> targets_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<DynamicCounts> dynamic_;  // rmaccAlltoAllvDynamic's counts
  std::unique_ptr<CountExchange> counts_;
  PlanCache planCache_;

  std::mutex mu_;  // the call errors and the last call's cost
  std::map<uint64_t, std::pair<rmaccResult_t, std::string>> callErrors_;
  CallCost lastCost_;
};

}  // namespace rmacc
