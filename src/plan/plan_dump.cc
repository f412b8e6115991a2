// Text forms of a plan: Plan::dump (RMACC_DUMP_PLAN) and formatOp for the verifier's reports.
#include "core/error.h"
#include "plan/plan.h"
#include "plan/plan_internal.h"

namespace rmacc::plan {
namespace {

std::string locText(const Loc& loc) {
  const unsigned long long off = loc.offset;
  switch (loc.region) {
    case Region::kSend:
      return strprintf("send[%d]+%#llx", loc.block, off);
    case Region::kRecv:
      return strprintf("recv[%d]+%#llx", loc.block, off);
    case Region::kRelay:
      return strprintf("relay+%#llx", off);
    case Region::kNone:
      break;
  }
  return "-";
}

std::string ctxText(int ctx) {
  if (ctx == kPlanCtxColl) return "coll";
  if (ctx == kPlanCtxCredit) return "credit";
  if (ctx == kPlanCtxEntry) return "entry";
  return strprintf("%d", ctx);
}

std::string sigText(int ctx, int sigIdx) {
  if (ctx == kPlanCtxColl && sigIdx == kSigData) return "sig(coll,data)";
  if (ctx == kPlanCtxColl && sigIdx == kSigRelay) return "sig(coll,relay)";
  return strprintf("sig(%s,%d)", ctxText(ctx).c_str(), sigIdx);
}

// "send[3]+0" or, for a gathering put, "gather{send[3]+0 4096B, send[5]+0 4096B}".
std::string sourceText(const Op& op) {
  if (op.gather.empty()) return locText(op.src);
  std::string s = "gather{";
  for (size_t k = 0; k < op.gather.size(); ++k)
    s += strprintf("%s%s %lluB", k ? ", " : "", locText(op.gather[k].src).c_str(),
                   (unsigned long long)op.gather[k].bytes);
  return s + "}";
}

std::string depsText(const std::vector<int>& deps) {
  if (deps.empty()) return "";
  std::string s = " deps{";
  for (size_t k = 0; k < deps.size(); ++k) s += strprintf(k ? ",%d" : "%d", deps[k]);
  return s + "}";
}

}  // namespace

const char* laneName(Lane lane) {
  switch (lane) {
    case Lane::kCePut:
      return "cePut";
    case Lane::kCeWait:
      return "ceWait";
    case Lane::kProxyPut:
      return "proxyPut";
    case Lane::kProxyWait:
      return "proxyWait";
  }
  return "?";
}

std::string formatOp(const Op& op, int rank, int index) {
  std::string s = strprintf("r%d b%d %s #%d ", rank, op.batch, laneName(op.lane), index);
  const unsigned long long bytes = op.bytes;
  switch (op.kind) {
    case OpKind::kPut:
      s += strprintf("-> r%d ", op.peer);
      if (op.bytes > 0) s += strprintf("%s <- %s ", locText(op.dst).c_str(), sourceText(op).c_str());
      s += strprintf("%lluB %s%s", bytes, sigText(op.ctx, op.sigIdx).c_str(),
                     op.quiet ? " quiet" : "");
      break;
    case OpKind::kCopy:
      s += strprintf("copy %s <- %s %lluB", locText(op.dst).c_str(), locText(op.src).c_str(),
                     bytes);
      break;
    case OpKind::kWait:
      s += strprintf("<- r%d %s x%u", op.peer, sigText(op.ctx, op.sigIdx).c_str(), op.count);
      break;
  }
  return s + depsText(op.deps);
}

std::string Plan::dump(int rank) const {
  std::string s = strprintf(
      "plan: %s; %d slots x %llu B, maxPut %llu B, entry %s; %d batches, relay %llu B\n",
      topo.describe().c_str(), options.slots, (unsigned long long)options.slotBytes,
      (unsigned long long)options.maxPutBytes, options.entrySignals ? "signals" : "barrier",
      nBatches, (unsigned long long)relayBytes);
  for (int r = 0; r < (int)ranks.size(); ++r) {
    if (rank >= 0 && r != rank) continue;
    const auto& ops = ranks[r].ops;
    for (int i = 0; i < (int)ops.size(); ++i) s += formatOp(ops[i], r, i) + "\n";
  }
  return s;
}

}  // namespace rmacc::plan
