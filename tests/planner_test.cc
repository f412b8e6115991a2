// Hand-checked plans of small shapes, and plans broken on purpose that the verifier must reject.
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

static_assert(rmacc::plan::kPlanCtxColl == rmacc::kCtxColl, "plan and net disagree on kCtxColl");
static_assert(rmacc::plan::kPlanCtxCredit == rmacc::kCtxCredit, "kCtxCredit differs");
static_assert(rmacc::plan::kPlanCtxEntry == rmacc::kCtxEntry, "kCtxEntry differs");
static_assert(rmacc::plan::kPlanNumContexts >= rmacc::kNumContexts, "too few contexts");

namespace rmacc::plan {
namespace {

Options opts(uint64_t slotBytes = 1 << 20, int slots = 2, uint64_t maxPut = 1ull << 30) {
  Options o;
  o.slotBytes = slotBytes;
  o.slots = slots;
  o.maxPutBytes = maxPut;
  o.creditWindow = 0;  // the hand-checked plans credit slot reuse only; pacing tests set it
  return o;
}

// bytes[s][d] = f(s, d)
std::vector<uint64_t> counts(int n, const std::function<uint64_t(int, int)>& f) {
  std::vector<uint64_t> b((size_t)n * n);
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d) b[(size_t)s * n + d] = f(s, d);
  return b;
}

Plan planOf(const Topology& t, const std::vector<uint64_t>& b, const Options& o,
            const Carry& before = {}) {
  return makeAlltoallvPlan(t, b, o, before);
}

// Relays that release themselves on up to `upTo` nodes, rounds cut into 2 chunks of >= 1 byte.
Options releasing(uint64_t slotBytes, int slots, int upTo) {
  Options o = opts(slotBytes, slots);
  o.minChunksPerRound = 2;
  o.minChunkBytes = 1;
  o.releaseRelayUpTo = upTo;
  return o;
}

// Consecutive calls on one communicator, each planned with the carry of the one before.
std::vector<Plan> planCalls(const Topology& t, const std::vector<std::vector<uint64_t>>& calls,
                            const Options& o) {
  std::vector<Plan> plans;
  Carry carry;
  for (const auto& b : calls) {
    plans.push_back(planOf(t, b, o, carry));
    carry = plans.back().after;
  }
  return plans;
}

void expectGood(const std::vector<Plan>& calls) {
  Verdict v = verify(calls);
  EXPECT_TRUE(v.ok) << v.error << "\n" << calls.back().dump();
}

void expectCaught(const std::vector<Plan>& calls, const std::string& needle) {
  Verdict v = verify(calls);
  ASSERT_FALSE(v.ok) << "a broken plan verified:\n" << calls.back().dump();
  EXPECT_NE(v.error.find(needle), std::string::npos) << v.error;
}

std::vector<int> find(const Plan& p, int rank, const std::function<bool(const Op&)>& pred) {
  std::vector<int> idx;
  for (int i = 0; i < (int)p.ranks[rank].ops.size(); ++i)
    if (pred(p.ranks[rank].ops[i])) idx.push_back(i);
  return idx;
}

int countLane(const Plan& p, int rank, Lane lane) {
  return (int)find(p, rank, [&](const Op& op) { return op.lane == lane; }).size();
}

bool isData(const Op& op) { return op.kind != OpKind::kWait && op.bytes > 0; }
bool isWait(const Op& op, int ctx) { return op.kind == OpKind::kWait && op.ctx == ctx; }
bool isRelayWait(const Op& op) {
  return op.kind == OpKind::kWait && op.ctx == kPlanCtxColl && op.sigIdx == kSigRelay;
}
bool isDataWait(const Op& op) {
  return op.kind == OpKind::kWait && op.ctx == kPlanCtxColl && op.sigIdx == kSigData;
}
// A put of data from a send block straight into a receive block (no relay on either side).
bool isDirectPut(const Op& op) {
  return op.kind == OpKind::kPut && op.bytes > 0 && op.src.region == Region::kSend &&
         op.dst.region == Region::kRecv;
}
bool isSignal(const Op& op, int ctx) {
  return op.kind == OpKind::kPut && op.bytes == 0 && op.ctx == ctx;
}

// Plan surgery for the negative tests: remove or move one op, keeping deps pointing at the
// same ops (deps on a removed op disappear).
void eraseOp(Plan& p, int rank, int index) {
  auto& ops = p.ranks[rank].ops;
  ops.erase(ops.begin() + index);
  for (Op& op : ops) {
    std::vector<int> deps;
    for (int d : op.deps)
      if (d != index) deps.push_back(d > index ? d - 1 : d);
    op.deps = deps;
  }
}

void moveOp(Plan& p, int rank, int from, int to) {
  auto& ops = p.ranks[rank].ops;
  std::vector<int> order(ops.size()), where(ops.size());
  std::iota(order.begin(), order.end(), 0);
  order.erase(order.begin() + from);
  order.insert(order.begin() + to, from);
  std::vector<Op> moved;
  for (int j = 0; j < (int)order.size(); ++j) {
    where[order[j]] = j;
    moved.push_back(ops[order[j]]);
  }
  for (Op& o : moved)
    for (int& d : o.deps) d = where[d];
  ops = moved;
}

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
// them first left the others' ~0.9 us each after it (RESULTS §35).
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
// lane right before the put. On the proxy-wait lane it sat among the rank's relay-data waits
// (its own forwards'): a put then left only once the rank's incoming chunk of the previous
// round had landed, and a late credit held up the rank's forwards (rmacc-sim, RESULTS §19).
// With 4 slots two small rounds share a position, and each round's put follows its own credit
// wait: with both waits first, a late credit for one round held up the other's put (RESULTS
// §22). The second call waits for a credit at every step.
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
