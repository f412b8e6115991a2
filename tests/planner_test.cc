// Hand-checked plans of small shapes: copy engines on one node, direct puts, relays, chunks,
// credits and entry signals.
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

static_assert(rmacc::plan::kPlanCtxColl == rmacc::kCtxColl, "plan and net disagree on kCtxColl");
static_assert(rmacc::plan::kPlanCtxCredit == rmacc::kCtxCredit, "kCtxCredit differs");
static_assert(rmacc::plan::kPlanCtxEntry == rmacc::kCtxEntry, "kCtxEntry differs");
static_assert(rmacc::plan::kPlanNumContexts >= rmacc::kNumContexts, "too few contexts");

namespace rmacc::plan {
namespace {

using namespace fixture;

TEST(Planner, RejectsBadArguments) {
  const Topology t = Topology::blocks(2, 2);
  const auto b = counts(4, [](int, int) { return 8; });
  auto code = [&](const std::vector<uint64_t>& bytes, const Options& o, const Carry& c) {
    try {
      makeAlltoallvPlan(t, bytes, o, c);
    } catch (const Error& e) {
      return e.code();
    }
    return rmaccSuccess;
  };
  EXPECT_EQ(code(std::vector<uint64_t>(15, 1), opts(), {}), rmaccInvalidArgument);
  EXPECT_EQ(code(b, opts(64, 1), {}), rmaccInvalidArgument);
  EXPECT_EQ(code(b, opts(0, 2), {}), rmaccInvalidArgument);
  EXPECT_EQ(code(b, opts(64, 2, 0), {}), rmaccInvalidArgument);
  EXPECT_EQ(code(b, opts(), Carry{{1, 2}}), rmaccInvalidArgument);
  EXPECT_EQ(code(b, opts(), Carry{{0, 0, 0, 0}}), rmaccSuccess);
}

TEST(Planner, OneRankCopiesItsOwnBlock) {
  Plan p = planOf(Topology::blocks(1, 1), {100}, opts());
  ASSERT_EQ(p.ranks[0].ops.size(), 1u);
  EXPECT_EQ(p.dump(0).substr(p.dump(0).find('\n') + 1),
            "r0 b0 cePut #0 copy recv[0]+0 <- send[0]+0 100B\n");
  EXPECT_EQ(p.nBatches, 1);
  EXPECT_EQ(p.relayBytes, 0u);
  expectGood({p});
  Plan empty = planOf(Topology::blocks(1, 1), {0}, opts());
  EXPECT_TRUE(empty.ranks[0].ops.empty());
  EXPECT_EQ(empty.nBatches, 0);
  expectGood({empty});
}

TEST(Planner, OneNodeIsCopyEnginesOnly) {
  Plan p = planOf(Topology::blocks(1, 8), counts(8, [](int s, int d) { return 1000 + s + d; }),
                  opts());
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(countLane(p, r, Lane::kProxyPut) + countLane(p, r, Lane::kProxyWait), 0);
    // 7 entry signals, 7 puts and a copy; 7 entry waits and 7 completion waits.
    EXPECT_EQ(countLane(p, r, Lane::kCePut), 15);
    EXPECT_EQ(countLane(p, r, Lane::kCeWait), 14);
  }
  // Rotated order: rank 3 puts to 4, 5, 6, 7, 0, 1, 2, then copies to itself.
  std::vector<int> peers;
  for (int i : find(p, 3, isData)) peers.push_back(p.ranks[3].ops[i].peer);
  EXPECT_EQ(peers, (std::vector<int>{4, 5, 6, 7, 0, 1, 2, 3}));
  EXPECT_EQ(p.nBatches, 1);
  EXPECT_EQ(p.relayBytes, 0u);
  expectGood({p});
}

// A rank's completion waits on other nodes' ranks whose last data comes at one position are in
// the order of the node rounds that data comes in (plan_build.h finalWaitOrder), for either
// round order: the position's direct puts land round after round, and a wait on the last of
// them first would leave the others' ~0.9 us each after it (docs/decisions.md#completion-waits).
TEST(Planner, RemoteCompletionWaitsFollowTheRounds) {
  for (bool paired : {false, true}) {
    Topology t = Topology::blocks(12, 2);
    if (paired) t.setRoundDeltas(Topology::pairedRoundDeltas(12));
    Plan p = planOf(t, counts(24, [](int, int) { return 4096; }), opts(1 << 20, 8));
    for (int r : {0, 5, 23}) {
      int lastBatch = -1, lastRound = -1, checked = 0;
      for (int i : find(p, r, isDataWait)) {
        const Op& op = p.ranks[r].ops[i];
        if (t.sameNode(op.peer, r)) continue;
        const int round = t.recvRound(t.nodeOf(r), t.nodeOf(op.peer));
        EXPECT_EQ(t.recvNode(t.nodeOf(r), round), t.nodeOf(op.peer));
        if (op.batch == lastBatch) {
          EXPECT_GT(round, lastRound) << "rank " << r << (paired ? ", paired" : "");
          ++checked;
        }
        lastBatch = op.batch;
        lastRound = round;
      }
      EXPECT_GT(checked, 0) << "no position with two remote sources' last data";
    }
    expectGood({p});
  }
}

TEST(Planner, OneRankPerNodeIsDirectOnly) {
  const Topology t = Topology::blocks(8, 1);
  Plan p = planOf(t, counts(8, [](int s, int d) { return 10 * s + d + 1; }), opts());
  EXPECT_EQ(p.relayBytes, 0u);
  EXPECT_EQ(p.nBatches, 7);  // one per node round
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(countLane(p, r, Lane::kCePut), 1);  // the copy
    auto puts = find(p, r, [](const Op& op) { return op.kind == OpKind::kPut && op.bytes > 0; });
    ASSERT_EQ(puts.size(), 7u);
    for (int k = 1; k < 8; ++k) {  // round k goes to sendNode(r, k), in batch k-1
      const Op& op = p.ranks[r].ops[puts[k - 1]];
      EXPECT_EQ(op.peer, t.sendNode(r, k));
      EXPECT_EQ(op.batch, k - 1);
      EXPECT_EQ(op.dst.region, Region::kRecv);
      EXPECT_EQ(op.sigIdx, kSigData);
    }
  }
  expectGood({p});
}

// 2 nodes x 2: r0 = (0,0), r1 = (0,1), r2 = (1,0), r3 = (1,1); bytes[s][d] = 100(s+1) + d.
TEST(Planner, TwoByTwoHandChecked) {
  Plan p = planOf(Topology::blocks(2, 2), counts(4, [](int s, int d) { return 100 * (s + 1) + d; }),
                  opts());
  const std::string d = p.dump(0);
  EXPECT_EQ(d.substr(d.find('\n') + 1),
            "r0 b0 cePut #0 -> r1 0B sig(entry,0)\n"
            "r0 b0 proxyPut #1 -> r2 0B sig(entry,0)\n"
            "r0 b0 ceWait #2 <- r1 sig(entry,0) x1\n"
            "r0 b0 proxyWait #3 <- r2 sig(entry,0) x1\n"
            "r0 b0 cePut #4 -> r1 recv[0]+0 <- send[1]+0 101B sig(coll,data) quiet deps{2}\n"
            "r0 b0 cePut #5 copy recv[0]+0 <- send[0]+0 100B\n"
            "r0 b0 proxyPut #6 -> r2 relay+0 <- send[3]+0 103B sig(coll,relay)\n"
            "r0 b0 proxyPut #7 -> r2 recv[0]+0 <- send[2]+0 102B sig(coll,data) deps{3}\n"
            "r0 b1 proxyWait #8 <- r2 sig(coll,relay) x1\n"
            "r0 b1 cePut #9 -> r1 recv[2]+0 <- relay+0 301B sig(coll,data) deps{2,8}\n"
            "r0 b0 ceWait #10 <- r2 sig(coll,data) x1\n"
            "r0 b1 ceWait #11 <- r1 sig(coll,data) x2\n");
  EXPECT_EQ(p.nBatches, 2);
  EXPECT_EQ(p.relayBytes, 2u << 20);
  EXPECT_EQ(p.after.relaySteps, (std::vector<uint64_t>{1, 1, 1, 1}));
  expectGood({p});
}

// 3 nodes x 4. Relay r5 = (1,1) gets round 1 from r1 = (0,1) and round 2 from r9 = (2,1)
// (deltas 0,1,2). r1's blocks for node 1: r4 30 B, r5 99 B (direct), r6 empty, r7 20 B; the
// payload runs from r5's successor on (payloadLocal): r6, r7, r4.
TEST(Planner, RelayPacksBlocksFromTheRelaysSuccessorOn) {
  const Topology t = Topology::blocks(3, 4);
  auto b = counts(12, [](int s, int d) { return (uint64_t)(s * 7 + d * 3) % 11 + 1; });
  b[1 * 12 + 4] = 30;
  b[1 * 12 + 5] = 99;
  b[1 * 12 + 6] = 0;
  b[1 * 12 + 7] = 20;
  const uint64_t slot = 4096;
  Plan p = planOf(t, b, opts(slot, 3));
  ASSERT_EQ(t.recvNode(1, 1), 0);
  ASSERT_EQ(t.recvNode(1, 2), 2);
  auto toRelay = find(p, 1, [](const Op& op) { return op.dst.region == Region::kRelay; });
  std::vector<std::string> got;
  for (int i : toRelay) {
    const Op& op = p.ranks[1].ops[i];
    if (op.peer == 5) got.push_back(formatOp(op, 1, i).substr(formatOp(op, 1, i).find("->")));
  }
  // One put gathers both blocks (r6's is empty, r5's own goes direct) and signals once.
  EXPECT_EQ(got, (std::vector<std::string>{
                     "-> r5 relay+0 <- gather{send[7]+0 20B, send[4]+0 30B} 50B sig(coll,relay)"}));
  // r5 forwards the two blocks, then round 2's payload from r9 in slot 1.
  auto fwd = find(p, 5, [](const Op& op) { return op.src.region == Region::kRelay; });
  ASSERT_GE(fwd.size(), 3u);
  const Op& f0 = p.ranks[5].ops[fwd[0]];
  const Op& f1 = p.ranks[5].ops[fwd[1]];
  EXPECT_EQ(f0.peer, 7);
  EXPECT_EQ(f0.dst.block, 1);
  EXPECT_EQ(f1.peer, 4);
  EXPECT_EQ(f1.src.offset, 20u);
  for (size_t k = 2; k < fwd.size(); ++k) {
    EXPECT_EQ(p.ranks[5].ops[fwd[k]].dst.block, 9);
    EXPECT_GE(p.ranks[5].ops[fwd[k]].src.offset, slot);
  }
  auto waits = find(p, 5, isRelayWait);
  ASSERT_EQ(waits.size(), 2u);
  EXPECT_EQ(p.ranks[5].ops[waits[0]].peer, 1);
  EXPECT_EQ(p.ranks[5].ops[waits[0]].count, 1u);
  EXPECT_EQ(p.ranks[5].ops[waits[1]].peer, 9);
  EXPECT_EQ(p.after.relaySteps[5], 2u);
  expectGood({p});
}

// 2 x 2 with 4-byte slots, 2 slots: r0's 10 bytes for r3 go through r2 as steps 0, 1, 2
// (4 + 4 + 2 bytes) in slots 0, 1, 0; step 2 waits for r2's credit after step 0's forward.
TEST(Planner, ChunksAndCreditsWithTinySlots) {
  auto b = counts(4, [](int, int) { return 0; });
  b[0 * 4 + 3] = 10;
  Plan p = planOf(Topology::blocks(2, 2), b, opts(4, 2));
  auto puts = find(p, 0, isData);
  ASSERT_EQ(puts.size(), 3u);
  const auto& ops0 = p.ranks[0].ops;
  EXPECT_EQ(ops0[puts[0]].dst.offset, 0u);
  EXPECT_EQ(ops0[puts[1]].dst.offset, 4u);
  EXPECT_EQ(ops0[puts[2]].dst.offset, 0u);
  EXPECT_EQ(ops0[puts[2]].bytes, 2u);
  EXPECT_EQ(ops0[puts[2]].src.offset, 8u);
  EXPECT_EQ((std::vector<int>{ops0[puts[0]].batch, ops0[puts[1]].batch, ops0[puts[2]].batch}),
            (std::vector<int>{0, 1, 2}));
  auto creditWait = find(p, 0, [](const Op& op) { return isWait(op, kPlanCtxCredit); });
  ASSERT_EQ(creditWait.size(), 1u);
  EXPECT_EQ(ops0[puts[2]].deps, std::vector<int>{creditWait[0]});
  const auto& ops2 = p.ranks[2].ops;
  auto credit = find(p, 2, [](const Op& op) { return isSignal(op, kPlanCtxCredit); });
  auto fwd = find(p, 2, isData);
  ASSERT_EQ(credit.size(), 1u);
  ASSERT_EQ(fwd.size(), 3u);
  EXPECT_EQ(ops2[credit[0]].peer, 0);
  EXPECT_EQ(ops2[credit[0]].deps, std::vector<int>{fwd[0]});  // after step 0's forward
  EXPECT_EQ(p.nBatches, 4);
  EXPECT_EQ(p.relayBytes, 8u);
  EXPECT_EQ(p.after.relaySteps, (std::vector<uint64_t>{0, 0, 3, 0}));
  expectGood({p});
}

// Rounds whose busiest relay takes one slot share a batch, slots / 2 of them at most: 8 nodes
// x 2 with one-slot payloads has 7 rounds; 4 slots put them two to a batch (4 positions, 5
// batches with the last forwards) instead of 7 (8). Both verify, over two calls with carry.
TEST(Planner, SmallRoundsShareABatch) {
  const Topology t = Topology::blocks(8, 2);
  const auto b = counts(16, [](int s, int d) { return (uint64_t)(1 + (s * 7 + d) % 5); });
  for (int perBatch : {1, 0, 2, 9}) {
    Options o = opts(64, 4);
    o.roundsPerBatch = perBatch;
    const Plan p1 = planOf(t, b, o);
    const Plan p2 = planOf(t, b, o, p1.after);
    EXPECT_EQ(p1.nBatches, perBatch == 1 ? 8 : 5) << "roundsPerBatch " << perBatch;
    expectGood({p1, p2});
  }
  // A round of two chunks keeps positions of its own: rounds 1-2 share, 3 (two chunks) does
  // not, 4-5 share, 6-7 share.
  Options o = opts(64, 4);
  EXPECT_EQ(roundBases({0, 1, 1, 2, 1, 1, 0, 1}, o), (std::vector<int>{0, 0, 0, 1, 3, 3, 4, 4, 5}));
  o.slots = 3;  // 3 / 2 = one round per batch
  EXPECT_EQ(roundBases({0, 1, 1, 1}, o), (std::vector<int>{0, 0, 1, 2, 3}));
}

// A relay's credit waits for its forwards of the previous chunk; the same rank's proxy puts of
// that batch do not. On the proxy-put lane (one stream, in order) the credit must therefore come
// after them, or every rank's next puts queue behind its own forwards and the NIC idles for a
// forward's time each step (rmacc-sim: 8 nodes x 8 at 256 MiB, 0.86 -> 0.93 of the bound).
TEST(Planner, CreditsDoNotHoldUpTheBatchsPuts) {
  const Topology topo = Topology::blocks(4, 2);
  auto b = counts(8, [](int s, int d) { return s == d ? 0 : 64; });
  Plan p = planOf(topo, b, opts(64, 2));
  int credits = 0;
  for (int r = 0; r < 8; ++r) {
    std::vector<int> creditBatches;
    for (const Op& op : p.ranks[r].ops) {
      if (op.lane != Lane::kProxyPut) continue;
      if (isSignal(op, kPlanCtxCredit)) {
        creditBatches.push_back(op.batch);
        ++credits;
      } else if (op.bytes > 0) {
        for (int c : creditBatches)
          EXPECT_LT(c, op.batch) << "r" << r << ": a batch " << op.batch
                                 << " put queues behind a credit of the same batch";
      }
    }
  }
  EXPECT_GT(credits, 0);
  expectGood({p});
}

// A writer's credit wait gates only its next put into that relay, so it sits on the proxy-put
// lane right before the put. On the proxy-wait lane it would sit among the rank's relay-data
// waits (its own forwards'): a put would leave only once the rank's incoming chunk of the
// previous round had landed, and a late credit would hold up the rank's forwards. With 4 slots
// two small rounds share a position, and each round's put follows its own credit wait: with
// both waits first, a late credit for one round would hold up the other's put
// (docs/decisions.md#credit-wait-lane). The second call waits for a credit at every step.
TEST(Planner, CreditWaitsSitOnTheProxyPutLaneBeforeTheirPut) {
  const Topology topo = Topology::blocks(6, 2);
  const auto b = counts(12, [](int s, int d) { return s == d ? 0 : (uint64_t)(8 + s % 3); });
  for (const Options& o : {opts(8, 2), opts(64, 4)}) {
    const Plan first = planOf(topo, b, o), second = planOf(topo, b, o, first.after);
    int waits = 0;
    for (const Plan* p : {&first, &second}) {
      for (int r = 0; r < 12; ++r) {
        const auto& ops = p->ranks[r].ops;
        for (int i : find(*p, r, [](const Op& op) { return isWait(op, kPlanCtxCredit); })) {
          ++waits;
          EXPECT_EQ(ops[i].lane, Lane::kProxyPut) << "r" << r << " op " << i;
          int next = i + 1;
          while (next < (int)ops.size() && ops[next].lane != Lane::kProxyPut) ++next;
          ASSERT_LT(next, (int)ops.size());
          EXPECT_TRUE(isData(ops[next]) && ops[next].dst.region == Region::kRelay &&
                      ops[next].peer == ops[i].peer)
              << o.slots << " slots, r" << r << ": the op after credit wait " << i
              << " is not its relay put";
        }
      }
    }
    EXPECT_GT(waits, 0);
    expectGood({first, second});
  }
}

// Pacing (Options::creditWindow): with a window W below the slot count S, the writer of relay
// step t >= W waits for a credit that the relay sends after forwarding step t-W (and step t-S,
// when that is in this call), so a relay never holds more than W steps that it has not
// forwarded. 6 nodes x 2, one chunk per round: a relay takes 5 steps (0-4) per call. Without a
// window (S = 4) only step 4 waits, for step 0; with W = 3, steps 3 and 4 wait, step 4's credit
// for the forwards of steps 0 (reuse) and 1 (window). Three calls verify, carried credits
// included, and small rounds stop sharing positions (roundsPerBatch <= W / 2 = 1).
TEST(Planner, CreditWindowPacesRelayWriters) {
  const Topology topo = Topology::blocks(6, 2);
  const auto b = counts(12, [](int s, int d) { return s == d ? 0 : (uint64_t)(8 + s % 3); });
  for (int window : {0, 3, 2}) {
    Options o = opts(64, 4);
    o.creditWindow = window;
    const Plan p = planOf(topo, b, o);
    const int w = window == 0 ? 4 : window;
    EXPECT_EQ(creditWindow(o), w);
    EXPECT_EQ(roundsPerBatch(o), w / 2);
    for (int r = 0; r < 12; ++r) {
      const auto& ops = p.ranks[r].ops;
      auto credits = find(p, r, [](const Op& op) { return isSignal(op, kPlanCtxCredit); });
      auto waits = find(p, r, [](const Op& op) { return isWait(op, kPlanCtxCredit); });
      // Forwards in step order: each step forwards one block (to the relay's one node-mate).
      auto fwd =
          find(p, r, [](const Op& op) { return isData(op) && op.src.region == Region::kRelay; });
      ASSERT_EQ(fwd.size(), 5u) << "r" << r;
      ASSERT_EQ((int)credits.size(), 5 - w) << "window " << window << " r" << r;
      EXPECT_EQ((int)waits.size(), 5 - w) << "window " << window << " r" << r;
      for (int c = 0; c < (int)credits.size(); ++c) {
        const int t = w + c;
        std::vector<int> want{fwd[t - w]};
        if (t >= 4 && w < 4) want.insert(want.begin(), fwd[t - 4]);
        EXPECT_EQ(ops[credits[c]].deps, want) << "window " << window << " r" << r << " step " << t;
      }
    }
    const Plan p2 = planOf(topo, b, o, p.after);
    const Plan p3 = planOf(topo, b, o, p2.after);
    expectGood({p, p2, p3});
  }
}

// Entry signals to remote writers (Options::entryLead). 6 nodes x 2, one position per round:
// a rank's only write into a rank of another node is its direct put of the round that pairs
// the two nodes, and the entry wait it depends on sits at that put's batch, the signal entryLead
// batches earlier (batch 0 at the least), instead of every signal and wait at batch 0 (-1), where
// a rank's proxy sent all 5 remote signals before any put. Two calls verify for each lead.
TEST(Planner, RemoteEntrySignalsGoOutWithTheirRound) {
  const Topology topo = Topology::blocks(6, 2);
  const auto b = counts(12, [](int s, int d) { return s == d ? 0 : 64; });
  for (int lead : {-1, 0, 2}) {
    Options o = opts(64, 2);
    o.entryLead = lead;
    const Plan p = planOf(topo, b, o);
    for (int r = 0; r < 12; ++r) {
      const auto& ops = p.ranks[r].ops;
      auto direct =
          find(p, r, [](const Op& op) { return isDirectPut(op) && op.lane == Lane::kProxyPut; });
      ASSERT_EQ(direct.size(), 5u) << "r" << r;
      for (int i : direct) {
        const Op& put = ops[i];
        ASSERT_EQ(put.deps.size(), 1u);
        const Op& wait = ops[put.deps[0]];
        ASSERT_TRUE(isWait(wait, kPlanCtxEntry));
        EXPECT_EQ(wait.peer, put.peer);
        EXPECT_EQ(wait.batch, lead < 0 ? 0 : put.batch) << "lead " << lead << " r" << r;
        auto sig = find(p, put.peer, [&](const Op& op) {
          return isSignal(op, kPlanCtxEntry) && op.peer == r;
        });
        ASSERT_EQ(sig.size(), 1u);
        const int want = lead < 0 ? 0 : std::max(0, put.batch - lead);
        EXPECT_EQ(p.ranks[put.peer].ops[sig[0]].batch, want)
            << "lead " << lead << " r" << put.peer << " -> r" << r;
      }
      // With a lead the proxy's first data put comes before its last remote entry signal.
      auto proxy = find(p, r, [](const Op& op) { return op.lane == Lane::kProxyPut; });
      int lastEntry = -1, firstData = -1;
      for (int i : proxy) {
        if (isSignal(ops[i], kPlanCtxEntry)) lastEntry = i;
        if (isData(ops[i]) && firstData < 0) firstData = i;
      }
      EXPECT_EQ(firstData < lastEntry, lead >= 0) << "lead " << lead << " r" << r;
    }
    expectGood({p, planOf(topo, b, o, p.after)});
  }
}

// In a call with fitted slots every relay step waits for a credit, in the first window one
// carried from the relay's start, later ones sent after this call's forwards: each says the
// relay is in the call, so every remote writer's direct put depends on its credit wait and no
// remote entry signal is sent (11 nodes x 2: 10 relay steps a call against a window of 8). A
// call whose payloads do not fit half a slot keeps its entry signals past the first window.
TEST(Planner, FittedCallsTakeEveryFirstCreditAsTheEntry) {
  const Topology t = Topology::blocks(11, 2);
  Options o = opts(16, 4);
  o.fitSlotsFrom = 2;
  const auto b = [](uint64_t len) {
    return counts(22, [len](int s, int d) { return s == d ? 0 : len; });
  };
  const Plan fitted = planOf(t, b(4), o), wide = planOf(t, b(12), o, fitted.after);
  ASSERT_EQ(fitted.options.slots, 8);
  ASSERT_EQ(wide.options.slots, 4);
  auto remoteEntries = [&](const Plan& p) {
    int n = 0;
    for (int r = 0; r < 22; ++r)
      n += (int)find(p, r, [&](const Op& op) {
             return isSignal(op, kPlanCtxEntry) && !t.sameNode(op.peer, r);
           }).size();
    return n;
  };
  EXPECT_EQ(remoteEntries(fitted), 0);
  EXPECT_EQ(remoteEntries(wide), 22 * (10 - 4));  // rounds past the window of 4
  for (int r = 0; r < 22; ++r)
    for (int i : find(fitted, r, [&](const Op& op) {
           return isDirectPut(op) && op.lane == Lane::kProxyPut;
         })) {
      const Op& put = fitted.ranks[r].ops[i];
      ASSERT_EQ(put.deps.size(), 1u);
      EXPECT_TRUE(isWait(fitted.ranks[r].ops[put.deps[0]], kPlanCtxCredit)) << "r" << r;
    }
  expectGood({fitted, wide});
}

// A round's direct put goes after its relay chunks, at the round's last position, so that the
// forwards of the last chunk overlap it on the wire (directPositions); with one node round (2
// nodes) at its first, where it fills the NIC while later chunks wait for credits.
TEST(Planner, DirectPutsFollowTheirRoundsChunks) {
  const auto b6 = [](int n) { return counts(n, [](int s, int d) { return s == d ? 0 : 6; }); };
  // 6-byte payloads in 4-byte slots: 2 chunks a round, within the window of 4 (last also at 2
  // nodes); in 2-byte slots, 3 chunks past a window of 2 (first at 2 nodes).
  for (auto [slotBytes, slots, chunks] : {std::tuple{4, 4, 2}, std::tuple{2, 2, 3}}) {
    for (int nodes : {2, 3}) {
      const Topology t = Topology::blocks(nodes, 2);
      const Plan p = planOf(t, b6(2 * nodes), opts(slotBytes, slots));
      const bool last = nodes > 2 || chunks <= slots;
      for (int r = 0; r < 2 * nodes; ++r) {
        const auto& ops = p.ranks[r].ops;
        auto direct = find(p, r, [](const Op& op) {
          return isDirectPut(op) && op.lane == Lane::kProxyPut;
        });
        for (int i : direct) {
          auto puts = find(p, r, [&](const Op& op) {
            return op.kind == OpKind::kPut && op.dst.region == Region::kRelay &&
                   op.peer == ops[i].peer;
          });
          ASSERT_EQ(puts.size(), (size_t)chunks);
          const Op& first = ops[puts.front()];
          const Op& final = ops[puts.back()];
          EXPECT_EQ(ops[i].batch, last ? final.batch : first.batch) << "r" << r;
          EXPECT_EQ(i > puts.back(), last) << "r" << r;
        }
      }
      expectGood({p, planOf(t, b6(2 * nodes), opts(slotBytes, slots), p.after)});
    }
  }
}

// chunkBytes rounds a chunk's share up to whole minChunkBytes units, to half units where the
// share is one to two units (a whole unit more left the last chunk a sliver), never below a
// unit nor above a slot; the last round, with its own unit, keeps whole units.
TEST(Planner, ChunksRoundToHalfUnitsBetweenOneAndTwoUnits) {
  Options o = opts(64, 4);
  o.minChunksPerRound = 2;
  o.minChunkBytes = 8;
  // total -> chunk: share 3 (under a unit) -> 8: one chunk; share 6 -> 8; share 10 -> 12
  // (was 16: chunks of 16 and 4); share 14 -> 16; share 20 -> 24; share 40 -> slot.
  const std::vector<std::pair<uint64_t, uint64_t>> cases = {
      {6, 8}, {12, 8}, {20, 12}, {28, 16}, {40, 24}, {200, 64}};
  for (const auto& [total, chunk] : cases) {
    EXPECT_EQ(chunkBytes(total, o, false), chunk) << "total " << total;
    EXPECT_EQ(chunkCount(total, o, false), (total + chunk - 1) / chunk);
  }
  o.lastRoundMinChunks = 2;
  o.lastRoundMinChunkBytes = 8;
  EXPECT_EQ(chunkBytes(20, o, true), 16u);  // the last round: whole units
}

// Options::lastRoundMinChunks cuts only the call's last node round finer: 6-byte payloads in
// 8-byte slots take one chunk a round, and three of 2 bytes in the last (whose forwards are the
// call's tail), in both planners; the plans verify over two calls.
TEST(Planner, LastRoundIsCutFiner) {
  const Topology t = Topology::blocks(4, 2);
  const auto b = counts(8, [](int s, int d) { return s == d ? 0 : 6; });
  Options o = opts(8, 4);
  o.minChunkBytes = 2;
  o.lastRoundMinChunks = 3;
  const Plan p = planOf(t, b, o);
  for (int r = 0; r < 8; ++r) {
    for (int k = 1; k < t.nNodes(); ++k) {
      const int relay = t.railPeer(r, t.sendNode(t.nodeOf(r), k));
      auto puts = find(p, r, [&](const Op& op) {
        return op.kind == OpKind::kPut && op.dst.region == Region::kRelay && op.peer == relay;
      });
      EXPECT_EQ(puts.size(), k == t.nNodes() - 1 ? 3u : 1u) << "r" << r << " round " << k;
    }
  }
  expectGood({p, planOf(t, b, o, p.after)});
  const MatrixInputs inputs(t, b, o, Carry{});
  for (int r = 0; r < 8; ++r)
    EXPECT_EQ(makeRankPlan(t, o, inputs.of(r)).plan.ops.size(), p.ranks[r].ops.size()) << "r" << r;
}

// Options::lastRoundMinChunkBytes is the last round's unit: with the 4-byte unit of the other
// rounds the last round's 6-byte payloads take chunks of 4 and 2 (2 puts), with its own unit
// of 2 the three chunks asked for; both planners agree and the plans verify.
TEST(Planner, LastRoundHasItsOwnChunkUnit) {
  const Topology t = Topology::blocks(4, 2);
  const auto b = counts(8, [](int s, int d) { return s == d ? 0 : 6; });
  for (uint64_t unit : {0, 2}) {
    Options o = opts(8, 4);
    o.minChunkBytes = 4;
    o.lastRoundMinChunks = 3;
    o.lastRoundMinChunkBytes = unit;
    const Plan p = planOf(t, b, o);
    for (int r = 0; r < 8; ++r) {
      const int relay = t.railPeer(r, t.sendNode(t.nodeOf(r), t.nNodes() - 1));
      auto puts = find(p, r, [&](const Op& op) {
        return op.kind == OpKind::kPut && op.dst.region == Region::kRelay && op.peer == relay;
      });
      EXPECT_EQ(puts.size(), unit ? 3u : 2u) << "r" << r << " unit " << unit;
    }
    expectGood({p, planOf(t, b, o, p.after)});
    const MatrixInputs inputs(t, b, o, Carry{});
    for (int r = 0; r < 8; ++r)
      EXPECT_EQ(makeRankPlan(t, o, inputs.of(r)).plan.ops.size(), p.ranks[r].ops.size());
  }
}

}  // namespace
}  // namespace rmacc::plan
