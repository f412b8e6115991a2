// The library's plan cache (coll/plan_cache.h): hits return the plan of the same inputs, misses
// (new counts on every call, as with MoE routing) plan into the storage of evicted entries and
// produce exactly what a fresh plan::makeRankPlan produces, a plan still held elsewhere is never
// overwritten, and inputs that differ only in where other writers' chunks sit at a shared relay
// (RankInputs::writerOffset, unequal nodes) are different entries.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "coll/plan_cache.h"
#include "plan/plan_internal.h"
#include "plan/rank_planner.h"

namespace rmacc {
namespace {

std::string text(const plan::RankPlan& p, int rank) {
  std::string s;
  for (size_t i = 0; i < p.ops.size(); ++i) s += plan::formatOp(p.ops[i], rank, (int)i) + "\n";
  return s;
}

// One rank's inputs for a random byte matrix (the count exchange delivers the same).
plan::RankInputs randomInputs(const Topology& topo, std::mt19937_64& rng, int rank,
                              const plan::Options& o, uint64_t maxBytes) {
  const int n = topo.nRanks();
  std::vector<uint64_t> bytes((size_t)n * n);
  for (auto& b : bytes) b = rng() % 4 == 0 ? 0 : rng() % maxBytes;
  return plan::MatrixInputs(topo, bytes, o, plan::Carry{}).of(rank);
}

struct Shape {
  const char* name;
  std::vector<int> nodeOf;
};

class PlanCacheShapes : public testing::TestWithParam<Shape> {};

// 40 calls with new counts through a cache of 4: each plan equals a fresh one, the cache
// allocates 4 results and reuses them for the other 36 misses; a repeated input is a hit
// returning the same plan object.
TEST_P(PlanCacheShapes, MissesReuseEvictedStorageAndMatchFreshPlans) {
  const Topology topo = Topology::fromNodeOf(GetParam().nodeOf);
  plan::Options o;
  o.slots = 4;
  o.slotBytes = 4096;
  o.maxPutBytes = 3000;
  PlanCache cache(topo, 4);
  std::mt19937_64 rng(7);
  for (int call = 0; call < 40; ++call) {
    const int rank = (int)(rng() % topo.nRanks());
    const plan::RankInputs in = randomInputs(topo, rng, rank, o, 20000);
    bool planned = false;
    auto p = cache.get(o, in, &planned);
    EXPECT_TRUE(planned);
    ASSERT_EQ(text(*p, rank), text(plan::makeRankPlan(topo, o, in).plan, rank)) << "call " << call;
    auto again = cache.get(o, in, &planned);
    EXPECT_FALSE(planned);
    EXPECT_EQ(again.get(), p.get()) << "a hit returns the cached plan";
  }
  EXPECT_EQ(cache.stats().misses, 40u);
  EXPECT_EQ(cache.stats().hits, 40u);
  EXPECT_EQ(cache.stats().resultsAllocated, 4u) << "misses must reuse evicted results";
  EXPECT_EQ(cache.size(), 4u);
}

INSTANTIATE_TEST_SUITE_P(Shapes, PlanCacheShapes,
                         testing::Values(Shape{"2x2", {0, 1, 0, 1}},
                                         Shape{"1p3p2", {1, 2, 0, 1, 2, 1}},
                                         Shape{"3p1p2", {0, 0, 1, 0, 2, 2}}),
                         [](const testing::TestParamInfo<Shape>& i) { return std::string(i.param.name); });

// A caller holding a plan keeps it intact however many misses follow.
TEST(PlanCache, HeldPlanIsNeverOverwritten) {
  const Topology topo = Topology::blocks(2, 3);
  plan::Options o;
  PlanCache cache(topo, 2);
  std::mt19937_64 rng(11);
  auto held = cache.get(o, randomInputs(topo, rng, 1, o, 1 << 20));
  const std::string before = text(*held, 1);
  for (int call = 0; call < 10; ++call) cache.get(o, randomInputs(topo, rng, 1, o, 1 << 20));
  EXPECT_EQ(text(*held, 1), before);
  EXPECT_EQ(cache.stats().resultsAllocated, 3u) << "2 entries, plus one for the held plan";
}

// Same counts, same relay steps, different position among the writers sharing this rank's
// relay: a different plan, hence a different entry.
TEST(PlanCache, WriterOffsetIsPartOfTheKey) {
  const Topology topo = Topology::fromNodeOf({0, 1, 0, 0});  // node 0: ranks 0, 2, 3; node 1: 1
  plan::Options o;
  o.slotBytes = 4096;
  std::mt19937_64 rng(3);
  plan::RankInputs in = randomInputs(topo, rng, 3, o, 50000);
  in.writerStep[1] += 2 * o.slots;  // past the first slots: the key keeps only step mod slots
  PlanCache cache(topo, 4);
  auto a = cache.get(o, in);
  in.writerOffset[1] += 1;
  in.writerStep[1] += 4 * o.slots;  // the same slot: only the offset differs in the key
  bool planned = false;
  auto b = cache.get(o, in, &planned);
  EXPECT_TRUE(planned);
  EXPECT_NE(a.get(), b.get());
}

}  // namespace
}  // namespace rmacc
