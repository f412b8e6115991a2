// What rmacc-sim's tests build their cases from: a cluster where only bandwidth and latency
// cost time, and plans written op by op (the model's answers are worked out on paper for them).
#pragma once

#include <cstdint>
#include <vector>

#include "cluster.h"
#include "plan/plan.h"

namespace rmacc::sim {

// The vocabulary the cases write their plans in.
using plan::Lane;
using plan::Op;
using plan::OpKind;
using plan::Region;

// A cluster where only bandwidth and the network latency cost time.
Cluster bare(int nodes, int gpus);

// One op of a hand-built plan.
Op op(OpKind kind, Lane lane, int peer, uint64_t bytes, int ctx, int sig, uint32_t count,
      std::vector<int> deps, Region src = Region::kNone, Region dst = Region::kNone);

// A plan of `nodes` nodes of one GPU each with no ops yet.
plan::Plan flatPlan(int nodes);
// A proxy put of `bytes` from the send to the receive buffer of `to` on the collective's data
// signal.
Op dataPut(int to, uint64_t bytes, std::vector<int> deps = {});
// One GPU a node: r0 puts `bytes` to each rank of `to`, which waits for it.
plan::Plan fanOut(int nodes, std::vector<int> to, uint64_t bytes);

}  // namespace rmacc::sim
