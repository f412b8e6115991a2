// The real planner's plans in rmacc-sim: on one link, beside the other schedules with the
// cross-rail penalty, with and without a credit window, on every cluster size the results use;
// the node round orders and the MoE traffic they are built from.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "cluster.h"
#include "report.h"
#include "runner.h"
#include "schedules.h"
#include "sim_test_support.h"
#include "traffic.h"

namespace rmacc::sim {
namespace {

// The real planner on 2 nodes x 1 GPU: entry signal (latency 5), the put of half the bytes at
// 1 GB/s, its landing (latency 5); the self copy runs beside it. The traffic's bound is that
// put's wire time alone.
TEST(SimModel, RealPlanOnOneLinkPerDirection) {
  Traffic t;
  t.bytesPerRank = 2 << 20;
  const Cluster c = bare(2, 1);
  auto bytes = makeTraffic(t, 2, 1);
  plan::Plan p = buildSchedule(Schedule::kRmacc, Topology::blocks(2, 1), bytes, {}, true);
  Result r = simulate(p, c);
  EXPECT_NEAR(r.timeUs, 5 + (1 << 20) / 1000.0 + 5, 1e-6);
  EXPECT_NEAR(r.nodeBoundUs, (1 << 20) / 1000.0, 1e-6);
  EXPECT_NEAR(r.critical.networkUs + r.critical.streamUs + r.critical.hostUs +
                  r.critical.copyUs, r.timeUs, 1e-6);
}

TEST(SimModel, CrossRailPenaltySlowsOnlyTheDirectSchedule) {
  Traffic t;
  t.bytesPerRank = 4 << 20;
  Cluster c = preset("h200");
  c.nodes = 2;
  c.enqueueUsPerOp = 0;  // else the host's enqueueing, not the network, sets the time
  auto bytes = makeTraffic(t, c.nodes, c.gpusPerNode);
  const Topology topo = Topology::blocks(c.nodes, c.gpusPerNode);
  auto time = [&](Schedule s, bool penalty) {
    Cluster k = c;
    k.crossRailPenalised = penalty;
    return simulate(buildSchedule(s, topo, bytes, {}, true), k).timeUs;
  };
  EXPECT_GT(time(Schedule::kDirect, true), 1.5 * time(Schedule::kDirect, false));
  EXPECT_NEAR(time(Schedule::kRmacc, true), time(Schedule::kRmacc, false), 1e-6);
  EXPECT_NEAR(time(Schedule::kPxn, true), time(Schedule::kPxn, false), 1e-6);
}

// Pacing (plan::Options::creditWindow, bench/results §7.3, §19). With a NIC that moves one message
// at a time (the model before §19), rounds drift apart when nothing holds the nodes together
// and relays receive several rounds at once; a window of 2 relay steps kept them in step: on
// 16 x 2 GPUs at 64 MiB per rank 0.60 of the bound without (window = slots = 4), 0.84 with, in
// a first call; in a call in steady state, which rmacc-sim now runs (every step credited, the
// first window's carried, bench/results §20), 0.73 and 0.75.
// With a queue per peer, sharing the NIC max-min (what the proxy gets, Cluster), the two
// chunks a window of 2 lets in flight share the writer's NIC and both land late, so the credit
// loop stalled: on 64 x 2 the unpaced plan, the default, reached 0.90 of the bound, the paced
// one 0.83. Since direct puts follow their round's chunks and carried credits are the remote
// entries (bench/results §21) pacing no longer matters there: 16 x 2 on the FIFO NIC 0.96 either
// way, 64 x 2 per peer 0.90 either way; 0.94 / 0.93 once the completion waits are checked as
// the data arrives instead of all at the end (plan_build.h completionKeyBatch); 0.98 / 0.97 on
// the FIFO NIC and 0.95 / 0.95 per peer once credits land as written values (bench/results §32; as
// completion data 0.97 / 0.96 and 0.94 / 0.93); per peer 0.98 / 0.95 once max-min sharing also
// re-rates the flows beside a path's (bench/results §35): the two chunks in flight still share the
// writer's NIC.
double pacedFraction(bool perPeerNic, int window, int nodes) {  // window -1: the defaults
  Cluster c = preset("h200");
  c.nodes = nodes;
  c.gpusPerNode = 2;
  c.hostFixedUs = 0;
  c.enqueueUsPerOp = 0;  // host pacing would hide the drift
  c.paceLeadUs = -1;     // and so would the NIC pacer's: credit windows alone
  c.proxyThreads = 1;    // and more proxy threads (RMACC_PROXY_THREADS' default from 4 nodes)
  c.nicQueuePerPeer = c.maxMinSharing = perPeerNic;
  if (!perPeerNic) c.nicQueues = 1;
  Traffic t;
  t.bytesPerRank = 64ull << 20;
  const auto bytes = makeTraffic(t, c.nodes, c.gpusPerNode);
  const Topology topo = Topology::blocks(c.nodes, c.gpusPerNode);
  plan::Options o;
  if (window >= 0) o.creditWindow = window;
  return simulate(buildSchedule(Schedule::kRmacc, topo, bytes, o, false), c).algbw /
         boundAlgbw(c);
}

TEST(SimModel, CreditWindowOnAFifoNic) {
  EXPECT_NEAR(pacedFraction(false, 0, 16), 0.980, 0.01);
  EXPECT_NEAR(pacedFraction(false, 2, 16), 0.971, 0.01);
}

TEST(SimModel, CreditWindowWhenTheNicServesEveryPeer) {
  const double unpaced = pacedFraction(true, 0, 64), paced = pacedFraction(true, 2, 64);
  EXPECT_NEAR(unpaced, 0.980, 0.01);
  EXPECT_NEAR(paced, 0.952, 0.01);
  EXPECT_NEAR(pacedFraction(true, -1, 64), unpaced, 1e-9) << "the default is the unpaced plan";
}

// Node rounds: paired deltas (Topology::pairedRoundDeltas) visit every delta once, 0 first, the
// two directions between a pair of nodes (k and N-k) in adjacent rounds; Topology's own order
// (NCCL's triangular one) is a permutation too, and different from 5 nodes on.
TEST(Topology, RoundOrdersVisitEveryDeltaOnce) {
  for (int n = 1; n <= 9; ++n) {
    const Topology t = Topology::blocks(n, 1);
    const std::vector<int> d = Topology::pairedRoundDeltas(n);
    std::vector<int> tri(n);
    for (int k = 0; k < n; ++k) tri[k] = t.roundDelta(k);
    for (const std::vector<int>* order : std::vector<const std::vector<int>*>{&d, &tri}) {
      ASSERT_EQ((int)order->size(), n);
      EXPECT_EQ((*order)[0], 0);
      std::vector<int> sorted = *order;
      std::sort(sorted.begin(), sorted.end());
      for (int k = 0; k < n; ++k) EXPECT_EQ(sorted[k], k) << n << " nodes";
    }
    for (int k = 1; k + 1 < n; k += 2) EXPECT_EQ(d[k] + d[k + 1], n) << n << " nodes, round " << k;
    if (n >= 5) EXPECT_NE(d, tri);
  }
  std::vector<int> tri8;
  for (int k = 0; k < 8; ++k) tri8.push_back(Topology::blocks(8, 1).roundDelta(k));
  EXPECT_EQ(tri8, (std::vector<int>{0, 1, 3, 6, 2, 7, 5, 4}));
}

TEST(SimTraffic, MoeDispatchSendsEachTokenOnceToEachRankItReaches) {
  Traffic t;
  t.kind = Traffic::Kind::kMoe;
  t.moe = {64, 16, 2, 32, 4, 2, 0.5};
  auto bytes = makeTraffic(t, 4, 2);
  const uint64_t tokenBytes = 16 * 2;
  for (int s = 0; s < 8; ++s) {
    uint64_t row = 0;
    for (int d = 0; d < 8; ++d) {
      EXPECT_EQ(bytes[s * 8 + d] % tokenBytes, 0u);
      row += bytes[s * 8 + d];
    }
    EXPECT_GE(row, 64 * tokenBytes);
    EXPECT_LE(row, 64 * 4 * tokenBytes);
  }
  t.moe.experts = 30;  // does not spread over 8 ranks
  EXPECT_THROW(makeTraffic(t, 4, 2), std::exception);
}

// Every cluster size of the archive's plot (bench/results/07-at-cluster-scale.md), at a small
// size: the real plan builds, runs to
// the end in the model, and no schedule beats the network bound.
class SimClusterSizes : public ::testing::TestWithParam<int> {};

TEST_P(SimClusterSizes, SmallUniformCall) {
  Cluster c = preset("h200");
  c.nodes = GetParam();
  Traffic t;
  t.bytesPerRank = (uint64_t)c.ranks() * 256;  // 256 bytes per block
  auto bytes = makeTraffic(t, c.nodes, c.gpusPerNode);
  const Topology topo = Topology::blocks(c.nodes, c.gpusPerNode);
  for (Schedule s : {Schedule::kRmacc, Schedule::kDirect, Schedule::kPxn}) {
    Result r = simulate(buildSchedule(s, topo, bytes, {}, c.nodes <= 16), c);
    EXPECT_GT(r.timeUs, c.netLatencyUs) << scheduleName(s);
    EXPECT_LE(r.algbw, boundAlgbw(c) * 1.0001) << scheduleName(s);
    EXPECT_GE(r.timeUs, r.nodeBoundUs * 0.9999) << scheduleName(s);
  }
}

INSTANTIATE_TEST_SUITE_P(Nodes, SimClusterSizes, ::testing::Values(2, 4, 8, 16, 32, 64, 128));

}  // namespace
}  // namespace rmacc::sim
