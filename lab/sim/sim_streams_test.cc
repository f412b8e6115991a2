// rmacc-sim's GPU side (runner.cc): relays waiting for credits, copy and signal batches as the
// executor makes them, quiet puts, copy streams, the host's enqueueing per backend call, the
// trace; small plans with answers worked out on paper.
#include <gtest/gtest.h>

#include <string>
#include <unistd.h>
#include <cstdio>

#include "cluster.h"
#include "core/signal_contexts.h"
#include "runner.h"
#include "schedules.h"
#include "sim_test_support.h"
#include "traffic.h"

namespace rmacc::sim {
namespace {

// Writer r0 (node 0) sends two 10,000-byte chunks to r3 (node 1, local 1) through relay r2
// (node 1, local 0), NIC 1 GB/s, copy engine 0.5 GB/s. With one slot the second chunk waits
// for the relay's credit: put 10 µs + latency 5 -> forward 20 µs, done at 35 -> credit +
// latency 5 at 40 -> put 10 + latency 5 at 55 -> forward done at 75. With two slots the second
// put follows the first on the NIC (done at 20, lands at 25 while the first is still being
// forwarded: both in the relay) and is forwarded from 35 to 55.
plan::Plan relayPlan(bool oneSlot) {
  const int kColl = kCtxColl, kCredit = kCtxCredit;
  plan::Plan p;
  p.topo = Topology::blocks(2, 2);
  p.bytes.assign(16, 0);
  p.bytes[0 * 4 + 3] = 20000;
  p.ranks.resize(4);
  auto& w = p.ranks[0].ops;
  w.push_back(op(OpKind::kPut, Lane::kProxyPut, 2, 10000, kColl, plan::kSigRelay, 0, {},
                 Region::kSend, Region::kRelay));
  if (oneSlot) w.push_back(op(OpKind::kWait, Lane::kProxyWait, 2, 0, kCredit, 0, 1, {}));
  w.push_back(op(OpKind::kPut, Lane::kProxyPut, 2, 10000, kColl, plan::kSigRelay, 0,
                 oneSlot ? std::vector<int>{1} : std::vector<int>{}, Region::kSend,
                 Region::kRelay));
  auto& r = p.ranks[2].ops;
  r.push_back(op(OpKind::kWait, Lane::kProxyWait, 0, 0, kColl, plan::kSigRelay, 1, {}));
  r.push_back(op(OpKind::kPut, Lane::kCePut, 3, 10000, kColl, plan::kSigData, 0, {0},
                 Region::kRelay, Region::kRecv));
  if (oneSlot) r.push_back(op(OpKind::kPut, Lane::kProxyPut, 0, 0, kCredit, 0, 0, {1}));
  const int second = (int)r.size();
  r.push_back(op(OpKind::kWait, Lane::kProxyWait, 0, 0, kColl, plan::kSigRelay, 1, {}));
  r.push_back(op(OpKind::kPut, Lane::kCePut, 3, 10000, kColl, plan::kSigData, 0, {second},
                 Region::kRelay, Region::kRecv));
  p.ranks[3].ops.push_back(op(OpKind::kWait, Lane::kCeWait, 2, 0, kColl, plan::kSigData, 2, {}));
  return p;
}

TEST(SimModel, RelayWithOneSlotWaitsForTheCredit) {
  Cluster c = bare(2, 2);
  c.ceGBps = 0.5;
  Result one = simulate(relayPlan(true), c);
  EXPECT_NEAR(one.timeUs, 75, 1e-6);
  EXPECT_EQ(one.relayHighWater, 10000u);  // the slot never holds both chunks
  Result two = simulate(relayPlan(false), c);
  EXPECT_NEAR(two.timeUs, 55, 1e-6);
  EXPECT_EQ(two.relayHighWater, 20000u);
}

// The executor hands a stream's consecutive CE puts to the backend as one copy batch and one
// batch of signal writes (executor.cc); the model charges it so. r0 forwards 10,000 bytes to
// each of r1..r3 at 10,000 bytes/us out of its copy engines: as one call, the launch is 2 us +
// 2 x 0.5 for the further copies, the three copies share the link (3 us), then the signals at
// +1, +0.25, +0.25 and each receiver's wait 1 us later: 8.5 us. Proxy puts between the
// forwards in op order do not cut the batch (each stream keeps its own open batch). A forward
// that depends on the one before it does: three calls of launch 2 + copy 1 + signal 1, one
// after the other, and the last receiver done at 13 us.
TEST(SimModel, ConsecutiveForwardsAreOneBackendCall) {
  Cluster c = bare(2, 4);
  c.ceOpUs = 2;
  c.ceBatchItemUs = 0.5;
  c.memopUs = 1;
  c.memopBatchItemUs = 0.25;
  enum Variant { kPlain, kInterleaved, kChained };
  auto plan = [](Variant v) {
    const int kColl = kCtxColl;
    plan::Plan p;
    p.topo = Topology::blocks(2, 4);
    p.bytes.assign(64, 0);
    p.ranks.resize(8);
    auto& r0 = p.ranks[0].ops;
    int previous = -1;
    for (int d = 1; d <= 3; ++d) {
      p.bytes[d] = 10000;
      std::vector<int> deps;
      if (v == kChained && previous >= 0) deps.push_back(previous);
      previous = (int)r0.size();
      r0.push_back(op(OpKind::kPut, Lane::kCePut, d, 10000, kColl, plan::kSigData, 0, deps,
                      Region::kRelay, Region::kRecv));
      if (v == kInterleaved)
        r0.push_back(op(OpKind::kPut, Lane::kProxyPut, 4, 0, kColl, plan::kSigData, 0, {}));
      p.ranks[d].ops.push_back(op(OpKind::kWait, Lane::kCeWait, 0, 0, kColl, plan::kSigData, 1, {}));
    }
    if (v == kInterleaved)
      p.ranks[4].ops.push_back(op(OpKind::kWait, Lane::kProxyWait, 0, 0, kColl, plan::kSigData, 3, {}));
    return p;
  };
  EXPECT_NEAR(simulate(plan(kPlain), c).timeUs, 8.5, 1e-9);
  EXPECT_NEAR(simulate(plan(kInterleaved), c).timeUs, 8.5, 1e-9);
  EXPECT_NEAR(simulate(plan(kChained), c).timeUs, 13, 1e-9);
}

// Quiet puts (plan::Op::quiet): r0 forwards three 10,000-byte chunks to r1, each after the one
// before (three backend calls: launch 2 us, copy 1, signal 1), and r1 waits for all three
// signals (1 us). Every put signalling: 3 x 4 + 1 = 13 us. The first two quiet: their calls
// end with their copies and the last put's write carries all three counts: 3 + 3 + 4 + 1 = 11.
TEST(SimModel, QuietPutsLeaveTheirSignalToTheLast) {
  const int kColl = kCtxColl;
  auto plan = [&](bool quiet) {
    plan::Plan p;
    p.topo = Topology::blocks(2, 4);
    p.bytes.assign(64, 0);
    p.bytes[1] = 30000;
    p.ranks.resize(8);
    auto& r0 = p.ranks[0].ops;
    for (int k = 0; k < 3; ++k) {
      r0.push_back(op(OpKind::kPut, Lane::kCePut, 1, 10000, kColl, plan::kSigData, 0,
                      k ? std::vector<int>{k - 1} : std::vector<int>{}, Region::kRelay,
                      Region::kRecv));
      r0.back().quiet = quiet && k < 2;
    }
    p.ranks[1].ops.push_back(op(OpKind::kWait, Lane::kCeWait, 0, 0, kColl, plan::kSigData, 3, {}));
    return p;
  };
  Cluster c = bare(2, 4);
  c.ceOpUs = 2;
  c.memopUs = 1;
  EXPECT_NEAR(simulate(plan(false), c).timeUs, 13, 1e-9);
  EXPECT_NEAR(simulate(plan(true), c).timeUs, 11, 1e-9);
}

// Copy streams (Cluster::ceStreams, RMACC_CE_STREAMS): r0 signals node-mates r1 and r2, a
// signal write 1 us (0.25 a further one in a batch), a wait 1 us. On one stream both writes are
// one batch: r2's lands at 1.25, its wait ends at 2.25. On two (mates of odd and even local
// rank, as the executor splits them) each stream writes its own at 1: both done at 2. Two
// nodes: on one the executor's lanes are serial, and it makes one copy stream whatever the
// setting, as rmacc-sim does there.
TEST(SimModel, CopyStreamsWriteSideBySide) {
  const int kColl = kCtxColl;
  plan::Plan p;
  p.topo = Topology::blocks(2, 3);
  p.bytes.assign(36, 0);
  p.ranks.resize(6);
  for (int d = 1; d <= 2; ++d) {
    p.ranks[0].ops.push_back(op(OpKind::kPut, Lane::kCePut, d, 0, kColl, plan::kSigData, 0, {}));
    p.ranks[d].ops.push_back(op(OpKind::kWait, Lane::kCeWait, 0, 0, kColl, plan::kSigData, 1, {}));
  }
  Cluster c = bare(2, 3);
  c.memopUs = 1;
  c.memopBatchItemUs = 0.25;
  EXPECT_NEAR(simulate(p, c).timeUs, 2.25, 1e-9);
  c.ceStreams = 2;
  EXPECT_NEAR(simulate(p, c).timeUs, 2, 1e-9);

  plan::Plan one = p;
  one.topo = Topology::blocks(1, 3);
  one.bytes.assign(9, 0);
  one.ranks.resize(3);
  Cluster single = c;
  single.nodes = 1;
  EXPECT_NEAR(simulate(one, single).timeUs, 2.25, 1e-9) << "one node: one copy stream";
}

TEST(SimModel, HostBoundWhenEnqueueingIsSlow) {
  Traffic t;
  t.bytesPerRank = 64 << 10;
  Cluster c = preset("h200");
  c.nodes = 4;
  auto bytes = makeTraffic(t, c.nodes, c.gpusPerNode);
  plan::Plan p = buildSchedule(Schedule::kRmacc, Topology::blocks(4, 8), bytes, {}, false);
  c.enqueueUsPerOp = 0.1;
  EXPECT_FALSE(simulate(p, c).hostBound);
  c.enqueueUsPerOp = 50;
  EXPECT_TRUE(simulate(p, c).hostBound);
}

// The host pays per backend call (preset "h200-host"): rank 0's three CE puts to one peer are
// one copy batch (1 + 2 x 0.5 µs) and one batch of their signal writes (0.25 + 2 x 0.125). On
// its proxy-put lane, batches of memory ops as the executor makes them: two puts share one
// ready-flag store, the credit wait after them is one memory op more and the put after that
// another store, one batch at the end of the call (0.25 + 2 x 0.125): 3.0 µs in all (the run
// of two puts ends at the wait, but the stream's next hand-over is 2 ops later). With 32 ops
// between the run and the wait (signals on the CE lane: 32 more signal writes in its batch,
// 32 x 0.125), the run is handed over as it ends (0.25) and the wait and the last put are a
// batch of their own (0.25 + 0.125): 7.125 µs. A wait on a wait lane is one memory op more in
// its dependent's batch (0.125).
TEST(SimModel, HostPaysPerBackendCall) {
  const int kColl = kCtxColl, kCredit = kCtxCredit;
  plan::Plan p;
  p.topo = Topology::blocks(2, 2);
  p.bytes.assign(16, 0);
  p.bytes[1] = 3000;
  p.bytes[2] = 3000;
  p.ranks.resize(4);
  for (int k = 0; k < 3; ++k)
    p.ranks[0].ops.push_back(op(OpKind::kPut, Lane::kCePut, 1, 1000, kColl, plan::kSigData, 0,
                                {}, Region::kSend, Region::kRecv));
  auto proxyPut = [&] {
    p.ranks[0].ops.push_back(op(OpKind::kPut, Lane::kProxyPut, 2, 1000, kColl, plan::kSigData, 0,
                                {}, Region::kSend, Region::kRecv));
  };
  proxyPut();
  proxyPut();
  p.ranks[0].ops.push_back(op(OpKind::kWait, Lane::kProxyPut, 2, 0, kCredit, 0, 1, {}));
  proxyPut();
  p.ranks[1].ops.push_back(op(OpKind::kWait, Lane::kCeWait, 0, 0, kColl, plan::kSigData, 3, {}));
  p.ranks[2].ops.push_back(op(OpKind::kPut, Lane::kProxyPut, 0, 0, kCredit, 0, 0, {}));
  p.ranks[2].ops.push_back(
      op(OpKind::kWait, Lane::kProxyWait, 0, 0, kColl, plan::kSigData, 3, {}));
  Cluster c = bare(2, 2);
  c.enqueueCopyCallUs = 1;
  c.enqueueCopyItemUs = 0.5;
  c.enqueueMemopCallUs = 0.25;
  c.enqueueMemopItemUs = 0.125;
  EXPECT_DOUBLE_EQ(simulate(p, c).hostUs, 3.0);
  c.enqueueUsPerOp = 1;  // per op on top: rank 0 enqueues 7 ops
  EXPECT_DOUBLE_EQ(simulate(p, c).hostUs, 10.0);
  c.enqueueUsPerOp = 0;
  std::vector<Op>& ops = p.ranks[0].ops;
  ops.insert(ops.begin() + 5, 32, op(OpKind::kPut, Lane::kCePut, 1, 0, kColl, 1, 0, {}));
  p.ranks[1].ops.push_back(op(OpKind::kWait, Lane::kCeWait, 0, 0, kColl, 1, 32, {}));
  EXPECT_DOUBLE_EQ(simulate(p, c).hostUs, 7.125);
  const Cluster h = preset("h200-host");
  EXPECT_GT(h.enqueueCopyItemUs, 0);
  EXPECT_EQ(h.enqueueUsPerOp, 0);
}

// --trace writes RMACC_TRACE_FILE's format, one file per rank (%r): an event per op on its lane,
// and one on the "net" track per proxy put (post to the target's signal).
TEST(SimModel, TraceHasAnEventPerOpAndPerNetworkPut) {
  Traffic t;
  t.bytesPerRank = 64 << 10;
  const Cluster c = bare(2, 2);
  plan::Plan p = buildSchedule(Schedule::kRmacc, Topology::blocks(2, 2),
                               makeTraffic(t, 2, 2), {}, true);
  char dir[] = "/tmp/rmacc-sim-trace-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string pattern = std::string(dir) + "/t.%r.json";
  simulate(p, c, pattern);
  for (int r = 0; r < 4; ++r) {
    const std::string path = std::string(dir) + "/t." + std::to_string(r) + ".json";
    FILE* f = fopen(path.c_str(), "r");
    ASSERT_NE(f, nullptr) << path;
    std::string text;
    char buf[4096];
    for (size_t k; (k = fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, k);
    fclose(f);
    remove(path.c_str());
    auto count = [&](const std::string& needle) {
      size_t n = 0;
      for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
        ++n;
      return n;
    };
    size_t proxyPuts = 0;
    for (const Op& op : p.ranks[r].ops)  // not the credit waits that share their lane
      proxyPuts += op.lane == Lane::kProxyPut && op.kind == OpKind::kPut;
    EXPECT_EQ(text.front(), '[');
    EXPECT_EQ(text[text.find_last_not_of('\n')], ']');
    EXPECT_EQ(count("\"ph\":\"X\""), p.ranks[r].ops.size() + proxyPuts) << path;
    EXPECT_EQ(count("\"tid\":\"net\""), proxyPuts) << path;
  }
  rmdir(dir);
}

}  // namespace
}  // namespace rmacc::sim
