#include "core/test_hooks.h"

#include <atomic>
#include <mutex>

#include "core/config.h"
#include "core/error.h"

namespace rmacc {

namespace {

struct Overrides {
  std::mutex mu;
  std::vector<std::pair<std::string, std::string>> list;
};

Overrides& overrides() {
  static Overrides* o = new Overrides;  // never destroyed: the configuration may be read at exit
  return *o;
}

}  // namespace

void setParamForTest(const char* name, const char* text) {
  RMACC_ARG_CHECK(name && text, "setParamForTest: name and text must not be NULL");
  RMACC_ARG_CHECK(findParam(name), "setParamForTest: %s is not a parameter (core/config.h)", name);
  Config probe;
  RMACC_ARG_CHECK(probe.parse(name, text) == Config::Read::kSet,
                  "setParamForTest: %s='%s' is malformed: expected %s", name, text,
                  Config::expected(name).c_str());
  Overrides& o = overrides();
  std::lock_guard<std::mutex> lock(o.mu);
  o.list.emplace_back(name, text);
}

void clearParamsForTest() {
  Overrides& o = overrides();
  std::lock_guard<std::mutex> lock(o.mu);
  o.list.clear();
}

std::vector<std::pair<std::string, std::string>> paramOverridesForTest() {
  Overrides& o = overrides();
  std::lock_guard<std::mutex> lock(o.mu);
  return o.list;
}

bool paramOverriddenForTest(const char* name) {
  Overrides& o = overrides();
  std::lock_guard<std::mutex> lock(o.mu);
  for (const auto& e : o.list)
    if (e.first == name) return true;
  return false;
}

namespace {

// Relaxed counters: one increment a call costs a few nanoseconds, and tests read them after
// the calls they count have returned.
std::atomic<uint64_t> pathCounts[3];

}  // namespace

void countCallPath(CallPath path) {
  pathCounts[(int)path].fetch_add(1, std::memory_order_relaxed);
}

CallPathCounts callPathCountsForTest() {
  CallPathCounts c;
  c.direct = pathCounts[(int)CallPath::kDirect].load(std::memory_order_relaxed);
  c.handedOff = pathCounts[(int)CallPath::kHandedOff].load(std::memory_order_relaxed);
  c.queued = pathCounts[(int)CallPath::kQueued].load(std::memory_order_relaxed);
  return c;
}

}  // namespace rmacc
