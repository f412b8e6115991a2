// rmacc-sim's network side (machine.h): the proxy threads and their CPU per write, a NIC's
// queue pairs, signals beside data, the pacer; small plans with answers worked out on paper.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "cluster.h"
#include "core/signal_contexts.h"
#include "fluid.h"
#include "machine.h"
#include "runner.h"
#include "sim_test_support.h"

namespace rmacc::sim {
namespace {

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

}  // namespace
}  // namespace rmacc::sim
