// Merging at the plan level (issue 18): runs of ops of one rank that the executor can hand to
// the backend in one call -- one waitValues for a run of waits on a lane, one copy batch plus
// one signal batch for a run of CE puts to one peer, one proxy submission for a run of proxy
// puts. A group only gathers ops that could be issued together without waiting longer than
// their own deps allow:
//   - every member's deps come before the group's first op (so they are all enqueued, and
//     waiting for them up front delays nothing that another op needs earlier);
//   - no op outside the group depends on a member unless it comes after the group's last op
//     (it may then wait for the whole group).
// So the planner's deadlock argument (every wait is on an earlier op or on a strictly smaller
// key) survives; tests/op_groups_test.cc checks it with the verifier on transformed plans.
#pragma once

#include <vector>

#include "plan/plan.h"

namespace rmacc::plan {

struct OpGroup {
  int first = 0;             // index of the first op
  std::vector<int> members;  // op indices in list order, first included, all on one lane
};

// The groups of `plan`, in the order of their first ops; every op is in exactly one.
std::vector<OpGroup> groupOps(const RankPlan& plan);

}  // namespace rmacc::plan
