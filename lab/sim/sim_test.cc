// rmacc-sim's model (lab/sim): cases with an answer known on paper, then the real planner's
// plans on every cluster size the results use, at a small size.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include <unistd.h>

#include "core/signal_contexts.h"
#include "fluid.h"
#include "machine.h"
#include "options.h"
#include "report.h"
#include "runner.h"
#include "schedules.h"
#include "traffic.h"

namespace rmacc::sim {
namespace {

using plan::Lane;
using plan::Op;
using plan::OpKind;
using plan::Region;

TEST(SimFluid, OneLink) {
  Fluid f;
  int link = f.addResource("link", "link", 10);  // 10 bytes per µs
  double done = -1;
  f.transfer(1000, {link}, [&] { done = f.now(); });
  f.run();
  EXPECT_DOUBLE_EQ(done, 100);
  EXPECT_DOUBLE_EQ(f.resources()[link].carried, 1000);
}

TEST(SimFluid, TwoFlowsShareALink) {
  Fluid f;
  int link = f.addResource("link", "link", 10);
  double a = -1, b = -1;
  f.transfer(1000, {link}, [&] { a = f.now(); });
  // The second flow joins at 50 µs: from then on each gets 5 bytes/µs; the first has 500 bytes
  // left (done at 150), the second then has 500 left alone at full rate (done at 200).
  f.at(50, [&] { f.transfer(1000, {link}, [&] { b = f.now(); }); });
  f.run();
  EXPECT_DOUBLE_EQ(a, 150);
  EXPECT_DOUBLE_EQ(b, 200);
}

TEST(SimFluid, PathTakesItsNarrowestLink) {
  Fluid f;
  int wide = f.addResource("wide", "a", 100), narrow = f.addResource("narrow", "b", 4);
  double done = -1;
  f.transfer(400, {wide, narrow}, [&] { done = f.now(); });
  f.run();
  EXPECT_DOUBLE_EQ(done, 100);
}

// Flow A crosses a narrow link (1 byte/µs, shared with C) and a wide one (10, shared with B).
// Bottleneck sharing gives B half the wide link (5), though A can use only 0.5 of its half;
// max-min hands B what A leaves: 9.5, so B's 95 bytes take 10 µs instead of 19.
double heldBackNeighbour(Fluid::Sharing sharing) {
  Fluid f;
  f.setSharing(sharing);
  int narrow = f.addResource("narrow", "a", 1), wide = f.addResource("wide", "b", 10);
  double b = -1, a = -1, c = -1;
  f.transfer(1000, {narrow, wide}, [&] { a = f.now(); });
  f.transfer(1000, {narrow}, [&] { c = f.now(); });
  f.transfer(95, {wide}, [&] { b = f.now(); });
  f.run();
  EXPECT_DOUBLE_EQ(a, 2000);
  EXPECT_DOUBLE_EQ(c, 2000);
  EXPECT_DOUBLE_EQ(f.resources()[wide].carried, 1095);
  return b;
}

TEST(SimFluid, MaxMinHandsOnWhatAHeldBackFlowLeaves) {
  EXPECT_DOUBLE_EQ(heldBackNeighbour(Fluid::Sharing::kBottleneck), 19);
  EXPECT_DOUBLE_EQ(heldBackNeighbour(Fluid::Sharing::kMaxMin), 10);
}

// Flow G crosses M and P; S crosses N and M; three short flows Q share P. While the Qs run, G
// gets a quarter of P (2.5) and S the rest of M (7.5). When they end at 4 µs, max-min gives G
// and S half of M each (5): G's 90 bytes left take 18 µs, done at 22. Re-rating only the flows
// on the ended Qs' path (G) left S at 7.5, so G kept 2.5 and ended at 40.
TEST(SimFluid, MaxMinReratesTheFlowsBesideAnEndedFlowsNeighbours) {
  Fluid f;
  f.setSharing(Fluid::Sharing::kMaxMin);
  const int n = f.addResource("n", "n", 10), m = f.addResource("m", "m", 10),
            p = f.addResource("p", "p", 10);
  double g = -1, s = -1;
  for (int i = 0; i < 3; ++i) f.transfer(10, {p}, [] {});
  f.transfer(1000, {n, m}, [&] { s = f.now(); });
  f.transfer(100, {m, p}, [&] { g = f.now(); });
  f.run();
  EXPECT_DOUBLE_EQ(g, 22);
  EXPECT_DOUBLE_EQ(s, 110);  // M busy throughout: 1,100 bytes at 10
}

TEST(SimFluid, RefusesAZeroCapacity) {
  Fluid f;
  EXPECT_THROW(f.addResource("x", "x", 0), std::exception);
}

// A cluster where only bandwidth and the network latency cost time.
Cluster bare(int nodes, int gpus) {
  Cluster c;
  c.nodes = nodes;
  c.gpusPerNode = gpus;
  c.nicGBps = 1;  // 1,000 bytes per µs
  c.crossRailPenalised = false;
  c.netLatencyUs = 5;
  c.ceGBps = 10;
  c.pcieGBps = 1000;
  c.localCopyGBps = 1000;
  c.ceOpUs = c.memopUs = c.eventUs = c.proxyOpUs = c.signalLatencyUs = 0;
  c.ceBatchItemUs = c.memopBatchItemUs = c.waitBatchItemUs = 0;
  c.hostFixedUs = c.enqueueUsPerOp = 0;
  c.paceLeadUs = -1;  // writes posted as released; the pacer has its own tests
  c.ceStreams = 1;     // one copy stream (the library runs 2: CopyStreamsWriteSideBySide)
  return c;
}

Op op(OpKind kind, Lane lane, int peer, uint64_t bytes, int ctx, int sig, uint32_t count,
      std::vector<int> deps, Region src = Region::kNone, Region dst = Region::kNone) {
  Op o;
  o.kind = kind;
  o.lane = lane;
  o.peer = peer;
  o.bytes = bytes;
  o.ctx = ctx;
  o.sigIdx = sig;
  o.count = count;
  o.deps = std::move(deps);
  o.src.region = src;
  o.dst.region = dst;
  return o;
}

// A plan of `nodes` nodes of one GPU each with no ops yet, and a proxy put of `bytes` from the
// send to the receive buffer of `to` on the collective's data signal.
plan::Plan flatPlan(int nodes) {
  plan::Plan p;
  p.topo = Topology::blocks(nodes, 1);
  p.bytes.assign((size_t)nodes * nodes, 0);
  p.ranks.resize(nodes);
  return p;
}
Op dataPut(int to, uint64_t bytes, std::vector<int> deps = {}) {
  return op(OpKind::kPut, Lane::kProxyPut, to, bytes, kCtxColl, plan::kSigData, 0,
            std::move(deps), Region::kSend, Region::kRecv);
}
// One GPU a node: r0 puts `bytes` to each rank of `to`, which waits for it.
plan::Plan fanOut(int nodes, std::vector<int> to, uint64_t bytes) {
  plan::Plan p = flatPlan(nodes);
  for (int r : to) {
    p.bytes[r] = bytes;
    p.ranks[0].ops.push_back(dataPut(r, bytes));
    p.ranks[r].ops.push_back(
        op(OpKind::kWait, Lane::kProxyWait, 0, 0, kCtxColl, plan::kSigData, 1, {}));
  }
  return p;
}

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

// A gathering put costs the proxy one write per iovLimit runs of sources adjacent in the send
// buffer (blocks packed in rank order), at both ends. r0 puts 3 x 1,000 bytes of r5's, r6's
// and r7's blocks into r4's relay, proxy 1 us a write, NIC 1,000 bytes/us, latency 5: one write
// is 1 + 3 + 5 + 1 = 10 us; with blocks of 2,000 bytes the three segments are three runs, two
// writes with an iov limit of 2: 2 + 3 + 5 + 2 = 12 us.
TEST(SimModel, GatheredPutPaysOneProxyOpPerWrite) {
  auto time = [](uint64_t block, int iovLimit) {
    Cluster c = bare(2, 4);
    c.proxyOpUs = 1;
    c.iovLimit = iovLimit;
    plan::Plan p;
    p.topo = Topology::blocks(2, 4);
    p.bytes.assign(64, 0);
    p.ranks.resize(8);
    Op put = op(OpKind::kPut, Lane::kProxyPut, 4, 3000, kCtxColl, plan::kSigRelay, 0,
                {}, Region::kNone, Region::kRelay);
    for (int d = 5; d <= 7; ++d) {
      p.bytes[d] = block;
      put.gather.push_back({{Region::kSend, d, 0}, 1000});
    }
    p.ranks[0].ops.push_back(put);
    p.ranks[4].ops.push_back(
        op(OpKind::kWait, Lane::kProxyWait, 0, 0, kCtxColl, plan::kSigRelay, 1, {}));
    return simulate(p, c).timeUs;
  };
  EXPECT_NEAR(time(1000, 1), 10, 1e-9) << "adjacent blocks are one source";
  EXPECT_NEAR(time(2000, 4), 10, 1e-9) << "three sources fit one write";
  EXPECT_NEAR(time(2000, 2), 12, 1e-9) << "three sources take two writes of two";
}

// Proxy threads (Cluster::proxyThreads, RMACC_PROXY_THREADS): r0 signals r1 and r2, 10 µs of
// proxy CPU per write at each end, latency 5. One thread issues them one after the other: the
// second leaves at 20, lands at 25 and is taken in by r2's proxy at 35. Two issue both at once
// (node 1 is 1 ahead of node 0, node 2 is 1 back: different threads): both taken in at 25. On 5
// nodes, r0's writes to r2 (2 ahead) and r4 (1 back, 1 + 1) share thread 0 of 2 (proxyThreadOf),
// as in the library.
TEST(SimModel, ProxyThreadsIssueWritesSideBySide) {
  const plan::Plan p = fanOut(3, {1, 2}, 0);
  Cluster c = bare(3, 1);
  c.proxyOpUs = 10;
  Result one = simulate(p, c);
  EXPECT_NEAR(one.timeUs, 35, 1e-9);
  EXPECT_NEAR(one.proxyThreadBusyMaxUs, 20, 1e-9) << "r0's thread issues both";
  c.proxyThreads = 2;
  Result two = simulate(p, c);
  EXPECT_NEAR(two.timeUs, 25, 1e-9);
  EXPECT_NEAR(two.proxyBusyMaxUs, 20, 1e-9);
  EXPECT_NEAR(two.proxyThreadBusyMaxUs, 10, 1e-9) << "one write on each of r0's threads";

  const plan::Plan five = fanOut(5, {2, 4}, 0);
  Cluster c5 = bare(5, 1);
  c5.proxyOpUs = 10;
  c5.proxyThreads = 2;
  EXPECT_NEAR(simulate(five, c5).timeUs, 35, 1e-9);
  EXPECT_NEAR(simulate(five, c5).proxyThreadBusyMaxUs, 20, 1e-9);
}

// Credits and entry signals written as values (Cluster::signalWrites, the library's
// RMACC_NET_SIGNAL_WRITES): r0 sends r1 a data signal, a credit and an entry signal, 10 µs of
// proxy CPU a write at each end, latency 5: they land at 15 / 25 / 35. As completion data
// r1's proxy takes each in for 10 µs: done at 45. Written as values the last two count as
// they land, and r1's proxy takes in only the data signal (15 to 25): done at 35.
TEST(SimModel, SignalsWrittenAsValuesCostTheTargetsProxyNothing) {
  plan::Plan p = flatPlan(2);
  auto& r0 = p.ranks[0].ops;
  r0.push_back(dataPut(1, 0));
  r0.push_back(op(OpKind::kPut, Lane::kProxyPut, 1, 0, kCtxCredit, plan::kSigStep, 0, {}));
  r0.push_back(op(OpKind::kPut, Lane::kProxyPut, 1, 0, kCtxEntry, 0, 0, {}));
  auto& r1 = p.ranks[1].ops;
  r1.push_back(op(OpKind::kWait, Lane::kProxyWait, 0, 0, kCtxCredit, plan::kSigStep, 1, {}));
  r1.push_back(op(OpKind::kWait, Lane::kProxyWait, 0, 0, kCtxEntry, 0, 1, {}));
  r1.push_back(op(OpKind::kWait, Lane::kProxyWait, 0, 0, kCtxColl, plan::kSigData, 1, {}));
  Cluster c = bare(2, 1);
  c.proxyOpUs = 10;
  c.signalWrites = false;
  Result completion = simulate(p, c);
  EXPECT_NEAR(completion.timeUs, 45, 1e-9);
  c.signalWrites = true;
  Result values = simulate(p, c);
  EXPECT_NEAR(values.timeUs, 35, 1e-9);
  EXPECT_NEAR(values.proxyBusyMaxUs, 30, 1e-9) << "r0 still issues all three";
}

// The proxy's ceiling (Result::proxyCeiling): r0 puts 1,000 bytes to each of r1 and r2 at
// 1,000 bytes per µs, so the traffic's bound is 2 µs. At 1 µs per write its one thread needs
// 2 µs: no limit. At 5 µs it needs 10: the call is proxy-bound, at most 0.2 of the bound, and
// takes at least those 10 µs.
TEST(SimModel, ProxyBoundWhenItsBusiestThreadOutlastsTheWire) {
  const plan::Plan p = fanOut(3, {1, 2}, 1000);
  Cluster c = bare(3, 1);
  c.proxyOpUs = 1;
  Result fast = simulate(p, c);
  EXPECT_NEAR(fast.nodeBoundUs, 2, 1e-9);
  EXPECT_EQ(fast.proxyCeiling(), 1.0);
  EXPECT_FALSE(fast.proxyBound());
  c.proxyOpUs = 5;
  Result slow = simulate(p, c);
  EXPECT_NEAR(slow.proxyCeiling(), 0.2, 1e-9);
  EXPECT_TRUE(slow.proxyBound());
  EXPECT_GE(slow.timeUs, slow.proxyThreadBusyMaxUs);
}

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

// A NIC with a queue per peer (the default) keeps sending to r2 while r1, which r3 also writes
// to, takes r0's message at half rate: every message lands at 20 + 5 µs. A NIC moving one
// message at a time sends r0's second message only after the first (20 µs, shared), then
// alone: 30 + 5.
double twoPeersOneBusy(bool perPeer) {
  plan::Plan p = flatPlan(4);
  for (int to : {1, 2}) p.ranks[0].ops.push_back(dataPut(to, 10000));
  p.ranks[3].ops.push_back(dataPut(1, 10000));
  Cluster c = bare(4, 1);
  c.nicQueuePerPeer = c.maxMinSharing = perPeer;
  if (!perPeer) c.nicQueues = 1;
  return simulate(p, c).timeUs;
}

TEST(SimModel, NicWithAQueuePerPeerServesOthersBesideASlowReceiver) {
  EXPECT_DOUBLE_EQ(twoPeersOneBusy(true), 25);
  EXPECT_DOUBLE_EQ(twoPeersOneBusy(false), 35);
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

// On a NIC that moves one message at a time, a signal does not wait in its FIFO behind data to
// another peer (Cluster::
// signalsBypassNicQueue), but it does behind data to its own peer. r0 puts 10,000 bytes (10 µs
// at 1 GB/s, latency 5) to r1, then a signal to `signalPeer`, which answers with 10,000 bytes
// to r0 once it has the signal: to r2 the signal lands at 5 µs and the answer at 20 (30 when
// signals share the FIFO); to r1 it follows the data (lands at 15), answer at 30 either way.
double signalBehindData(int signalPeer, bool bypass, bool perPeer = false, bool endpoint = false) {
  const int kCredit = kCtxCredit;
  plan::Plan p = flatPlan(3);
  auto& w = p.ranks[0].ops;
  w.push_back(dataPut(1, 10000));
  w.push_back(op(OpKind::kPut, Lane::kProxyPut, signalPeer, 0, kCredit, 0, 0, {}));
  auto& a = p.ranks[signalPeer].ops;
  a.push_back(op(OpKind::kWait, Lane::kProxyWait, 0, 0, kCredit, 0, 1, {}));
  a.push_back(dataPut(0, 10000, {(int)a.size() - 1}));
  Cluster c = bare(3, 1);
  c.signalsBypassNicQueue = bypass;
  c.signalEndpoint = endpoint;
  c.nicQueuePerPeer = c.maxMinSharing = perPeer;
  if (!perPeer) c.nicQueues = 1;
  return simulate(p, c).timeUs;
}

TEST(SimModel, SignalPassesDataToAnotherPeerNotToItsOwnUnlessOnItsOwnEndpoint) {
  EXPECT_DOUBLE_EQ(signalBehindData(2, true), 20);
  EXPECT_DOUBLE_EQ(signalBehindData(2, false), 30);
  EXPECT_DOUBLE_EQ(signalBehindData(1, true), 30);
  EXPECT_DOUBLE_EQ(signalBehindData(1, false), 30);
  // A queue per peer: the signal waits only behind its own peer's queue, whatever the flag.
  for (bool bypass : {true, false}) {
    EXPECT_DOUBLE_EQ(signalBehindData(2, bypass, true), 20);
    EXPECT_DOUBLE_EQ(signalBehindData(1, bypass, true), 30);
  }
  // An endpoint of its own (Cluster::signalEndpoint): not even behind its own peer's data.
  for (bool perPeer : {false, true}) {
    EXPECT_DOUBLE_EQ(signalBehindData(1, true, perPeer, true), 20);
    EXPECT_DOUBLE_EQ(signalBehindData(2, true, perPeer, true), 20);
  }
}

// The proxy's pacer (Cluster::paceLeadUs, lead 0). r0 puts 10,000 bytes to r1 and then to r2
// (10 µs each at 1 GB/s, latency 5); r1 answers with 10,000 bytes once its data is in. Posted
// together, the two puts share r0's NIC and both land at 25, r1's answer at 40; paced, the
// first goes alone and lands at 15, the second at 25, the answer at 30.
double answerAfterTwoPuts(bool paced) {
  plan::Plan p = flatPlan(3);
  for (int to : {1, 2}) p.ranks[0].ops.push_back(dataPut(to, 10000));
  auto& a = p.ranks[1].ops;
  a.push_back(op(OpKind::kWait, Lane::kProxyWait, 0, 0, kCtxColl, plan::kSigData, 1, {}));
  a.push_back(dataPut(0, 10000, {0}));
  Cluster c = bare(3, 1);
  c.paceLeadUs = paced ? 0 : -1;
  return simulate(p, c).timeUs;
}

TEST(SimModel, PacedWritesLeaveOneAfterAnother) {
  EXPECT_DOUBLE_EQ(answerAfterTwoPuts(false), 40);
  EXPECT_DOUBLE_EQ(answerAfterTwoPuts(true), 30);
}

// Paced (lead 0), r0 puts 10,000 bytes to r1 twice, then a signal to `signalPeer`, which
// answers with 30,000 bytes once it has it. The second put is held until 10 µs; a signal to r2
// passes it (lands at 5, answer at 40), one to r1 keeps its place behind it and behind it on
// r1's queue pair (lands at 25, answer at 60), as the library's proxy does.
double signalPastHeldWrite(int signalPeer) {
  const int kCredit = kCtxCredit;
  plan::Plan p = flatPlan(3);
  auto& w = p.ranks[0].ops;
  for (int k = 0; k < 2; ++k) w.push_back(dataPut(1, 10000));
  w.push_back(op(OpKind::kPut, Lane::kProxyPut, signalPeer, 0, kCredit, 0, 0, {}));
  auto& a = p.ranks[signalPeer].ops;
  a.push_back(op(OpKind::kWait, Lane::kProxyWait, 0, 0, kCredit, 0, 1, {}));
  a.push_back(dataPut(0, 30000, {(int)a.size() - 1}));
  Cluster c = bare(3, 1);
  c.paceLeadUs = 0;
  return simulate(p, c).timeUs;
}

TEST(SimModel, SignalsPassHeldWritesToOtherPeersOnly) {
  EXPECT_DOUBLE_EQ(signalPastHeldWrite(2), 40);
  EXPECT_DOUBLE_EQ(signalPastHeldWrite(1), 60);
}

// Two proxy threads of one rank sharing its pacer, whose NIC is busy until 4 µs (4,000 bytes at
// 1,000 B/µs, lead 2 µs): a data write released at 0 may be posted from 2 µs. issued[k]: when
// write k (the rank's posting order) had its CPU spent.
struct TwoProxyThreads {
  Fluid fluid;
  NicPacer pacer{1000, 2};
  std::vector<ProxyThread> threads{{fluid, pacer}, {fluid, pacer}};
  std::vector<double> issued = std::vector<double>(3, -1);
  TwoProxyThreads() {
    pacer.posted(4000, 0);
    for (int t = 0; t < 2; ++t) threads[t].setSiblings(t, threads.data(), 2);
  }
  void release(int thread, int k, int peer, uint64_t bytes, double cpuUs) {
    threads[thread].release(
        {peer, bytes, (uint64_t)k, cpuUs, [this, k] { issued[k] = fluid.now(); }});
  }
};

// A proxy thread spends a write's CPU when it posts it, after completions that arrived, and a
// rank's threads keep its posting order among the data writes they hold back (lab/sim/
// machine.h ProxyThread, core/nic_pacer.h). Thread 0 takes in a completion from 1 to 6 µs, and
// thread 1 waits for thread 0 to take up its older write (posted 6-7 µs) before its own (6-7 µs
// as well); thread 1's signal to another peer passes its held write at once (0-1 µs). Without
// the order, write 1 would have gone at 2 µs.
TEST(SimModel, ProxyThreadsPostDataInTheRanksOrder) {
  TwoProxyThreads p;
  p.release(0, 0, 7, 1000, 1);
  p.release(1, 1, 8, 1000, 1);
  p.release(1, 2, 9, 0, 1);
  p.fluid.at(1, [&] {
    p.threads[0].arrive([&](std::function<void()> release) { p.fluid.at(6, release); });
  });
  p.fluid.run();
  EXPECT_DOUBLE_EQ(p.issued[2], 1);
  EXPECT_DOUBLE_EQ(p.issued[0], 7);
  EXPECT_DOUBLE_EQ(p.issued[1], 7);
}

// A thread that takes up the oldest held write lets the siblings it held back go at once, as the
// library's threads do (NicPacer::takenUp), not once it spent that write's CPU. Both look again
// at 2 µs, thread 1 first: it waits for thread 0's older write, which thread 0 then posts (2-5
// µs); thread 1 posts its own at 2 µs too (2-3 µs), before the pacer has heard of thread 0's: up
// to one write per thread beyond the lead, as in the library. Kicked only after thread 0's CPU,
// it went at 5-6 µs.
TEST(SimModel, ProxyThreadsGoOnceTheOlderWriteIsTakenUp) {
  TwoProxyThreads p;
  p.release(1, 1, 8, 1000, 1);
  p.release(0, 0, 7, 1000, 3);
  p.fluid.run();
  EXPECT_DOUBLE_EQ(p.issued[0], 5);
  EXPECT_DOUBLE_EQ(p.issued[1], 3);
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
