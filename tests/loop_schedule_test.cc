// The loop routes' schedule (exec/loop_schedule.h), without a device: the ops of successive
// copies run in random interleavings that respect only what a device would respect (each lane
// in order; a wait holds its lane until the work of the record it captured at enqueue time has
// run), copies as plain memcpy. After each copy its caller's lane checks the destination, so a
// missing dependency (a slot refilled before its chunk went out, a chunk taken out before it
// was in, a caller not joined to the route lanes) shows as wrong bytes in some interleaving.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "exec/loop_schedule.h"

namespace rmacc {
namespace {

// Memory for the slots of `routes` routes of `slots` slots each plus the small slot.
struct Slots {
  std::vector<std::vector<char>> mem;
  std::vector<LoopRoute> routes;
  LoopRoute small;
  Slots(int nRoutes, int slots, size_t slotBytes, size_t smallBytes, std::vector<double> shares) {
    for (int r = 0; r < nRoutes; ++r) {
      mem.emplace_back((size_t)slots * slotBytes, 0);
      LoopRoute route{{}, slotBytes, shares[r]};
      for (int s = 0; s < slots; ++s) route.slots.push_back(mem.back().data() + s * slotBytes);
      routes.push_back(route);
    }
    mem.emplace_back(smallBytes, 0);
    small = {{mem.back().data()}, smallBytes, 1};
  }
};

// A device of lanes: ops enqueued as the copier would, run later in a random legal order.
class Device {
 public:
  explicit Device(int routeLanes) : routeLanes_(routeLanes) {}

  // Enqueues one copy's ops; `caller` names the caller's lane (>= 0); afterwards that lane
  // checks `bytes` at dst against `expect`.
  void enqueue(const std::vector<LoopOp>& ops, int caller, const char* dst, const char* expect,
               size_t bytes) {
    for (const LoopOp& op : ops) {
      Item it{op, std::nullopt, nullptr, nullptr, 0};
      int lane = op.lane == LoopSchedule::kCallerLane ? routeLanes_ + caller : op.lane;
      ASSERT_TRUE(op.lane == LoopSchedule::kCallerLane || (op.lane >= 0 && op.lane < routeLanes_));
      if (op.kind == LoopOp::Kind::kWait) {
        auto rec = lastRecord_.find(op.event);
        if (rec != lastRecord_.end()) it.waitFor = rec->second;
      }
      uint64_t id = nextId_++;
      if (op.kind == LoopOp::Kind::kRecord) lastRecord_[op.event] = id;
      lanes_[lane].push_back({id, it});
    }
    Item check{{LoopOp::Kind::kCopy, 0, 0, {}}, std::nullopt, dst, expect, bytes};
    lanes_[routeLanes_ + caller].push_back({nextId_++, check});
  }

  // Runs everything; false (with a message) on a deadlock or a wrong destination.
  ::testing::AssertionResult run(std::mt19937& rng) {
    for (;;) {
      std::vector<int> ready;
      bool any = false;
      for (auto& [lane, q] : lanes_) {
        if (q.empty()) continue;
        any = true;
        const Item& it = q.front().second;
        if (!it.waitFor || done_.count(*it.waitFor)) ready.push_back(lane);
      }
      if (!any) return ::testing::AssertionSuccess();
      if (ready.empty()) return ::testing::AssertionFailure() << "deadlock: every lane waits";
      int lane = ready[rng() % ready.size()];
      auto [id, it] = lanes_[lane].front();
      lanes_[lane].pop_front();
      if (it.checkDst) {
        if (memcmp(it.checkDst, it.expect, it.checkBytes) != 0)
          return ::testing::AssertionFailure() << "caller lane saw wrong bytes (" << it.checkBytes << ")";
      } else if (it.op.kind == LoopOp::Kind::kCopy) {
        memcpy(it.op.copy.dst, it.op.copy.src, it.op.copy.bytes);
      }
      done_.insert({id, 1});
    }
  }

 private:
  struct Item {
    LoopOp op;
    std::optional<uint64_t> waitFor;  // the record this wait captured
    const char* checkDst;             // a check item instead of an op
    const char* expect;
    size_t checkBytes;
  };
  int routeLanes_;
  std::map<int, std::deque<std::pair<uint64_t, Item>>> lanes_;
  std::map<int, uint64_t> lastRecord_;
  std::map<uint64_t, char> done_;
  uint64_t nextId_ = 0;
};

struct Case {
  int routes, slots;
  size_t slotBytes, smallBytes;
  std::vector<size_t> sizes;  // one copy each, in order
  int callers;                // copy i is enqueued on caller i % callers
};

void runCase(const Case& c, uint32_t seed) {
  std::vector<double> shares = c.routes == 1 ? std::vector<double>{1.0} : std::vector<double>{0.69, 0.31};
  Slots slots(c.routes, c.slots, c.slotBytes, c.smallBytes, shares);
  LoopSchedule sched(slots.routes, slots.small, c.slotBytes / 4);
  std::mt19937 rng(seed);
  std::vector<std::vector<char>> src, dst;
  for (size_t n : c.sizes) {
    src.emplace_back(n);
    for (auto& b : src.back()) b = (char)rng();
    dst.emplace_back(n, 0);
  }
  Device dev(sched.lanes());
  int lastSmall = -1;
  for (size_t i = 0; i < c.sizes.size(); ++i) {
    int caller = (int)(i % c.callers);
    std::vector<LoopOp> ops;
    sched.copy(dst[i].data(), src[i].data(), c.sizes[i], caller == lastSmall, ops);
    if (c.sizes[i] <= sched.smallMax()) lastSmall = caller;
    dev.enqueue(ops, caller, dst[i].data(), src[i].data(), c.sizes[i]);
  }
  ASSERT_TRUE(dev.run(rng)) << "seed " << seed;
}

class LoopScheduleRuns : public ::testing::TestWithParam<Case> {};

TEST_P(LoopScheduleRuns, EveryInterleavingDeliversEveryByte) {
  for (uint32_t seed = 1; seed <= 40; ++seed) runCase(GetParam(), seed);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, LoopScheduleRuns,
    ::testing::Values(
        // One route (host only), slots reused many times within one copy.
        Case{1, 2, 4096, 1000, {100000}, 1}, Case{1, 3, 4097, 4097, {4098, 1, 70001}, 1},
        // Two routes, odd sizes, uneven last chunks.
        Case{2, 2, 40961, 1024, {1u << 20, 999999, 40962}, 1},
        Case{2, 4, 8192, 8192, {300001, 8193, 5, 65536}, 1},
        // Copies on three caller streams at once: the slots are shared, the lanes order them.
        Case{2, 2, 4096, 2048, {50000, 2048, 1, 30000, 2047, 70000, 100, 9000, 2049}, 3},
        Case{1, 4, 1000, 1000, {999, 1000, 1001, 20000, 3, 5000, 999}, 2}));

TEST(LoopSchedule, SmallCopiesStayOnTheCallerLane) {
  Slots s(2, 2, 1 << 20, 1 << 20, {0.69, 0.31});
  LoopSchedule sched(s.routes, s.small, 1 << 18);
  std::vector<char> a(1 << 20), b(1 << 20);
  std::vector<LoopOp> ops;
  sched.copy(b.data(), a.data(), 1 << 20, false, ops);
  EXPECT_EQ(ops.size(), 3u);  // in, out, record: no wait before the slot was ever used
  for (const LoopOp& op : ops) EXPECT_EQ(op.lane, LoopSchedule::kCallerLane);
  ops.clear();
  sched.copy(b.data(), a.data(), 100, true, ops);
  EXPECT_EQ(ops.size(), 3u);  // same caller: its stream orders the slot
  ops.clear();
  sched.copy(b.data(), a.data(), 100, false, ops);
  ASSERT_EQ(ops.size(), 4u);  // another caller waits for the slot's last use first
  EXPECT_EQ(ops[0].kind, LoopOp::Kind::kWait);
}

TEST(LoopSchedule, LargeCopiesUseEveryLaneAndJoinTheCaller) {
  Slots s(2, 4, 4 << 20, 1 << 20, {0.69, 0.31});
  LoopSchedule sched(s.routes, s.small, 1 << 20);
  std::vector<char> a(64 << 20), b(64 << 20);
  std::vector<LoopOp> ops;
  sched.copy(b.data(), a.data(), a.size(), false, ops);
  std::map<int, int> copies;
  for (const LoopOp& op : ops)
    if (op.kind == LoopOp::Kind::kCopy) ++copies[op.lane];
  ASSERT_EQ(copies.size(), 4u) << "both hops of both routes, none on the caller";
  EXPECT_EQ(copies[0], copies[1]);
  EXPECT_EQ(copies[2], copies[3]);
  // At most six host calls a chunk (copy, record and wait per hop; the slot wait only on reuse)
  // plus the fork and the joins.
  size_t chunks = copies[0] + copies[2];
  EXPECT_LE(ops.size(), 6 * chunks + 1 + 2 + 2);
  EXPECT_EQ(ops.front().kind, LoopOp::Kind::kRecord);
  EXPECT_EQ(ops.back().kind, LoopOp::Kind::kWait);
  EXPECT_EQ(ops.back().lane, LoopSchedule::kCallerLane);
}

TEST(LoopSchedule, SplitFollowsSharesAndDropsTinyParts) {
  Slots s(2, 2, 4 << 20, 1 << 20, {0.69, 0.31});
  LoopSchedule sched(s.routes, s.small, 1 << 20);
  auto parts = sched.split(100 << 20);
  EXPECT_EQ(parts[0] + parts[1], 100u << 20);
  EXPECT_NEAR((double)parts[1] / (100 << 20), 0.31, 1e-6);
  parts = sched.split(2 << 20);  // the host part (0.6 MiB) is below one chunk
  EXPECT_EQ(parts[0], 2u << 20);
  EXPECT_EQ(parts[1], 0u);
}

TEST(LoopSchedule, ChunksFitTheSlotsAndOverlapTheHops) {
  EXPECT_EQ(LoopSchedule::chunkFor(64 << 20, 4 << 20, 1 << 20), 4u << 20);
  EXPECT_EQ(LoopSchedule::chunkFor(4 << 20, 4 << 20, 1 << 20), 1u << 20);  // 4 chunks, not 1
  EXPECT_EQ(LoopSchedule::chunkFor(1 << 20, 4 << 20, 1 << 20), 1u << 20);  // not below minChunk
  EXPECT_EQ(LoopSchedule::chunkFor(10, 3, 1), 3u);
  EXPECT_EQ(LoopSchedule::chunkFor(0, 3, 1), 0u);
}

TEST(LoopSchedule, HostShareFollowsTheLinkModel) {
  // Two GPUs: NVLink carries the peer block plus both hops of the loop: 31% goes by host.
  EXPECT_NEAR(hostShare(2, 50, 390), 150.0 / 490, 1e-12);
  EXPECT_NEAR(hostShare(8, 50, 390), 450.0 / 490, 1e-12);
  EXPECT_EQ(hostShare(64, 50, 390), 1.0);
  EXPECT_EQ(hostShare(2, 0, 390), 0.0);
}

TEST(LoopSchedule, RoutesWithoutTwoSlotsAreRefused) {
  std::vector<char> m(100);
  LoopRoute one{{m.data()}, 50, 1}, small{{m.data()}, 10, 1};
  EXPECT_ANY_THROW(LoopSchedule({one}, small, 1));
}

}  // namespace
}  // namespace rmacc
