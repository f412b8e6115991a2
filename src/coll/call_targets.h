// Where one call's data goes (DESIGN.md §4): the receive targets this rank offers its writers
// (the caller's buffer itself when they can reach it, else staging), and, once the counts are
// exchanged, the buffers the call's ops read and write: this rank's, its node mates' targets
// (mapped and checked against what they exported) and its relays'. The relay buffer, the two
// staging buffers and the cache of peers' mapped targets are this file's.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "coll/call_args.h"
#include "coll/count_exchange.h"
#include "exec/engine_context.h"
#include "exec/executor.h"
#include "exec/staging.h"
#include "plan/plan.h"

namespace rmacc {

class CallTargets {
 public:
  // Collective when the communicator spans nodes and a node holds several ranks: sets up the
  // relay buffer (one all-gather of its region).
  explicit CallTargets(const EngineContext& ctx);

  // Where this rank's receive blocks land: the header its writers get, the offset of each
  // origin's block in the target its writer uses, and the staged blocks to copy into the
  // caller's buffer once the call's data is in.
  struct Targets {
    MetaHeader header{};
    std::vector<uint64_t> offset;  // by origin, in the target its writer uses
    std::vector<CopyDesc> finish;  // staged blocks to copy into the caller's buffer
  };
  void choose(const AlltoallvArgs& a, Targets& t);

  // Where call `seq`'s ops read and write (`x`: its exchanged counts; `counts`: the exchange,
  // for the writers this rank forwards for). The buffers returned stay this object's until the
  // next call.
  CallBuffers& setBuffers(uint64_t seq, const AlltoallvArgs& a, const CountExchange::Result& x,
                          const CountExchange& counts, const plan::RankPlan& plan);

  uint64_t relayBytes() const { return relayAlloc_ ? relayAlloc_->size() : 0; }

  // The peers' mapped targets: too many kept (the caller then trims them when it is quiet).
  bool peerMappingsFull() const;
  // Unmaps the least recently used half; nothing enqueued may still copy into them.
  void trimPeerMappings(uint64_t seq);

 private:
  void checkPeerTarget(int localRank, const CountExchange::Result& x,
                       const CountExchange& counts, size_t mapped) const;
  // A peer's receive target mapped here, cached by its export handle.
  // The mapping stays cached until no enqueued call may still copy into it.
  std::shared_ptr<Mapping> peerMapping(const ExportHandle& handle, uint64_t seq);

  const EngineContext ctx_;
  std::unique_ptr<Allocation> relayAlloc_;
  std::unique_ptr<MemoryRegion> relayMr_;
  std::vector<PeerTarget> peerRelay_;
  // Receive staging (DESIGN.md §4: any buffer works; rmaccMemAlloc memory takes the
  // zero-copy path): for blocks written by ranks of this node (mappable memory) and for
  // blocks written by rail peers of other nodes (memory the network reaches).
  std::unique_ptr<StagingBuffer> localStaging_;
  std::unique_ptr<StagingBuffer> remoteStaging_;
  struct PeerMap {
    std::shared_ptr<Mapping> mapping;
    uint64_t lastUse;  // the last call that copies into it
  };
  std::map<std::string, PeerMap> peerMaps_;
  std::vector<char> writesInto_;  // setBuffers: the node mates this call writes bytes into
  CallBuffers callBuffers_;       // setBuffers: the call's buffers, storage kept across calls
};

}  // namespace rmacc
