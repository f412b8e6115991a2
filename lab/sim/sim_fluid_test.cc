// rmacc-sim's fluid model (fluid.h): transfers sharing links, bottleneck and max-min
// sharing, with answers worked out on paper.
#include <gtest/gtest.h>

#include "fluid.h"

namespace rmacc::sim {
namespace {

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

}  // namespace
}  // namespace rmacc::sim
