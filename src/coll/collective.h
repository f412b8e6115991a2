// AlltoAllV and AlltoAll (DESIGN.md §2): the communicator's progress thread exchanges the
// counts, checks them, plans (cached by shape) and hands the plan to the executor; the call
// returns once it has, or after RMACC_ENQUEUE_WAIT_MS when a peer is late (never waiting for
// peers longer). The user's stream waits, on the device, for a done flag that the executor's
// join stream writes.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "coll/call_args.h"
#include "coll/dynamic_counts.h"
#include "exec/engine_context.h"
#include "exec/executor.h"
#include "coll/count_exchange.h"
#include "exec/signal_space.h"
#include "exec/staging.h"
#include "coll/plan_cache.h"
#include "plan/plan.h"

namespace rmacc {

// The planner's options from the configuration (RMACC_RELAY_*, RMACC_MAX_PUT_BYTES, ...) on
// nNodes nodes, the same on every rank (CollectiveEngine checks it at init).
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
  rmaccResult_t takeCallError(uint64_t seq, std::string* text);
  // The last call whose work completed (numbers as alltoallv returns them).
  uint64_t completedSeq() const { return doneSeq(); }
  // Errors of completed calls that nobody collected yet (rmaccStreamSynchronize reports them).
  // `seq`, when given, gets the call's number.
  rmaccResult_t takeAnyCallError(std::string* text, uint64_t* seq = nullptr);
  uint64_t relayBytes() const { return relayAlloc_ ? relayAlloc_->size() : 0; }
  // Releases a count exchange blocked on a peer of this node (the communicator aborts).
  void abort();
  // Returns once no call is being set up and every call's work has finished or failed: after
  // the communicator was poisoned, nothing queued touches a caller's memory any more.
  void quiesce();
  // End offset of the highest relay byte this rank wrote into a peer's relay (measured).
  uint64_t relayHighWater() const { return executor_->relayHighWater(); }
  // The cost of the last call that moved data (set once its work is enqueued).
  CallCost lastCallCost() {
    std::lock_guard<std::mutex> lock(mu_);
    return lastCost_;
  }

 private:
  struct Task {
    uint64_t seq;
    AlltoallvArgs args;
    double queuedAt = 0;  // seconds (steady clock) when the call was enqueued
    uint64_t userCalls = 0;  // backend calls the caller's thread made to enqueue it
    CapturedCall* site = nullptr;  // a call triggered by its stream: its site
  };
  // A captured call's stream reached it (CapturedCalls::Trigger; the host-function thread).
  static void onTrigger(void* engine, CapturedCall& site, AlltoallvArgs args);
  void trigger(CapturedCall& site, AlltoallvArgs args);
  bool triggeredBy(Stream& user);
  CallDone doneOf(const Task& task) const;
  // Holds the caller until fewer than RMACC_MAX_CALLS_IN_FLIGHT calls are unfinished.
  void waitForRoom();
  void progressLoop();
  void runTask(Task& task);
  struct Targets;
  void chooseTargets(const Task& task, Targets& t);
  void setBuffers(const Task& task, const CountExchange::Result& x, const plan::RankPlan& plan,
                  CallBuffers& b);
  void checkPeerTarget(int localRank, const CountExchange::Result& x, size_t mapped) const;
  void fail(uint64_t seq, rmaccResult_t code, const std::string& text);
  plan::Options planOptions() const;
  void checkPlanOptionsAgree();
  std::shared_ptr<const plan::RankPlan> planFor(const plan::RankInputs& in);
  // A peer's receive target mapped here, cached by its export handle.
  // The mapping stays cached until no enqueued call may still copy into it.
  std::shared_ptr<Mapping> peerMapping(const ExportHandle& handle, uint64_t seq);
  void evictPeerMappings(uint64_t seq);  // after call `seq` was enqueued

  const EngineContext ctx_;
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
  std::unique_ptr<Allocation> relayAlloc_;
  std::unique_ptr<MemoryRegion> relayMr_;
  std::vector<PeerTarget> peerRelay_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<DynamicCounts> dynamic_;  // rmaccAlltoAllvDynamic's counts
  std::unique_ptr<CountExchange> counts_;

  // Receive staging (DESIGN.md §4: any buffer works; rmaccMemAlloc memory takes the
  // zero-copy path): for blocks written by ranks of this node (mappable memory) and for
  // blocks written by rail peers of other nodes (memory the network reaches).
  std::unique_ptr<StagingBuffer> localStaging_;
  std::unique_ptr<StagingBuffer> remoteStaging_;
  struct PeerMap {
    std::shared_ptr<Mapping> mapping;
    uint64_t lastUse;  // the last call that copies into it
  };
  std::map<std::string, PeerMap> peerMaps_;
  std::vector<char> writesInto_;  // setBuffers: the node mates this call writes bytes into
  CallBuffers callBuffers_;       // setBuffers: the call's buffers, storage kept across calls

  PlanCache planCache_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool stop_ = false;
  bool busy_ = false;  // the progress thread is running a task
  uint64_t enqueuedSeq_ = 0;  // the last call whose work the progress thread enqueued (or failed)
  uint64_t nextSeq_ = 0;
  std::map<uint64_t, std::pair<rmaccResult_t, std::string>> callErrors_;
  CallCost lastCost_;
  std::thread thread_;
  // Captured fixed-count calls on one node whose work is all in the graph (coll/in_graph_calls.h).
  std::unique_ptr<InGraphCalls> inGraph_;
  // Last: its destructor detaches the sites graphs still hold before anything they reach goes.
  std::unique_ptr<CapturedCalls> captured_;
};

}  // namespace rmacc
