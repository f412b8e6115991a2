#include "exec/local_copy.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "bootstrap/bootstrap.h"
#include "core/error.h"
#include "core/log.h"
#include "core/topology.h"
#include "exec/signal_space.h"

namespace rmacc {

namespace {

// Copies up to this size take both hops on the caller's stream through a slot of their own
// (exec/loop_schedule.h): latency, not bandwidth, sets their cost.
constexpr size_t kSmallMax = 1 << 20;

// Copy-engine bandwidths a large copy is split by (one direction, GB/s), measured on H200s
// (bench/RESULTS.md §8.1): device to pinned host and back run at once at about 50 each; a
// peer copy over NVLink at about 390.
constexpr double kHostGBs = 50;
constexpr double kNvlinkGBs = 390;

// What each rank tells the others of its node at setup: the slots it lends (an empty record
// when it lends none) and which physical device they are on.
struct SlotRecord {
  HandleRecord slots;
  char device[48] = {};
};

std::vector<char*> cut(void* base, size_t slotBytes, int slots) {
  std::vector<char*> out;
  for (int i = 0; i < slots; ++i) out.push_back(static_cast<char*>(base) + i * slotBytes);
  return out;
}

}  // namespace

LocalCopyMode chooseLocalCopyMode(LocalCopySetting setting, const BackendCaps& caps) {
  if (setting == LocalCopySetting::kDirect) return LocalCopyMode::kDirect;
  if (setting == LocalCopySetting::kEngines) return LocalCopyMode::kEngines;
  LocalCopyMode m = caps.deviceCopyUsesCompute ? LocalCopyMode::kEngines : LocalCopyMode::kDirect;
  INFO(kSubsysInit, "RMACC_LOCAL_COPY=auto: %s (same-device copies %s on this device)",
       m == LocalCopyMode::kEngines ? "engines" : "direct",
       caps.deviceCopyUsesCompute ? "need its compute units" : "need no compute units");
  return m;
}

LocalCopier::LocalCopier(Backend& backend, Bootstrap& boot, const Topology& topo, int rank,
                         LocalCopyMode mode, size_t slotBytes, int slots)
    : backend_(backend), mode_(mode) {
  const int n = topo.nRanks(), node = topo.nodeOf(rank), L = topo.nodeSize(node);
  const int local = topo.localRankOf(rank);
  RMACC_ARG_CHECK(slotBytes > 0 && slots >= 2, "local copy slots: %d of %zu bytes (need >= 2 of >= 1)",
                  slots, slotBytes);
  const size_t smallBytes = std::min(kSmallMax, slotBytes);
  const size_t routeBytes = (size_t)slots * slotBytes + smallBytes;
  // Every rank takes part in the exchange whatever its mode, so that ranks configured
  // differently still pair their collectives.
  bool peerRoute = mode == LocalCopyMode::kEngines && L > 1;
  if (peerRoute) hosted_ = backend.allocate(routeBytes);
  std::vector<SlotRecord> records(n);
  if (hosted_) records[rank].slots = HandleRecord::from(hosted_->exportHandle());
  const std::string device = peerRoute ? backend.deviceIdentity() : std::string();
  snprintf(records[rank].device, sizeof records[rank].device, "%s", device.c_str());
  if (topo.maxNodeSize() > 1) boot.allGather(records.data(), sizeof(SlotRecord));  // collective
  if (mode == LocalCopyMode::kDirect) return;

  hostSlots_ = backend.allocateHostVisible(routeBytes);
  char* h = static_cast<char*>(hostSlots_->ptr());
  LoopRoute host{cut(h, slotBytes, slots), slotBytes, 1.0};
  LoopRoute small{{h + (size_t)slots * slotBytes}, smallBytes, 1.0};
  std::vector<LoopRoute> routes;
  const SlotRecord& nextRank = records[topo.rankAt(node, (local + 1) % L)];
  const HandleRecord& next = nextRank.slots;
  // Ranks sharing one GPU (MPS): the next rank's slots are this device's memory, and copies
  // into them would be SM kernels again.
  if (peerRoute && !device.empty() && device == nextRank.device) {
    INFO(kSubsysColl, "local rank %d is on this rank's GPU: same-device copies go through "
         "pinned host memory only", (local + 1) % L);
    peerRoute = false;
  }
  // The predecessor decides the same way: when it shares this GPU, nobody uses the slots lent.
  if (hosted_ && !device.empty() && device == records[topo.rankAt(node, (local + L - 1) % L)].device)
    hosted_.reset();
  if (peerRoute && next.size > 0) {
    successor_ = backend.import(next.handle());
    RMACC_ENFORCE(successor_->size() >= routeBytes, "local rank %d lends %zu bytes, need %zu",
                  (local + 1) % L, successor_->size(), routeBytes);
    char* p = static_cast<char*>(successor_->ptr());
    LoopRoute peer{cut(p, slotBytes, slots), slotBytes, 0};
    host.share = hostShare(L, kHostGBs, kNvlinkGBs);
    peer.share = 1 - host.share;
    small.slots = {p + (size_t)slots * slotBytes};
    routes = {peer, host};
  } else {
    routes = {host};
  }
  const double hostPct = 100 * routes.back().share;
  schedule_ = std::make_unique<LoopSchedule>(std::move(routes), small, slotBytes / 4);
  for (int i = 0; i < schedule_->lanes(); ++i) lanes_.push_back(backend.createStream());
  for (int i = 0; i < schedule_->events(); ++i) events_.push_back(backend.createEvent());
  INFO(kSubsysColl, "same-device copies by copy engines: %.0f%% through local rank %d, %.0f%% "
       "through pinned host memory, %d slots of %zu bytes a route, %zu streams; copies up to "
       "%zu bytes on the caller's stream",
       100 - hostPct, successor_ ? (local + 1) % L : -1, hostPct, slots, slotBytes, lanes_.size(),
       smallBytes);
}

LocalCopier::~LocalCopier() {
  // The lanes may still copy through the slots: let them finish before the memory goes.
  for (auto& s : lanes_) try { s->synchronize(); } catch (...) {}
}

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
    ops_.clear();
    schedule_->copy(static_cast<char*>(c.dst), static_cast<const char*>(c.src), c.bytes,
                    &s == lastSmallCaller_, ops_);
    if (c.bytes <= schedule_->smallMax()) lastSmallCaller_ = &s;
    run(s);
  }
  if (!direct.empty()) s.copy(direct.data(), direct.size());
}

void LocalCopier::run(Stream& caller) {
  for (const LoopOp& op : ops_) {
    Stream& st = op.lane == LoopSchedule::kCallerLane ? caller : *lanes_[op.lane];
    switch (op.kind) {
      case LoopOp::Kind::kCopy: st.copy(&op.copy, 1); break;
      case LoopOp::Kind::kRecord: st.record(*events_[op.event]); break;
      case LoopOp::Kind::kWait: st.waitEvent(*events_[op.event]); break;
    }
  }
}

}  // namespace rmacc
