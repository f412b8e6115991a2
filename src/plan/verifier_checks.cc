// The verifier's static part: shapes, carries, op well-formedness, and the relay-layout oracle.
#include <cstdarg>
#include <set>
#include <tuple>

#include "core/error.h"
#include "plan/plan_build.h"
#include "plan/plan_internal.h"
#include "plan/verifier_internal.h"

namespace rmacc::plan::verify_detail {

void fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char buf[2048];
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  throw Violation{buf};
}

std::vector<uint64_t> relayStepsBefore(const Plan& plan) {
  const auto& steps = plan.before.relaySteps;
  return steps.empty() ? std::vector<uint64_t>(plan.topo.nRanks(), 0) : steps;
}

// Recomputes DESIGN.md §2's relay layout from the count matrix: round k, relay r, writers
// w = (node r - delta_k, local rank l) with l mod (size of r's node) = rail of r, in order; w's blocks for r's node-mates back to back in local-rank
// order from r's successor on (payloadLocal), empty ones skipped; ceil(total / chunkBytes(total,
// last round)) steps numbered on from Plan::before.
RelayOracle::RelayOracle(const Plan& plan)
    : n_(plan.topo.nRanks()), slotBytes_(plan.options.slotBytes),
      slots_((uint64_t)plan.options.slots), relay_((size_t)n_ * n_, -1),
      firstStep_((size_t)n_ * n_, 0), start_((size_t)n_ * n_, 0), chunk_((size_t)n_ * n_, 1),
      after_(relayStepsBefore(plan)) {
  const Topology& t = plan.topo;
  if (plan.bytes.size() != (size_t)n_ * n_ || after_.size() != (size_t)n_ || slotBytes_ == 0) {
    return;  // checkStatic reports it
  }
  for (int k = 1; k < t.nNodes(); ++k) {
    for (int r = 0; r < n_; ++r) {
      const int node = t.nodeOf(r), rail = t.localRankOf(r), L = t.nodeSize(node);
      const int from = t.recvNode(node, k);
      // Writers on r's rail (Topology::railLocal: local ranks rail, rail + L, ...), in order.
      for (int wi = rail; L > 1 && wi < t.nodeSize(from); wi += L) {
        const int w = t.rankAt(from, wi);
        uint64_t pos = 0;
        for (int m = 0; m + 1 < L; ++m) {
          const int d = t.rankAt(node, payloadLocal(rail, L, m));
          const uint64_t len = plan.bytes[key(w, d)];
          if (len == 0) continue;
          relay_[key(w, d)] = r;
          firstStep_[key(w, d)] = after_[r];
          start_[key(w, d)] = pos;
          pos += len;
        }
        const uint64_t chunk = chunkBytes(pos, plan.options, isLastRound(k, t.nNodes()));
        for (int j = 0; j < L; ++j) {
          const int d = t.rankAt(node, j);
          if (relay_[key(w, d)] == r) chunk_[key(w, d)] = chunk;
        }
        after_[r] += (pos + chunk - 1) / chunk;
      }
    }
  }
}

namespace {

std::string opText(const Plan& plan, int call, int rank, int index) {
  return strprintf("call %d: %s", call, formatOp(plan.ranks[rank].ops[index], rank, index).c_str());
}

// A gathering put carries one relay chunk from send blocks: the one shape the executor and the
// proxy take (executor.cc, net/proxy.h ProxyPut::gather).
template <typename What>
void checkGather(const Op& op, const What& what) {
  if (op.kind != OpKind::kPut || op.lane != Lane::kProxyPut || op.dst.region != Region::kRelay)
    fail("%s: only a proxy put into a relay buffer may gather", what().c_str());
  uint64_t total = 0;
  for (const Segment& s : op.gather) {
    if (s.src.region != Region::kSend || s.bytes == 0)
      fail("%s: a gather segment must be bytes of a send block", what().c_str());
    total += s.bytes;
  }
  if (total != op.bytes)
    fail("%s: gather segments hold %llu bytes, the put %llu", what().c_str(),
         (unsigned long long)total, (unsigned long long)op.bytes);
}

void checkOp(const Plan& plan, int call, int r, int i) {
  const Op& op = plan.ranks[r].ops[i];
  const Topology& t = plan.topo;
  // The op's text is built only for a report: this runs for every op of every plan.
  auto what = [&] { return opText(plan, call, r, i); };
  for (int dep : op.deps) {
    if (dep < 0 || dep >= i) {
      fail("%s: dep %d is not an earlier op of the rank", what().c_str(), dep);
    }
  }
  if (op.kind == OpKind::kCopy) {
    if (op.lane != Lane::kCePut) fail("%s: a local copy belongs on the cePut lane", what().c_str());
    if (op.peer != r && op.peer != -1) fail("%s: a local copy names another rank", what().c_str());
    return;
  }
  if (op.peer < 0 || op.peer >= t.nRanks() || op.peer == r) {
    fail("%s: peer r%d is not another rank", what().c_str(), op.peer);
  }
  if (op.ctx < 0 || op.ctx >= kPlanNumContexts || op.sigIdx < 0 ||
      op.sigIdx >= RMACC_MAX_SIGNALS) {
    fail("%s: no such signal (ctx %d, sig %d)", what().c_str(), op.ctx, op.sigIdx);
  }
  if (!op.gather.empty()) checkGather(op, what);
  if (op.quiet && (op.kind != OpKind::kPut || op.lane != Lane::kCePut || op.bytes == 0))
    fail("%s: only a CE put with data may leave its signal to a later put", what().c_str());
  const bool local = t.sameNode(r, op.peer);
  const bool isPut = op.kind == OpKind::kPut;
  // A writer's wait for a relay's credit gates nothing but its next put there, so it sits on
  // the proxy-put lane, right before that put (plan_build.h kPhasePut).
  // A completion wait (the data signals of one source) gates nothing: every one is on the
  // CE-wait lane, where the executor checks them as the data comes (plan_build.h
  // completionKeyBatch); so is a writer's wait for a relay's release (planner.cc addRelease).
  const bool release = !isPut && op.ctx == kPlanCtxCredit && op.sigIdx == kSigRelease;
  const bool credit = !isPut && op.ctx == kPlanCtxCredit && !release;
  const bool completion =
      !isPut && ((op.ctx == kPlanCtxColl && op.sigIdx == kSigData) || release);
  const Lane want = isPut ? (local ? Lane::kCePut : Lane::kProxyPut)
                          : local || completion ? Lane::kCeWait
                          : credit ? Lane::kProxyPut : Lane::kProxyWait;
  if (op.lane != want) {
    fail("%s: a %s %s r%d belongs on the %s lane", what().c_str(), isPut ? "put to" : "wait on",
         local ? "local" : "remote", op.peer, laneName(want));
  }
}

// A quiet put's signal goes out with a later put of the call on its lane to the same counter
// (Op::quiet): one must follow, or the receiver never learns of its bytes.
void checkQuietPuts(const Plan& plan, int call, int r) {
  const auto& ops = plan.ranks[r].ops;
  std::set<std::tuple<int, int, int>> later;  // (peer, ctx, sig) of puts after the one at hand
  for (int i = (int)ops.size() - 1; i >= 0; --i) {
    const Op& op = ops[i];
    if (op.kind != OpKind::kPut || op.lane != Lane::kCePut) continue;
    const auto key = std::make_tuple(op.peer, op.ctx, op.sigIdx);
    if (op.quiet && !later.count(key))
      fail("%s: a quiet put with no later put to r%d on its signal to carry it",
           opText(plan, call, r, i).c_str(), op.peer);
    later.insert(key);
  }
}

void checkCall(const std::vector<Plan>& calls, const std::vector<RelayOracle>& oracles, int c) {
  const Plan& p = calls[c];
  const int n = p.topo.nRanks();
  if (!(p.topo == calls[0].topo)) fail("call %d: topology differs from call 0", c);
  // Slots may change from call to call (Options::fitSlotsFrom), the relay memory may not.
  if ((uint64_t)p.options.slots * p.options.slotBytes !=
      (uint64_t)calls[0].options.slots * calls[0].options.slotBytes) {
    fail("call %d: relay memory differs from call 0 (the relay buffer must stay put)", c);
  }
  if (p.options.slots < 2 || p.options.slotBytes == 0) fail("call %d: bad relay options", c);
  if (p.bytes.size() != (size_t)n * n || (int)p.ranks.size() != n) {
    fail("call %d: %zu counts and %zu rank plans for %d ranks", c, p.bytes.size(),
         p.ranks.size(), n);
  }
  const auto before = relayStepsBefore(p);
  if (before.size() != (size_t)n) fail("call %d: carry has %zu entries", c, before.size());
  if (c > 0 && before != calls[c - 1].after.relaySteps) {
    fail("call %d: carry before differs from call %d's carry after", c, c - 1);
  }
  if (p.after.relaySteps != oracles[c].after()) {
    fail("call %d: carry after does not count the relay steps of the call", c);
  }
  if (p.relayBytes > (uint64_t)p.options.slots * p.options.slotBytes) {
    fail("call %d: relayBytes %llu exceeds slots x slotBytes", c,
         (unsigned long long)p.relayBytes);
  }
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < (int)p.ranks[r].ops.size(); ++i) checkOp(p, c, r, i);
    checkQuietPuts(p, c, r);
  }
}

}  // namespace

void checkStatic(const std::vector<Plan>& calls, const std::vector<RelayOracle>& oracles) {
  for (int c = 0; c < (int)calls.size(); ++c) checkCall(calls, oracles, c);
}

}  // namespace rmacc::plan::verify_detail
