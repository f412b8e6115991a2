// Topology: rails between nodes of different sizes, node rounds in another order, and the
// numbering of other nodes' ranks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "core/topology.h"
#include "support/plan_fixture.h"

namespace rmacc::plan {
namespace {

using namespace fixture;

// Nodes of different sizes: local rank i reaches node B through B's local rank i mod |B|; the
// relation is what the planners and the verifier's oracle build on.
TEST(Topology, UnequalNodesShareRailsModuloTheSmallerNode) {
  const Topology t = Topology::fromNodeOf({5, 5, 7, 5, 7, 5, 9, 7, 5, 7, 7, 5, 7, 7, 7, 7});
  ASSERT_EQ(t.nNodes(), 3);
  EXPECT_FALSE(t.uniform());
  EXPECT_EQ(t.nodeSize(0), 6);
  EXPECT_EQ(t.nodeSize(1), 9);
  EXPECT_EQ(t.nodeSize(2), 1);
  EXPECT_EQ(t.maxNodeSize(), 9);
  for (int r = 0; r < t.nRanks(); ++r) {
    EXPECT_EQ(t.rankAt(t.nodeOf(r), t.localRankOf(r)), r);
    for (int b = 0; b < t.nNodes(); ++b) {
      const int p = t.railPeer(r, b);
      EXPECT_EQ(t.nodeOf(p), b);
      EXPECT_EQ(t.localRankOf(p), t.localRankOf(r) % t.nodeSize(b));
    }
  }
  EXPECT_EQ(t.railPeer(t.rankAt(1, 7), 0), t.rankAt(0, 1));  // 7 mod 6
  EXPECT_EQ(t.railPeer(t.rankAt(1, 7), 2), t.rankAt(2, 0));
  try {
    t.localSize("the test");
    FAIL() << "localSize() of unequal nodes answered";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), rmaccInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("the test"), std::string::npos) << e.what();
  }
  EXPECT_EQ(Topology::blocks(3, 4).localSize(), 4);
}

// Node rounds in another order (rmacc-sim's --round-order): any permutation of the deltas
// that starts at 0 is taken, and the plan built on it verifies; anything else is refused.
TEST(Topology, RoundsCanBeReordered) {
  Topology t = Topology::blocks(5, 2);
  t.setRoundDeltas({0, 1, 4, 2, 3});
  EXPECT_EQ(t.sendNode(3, 2), 2);  // 3 + 4 mod 5
  EXPECT_EQ(t.recvNode(3, 2), 4);
  for (const std::vector<int>& bad : std::vector<std::vector<int>>{
           {1, 0, 2, 3, 4}, {0, 1, 1, 2, 3}, {0, 1, 2, 3}, {0, 1, 2, 3, 5}}) {
    Topology u = Topology::blocks(5, 2);
    EXPECT_THROW(u.setRoundDeltas(bad), Error);
  }
  auto b = counts(10, [](int s, int d) { return (uint64_t)(s * 13 + d * 5) % 17 * 100 + 1; });
  Plan first = planOf(t, b, opts(1024, 3));
  expectGood({first, planOf(t, b, opts(1024, 3), first.after)});
}

// Landing-zone rows: every rank of another node gets a distinct row, in rank order, whatever
// the placement; ranks of the same node get none.
TEST(Topology, RemoteIndexNumbersOtherNodesRanks) {
  for (const Topology& t : {Topology::blocks(2, 1), Topology::blocks(3, 4),
                            Topology::fromNodeOf({0, 1, 2, 0, 1, 2, 0, 1, 2}),
                            Topology::fromNodeOf({1, 0, 2, 2, 1, 2, 0, 2, 1})}) {
    for (int of = 0; of < t.nRanks(); ++of) {
      int next = 0;
      for (int from = 0; from < t.nRanks(); ++from) {
        if (t.sameNode(of, from)) EXPECT_EQ(t.remoteIndex(of, from), -1);
        else EXPECT_EQ(t.remoteIndex(of, from), next++) << t.describe() << " of " << of;
      }
      EXPECT_EQ(next, t.nRanks() - t.nodeSize(t.nodeOf(of)));
    }
  }
}

}  // namespace
}  // namespace rmacc::plan
