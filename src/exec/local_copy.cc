#include "exec/local_copy.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
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

// Copy-engine bandwidths a large copy is split by (one direction, GB/s), so that both routes
// finish together: device to pinned host and back run at once at about 50 each; a peer copy
// over NVLink at about 390 (H200; docs/decisions.md#local-copy-split).
constexpr double kHostGBs = 50;
constexpr double kNvlinkGBs = 390;

std::vector<char*> cut(void* base, size_t slotBytes, int slots) {
  std::vector<char*> out;
  for (int i = 0; i < slots; ++i) out.push_back(static_cast<char*>(base) + i * slotBytes);
  return out;
}

}  // namespace

LocalCopyMode chooseLocalCopyMode(LocalCopySetting setting, const BackendCaps& caps) {
  if (setting == LocalCopySetting::kDirect) return LocalCopyMode::kDirect;
  if (setting == LocalCopySetting::kEngines) return LocalCopyMode::kEngines;
  // Direct for now, also where same-device copies take compute units: the engines pipeline
  // keeps off the SMs but is far slower than a direct copy and not yet proven across two GPUs
  // (docs/decisions.md#local-copy-direct). Opt in with RMACC_LOCAL_COPY=engines.
  INFO(kSubsysInit, "RMACC_LOCAL_COPY=auto: direct (same-device copies %s on this device; "
       "RMACC_LOCAL_COPY=engines keeps them off the compute units)",
       caps.deviceCopyUsesCompute ? "run on its compute units" : "need no compute units");
  return LocalCopyMode::kDirect;
}

LocalCopier::LocalCopier(Backend& backend, Bootstrap& boot, const Topology& topo, int rank,
                         LocalCopyMode mode, size_t slotBytes, int slots)
    : backend_(backend), mode_(mode) {
  RMACC_ARG_CHECK(slotBytes > 0 && slots >= 2,
                  "local copy slots: %d of %zu bytes (need >= 2 of >= 1)", slots, slotBytes);
  const size_t smallBytes = std::min(kSmallMax, slotBytes);
  const size_t routeBytes = (size_t)slots * slotBytes + smallBytes;
  std::vector<SlotRecord> records = exchange(boot, topo, rank, routeBytes);
  if (mode == LocalCopyMode::kDirect) return;
  buildRoutes(topo, rank, records, slotBytes, slots, smallBytes);
}

std::vector<SlotRecord> LocalCopier::exchange(Bootstrap& boot, const Topology& topo, int rank,
                                              size_t routeBytes) {
  // Every rank takes part in the exchange whatever its mode, so that ranks configured
  // differently still pair their collectives.
  const bool lends = mode_ == LocalCopyMode::kEngines && topo.nodeSize(topo.nodeOf(rank)) > 1;
  if (lends) hosted_ = backend_.allocate(routeBytes);
  std::vector<SlotRecord> records(topo.nRanks());
  SlotRecord& mine = records[rank];
  if (hosted_) mine.slots = HandleRecord::from(hosted_->exportHandle());
  if (lends) snprintf(mine.device, sizeof mine.device, "%s", backend_.deviceIdentity().c_str());
  if (topo.maxNodeSize() > 1) boot.allGather(records.data(), sizeof(SlotRecord));  // collective
  return records;
}

void LocalCopier::buildRoutes(const Topology& topo, int rank, const std::vector<SlotRecord>& records,
                              size_t slotBytes, int slots, size_t smallBytes) {
  const int node = topo.nodeOf(rank), L = topo.nodeSize(node), local = topo.localRankOf(rank);
  const SlotRecord& mine = records[rank];
  const SlotRecord& next = records[topo.rankAt(node, (local + 1) % L)];
  const SlotRecord& prev = records[topo.rankAt(node, (local + L - 1) % L)];
  auto sameGpu = [&](const SlotRecord& r) { return mine.device[0] && !strcmp(mine.device, r.device); };
  // Ranks sharing one GPU (MPS): the next rank's slots are this device's memory, and copies
  // into them would be SM kernels again. The predecessor decides the same way: when it shares
  // this GPU, nobody uses the slots this rank lends.
  if (hosted_ && sameGpu(prev)) hosted_.reset();
  const bool peerRoute = next.slots.size > 0 && !sameGpu(next);
  if (next.slots.size > 0 && !peerRoute)
    INFO(kSubsysColl, "local rank %d is on this rank's GPU: same-device copies go through "
         "pinned host memory only", (local + 1) % L);

  hostSlots_ = backend_.allocateHostVisible((size_t)slots * slotBytes + smallBytes);
  char* h = static_cast<char*>(hostSlots_->ptr());
  LoopRoute host{cut(h, slotBytes, slots), slotBytes, 1.0};
  LoopRoute small{{h + (size_t)slots * slotBytes}, smallBytes, 1.0};
  std::vector<LoopRoute> routes = {host};
  if (peerRoute) {
    successor_ = backend_.import(next.slots.handle());
    const size_t need = (size_t)slots * slotBytes + smallBytes;
    RMACC_ENFORCE(successor_->size() >= need, "local rank %d lends %zu bytes, need %zu",
                  (local + 1) % L, successor_->size(), need);
    char* p = static_cast<char*>(successor_->ptr());
    routes[0].share = hostShare(L, kHostGBs, kNvlinkGBs);
    routes.insert(routes.begin(), LoopRoute{cut(p, slotBytes, slots), slotBytes, 1 - routes[0].share});
    small.slots = {p + (size_t)slots * slotBytes};
  }
  const double hostPct = 100 * routes.back().share;
  schedule_ = std::make_unique<LoopSchedule>(std::move(routes), small, slotBytes / 4);
  for (int i = 0; i < schedule_->lanes(); ++i) lanes_.push_back(backend_.createStream());
  for (int i = 0; i < schedule_->events(); ++i) events_.push_back(backend_.createEvent());
  INFO(kSubsysColl, "same-device copies by copy engines: %.0f%% through local rank %d, %.0f%% "
       "through pinned host memory, %d slots of %zu bytes a route, %zu streams; copies up to "
       "%zu bytes on the caller's stream",
       100 - hostPct, successor_ ? (local + 1) % L : -1, hostPct, slots, slotBytes,
       lanes_.size(), smallBytes);
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
