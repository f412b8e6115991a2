// Records a plan into a CUDA graph (or runs it as if recorded: RMACC_GRAPH_CALLS=always): the
// in-graph call's executor (coll/in_graph_calls.h). Where the executor runs a plan once, with
// signals that count up over the communicator's life, a recorded plan is replayed any number
// of times with the same values, so its signals are flags that go 0 -> count -> 0 once per
// replay. One replay, as recorded on the caller's stream and the lanes it forks:
//
//   mark the replay running; the plan's entry signals (each rank that sends to this one)
//   for each peer q this rank puts data to, on a lane of its own:
//     wait for q's entry signal, reset it; copy the block(s) to q; write the data signal at q
//   the block to itself: one copy, or through pinned slots on two lanes (exec/local_copy.h)
//   wait for each sender's data signal, reset them all; mark the replay idle
//
// What must hold: no write overtakes its reset. A rank resets q's entry flag before its data
// write to q, and q signals entry again only after seeing that data (each store waits for its
// stream's earlier work). The plans a graph can hold are those of plan/graph_plan.h
// (graphPlanProblem says which).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/backend.h"
#include "core/topology.h"
#include "exec/executor.h"
#include "plan/plan.h"

namespace rmacc {

// Where one replay's signals land, fixed at capture. Flags are indexed by the sender's local
// rank on the node.
struct GraphFlags {
  volatile uint64_t* entry = nullptr;  // [L]: this rank's entry flags (senders may write here)
  volatile uint64_t* data = nullptr;   // [L]: this rank's data flags
  // By rank: that rank's entry and data flags, mapped here; nullptr where this rank writes none.
  std::vector<volatile uint64_t*> peerEntry, peerData;
  // Host-visible: `running` is stored at the replay's start and `idle` at its end (a watchdog
  // times replays from them).
  volatile uint64_t* finished = nullptr;
  uint64_t running = 0, idle = 1;
};

// One replay's work, worked out from a plan once (GraphRecorder::prepare).
struct GraphWork {
  std::vector<MemOpDesc> start;   // the running mark, then entry signals into senders' flags
  std::vector<MemOpDesc> finish;  // waits for the senders' data, their resets, the idle mark
  struct Send {
    int lane = 0;
    std::vector<MemOpDesc> take;  // wait for the peer's entry, reset it (none: not gated)
    std::vector<CopyDesc> copies;
    MemOpDesc dataWrite{};        // the data signal at the peer, after the copies
  };
  std::vector<Send> sends;
  CopyDesc self{nullptr, nullptr, 0};
  size_t chunk = 0;                  // ring: bytes per slot
  std::unique_ptr<Allocation> ring;  // ring: kRingSlots pinned slots
  uint64_t bytes = 0;                // bytes this rank puts to its peers
  size_t senders = 0;                // ranks whose data this rank waits for
};

class GraphRecorder {
 public:
  // `ring`: the block a rank sends itself goes through pinned slots (no compute units).
  GraphRecorder(Backend& backend, const Topology& topo, int rank, bool ring);
  ~GraphRecorder();  // waits for the lanes

  // Works out one replay of rank `rank`'s `plan` (plan/graph_plan.h) with buffers `b` (peers'
  // receive buffers mapped in b.peerRecv[].local) and flags `f`. Throws rmaccInternalError for
  // a plan a graph cannot hold. Allocates (pinned slots, lanes): call it where the backend may
  // (Backend::runRelaxed under a capture).
  std::unique_ptr<GraphWork> prepare(const plan::RankPlan& plan, const CallBuffers& b,
                                     const GraphFlags& f);
  // Records one replay of `w` on `user` and the lanes it forks (captured with `user` when it is
  // being captured, run otherwise). One record at a time: the caller serialises them.
  void record(const GraphWork& w, Stream& user);
  // Waits until the lanes ran what they hold (failed or released).
  void drain();

 private:
  Event& nextEvent();

  Backend& backend_;
  const Topology& topo_;
  const int rank_;
  const int me_;  // local rank
  const int L_;   // ranks on the node
  const bool ring_;
  std::mutex mu_;  // lanes_ (prepare grows it, drain reads it from another thread)
  std::vector<std::unique_ptr<Stream>> lanes_;  // by peer distance, then the two ring lanes
  std::vector<std::unique_ptr<Event>> events_;
  size_t nextEvent_ = 0;
};

}  // namespace rmacc
