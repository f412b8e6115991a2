// Plan-level merging (plan/op_groups.h): groups partition a rank's ops by lane and kind, and a
// plan in which every group runs as one unit -- each member waits for the deps of all members,
// and whoever depended on a member waits for the whole group -- still verifies (no deadlock,
// every byte once, relays safe), over random shapes and consecutive calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "plan/op_groups.h"
#include "plan/planner.h"
#include "plan/rank_planner.h"
#include "plan/verifier.h"

namespace rmacc::plan {
namespace {

using Rng = std::mt19937_64;
uint64_t uniform(Rng& rng, uint64_t lo, uint64_t hi) {
  return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
}

// The plan as the grouped executor runs it.
RankPlan asGroups(const RankPlan& p, const std::vector<OpGroup>& groups) {
  RankPlan out = p;
  std::vector<int> lastOf(p.ops.size());
  for (const OpGroup& g : groups) {
    std::set<int> deps;
    for (int m : g.members) {
      deps.insert(p.ops[m].deps.begin(), p.ops[m].deps.end());
      lastOf[m] = g.members.back();
    }
    for (int m : g.members) out.ops[m].deps.assign(deps.begin(), deps.end());
  }
  for (size_t i = 0; i < out.ops.size(); ++i) {
    std::set<int> deps;
    for (int d : out.ops[i].deps) deps.insert(lastOf[d] < (int)i ? lastOf[d] : d);
    out.ops[i].deps.assign(deps.begin(), deps.end());
  }
  return out;
}

void checkGroups(const RankPlan& p, const std::vector<OpGroup>& groups) {
  std::vector<int> seen(p.ops.size(), 0), groupOf(p.ops.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    ASSERT_EQ(groups[g].first, groups[g].members.front());
    for (int m : groups[g].members) {
      seen[m]++;
      groupOf[m] = (int)g;
      ASSERT_EQ(p.ops[m].lane, p.ops[groups[g].first].lane);
      for (int d : p.ops[m].deps) ASSERT_LT(d, groups[g].first) << "a member waits on the group";
    }
  }
  for (int s : seen) ASSERT_EQ(s, 1);
  for (size_t i = 0; i < p.ops.size(); ++i)
    for (int d : p.ops[i].deps)
      if (groupOf[d] != groupOf[i]) ASSERT_GT((int)i, groups[groupOf[d]].members.back());
}

TEST(OpGroups, GroupedPlansStillVerify) {
  Rng rng(0x6709);
  size_t ops = 0, groupCount = 0;
  for (int c = 0; c < 600; ++c) {
    const int nodes = (int)uniform(rng, 1, 6), local = (int)uniform(rng, 1, 5);
    std::vector<int> nodeOf;
    for (int a = 0; a < nodes; ++a) nodeOf.insert(nodeOf.end(), local, a);
    std::shuffle(nodeOf.begin(), nodeOf.end(), rng);
    const Topology topo = Topology::fromNodeOf(nodeOf);
    const int n = topo.nRanks();
    Options o;
    o.slotBytes = uniform(rng, 1, 32);
    o.slots = (int)uniform(rng, 2, 4);
    o.maxPutBytes = uniform(rng, 0, 1) ? (1ull << 30) : uniform(rng, 1, 16);
    o.entrySignals = uniform(rng, 0, 5) != 0;
    std::vector<Plan> calls;
    Carry carry;
    for (int k = 0; k < (int)uniform(rng, 1, 3); ++k) {
      std::vector<uint64_t> bytes((size_t)n * n);
      for (auto& b : bytes) b = uniform(rng, 0, 3) ? uniform(rng, 0, 40) : 0;
      Plan p = makeAlltoallvPlan(topo, bytes, o, carry);
      carry = p.after;
      for (RankPlan& rp : p.ranks) {
        const auto groups = groupOps(rp);
        checkGroups(rp, groups);
        ops += rp.ops.size();
        groupCount += groups.size();
        rp = asGroups(rp, groups);
      }
      calls.push_back(std::move(p));
    }
    const Verdict v = verify(calls);
    ASSERT_TRUE(v.ok) << "case " << c << ": " << v.error;
  }
  printf("%zu ops in %zu groups\n", ops, groupCount);
}

// What merging buys at 1,024 ranks: one rank's ops against the backend calls its groups need.
TEST(OpGroups, OneRankOfAThousand) {
  const Topology topo = Topology::blocks(128, 8);
  const int n = topo.nRanks();
  std::vector<uint64_t> bytes((size_t)n * n);
  Rng rng(1024);
  for (auto& b : bytes) b = uniform(rng, 512 << 10, 1536 << 10);
  const MatrixInputs inputs(topo, bytes, Options{}, {});
  const RankPlan p = makeRankPlan(topo, Options{}, inputs.of(517)).plan;
  const auto groups = groupOps(p);
  checkGroups(p, groups);
  printf("1,024 ranks: %zu ops in %zu groups\n", p.ops.size(), groups.size());
  EXPECT_LT(groups.size(), p.ops.size());
}

}  // namespace
}  // namespace rmacc::plan
