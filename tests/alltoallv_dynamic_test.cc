// rmaccAlltoAllvDynamic on the host backend (DESIGN.md §4.1): counts read when the stream
// reaches the call, blocks packed in source-rank order, recvcounts/rdispls written back, and
// blocks that do not fit failing every rank with nothing written past the capacity.
#include <gtest/gtest.h>

#include <cstring>
#include <tuple>
#include <vector>

#include "rmacc.h"
#include "support/alltoallv_case.h"
#include "support/comm_fixture.h"
#include "support/multiprocess.h"

namespace rmacc::test {
namespace {

// triggered: every call is triggered by its stream, as calls captured into a CUDA graph are
// (coll/captured_calls.h): the counts then go into the call's own site.
RunOptions optionsFor(int nodes, int local, bool triggered = false) {
  RunOptions o = tcpRanks(scatteredNodes(nodes, local),
                          {{"RMACC_RELAY_BYTES", "64K"}, {"RMACC_RELAY_SLOTS", "2"}});
  if (triggered) o.env.push_back({"RMACC_STREAM_TRIGGER", "always"});
  return o;
}

int32_t value(int from, int to, size_t k, int call) { return from * 1000003 + to * 10007 + (int)k * 7 + call; }

// One call with counts[i * n + j] elements from i to j; `capacity` elements of receive room.
// Returns the call's result after the stream was synchronised.
rmaccResult_t dynamicCall(TestComm& comm, int n, int me, const std::vector<size_t>& counts,
                          int call, size_t capacity, bool gateOnPeer) {
  std::vector<size_t> sendcounts(n, 0), sdispls(n), recvcounts(n, 99), rdispls(n, 99);
  size_t sendElems = 0;
  for (int j = 0; j < n; ++j) {
    sdispls[j] = sendElems + 3;  // gaps between blocks
    sendElems += counts[me * n + j] + 3;
  }
  std::vector<int32_t> send(sendElems + 1), recv(capacity + 16, -7);
  for (int j = 0; j < n; ++j)
    for (size_t k = 0; k < counts[me * n + j]; ++k) send[sdispls[j] + k] = value(me, j, k, call);
  if (gateOnPeer) {
    // The stream waits for a signal from the next rank; the call is made with zero counts and
    // the real ones are written afterwards (before that signal): the call must use what is
    // there when the stream reaches it.
    rmaccWaitSignalDesc_t w{1, (me + 1) % n, 0, 0};
    EXPECT_EQ(rmaccWaitSignal(1, &w, comm.get(), comm.stream()), rmaccSuccess) << comm.lastError();
  } else {
    for (int j = 0; j < n; ++j) sendcounts[j] = counts[me * n + j];
  }
  rmaccResult_t r = rmaccAlltoAllvDynamic(send.data(), sendcounts.data(), sdispls.data(), recv.data(),
                                          capacity, recvcounts.data(), rdispls.data(), rmaccInt32,
                                          comm.get(), comm.stream());
  EXPECT_EQ(r, rmaccSuccess) << comm.lastError();
  if (gateOnPeer) {
    // Every rank writes its counts, then (a barrier later: all have written theirs) releases
    // the stream of the rank before it.
    for (int j = 0; j < n; ++j) sendcounts[j] = counts[me * n + j];
    EXPECT_EQ(rmaccBarrier(comm.get(), nullptr), rmaccSuccess) << comm.lastError();
    EXPECT_EQ(rmaccSignal((me + n - 1) % n, 0, 0, 0, comm.get(), nullptr), rmaccSuccess) << comm.lastError();
  }
  r = comm.sync();
  // recvcounts says what arrived (or would have): always written.
  size_t total = 0;
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(recvcounts[i], counts[i * n + me]) << "from rank " << i;
    EXPECT_EQ(rdispls[i], total) << "from rank " << i;
    total += counts[i * n + me];
  }
  if (r == rmaccSuccess) {
    for (int i = 0; i < n; ++i)
      for (size_t k = 0; k < counts[i * n + me]; ++k)
        if (recv[rdispls[i] + k] != value(i, me, k, call)) {
          ADD_FAILURE() << "call " << call << ": element " << k << " from rank " << i;
          return r;
        }
    for (size_t k = total; k < recv.size(); ++k) EXPECT_EQ(recv[k], -7) << "written past the blocks";
  } else {
    for (size_t k = 0; k < recv.size(); ++k)
      if (recv[k] != -7) {
        ADD_FAILURE() << "a failed call wrote element " << k;
        break;
      }
  }
  return r;
}

using Shape = std::tuple<int, int, bool /*triggered*/>;
class Dynamic : public testing::TestWithParam<Shape> {};

TEST_P(Dynamic, CountsFromTheStreamByteExact) {
  auto [nodes, local, triggered] = GetParam();
  const int n = nodes * local;
  runRanks(n, optionsFor(nodes, local, triggered), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    int call = 0;
    for (Pattern p : {Pattern::kRandom, Pattern::kZipf, Pattern::kHot, Pattern::kSparse}) {
      auto counts = makeCounts(p, n, 700, 40 + call);
      EXPECT_EQ(dynamicCall(comm, n, ctx.rank, counts, call, 700 * n * 4, call % 2), rmaccSuccess);
      ++call;
    }
    std::vector<size_t> zeros(n * n, 0);
    EXPECT_EQ(dynamicCall(comm, n, ctx.rank, zeros, call++, 8, false), rmaccSuccess);
  });
}

// One rank's blocks do not fit: every rank fails with rmaccInvalidUsage, nothing is written,
// recvcounts says what would have arrived, and the next call works.
TEST_P(Dynamic, OverflowFailsEveryRankAndWritesNothing) {
  auto [nodes, local, triggered] = GetParam();
  const int n = nodes * local;
  runRanks(n, optionsFor(nodes, local, triggered), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    std::vector<size_t> counts(n * n, 50);
    size_t capacity = ctx.rank == 1 ? 50 * n - 1 : 50 * n;  // rank 1 is one element short
    EXPECT_EQ(dynamicCall(comm, n, ctx.rank, counts, 0, capacity, false), rmaccInvalidUsage)
        << comm.lastError();
    EXPECT_EQ(dynamicCall(comm, n, ctx.rank, counts, 1, 50 * n, false), rmaccSuccess);
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, Dynamic,
                         testing::Values(Shape{1, 4, false}, Shape{2, 2, false}, Shape{1, 4, true},
                                         Shape{2, 2, true}),
                         [](const testing::TestParamInfo<Shape>& i) {
                           return std::to_string(std::get<0>(i.param)) + "x" +
                                  std::to_string(std::get<1>(i.param)) +
                                  (std::get<2>(i.param) ? "_triggered" : "");
                         });

TEST(DynamicArgs, BadArgumentsAreRefusedAtTheCall) {
  runRanks(2, optionsFor(1, 2), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    size_t c[2] = {1, 1}, d[2] = {0, 1}, rc[2], rd[2];
    int32_t buf[4];
    EXPECT_EQ(rmaccAlltoAllvDynamic(buf, nullptr, d, buf, 4, rc, rd, rmaccInt32, comm.get(), comm.stream()),
              rmaccInvalidArgument);
    EXPECT_NE(std::string(comm.lastError()).find("must not be NULL"), std::string::npos) << comm.lastError();
    EXPECT_EQ(rmaccAlltoAllvDynamic(buf, c, d, nullptr, 4, rc, rd, rmaccInt32, comm.get(), comm.stream()),
              rmaccInvalidArgument);
    EXPECT_EQ(rmaccAlltoAllvDynamic(buf, c, d, buf, SIZE_MAX, rc, rd, rmaccInt32, comm.get(), comm.stream()),
              rmaccInvalidArgument);
    EXPECT_NE(std::string(comm.lastError()).find("recvcapacity"), std::string::npos) << comm.lastError();
    // Still usable.
    std::vector<size_t> counts(4, 1);
    EXPECT_EQ(dynamicCall(comm, 2, ctx.rank, counts, 0, 2, false), rmaccSuccess);
  });
}

}  // namespace
}  // namespace rmacc::test
