// Issue #17: a bad or missing collective call never turns into success with wrong data, a
// dead peer is seen by every survivor at once, and init with ranks that disagree fails at once.
// Every case runs 4 ranks on 2 emulated nodes x 2 over libfabric tcp on loopback with
// RMACC_TIMEOUT_S=10: "fast" below means well inside that timeout.
#include <gtest/gtest.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "rmacc.h"
#include "support/comm_fixture.h"
#include "support/multiprocess.h"

namespace rmacc::test {
namespace {

constexpr int kRanks = 4;
constexpr double kTimeoutS = 10;
// Failures that must not wait for the timeout must come within this (the target is 1 s; the
// margin is for a loaded 2-core machine, and it is still half the timeout).
constexpr double kFastS = 5;

double nowS() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

RunOptions options(double timeoutS = kTimeoutS) {
  RunOptions o;
  o.nodeOf = blockNodes(2, 2);
  o.timeoutS = 120;
  o.env = {{"FI_PROVIDER", "tcp"},
           {"FI_TCP_IFACE", "lo"},
           {"RMACC_NET_PROVIDER", "tcp"},
           {"RMACC_TIMEOUT_S", std::to_string((int)timeoutS)}};
  return o;
}

// What the ranks of one run share: when the victim died (CLOCK_MONOTONIC seconds).
struct Shared {
  std::atomic<double> killedAt;
  std::atomic<int> ready;  // survivors about to enter the call
};

// An AlltoAll of `count` uint32 per peer on the synchronous NULL stream, with buffers on the
// caller's stack as in the issue. Returns the call's result; *wrong counts misrouted elements
// (only meaningful on success).
rmaccResult_t stackAlltoAll(rmaccComm_t comm, int me, int n, size_t* wrong) {
  constexpr size_t kCount = 8;
  uint32_t send[kRanks * kCount], recv[kRanks * kCount];
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < kCount; ++i) send[p * kCount + i] = (uint32_t)(me * 1000000 + p * 1000 + i);
  memset(recv, 0xEE, sizeof(recv));
  rmaccResult_t r = rmaccAlltoAll(send, recv, kCount, rmaccUint32, comm, nullptr);
  *wrong = 0;
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < kCount; ++i)
      *wrong += recv[p * kCount + i] != (uint32_t)(p * 1000000 + me * 1000 + i);
  return r;
}

// The scenario: one rank passes NULL to rmaccCommWindowRegister. Every rank must fail
// that call at once (the bad rank carries its error into the exchange), and the next AlltoAll
// must then succeed with the right data on every rank.
TEST(Reliability, NullWindowFailsEveryRankAtOnceAndNextAlltoAllIsRight) {
  runRanks(kRanks, options(), [](const RankContext& ctx) {
    TestComm comm(ctx);
    const int me = ctx.rank;
    void* mem = nullptr;
    RMACC_ASSERT_OK(rmaccMemAlloc(comm.get(), &mem, 4096));
    rmaccWindow_t win = nullptr;
    double t0 = nowS();
    rmaccResult_t r = rmaccCommWindowRegister(comm.get(), me == 1 ? nullptr : mem, 4096, &win);
    double took = nowS() - t0;
    EXPECT_EQ(r, me == 1 ? rmaccInvalidArgument : rmaccInvalidUsage) << comm.lastError();
    EXPECT_LT(took, kFastS) << "rank " << me << " learned of rank 1's NULL window only after "
                            << took << " s: " << comm.lastError();
    size_t wrong = 0;
    r = stackAlltoAll(comm.get(), me, ctx.nRanks, &wrong);
    EXPECT_EQ(r, rmaccSuccess) << comm.lastError();
    EXPECT_EQ(wrong, 0u) << "rank " << me << ": AlltoAll after the rejected registration";
    rmaccResult_t async = rmaccSuccess;
    RMACC_ASSERT_OK(rmaccCommGetAsyncError(comm.get(), &async));
    EXPECT_EQ(async, rmaccSuccess);
    RMACC_ASSERT_OK(rmaccMemFree(comm.get(), mem));
  });
}

// A rank frees its buffers as soon as its call returns. A node mate that writes it no bytes
// must not map its receive buffer: the mate may reach its mapping step after the owner freed
// the buffer, and the call then failed with "cannot import allocation". python_correctness_1x4
// (skewed splits) reproduces it: 2 failures in 4 runs before the fix, 0 in 6 after. This is the
// same pattern without Python (1 x 4, fresh rmaccMemAlloc buffers every call, counts that change
// every call with a quarter of the pairs empty, 300 calls, every one right); on the 2-core CI
// machine it did not hit the race before the fix, so it guards the pattern, not the timing.
size_t skewedCount(int src, int dst, int call) {
  return (src * 7 + dst * 3 + call) % 4 == 0 ? 0 : 16 * (1 + (src + dst + call) % 5);
}

TEST(Reliability, BufferFreedAfterTheCallIsNotMappedByAMateThatWritesItNothing) {
  RunOptions o;
  o.nodeOf = blockNodes(1, 4);
  o.timeoutS = 300;
  runRanks(4, o, [](const RankContext& ctx) {
    TestComm comm(ctx);
    const int me = ctx.rank, n = ctx.nRanks;
    for (int call = 0; call < 300; ++call) {
      size_t sc[4], sd[4], rc[4], rd[4], sendTotal = 0, recvTotal = 0;
      for (int p = 0; p < n; ++p) {
        sc[p] = skewedCount(me, p, call), sd[p] = sendTotal, sendTotal += sc[p];
        rc[p] = skewedCount(p, me, call), rd[p] = recvTotal, recvTotal += rc[p];
      }
      void *send = nullptr, *recv = nullptr;
      RMACC_ASSERT_OK(rmaccMemAlloc(comm.get(), &send, (sendTotal + 1) * sizeof(uint32_t)));
      RMACC_ASSERT_OK(rmaccMemAlloc(comm.get(), &recv, (recvTotal + 1) * sizeof(uint32_t)));
      auto* s = static_cast<uint32_t*>(send);
      auto* r = static_cast<uint32_t*>(recv);
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < sc[p]; ++i) s[sd[p] + i] = (uint32_t)(me << 24 | p << 16 | i);
      memset(recv, 0xEE, (recvTotal + 1) * sizeof(uint32_t));
      RMACC_ASSERT_OK(rmaccAlltoAllv(send, sc, sd, recv, rc, rd, rmaccUint32, comm.get(), nullptr));
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < rc[p]; ++i)
          ASSERT_EQ(r[rd[p] + i], (uint32_t)(p << 24 | me << 16 | i)) << "call " << call << " from " << p;
      // Freed at once: a mate may still be on its way to its mapping step for this call.
      RMACC_ASSERT_OK(rmaccMemFree(comm.get(), recv));
      RMACC_ASSERT_OK(rmaccMemFree(comm.get(), send));
    }
  });
}

// A rank skips a collective call: the calls may time out, but no AlltoAll may return success
// with wrong data afterwards, every message names where each rank was, and the communicator
// is poisoned (the async error says so).
TEST(Reliability, SkippedRegistrationNeverYieldsWrongData) {
  RunOptions o = options(3);
  runRanks(kRanks, o, [](const RankContext& ctx) {
    TestComm comm(ctx);
    const int me = ctx.rank;
    void* mem = nullptr;
    RMACC_ASSERT_OK(rmaccMemAlloc(comm.get(), &mem, 4096));
    std::string firstError;
    if (me != 1) {
      rmaccWindow_t win = nullptr;
      rmaccResult_t r = rmaccCommWindowRegister(comm.get(), mem, 4096, &win);
      EXPECT_NE(r, rmaccSuccess) << "rank " << me << " registered a window rank 1 never joined";
      if (r != rmaccSuccess) firstError = comm.lastError();
    }
    size_t wrong = 0;
    for (int call = 0; call < 3; ++call) {
      rmaccResult_t r = stackAlltoAll(comm.get(), me, ctx.nRanks, &wrong);
      if (r == rmaccSuccess) EXPECT_EQ(wrong, 0u) << "rank " << me << ": success with wrong data";
      if (r != rmaccSuccess && firstError.empty()) firstError = comm.lastError();
    }
    EXPECT_NE(firstError.find("rmaccCommWindowRegister"), std::string::npos) << firstError;
    EXPECT_NE(firstError.find("rmaccAlltoAll"), std::string::npos) << firstError;
    rmaccResult_t async = rmaccSuccess;
    RMACC_ASSERT_OK(rmaccCommGetAsyncError(comm.get(), &async));
    EXPECT_NE(async, rmaccSuccess);
    EXPECT_NE(rmaccBarrier(comm.get(), nullptr), rmaccSuccess) << "a poisoned communicator";
  });
}

// A rank dies while the others are in a collective: every survivor fails within kFastS of the
// death with rmaccRemoteError, and the async error then reports it.
enum class Phase { kBarrier, kAlltoAllv };

class KilledPeer : public testing::TestWithParam<Phase> {};

TEST_P(KilledPeer, EverySurvivorSeesItAtOnce) {
  const Phase phase = GetParam();
  constexpr int kVictim = 3;
  std::vector<int> status = runRanksStatus(kRanks, options(), [&](const RankContext& ctx) {
    auto* shared = static_cast<Shared*>(ctx.shared);
    TestComm comm(ctx);
    const int n = ctx.nRanks, me = ctx.rank;
    const size_t perPeer = 4 << 20;  // 4 MiB to every peer: the call is still on the wire
    std::vector<char> send(perPeer * n, (char)me), recv(perPeer * n);
    std::vector<size_t> counts(n, perPeer), displs(n);
    for (int p = 0; p < n; ++p) displs[p] = p * perPeer;
    RMACC_ASSERT_OK(rmaccBarrier(comm.get(), nullptr));
    if (me != kVictim) shared->ready.fetch_add(1);
    auto collectiveCall = [&] {
      if (phase == Phase::kBarrier) return rmaccBarrier(comm.get(), nullptr);
      return rmaccAlltoAllv(send.data(), counts.data(), displs.data(), recv.data(), counts.data(),
                            displs.data(), rmaccUint8, comm.get(), nullptr);
    };
    if (me == kVictim) {
      while (shared->ready.load() < n - 1) usleep(1000);  // their barrier returned
      // The victim does not join: had it enqueued its part, a fast machine could finish the
      // whole call before the kill (the campaign measures that mid-flight case).
      usleep(200000);  // the others are waiting in the call by now
      shared->killedAt.store(nowS());
      raise(SIGKILL);
    }
    rmaccResult_t r = collectiveCall();
    const double seen = nowS() - shared->killedAt.load();
    EXPECT_EQ(r, rmaccRemoteError) << comm.lastError();
    EXPECT_LT(seen, kFastS) << "rank " << me << " learned of the death after " << seen << " s";
    rmaccResult_t async = rmaccSuccess;
    EXPECT_EQ(rmaccCommGetAsyncError(comm.get(), &async), rmaccSuccess);
    EXPECT_EQ(async, rmaccRemoteError);
    fprintf(stderr, "rank %d: error %.3f s after the death: %s\n", me, seen, comm.lastError());
    rmaccCommAbort(comm.get());
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  });
  for (int r = 0; r < kRanks; ++r)
    EXPECT_EQ(status[r], r == kVictim ? 128 + SIGKILL : 0) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Phases, KilledPeer, testing::Values(Phase::kBarrier, Phase::kAlltoAllv),
                         [](const testing::TestParamInfo<Phase>& i) {
                           return i.param == Phase::kBarrier ? "Barrier" : "AlltoAllvAcrossNodes";
                         });

// Ranks that disagree on nranks all fail at once, whichever arrives first at the root.
TEST(Reliability, InitWithDisagreeingRankCountsFailsEveryRankAtOnce) {
  runRanks(kRanks, options(), [](const RankContext& ctx) {
    const int nranks = ctx.rank < 2 ? 4 : 3;
    double t0 = nowS();
    rmaccComm_t comm = nullptr;
    rmaccResult_t r = rmaccCommInitRank(&comm, nranks, ctx.id, ctx.rank < 2 ? ctx.rank : ctx.rank - 1);
    double took = nowS() - t0;
    // Rejected by the root (rmaccInvalidUsage), or, arriving after the root gave up, refused
    // by its closed port (rmaccRemoteError): either way at once.
    EXPECT_TRUE(r == rmaccInvalidUsage || r == rmaccRemoteError) << rmaccGetLastError(nullptr);
    EXPECT_LT(took, kFastS) << rmaccGetLastError(nullptr);
    if (r == rmaccSuccess) rmaccCommDestroy(comm);
  });
}

// Blocks that run past an rmaccMemAlloc buffer are refused on every rank, nothing written.
TEST(Reliability, BlockPastAllocatedBufferIsRefused) {
  runRanks(kRanks, options(), [](const RankContext& ctx) {
    TestComm comm(ctx);
    const int n = ctx.nRanks, me = ctx.rank;
    const size_t kBytes = 4096;
    void* send = nullptr;
    void* recv = nullptr;
    void* guard = nullptr;
    RMACC_ASSERT_OK(rmaccMemAlloc(comm.get(), &send, kBytes));
    RMACC_ASSERT_OK(rmaccMemAlloc(comm.get(), &recv, kBytes));
    RMACC_ASSERT_OK(rmaccMemAlloc(comm.get(), &guard, kBytes));
    memset(recv, 0xEE, kBytes);
    // 1024 bytes per peer fills the 4096-byte buffer exactly; rank 0's last block sits 128
    // bytes further, past the end.
    std::vector<size_t> counts(n, 1024), displs(n);
    for (int p = 0; p < n; ++p) displs[p] = p * 1024 + (me == 0 && p == n - 1 ? 128 : 0);
    std::vector<size_t> sdispls(n);
    for (int p = 0; p < n; ++p) sdispls[p] = p * 1024;
    rmaccResult_t r = rmaccAlltoAllv(send, counts.data(), sdispls.data(), recv, counts.data(),
                                     displs.data(), rmaccUint8, comm.get(), nullptr);
    EXPECT_EQ(r, me == 0 ? rmaccInvalidArgument : rmaccInvalidUsage) << comm.lastError();
    if (me == 0)
      EXPECT_NE(std::string(comm.lastError()).find("past the end"), std::string::npos) << comm.lastError();
    for (size_t i = 0; i < kBytes; ++i)
      ASSERT_EQ(static_cast<uint8_t*>(recv)[i], 0xEE) << "byte " << i << " written";
    // A window that runs past its buffer, and a put from past one, are refused too.
    rmaccWindow_t win = nullptr;
    r = rmaccCommWindowRegister(comm.get(), static_cast<char*>(recv) + 128, me == 2 ? kBytes : kBytes - 128, &win);
    EXPECT_EQ(r, me == 2 ? rmaccInvalidArgument : rmaccInvalidUsage) << comm.lastError();
    RMACC_ASSERT_OK(rmaccCommWindowRegister(comm.get(), recv, kBytes, &win));
    EXPECT_EQ(rmaccPutSignal(static_cast<char*>(send) + 1024, kBytes, rmaccUint8, (me + 1) % n,
                             win, 0, 0, 0, 0, comm.get(), nullptr), rmaccInvalidArgument)
        << comm.lastError();
    // Still usable: the same call with good displacements works.
    for (int p = 0; p < n; ++p) displs[p] = p * 1024;
    RMACC_ASSERT_OK(rmaccAlltoAllv(send, counts.data(), sdispls.data(), recv, counts.data(),
                                   displs.data(), rmaccUint8, comm.get(), nullptr));
    RMACC_ASSERT_OK(rmaccCommWindowDeregister(comm.get(), win));
    for (void* p : {send, recv, guard}) RMACC_ASSERT_OK(rmaccMemFree(comm.get(), p));
  });
}

// Blocks that start at or after the end of the rmaccMemAlloc buffer holding sendbuff or
// recvbuff are refused too (the campaign's case: the per-block lookup found no buffer holding
// them and let them through). Rank 1's buffer starts 512 bytes before the end of its 4 KiB
// allocation and holds 4 blocks of 256 bytes: its last two blocks lie wholly past the end.
class PastTheEnd : public ::testing::TestWithParam<bool> {};  // true: recvbuff, false: sendbuff

TEST_P(PastTheEnd, AlltoAllBlocksBeyondTheBufferAreRefused) {
  const bool badRecv = GetParam();
  runRanks(kRanks, options(), [badRecv](const RankContext& ctx) {
    TestComm comm(ctx);
    const int n = ctx.nRanks, me = ctx.rank;
    constexpr size_t kBytes = 4096, kBlock = 256;
    uint8_t* mem = nullptr;
    RMACC_ASSERT_OK(rmaccMemAlloc(comm.get(), reinterpret_cast<void**>(&mem), kBytes));
    memset(mem, 0xEE, kBytes);
    uint8_t* send = mem;
    uint8_t* recv = mem + 2048;
    if (me == 1) (badRecv ? recv : send) = mem + kBytes - 512;
    rmaccResult_t r = rmaccAlltoAll(send, recv, kBlock, rmaccUint8, comm.get(), nullptr);
    EXPECT_EQ(r, me == 1 ? rmaccInvalidArgument : rmaccInvalidUsage) << comm.lastError();
    if (me == 1)
      EXPECT_NE(std::string(comm.lastError()).find("past the end"), std::string::npos) << comm.lastError();
    for (size_t i = 0; i < kBytes; ++i) ASSERT_EQ(mem[i], 0xEE) << "byte " << i << " written";
    RMACC_ASSERT_OK(rmaccMemFree(comm.get(), mem));
  });
}

INSTANTIATE_TEST_SUITE_P(Reliability, PastTheEnd, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Recvbuff" : "Sendbuff"; });

// A bad window handle at deregistration fails every rank at once (it joins the exchange).
TEST(Reliability, BadDeregisterFailsEveryRankAtOnce) {
  runRanks(kRanks, options(), [](const RankContext& ctx) {
    TestComm comm(ctx);
    void* mem = nullptr;
    RMACC_ASSERT_OK(rmaccMemAlloc(comm.get(), &mem, 4096));
    rmaccWindow_t win = nullptr;
    RMACC_ASSERT_OK(rmaccCommWindowRegister(comm.get(), mem, 4096, &win));
    double t0 = nowS();
    rmaccWindow_t bogus = reinterpret_cast<rmaccWindow_t>(&t0);
    rmaccResult_t r = rmaccCommWindowDeregister(comm.get(), ctx.rank == 2 ? bogus : win);
    EXPECT_EQ(r, ctx.rank == 2 ? rmaccInvalidArgument : rmaccInvalidUsage) << comm.lastError();
    EXPECT_LT(nowS() - t0, kFastS);
    RMACC_ASSERT_OK(rmaccCommWindowDeregister(comm.get(), win));
    RMACC_ASSERT_OK(rmaccMemFree(comm.get(), mem));
  });
}

// AlltoAll counts whose buffers cannot exist say so.
TEST(Reliability, OverflowingAlltoAllCountIsNamed) {
  runRanks(kRanks, options(), [](const RankContext& ctx) {
    TestComm comm(ctx);
    uint64_t buf[4] = {};
    for (size_t count : {SIZE_MAX, SIZE_MAX / 2, SIZE_MAX / 8 / 2 + 1}) {
      rmaccResult_t r = rmaccAlltoAll(buf, buf, count, rmaccUint64, comm.get(), nullptr);
      EXPECT_EQ(r, rmaccInvalidArgument);
      std::string text = comm.lastError();
      EXPECT_NE(text.find("overflow"), std::string::npos) << count << ": " << text;
      EXPECT_EQ(text.find("must not be NULL"), std::string::npos) << text;
    }
  });
}

}  // namespace
}  // namespace rmacc::test
