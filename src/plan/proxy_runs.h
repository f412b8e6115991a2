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
// this many ops later: with fewer, that comes about as soon, and one more backend call (1.5-2.5
// us of the host's, RESULTS §8.3) costs more than it gains: without this rule the calls of
// 2 x 2 and 4 x 2 at steady state took 8 and 14 backend calls, with it 7 and 12 (11 without
// run ends, tests/call_cost_test.cc), and in rmacc-sim a rule of 24 ops lost 0.02-0.03 of the
// bound at 2-16 x 8 GPUs (RESULTS §22.7).
constexpr size_t kRunEndOpsAfter = 16;

// By op: 1 for a proxy put whose batch goes to the backend right after it. A run of proxy puts
// shares one store of its queue's ready flag, which releases them; the run ends where the
// stream's next op is not a put that joins the store (a wait, or a put that first waits on
// another stream). Left open, the batch waited for 16 memory ops or the end of the call, and
// the puts for as long as the ops in between took to enqueue (rmacc-sim with the host cost per
// backend call, 2 / 4 / 8 x 8 GPUs at 16 MiB: 0.67 / 0.71 / 0.69 of the bound against
// 0.71 / 0.77 / 0.74, bench/RESULTS.md §22.7); unless the stream's next hand-over comes fewer
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
