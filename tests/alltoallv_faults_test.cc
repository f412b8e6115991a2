// AlltoAllV when something is wrong, on the host backend with real processes and libfabric
// tcp between emulated nodes: mismatched counts (found anywhere, reported everywhere, nothing
// written), a peer's corrupted count record, dead peers, late peers (calls never block on
// them) and the bound on calls in flight.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <tuple>
#include <vector>

#include "api/api_guard.h"
#include "coll/collective.h"
#include "rmacc.h"
#include "support/alltoallv_call.h"
#include "support/alltoallv_case.h"
#include "support/comm_fixture.h"
#include "support/multiprocess.h"

namespace rmacc::test {
namespace {

TEST(Alltoallv, MismatchedCountsFailEverywhereAndTouchNothing) {
  runRanks(4, optionsFor({2, 2}), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    const int n = 4, me = ctx.rank;
    auto counts = makeCounts(Pattern::kUniform, n, 50, 3);
    Layout l = makeLayout(counts, n, me, 3);
    if (me == 2) l.recvcounts[1] -= 1;  // rank 2 expects one element less from rank 1
    std::vector<uint8_t> send(l.sendElems * 4 + 4), recv(l.recvElems * 4 + 4, kPoison);
    fillSend(send.data(), l, 4, me, 3);
    EXPECT_EQ(rmaccAlltoAllv(send.data(), l.sendcounts.data(), l.sdispls.data(), recv.data(),
                             l.recvcounts.data(), l.rdispls.data(), rmaccFloat32, comm.get(),
                             comm.stream()), rmaccSuccess);
    EXPECT_EQ(comm.sync(), rmaccInvalidUsage);
    EXPECT_NE(std::string(comm.lastError()).find("mismatch"), std::string::npos) << comm.lastError();
    for (uint8_t byte : recv) ASSERT_EQ(byte, kPoison) << "a receive buffer was touched";
    // Same again with the NULL stream: the call itself reports it.
    EXPECT_EQ(rmaccAlltoAllv(send.data(), l.sendcounts.data(), l.sdispls.data(), recv.data(),
                             l.recvcounts.data(), l.rdispls.data(), rmaccFloat32, comm.get(),
                             nullptr), rmaccInvalidUsage);
    // One rank's bad argument: it gets rmaccInvalidArgument, the others rmaccInvalidUsage.
    rmaccResult_t r = rmaccAlltoAllv(me == 0 ? nullptr : send.data(), l.sendcounts.data(),
                                     l.sdispls.data(), recv.data(), l.recvcounts.data(),
                                     l.rdispls.data(), rmaccFloat32, comm.get(), nullptr);
    EXPECT_EQ(r, me == 0 ? rmaccInvalidArgument : rmaccInvalidUsage) << comm.lastError();
    // The communicator is still usable.
    oneCall(comm, counts, rmaccFloat32, false, 4, comm.stream());
  });
}

// A peer's count record is not trusted (DESIGN.md §4): rank 1 claims that rank 0's block lands
// half a block past the end of its receive buffer (the offset alone is inside it). Rank 0 must
// refuse to copy (rmaccRemoteError, logged naming rank 1) and write nothing, neither into rank 1's
// buffer nor past it.
TEST(Alltoallv, CorruptedPeerRecordIsRefusedAndNothingWritten) {
  runRanks(2, optionsFor({1, 2}, {{"RMACC_TIMEOUT_S", "5"}}), [&](const RankContext& ctx) {
    constexpr size_t kBlock = 4096, kRecv = 64 << 10;
    TestComm comm(ctx);
    void *send, *recv;
    RMACC_ASSERT_OK(rmaccMemAlloc(comm.get(), &send, 2 * kBlock));
    RMACC_ASSERT_OK(rmaccMemAlloc(comm.get(), &recv, kRecv));
    memset(send, 0x11, 2 * kBlock);
    memset(recv, kPoison, kRecv);
    size_t counts[2] = {kBlock, kBlock}, displs[2] = {0, kBlock};
    if (ctx.rank == 1)
      setCountRecordHookForTest([](uint64_t, uint64_t* rows, int n) {
        rows[2 * n + 0] = kRecv - kBlock / 2;  // where rank 0's block lands: ends past the buffer
      });
    RMACC_ASSERT_OK(rmaccAlltoAllv(send, counts, displs, recv, counts, displs, rmaccUint8,
                                   comm.get(), comm.stream()));
    rmaccResult_t r = comm.sync();
    if (ctx.rank == 0) {
      EXPECT_EQ(r, rmaccRemoteError) << comm.lastError();
      rmaccResult_t async = rmaccSuccess;
      RMACC_ASSERT_OK(rmaccCommGetAsyncError(comm.get(), &async));
      EXPECT_EQ(async, rmaccRemoteError) << "the refusal is the communicator's error";
    } else {
      EXPECT_NE(r, rmaccSuccess) << "rank 0's block can never arrive";
      // Rank 0's block, where the record says and where it really belongs: untouched.
      const uint8_t* p = static_cast<const uint8_t*>(recv);
      for (size_t i = 0; i < kBlock; ++i) ASSERT_EQ(p[i], kPoison) << "byte " << i;
      for (size_t i = kRecv - kBlock; i < kRecv; ++i) ASSERT_EQ(p[i], kPoison) << "byte " << i;
    }
    rmaccCommAbort(comm.get());
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  });
}

// The count exchange checks each count where it meets the receiver's expectation (a node-mate,
// or the relay of the receiver's node on the sender's rail) and spreads one verdict: a mismatch
// between any two ranks, whoever sees it, fails the call on every rank, names the same pair
// everywhere, and moves nothing; the next call works.
struct Pair {
  int src, dst;
};

// Each case's pairs get one element less at the receiver; every rank must fail the call with
// rmaccInvalidUsage naming the lowest (sender, receiver) pair (listed first), and nothing may
// be written.
void mismatchCase(Topo shape, const std::vector<std::vector<Pair>>& cases) {
  const int n = shape.nodes * shape.local;
  runRanks(n, optionsFor(shape), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    const int me = ctx.rank;
    auto counts = makeCounts(Pattern::kUniform, n, 40, 7);
    for (const auto& pairs : cases) {
      Layout l = makeLayout(counts, n, me, 7);
      for (const Pair& p : pairs)
        if (me == p.dst) l.recvcounts[p.src] -= 1;
      std::vector<uint8_t> send(l.sendElems * 4 + 4), recv(l.recvElems * 4 + 4, kPoison);
      fillSend(send.data(), l, 4, me, 7);
      EXPECT_EQ(rmaccAlltoAllv(send.data(), l.sendcounts.data(), l.sdispls.data(), recv.data(),
                               l.recvcounts.data(), l.rdispls.data(), rmaccFloat32, comm.get(),
                               comm.stream()), rmaccSuccess);
      EXPECT_EQ(comm.sync(), rmaccInvalidUsage);
      const std::string want = "rank " + std::to_string(pairs[0].src) + " sends " +
                               std::to_string(counts[pairs[0].src * n + pairs[0].dst]) +
                               " elements to rank " + std::to_string(pairs[0].dst);
      EXPECT_NE(std::string(comm.lastError()).find(want), std::string::npos)
          << comm.lastError() << " (want: " << want << ")";
      for (uint8_t byte : recv) ASSERT_EQ(byte, kPoison) << "a receive buffer was touched";
    }
    oneCall(comm, counts, rmaccFloat32, false, 7, comm.stream());
  });
}

TEST(Alltoallv, MismatchAnywhereFailsEverywhere) {
  // Ranks 2a, 2a+1 on node a. Same node; rail peers (direct put); different nodes and rails
  // (through a relay); a rank with itself; two at once (the lowest pair is reported).
  mismatchCase({3, 2}, {{{0, 1}}, {{2, 4}}, {{1, 4}}, {{3, 3}}, {{4, 1}, {5, 0}}});
}

// One node checks every pair on every rank in a single gather (CountExchange::checkWholeNode):
// a pair that involves neither rank 0 nor rank 1 must still fail the call on both.
TEST(Alltoallv, MismatchAnywhereOnOneNodeFailsEverywhere) {
  mismatchCase({1, 4}, {{{2, 3}}, {{0, 1}}, {{3, 3}}, {{2, 0}, {3, 1}}, {{1, 2}, {2, 1}}});
}

// A rank killed between calls: the survivors' next AlltoAllV fails within RMACC_TIMEOUT_S.
// Across nodes the count exchange runs on the control plane (a closed socket); within one node
// through shared memory (the exchange watches the peer's process).
// The victim dies only once every survivor finished the first call: dying the moment its own
// call returned raced with a survivor still finishing the first call, which then failed
// (seen once in a full run on the loaded 2-core machine).
void deadPeerCase(Topo shape, const char* proxyThreads = "0") {
  const int n = shape.nodes * shape.local;
  RunOptions o = optionsFor(shape, {{"RMACC_TIMEOUT_S", "5"}, {"RMACC_PROXY_THREADS", proxyThreads}});
  o.sharedBytes = sizeof(std::atomic<int>);
  std::vector<int> status = runRanksStatus(n, o, [&](const RankContext& ctx) {
    auto* firstDone = static_cast<std::atomic<int>*>(ctx.shared);  // zeroed scratch: starts at 0
    TestComm comm(ctx);
    auto counts = makeCounts(Pattern::kRandom, n, 1000, 8);
    oneCall(comm, counts, rmaccFloat32, false, 8, comm.stream());
    if (ctx.rank == n - 1) {
      while (firstDone->load() < n - 1) usleep(1000);
      raise(SIGKILL);
    }
    firstDone->fetch_add(1);
    auto t0 = std::chrono::steady_clock::now();
    Layout l = makeLayout(counts, n, ctx.rank, 8);
    std::vector<uint8_t> send(l.sendElems * 4 + 4), recv(l.recvElems * 4 + 4, kPoison);
    rmaccResult_t r = rmaccAlltoAllv(send.data(), l.sendcounts.data(), l.sdispls.data(), recv.data(),
                                     l.recvcounts.data(), l.rdispls.data(), rmaccFloat32, comm.get(),
                                     comm.stream());
    if (r == rmaccSuccess) r = comm.sync();
    EXPECT_TRUE(r == rmaccRemoteError || r == rmaccTimeout || r == rmaccNetworkError)
        << rmaccGetErrorString(r) << ": " << comm.lastError();
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 15.0);
    rmaccCommAbort(comm.get());
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  });
  for (int r = 0; r < n - 1; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
  EXPECT_EQ(status[n - 1], 128 + SIGKILL);
}

TEST(Alltoallv, DeadPeerBecomesAnError) { deadPeerCase({2, 2}); }
TEST(Alltoallv, DeadPeerOnTheSameNodeBecomesAnError) { deadPeerCase({1, 3}); }
// The dead rank's pairs ride different proxy threads of the survivors: whichever thread sees
// the loss first fails the communicator, the others stop with it.
TEST(Alltoallv, DeadPeerBecomesAnErrorWithSeveralProxyThreads) { deadPeerCase({3, 2}, "3"); }

TEST(Alltoallv, CallsReturnWhileAPeerIsLate) {
  runRanks(4, optionsFor({2, 2}), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    auto counts = makeCounts(Pattern::kUniform, 4, 1000, 1);
    Layout l = makeLayout(counts, 4, ctx.rank, 1);
    std::vector<uint8_t> send(l.sendElems * 4 + 4), recv(l.recvElems * 4 + 4, kPoison);
    fillSend(send.data(), l, 4, ctx.rank, 1);
    if (ctx.rank == 1) usleep(1500 * 1000);  // late for the second call... and the first
    for (int call = 0; call < 2; ++call) {
      auto t0 = std::chrono::steady_clock::now();
      RMACC_ASSERT_OK(rmaccAlltoAllv(send.data(), l.sendcounts.data(), l.sdispls.data(),
                                     recv.data(), l.recvcounts.data(), l.rdispls.data(),
                                     rmaccFloat32, comm.get(), comm.stream()));
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_LT(ms, 200.0) << "rank " << ctx.rank << " call " << call << " blocked";
    }
    RMACC_ASSERT_OK(comm.sync());
    std::string first;
    EXPECT_EQ(checkRecv(recv.data(), l, 4, ctx.rank, 1, &first), 0u) << first;
  });
}

// A call returns once the progress thread has enqueued its work (peers on time): until then a
// CUDA call of the caller that waits for the device could hold that work back for good
// (docs/decisions.md#enqueue-wait). The wait is made long here so that a slow CI machine cannot make a
// peer late; CallsReturnWhileAPeerIsLate bounds it with the default.
TEST(Alltoallv, CallsReturnOnceTheirWorkIsEnqueued) {
  runRanks(4, optionsFor({2, 2}, {{"RMACC_ENQUEUE_WAIT_MS", "60000"}}), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    CollectiveEngine& coll = api::commOf(comm.get()).coll();
    for (uint64_t call = 1; call <= 20; ++call) {
      auto counts = makeCounts(Pattern::kRandom, 4, 1000, call);
      Layout l = makeLayout(counts, 4, ctx.rank, call);
      std::vector<uint8_t> send(l.sendElems * 4 + 4), recv(l.recvElems * 4 + 4, kPoison);
      fillSend(send.data(), l, 4, ctx.rank, call);
      RMACC_ASSERT_OK(rmaccAlltoAllv(send.data(), l.sendcounts.data(), l.sdispls.data(),
                                     recv.data(), l.recvcounts.data(), l.rdispls.data(),
                                     rmaccFloat32, comm.get(), comm.stream()));
      EXPECT_EQ(coll.lastCallCost().seq, call) << "rank " << ctx.rank << ": call " << call
                                               << " returned before its work was enqueued";
      RMACC_ASSERT_OK(comm.sync());
      std::string first;
      EXPECT_EQ(checkRecv(recv.data(), l, 4, ctx.rank, call, &first), 0u) << first;
    }
  });
}

// A caller may run at most RMACC_MAX_CALLS_IN_FLIGHT calls ahead of the device: with the bound
// at 2 and rank 0's stream held on a signal rank 1 sends 1.5 s late, rank 0's third call
// returns only once its first finished (unbounded, it returned at once; on CUDA a deep backlog
// filled the streams' command queues and stalled every rank). The data stays exact.
TEST(Alltoallv, CallsInFlightAreBounded) {
  RunOptions o = optionsFor({1, 2});
  o.env.push_back({"RMACC_MAX_CALLS_IN_FLIGHT", "2"});
  runRanks(2, o, [&](const RankContext& ctx) {
    TestComm comm(ctx);
    auto counts = makeCounts(Pattern::kUniform, 2, 1000, 1);
    Layout l = makeLayout(counts, 2, ctx.rank, 1);
    std::vector<uint8_t> send(l.sendElems * 4 + 4), recv(l.recvElems * 4 + 4, kPoison);
    fillSend(send.data(), l, 4, ctx.rank, 1);
    auto call = [&] {
      RMACC_ASSERT_OK(rmaccAlltoAllv(send.data(), l.sendcounts.data(), l.sdispls.data(),
                                     recv.data(), l.recvcounts.data(), l.rdispls.data(),
                                     rmaccFloat32, comm.get(), comm.stream()));
    };
    if (ctx.rank == 0) {
      rmaccWaitSignalDesc_t d{1, 1, 0, 0};
      RMACC_ASSERT_OK(rmaccWaitSignal(1, &d, comm.get(), comm.stream()));
      auto t0 = std::chrono::steady_clock::now();
      call();
      call();
      call();
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_GE(s, 1.0) << "the third call returned before the first finished";
    } else {
      call();
      call();
      usleep(1500 * 1000);
      rmaccStream_t side = nullptr;
      RMACC_ASSERT_OK(rmaccStreamCreate(comm.get(), &side));
      RMACC_ASSERT_OK(rmaccSignal(0, 0, 0, 0, comm.get(), side));
      RMACC_ASSERT_OK(rmaccStreamSynchronize(comm.get(), side));
      RMACC_ASSERT_OK(rmaccStreamDestroy(comm.get(), side));
      call();
    }
    RMACC_ASSERT_OK(comm.sync());
    std::string first;
    EXPECT_EQ(checkRecv(recv.data(), l, 4, ctx.rank, 1, &first), 0u) << first;
  });
}
}  // namespace
}  // namespace rmacc::test
