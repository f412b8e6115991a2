#include "schedules.h"

#include "core/error.h"
#include "core/signal_contexts.h"
#include "plan/plan_build.h"
#include "plan/planner.h"
#include "plan/verifier.h"

namespace rmacc::sim {
namespace {

using plan::Lane;
using plan::Loc;
using plan::Op;
using plan::Region;

class Builder {
 public:
  Builder(const Topology& topo, const std::vector<uint64_t>& bytes) : t_(topo), bytes_(bytes) {
    p_.topo = topo;
    p_.bytes = bytes;
    p_.options.entrySignals = false;
    p_.ranks.resize(topo.nRanks());
    p_.nBatches = 1;
  }
  uint64_t count(int s, int d) const { return bytes_[(size_t)s * t_.nRanks() + d]; }
  int put(int rank, Lane lane, int peer, Loc src, Loc dst, uint64_t len, int sig,
          std::vector<int> deps = {}) {
    return push(rank, plan::putOp(lane, peer, src, dst, len, kCtxColl, sig,
                                  std::move(deps)));
  }
  int wait(int rank, Lane lane, int peer, int sig, uint32_t n) {
    return push(rank, plan::waitOp(lane, peer, kCtxColl, sig, n));
  }
  void copySelf(int r) {
    if (count(r, r)) push(r, plan::selfCopyOp(r, count(r, r)));
  }
  // Intra-node CE puts in rotated local order, as the planner does.
  void intraNode(int r) {
    const int node = t_.nodeOf(r), i = t_.localRankOf(r), L = t_.localSize();
    for (int s = 1; s < L; ++s) {
      const int d = t_.rankAt(node, (i + s) % L);
      if (count(r, d)) put(r, Lane::kCePut, d, {Region::kSend, d, 0}, {Region::kRecv, r, 0},
                           count(r, d), plan::kSigData);
    }
  }
  // One wait per source that signalled kSigData `signals[src]` times.
  void finalWaits(int d, const std::vector<uint32_t>& signals) {
    for (int s = 0; s < t_.nRanks(); ++s)
      if (signals[s]) wait(d, t_.sameNode(s, d) ? Lane::kCeWait : Lane::kProxyWait, s,
                           plan::kSigData, signals[s]);
  }
  plan::Plan take() { return std::move(p_); }

 private:
  int push(int rank, Op op) {
    auto& ops = p_.ranks[rank].ops;
    ops.push_back(std::move(op));
    return (int)ops.size() - 1;
  }
  const Topology& t_;
  const std::vector<uint64_t>& bytes_;
  plan::Plan p_;
};

plan::Plan direct(const Topology& t, const std::vector<uint64_t>& bytes) {
  Builder b(t, bytes);
  const int n = t.nRanks(), L = t.localSize();
  std::vector<std::vector<uint32_t>> signals(n, std::vector<uint32_t>(n, 0));
  for (int r = 0; r < n; ++r) {
    b.intraNode(r);
    b.copySelf(r);
    for (int k = 1; k < t.nNodes(); ++k) {
      const int node = t.sendNode(t.nodeOf(r), k);
      for (int s = 0; s < L; ++s) {
        const int d = t.rankAt(node, (t.localRankOf(r) + s) % L);
        if (!b.count(r, d)) continue;
        b.put(r, Lane::kProxyPut, d, {Region::kSend, d, 0}, {Region::kRecv, r, 0}, b.count(r, d),
              plan::kSigData);
        signals[d][r]++;
      }
    }
    for (int s = 0; s < n; ++s)
      if (s != r && t.sameNode(s, r) && b.count(s, r)) signals[r][s]++;
  }
  for (int d = 0; d < n; ++d) b.finalWaits(d, signals[d]);
  return b.take();
}

plan::Plan pxn(const Topology& t, const std::vector<uint64_t>& bytes) {
  Builder b(t, bytes);
  const int n = t.nRanks(), L = t.localSize(), N = t.nNodes();
  std::vector<std::vector<uint32_t>> signals(n, std::vector<uint32_t>(n, 0));
  std::vector<uint64_t> staged(n, 0);  // next free byte of each rank's staging area
  // Staging copies first, node round by round, so the proxies can start on round 1 early.
  for (int k = 1; k < N; ++k) {
    for (int r = 0; r < n; ++r) {
      const int node = t.sendNode(t.nodeOf(r), k), i = t.localRankOf(r);
      for (int s = 1; s < L; ++s) {
        const int j = (i + s) % L, d = t.rankAt(node, j), p = t.rankAt(t.nodeOf(r), j);
        if (!b.count(r, d)) continue;
        b.put(r, Lane::kCePut, p, {Region::kSend, d, 0}, {Region::kRelay, -1, staged[p]},
              b.count(r, d), plan::kSigRelay);
        staged[p] += b.count(r, d);
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    b.intraNode(r);
    b.copySelf(r);
    const int node = t.nodeOf(r), j = t.localRankOf(r);
    for (int k = 1; k < N; ++k) {
      const int d = t.rankAt(t.sendNode(node, k), j);
      if (b.count(r, d)) {
        b.put(r, Lane::kProxyPut, d, {Region::kSend, d, 0}, {Region::kRecv, r, 0}, b.count(r, d),
              plan::kSigData);
        signals[d][r]++;
      }
      // What the node-mates staged here for d: wait for each, then one aggregated put.
      std::vector<int> deps;
      uint64_t total = 0;
      for (int s = 1; s < L; ++s) {
        const int src = t.rankAt(node, (j + s) % L);
        if (!b.count(src, d)) continue;
        deps.push_back(b.wait(r, Lane::kCeWait, src, plan::kSigRelay, 1));
        total += b.count(src, d);
      }
      if (total) {
        b.put(r, Lane::kProxyPut, d, {Region::kRelay, -1, 0}, {Region::kRecv, r, 0}, total,
              plan::kSigData, deps);
        signals[d][r]++;
      }
    }
    for (int s = 0; s < n; ++s)
      if (s != r && t.sameNode(s, r) && b.count(s, r)) signals[r][s]++;
  }
  for (int d = 0; d < n; ++d) b.finalWaits(d, signals[d]);
  return b.take();
}

}  // namespace

Schedule scheduleByName(const std::string& name) {
  if (name == "rmacc") return Schedule::kRmacc;
  if (name == "direct") return Schedule::kDirect;
  if (name == "pxn") return Schedule::kPxn;
  RMACC_THROW(rmaccInvalidArgument, "unknown schedule '%s' (rmacc, direct, pxn)", name.c_str());
}

const char* scheduleName(Schedule s) {
  switch (s) {
    case Schedule::kRmacc: return "rmacc";
    case Schedule::kDirect: return "direct";
    case Schedule::kPxn: return "pxn";
  }
  return "?";
}

// Relay steps every relay ran before the simulated call: more than any window, a multiple of
// every slot count.
constexpr uint64_t kWarmRelaySteps = 1024;

plan::Plan buildSchedule(Schedule s, const Topology& topo, const std::vector<uint64_t>& bytes,
                         const plan::Options& options, bool verify) {
  if (s == Schedule::kDirect) return direct(topo, bytes);
  if (s == Schedule::kPxn) return pxn(topo, bytes);
  // A call in steady state: every relay ran many steps in earlier calls, so each step of this
  // one waits for a credit, those of the first window carried from the call before (the very
  // first calls skip the credits of a fresh relay's first window).
  plan::Carry warm;
  warm.relaySteps.assign(topo.nRanks(), kWarmRelaySteps);
  plan::Plan p = plan::makeAlltoallvPlan(topo, bytes, options, warm);
  if (verify) {
    plan::Verdict v = plan::verify({p});
    RMACC_ENFORCE(v.ok, "the planner's plan fails its verifier: %s", v.error.c_str());
  }
  return p;
}

Cluster clusterFor(Schedule s, Cluster c) {
  if (s != Schedule::kRmacc) c.paceLeadUs = -1;
  return c;
}

}  // namespace rmacc::sim
