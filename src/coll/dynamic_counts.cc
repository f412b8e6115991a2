#include "coll/dynamic_counts.h"

#include <chrono>
#include <cstring>
#include <thread>

#include "bootstrap/bootstrap.h"
#include "core/clock.h"
#include "core/error.h"

namespace rmacc {

namespace {

// Control-plane tag of the send counts one rank tells another (8 bytes a call).
constexpr uint32_t kDynamicTag = 0x44594e43;  // "DYNC"

}  // namespace

DynamicCounts::DynamicCounts(Backend& backend, Bootstrap& boot, int rank, int nRanks,
                             double timeoutS)
    : boot_(boot), rank_(rank), n_(nRanks), timeoutS_(timeoutS) {
  const size_t slotBytes = 4 * (size_t)n_ * sizeof(uint64_t);
  pinned_ = backend.allocateHostVisible(2 * slotBytes + sizeof(uint64_t));
  memset(pinned_->ptr(), 0, pinned_->size());
  ready_ = reinterpret_cast<volatile uint64_t*>(static_cast<char*>(pinned_->ptr()) + 2 * slotBytes);
}

uint64_t* DynamicCounts::slot(uint64_t seq) const {
  return static_cast<uint64_t*>(pinned_->ptr()) + (seq % 2) * 4 * (size_t)n_;
}

void DynamicCounts::enqueueRead(Stream& user, uint64_t seq, const DynamicArgs& d,
                                volatile uint64_t* done) {
  static_assert(sizeof(size_t) == sizeof(uint64_t), "counts travel as 64-bit words");
  // Call seq's slot was call seq - 2's, whose counts the executor copies back to the caller on
  // its own streams: the read may only overwrite it once that call is done. Calls on one user
  // stream get this from the stream's order (call seq - 1 waited for done >= seq - 1 before
  // this read). Calls on different streams do not: up to RMACC_MAX_CALLS_IN_FLIGHT calls may
  // be queued, and a fresh stream reaches call seq at once, while seq - 2 still runs. So the
  // wait stays, though with one stream it is always already met.
  if (seq > 2) {
    WaitDesc w{done, seq - 2};
    user.waitValues(&w, 1);
  }
  uint64_t* s = slot(seq);
  CopyDesc copies[2] = {{s, d.sendcounts, n_ * sizeof(uint64_t)},
                        {s + n_, d.sdispls, n_ * sizeof(uint64_t)}};
  user.copy(copies, 2);
  user.writeValue(ready_, seq);
}

std::string DynamicCounts::resolve(uint64_t seq, const DynamicArgs& d, uint64_t* counts,
                                   AlltoallvArgs& a, std::vector<CopyDesc>& writeBack,
                                   const std::function<bool()>& aborted) {
  if (!counts) {
    waitForStream(seq, aborted);
    counts = slot(seq);
  }
  return trade(d, counts, a, writeBack);
}

// The stream gets to the call when the caller's earlier work is done, usually the previous
// call, which is about to finish: the wait is on the call's critical path. So yield the core
// for the first kYieldS, then sleep in short steps: long sleeps (and Linux's default 50 us
// timer slack) add to every call (docs/decisions.md#device-counts-wait).
void DynamicCounts::waitForStream(uint64_t seq, const std::function<bool()>& aborted) {
  constexpr double kYieldS = 100e-6;
  const double start = monotonicSeconds(), deadline = start + timeoutS_;
  auto sleep = std::chrono::microseconds(2);
  while (__atomic_load_n(const_cast<const uint64_t*>(ready_), __ATOMIC_ACQUIRE) < seq) {
    if (aborted()) RMACC_THROW(rmaccRemoteError, "aborted while waiting for call %llu's device counts",
                               (unsigned long long)seq);
    const double now = monotonicSeconds();
    if (now > deadline)
      RMACC_THROW(rmaccTimeout,
                  "call %llu: the stream did not reach the call within %.1f s (its counts on the "
                  "device were never read)", (unsigned long long)seq, timeoutS_);
    if (now - start < kYieldS) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::microseconds(20));
  }
}

std::string DynamicCounts::trade(const DynamicArgs& d, uint64_t* s, AlltoallvArgs& a,
                                 std::vector<CopyDesc>& writeBack) {
  const uint64_t* sendcounts = s;
  const uint64_t* sdispls = s + n_;
  uint64_t* recvcounts = s + 2 * n_;
  uint64_t* rdispls = s + 3 * n_;

  // Every rank tells every other what it sends it: each learns its receive counts, O(n).
  for (int p = 0; p < n_; ++p)
    if (p != rank_) boot_.send(p, kDynamicTag, &sendcounts[p], sizeof(uint64_t));
  recvcounts[rank_] = sendcounts[rank_];
  for (int p = 0; p < n_; ++p) {
    if (p == rank_) continue;
    std::vector<char> got = boot_.recv(p, kDynamicTag);
    RMACC_ENFORCE(got.size() == sizeof(uint64_t), "rank %d sent %zu bytes of counts", p, got.size());
    memcpy(&recvcounts[p], got.data(), sizeof(uint64_t));
  }

  std::string reason;
  const uint64_t limit = SIZE_MAX / d.esize / 2;
  uint64_t packed = 0;
  a.sendBytes.assign(n_, 0);
  a.sendOffset.assign(n_, 0);
  a.recvBytes.assign(n_, 0);
  a.recvOffset.assign(n_, 0);
  for (int p = 0; p < n_; ++p) {
    if (sendcounts[p] > limit || sdispls[p] > limit)
      reason = strprintf("device sendcounts[%d] = %llu or sdispls[%d] = %llu is too large", p,
                         (unsigned long long)sendcounts[p], p, (unsigned long long)sdispls[p]);
    if (recvcounts[p] > limit) reason = strprintf("rank %d sends %llu elements", p, (unsigned long long)recvcounts[p]);
    rdispls[p] = packed;
    packed += reason.empty() ? recvcounts[p] : 0;
    a.sendBytes[p] = sendcounts[p] * d.esize;
    a.sendOffset[p] = sdispls[p] * d.esize;
    a.recvBytes[p] = recvcounts[p] * d.esize;
    a.recvOffset[p] = rdispls[p] * d.esize;
  }
  if (reason.empty() && packed > d.capacity)
    reason = strprintf("the blocks sent to rank %d total %llu elements, more than recvcapacity = %zu "
                       "(recvcounts says what would have arrived)",
                       rank_, (unsigned long long)packed, d.capacity);
  writeBack.push_back({d.recvcounts, recvcounts, n_ * sizeof(uint64_t)});
  writeBack.push_back({d.rdispls, rdispls, n_ * sizeof(uint64_t)});
  return reason;
}

}  // namespace rmacc
