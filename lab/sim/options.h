// rmacc-sim's command line.
#pragma once

#include <string>
#include <vector>

#include "cluster.h"
#include "plan/plan.h"
#include "schedules.h"
#include "traffic.h"

namespace rmacc::sim {

struct SimOptions {
  Cluster cluster;
  Traffic traffic;
  plan::Options planner;
  uint64_t relayBytes = 64ull << 20;  // RMACC_RELAY_BYTES; slot = relayBytes / slots
  std::vector<Schedule> schedules{Schedule::kRmacc};
  bool verify = true;
  bool json = false;       // one JSON line per schedule instead of the report
  std::string tracePath;   // RMACC_TRACE_FILE format, %r = rank
  // Node round order: "library" (as src/comm/comm.cc orders them: paired when
  // plan::usePairedRounds, else Topology's triangular order), "triangular" or "paired" (studies,
  // bench/results §20).
  std::string roundOrder = "library";
};

// Parses argv; prints usage and exits 0 on --help. Throws rmaccInvalidArgument naming the bad
// option on anything malformed.
SimOptions parseOptions(int argc, char** argv);

}  // namespace rmacc::sim
