// Where the executor hands a stream's batch of memory ops to the backend before the call ends:
// at 16 memory ops, and where a run of proxy puts ends. One rule for Executor::run and for
// rmacc-sim, which models the executor's backend calls (lab/sim/runner.cc).
#pragma once

#include <cstddef>
#include <map>
#include <vector>

#include "plan/plan.h"

namespace rmacc {

// A stream's open batch goes to the backend once it holds this many memory ops, even when
// nothing else closes it (a run of proxy puts closes it sooner, proxyRunEnds).
constexpr size_t kFlushAtMemOps = 16;
// A run of proxy puts goes over at its end only where the stream's next hand-over is at least
// this many ops later: with fewer, that comes about as soon, and one more backend call costs
// more than it gains (tests/call_cost_test.cc holds the counts;
// docs/decisions.md#proxy-run-ends).
constexpr size_t kRunEndOpsAfter = 16;

// By op: 1 for a proxy put whose batch goes to the backend right after it. A run of proxy puts
// shares one store of its queue's ready flag, which releases them; the run ends where the
// stream's next op is not a put that joins the store (a wait, or a put that first waits on
// another stream). Left open, the batch would wait for 16 memory ops or the end of the call,
// and the puts for as long as the ops in between take to enqueue
// (docs/decisions.md#proxy-run-ends); unless the stream's next hand-over comes fewer
// than kRunEndOpsAfter ops later. streamOf[i]: op i's stream (any ordered key).
template <class StreamKey, class IsProxyPut>
std::vector<char> proxyRunEnds(const std::vector<plan::Op>& ops,
                               const std::vector<StreamKey>& streamOf, IsProxyPut isProxyPut) {
  std::vector<char> end(ops.size(), 0);
  std::map<StreamKey, size_t> open;  // by stream: its latest proxy put whose run is open
  for (size_t i = 0; i < ops.size(); ++i) {
    const StreamKey s = streamOf[i];
    auto run = open.find(s);
    if (run != open.end()) {
      bool joins = isProxyPut(ops[i]);
      for (int d : ops[i].deps) joins = joins && streamOf[d] == s;
      if (!joins) end[run->second] = 1;
      open.erase(run);
    }
    if (isProxyPut(ops[i])) open[s] = i;
  }
  for (const auto& [s, i] : open) end[i] = 1;
  std::map<StreamKey, size_t> next;  // by stream: its next hand-over (the call's end at first)
  for (size_t i = ops.size(); i-- > 0;) {
    if (!end[i]) continue;
    size_t& at = next.try_emplace(streamOf[i], ops.size()).first->second;
    if (at - i < kRunEndOpsAfter) end[i] = 0;
    else at = i;
  }
  return end;
}

}  // namespace rmacc
