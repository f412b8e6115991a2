// Calls triggered by their stream (DESIGN.md §4.1, CUDA graph capture). A call captured into a
// CUDA graph cannot have its work enqueued when it is made: the graph replays later, any number
// of times, and every replay is a new call (new signal values, new device counts). So the
// capture records only what the stream itself does for the call, through one call site:
//
//   store 0 in the site's done flag;
//   [device counts: copy sendcounts and sdispls into the site's pinned slot];
//   host function: hand the call to the engine (CollectiveEngine::trigger);
//   wait until the done flag is >= 1.
//
// At every replay the host function gives the call its number and queues it; the progress
// thread then runs it as any call (count exchange, plan, enqueue on rmacc's own streams), and
// the executor stores 1 in the done flag once the call is complete. Outside a capture the same
// path serves RMACC_STREAM_TRIGGER=always (one site per stream, calls queued in stream order),
// so that CI runs it without CUDA graphs.
//
// Limit (docs/decisions.md#replay-triggered-limit): the run's copies are enqueued by the
// progress thread when the stream reaches the call, and cudaGraphLaunch, with many launches pending, waits inside the
// driver holding a lock those copies need: a caller more than ~8 replays ahead deadlocks. The
// way out is to have nothing to enqueue then: fixed-count calls on one node are therefore
// captured whole instead (coll/in_graph_calls.h); calls with device counts and calls across
// nodes still come here.
//
// A graph's site lives as long as the graphs made from its capture (Stream::tieToCapture), then
// goes back to the pool. If the communicator is destroyed first, sites still held by graphs keep
// their memory, and a replay finds the engine gone: it says so and releases its stream.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "coll/call_args.h"

namespace rmacc {

struct CapturedCall;

class CapturedCalls {
 public:
  // The engine's side: queue one run of the call. Runs on the stream's host-function thread,
  // so it must not call the backend.
  using Trigger = void (*)(void* engine, CapturedCall& site, AlltoallvArgs args);
  CapturedCalls(Backend& backend, int nRanks, void* engine, Trigger trigger);
  ~CapturedCalls();

  // Records the call's part on `user` (the sequence above): under capture in a site of its own
  // tied to the graph, which replays `args` every time; otherwise in the stream's site, whose
  // runs take queued arguments in order. Returns the site and, for a stream site, the number
  // of this run (CapturedCall::runsEnqueued reaches it once its work is enqueued); 0 under
  // capture.
  std::pair<CapturedCall*, uint64_t> record(Stream& user, AlltoallvArgs args);

  // Stores 1 in the site's done flag from the CPU: its run failed before its work was enqueued
  // (the executor stores it otherwise, as part of the call's work).
  void release(CapturedCall& site);
  // Releases every site in flight (rmaccCommAbort), so that their streams go on.
  void releaseAll();
  // True while a CUDA graph holds one of these calls (until the graph is destroyed).
  bool inGraphs() {
    std::lock_guard<std::mutex> lock(mu_);
    return graphSites_ > 0;
  }

  struct Link;  // what a site's host function reaches (captured_calls.cc)

 private:
  static void onHostFunction(void* site);
  static void onGraphDestroyed(void* site);
  CapturedCall& acquire();  // caller holds mu_

  Backend& backend_;
  const int n_;
  std::shared_ptr<Link> link_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Allocation>> slabs_;
  std::vector<CapturedCall*> sites_;  // every site made, owned (see the destructor)
  size_t graphSites_ = 0;             // of them, held by graphs now
  std::vector<CapturedCall*> free_;
  std::unordered_map<Stream*, CapturedCall*> perStream_;  // RMACC_STREAM_TRIGGER=always
};

// One call site. `done` and `counts` are pinned host memory that streams read and write.
struct CapturedCall {
  std::shared_ptr<CapturedCalls::Link> link;
  volatile uint64_t* done = nullptr;  // 0 while a run is in flight, 1 once it is complete
  uint64_t* counts = nullptr;         // [4n]: sendcounts, sdispls, recvcounts, rdispls
  bool graph = false;                 // a graph's site (held until the graphs are destroyed)
  AlltoallvArgs args;                 // graph site: the call's arguments
  std::deque<AlltoallvArgs> queued;   // stream site: arguments of calls not yet run
  uint64_t runsRecorded = 0;          // stream site: calls recorded (guarded by the pool)
  uint64_t runsEnqueued = 0;          // runs whose work the engine enqueued (guarded by it)
};

}  // namespace rmacc
