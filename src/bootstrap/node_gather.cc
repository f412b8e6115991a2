#include "bootstrap/node_gather.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "os/futex.h"
#include "os/peer_fd.h"

namespace rmacc {
namespace {

constexpr size_t kLine = 64;
// A slot's first line: its sequence word, then how many ranks sleep on it (a peer adds itself
// before it sleeps), so that a publish makes the futex system call only when someone sleeps.
constexpr size_t kWaitersAt = 8;

uint32_t* waitersOf(char* slot) { return reinterpret_cast<uint32_t*>(slot + kWaitersAt); }
// Loads of a peer's sequence word before sleeping: a peer that arrives within a few
// microseconds is seen without a system call; one that is late costs a futex sleep.
constexpr int kSpinLoads = 4000;
// How often a sleeping exchange looks at abort, the peer's liveness and the deadline.
constexpr double kSliceS = 0.01;

}  // namespace

NodeGather::NodeGather(Bootstrap& bootstrap, const Topology& topo, int rank, size_t recordBytes,
                       double timeoutS)
    : topo_(topo), rank_(rank), recordBytes_(recordBytes),
      slotBytes_((kLine + recordBytes + kLine - 1) / kLine * kLine), timeoutS_(timeoutS) {
  mine_ = std::make_unique<os::ShmSegment>(2 * slotBytes_);
  memset(mine_->ptr(), 0, mine_->size());
  std::vector<os::ShmHandle> records(topo.nRanks());  // each names its owner's pid too
  records[rank] = mine_->handle();
  bootstrap.allGather(records.data(), sizeof(os::ShmHandle));
  const int node = topo.nodeOf(rank);
  for (int l = 0; l < topo.nodeSize(node); ++l) {
    Peer p{topo.rankAt(node, l), -1, nullptr, nullptr};
    if (p.rank == rank) {
      p.base = static_cast<char*>(mine_->ptr());
    } else {
      p.map = std::make_unique<os::ShmMapping>(records[p.rank]);
      p.base = static_cast<char*>(p.map->ptr());
      p.pidfd = openPidfd(records[p.rank].pid);
    }
    peers_.push_back(std::move(p));
  }
  INFO(kSubsysColl, "count exchange through shared memory among %d local ranks, %zu B records",
       topo.nodeSize(node), recordBytes);
}

NodeGather::~NodeGather() {
  for (Peer& p : peers_)
    if (p.pidfd >= 0) close(p.pidfd);
}

char* NodeGather::slot(char* base, uint64_t seq) const { return base + (seq & 1) * slotBytes_; }

bool NodeGather::waitFor(const Peer& p, uint64_t seq, double until) {
  auto* word = reinterpret_cast<volatile uint64_t*>(slot(p.base, seq));
  for (int i = 0; i < kSpinLoads; ++i)
    if (os::loadAcquire(word) >= seq) return true;
  const double now = monotonicSeconds(), deadline = now + timeoutS_;
  for (;;) {
    uint64_t v = os::loadAcquire(word);
    if (v >= seq) return true;
    if (aborted_.load(std::memory_order_acquire))
      RMACC_THROW(rmaccRemoteError, "count exchange of call %llu: aborted",
                  (unsigned long long)seq);
    pollfd pfd{p.pidfd, POLLIN, 0};
    if (p.pidfd >= 0 && poll(&pfd, 1, 0) > 0 && os::loadAcquire(word) < seq)
      RMACC_THROW(rmaccRemoteError,
                  "count exchange of call %llu: rank %d (same node) exited before it arrived",
                  (unsigned long long)seq, p.rank);
    const double t = monotonicSeconds();
    if (t > deadline)
      RMACC_THROW(rmaccTimeout,
                  "count exchange of call %llu: rank %d (same node) did not arrive within %.1f s",
                  (unsigned long long)seq, p.rank, timeoutS_);
    if (t >= until) return false;
    // Counted in before the last look at the word (both sequentially consistent): either the
    // publisher sees the count and wakes, or this load sees its store. (Dekker's pairing.)
    uint32_t* waiters = waitersOf(slot(p.base, seq));
    __atomic_fetch_add(waiters, 1, __ATOMIC_SEQ_CST);
    v = __atomic_load_n(const_cast<const uint64_t*>(word), __ATOMIC_SEQ_CST);
    if (v < seq) os::sleepWhileEqual(word, v, std::min(kSliceS, until - t));
    __atomic_fetch_sub(waiters, 1, __ATOMIC_SEQ_CST);
  }
}

void NodeGather::publish(uint64_t seq, const void* mine, size_t bytes) {
  RMACC_ENFORCE(bytes <= recordBytes_, "node gather record of %zu bytes, room for %zu", bytes,
                recordBytes_);
  char* own = slot(static_cast<char*>(mine_->ptr()), seq);
  memcpy(own + kLine, mine, bytes);
  // Release of the record with the store; the wake only when a peer counted itself in (see
  // waitFor): most of the time the peers spin, and the system call cost a microsecond or two.
  auto* word = reinterpret_cast<volatile uint64_t*>(own);
  __atomic_store_n(const_cast<uint64_t*>(word), seq, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(waitersOf(own), __ATOMIC_SEQ_CST) != 0) os::wakeAll(word);
}

const char* NodeGather::peerRecord(int localRank, uint64_t seq) {
  const Peer& p = peers_[localRank];
  if (p.rank != rank_) waitFor(p, seq, std::numeric_limits<double>::infinity());
  return slot(p.base, seq) + kLine;
}

const char* NodeGather::peerRecordBy(int localRank, uint64_t seq, double deadline) {
  const Peer& p = peers_[localRank];
  if (p.rank != rank_ && !waitFor(p, seq, deadline)) return nullptr;
  return slot(p.base, seq) + kLine;
}

void NodeGather::exchange(uint64_t seq, const void* mine, void* out) {
  publish(seq, mine, recordBytes_);
  for (int l = 0; l < (int)peers_.size(); ++l) {
    char* dst = static_cast<char*>(out) + (size_t)peers_[l].rank * recordBytes_;
    if (peers_[l].rank == rank_) {
      if (dst != mine) memcpy(dst, mine, recordBytes_);
      continue;
    }
    memcpy(dst, peerRecord(l, seq), recordBytes_);
  }
}

void NodeGather::abort() {
  aborted_.store(true, std::memory_order_release);
  for (const Peer& p : peers_)
    for (uint64_t k = 0; k < 2; ++k)
      os::wakeAll(reinterpret_cast<volatile uint64_t*>(slot(p.base, k)));
}

}  // namespace rmacc
