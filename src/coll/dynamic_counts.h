// Counts that live on the device (rmaccAlltoAllvDynamic, DESIGN.md §4.1): the call cannot read
// them when it is made, only once the stream reaches it. So the user's stream copies them into
// pinned memory and raises a flag; the progress thread waits for the flag, learns from every
// sender what it will receive (one 8-byte message per peer), packs the blocks in source-rank
// order, and hands back the copies that write recvcounts and rdispls into the caller's device
// arrays before the call completes.
//
// Two slots, used by calls in turn: the stream copies call c's counts only once call c-2 is
// complete, and the progress thread read c-2's slot (and c-2 wrote back from it) before that.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "coll/call_args.h"

namespace rmacc {

class Bootstrap;

class DynamicCounts {
 public:
  DynamicCounts(Backend& backend, Bootstrap& boot, int rank, int nRanks, double timeoutS);

  // User's thread, at the call: once `user` reaches it (and call seq-2 is complete, `done` >=
  // seq-2), copy the counts into the call's slot, then store seq in the ready flag.
  void enqueueRead(Stream& user, uint64_t seq, const DynamicArgs& d, volatile uint64_t* done);

  // Progress thread: waits for call `seq`'s counts (throws rmaccTimeout after the timeout, or
  // rmaccRemoteError once `aborted` says so), trades send counts with every peer and fills
  // `a`'s byte counts and offsets. `writeBack` gets the copies of recvcounts and rdispls (also
  // when the blocks do not fit: then the returned reason is not empty and nothing may move).
  // `counts`: a captured call's own slot ([4n] as slot()), which its stream has filled already
  // (coll/captured_calls.h); nullptr: the call's slot here, once the ready flag says so.
  std::string resolve(uint64_t seq, const DynamicArgs& d, uint64_t* counts, AlltoallvArgs& a,
                      std::vector<CopyDesc>& writeBack, const std::function<bool()>& aborted);

 private:
  uint64_t* slot(uint64_t seq) const;  // [4n]: sendcounts, sdispls, recvcounts, rdispls
  void waitForStream(uint64_t seq, const std::function<bool()>& aborted);
  // Trades the send counts in slot `s` with every peer and fills the rest of the slot and `a`.
  std::string trade(const DynamicArgs& d, uint64_t* s, AlltoallvArgs& a,
                    std::vector<CopyDesc>& writeBack);

  Bootstrap& boot_;
  const int rank_, n_;
  const double timeoutS_;
  std::unique_ptr<Allocation> pinned_;  // 2 slots of 4n u64, then the ready flag
  volatile uint64_t* ready_ = nullptr;
};

}  // namespace rmacc
