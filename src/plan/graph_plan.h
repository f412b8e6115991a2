// The plan of an in-graph call (coll/in_graph_calls.h): a call with counts fixed at capture on
// a one-node communicator, whose whole work a CUDA graph holds and replays. It is the enqueued
// call's plan (rank_planner.h) for the same counts, made from this rank's own counts alone
// (on one node nothing is relayed, so the rest of RankInputs is zeros), with two options fixed:
// entry signals (a graph holds no barrier) and puts never split (one copy per block).
//
// What a graph can record (exec/graph_recorder.h) is narrower than what a plan may hold, so
// graphPlanProblem() says whether a plan fits: copy-engine puts and copies, each data put
// gated only by the entry wait of its peer, waits on the copy-engine wait lane, and signals
// of the entry and data contexts only. The one-node planner makes nothing else.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/topology.h"
#include "plan/plan.h"
#include "plan/rank_planner.h"

namespace rmacc::plan {

// The options of an in-graph call planned on a communicator whose calls use `options`.
Options graphOptions(const Options& options);

// Rank `rank`'s inputs for a one-node call: `send[p]`, `recv[p]` bytes to and from each rank.
// Throws rmaccInvalidArgument when `topo` spans nodes (the call then is not in-graph) or the
// counts are not one per rank.
RankInputs graphInputs(const Topology& topo, int rank, const std::vector<uint64_t>& send,
                       const std::vector<uint64_t>& recv);

// Rank `rank`'s plan of an in-graph call: makeRankPlan(graphOptions(options), graphInputs(...)).
RankPlan makeGraphPlan(const Topology& topo, const Options& options, int rank,
                       const std::vector<uint64_t>& send, const std::vector<uint64_t>& recv);

// The two signals an in-graph plan holds: a receiver's entry signal (its buffer is free for
// this call) and a sender's data signal (its block has landed).
bool isEntrySignal(const Op& op);
bool isDataSignal(const Op& op);

// Empty when a graph can record `plan` (rank `rank`'s, on one node); else the first op that
// it cannot, and why.
std::string graphPlanProblem(const Topology& topo, int rank, const RankPlan& plan);

}  // namespace rmacc::plan
