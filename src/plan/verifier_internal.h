// Private to the verifier: the static checks of a call sequence and the relay-layout oracle,
// shared by verifier.cc (the abstract execution) and verifier_checks.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/plan.h"

namespace rmacc::plan::verify_detail {

// The first violation found; verify() turns it into a Verdict.
struct Violation {
  std::string text;
};
[[noreturn]] void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Where every relayed byte of one call belongs, derived from the counts alone (independently of
// the planner's op lists). A pair (origin w, dest d) on different nodes and rails travels through
// relay r = (node of d, rail of w); within r's round payload from w it starts at `start`, and
// that payload's first chunk is global relay step `firstStep` of r, and its chunks are
// chunkBytes(payload total) long (plan_build.h: the rule is the options', not the planner's).
class RelayOracle {
 public:
  explicit RelayOracle(const Plan& plan);

  int relayOf(int origin, int dest) const { return relay_[key(origin, dest)]; }
  // Relay step of byte `offset` of the block origin -> dest.
  uint64_t stepOf(int origin, int dest, uint64_t offset) const {
    const size_t at = key(origin, dest);
    return firstStep_[at] + (start_[at] + offset) / chunk_[at];
  }
  // Where that byte must sit in the relay buffer: slot step mod S, same place in the chunk.
  uint64_t relayOffsetOf(int origin, int dest, uint64_t offset) const {
    const uint64_t pos = start_[key(origin, dest)] + offset;
    return (stepOf(origin, dest, offset) % slots_) * slotBytes_ + pos % chunk_[key(origin, dest)];
  }
  // The relay steps per relay rank after this call (Plan::after must equal it).
  const std::vector<uint64_t>& after() const { return after_; }

 private:
  size_t key(int origin, int dest) const { return (size_t)origin * n_ + dest; }

  int n_;
  uint64_t slotBytes_;
  uint64_t slots_;
  std::vector<int> relay_;
  std::vector<uint64_t> firstStep_;
  std::vector<uint64_t> start_;
  std::vector<uint64_t> chunk_;  // chunk size of the payload the block belongs to
  std::vector<uint64_t> after_;
};

// The relay steps a call starts from: Plan::before with an empty vector read as zeros.
std::vector<uint64_t> relayStepsBefore(const Plan& plan);

// Checks what needs no execution: matching topologies and carries across calls, sizes, and
// every op's lane, peer, signal and deps. Throws Violation.
void checkStatic(const std::vector<Plan>& calls, const std::vector<RelayOracle>& oracles);

}  // namespace rmacc::plan::verify_detail
