// Proves a plan (or a sequence of plans, one per consecutive call) correct by executing it
// abstractly: lanes in order, deps, monotonic signal counters, relay memory byte by byte.
#pragma once

#include <string>
#include <vector>

#include "plan/plan.h"

namespace rmacc::plan {

struct Verdict {
  bool ok = true;
  std::string error;  // the first violation, readable
};

// Checks, for every call in order, starting from fresh signal counters and empty relays:
// - every byte of every receive block is written exactly once, with the right source byte
//   (origin, offset), and nothing outside the blocks is written;
// - no relay byte is overwritten while it holds data not yet forwarded, and every forward
//   reads bytes that were written by the step it expects;
// - every wait is eventually satisfied (no deadlock), with each lane in order;
// - relay use stays within options.slots * options.slotBytes.
Verdict verify(const std::vector<Plan>& calls);

}  // namespace rmacc::plan
