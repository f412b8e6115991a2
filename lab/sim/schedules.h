// The schedules the simulator compares, each as a plan::Plan so one model runs them all:
//  - rmacc: the library's own plan (src/plan/planner.h), checked by its verifier;
//  - direct: every GPU puts straight to every remote GPU through its own NIC, across rails
//    (NCCL 2.30's zero-SM hierarchical AlltoAll), intra-node blocks by copy engine;
//  - pxn: send-side aggregation (NCCL's PXN): a block for (node B, local j) is first copied
//    over NVLink to the sender's node-mate on rail j, which sends its own block and everything
//    its node-mates staged for that destination as two puts on rail j.
// direct and pxn take no entry signals and an unbounded staging area: they are the others'
// best case, not an implementation.
#pragma once

#include <string>
#include <vector>

#include "cluster.h"
#include "plan/plan.h"

namespace rmacc::sim {

enum class Schedule { kRmacc, kDirect, kPxn };
Schedule scheduleByName(const std::string& name);  // "rmacc", "direct", "pxn"
const char* scheduleName(Schedule s);

// Builds the plan of `s` for bytes[src * n + dst] on `topo`. For kRmacc, `options` are the
// planner's, and `verify` runs the library's verifier on the result (throws rmaccInternalError
// with its verdict if it fails).
plan::Plan buildSchedule(Schedule s, const Topology& topo, const std::vector<uint64_t>& bytes,
                         const plan::Options& options, bool verify);

// The cluster `s` runs on: the pacer (Cluster::paceLeadUs) is rmacc's proxy's
// (src/core/nic_pacer.h); the others' proxies (NCCL's) post every write as it is released.
Cluster clusterFor(Schedule s, Cluster c);

}  // namespace rmacc::sim
