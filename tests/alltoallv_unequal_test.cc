// AlltoAllV and rmaccBarrier on emulated nodes of different sizes (issue 18): the data path
// follows Topology::railPeer (local rank i reaches a node of L ranks through its local rank
// i mod L), so a relay may serve several writers of a larger node and ranks of a larger node
// may have no writer on a smaller one. Real processes, libfabric tcp on loopback, node maps
// scrambled (a node's ranks are not contiguous).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <tuple>
#include <vector>

#include "rmacc.h"
#include "support/alltoallv_call.h"
#include "support/alltoallv_case.h"
#include "support/comm_fixture.h"
#include "support/multiprocess.h"

namespace rmacc::test {
namespace {

// A node map: nodeOf[r] for each rank.
struct Shape {
  const char* name;
  std::vector<int> nodeOf;
};

// 2 + 3, 1 + 3 + 2, 3 + 1 and 5 + 2 ranks (three writers to one relay), in an order that is
// not by node.
const std::vector<Shape>& shapes() {
  static const std::vector<Shape> s = {
      {"2p3", {1, 0, 1, 0, 1}},
      {"1p3p2", {1, 2, 0, 1, 2, 1}},
      {"3p1", {0, 0, 1, 0}},
      {"5p2", {0, 1, 0, 0, 1, 0, 0}},
  };
  return s;
}

RunOptions optionsFor(const Shape& shape, std::vector<std::pair<std::string, std::string>> extra = {}) {
  return tcpRanks(shape.nodeOf, std::move(extra));
}

using Case = std::tuple<int /*shape*/, Pattern, bool /*registered*/>;

class UnequalNodes : public testing::TestWithParam<Case> {};

// Byte-exact over consecutive calls with small relay slots (multi-chunk rounds, credits, a
// relay draining several writers in turn). kSparse has zero blocks, kHot and kZipf skew.
TEST_P(UnequalNodes, ByteExact) {
  auto [si, pattern, registered] = GetParam();
  const Shape& shape = shapes()[si];
  const int n = (int)shape.nodeOf.size();
  runRanks(n, optionsFor(shape, {{"RMACC_RELAY_BYTES", "64K"}, {"RMACC_RELAY_SLOTS", "2"}}),
           [&](const RankContext& ctx) {
             TestComm comm(ctx);
             int local = -1, size = -1, node = -1, nodes = -1;
             ASSERT_EQ(rmaccCommLocalInfo(comm.get(), &local, &size, &node, &nodes), rmaccSuccess);
             int expect = 0;
             for (int nd : shape.nodeOf) expect += nd == shape.nodeOf[ctx.rank];
             EXPECT_EQ(size, expect) << "this rank's node size";
             for (int call = 0; call < 4; ++call) {
               const uint64_t seed = 100 * (int)pattern + call;
               oneCall(comm, makeCounts(pattern, n, 2500 + 900 * call, seed), rmaccFloat32, registered, seed,
                       comm.stream());
             }
           });
}

std::string caseName(const testing::TestParamInfo<Case>& info) {
  auto [s, p, reg] = info.param;
  return std::string(shapes()[s].name) + "_" + patternName(p) + (reg ? "_memalloc" : "_malloc");
}

INSTANTIATE_TEST_SUITE_P(Shapes, UnequalNodes,
                         testing::Combine(testing::Values(0, 1, 2, 3),
                                          testing::Values(Pattern::kRandom, Pattern::kSparse,
                                                          Pattern::kHot, Pattern::kZipf),
                                          testing::Bool()),
                         caseName);

// A mismatch between any two ranks fails the call on every rank with rmaccInvalidUsage, names
// the lowest pair everywhere and writes nothing; the next call works. Pairs: node-mates,
// writer to its relay (a direct put), through a relay that serves two writers, to a rank of the
// larger node that no rank of the smaller one reaches directly, and two at once.
TEST(UnequalNodesErrors, MismatchAnywhereFailsEverywhere) {
  const Shape& shape = shapes()[1];  // 1 + 3 + 2: node 0 {2}, node 1 {0, 3, 5}, node 2 {1, 4}
  const int n = 6;
  struct Pair {
    int src, dst;
  };
  const std::vector<std::vector<Pair>> cases = {
      {{0, 3}}, {{2, 0}}, {{1, 3}}, {{2, 5}}, {{4, 5}}, {{5, 4}, {3, 2}}};
  runRanks(n, optionsFor(shape), [&](const RankContext& ctx) {
    TestComm comm(ctx);
    const int me = ctx.rank;
    auto counts = makeCounts(Pattern::kRandom, n, 40, 9);
    for (size_t i = 0; i < counts.size(); ++i) counts[i] += 1;  // no zero block to shrink
    for (const auto& pairs : cases) {
      Layout l = makeLayout(counts, n, me, 9);
      for (const Pair& p : pairs)
        if (me == p.dst) l.recvcounts[p.src] -= 1;
      std::vector<uint8_t> send(l.sendElems * 4 + 4), recv(l.recvElems * 4 + 4, kPoison);
      fillSend(send.data(), l, 4, me, 9);
      EXPECT_EQ(rmaccAlltoAllv(send.data(), l.sendcounts.data(), l.sdispls.data(), recv.data(),
                               l.recvcounts.data(), l.rdispls.data(), rmaccFloat32, comm.get(),
                               comm.stream()), rmaccSuccess);
      EXPECT_EQ(comm.sync(), rmaccInvalidUsage) << comm.lastError();
      const Pair& low = pairs.size() > 1 && pairs[1].src < pairs[0].src ? pairs[1] : pairs[0];
      const std::string want = "rank " + std::to_string(low.src) + " sends " +
                               std::to_string(counts[low.src * n + low.dst]) +
                               " elements to rank " + std::to_string(low.dst);
      EXPECT_NE(std::string(comm.lastError()).find(want), std::string::npos)
          << comm.lastError() << " (want: " << want << ")";
      for (uint8_t byte : recv) ASSERT_EQ(byte, kPoison) << "a receive buffer was touched";
    }
    // One rank's bad argument: it gets rmaccInvalidArgument, every other rank rmaccInvalidUsage.
    Layout l = makeLayout(counts, n, me, 9);
    std::vector<uint8_t> send(l.sendElems * 4 + 4), recv(l.recvElems * 4 + 4, kPoison);
    rmaccResult_t r = rmaccAlltoAllv(me == 4 ? nullptr : send.data(), l.sendcounts.data(),
                                     l.sdispls.data(), recv.data(), l.recvcounts.data(),
                                     l.rdispls.data(), rmaccFloat32, comm.get(), nullptr);
    EXPECT_EQ(r, me == 4 ? rmaccInvalidArgument : rmaccInvalidUsage) << comm.lastError();
    oneCall(comm, counts, rmaccFloat32, false, 9, comm.stream());
  });
}

// rmaccBarrier: no rank leaves before every rank arrived. Ranks arrive in a staggered order
// (the last on the smallest node, then on a rank of a larger node that no rank of the smaller
// node reaches directly), each marking its arrival in shared memory first; after the barrier
// every mark must be there. Several rounds, on every shape.
TEST(UnequalNodesBarrier, NoRankLeavesEarly) {
  for (const Shape& shape : shapes()) {
    const int n = (int)shape.nodeOf.size();
    constexpr int kRounds = 4;
    RunOptions o = optionsFor(shape);
    o.sharedBytes = sizeof(std::atomic<int>) * kRounds * 8;  // up to 8 ranks
    runRanks(n, o, [&](const RankContext& ctx) {
      auto* arrived = static_cast<std::atomic<int>*>(ctx.shared);
      TestComm comm(ctx);
      for (int round = 0; round < kRounds; ++round) {
        const int late = (round * 3 + n - 1) % n;  // this round's latecomer
        if (ctx.rank == late) usleep(300 * 1000);
        arrived[round * 8 + ctx.rank].store(1);
        ASSERT_EQ(rmaccBarrier(comm.get(), round % 2 ? nullptr : comm.stream()), rmaccSuccess)
            << comm.lastError();
        if (round % 2 == 0) ASSERT_EQ(comm.sync(), rmaccSuccess) << comm.lastError();
        for (int r = 0; r < n; ++r)
          EXPECT_EQ(arrived[round * 8 + r].load(), 1)
              << shape.name << ": rank " << ctx.rank << " left round " << round
              << " before rank " << r << " arrived";
      }
    });
  }
}

}  // namespace
}  // namespace rmacc::test
