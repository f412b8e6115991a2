// Captured calls whose work is all in the graph (coll/in_graph_calls.h), on the host backend:
// RMACC_GRAPH_CALLS=always makes every fixed-count call on a stream of a one-node communicator
// an in-graph call, and an identical later call replays the same site (the same flags, reset at
// every replay), as a graph's replays do. tests/cuda_alltoallv_test.cc captures real graphs.
// Real processes; the buffers are rmaccMemAlloc memory (what the node's ranks can map).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "rmacc.h"
#include "support/alltoallv_case.h"
#include "support/comm_fixture.h"
#include "support/multiprocess.h"

namespace rmacc::test {
namespace {

RunOptions inGraph(std::vector<std::pair<std::string, std::string>> extra = {}) {
  RunOptions o;
  o.timeoutS = 240;
  o.env = {{"RMACC_TIMEOUT_S", "60"}, {"RMACC_GRAPH_CALLS", "always"}, {"RMACC_DEBUG", "WARN"}};
  for (auto& e : extra) o.env.push_back(e);
  return o;
}

// One call's buffers, in memory the node's ranks map.
struct Call {
  TestComm& comm;
  Layout l;
  uint8_t* send = nullptr;
  uint8_t* recv = nullptr;
  size_t sendBytes, recvBytes;
  Call(TestComm& c, const std::vector<size_t>& counts, int n, int me, uint64_t seed)
      : comm(c), l(makeLayout(counts, n, me, seed)), sendBytes(l.sendElems * 4 + 4), recvBytes(l.recvElems * 4 + 4) {
    void* p = nullptr;
    EXPECT_EQ(rmaccMemAlloc(comm.get(), &p, sendBytes), rmaccSuccess);
    send = static_cast<uint8_t*>(p);
    EXPECT_EQ(rmaccMemAlloc(comm.get(), &p, recvBytes), rmaccSuccess);
    recv = static_cast<uint8_t*>(p);
  }
  ~Call() {
    rmaccMemFree(comm.get(), send);
    rmaccMemFree(comm.get(), recv);
  }
  // New bytes to send and poison to receive into (the stream must be idle).
  void fill(int me, uint64_t salt) {
    fillSend(send, l, 4, me, salt);
    memset(recv, kPoison, recvBytes);
  }
  rmaccResult_t run() {
    return rmaccAlltoAllv(send, l.sendcounts.data(), l.sdispls.data(), recv, l.recvcounts.data(),
                          l.rdispls.data(), rmaccFloat32, comm.get(), comm.stream());
  }
  size_t wrong(int me, uint64_t salt, std::string* first) const { return checkRecv(recv, l, 4, me, salt, first); }
  // One call with new data, synchronised and checked: "" when every byte landed, else what
  // went wrong.
  std::string roundTrip(int me, uint64_t salt) {
    fill(me, salt);
    if (rmaccResult_t r = run()) return std::string("call: ") + rmaccGetErrorString(r) + ": " + comm.lastError();
    if (rmaccResult_t r = comm.sync()) return std::string("sync: ") + rmaccGetErrorString(r) + ": " + comm.lastError();
    std::string first;
    return wrong(me, salt, &first) ? first : "";
  }
};

class InGraph : public testing::TestWithParam<int> {};

// One call made 40 times with new data each time (one site, its flags reset at every replay),
// then 50 times back to back before one synchronisation: byte-exact throughout.
TEST_P(InGraph, RepeatedCallReplaysOneSiteByteExact) {
  const int n = GetParam();
  runRanks(n, inGraph(), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    Call c(comm, makeCounts(Pattern::kRandom, n, 700, 4), n, ctx.rank, 4);
    for (int it = 0; it < 40; ++it) ASSERT_EQ(c.roundTrip(ctx.rank, 100 + it), "") << "replay " << it;
    c.fill(ctx.rank, 7);
    for (int it = 0; it < 50; ++it) RMACC_ASSERT_OK(c.run());
    RMACC_ASSERT_OK(comm.sync());
    std::string first;
    EXPECT_EQ(c.wrong(ctx.rank, 7, &first), 0u) << first;
  });
}

// Twelve different calls (more than the sites kept), twice round, with every pattern of counts
// (sparse ones with zero blocks, skewed ones): each lands byte-exact, evicted sites rebuilt.
TEST_P(InGraph, ManyCallsEvictAndRebuildSites) {
  const int n = GetParam();
  runRanks(n, inGraph(), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    std::vector<std::unique_ptr<Call>> calls;
    for (int k = 0; k < 12; ++k)
      calls.push_back(std::make_unique<Call>(comm, makeCounts((Pattern)(k % 5), n, 300 + 50 * k, 20 + k), n,
                                             ctx.rank, 20 + k));
    for (int round = 0; round < 2; ++round) {
      for (int k = 0; k < 12; ++k) {
        ASSERT_EQ(calls[k]->roundTrip(ctx.rank, 1000 * round + k), "") << "round " << round << " call " << k;
      }
    }
  });
}

// Counts that disagree fail every rank's call at once with rmaccInvalidUsage and write nothing;
// a rank's bad argument fails its call with rmaccInvalidArgument and the others' with
// rmaccInvalidUsage; the next calls work.
TEST_P(InGraph, MismatchAndBadArgumentsFailEveryRank) {
  const int n = GetParam();
  runRanks(n, inGraph(), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    Call bad(comm, makeCounts(Pattern::kUniform, n, 50, 3), n, ctx.rank, 3);
    bad.fill(ctx.rank, 3);
    if (ctx.rank == n - 1) bad.l.recvcounts[0] -= 1;
    EXPECT_EQ(bad.run(), rmaccInvalidUsage);
    EXPECT_NE(std::string(comm.lastError()).find("counts disagree"), std::string::npos) << comm.lastError();
    RMACC_ASSERT_OK(comm.sync());
    for (size_t i = 0; i < bad.recvBytes; ++i) ASSERT_EQ(bad.recv[i], kPoison) << "a failed call wrote";

    Call refused(comm, makeCounts(Pattern::kUniform, n, 50, 3), n, ctx.rank, 3);
    refused.fill(ctx.rank, 3);
    rmaccResult_t r = rmaccAlltoAllv(ctx.rank == 0 ? nullptr : refused.send, refused.l.sendcounts.data(),
                                     refused.l.sdispls.data(), refused.recv, refused.l.recvcounts.data(),
                                     refused.l.rdispls.data(), rmaccFloat32, comm.get(), comm.stream());
    EXPECT_EQ(r, ctx.rank == 0 ? rmaccInvalidArgument : rmaccInvalidUsage) << comm.lastError();
    RMACC_ASSERT_OK(comm.sync());
    for (size_t i = 0; i < refused.recvBytes; ++i) ASSERT_EQ(refused.recv[i], kPoison) << "a refused call wrote";

    for (int k = 0; k < 2; ++k) {
      Call good(comm, makeCounts(Pattern::kZipf, n, 400, 9 + k), n, ctx.rank, 9 + k);
      EXPECT_EQ(good.roundTrip(ctx.rank, 9 + k), "") << "good call " << k;
    }
  });
}

// Buffers the node's ranks cannot map (malloc on the host backend): every rank's call takes the
// triggered path instead, byte-exact; rmaccAlltoAll in mappable memory takes the in-graph path.
TEST_P(InGraph, UnmappableBuffersTakeTheTriggeredPathAndAlltoAllWorks) {
  const int n = GetParam();
  runRanks(n, inGraph(), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    const Layout l = makeLayout(makeCounts(Pattern::kHot, n, 500, 5), n, ctx.rank, 5);
    std::vector<uint8_t> send(l.sendElems * 4 + 4), recv(l.recvElems * 4 + 4, kPoison);
    fillSend(send.data(), l, 4, ctx.rank, 5);
    RMACC_ASSERT_OK(rmaccAlltoAllv(send.data(), l.sendcounts.data(), l.sdispls.data(), recv.data(),
                                   l.recvcounts.data(), l.rdispls.data(), rmaccFloat32, comm.get(), comm.stream()));
    RMACC_ASSERT_OK(comm.sync());
    std::string first;
    EXPECT_EQ(checkRecv(recv.data(), l, 4, ctx.rank, 5, &first), 0u) << first;

    const size_t count = 777;
    void *s = nullptr, *d = nullptr;
    RMACC_ASSERT_OK(rmaccMemAlloc(comm.get(), &s, n * count * 4));
    RMACC_ASSERT_OK(rmaccMemAlloc(comm.get(), &d, n * count * 4));
    auto* in = static_cast<int32_t*>(s);
    auto* out = static_cast<int32_t*>(d);
    for (int p = 0; p < n; ++p)
      for (size_t k = 0; k < count; ++k) in[p * count + k] = ctx.rank * 1000000 + p * 10000 + (int)k;
    for (int it = 0; it < 3; ++it) {
      for (size_t k = 0; k < n * count; ++k) out[k] = -1;
      RMACC_ASSERT_OK(rmaccAlltoAll(in, out, count, rmaccInt32, comm.get(), comm.stream()));
      RMACC_ASSERT_OK(comm.sync());
      for (int p = 0; p < n; ++p)
        for (size_t k = 0; k < count; ++k)
          ASSERT_EQ(out[p * count + k], p * 1000000 + ctx.rank * 10000 + (int)k) << "from " << p;
    }
    rmaccMemFree(comm.get(), s);
    rmaccMemFree(comm.get(), d);
  });
}

// The block a rank sends itself through pinned slots, as on a GPU (RMACC_LOCAL_COPY=engines):
// several chunks through two slots, replayed.
TEST_P(InGraph, SelfBlockThroughPinnedSlots) {
  const int n = GetParam();
  runRanks(n, inGraph({{"RMACC_LOCAL_COPY", "engines"}}), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    Call c(comm, makeCounts(Pattern::kUniform, n, (3u << 20) / 4 + 123, 6), n, ctx.rank, 6);
    for (int it = 0; it < 4; ++it) ASSERT_EQ(c.roundTrip(ctx.rank, 60 + it), "") << "replay " << it;
  });
}

// A rank whose stream never reaches its replay (held by a wait for a signal nobody sends): the
// others' replays fail within the timeout, and every rank's communicator reports the error
// instead of hanging.
TEST_P(InGraph, ARankThatNeverGetsThereFailsTheOthersWithinTheTimeout) {
  const int n = GetParam();
  runRanks(n, inGraph({{"RMACC_TIMEOUT_S", "3"}}), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    Call c(comm, makeCounts(Pattern::kUniform, n, 100, 8), n, ctx.rank, 8);
    c.fill(ctx.rank, 8);
    RMACC_ASSERT_OK(c.run());
    RMACC_ASSERT_OK(comm.sync());
    if (ctx.rank == n - 1) {
      rmaccWaitSignalDesc_t never{1, 0, 0, 0};
      RMACC_ASSERT_OK(rmaccWaitSignal(1, &never, comm.get(), comm.stream()));
    }
    const auto t0 = std::chrono::steady_clock::now();
    RMACC_ASSERT_OK(c.run());
    EXPECT_NE(comm.sync(), rmaccSuccess);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(s, 30.0) << "the failure took " << s << " s";
    rmaccResult_t async = rmaccSuccess;
    rmaccCommGetAsyncError(comm.get(), &async);
    EXPECT_NE(async, rmaccSuccess);
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, InGraph, testing::Values(2, 3, 4),
                         [](const testing::TestParamInfo<int>& i) { return "1x" + std::to_string(i.param); });

}  // namespace
}  // namespace rmacc::test
