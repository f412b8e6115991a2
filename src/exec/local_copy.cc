#include "exec/local_copy.h"

#include <algorithm>
#include <cmath>

#include "bootstrap/bootstrap.h"
#include "core/error.h"
#include "core/log.h"
#include "core/topology.h"
#include "exec/signal_space.h"

namespace rmacc {

namespace {

// Copies below this go one way only (the peer's slots when there is a peer): splitting them
// saves no time, since latency, not bandwidth, sets their cost.
constexpr size_t kSplitAbove = 1 << 20;

// Copy-engine bandwidths a large copy is split by (one direction, GB/s), measured on H200s
// (bench/RESULTS.md §6.1): device to pinned host and back run at once at about 50 each; a
// peer copy over NVLink at about 390.
constexpr double kHostGBs = 50;
constexpr double kNvlinkGBs = 390;

}  // namespace

std::vector<std::vector<CopyDesc>> loopbackSteps(char* dst, const char* src, size_t bytes,
                                                 const std::vector<LoopRoute>& routes) {
  // Each route carries a contiguous part of the copy, cut into chunks of equal count across
  // routes, so that every step moves about the same time's worth on each route.
  struct Part {
    const LoopRoute* route;
    size_t begin, bytes, chunk;
  };
  std::vector<Part> parts;
  size_t begin = 0;
  double shareLeft = 0;
  for (const LoopRoute& r : routes) shareLeft += r.share;
  size_t steps = 0;
  for (size_t i = 0; i < routes.size() && begin < bytes; ++i) {
    const LoopRoute& r = routes[i];
    RMACC_ENFORCE(r.slotBytes > 0 && r.slot[0] && r.slot[1], "loop route %zu without slots", i);
    size_t left = bytes - begin;
    size_t n = i + 1 == routes.size() || shareLeft <= 0
                   ? left
                   : std::min(left, (size_t)std::llround((double)left * r.share / shareLeft));
    shareLeft -= r.share;
    if (n == 0) continue;
    parts.push_back({&r, begin, n, 0});
    steps = std::max(steps, (n + r.slotBytes - 1) / r.slotBytes);
    begin += n;
  }
  RMACC_ENFORCE(begin == bytes, "loop routes cover %zu of %zu bytes", begin, bytes);
  for (Part& p : parts) p.chunk = (p.bytes + steps - 1) / steps;

  // Step t: chunk t into slot t % 2, chunk t-1 out of slot (t-1) % 2. The previous step
  // emptied slot t % 2 (its chunk t-2 went out then), so nothing in a step overwrites a slot
  // that a copy of the same step reads.
  std::vector<std::vector<CopyDesc>> out(steps + 1);
  for (const Part& p : parts) {
    for (size_t k = 0; k < steps; ++k) {
      size_t off = std::min(p.bytes, k * p.chunk);
      size_t len = std::min(p.chunk, p.bytes - off);
      if (len == 0) break;
      char* slot = p.route->slot[k % 2];
      out[k].push_back({slot, src + p.begin + off, len});
      out[k + 1].push_back({dst + p.begin + off, slot, len});
    }
  }
  return out;
}

double hostShare(int localRanks, double hostGBs, double nvlinkGBs) {
  double x = (localRanks + 1) * hostGBs / (nvlinkGBs + 2 * hostGBs);
  return std::clamp(x, 0.0, 1.0);
}

LocalCopier::LocalCopier(Backend& backend, Bootstrap& boot, const Topology& topo, int rank,
                         LocalCopyMode mode, size_t slotBytes)
    : backend_(backend), mode_(mode) {
  const int n = topo.nRanks(), node = topo.nodeOf(rank), L = topo.nodeSize(node);
  const int local = topo.localRankOf(rank);
  // Every rank takes part in the exchange whatever its mode, so that ranks configured
  // differently still pair their collectives.
  bool peerRoute = mode == LocalCopyMode::kEngines && L > 1;
  if (peerRoute) hosted_ = backend.allocate(2 * slotBytes);
  std::vector<HandleRecord> records(n);
  if (hosted_) records[rank] = HandleRecord::from(hosted_->exportHandle());
  if (topo.maxNodeSize() > 1) boot.allGather(records.data(), sizeof(HandleRecord));  // collective
  if (mode == LocalCopyMode::kDirect) return;

  hostSlots_ = backend.allocateHostVisible(2 * slotBytes);
  char* h = static_cast<char*>(hostSlots_->ptr());
  LoopRoute host{{h, h + slotBytes}, slotBytes, 1.0};
  const HandleRecord& next = records[topo.rankAt(node, (local + 1) % L)];
  if (peerRoute && next.size > 0) {
    successor_ = backend.import(next.handle());
    RMACC_ENFORCE(successor_->size() >= 2 * slotBytes, "local rank %d lends %zu bytes, need %zu",
                  (local + 1) % L, successor_->size(), 2 * slotBytes);
    char* p = static_cast<char*>(successor_->ptr());
    LoopRoute peer{{p, p + slotBytes}, slotBytes, 0};
    host.share = hostShare(L, kHostGBs, kNvlinkGBs);
    peer.share = 1 - host.share;
    routes_ = {peer, host};
    smallRoutes_ = {peer};
    smallRoutes_[0].share = 1;
  } else {
    routes_ = {host};
    smallRoutes_ = {host};
  }
  INFO(kSubsysColl, "same-device copies by copy engines: %.0f%% through local rank %d, %.0f%% "
       "through pinned host memory, slots of %zu bytes",
       100 * (1 - host.share), successor_ ? (local + 1) % L : -1, 100 * host.share, slotBytes);
}

LocalCopier::~LocalCopier() = default;

void LocalCopier::copy(Stream& s, const CopyDesc* ops, size_t n) {
  std::vector<CopyDesc> direct;
  for (size_t i = 0; i < n; ++i) {
    const CopyDesc& c = ops[i];
    if (c.bytes == 0) continue;
    if (mode_ == LocalCopyMode::kDirect || !backend_.isDeviceMemory(c.dst) ||
        !backend_.isDeviceMemory(c.src)) {
      direct.push_back(c);
      continue;
    }
    const auto& routes = c.bytes > kSplitAbove ? routes_ : smallRoutes_;
    for (const auto& step : loopbackSteps(static_cast<char*>(c.dst),
                                          static_cast<const char*>(c.src), c.bytes, routes))
      s.copy(step.data(), step.size());
  }
  if (!direct.empty()) s.copy(direct.data(), direct.size());
}

}  // namespace rmacc
