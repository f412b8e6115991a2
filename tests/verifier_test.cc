// Plans broken on purpose that the verifier must reject, each with the error it names.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <string>
#include <tuple>

#include "core/error.h"
#include "net/signals.h"
#include "plan/plan_build.h"
#include "plan/plan_internal.h"
#include "plan/planner.h"
#include "plan/rank_planner.h"
#include "plan/verifier.h"
#include "support/plan_fixture.h"

namespace rmacc::plan {
namespace {

using namespace fixture;

// --- broken plans -----------------------------------------------------------------------

Plan tinyRelayPlan() {
  auto b = counts(4, [](int, int) { return 0; });
  b[0 * 4 + 3] = 10;
  return planOf(Topology::blocks(2, 2), b, opts(4, 2));
}

TEST(VerifierRejects, MissingCreditWait) {
  Plan p = tinyRelayPlan();
  auto w = find(p, 0, [](const Op& op) { return isWait(op, kPlanCtxCredit); });
  ASSERT_EQ(w.size(), 1u);
  eraseOp(p, 0, w[0]);
  expectCaught({p}, "overwrites r2's unforwarded relay bytes");
}

// A step whose slot an earlier call used waits for a credit carried from the relay's start of
// this call; without it (and the credit), a writer that entered the call overwrites bytes the
// relay has not forwarded yet (CarriesStepsAndCreditsAcrossCalls's calls, r0's step 5 at r2).
TEST(VerifierRejects, MissingCarriedCredit) {
  const Topology t = Topology::blocks(3, 2);
  auto shape = [](uint64_t from0, uint64_t from4) {
    auto b = counts(6, [](int, int) { return 0; });
    b[0 * 6 + 3] = from0;
    b[4 * 6 + 3] = from4;
    return b;
  };
  std::vector<Plan> plans = planCalls(t, {shape(10, 0), shape(0, 6), shape(4, 8)}, opts(4, 2));
  auto wait = find(plans[2], 0, [](const Op& op) { return isWait(op, kPlanCtxCredit); });
  auto credit = find(plans[2], 2, [](const Op& op) {
    return isSignal(op, kPlanCtxCredit) && op.peer == 0 && op.deps.empty();
  });
  ASSERT_EQ(wait.size(), 1u);
  ASSERT_EQ(credit.size(), 1u);
  eraseOp(plans[2], 0, wait[0]);
  eraseOp(plans[2], 2, credit[0]);
  expectCaught(plans, "unforwarded");
}

TEST(VerifierRejects, CreditWaitOffTheProxyPutLane) {
  Plan p = tinyRelayPlan();
  auto w = find(p, 0, [](const Op& op) { return isWait(op, kPlanCtxCredit); });
  ASSERT_EQ(w.size(), 1u);
  p.ranks[0].ops[w[0]].lane = Lane::kProxyWait;
  expectCaught({p}, "belongs on the proxyPut lane");
}

TEST(VerifierRejects, MissingEntryWait) {
  const Topology t = Topology::blocks(2, 2);
  const auto b = counts(4, [](int s, int d) { return 3 + s + 2 * d; });
  for (int writer : {0, 1}) {  // either direction of the r0 <-> r1 pair
    Plan first = planOf(t, b, opts(8, 2));
    Plan second = planOf(t, b, opts(8, 2), first.after);
    auto w = find(second, writer, [&](const Op& op) {
      return isWait(op, kPlanCtxEntry) && op.peer == 1 - writer;
    });
    ASSERT_EQ(w.size(), 1u);
    eraseOp(second, writer, w[0]);
    expectCaught({first, second}, "before r" + std::to_string(1 - writer) + " entered call 1");
  }
}

TEST(VerifierRejects, MissingRelayDataWait) {
  Plan p = tinyRelayPlan();
  auto w = find(p, 2, isRelayWait);
  ASSERT_EQ(w.size(), 3u);
  eraseOp(p, 2, w[2]);
  expectCaught({p}, "reads relay bytes");
}

TEST(VerifierRejects, MissingCompletionWait) {
  Plan p = planOf(Topology::blocks(2, 2), counts(4, [](int, int) { return 6; }), opts(8, 2));
  auto w = find(p, 3, isDataWait);
  ASSERT_FALSE(w.empty());
  eraseOp(p, 3, w.back());
  expectCaught({p}, "r3 finished with");
}

TEST(VerifierRejects, DuplicatedPut) {
  Plan p = planOf(Topology::blocks(2, 2), counts(4, [](int, int) { return 6; }), opts(8, 2));
  auto& ops = p.ranks[1].ops;
  auto puts = find(p, 1, isDirectPut);
  ASSERT_FALSE(puts.empty());
  Op dup = ops[puts[0]];
  dup.quiet = false;  // the signal must not be what the verifier reports
  ops.push_back(dup);
  expectCaught({p}, "a second time");
}

TEST(VerifierRejects, MisroutedOffsets) {
  const auto b = counts(4, [](int s, int d) { return 6 + s + d; });
  Plan direct = planOf(Topology::blocks(2, 2), b, opts(8, 2, 3));
  auto puts = find(direct, 0, isDirectPut);
  ASSERT_FALSE(puts.empty());
  direct.ranks[0].ops[puts[0]].dst.offset += 1;
  expectCaught({direct}, "at the same offset");

  Plan relay = planOf(Topology::blocks(2, 2), b, opts(8, 2));
  auto rp = find(relay, 0, [](const Op& op) { return op.dst.region == Region::kRelay; });
  ASSERT_FALSE(rp.empty());
  relay.ranks[0].ops[rp[0]].dst.offset += 8;  // the other slot
  expectCaught({relay}, "belongs at relay+");

  Plan fwd = planOf(Topology::blocks(2, 2), b, opts(8, 2));
  auto f = find(fwd, 2, [](const Op& op) { return op.src.region == Region::kRelay; });
  ASSERT_FALSE(f.empty());
  fwd.ranks[2].ops[f[0]].dst.offset += 1;
  expectCaught({fwd}, "reads relay bytes of");
}

// A gathering put's segments are checked one by one: swapped, each lands where the other's
// bytes belong; short of the put's bytes, the put is malformed.
TEST(VerifierRejects, MisroutedGatherSegments) {
  const Topology t = Topology::blocks(2, 4);
  const auto b = counts(8, [](int s, int d) { return 5 + s + d; });
  auto gathers = [](const Plan& p) {
    return find(p, 0, [](const Op& op) { return op.gather.size() >= 2; });
  };
  Plan swapped = planOf(t, b, opts(4096, 2));
  auto g = gathers(swapped);
  ASSERT_EQ(g.size(), 1u);  // r0's payload for node 1: r5, r6, r7 in one put
  auto& segs = swapped.ranks[0].ops[g[0]].gather;
  ASSERT_EQ(segs.size(), 3u);
  std::swap(segs[0], segs[1]);
  expectCaught({swapped}, "belongs at relay+");

  Plan shortened = planOf(t, b, opts(4096, 2));
  shortened.ranks[0].ops[gathers(shortened)[0]].gather.pop_back();
  expectCaught({shortened}, "gather segments hold");
}

TEST(VerifierRejects, LaneOrderThatDeadlocks) {
  // Each rank of a 1 x 2 plan signals its entry only after its own data put, which waits for
  // the other rank's entry: a cycle through the two cePut lanes.
  Plan p = planOf(Topology::blocks(1, 2), counts(2, [](int, int) { return 5; }), opts());
  for (int r : {0, 1}) {
    auto entry = find(p, r, [](const Op& op) { return isSignal(op, kPlanCtxEntry); });
    auto put = find(p, r, [](const Op& op) { return isData(op) && op.kind == OpKind::kPut; });
    ASSERT_EQ(entry.size(), 1u);
    ASSERT_EQ(put.size(), 1u);
    moveOp(p, r, entry[0], put[0]);
  }
  expectCaught({p}, "deadlock");
}

// A quiet put must be followed on its lane by a put to the same counter that writes the count.
TEST(VerifierRejects, QuietPutWithNoLaterPutToCarryItsSignal) {
  Plan p = planOf(Topology::blocks(1, 2), counts(2, [](int, int) { return 10; }), opts(8, 2, 4));
  auto puts = find(p, 0, [](const Op& op) { return op.kind == OpKind::kPut && op.bytes > 0; });
  ASSERT_EQ(puts.size(), 3u);  // 10 bytes in pieces of 4
  EXPECT_TRUE(p.ranks[0].ops[puts[0]].quiet && p.ranks[0].ops[puts[1]].quiet);
  expectGood({p});
  p.ranks[0].ops[puts[2]].quiet = true;
  expectCaught({p}, "a quiet put with no later put");
}

TEST(VerifierRejects, QuietPutToAnotherNode) {
  Plan p = planOf(Topology::blocks(2, 1), counts(2, [](int, int) { return 10; }), opts(8, 2, 4));
  auto puts = find(p, 0, [](const Op& op) { return op.kind == OpKind::kPut && op.bytes > 0; });
  ASSERT_EQ(puts.size(), 3u);
  p.ranks[0].ops[puts[0]].quiet = true;
  expectCaught({p}, "only a CE put with data may leave its signal");
}

// A quiet put's count reaches the receiver only with the next put's write: a wait for the
// count the quiet put alone reaches waits for that put. Here r1 answers r0's first piece with a
// signal that r0's last piece waits for: fine while every piece signals, a deadlock once the
// first two pieces are quiet.
TEST(VerifierRejects, WaitForACountOnlyAQuietPutReaches) {
  Options o = opts(8, 2, 4);
  o.quietPuts = false;
  Plan p = planOf(Topology::blocks(1, 2), counts(2, [](int, int) { return 10; }), o);
  auto& r0 = p.ranks[0].ops;
  auto& r1 = p.ranks[1].ops;
  auto puts = find(p, 0, [](const Op& op) { return op.kind == OpKind::kPut && op.bytes > 0; });
  auto done = find(p, 1, [](const Op& op) { return isDataWait(op) && op.peer == 0; });
  ASSERT_EQ(puts.size(), 3u);
  ASSERT_EQ(done.size(), 1u);
  ASSERT_EQ(r1[done[0]].count, 3u);
  // r1: the completion wait in two, the first piece's and the rest, with a reply in between.
  r1[done[0]].count = 1;
  Op rest = r1[done[0]];
  rest.count = 2;
  r1.push_back(putOp(Lane::kCePut, 0, {}, {}, 0, 0, 0, {done[0]}));
  r1.push_back(rest);
  // r0: the last piece waits for the reply.
  r0.insert(r0.begin() + puts[2], waitOp(Lane::kCeWait, 1, 0, 0, 1));
  for (size_t i = puts[2] + 1; i < r0.size(); ++i)
    for (int& d : r0[i].deps) d += d >= puts[2];
  r0[puts[2] + 1].deps.push_back(puts[2]);
  expectGood({p});
  r0[puts[0]].quiet = r0[puts[1]].quiet = true;
  expectCaught({p}, "deadlock");
}

TEST(VerifierRejects, StraySignal) {
  Plan p = planOf(Topology::blocks(2, 2), counts(4, [](int, int) { return 6; }), opts(8, 2));
  Op extra;
  extra.kind = OpKind::kPut;
  extra.lane = Lane::kProxyPut;
  extra.peer = 2;
  extra.ctx = kPlanCtxCredit;
  p.ranks[0].ops.push_back(extra);
  expectCaught({p}, "but its waits consumed");
}

}  // namespace
}  // namespace rmacc::plan
