#include "support/plan_fixture.h"

#include <gtest/gtest.h>

#include <numeric>

namespace rmacc::plan::fixture {

Options opts(uint64_t slotBytes, int slots, uint64_t maxPut) {
  Options o;
  o.slotBytes = slotBytes;
  o.slots = slots;
  o.maxPutBytes = maxPut;
  o.creditWindow = 0;  // the hand-checked plans credit slot reuse only; pacing tests set it
  return o;
}

std::vector<uint64_t> counts(int n, const std::function<uint64_t(int, int)>& f) {
  std::vector<uint64_t> b((size_t)n * n);
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d) b[(size_t)s * n + d] = f(s, d);
  return b;
}

Plan planOf(const Topology& t, const std::vector<uint64_t>& b, const Options& o,
            const Carry& before) {
  return makeAlltoallvPlan(t, b, o, before);
}

Options releasing(uint64_t slotBytes, int slots, int upTo) {
  Options o = opts(slotBytes, slots);
  o.minChunksPerRound = 2;
  o.minChunkBytes = 1;
  o.releaseRelayUpTo = upTo;
  return o;
}

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
bool isDirectPut(const Op& op) {
  return op.kind == OpKind::kPut && op.bytes > 0 && op.src.region == Region::kSend &&
         op.dst.region == Region::kRecv;
}
bool isSignal(const Op& op, int ctx) {
  return op.kind == OpKind::kPut && op.bytes == 0 && op.ctx == ctx;
}

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

}  // namespace rmacc::plan::fixture
