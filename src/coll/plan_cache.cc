#include "coll/plan_cache.h"

#include <algorithm>

#include "plan/plan_build.h"

namespace rmacc {

// The key: every input the plan depends on, byte for byte; each relay step reduced to its slot
// and whether earlier steps exist (a plan reads nothing else of it).
void PlanCache::makeKey(const plan::Options& opt, const plan::RankInputs& in) {
  key_.clear();
  auto append = [this](const auto& v) {
    key_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(v[0]));
  };
  steps_.clear();
  const uint64_t slots = (uint64_t)plan::callOptions(opt, in.largestPayload, topo_.nNodes()).slots;
  for (uint64_t t : in.writerStep) steps_.insert(steps_.end(), {t % slots, std::min<uint64_t>(t, slots)});
  steps_.insert(steps_.end(), {in.relayStepsBefore % slots, std::min<uint64_t>(in.relayStepsBefore, slots)});
  for (const std::vector<uint64_t>* v :
       {&in.send, &in.recv, &in.relayIn, &in.roundChunks, &in.forwardSignals, &in.writerOffset,
        &in.writerCallStep})
    append(*v);
  steps_.push_back(slots);  // the call's geometry (Options::fitSlotsFrom)
  append(steps_);
  append(in.forwardLastBatch);
}

// An entry to plan into, moved to the front: the least recently used one when the cache is
// full and nobody holds its plan (its key and result storage are reused), else a new one.
std::list<PlanCache::Entry>::iterator PlanCache::freeEntry() {
  if (entries_.size() >= capacity_ && !entries_.empty()) {
    auto last = std::prev(entries_.end());
    if (last->result.use_count() == 1) {
      entries_.splice(entries_.begin(), entries_, last);
      return entries_.begin();
    }
    entries_.erase(last);  // still held: its holder keeps the plan alive
  }
  entries_.push_front(Entry{std::string(), std::make_shared<plan::RankPlanResult>()});
  ++stats_.resultsAllocated;
  return entries_.begin();
}

std::shared_ptr<const plan::RankPlan> PlanCache::get(const plan::Options& options,
                                                     const plan::RankInputs& in, bool* planned) {
  makeKey(options, in);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->key != key_) continue;
    entries_.splice(entries_.begin(), entries_, it);
    ++stats_.hits;
    if (planned) *planned = false;
    return std::shared_ptr<const plan::RankPlan>(it->result, &it->result->plan);
  }
  ++stats_.misses;
  auto e = freeEntry();
  e->key.swap(key_);  // the old key's storage becomes the next call's scratch
  plan::makeRankPlan(topo_, options, in, *e->result);
  if (planned) *planned = true;
  return std::shared_ptr<const plan::RankPlan>(e->result, &e->result->plan);
}

}  // namespace rmacc
