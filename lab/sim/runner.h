// Runs one call of a plan (every rank's ops) on a model of the cluster: each rank's lanes as
// the executor maps them onto streams (src/exec/executor.cc), copy engines and NICs as fluid
// resources (fluid.h), the proxy as a CPU that spends proxyOpUs per put it issues and per signal
// it applies, signals as monotonic counters that satisfy waits, and the host enqueueing ops one
// by one after its fixed per-call cost.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cluster.h"
#include "plan/plan.h"

namespace rmacc::sim {

// Time on the critical path, by what it was spent on.
struct CriticalPath {
  double hostUs = 0;      // per-call host cost and enqueueing
  double copyUs = 0;      // copy-engine ops (launch and bytes)
  double networkUs = 0;   // proxy puts: proxy CPU, NIC queue, wire, remote proxy
  double streamUs = 0;    // signals, waits noticing, event hops between streams
  int hops = 0;           // ops on the path
  std::vector<std::string> tail;  // the last ops of the path, latest first, readable
};

struct Utilisation {
  std::string kind;
  int count = 0;
  double mean = 0, max = 0;  // fraction of capacity x time, over resources of this kind
  std::string busiest;
};

struct Result {
  double timeUs = 0;            // every rank's call complete (ops done, puts landed)
  double hostUs = 0;            // the latest time a rank's host finished enqueueing
  double meanBytesPerRank = 0;  // bytes sent per rank, own block included (rmacc-perf's size)
  double algbw = 0, busbw = 0;  // GB/s, nccl-tests definitions
  uint64_t relayHighWater = 0;  // most relay bytes one rank held at once (written, not forwarded)
  uint64_t relayCapacity = 0;   // plan.relayBytes
  bool hostBound = false;       // the host is more than half of the critical path
  double proxyBusyMaxUs = 0;    // the busiest rank's proxy CPU time (writes it issued and took
                                // in), all of its threads together
  // The busiest proxy thread's CPU time: a thread carries its writes one at a time, so no
  // schedule of these puts finishes sooner (the proxy's bound, beside nodeBoundUs).
  double proxyThreadBusyMaxUs = 0;
  int proxyThreads = 1;
  // The largest share of the traffic's bound the busiest proxy thread allows (1: no limit);
  // below 0.9, the target for uniform traffic, the call is proxy-bound.
  double proxyCeiling() const {
    return nodeBoundUs > 0 && proxyThreadBusyMaxUs > nodeBoundUs
               ? nodeBoundUs / proxyThreadBusyMaxUs
               : 1.0;
  }
  bool proxyBound() const { return proxyCeiling() < 0.9; }
  // The traffic's own bound, any schedule: the bytes that leave or enter the busiest node,
  // over all of its NICs at once (for uniform traffic, N/(N-1) x NIC as algbw).
  double nodeBoundUs = 0;
  CriticalPath critical;
  std::vector<Utilisation> utilisation;
  std::vector<std::string> links;  // every resource's utilisation, when there are few
  uint64_t events = 0;
};

// Runs `plan` once on `cluster` (which must match the plan's topology: one rank per GPU).
// `tracePath` non-empty: writes a per-rank Chrome trace as RMACC_TRACE_FILE does (%r = rank).
Result simulate(const plan::Plan& plan, const Cluster& cluster, const std::string& tracePath = "");

}  // namespace rmacc::sim
