// Captured calls whose whole work is in the CUDA graph (DESIGN.md §4.1). A call with counts
// fixed at capture on a one-node communicator needs nothing from the CPU at replay: where each
// block goes is known then. So its capture trades buffers and counts with the node's ranks
// (over the bootstrap, on the caller's thread), plans the call (plan/graph_plan.h: the enqueued
// call's plan for the same counts) and has the executor's recorder (exec/graph_recorder.h)
// record one replay of that plan on the caller's stream:
//
//   mark the replay running; write 1 into ready[me] of every rank that sends to this one
//   for each rank q this one sends to, on a lane of its own:
//     wait until ready[q] >= 1, write 0 into it; copy the block to q; write 1 into done[me] at q
//   the block to itself: one copy, or through pinned slots on two lanes (exec/local_copy.h)
//   wait until done[p] >= 1 for every sender p, write 0 into each
//
// (ready: the plan's entry signals; done: its data signals.) This file owns what the plan does
// not say: the trade, the sites and their flags, the peers' mappings and the watchdog.
// Every flag goes 0 -> 1 -> 0 once per replay, so the values are the same at every replay,
// and no write can overtake its reset: a rank resets ready before its done write, and its peer
// writes ready again only after seeing that done (each store waits for the stream's earlier
// work). The progress thread takes no part, so a caller any number of replays ahead cannot
// block it (the triggered path's limit: coll/captured_calls.h). The replay's first and last
// stores also mark it running and idle in host memory for the watchdog, which fails the
// communicator when one runs past RMACC_TIMEOUT_S and, once it has failed, releases every
// replay that waits. (No host function: its trip through the CPU would cost more than the
// whole small call, docs/decisions.md#in-graph-calls.)
//
// Limits: one graph's replays must run one after another (as launches of one cudaGraphExec
// do); two executable graphs instantiated from one capture must not run at the same time.
// The buffers must be memory the node's ranks can map (rmaccMemAlloc, cudaMalloc); when a
// rank's are not, every rank's call takes the triggered path instead. A site's pinned slots and
// peer mappings are freed with the communicator, not with its graph: freeing or unmapping then
// would wait for the device, from a CUDA callback or a capturing thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "coll/call_args.h"
#include "exec/engine_context.h"
#include "exec/graph_recorder.h"

namespace rmacc {

class InGraphCalls {
 public:
  explicit InGraphCalls(const EngineContext& ctx);
  ~InGraphCalls();

  // Whether the call takes this path: fixed counts on a one-node communicator, on a stream
  // being captured (RMACC_GRAPH_CALLS=in-graph), or on any stream (=always). Every rank gives
  // the same answer for the same call.
  bool takes(Stream& user, const AlltoallvArgs& args) const;
  // Collective over the node, in call order: trades the call's buffers and counts with every
  // rank, then records one replay's work on `user`. False on every rank when some rank's
  // buffers cannot be mapped by the others (the call then takes the triggered path). Throws
  // rmaccInvalidUsage on every rank when a rank's arguments were rejected or two ranks disagree
  // on the bytes between them.
  bool record(Stream& user, const AlltoallvArgs& args);
  // The communicator failed: releases the replays waiting now (the watchdog releases later ones).
  void releaseAll();
  // Waits until the lanes (RMACC_GRAPH_CALLS=always runs replays' work on them) ran what they
  // hold, failed or released: nothing of theirs may touch a caller's memory after a failed
  // call returned (Comm::failCall, through CollectiveEngine::quiesce).
  void drain();

  struct Site;

 private:
  struct Offer;
  struct Link;
  // Maps the peers' memory, plans the call and works out one replay; `slot` holds its flags.
  Site* build(const AlltoallvArgs& args, const std::vector<Offer>& offers, size_t slot, uint64_t key);
  void release(Site& site);
  Site* cached(uint64_t key);
  void allocateFlags();   // another slab of sites' flags
  void watch();           // the watchdog thread
  static void onGraphDestroyed(void* site);

  const EngineContext ctx_;
  const int me_;  // this rank's index among the node's ranks
  const int L_;   // ranks on the node
  const bool ring_;  // the block to itself goes through pinned slots (no compute units)
  const size_t siteBytes_;     // a site's flags: ready[L], done[L]
  const size_t sitesPerSlab_;  // sites whose flags one slab holds
  std::shared_ptr<Link> link_;

  std::mutex captureMu_;  // one record() at a time: the recorder's lanes and events
  // Turns a site's plan into one replay's work on the caller's stream and its lanes.
  std::unique_ptr<GraphRecorder> recorder_;

  std::mutex mu_;  // the sites and flag slabs (record, the watchdog, graph destruction)
  struct Slab {
    std::unique_ptr<Allocation> flags;     // device memory the node's ranks map: ready, done
    std::unique_ptr<Allocation> finished;  // host-visible words the replays' ends write
  };
  std::vector<Slab> slabs_;
  size_t nextSlot_ = 0;       // slots are never reused: a peer's old graph may still write one
  std::vector<Site*> sites_;  // every site, owned (until the communicator's end)
  std::list<std::pair<uint64_t, Site*>> cache_;  // RMACC_GRAPH_CALLS=always: by call, recent first
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread watchdog_;
};

}  // namespace rmacc
