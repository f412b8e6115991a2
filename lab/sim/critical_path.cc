#include "critical_path.h"

#include <cstdio>
#include <string>

namespace rmacc::sim {
namespace {

using plan::Lane;
using plan::Op;
using plan::OpKind;

bool isProxyPut(const Op& op) { return op.kind == OpKind::kPut && op.lane == Lane::kProxyPut; }

std::string describe(const Op& op, int rank, double t0, double t1) {
  char text[160];
  const char* what = op.kind == OpKind::kWait ? "wait"
                     : op.kind == OpKind::kCopy ? "copy"
                     : op.bytes ? "put" : "signal";
  snprintf(text, sizeof text, "r%d %s %s peer %d %llu B batch %d: %.1f-%.1f us", rank,
           plan::laneName(op.lane), what, op.peer, (unsigned long long)op.bytes, op.batch, t0, t1);
  return text;
}

}  // namespace

CriticalPath criticalPath(const plan::Plan& plan,
                          const std::vector<const std::vector<OpRecord>*>& recs, double endUs) {
  CriticalPath cp;
  // The end: the op (or put arrival) that finished last.
  OpRef at;
  bool arrival = false;
  double best = -1;
  for (size_t r = 0; r < recs.size(); ++r) {
    const auto& ops = plan.ranks[r].ops;
    for (size_t i = 0; i < ops.size(); ++i) {
      const OpRecord& rec = (*recs[r])[i];
      const double t = isProxyPut(ops[i]) ? rec.arrival : rec.end;
      if (t > best) {
        best = t;
        at = {(int)r, (int)i};
        arrival = isProxyPut(ops[i]);
      }
    }
  }
  if (at.rank < 0) {
    cp.hostUs = endUs;
    return cp;
  }
  double t = endUs;
  // Each step attributes [gate or earlier end, t] to the op at `at`, then follows its gate.
  for (int guard = 0; at.rank >= 0 && guard < 10000000; ++guard) {
    const Op& op = plan.ranks[at.rank].ops[at.op];
    const OpRecord& rec = (*recs[at.rank])[at.op];
    if (arrival) {
      cp.networkUs += t - rec.end;
      t = rec.end;
    }
    const double from = rec.gateAt < 0 ? rec.start : rec.gateAt;
    const double spent = t - from;
    if (op.kind == OpKind::kCopy || (op.kind == OpKind::kPut && op.lane == Lane::kCePut && op.bytes))
      cp.copyUs += spent;
    else
      cp.streamUs += spent;
    ++cp.hops;
    if (cp.tail.size() < 8) cp.tail.push_back(describe(op, at.rank, from, rec.end));
    t = from;
    switch (rec.gateKind) {
      case Gate::kNone:
      case Gate::kEnqueue:
        cp.hostUs += t;
        return cp;
      case Gate::kStream:
      case Gate::kDep: {
        const OpRecord& prev = (*recs[rec.gateBy.rank])[rec.gateBy.op];
        cp.streamUs += t - prev.end;  // event hop between streams, if any
        t = prev.end;
        arrival = false;
        break;
      }
      case Gate::kSignal: {
        const Op& by = plan.ranks[rec.gateBy.rank].ops[rec.gateBy.op];
        arrival = isProxyPut(by);
        if (!arrival) {
          const OpRecord& prev = (*recs[rec.gateBy.rank])[rec.gateBy.op];
          cp.streamUs += t - prev.end;
          t = prev.end;
        }
        break;
      }
    }
    at = rec.gateBy;
  }
  return cp;
}

}  // namespace rmacc::sim
