// Direct calls (coll/direct_calls.h): calls set up on the caller's thread stay byte-exact and in
// order beside calls queued for the progress thread; a late peer hands the rest of a call to
// the progress thread once RMACC_ENQUEUE_WAIT_MS is over; a dead peer and an abort from
// another thread end a direct call with an error. Host backend, real processes, libfabric tcp
// between emulated nodes; core/test_hooks.h counts which path each call took.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <tuple>
#include <vector>

#include "core/test_hooks.h"
#include "rmacc.h"
#include "support/alltoallv_call.h"
#include "support/alltoallv_case.h"
#include "support/comm_fixture.h"
#include "support/multiprocess.h"

namespace rmacc::test {
namespace {

double nowS() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One call's buffers and layout, kept until the stream is synchronised.
struct PendingCall {
  Layout layout;
  std::unique_ptr<Buffers> buf;
  uint64_t seed;
};

// Enqueues one AlltoAllV of `counts` on `stream` without synchronising.
PendingCall enqueueCall(TestComm& comm, int n, int me, const std::vector<size_t>& counts,
                        uint64_t seed, bool registered, rmaccStream_t stream) {
  PendingCall c;
  c.seed = seed;
  c.layout = makeLayout(counts, n, me, seed);
  c.buf = std::make_unique<Buffers>(comm.get(), registered, c.layout.sendElems * 4, c.layout.recvElems * 4);
  fillSend(c.buf->send, c.layout, 4, me, seed);
  const Layout& l = c.layout;
  EXPECT_EQ(rmaccAlltoAllv(c.buf->send, l.sendcounts.data(), l.sdispls.data(), c.buf->recv,
                           l.recvcounts.data(), l.rdispls.data(), rmaccFloat32, comm.get(), stream),
            rmaccSuccess)
      << comm.lastError();
  return c;
}

size_t checkCall(const PendingCall& c, int me) {
  std::string first;
  size_t wrong = checkRecv(c.buf->recv, c.layout, 4, me, c.seed, &first);
  EXPECT_EQ(wrong, 0u) << "rank " << me << ", seed " << c.seed << ": " << first;
  return wrong;
}

std::vector<size_t> countsFor(int which, int n, uint64_t seed) {
  if (which == 4) return std::vector<size_t>((size_t)n * n, 0);  // zero counts
  const Pattern p[] = {Pattern::kUniform, Pattern::kRandom, Pattern::kSparse, Pattern::kHot};
  return makeCounts(p[which], n, 300, seed);
}

int rankOf(const TestComm& c) {
  int me;
  rmaccCommUserRank(c.get(), &me);
  return me;
}

using Shape = std::tuple<Topo, int /*counts: uniform, random, sparse, skewed, zero*/>;
class DirectCalls : public testing::TestWithParam<Shape> {};

// Calls back to back on a stream, then one on the NULL stream (returns when done): each call
// byte-exact, every call set up on the caller's thread, none queued. (A call handed off at
// RMACC_ENQUEUE_WAIT_MS queues the calls behind it: the wait is long here, so that a peer
// slowed down by a loaded machine does not.)
TEST_P(DirectCalls, BackToBackByteExact) {
  auto [topo, which] = GetParam();
  const int n = topo.nodes * topo.local;
  runRanks(n, optionsFor(topo, {{"RMACC_RELAY_BYTES", "64K"}, {"RMACC_RELAY_SLOTS", "2"},
                                {"RMACC_ENQUEUE_WAIT_MS", "10000"}}),
           [&](const RankContext& ctx) {
    TestComm comm(ctx);
    const int me = rankOf(comm);
    const CallPathCounts before = callPathCountsForTest();
    std::vector<PendingCall> calls;
    for (int k = 0; k < 6; ++k)
      calls.push_back(enqueueCall(comm, n, me, countsFor(which, n, 100 + k), 100 + k, k % 2, comm.stream()));
    ASSERT_EQ(comm.sync(), rmaccSuccess) << comm.lastError();
    for (const PendingCall& c : calls) checkCall(c, me);
    PendingCall last = enqueueCall(comm, n, me, countsFor(which, n, 200), 200, false, nullptr);
    checkCall(last, me);
    const CallPathCounts after = callPathCountsForTest();
    EXPECT_EQ(after.queued, before.queued);
    EXPECT_EQ(after.direct - before.direct, 7u);
    EXPECT_EQ(after.handedOff, before.handedOff);
  });
}

std::string shapeName(const testing::TestParamInfo<Shape>& info) {
  auto [t, which] = info.param;
  const char* names[] = {"uniform", "random", "sparse", "skewed", "zero"};
  return std::to_string(t.nodes) + "x" + std::to_string(t.local) + "_" + names[which];
}

INSTANTIATE_TEST_SUITE_P(Shapes, DirectCalls,
                         testing::Combine(testing::Values(Topo{1, 1}, Topo{1, 2}, Topo{2, 1}, Topo{2, 2}),
                                          testing::Values(0, 1, 2, 3, 4)),
                         shapeName);

class DirectCallsTopo : public testing::TestWithParam<Topo> {};

// Rank 0 makes a call with device counts (the progress thread sets it up once the stream gets
// there) that waits for rank 1, late by 300 ms, then calls with host counts: those queue behind
// it (the progress thread is busy with the first) and still run in order, byte-exact; then
// the next calls go direct again.
TEST_P(DirectCallsTopo, QueuedBehindDeviceCountsInOrder) {
  const Topo topo = GetParam();
  const int n = topo.nodes * topo.local;
  runRanks(n, optionsFor(topo), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    const int me = rankOf(comm);
    std::vector<size_t> sc(n, 2), sd(n), rc(n), rd(n);
    for (int j = 0; j < n; ++j) sd[j] = 2 * j;
    std::vector<float> send(2 * n, (float)me), recv(2 * n + 2, -1.f);
    if (me == 1) usleep(300000);
    const CallPathCounts before = callPathCountsForTest();
    ASSERT_EQ(rmaccAlltoAllvDynamic(send.data(), sc.data(), sd.data(), recv.data(), recv.size(), rc.data(),
                                    rd.data(), rmaccFloat32, comm.get(), comm.stream()),
              rmaccSuccess)
        << comm.lastError();
    std::vector<PendingCall> calls;
    for (int k = 0; k < 3; ++k)
      calls.push_back(enqueueCall(comm, n, me, countsFor(1, n, 300 + k), 300 + k, false, comm.stream()));
    const CallPathCounts mid = callPathCountsForTest();
    ASSERT_EQ(comm.sync(), rmaccSuccess) << comm.lastError();
    for (int j = 0; j < n; ++j) {
      EXPECT_EQ(rc[j], 2u);
      EXPECT_EQ(recv[rd[j]], (float)j);
      EXPECT_EQ(recv[rd[j] + 1], (float)j);
    }
    for (const PendingCall& c : calls) checkCall(c, me);
    if (me == 0) EXPECT_GE(mid.queued - before.queued, 2u) << "the calls behind the device-count call queued";
    calls.clear();
    calls.push_back(enqueueCall(comm, n, me, countsFor(0, n, 400), 400, true, comm.stream()));
    ASSERT_EQ(comm.sync(), rmaccSuccess) << comm.lastError();
    checkCall(calls[0], me);
    // Direct, unless the progress thread is still finishing the last queued call (its work can
    // be done before it returns): then queued, behind it.
    const CallPathCounts after = callPathCountsForTest();
    EXPECT_EQ(after.direct + after.handedOff + after.queued, mid.direct + mid.handedOff + mid.queued + 1);
  });
}

// A peer later than RMACC_ENQUEUE_WAIT_MS: the caller returns after it (not after the peer),
// the progress thread finishes the exchange where the caller left it, the data is exact.
TEST_P(DirectCallsTopo, LatePeerHandsOff) {
  const Topo topo = GetParam();
  const int n = topo.nodes * topo.local;
  runRanks(n, optionsFor(topo, {{"RMACC_ENQUEUE_WAIT_MS", "30"}}), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    const int me = rankOf(comm);
    const CallPathCounts first = callPathCountsForTest();
    for (int round = 0; round < 2; ++round) {
      if (me == n - 1) usleep(400000);
      const CallPathCounts before = callPathCountsForTest();
      const double t0 = nowS();
      PendingCall c = enqueueCall(comm, n, me, countsFor(1, n, 500 + round), 500 + round, round, comm.stream());
      const double took = nowS() - t0;
      const CallPathCounts after = callPathCountsForTest();
      if (me == 0) {
        EXPECT_LT(took, 0.3) << "the caller waited for the late peer";
        // Handed off; or queued, when the progress thread was still finishing the last one.
        EXPECT_EQ(after.handedOff + after.queued - before.handedOff - before.queued, 1u);
      }
      ASSERT_EQ(comm.sync(), rmaccSuccess) << comm.lastError();
      checkCall(c, me);
    }
    if (me == 0) EXPECT_GE(callPathCountsForTest().handedOff - first.handedOff, 1u);
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, DirectCallsTopo,
                         testing::Values(Topo{1, 2}, Topo{2, 1}, Topo{2, 2}),
                         [](const testing::TestParamInfo<Topo>& info) {
                           return std::to_string(info.param.nodes) + "x" + std::to_string(info.param.local);
                         });

// A peer that dies while rank 0 waits in a direct call (RMACC_ENQUEUE_WAIT_MS long enough that
// it is still there): the call or the stream's synchronisation fails within seconds, not at
// the timeout.
TEST(DirectCallsFaults, DeadPeerFailsTheCall) {
  for (Topo topo : {Topo{1, 2}, Topo{2, 1}}) {
    const int n = topo.nodes * topo.local;
    std::vector<int> st = runRanksStatus(
        n, optionsFor(topo, {{"RMACC_ENQUEUE_WAIT_MS", "20000"}, {"RMACC_TIMEOUT_S", "60"}}),
        [&](const RankContext& ctx) {
      TestComm comm(ctx);
      const int me = rankOf(comm);
      if (me == 1) {
        usleep(300000);
        _exit(0);
      }
      const double t0 = nowS();
      std::vector<float> send(n, 1.f), recv(n, 0.f);
      rmaccResult_t r = rmaccAlltoAll(send.data(), recv.data(), 1, rmaccFloat32, comm.get(), comm.stream());
      if (r == rmaccSuccess) r = comm.sync();
      EXPECT_NE(r, rmaccSuccess);
      EXPECT_LT(nowS() - t0, 15.0) << comm.lastError();
      _exit(testing::Test::HasFailure() ? 1 : 0);  // the communicator is broken: no destroy
    });
    EXPECT_EQ(st[0], 0) << topo.nodes << "x" << topo.local;
  }
}

// rank 0 waits in a direct call for rank 1, which does not come; another thread of rank 0:
// destroy is refused while the call is inside, abort releases it with an error.
TEST(DirectCallsFaults, AbortFromAnotherThread) {
  for (Topo topo : {Topo{1, 2}, Topo{2, 1}}) {
    const int n = topo.nodes * topo.local;
    std::vector<int> st = runRanksStatus(
        n, optionsFor(topo, {{"RMACC_ENQUEUE_WAIT_MS", "20000"}, {"RMACC_TIMEOUT_S", "60"}}),
        [&](const RankContext& ctx) {
          rmaccComm_t comm = nullptr;
          ASSERT_EQ(rmaccCommInitRank(&comm, ctx.nRanks, ctx.id, ctx.rank), rmaccSuccess);
          if (ctx.rank == 1) {
            usleep(3000000);  // never calls; leaves once rank 0 aborted
            rmaccCommAbort(comm);
            _exit(0);
          }
          std::atomic<bool> inside{false}, returned{false};
          rmaccResult_t callResult = rmaccSuccess;
          std::thread caller([&] {
            std::vector<float> send(n, 1.f), recv(n, 0.f);
            inside = true;
            callResult = rmaccAlltoAll(send.data(), recv.data(), 1, rmaccFloat32, comm, nullptr);
            returned = true;
          });
          while (!inside) usleep(1000);
          usleep(200000);
          EXPECT_FALSE(returned.load()) << "the call did not wait for rank 1";
          EXPECT_EQ(rmaccCommDestroy(comm), rmaccInvalidUsage) << "destroy while a call is inside";
          const double t0 = nowS();
          EXPECT_EQ(rmaccCommAbort(comm), rmaccSuccess);
          caller.join();
          EXPECT_LT(nowS() - t0, 5.0);
          EXPECT_NE(callResult, rmaccSuccess);
        });
    EXPECT_EQ(st[0], 0) << topo.nodes << "x" << topo.local;
  }
}

}  // namespace
}  // namespace rmacc::test
