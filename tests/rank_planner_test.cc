// The per-rank planner against the global reference: over thousands of random shapes, counts
// and options, every rank's own plan equals its slice of the global plan; and a deterministic
// guard that planning one rank of 1,024 does work linear in that rank's ops.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "core/error.h"
#include "plan/plan_internal.h"
#include "plan/planner.h"
#include "plan/rank_planner.h"
#include "plan/verifier.h"

namespace rmacc::plan {
namespace {

using Rng = std::mt19937_64;
uint64_t uniform(Rng& rng, uint64_t lo, uint64_t hi) {
  return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
}

bool sameLoc(const Loc& a, const Loc& b) {
  return a.region == b.region && a.block == b.block && a.offset == b.offset;
}

bool sameGather(const std::vector<Segment>& a, const std::vector<Segment>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const Segment& x, const Segment& y) {
    return sameLoc(x.src, y.src) && x.bytes == y.bytes;
  });
}

bool sameOp(const Op& a, const Op& b) {
  return sameGather(a.gather, b.gather) && a.kind == b.kind && a.lane == b.lane && a.batch == b.batch && a.peer == b.peer &&
         sameLoc(a.src, b.src) && sameLoc(a.dst, b.dst) && a.bytes == b.bytes &&
         a.ctx == b.ctx && a.sigIdx == b.sigIdx && a.count == b.count && a.deps == b.deps &&
         a.quiet == b.quiet;
}

// "" or the first difference, readable.
std::string compare(const RankPlan& got, const RankPlan& want, int rank) {
  const size_t n = std::max(got.ops.size(), want.ops.size());
  for (size_t i = 0; i < n; ++i) {
    if (i < got.ops.size() && i < want.ops.size() && sameOp(got.ops[i], want.ops[i])) continue;
    return strprintf("r%d op %zu: per-rank [%s], global [%s]", rank, i,
                     i < got.ops.size() ? formatOp(got.ops[i], rank, (int)i).c_str() : "none",
                     i < want.ops.size() ? formatOp(want.ops[i], rank, (int)i).c_str() : "none");
  }
  return "";
}

// Counts of one random call: sparse, dense, skewed or empty, blocks around `unit` bytes.
std::vector<uint64_t> randomCounts(Rng& rng, int n, uint64_t unit) {
  std::vector<uint64_t> b((size_t)n * n, 0);
  const int pattern = (int)uniform(rng, 0, 4);
  const int hot = (int)uniform(rng, 0, n - 1);
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d) {
      uint64_t& v = b[(size_t)s * n + d];
      switch (pattern) {
        case 0: v = uniform(rng, 0, 2 * unit); break;
        case 1: v = uniform(rng, 0, 3) == 0 ? uniform(rng, 1, 3 * unit) : 0; break;
        case 2: v = d == hot ? uniform(rng, unit, 4 * unit) : uniform(rng, 0, unit / 4); break;
        case 3: v = unit; break;
        default: v = 0;
      }
    }
  return b;
}

// Random placements: 1..12 nodes of 1..8 ranks (every node its own size in half the cases),
// scrambled node maps most of the time.
TEST(RankPlanner, EqualsItsSliceOfTheGlobalPlan) {
  constexpr int kCases = 3000;
  Rng rng(0x9a7e0018);
  size_t ranksChecked = 0, unequalCases = 0;
  for (int c = 0; c < kCases; ++c) {
    const int nodes = (int)uniform(rng, 1, 12), local = (int)uniform(rng, 1, 8);
    const bool unequal = uniform(rng, 0, 1) == 0;
    std::vector<int> nodeOf;
    for (int a = 0; a < nodes; ++a)
      nodeOf.insert(nodeOf.end(), unequal ? (int)uniform(rng, 1, 8) : local, a);
    if (uniform(rng, 0, 3) != 0) std::shuffle(nodeOf.begin(), nodeOf.end(), rng);
    Topology topo = Topology::fromNodeOf(nodeOf);
    if (c % 5 == 2) {  // rounds in reverse order: any order of the deltas is a schedule
      std::vector<int> deltas{0};
      for (int d = topo.nNodes() - 1; d >= 1; --d) deltas.push_back(d);
      topo.setRoundDeltas(deltas);
    }
    const int n = topo.nRanks();
    unequalCases += !topo.uniform();
    Options o;
    static const uint64_t slots[] = {1, 3, 8, 64, 4096};
    o.slotBytes = slots[uniform(rng, 0, 4)];
    o.slots = (int)uniform(rng, 2, 5);
    o.maxPutBytes = uniform(rng, 0, 2) == 0 ? (1ull << 30) : uniform(rng, 1, 24);
    o.entrySignals = uniform(rng, 0, 5) != 0;
    o.roundsPerBatch = (int)uniform(rng, 0, 3);
    o.creditWindow = c % 4;  // 0 (slots), 1 (2), 2, 3: not from rng, earlier draws unchanged
    o.minChunksPerRound = c / 4 % 4;  // 0, 1: chunks of a slot; 2, 3: smaller (chunkBytes)
    o.minChunkBytes = c / 16 % 3 + 1;
    o.entryLead = c / 48 % 4 - 1;  // -1 (all at the start), 0, 1, 2
    o.fitSlotsFrom = c % 3 == 1 ? c / 3 % 4 + 2 : 0;  // 2..5 nodes and up
    o.lastRoundMinChunks = c / 7 % 4;  // 0, 1 (as every round), 2, 3
    o.lastRoundMinChunkBytes = c / 11 % 3;  // 0 (minChunkBytes), 1, 2
    o.releaseRelayUpTo = c / 13 % 3 * 4;  // 0 (never), up to 4 nodes, up to 8
    o.joinForwardsBelow = c / 17 % 3 == 0 ? 0 : c / 17 % 3 * 16;  // never, 16 or 32 bytes
    o.joinForwardsSteps = c / 19 % 4;  // a whole position, 1 (none), 2, 3
    o.quietPuts = c / 23 % 2 == 0;
    o.fitWindowBytes = c / 29 % 3 * 24;  // one halving, or again below 24 / 48 bytes
    Carry carry;
    const int calls = (int)uniform(rng, 1, 3);
    for (int k = 0; k < calls; ++k) {
      const uint64_t unit = std::clamp<uint64_t>(o.slotBytes * uniform(rng, 1, 30) / 10, 1, 48);
      const auto bytes = randomCounts(rng, n, unit);
      const Plan global = makeAlltoallvPlan(topo, bytes, o, carry);
      const MatrixInputs inputs(topo, bytes, o, carry);
      ASSERT_EQ(inputs.after().relaySteps, global.after.relaySteps) << "case " << c;
      for (int r = 0; r < n; ++r) {
        const RankPlanResult mine = makeRankPlan(topo, o, inputs.of(r));
        const std::string diff = compare(mine.plan, global.ranks[r], r);
        ASSERT_EQ(diff, "") << "case " << c << " call " << k << ": " << topo.describe()
                            << "\n" << global.dump(r);
        ASSERT_EQ(mine.relayStepsAfter, global.after.relaySteps[r]);
        ASSERT_EQ(mine.work.opsBuilt, mine.plan.ops.size());
        ++ranksChecked;
      }
      carry = global.after;
    }
  }
  printf("%zu rank plans equal their global slices (%zu of %d cases with unequal nodes)\n",
         ranksChecked, unequalCases, kCases);
  EXPECT_GT(unequalCases, (size_t)kCases / 4);
}

// The plans the library now runs are the verifier's plans: assembling the per-rank plans of a
// call gives a global plan that verifies, across calls with carry.
class AssembledPlans : public ::testing::TestWithParam<std::vector<int>> {};

TEST_P(AssembledPlans, Verify) {
  const Topology topo = Topology::fromNodeOf(GetParam());
  Options o;
  o.slotBytes = 16;
  o.slots = 2;
  o.maxPutBytes = 10;
  o.releaseRelayUpTo = GetParam().size() != 16 ? 5 : 0;  // relays release themselves
  Rng rng(18);
  std::vector<Plan> calls;
  Carry carry;
  for (int k = 0; k < 3; ++k) {
    Plan p;
    p.topo = topo;
    p.options = o;
    p.bytes = randomCounts(rng, topo.nRanks(), 24);
    p.before = carry;
    const MatrixInputs inputs(topo, p.bytes, o, carry);
    for (int r = 0; r < topo.nRanks(); ++r) {
      p.ranks.push_back(makeRankPlan(topo, o, inputs.of(r)).plan);
      for (const Op& op : p.ranks.back().ops) p.nBatches = std::max(p.nBatches, op.batch + 1);
    }
    p.after = inputs.after();
    p.relayBytes = (uint64_t)o.slots * o.slotBytes;
    carry = p.after;
    calls.push_back(std::move(p));
  }
  const Verdict v = verify(calls);
  EXPECT_TRUE(v.ok) << topo.describe() << ": " << v.error;
}

// 3 x 4 scrambled; 3 + 5 + 8 scrambled (relays with two writers a round, and ranks that relay
// nothing from the smaller nodes); 1 + 4 + 2.
INSTANTIATE_TEST_SUITE_P(
    RankPlanner, AssembledPlans,
    ::testing::Values(std::vector<int>{2, 0, 1, 2, 0, 1, 0, 1, 2, 2, 1, 0},
                      std::vector<int>{2, 1, 2, 0, 2, 1, 2, 0, 1, 2, 2, 1, 0, 2, 1, 2},
                      std::vector<int>{1, 1, 0, 2, 1, 1, 2}));

// A result kept across calls (ops overwritten in place) equals a fresh one, also when a call
// has fewer ops than the one before it: nothing of the earlier plan may remain.
TEST(RankPlanner, KeptResultEqualsAFreshOne) {
  Rng rng(0x4e5e);
  RankPlanResult kept;
  for (int c = 0; c < 200; ++c) {
    std::vector<int> nodeOf;
    for (int a = 0, nodes = (int)uniform(rng, 1, 6); a < nodes; ++a)
      nodeOf.insert(nodeOf.end(), (int)uniform(rng, 1, 5), a);
    const Topology topo = Topology::fromNodeOf(nodeOf);
    Options o;
    o.slotBytes = uniform(rng, 1, 40);
    o.maxPutBytes = uniform(rng, 1, 30);
    const auto bytes = randomCounts(rng, topo.nRanks(), 24);
    const int r = (int)uniform(rng, 0, topo.nRanks() - 1);
    const RankInputs in = MatrixInputs(topo, bytes, o, {}).of(r);
    makeRankPlan(topo, o, in, kept);
    const RankPlanResult fresh = makeRankPlan(topo, o, in);
    ASSERT_EQ(compare(kept.plan, fresh.plan, r), "") << "case " << c << ": " << topo.describe();
    ASSERT_EQ(kept.relayStepsAfter, fresh.relayStepsAfter);
  }
}

TEST(RankPlanner, RejectsInputsOfTheWrongShape) {
  const Topology topo = Topology::blocks(2, 2);
  const std::vector<uint64_t> bytes(16, 5);
  RankInputs in = MatrixInputs(topo, bytes, Options{}, {}).of(1);
  in.relayIn.pop_back();
  try {
    makeRankPlan(topo, Options{}, in);
    FAIL() << "a short relayIn was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), rmaccInvalidArgument);
  }
}

// The quadratic-regression guard: plan one rank of 128 x 8 = 1,024 ranks, and of 32 x 8 = 256,
// with every count non-zero (MoE-like, ~1 MiB blocks, default options). What the planner
// touched is counted, not timed: it must stay within a small constant per op built. Reading
// the byte matrix (n^2 = 1M entries) or building another rank's ops would break it by 100x.
TEST(RankPlanner, OneRankOfAThousandIsLinearInItsOps) {
  double perOp[2];
  size_t opsAt[2];
  int idx = 0;
  for (int nodes : {32, 128}) {
    const Topology topo = Topology::blocks(nodes, 8);
    const int n = topo.nRanks();
    std::vector<uint64_t> bytes((size_t)n * n);
    Rng rng(nodes);
    for (auto& b : bytes) b = uniform(rng, 512 << 10, 1536 << 10);
    const Options o;
    const MatrixInputs inputs(topo, bytes, o, {});
    const int me = n / 2 + 3;
    const RankPlanResult r = makeRankPlan(topo, o, inputs.of(me));
    const size_t ops = r.plan.ops.size();
    EXPECT_EQ(r.work.opsBuilt, ops);
    EXPECT_GE(ops, (size_t)n) << "every count is non-zero: at least one put per peer";
    EXPECT_LE(r.work.entriesRead, 4 * ops) << n << " ranks";
    perOp[idx] = (double)r.work.entriesRead / ops;
    opsAt[idx++] = ops;
    printf("%d ranks: rank %d built %zu ops, read %llu count entries\n", n, me, ops,
           (unsigned long long)r.work.entriesRead);
  }
  EXPECT_GT(opsAt[1], 3 * opsAt[0]);  // 4x the ranks, ~4x the ops
  EXPECT_LT(perOp[1], 1.25 * perOp[0]) << "work per op grows with the communicator";
}

}  // namespace
}  // namespace rmacc::plan
