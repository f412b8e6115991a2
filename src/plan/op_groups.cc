#include "plan/op_groups.h"

#include <cstdint>

namespace rmacc::plan {
namespace {

// Ops that one backend call can issue together: same lane, same kind of work, and for copy
// engine puts the same peer (the executor gives each peer's CE work its own stream).
int64_t classOf(const Op& op) {
  int kind = op.kind == OpKind::kWait ? 0 : (op.bytes == 0 && op.kind == OpKind::kPut ? 1 : 2);
  if (op.lane == Lane::kProxyPut) kind = 3;  // the proxy takes puts and signals alike
  const int peer = op.lane == Lane::kCePut ? (op.kind == OpKind::kCopy ? -2 : op.peer) : -1;
  return ((int64_t)op.lane << 40) | ((int64_t)kind << 32) | (uint32_t)peer;
}

}  // namespace

std::vector<OpGroup> groupOps(const RankPlan& plan) {
  const std::vector<Op>& ops = plan.ops;
  std::vector<OpGroup> groups;
  std::vector<int> groupOf(ops.size(), -1);
  int open[kNumLanes] = {-1, -1, -1, -1};  // the open group per lane
  for (int i = 0; i < (int)ops.size(); ++i) {
    const Op& op = ops[i];
    // An op that depends on a member of another lane's open group closes that group: later
    // ops of that lane must not make this one wait for them.
    for (int d : op.deps) {
      const int g = groupOf[d];
      const int lane = (int)ops[d].lane;
      if (g >= 0 && lane != (int)op.lane && open[lane] == g) open[lane] = -1;
    }
    const int lane = (int)op.lane;
    int g = open[lane];
    bool joins = g >= 0 && classOf(ops[groups[g].first]) == classOf(op);
    for (int d : op.deps) joins = joins && d < groups[g].first;
    if (!joins) {
      groups.push_back({i, {}});
      g = open[lane] = (int)groups.size() - 1;
    }
    groups[g].members.push_back(i);
    groupOf[i] = g;
  }
  return groups;
}

}  // namespace rmacc::plan
