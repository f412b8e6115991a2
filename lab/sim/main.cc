// rmacc-sim: predicts one AlltoAllV call of rmacc's real plan (and of the direct and PXN
// schedules) on a cluster we cannot run, with a discrete-event model (lab/sim/README.md).
#include <chrono>
#include <cstdio>

#include "core/error.h"
#include "plan/plan_build.h"
#include "options.h"
#include "report.h"
#include "runner.h"
#include "schedules.h"
#include "traffic.h"

using namespace rmacc::sim;

int main(int argc, char** argv) {
  try {
    SimOptions o = parseOptions(argc, argv);
    const Cluster& c = o.cluster;
    const auto bytes = makeTraffic(o.traffic, c.nodes, c.gpusPerNode);
    rmacc::Topology topo = rmacc::Topology::blocks(c.nodes, c.gpusPerNode);
    const bool paired = o.roundOrder == "paired" ||
                        (o.roundOrder == "library" && rmacc::plan::usePairedRounds(c.nodes, o.planner));
    if (paired) topo.setRoundDeltas(rmacc::Topology::pairedRoundDeltas(c.nodes));
    for (Schedule s : o.schedules) {
      const auto t0 = std::chrono::steady_clock::now();
      rmacc::plan::Plan plan = buildSchedule(s, topo, bytes, o.planner, o.verify);
      RunInfo info;
      info.schedule = s;
      info.planMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                        .count();
      info.batches = plan.nBatches;
      if (plan.relayBytes > 0) {
        info.slots = plan.options.slots;
        info.slotBytes = plan.options.slotBytes;
      }
      for (const auto& r : plan.ranks) info.ops += r.ops.size();
      std::string trace = o.tracePath;
      if (!trace.empty() && o.schedules.size() > 1) trace += std::string(".") + scheduleName(s);
      Result r = simulate(plan, clusterFor(s, c), trace);
      if (o.json) printJson(stdout, o, info, r);
      else printReport(stdout, o, info, r);
    }
    return 0;
  } catch (const std::exception& e) {
    fprintf(stderr, "rmacc-sim: %s\n", e.what());
    return 2;
  }
}
