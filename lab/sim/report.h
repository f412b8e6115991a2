// rmacc-sim's output: a readable report, or one JSON line per schedule.
#pragma once

#include <cstdio>

#include "options.h"
#include "runner.h"

namespace rmacc::sim {

struct RunInfo {
  Schedule schedule;
  double planMs = 0;       // building (and verifying) the plan, on this machine
  size_t ops = 0;          // ops over all ranks
  int batches = 0;
  // The relay geometry the call was planned with (Plan::options, after callOptions: fitted
  // calls take more, smaller slots); 0 where the schedule has no relay.
  int slots = 0;
  uint64_t slotBytes = 0;
};

// The network bound on algbw for uniform traffic: every GPU sends (N-1)/N of its bytes through
// its NIC, so algbw <= N/(N-1) x NIC (0 on one node).
double boundAlgbw(const Cluster& c);

void printReport(FILE* out, const SimOptions& o, const RunInfo& info, const Result& r);
void printJson(FILE* out, const SimOptions& o, const RunInfo& info, const Result& r);

}  // namespace rmacc::sim
