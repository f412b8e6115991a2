// This rank's AlltoAllV plans, cached by what they depend on (issue 18, host time per call).
//
// A call with the same inputs as a recent one reuses its plan. MoE routing changes the counts
// on every call, so most calls miss: a miss plans into the storage of the least recently used
// entry (plan::makeRankPlan's in-place overload overwrites its ops and dep lists), so once the
// cache is full and the plan sizes have settled a call allocates nothing for its plan. An
// entry whose plan someone still holds is never overwritten; the cache then grows a new one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "core/topology.h"
#include "plan/rank_planner.h"

namespace rmacc {

class PlanCache {
 public:
  PlanCache(const Topology& topo, size_t capacity) : topo_(topo), capacity_(capacity) {}

  // This rank's plan for `in`; `planned` (optional) says whether it was built by this call.
  // Relay steps count only modulo the slot count (and whether earlier steps exist): plans that
  // differ elsewhere are different entries.
  std::shared_ptr<const plan::RankPlan> get(const plan::Options& options,
                                            const plan::RankInputs& in, bool* planned = nullptr);

  struct Stats {
    uint64_t hits = 0, misses = 0;
    uint64_t resultsAllocated = 0;  // plan results created (the rest reused an evicted one)
  };
  const Stats& stats() const { return stats_; }
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<plan::RankPlanResult> result;
  };
  void makeKey(const plan::Options& options, const plan::RankInputs& in);
  std::list<Entry>::iterator freeEntry();

  const Topology& topo_;
  const size_t capacity_;
  std::list<Entry> entries_;  // most recently used first
  std::string key_;           // scratch of one call, its capacity kept
  std::vector<uint64_t> steps_;
  Stats stats_;
};

}  // namespace rmacc
