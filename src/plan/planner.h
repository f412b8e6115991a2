// The receive-side PXN AlltoAllV planner (DESIGN.md §2). Pure: same inputs, same plan.
#pragma once

#include "plan/plan.h"

namespace rmacc::plan {

// bytes[src * n + dst]: bytes rank src sends to rank dst. `before` holds the relay steps of
// earlier calls (empty vector: none). Throws rmaccInvalidArgument on inconsistent inputs.
Plan makeAlltoallvPlan(const Topology& topo, const std::vector<uint64_t>& bytes,
                       const Options& options, const Carry& before);

}  // namespace rmacc::plan
