// The path calls captured into a CUDA graph take (coll/captured_calls.h), on the host backend:
// RMACC_STREAM_TRIGGER=always makes every call on a stream a call triggered by its stream, so
// that CI runs it without CUDA graphs (tests/cuda_alltoallv_test.cc captures real graphs on a
// GPU). Real processes, libfabric tcp between emulated nodes.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <vector>

#include "rmacc.h"
#include "support/alltoallv_case.h"
#include "support/comm_fixture.h"
#include "support/multiprocess.h"

namespace rmacc::test {
namespace {

RunOptions triggered(int nodes, int local, std::vector<std::pair<std::string, std::string>> extra = {}) {
  RunOptions o;
  o.nodeOf = scatteredNodes(nodes, local);
  o.timeoutS = 240;
  o.env = {{"FI_PROVIDER", "tcp"},        {"FI_TCP_IFACE", "lo"},      {"RMACC_NET_PROVIDER", "tcp"},
           {"RMACC_TIMEOUT_S", "60"},     {"RMACC_RELAY_BYTES", "64K"}, {"RMACC_RELAY_SLOTS", "2"},
           {"RMACC_STREAM_TRIGGER", "always"}};
  for (auto& e : extra) o.env.push_back(e);
  return o;
}

// One rank's buffers and layout for a call with `counts`.
struct CallData {
  Layout l;
  std::vector<uint8_t> send, recv;
  CallData(const std::vector<size_t>& counts, int n, int me, uint64_t seed)
      : l(makeLayout(counts, n, me, seed)), send(l.sendElems * 4 + 4), recv(l.recvElems * 4 + 4, kPoison) {
    fillSend(send.data(), l, 4, me, seed);
  }
  rmaccResult_t call(TestComm& comm) {
    return rmaccAlltoAllv(send.data(), l.sendcounts.data(), l.sdispls.data(), recv.data(),
                          l.recvcounts.data(), l.rdispls.data(), rmaccFloat32, comm.get(), comm.stream());
  }
  size_t wrong(int me, uint64_t seed, std::string* first) const {
    return checkRecv(recv.data(), l, 4, me, seed, first);
  }
};

class Triggered : public testing::TestWithParam<std::pair<int, int>> {};

// Five calls with different counts enqueued back to back before one synchronisation: each run
// takes its own arguments, in stream order, and every byte lands where it should.
TEST_P(Triggered, CallsQueuedOnOneStreamRunInOrderByteExact) {
  auto [nodes, local] = GetParam();
  const int n = nodes * local;
  runRanks(n, triggered(nodes, local), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    std::vector<std::unique_ptr<CallData>> calls;
    for (int c = 0; c < 5; ++c) {
      auto counts = makeCounts((Pattern)(c % 5), n, 600 + 100 * c, 70 + c);
      calls.push_back(std::make_unique<CallData>(counts, n, ctx.rank, 70 + c));
      RMACC_ASSERT_OK(calls.back()->call(comm));
    }
    RMACC_ASSERT_OK(comm.sync());
    for (int c = 0; c < 5; ++c) {
      std::string first;
      EXPECT_EQ(calls[c]->wrong(ctx.rank, 70 + c, &first), 0u) << "call " << c << ": " << first;
    }
  });
}

// The call returns before its stream reaches it, which happens only once a peer signals 1 s
// later; the call then runs with the data in place at that time.
TEST_P(Triggered, CallReturnsBeforeItsStreamGetsThere) {
  auto [nodes, local] = GetParam();
  const int n = nodes * local;
  runRanks(n, triggered(nodes, local), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    auto counts = makeCounts(Pattern::kRandom, n, 900, 5);
    CallData d(counts, n, ctx.rank, 5);
    std::vector<uint8_t> filled = d.send;
    std::fill(d.send.begin(), d.send.end(), 0);  // the right bytes come after the call
    rmaccWaitSignalDesc_t w{1, (ctx.rank + 1) % n, 0, 0};
    RMACC_ASSERT_OK(rmaccWaitSignal(1, &w, comm.get(), comm.stream()));
    auto t0 = std::chrono::steady_clock::now();
    RMACC_ASSERT_OK(d.call(comm));
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.5);
    d.send = filled;
    usleep(1000 * 1000);
    RMACC_ASSERT_OK(rmaccBarrier(comm.get(), nullptr));
    RMACC_ASSERT_OK(rmaccSignal((ctx.rank + n - 1) % n, 0, 0, 0, comm.get(), nullptr));
    RMACC_ASSERT_OK(comm.sync());
    std::string first;
    EXPECT_EQ(d.wrong(ctx.rank, 5, &first), 0u) << first;
  });
}

// Counts that disagree fail every rank's run and write nothing; a rank whose arguments are bad
// gets rmaccInvalidArgument at the call and the others' runs fail; the next calls work.
TEST_P(Triggered, MismatchAndBadArgumentsFailEveryRank) {
  auto [nodes, local] = GetParam();
  const int n = nodes * local;
  runRanks(n, triggered(nodes, local), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    auto counts = makeCounts(Pattern::kUniform, n, 50, 3);
    CallData bad(counts, n, ctx.rank, 3);
    if (ctx.rank == n - 1) bad.l.recvcounts[0] -= 1;
    RMACC_ASSERT_OK(bad.call(comm));
    EXPECT_EQ(comm.sync(), rmaccInvalidUsage);
    EXPECT_NE(std::string(comm.lastError()).find("mismatch"), std::string::npos) << comm.lastError();
    for (uint8_t byte : bad.recv) ASSERT_EQ(byte, kPoison) << "a failed call wrote";

    CallData refused(counts, n, ctx.rank, 3);
    rmaccResult_t r = rmaccAlltoAllv(ctx.rank == 0 ? nullptr : refused.send.data(), refused.l.sendcounts.data(),
                                     refused.l.sdispls.data(), refused.recv.data(), refused.l.recvcounts.data(),
                                     refused.l.rdispls.data(), rmaccFloat32, comm.get(), comm.stream());
    EXPECT_EQ(r, ctx.rank == 0 ? rmaccInvalidArgument : rmaccSuccess) << comm.lastError();
    r = comm.sync();
    if (ctx.rank != 0) EXPECT_EQ(r, rmaccInvalidUsage) << comm.lastError();
    for (uint8_t byte : refused.recv) ASSERT_EQ(byte, kPoison) << "a refused call wrote";

    for (int c = 0; c < 2; ++c) {
      CallData good(makeCounts(Pattern::kZipf, n, 400, 9 + c), n, ctx.rank, 9 + c);
      RMACC_ASSERT_OK(good.call(comm));
      RMACC_ASSERT_OK(comm.sync());
      std::string first;
      EXPECT_EQ(good.wrong(ctx.rank, 9 + c, &first), 0u) << first;
    }
  });
}

// AlltoAll goes the same way.
TEST_P(Triggered, AlltoAll) {
  auto [nodes, local] = GetParam();
  const int n = nodes * local;
  runRanks(n, triggered(nodes, local), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    const size_t count = 777;
    std::vector<int32_t> send(n * count), recv(n * count, -1);
    for (int p = 0; p < n; ++p)
      for (size_t k = 0; k < count; ++k) send[p * count + k] = ctx.rank * 1000000 + p * 10000 + (int)k;
    for (int c = 0; c < 3; ++c)
      RMACC_ASSERT_OK(rmaccAlltoAll(send.data(), recv.data(), count, rmaccInt32, comm.get(), comm.stream()));
    RMACC_ASSERT_OK(comm.sync());
    for (int p = 0; p < n; ++p)
      for (size_t k = 0; k < count; ++k)
        ASSERT_EQ(recv[p * count + k], p * 1000000 + ctx.rank * 10000 + (int)k) << "from " << p;
  });
}

// Device counts: 60 dynamic calls queued back to back on one stream, each with its own count
// arrays and buffers (read when the stream reaches the call), then one synchronisation: the
// queue of runs behind each other, as a CUDA graph's replays launched back to back.
TEST_P(Triggered, DynamicCallsQueuedBackToBack) {
  auto [nodes, local] = GetParam();
  const int n = nodes * local;
  constexpr int kCalls = 60;
  runRanks(n, triggered(nodes, local), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    const int r = ctx.rank;
    auto count = [&](int i, int j, int c) { return (size_t)((i * 7 + j * 3 + c * 5) % 9) * 20; };
    auto value = [&](int i, int j, size_t k, int c) { return i * 1000003 + j * 10007 + (int)k * 7 + c * 131; };
    const size_t cap = 160 * (size_t)n;
    struct Call {
      std::vector<size_t> sc, sd, rc, rd;
      std::vector<int32_t> send, recv;
    };
    std::vector<Call> calls(kCalls);
    for (int c = 0; c < kCalls; ++c) {
      Call& k = calls[c];
      k.sc.resize(n), k.sd.resize(n), k.rc.assign(n, 99), k.rd.assign(n, 99);
      k.send.assign(cap, 0), k.recv.assign(cap, -1);
      size_t at = 0;
      for (int j = 0; j < n; ++j) {
        k.sc[j] = count(r, j, c), k.sd[j] = at;
        for (size_t e = 0; e < k.sc[j]; ++e) k.send[at + e] = value(r, j, e, c);
        at += k.sc[j];
      }
      RMACC_ASSERT_OK(rmaccAlltoAllvDynamic(k.send.data(), k.sc.data(), k.sd.data(), k.recv.data(), cap,
                                            k.rc.data(), k.rd.data(), rmaccInt32, comm.get(), comm.stream()));
    }
    RMACC_ASSERT_OK(comm.sync());
    for (int c = 0; c < kCalls; ++c) {
      const Call& k = calls[c];
      size_t at = 0;
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(k.rc[i], count(i, r, c)) << "call " << c << " from " << i;
        ASSERT_EQ(k.rd[i], at) << "call " << c << " from " << i;
        for (size_t e = 0; e < k.rc[i]; ++e)
          ASSERT_EQ(k.recv[at + e], value(i, r, e, c)) << "call " << c << " from " << i << " element " << e;
        at += k.rc[i];
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, Triggered,
                         testing::Values(std::make_pair(1, 4), std::make_pair(2, 2), std::make_pair(3, 2)),
                         [](const testing::TestParamInfo<std::pair<int, int>>& i) {
                           return std::to_string(i.param.first) + "x" + std::to_string(i.param.second);
                         });

// A rank dies between calls: the survivors' triggered calls (two queued behind each other)
// become errors within the timeout and their streams go on.
TEST(TriggeredFaults, DeadPeerReleasesQueuedCalls) {
  const int n = 4;
  RunOptions o = triggered(2, 2, {{"RMACC_TIMEOUT_S", "5"}});
  o.sharedBytes = sizeof(std::atomic<int>);
  std::vector<int> status = runRanksStatus(n, o, [&](const RankContext& ctx) {
    auto* firstDone = static_cast<std::atomic<int>*>(ctx.shared);
    TestComm comm(ctx);
    auto counts = makeCounts(Pattern::kRandom, n, 1000, 8);
    CallData first(counts, n, ctx.rank, 8);
    RMACC_ASSERT_OK(first.call(comm));
    RMACC_ASSERT_OK(comm.sync());
    if (ctx.rank == n - 1) {
      while (firstDone->load() < n - 1) usleep(1000);
      raise(SIGKILL);
    }
    firstDone->fetch_add(1);
    auto t0 = std::chrono::steady_clock::now();
    CallData second(counts, n, ctx.rank, 8), third(counts, n, ctx.rank, 8);
    rmaccResult_t r = second.call(comm);
    if (r == rmaccSuccess) r = third.call(comm);
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

}  // namespace
}  // namespace rmacc::test
