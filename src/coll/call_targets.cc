#include "coll/call_targets.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "core/error.h"
#include "core/log.h"
#include "exec/signal_space.h"

namespace rmacc {

namespace {

// Peer mappings kept before the least recently used are unmapped (CallTargets::trimPeerMappings).
constexpr size_t kPeerMapCacheSize = 256;

}  // namespace

CallTargets::CallTargets(const EngineContext& ctx) : ctx_(ctx) {
  const Topology& topo = ctx_.topo;
  const int n = ctx_.nRanks;
  peerRelay_.resize(n);
  // Relays exist only when data crosses nodes on a rail other than its destination's.
  if (topo.nNodes() > 1 && topo.maxNodeSize() > 1) {
    relayAlloc_ = ctx_.backend.allocateNicVisible(ctx_.cfg.relayBytes);
    relayMr_ = ctx_.proxy->registerMemory(relayAlloc_->ptr(), relayAlloc_->size());
    std::vector<RemoteRegion> regions(n);
    regions[ctx_.rank] = relayMr_->remote();
    ctx_.bootstrap.allGather(regions.data(), sizeof(RemoteRegion));
    for (int r = 0; r < n; ++r) peerRelay_[r].remote = regions[r];
    INFO(kSubsysColl, "relay buffer %zu bytes in %d slots", relayAlloc_->size(),
         ctx_.cfg.relaySlots);
  }
  Backend& be = ctx_.backend;
  localStaging_ = std::make_unique<StagingBuffer>([&be](size_t b) { return be.allocate(b); }, nullptr);
  remoteStaging_ = std::make_unique<StagingBuffer>(
      [&be](size_t b) { return be.allocateNicVisible(b); }, ctx_.proxy);
}

// Where this rank's receive blocks land this call. A block from origin o is written by o itself
// when o is a rail peer on another node (the network writes it), else by a rank of this node
// (o, or the relay that forwards o's data): each kind goes to memory that writer can reach.
void CallTargets::choose(const AlltoallvArgs& a, Targets& t) {
  const int n = ctx_.nRanks, me = ctx_.rank;
  const Topology& topo = ctx_.topo;
  t.offset.assign(n, 0);
  // Topology::railPeer: o puts its block to this rank itself when this rank is its relay here.
  auto remoteWriter = [&](int o) {
    return !topo.sameNode(o, me) && topo.railPeer(o, topo.nodeOf(me)) == me;
  };
  uint64_t localBytes = 0, remoteBytes = 0, span = 0;
  for (int o = 0; o < n; ++o) {
    if (o == me || a.recvBytes[o] == 0) continue;
    (remoteWriter(o) ? remoteBytes : localBytes) += a.recvBytes[o];
    span = std::max(span, a.recvOffset[o] + a.recvBytes[o]);
  }
  size_t allocOffset = 0;
  const Allocation* alloc = span ? ctx_.memory.find(a.recvbuff, span, &allocOffset) : nullptr;
  // Memory the caller allocated itself (cudaMalloc, PyTorch) that peers can map: their copies
  // land in it directly, as in rmaccMemAlloc memory, instead of in staging.
  std::optional<std::pair<ExportHandle, size_t>> user;
  if (!alloc && localBytes > 0) user = ctx_.backend.exportUserMemory(a.recvbuff, span);
  bool localDirect = alloc != nullptr || user.has_value();
  bool remoteDirect = alloc && ctx_.backend.nicAccessible(a.recvbuff);
  char* localStage = nullptr;
  char* remoteStage = nullptr;
  if (localBytes > 0) {
    t.header.exportable = 1;
    if (localDirect) {
      t.header.handle = HandleRecord::from(alloc ? alloc->exportHandle() : user->first);
      t.header.targetBase = alloc ? allocOffset : user->second;
    } else {
      localStage = localStaging_->reserve(localBytes);
      t.header.handle = HandleRecord::from(localStaging_->allocation().exportHandle());
    }
  }
  if (remoteBytes > 0) {
    if (remoteDirect) {
      uint64_t regOffset = 0;
      t.header.remote = ctx_.memory.registerRemote(a.recvbuff, span, &regOffset);
      t.header.remote.base += regOffset;  // offsets below are relative to recvbuff
      t.header.remote.size -= regOffset;
    } else {
      remoteStage = remoteStaging_->reserve(remoteBytes);
      t.header.remote = remoteStaging_->remote();
    }
  }
  uint64_t packedLocal = 0, packedRemote = 0;
  for (int o = 0; o < n; ++o) {
    if (o == me || a.recvBytes[o] == 0) continue;
    bool remote = remoteWriter(o);
    char* stage = remote ? remoteStage : localStage;
    if (!stage) {
      t.offset[o] = a.recvOffset[o];
      continue;
    }
    uint64_t& packed = remote ? packedRemote : packedLocal;
    t.offset[o] = packed;
    t.finish.push_back({static_cast<char*>(a.recvbuff) + a.recvOffset[o], stage + packed,
                        a.recvBytes[o]});
    packed += a.recvBytes[o];
  }
}

// A mate's receive offsets are checked against the memory it exported before this rank copies
// anything there (DESIGN.md §4): a broken peer must not make this rank write out of bounds.
// This rank writes its own block and the blocks it forwards for its writers
// (CountExchange::writers). (Offsets into network targets are checked by the proxy.)
void CallTargets::checkPeerTarget(int j, const CountExchange::Result& x,
                                  const CountExchange& counts, size_t mapped) const {
  const Topology& topo = ctx_.topo;
  const int me = ctx_.rank, node = topo.nodeOf(me);
  const int r = topo.rankAt(node, j), L = topo.nodeSize(node), W = counts.writerSlots();
  const MetaHeader& h = x.localHeader[j];
  const std::vector<CountExchange::Writer>& writers = counts.writers();
  for (size_t t = 0; t <= writers.size(); ++t) {
    const CountExchange::Writer* w = t ? &writers[t - 1] : nullptr;
    const uint64_t len = w ? x.inputs.relayIn[((size_t)w->k * W + w->m) * L + j] : x.inputs.send[r];
    const uint64_t off = x.localOffset[j][t];
    if (len == 0) continue;
    if (h.targetBase > mapped || off > mapped - h.targetBase || len > mapped - h.targetBase - off)
      RMACC_THROW(rmaccRemoteError,
                  "rank %d asked for %llu bytes from rank %d at offset %llu of a %zu-byte buffer",
                  r, (unsigned long long)len, w ? w->rank : me,
                  (unsigned long long)(h.targetBase + off), mapped);
  }
}

// Where this call's ops read and write: this rank's buffers, its mates' targets (mapped and
// checked) with the offsets of the blocks this rank writes there, its relays' targets.
CallBuffers& CallTargets::setBuffers(uint64_t seq, const AlltoallvArgs& a,
                                     const CountExchange::Result& x, const CountExchange& counts,
                                     const plan::RankPlan& plan) {
  const int n = ctx_.nRanks, me = ctx_.rank;
  const Topology& topo = ctx_.topo;
  const int node = topo.nodeOf(me);
  const std::vector<CountExchange::Writer>& writers = counts.writers();
  CallBuffers& b = callBuffers_;
  b.send = static_cast<const char*>(a.sendbuff);
  b.recv = static_cast<char*>(a.recvbuff);
  b.sendOffset = a.sendOffset;
  b.recvOffset = a.recvOffset;
  b.relay = relayAlloc_ ? static_cast<char*>(relayAlloc_->ptr()) : nullptr;
  b.peerRelay = peerRelay_;
  b.peerRecv.assign(n, PeerTarget{});
  // Rows only for the ranks this one writes into, kept from call to call: each call writes the
  // entries its ops read (its own block at every peer, the blocks it forwards for its writers),
  // so nothing is cleared (at 1,024 ranks a fresh table was ~1 MB allocated and zeroed a call).
  b.peerRecvOffset.resize(n);
  auto row = [&](int r) -> std::vector<uint64_t>& {
    if (b.peerRecvOffset[r].size() != (size_t)n) b.peerRecvOffset[r].assign(n, 0);
    return b.peerRecvOffset[r];
  };
  // Map a node mate's receive buffer only when this call writes bytes into it (a signal needs
  // no mapping): a mate that gets no bytes from this rank may have finished its call and freed
  // the buffer before this rank gets here, and the import would then fail.
  std::vector<char>& writesInto = writesInto_;  // kept: no allocation per call
  writesInto.assign(n, 0);
  for (const plan::Op& op : plan.ops)
    if (op.kind == plan::OpKind::kPut && op.bytes > 0 && op.dst.region == plan::Region::kRecv)
      writesInto[op.peer] = 1;
  for (int j = 0; j < topo.nodeSize(node); ++j) {
    const int r = topo.rankAt(node, j);
    if (r == me) continue;
    std::vector<uint64_t>& at = row(r);
    at[me] = x.localOffset[j][0];
    for (size_t t = 0; t < writers.size(); ++t) at[writers[t].rank] = x.localOffset[j][t + 1];
    const MetaHeader& hr = x.localHeader[j];
    if (!hr.exportable || !writesInto[r]) continue;
    auto m = peerMapping(hr.handle.handle(), seq);
    checkPeerTarget(j, x, counts, m->size());
    b.peerRecv[r].local = static_cast<char*>(m->ptr()) + hr.targetBase;
  }
  for (int nd = 0; nd < topo.nNodes(); ++nd) {
    if (nd == node) continue;
    const int r = topo.railPeer(me, nd);
    row(r)[me] = x.railOffset[nd];
    b.peerRecv[r].remote = x.railRemote[nd];
  }
  return b;
}

std::shared_ptr<Mapping> CallTargets::peerMapping(const ExportHandle& handle, uint64_t seq) {
  std::string key(handle.begin(), handle.end());
  auto it = peerMaps_.find(key);
  if (it != peerMaps_.end()) {
    it->second.lastUse = seq;
    return it->second.mapping;
  }
  auto m = ctx_.memory.importPeer(handle);
  peerMaps_[key] = PeerMap{m, seq};
  return m;
}


bool CallTargets::peerMappingsFull() const { return peerMaps_.size() >= kPeerMapCacheSize; }

// The least recently used half goes.
void CallTargets::trimPeerMappings(uint64_t seq) {
  std::vector<std::pair<uint64_t, std::string>> byUse;
  for (const auto& [key, m] : peerMaps_) byUse.emplace_back(m.lastUse, key);
  std::sort(byUse.begin(), byUse.end());
  for (size_t i = 0; i < byUse.size() / 2; ++i) peerMaps_.erase(byUse[i].second);
  INFO(kSubsysColl, "after call %llu: unmapped %zu peer buffers of %zu", (unsigned long long)seq,
       byUse.size() / 2, byUse.size());
}

}  // namespace rmacc
