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
  // Node round order: false, the library's (Topology: 1, N-1, 2, N-2, ...); true, NCCL's
  // triangular order, the library's before RESULTS §20 (a study).
  bool triangularRounds = false;
};

// Round deltas 0, then k(k+1)/2 mod P (P the next power of two >= N) kept while < N: NCCL's p2p
// order (SimOptions::triangularRounds).
std::vector<int> triangularRoundDeltas(int nNodes);

// Parses argv; prints usage and exits 0 on --help. Throws rmaccInvalidArgument naming the bad
// option on anything malformed.
SimOptions parseOptions(int argc, char** argv);

}  // namespace rmacc::sim
