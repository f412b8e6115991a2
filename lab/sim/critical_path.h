// What each simulated op waited for last, and the critical path read back from those records.
#pragma once

#include <vector>

#include "plan/plan.h"
#include "runner.h"

namespace rmacc::sim {

struct OpRef {
  int rank = -1, op = -1;
};

// Why an op could start when it did: the last of its conditions to be met.
enum class Gate { kNone, kEnqueue, kStream, kDep, kSignal };

struct OpRecord {
  double start = 0, end = 0;  // on its stream
  double arrival = 0;         // proxy puts: when the target applied the signal
  double gateAt = -1;
  Gate gateKind = Gate::kNone;
  OpRef gateBy;
  void gate(Gate kind, double t, OpRef by) {
    if (t < gateAt) return;
    gateAt = t;
    gateKind = kind;
    gateBy = by;
  }
};

// Walks back from whatever finished at `endUs` (an op's end or a put's arrival), through each
// op's gate, to the host's enqueue at the start, and splits the time by what it was spent on.
CriticalPath criticalPath(const plan::Plan& plan,
                          const std::vector<const std::vector<OpRecord>*>& recs, double endUs);

}  // namespace rmacc::sim
