// An all-gather of fixed-size records among the ranks of one node through shared memory: the
// per-call count exchange of a single-node communicator in microseconds instead of a TCP
// round on the control plane, which would be a third of a small call
// (docs/decisions.md#node-gather).
//
// Each rank owns a segment of two slots (exchange k uses slot k mod 2) that its local peers
// map. Publishing is "copy the record, then release-store k into the slot's sequence word and
// wake sleepers"; gathering waits until every peer's slot holds k. A slot is rewritten (at
// k + 2) only after its owner gathered k + 1, which needs every peer to have published k + 1,
// which each does only after it finished reading k: so no record is overwritten early.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "core/topology.h"
#include "os/shm.h"

namespace rmacc {

class NodeGather {
 public:
  // Collective over the communicator (exchanges segment handles on the bootstrap).
  NodeGather(Bootstrap& bootstrap, const Topology& topo, int rank, size_t recordBytes,
             double timeoutS);
  ~NodeGather();

  // Exchange `seq` (1, 2, 3, ...: consecutive on every rank): publishes `mine` and fills
  // out + r * recordBytes with the record of rank r, for every rank r of this node (`mine` may
  // already sit at its own place there). Throws rmaccRemoteError
  // when a local peer's process is gone or abort() was called, rmaccTimeout after timeoutS.
  void exchange(uint64_t seq, const void* mine, void* out);
  // The two halves of exchange(), for callers that read only part of each peer's record:
  // publish `mine` (recordBytes or fewer) as exchange `seq`, then, per local rank, wait for its
  // record of `seq` and read it in place. A record stays readable until this rank publishes
  // seq + 1 (which it does only after it finished reading seq).
  void publish(uint64_t seq, const void* mine, size_t bytes);
  const char* peerRecord(int localRank, uint64_t seq);
  // Releases every exchange blocked now or later with rmaccRemoteError.
  void abort();

 private:
  struct Peer {
    int rank;
    int pidfd;                    // to tell a dead peer from a slow one
    std::unique_ptr<os::ShmMapping> map;
    char* base;
  };
  char* slot(char* base, uint64_t seq) const;
  void waitFor(const Peer& p, uint64_t seq);

  const Topology& topo_;
  const int rank_;
  const size_t recordBytes_;
  const size_t slotBytes_;
  const double timeoutS_;
  std::unique_ptr<os::ShmSegment> mine_;
  std::vector<Peer> peers_;  // by local rank; this rank's entry maps nothing
  std::atomic<bool> aborted_{false};
};

}  // namespace rmacc
