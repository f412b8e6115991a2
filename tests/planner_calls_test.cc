// Hand-checked plans of the finer schedule and of consecutive calls: carried credits, release
// of the next call's steps, signals carried by the last put, split puts and fitted slots.
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

// Past a relay's first window, its first steps of a call wait for credits carried from the
// relay's start of the call, sent with no deps, so they also say the relay entered the call: a
// writer's direct put into its relay of another node (its rail peer) then depends on that
// credit wait, and the relay sends it no entry signal (plan_build.h entryByCredit). On fresh
// relays the entry signal stays. A direct put that does not wait for that credit may land in a
// rank that has not entered the call yet, and the verifier finds it.
TEST(Planner, CarriedCreditIsTheRemoteEntry) {
  const Topology t = Topology::blocks(2, 2);
  const auto b = counts(4, [](int s, int d) { return 3 + s + 2 * d; });
  // 1 relay step per call: call 2's is step 2 = window
  std::vector<Plan> plans = planCalls(t, {b, b, b}, opts(8, 2));
  for (int call : {0, 2}) {
    const Plan& p = plans[call];
    for (int r = 0; r < 4; ++r) {
      const int q = r ^ 2;  // r's rail peer on the other node: its relay and direct target
      auto direct = find(p, r, [&](const Op& op) { return isDirectPut(op) && op.peer == q; });
      ASSERT_EQ(direct.size(), 1u);
      const Op& put = p.ranks[r].ops[direct[0]];
      ASSERT_EQ(put.deps.size(), 1u);
      const Op& gate = p.ranks[r].ops[put.deps[0]];
      EXPECT_TRUE(isWait(gate, call == 0 ? kPlanCtxEntry : kPlanCtxCredit)) << "call " << call;
      EXPECT_EQ(gate.peer, q);
      auto entry =
          find(p, q, [&](const Op& op) { return isSignal(op, kPlanCtxEntry) && op.peer == r; });
      EXPECT_EQ(entry.size(), call == 0 ? 1u : 0u) << "call " << call << " r" << q << " -> r" << r;
    }
  }
  expectGood(plans);
  // r0's direct put to r2 first on its lane, not gated: it may land before r2 entered call 2.
  auto direct = find(plans[2], 0, [](const Op& op) { return isDirectPut(op) && op.peer == 2; });
  ASSERT_EQ(direct.size(), 1u);
  plans[2].ranks[0].ops[direct[0]].deps.clear();
  moveOp(plans[2], 0, direct[0], 0);
  expectCaught(plans, "before r2 entered call 2");
}

// Joined forwards (Options::joinForwardsBelow), 6 x 2 with small blocks: a relay's steps at one
// position forward together, each forward waiting for every data wait of its group (so the
// executor sends them as one batch). With 2 rounds a position a pair (joinForwardsSteps 2, the
// default) is the whole position; with 4 rounds (8 slots) pairs leave each forward waiting for
// two chunks, not four, and 0 joins the whole position. Without the option a forward waits for
// its own chunk only. The plans verify either way, over consecutive calls.
TEST(Planner, SmallChunksAtOnePositionForwardTogether) {
  const Topology t = Topology::blocks(6, 2);
  const auto b = counts(12, [](int s, int d) { return 5 + (s * 3 + d) % 4; });
  struct Shape {
    uint64_t below;
    int steps, rounds, slots;
    size_t waitsEach;  // data waits of its position each forward waits for
  };
  for (const Shape& sh : {Shape{0, 2, 2, 4, 1}, Shape{1024, 2, 2, 4, 2}, Shape{1024, 0, 4, 8, 4},
                          Shape{1024, 2, 4, 8, 2}}) {
    SCOPED_TRACE(strprintf("below %llu, steps %d, %d rounds a position",
                           (unsigned long long)sh.below, sh.steps, sh.rounds));
    Options o = opts(64, sh.slots);
    o.roundsPerBatch = sh.rounds;
    o.joinForwardsBelow = sh.below;
    o.joinForwardsSteps = sh.steps;
    std::vector<Plan> plans = planCalls(t, {b, b, b}, o);
    expectGood(plans);
    int joinedPositions = 0;
    std::map<size_t, int> forwardsWaitingFor;  // data waits of its position -> forwards
    for (const Plan& p : plans)
      for (int r = 0; r < 12; ++r) {
        const auto& ops = p.ranks[r].ops;
        auto data = find(p, r, [](const Op& op) { return isWait(op, kPlanCtxColl) && op.sigIdx == kSigRelay; });
        auto fwds = find(p, r, [](const Op& op) {
          return op.kind == OpKind::kPut && op.src.region == Region::kRelay;
        });
        std::map<int, std::vector<int>> dataAt;  // batch -> the relay's data waits there
        for (int d : data) dataAt[ops[d].batch].push_back(d);
        for (auto& [batch, ds] : dataAt) joinedPositions += ds.size() > 1;
        for (int f : fwds) {
          const auto& deps = ops[f].deps;
          size_t waits = 0;
          for (int d : dataAt[ops[f].batch])
            waits += std::find(deps.begin(), deps.end(), d) != deps.end();
          // A position's last step may be alone (an odd count), or the position one step.
          if (dataAt[ops[f].batch].size() >= sh.waitsEach) ++forwardsWaitingFor[waits];
        }
      }
    EXPECT_GT(joinedPositions, 0) << "no position holds two steps of one relay";
    for (auto& [waits, n] : forwardsWaitingFor)
      EXPECT_LE(waits, sh.waitsEach) << n << " forwards wait for " << waits << " chunks";
    EXPECT_GT(forwardsWaitingFor[sh.waitsEach], 0) << "no forward waits for " << sh.waitsEach;
  }
}

// Quiet puts (Options::quietPuts), 2 x 3 with slots of 8 bytes, so that relays forward each
// block in several chunks: of a rank's CE puts with data to one node-mate only the last in its
// lane writes the data signal, the others leave their count to it; the receiver's one
// completion wait per source is unchanged. Off, every such put writes. Both verify over calls.
TEST(Planner, OnlyTheLastPutToEachNodeMateWritesItsSignal) {
  const Topology t = Topology::blocks(2, 3);
  const auto b = counts(6, [](int s, int d) { return 9 + (s + 2 * d) % 5; });
  for (bool quiet : {true, false}) {
    SCOPED_TRACE(quiet ? "quiet puts" : "every put signals");
    Options o = opts(8, 4);
    o.quietPuts = quiet;
    std::vector<Plan> plans = planCalls(t, {b, b}, o);
    expectGood(plans);
    int quietOnes = 0;
    for (int r = 0; r < 6; ++r) {
      const auto& ops = plans[0].ranks[r].ops;
      std::map<int, std::vector<int>> toPeer;  // node-mate -> its CE data puts, in lane order
      for (int i : find(plans[0], r, [](const Op& op) {
             return op.kind == OpKind::kPut && op.lane == Lane::kCePut && op.bytes > 0;
           }))
        toPeer[ops[i].peer].push_back(i);
      for (auto& [peer, puts] : toPeer) {
        for (size_t k = 0; k < puts.size(); ++k) {
          const bool last = k + 1 == puts.size();
          EXPECT_EQ(ops[puts[k]].quiet, quiet && !last) << formatOp(ops[puts[k]], r, puts[k]);
          quietOnes += ops[puts[k]].quiet;
        }
        // One completion wait at the peer for all of them (and the rank's forwards' too).
        auto waits = find(plans[0], peer, [&](const Op& op) {
          return isDataWait(op) && op.peer == r;
        });
        ASSERT_EQ(waits.size(), 1u);
        EXPECT_EQ(plans[0].ranks[peer].ops[waits[0]].count, puts.size());
      }
    }
    if (quiet) EXPECT_GT(quietOnes, 6);
    else EXPECT_EQ(quietOnes, 0);
  }
}

// Relay release (Options::releaseRelayUpTo), 2 x 2, two slots of 4 bytes, rounds cut into 2
// chunks: every relay sends its writer one release per call and the writer waits for it among
// its completion waits; from the second call on, the first two relay steps of a call (the
// released ones) wait for no credit, the later ones for carried and in-call credits as before.
// Without the release (and the writer's wait for it) the verifier finds the next call's first
// step overwriting bytes the relay has not forwarded yet.
TEST(Planner, ReleaseFreesTheNextCallsFirstSteps) {
  const Topology t = Topology::blocks(2, 2);
  const Options o = releasing(4, 2, 2);
  ASSERT_EQ(releasedSteps(o), 2u);
  const auto b = counts(4, [](int s, int d) { return 6 + (s + d) % 3; });
  std::vector<Plan> plans = planCalls(t, {b, b, b, b}, o);
  auto release = [](const Op& op) { return op.ctx == kPlanCtxCredit && op.sigIdx == kSigRelease; };
  for (size_t call = 0; call < plans.size(); ++call) {
    const Plan& p = plans[call];
    for (int r = 0; r < 4; ++r) {
      const int q = r ^ 2;  // r's rail peer on the other node: its relay and its writer
      auto sent = find(p, r, [&](const Op& op) { return release(op) && op.kind == OpKind::kPut; });
      auto waits = find(p, r, [&](const Op& op) { return release(op) && op.kind == OpKind::kWait; });
      ASSERT_EQ(sent.size(), 1u);
      ASSERT_EQ(waits.size(), 1u);
      EXPECT_EQ(p.ranks[r].ops[sent[0]].peer, q);
      EXPECT_EQ(p.ranks[r].ops[waits[0]].peer, q);
      EXPECT_EQ(p.ranks[r].ops[waits[0]].lane, Lane::kCeWait);
      // One relay step of 2..4 bytes a call, cut in two: both released, no credit waits.
      EXPECT_TRUE(find(p, r, [](const Op& op) { return isWait(op, kPlanCtxCredit) &&
                                                       op.sigIdx == kSigStep; }).empty())
          << "call " << call << " r" << r;
    }
  }
  expectGood(plans);
  // Call 2 without r2's release to r0 and r0's wait for it: r0 enters call 3 and writes its
  // first step into slot 0 while r2 may still hold call 2's bytes there (lazy forwards).
  std::vector<Plan> broken = plans;
  auto sent = find(broken[2], 2, [&](const Op& op) { return release(op) && op.kind == OpKind::kPut; });
  auto wait = find(broken[2], 0, [&](const Op& op) { return release(op) && op.kind == OpKind::kWait; });
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_EQ(wait.size(), 1u);
  eraseOp(broken[2], 2, sent[0]);
  eraseOp(broken[2], 0, wait[0]);
  expectCaught(broken, "unforwarded");
}

// The release goes to one writer (4 x 2, rounds cut into 2 chunks, 4 slots): each relay's first
// writer of round 1, whose chunks are the next call's first steps there. From the second call
// that writer's two steps wait for no credit, the other writers' steps for carried and in-call
// credits as before. Where the first writer puts nothing into the relay in a call, the next
// writer's first steps take the freed slots' places and keep their credits. (That a missing
// release is caught: ReleaseFreesTheNextCallsFirstSteps, on 2 nodes, where the verifier's lazy
// forwards are sure to leave the freed slots' bytes unforwarded.)
TEST(Planner, ReleaseGoesToTheRelaysFirstWriterOfRoundOne) {
  const Topology t = Topology::blocks(4, 2);
  const Options o = releasing(8, 4, 4);
  const auto b = counts(8, [](int s, int d) { return 6 + (s + d) % 3; });
  // Call 2: r0 (node 0) sends nothing to r3, the block r0's round-1 relay r2 would forward.
  auto holed = b;
  holed[3] = 0;
  std::vector<Plan> plans = planCalls(t, {b, b, holed, b}, o);
  expectGood(plans);
  auto release = [](const Op& op) { return op.ctx == kPlanCtxCredit && op.sigIdx == kSigRelease; };
  auto stepCredit = [](const Op& op) { return isWait(op, kPlanCtxCredit) && op.sigIdx == kSigStep; };
  for (size_t call = 0; call < plans.size(); ++call) {
    const Plan& p = plans[call];
    for (int r = 0; r < 8; ++r) {
      const int node = t.nodeOf(r);
      const int first = t.rankAt(t.recvNode(node, 1), t.localRankOf(r));  // r as a relay
      const int relay1 = t.railPeer(r, t.sendNode(node, 1));             // r as a writer
      auto sent = find(p, r, [&](const Op& op) { return release(op) && op.kind == OpKind::kPut; });
      auto waits = find(p, r, [&](const Op& op) { return release(op) && op.kind == OpKind::kWait; });
      ASSERT_EQ(sent.size(), 1u) << "call " << call << " r" << r;
      ASSERT_EQ(waits.size(), 1u) << "call " << call << " r" << r;
      EXPECT_EQ(p.ranks[r].ops[sent[0]].peer, first);
      EXPECT_EQ(p.ranks[r].ops[waits[0]].peer, relay1);
      // Credit waits per relay of this writer. Six steps a relay and call (three rounds of two
      // chunks); the window is the 4 slots. Call 0: fresh relays, only round 3's chunks wait.
      // Later calls: round 1's two released, rounds 2 and 3 wait (carried, then in-call). In
      // call 2 r0 puts nothing into r2; in call 3 its chunks there are released again (the
      // release of call 2 went to r0 all the same).
      for (int k = 1; k < 4; ++k) {
        const int relay = t.railPeer(r, t.sendNode(node, k));
        auto credits = find(p, r, [&](const Op& op) { return stepCredit(op) && op.peer == relay; });
        const bool hole = call == 2 && r == 0 && k == 1;
        const size_t want = call == 0 ? (k == 3 ? 2u : 0u) : (k == 1 ? 0u : 2u);
        EXPECT_EQ(credits.size(), hole ? 0u : want) << "call " << call << " r" << r << " round " << k;
      }
    }
  }
  // Call 2 at r2: its first writer r0 put nothing, so the round-2 writer's first steps, which
  // come first, are not released: they wait for credits carried from r2's start of the call.
  const int w2 = t.rankAt(t.recvNode(1, 2), 0);
  ASSERT_EQ(t.railPeer(w2, 1), 2);
  EXPECT_EQ(find(plans[2], w2, [&](const Op& op) { return stepCredit(op) && op.peer == 2; }).size(),
            2u);
}

// Where relays release themselves (3 x 2, rounds cut into 2 chunks), a rank's signals without
// deps to peers its first relay put does not go to (entry signals to the writers of later
// rounds, carried credits) leave after that put: it waits for no credit, and the proxy issues
// in lane order. Those to that put's own peer stay ahead of it: a signal does not pass data to
// its own peer (plan_build.h earlySignalPhase).
TEST(Planner, SignalsToOtherPeersFollowTheFirstRelayPutWhereRelaysRelease) {
  const Topology t = Topology::blocks(3, 2);
  Options o = releasing(8, 4, 3);
  o.entryLead = 1;
  const auto b = counts(6, [](int s, int d) { return 6 + (s + d) % 3; });
  std::vector<Plan> plans = planCalls(t, {b, b, b}, o);
  expectGood(plans);
  for (int r = 0; r < 6; ++r) {
    const auto& ops = plans[2].ranks[r].ops;
    auto first = std::find_if(ops.begin(), ops.end(), [](const Op& op) {
      return op.lane == Lane::kProxyPut && op.kind == OpKind::kPut && op.dst.region == Region::kRelay;
    });
    ASSERT_NE(first, ops.end()) << "r" << r;
    int moved = 0, kept = 0;
    for (auto it = ops.begin(); it != ops.end(); ++it) {
      if (it->lane != Lane::kProxyPut || it->kind != OpKind::kPut || it->bytes || !it->deps.empty())
        continue;
      if (it < first) EXPECT_EQ(it->peer, first->peer) << "r" << r << " op #" << it - ops.begin();
      kept += it < first;
      moved += it > first && it->peer != first->peer && it->batch == first->batch;
    }
    EXPECT_GT(moved, 0) << "r" << r;
    EXPECT_GT(kept, 0) << "r" << r;  // carried credits to the round-2 writer, its round-1 relay
  }
}

TEST(Planner, SplitsPutsAtMaxPutBytes) {
  Plan p = planOf(Topology::blocks(2, 2), counts(4, [](int, int) { return 10; }), opts(8, 2, 3));
  for (int r = 0; r < 4; ++r)
    for (const Op& op : p.ranks[r].ops) {
      if (op.kind == OpKind::kPut) EXPECT_LE(op.bytes, 3u);
    }
  // r0's 10 bytes for r1: pieces of 3, 3, 3, 1 at offsets 0, 3, 6, 9.
  auto intra = find(p, 0, [](const Op& op) { return isDirectPut(op) && op.peer == 1; });
  ASSERT_EQ(intra.size(), 4u);
  EXPECT_EQ(p.ranks[0].ops[intra[3]].src.offset, 9u);
  EXPECT_EQ(p.ranks[0].ops[intra[3]].bytes, 1u);
  // r1 counts every piece from r0: 4 direct pieces plus r0's forwards of r2's 10 bytes
  // (chunks of 8 + 2: pieces 3, 3, 2 and 2).
  auto fin = find(p, 1, [](const Op& op) { return isDataWait(op) && op.peer == 0; });
  ASSERT_EQ(fin.size(), 1u);
  EXPECT_EQ(p.ranks[1].ops[fin[0]].count, 8u);
  expectGood({p});
}

// 3 nodes x 2, 4-byte slots, 2 slots. Relay r2 = (1,0) takes round 1 from r0 and round 2 from
// r4; its steps run on across calls, and a step whose slot was last used in an earlier call
// gets a carried credit (sent at the start, no deps) from r2 to that step's writer.
TEST(Planner, CarriesStepsAndCreditsAcrossCalls) {
  const Topology t = Topology::blocks(3, 2);
  ASSERT_EQ(t.recvNode(1, 1), 0);
  ASSERT_EQ(t.recvNode(1, 2), 2);
  auto shape = [](uint64_t from0, uint64_t from4) {
    auto b = counts(6, [](int, int) { return 0; });
    b[0 * 6 + 3] = from0;
    b[4 * 6 + 3] = from4;
    return b;
  };
  std::vector<Plan> plans = planCalls(t, {shape(10, 0), shape(0, 6), shape(4, 8)}, opts(4, 2));
  EXPECT_EQ(plans[0].after.relaySteps[2], 3u);
  EXPECT_EQ(plans[1].after.relaySteps[2], 5u);
  EXPECT_EQ(plans[2].after.relaySteps[2], 8u);
  // (writer, carried) of r2's credits in each call.
  auto credits = [](const Plan& p) {
    std::vector<std::pair<int, bool>> out;
    for (const Op& op : p.ranks[2].ops)
      if (isSignal(op, kPlanCtxCredit)) out.push_back({op.peer, op.deps.empty()});
    return out;
  };
  using V = std::vector<std::pair<int, bool>>;
  EXPECT_EQ(credits(plans[0]), (V{{0, false}}));               // step 2 <- step 0
  EXPECT_EQ(credits(plans[1]), (V{{4, true}, {4, true}}));     // steps 3, 4 <- 1, 2
  EXPECT_EQ(credits(plans[2]), (V{{0, true}, {4, true}, {4, false}}));  // 5<-3, 6<-4, 7<-5
  // Step 5 is r0's only step, in slot 1 at relay+4.
  auto toRelay = find(plans[2], 0, [](const Op& op) { return op.dst.region == Region::kRelay; });
  ASSERT_EQ(toRelay.size(), 1u);
  EXPECT_EQ(plans[2].ranks[0].ops[toRelay[0]].dst.offset, 4u);
  expectGood(plans);
  expectGood({plans[1]});  // a call on its own, from its carry, verifies too
}

// Fitted slots (Options::fitSlotsFrom): 3 nodes x 2, 4 slots of 16 bytes. A call whose payloads
// all fit 8 bytes gets 8 slots of 8; one with a larger payload keeps 4 of 16; chunk counts are
// the same either way. Every relay step waits for a credit, the first window of a relay's
// steps in a call for one sent at the start (with another geometry a slot may hold an earlier
// call's bytes): the sequence verifies, and without such a credit wait the verifier finds the
// overwrite.
TEST(Planner, FittedSlotsFollowTheLargestPayloadAndCreditEveryStep) {
  const Topology t = Topology::blocks(3, 2);
  Options o = opts(16, 4);
  o.fitSlotsFrom = 2;
  auto shape = [](uint64_t size) {
    return counts(6, [size](int s, int d) { return s == d ? 0 : size + (uint64_t)(s + d) % 3; });
  };
  const std::vector<uint64_t> sizes = {3, 12, 6, 2, 14};  // payloads (one block each) 3..16
  std::vector<std::vector<uint64_t>> calls;
  for (uint64_t size : sizes) calls.push_back(shape(size));
  std::vector<Plan> plans = planCalls(t, calls, o);
  const std::vector<int> slots = {8, 4, 8, 8, 4};
  for (size_t c = 0; c < plans.size(); ++c) {
    EXPECT_EQ(plans[c].options.slots, slots[c]) << "call " << c;
    EXPECT_EQ(plans[c].options.slots * plans[c].options.slotBytes, 64u);
    for (int r = 0; r < 6; ++r) {  // one relay step per round: a credit wait for each
      const auto waits = find(plans[c], r, [](const Op& op) { return isWait(op, kPlanCtxCredit); });
      EXPECT_EQ(waits.size(), 2u) << "call " << c << " r" << r;
    }
  }
  expectGood(plans);
  // Remove r2's first credit wait of call 2 and the carried credit its relay r4 sends for it:
  // the step goes to an 8-byte slot that a 16-byte slot of call 1 overlaps, and r4 may not have
  // forwarded call 1's bytes there yet when it lands (the verifier lets r2 enter call 2 before
  // r4's held-back forwards run).
  std::vector<Plan> broken = plans;
  auto waits = find(broken[2], 2, [](const Op& op) { return isWait(op, kPlanCtxCredit); });
  ASSERT_FALSE(waits.empty());
  const int relay = broken[2].ranks[2].ops[waits[0]].peer;
  ASSERT_EQ(relay, 4);
  auto carried = find(broken[2], relay, [](const Op& op) {
    return isSignal(op, kPlanCtxCredit) && op.peer == 2 && op.deps.empty();
  });
  ASSERT_FALSE(carried.empty());
  eraseOp(broken[2], 2, waits[0]);
  eraseOp(broken[2], relay, carried[0]);
  expectCaught(broken, "unforwarded");
}

// Deeper fitting (Options::fitWindowBytes = 64), 3 nodes x 2, 4 slots of 64 bytes: payloads of
// 3 bytes halve the slots to the cap of 8 x 4 = 32 slots of 8; of 6 bytes to 16 slots of 16
// (16 x 6 bytes reach the window); of 12 bytes once, to 8 of 32 (8 x 12 reach it); of 40 bytes
// not at all. The calls, each in its own geometry, verify in sequence.
TEST(Planner, FittingHalvesAgainWhileTheSlotsHoldLittle) {
  const Topology t = Topology::blocks(3, 2);
  Options o = opts(64, 4);
  o.fitSlotsFrom = 2;
  o.fitWindowBytes = 64;
  struct Case {
    uint64_t payload;
    int slots;
  };
  const std::vector<Case> cases = {{3, 32}, {6, 16}, {12, 8}, {40, 4}, {6, 16}, {3, 32}};
  std::vector<std::vector<uint64_t>> calls;
  for (const Case& c : cases)
    calls.push_back(counts(6, [&](int s, int d) { return s == d ? 0 : c.payload; }));
  std::vector<Plan> plans = planCalls(t, calls, o);
  for (size_t c = 0; c < cases.size(); ++c) {
    EXPECT_EQ(plans[c].options.slots, cases[c].slots) << "call " << c;
    EXPECT_EQ(callOptions(o, cases[c].payload, 3).slots, cases[c].slots);
    EXPECT_EQ(plans[c].options.slots * plans[c].options.slotBytes, 256u);
  }
  expectGood(plans);
  o.fitWindowBytes = 0;  // one halving, as before
  EXPECT_EQ(callOptions(o, 3, 3).slots, 8);
}

// Deep fitting (Options::deepFitBelow = 8), 18 nodes x 2 (17 rounds), 2 slots of 64 bytes and
// no window: a payload of 3 bytes halves once to 4 slots (fitting) and again to 8, as 17 rounds
// outnumber 4 x 4 but not 4 x 8; one of 10 bytes stays at 4; so does 3 bytes with 9 rounds.
TEST(Planner, FittingDeepensForSmallPayloadsWhileRoundsOutnumberTheSlots) {
  const Topology t = Topology::blocks(18, 2);
  Options o = opts(64, 2);
  o.fitSlotsFrom = 2;
  o.deepFitBelow = 8;
  std::vector<std::vector<uint64_t>> calls;
  for (uint64_t payload : {3, 10, 3})
    calls.push_back(counts(36, [&](int s, int d) { return s == d ? 0 : payload; }));
  std::vector<Plan> plans = planCalls(t, calls, o);
  EXPECT_EQ(plans[0].options.slots, 8);
  EXPECT_EQ(plans[1].options.slots, 4);
  EXPECT_EQ(plans[2].options.slots, 8);
  expectGood(plans);
  EXPECT_EQ(callOptions(o, 3, 18).slots, 8);
  EXPECT_EQ(callOptions(o, 3, 10).slots, 4);
  o.deepFitBelow = 0;
  EXPECT_EQ(callOptions(o, 3, 18).slots, 4);
}

TEST(Planner, BarrierModeHasNoEntrySignals) {
  Options o = opts(16, 2);
  o.entrySignals = false;
  Plan p = planOf(Topology::blocks(3, 3), counts(9, [](int s, int d) { return 5 + s * d; }), o);
  for (int r = 0; r < 9; ++r) {
    EXPECT_TRUE(find(p, r, [](const Op& op) { return op.ctx == kPlanCtxEntry; }).empty());
  }
  expectGood({p, planOf(p.topo, p.bytes, o, p.after)});
}

}  // namespace
}  // namespace rmacc::plan
