// Which wait lanes run their completion waits on a stream of their own. One rule for
// Executor::classify and for rmacc-sim, which models where those waits run
// (lab/sim/runner.cc).
#pragma once

#include <vector>

#include "plan/plan.h"

namespace rmacc {

// A wait lane whose ops only wait gets no stream of its own: whoever depends on one of its
// waits adds the waits up to it to its own memory ops, and those nothing depends on -- the
// completion waits, one per source of the rank's data -- join the last stream's final batch,
// where they run one after another (~1 us of GPU time each) after that stream's
// last op. A lane holding completion waits on ranks of this many other-node sources runs its
// own waits instead, so that they are checked while the data arrives, round by round (the plan
// puts each one position after its source's last data, plan_build.h completionKeyBatch), for
// one more backend call. With one remote source (2 nodes) its data comes in the call's only
// round: nothing to check early (docs/decisions.md#completion-waits).
constexpr int kOwnCompletionStreamFrom = 2;

// By op: 1 for a completion wait on a rank of another node (a wait no op depends on: also a
// writer's wait for its round-1 relay's release, plan.h Options::releaseRelayUpTo, so at 2
// nodes, with the release, the lane runs its own stream), in the ops of rank `me`.
inline std::vector<char> remoteCompletionWaits(const std::vector<plan::Op>& ops,
                                               const Topology& topo, int me) {
  std::vector<char> gates(ops.size(), 0), out(ops.size(), 0);
  for (const plan::Op& op : ops)
    for (int d : op.deps) gates[d] = 1;
  for (size_t i = 0; i < ops.size(); ++i)
    out[i] = ops[i].kind == plan::OpKind::kWait && !gates[i] && !topo.sameNode(ops[i].peer, me);
  return out;
}

}  // namespace rmacc
