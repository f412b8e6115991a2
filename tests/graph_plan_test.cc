// The plan of an in-graph call (plan/graph_plan.h), host-side: for one-node shapes and count
// patterns (zeros included), each rank's plan made from its own counts equals its part of the
// enqueued call's plan for the same counts, the ranks' plans together verify (also as
// consecutive replays), and a graph can record them (graphPlanProblem). Calls across nodes are
// refused: they never take the in-graph path (coll/in_graph_calls.h).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "coll/enqueued_calls.h"
#include "core/config.h"
#include "core/error.h"
#include "plan/graph_plan.h"
#include "plan/plan_internal.h"
#include "support/plan_fixture.h"

namespace rmacc::plan {
namespace {

using namespace fixture;

using CountFn = std::function<uint64_t(int s, int d)>;
struct Pattern {
  const char* name;
  CountFn bytes;
};
const Pattern kPatterns[] = {
    {"uniform", [](int, int) { return 4096; }},
    {"skewed", [](int s, int d) { return 1 + 1000 * (uint64_t)(s + 2 * d); }},
    {"zeros", [](int, int) { return 0; }},
    {"self_only", [](int s, int d) { return s == d ? 64 : 0; }},
    {"one_way", [](int s, int d) { return s < d ? 100 + s : 0; }},
    {"sparse", [](int s, int d) { return (s + d) % 3 == 0 ? 1 + s * 7 + d : 0; }},
};

// The options a communicator's calls use: the hand-checked ones, and the library's.
Options libraryOptions() { return planOptionsOf(Config{}, 1); }

std::vector<uint64_t> row(const std::vector<uint64_t>& b, int n, int r) {
  return {b.begin() + (size_t)r * n, b.begin() + (size_t)(r + 1) * n};
}
std::vector<uint64_t> column(const std::vector<uint64_t>& b, int n, int r) {
  std::vector<uint64_t> c(n);
  for (int s = 0; s < n; ++s) c[s] = b[(size_t)s * n + r];
  return c;
}

std::string listing(const RankPlan& p, int rank) {
  std::string text;
  for (size_t i = 0; i < p.ops.size(); ++i) text += formatOp(p.ops[i], rank, (int)i) + "\n";
  return text;
}

// Every rank's in-graph plan for `b`, in the frame of the enqueued plan (same topology, counts
// and options), so that the verifier checks them together.
Plan graphPlanOf(const Topology& t, const std::vector<uint64_t>& b, const Options& o) {
  Plan p = makeAlltoallvPlan(t, b, graphOptions(o), {});
  const int n = t.nRanks();
  for (int r = 0; r < n; ++r) p.ranks[r] = makeGraphPlan(t, o, r, row(b, n, r), column(b, n, r));
  return p;
}

class GraphPlanCase : public testing::TestWithParam<std::tuple<int, int, bool>> {};

TEST_P(GraphPlanCase, EqualsTheEnqueuedPlanVerifiesAndCanBeRecorded) {
  const auto [ranks, pattern, library] = GetParam();
  const Topology t = Topology::blocks(1, ranks);
  const Options o = library ? libraryOptions() : opts();
  const std::vector<uint64_t> b = counts(ranks, kPatterns[pattern].bytes);
  const Plan enqueued = makeAlltoallvPlan(t, b, graphOptions(o), {});
  const Plan graph = graphPlanOf(t, b, o);
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(listing(graph.ranks[r], r), listing(enqueued.ranks[r], r)) << "rank " << r;
    EXPECT_EQ(graphPlanProblem(t, r, graph.ranks[r]), "") << "rank " << r;
  }
  expectGood({graph});
  expectGood({graph, graph, graph});  // replays: the same plan, call after call
}

std::string caseName(const testing::TestParamInfo<GraphPlanCase::ParamType>& info) {
  const auto [ranks, pattern, library] = info.param;
  return "1x" + std::to_string(ranks) + "_" + kPatterns[pattern].name +
         (library ? "_library" : "_handchecked");
}

INSTANTIATE_TEST_SUITE_P(Shapes, GraphPlanCase,
                         testing::Combine(testing::Values(1, 2, 3, 4), testing::Range(0, 6),
                                          testing::Bool()),
                         caseName);

TEST(GraphPlan, OneRankIsOneCopy) {
  const RankPlan p = makeGraphPlan(Topology::blocks(1, 1), opts(), 0, {100}, {100});
  ASSERT_EQ(p.ops.size(), 1u);
  EXPECT_EQ(p.ops[0].kind, OpKind::kCopy);
  EXPECT_EQ(p.ops[0].bytes, 100u);
  EXPECT_TRUE(makeGraphPlan(Topology::blocks(1, 1), opts(), 0, {0}, {0}).ops.empty());
}

// A graph holds no barrier: a communicator on RMACC_ENTRY_SYNC=barrier still gets entry
// signals in its in-graph plans, and puts are never split (one copy per block).
TEST(GraphPlan, EntrySignalsAndWholeBlocksWhateverTheOptions) {
  Options o = opts(1 << 20, 2, /*maxPut=*/100);
  o.entrySignals = false;
  const Topology t = Topology::blocks(1, 2);
  const std::vector<uint64_t> b = counts(2, [](int s, int d) { return 250 + s + d; });
  const Plan graph = graphPlanOf(t, b, o);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(find(graph, r, [](const Op& op) { return isSignal(op, kPlanCtxEntry); }).size(), 1u);
    EXPECT_EQ(find(graph, r, [](const Op& op) { return isData(op) && op.kind == OpKind::kPut; }).size(),
              1u);
  }
  expectGood({graph});
}

// In-graph calls run on one node: the two-node shapes (emulated nodes) are refused, and their
// enqueued plans (relays, network lanes) are not what a graph can record.
TEST(GraphPlan, CallsAcrossNodesAreRefused) {
  for (auto [nodes, local] : {std::pair{2, 1}, std::pair{2, 2}}) {
    const Topology t = Topology::blocks(nodes, local);
    const int n = t.nRanks();
    const std::vector<uint64_t> b = counts(n, [](int s, int d) { return 64 + s + d; });
    try {
      makeGraphPlan(t, opts(), 0, row(b, n, 0), column(b, n, 0));
      ADD_FAILURE() << nodes << "x" << local << ": planned";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), rmaccInvalidArgument);
    }
    const Plan enqueued = makeAlltoallvPlan(t, b, graphOptions(opts()), {});
    EXPECT_NE(graphPlanProblem(t, 0, enqueued.ranks[0]), "") << nodes << "x" << local;
  }
}

TEST(GraphPlan, RejectsCountsOfTheWrongSize) {
  EXPECT_THROW(makeGraphPlan(Topology::blocks(1, 2), opts(), 0, {1}, {1, 1}), Error);
  EXPECT_THROW(makeGraphPlan(Topology::blocks(1, 2), opts(), 2, {1, 1}, {1, 1}), Error);
}

// What a graph cannot record is named: a data put no longer gated by its peer's entry signal,
// a put moved to the network's lane, a second copy.
TEST(GraphPlan, ProblemsAreCaught) {
  const Topology t = Topology::blocks(1, 3);
  const std::vector<uint64_t> b = counts(3, [](int s, int d) { return 10 + s + d; });
  const RankPlan good = makeGraphPlan(t, opts(), 0, row(b, 3, 0), column(b, 3, 0));
  ASSERT_EQ(graphPlanProblem(t, 0, good), "");
  auto firstDataPut = [](const RankPlan& p) {
    for (size_t i = 0; i < p.ops.size(); ++i)
      if (p.ops[i].kind == OpKind::kPut && p.ops[i].bytes > 0) return i;
    return p.ops.size();
  };
  const size_t put = firstDataPut(good);
  ASSERT_LT(put, good.ops.size());

  RankPlan wrongGate = good;
  for (size_t i = 0; i < put; ++i)
    if (wrongGate.ops[i].kind == OpKind::kWait && wrongGate.ops[i].peer != good.ops[put].peer)
      wrongGate.ops[put].deps = {(int)i};
  EXPECT_NE(graphPlanProblem(t, 0, wrongGate).find("gated"), std::string::npos)
      << graphPlanProblem(t, 0, wrongGate);

  RankPlan network = good;
  network.ops[put].lane = Lane::kProxyPut;
  EXPECT_NE(graphPlanProblem(t, 0, network).find("copy-engine lane"), std::string::npos);

  RankPlan twoCopies = good;
  for (const Op& op : good.ops)
    if (op.kind == OpKind::kCopy) twoCopies.ops.push_back(op);
  EXPECT_NE(graphPlanProblem(t, 0, twoCopies).find("second copy"), std::string::npos);
}

}  // namespace
}  // namespace rmacc::plan
