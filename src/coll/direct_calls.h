// Direct calls (issue 49): a call's count exchange, planning and enqueue on the caller's own
// thread, instead of a hand-off to the progress thread and back (a queue, a condition variable
// and two wake-ups: ~7 µs each way on an H200, more than the rest of a small call's host work).
//
// What must hold, and how:
// - Calls are set up in their number order (the ranks' exchanges pair up by number, and the
//   executor runs call k after k - 1). A call goes direct only when no call is queued for the
//   progress thread, none is running there and no other thread is inside a direct call
//   (ProgressThread::queueOrClaim, under the queue's lock); while one is, the progress thread
//   waits and later calls queue behind it.
// - The caller waits for late peers no longer than a queued call would (RMACC_ENQUEUE_WAIT_MS):
//   the exchange runs in steps (CountExchange::advance with a deadline), and what is left at
//   the deadline goes to the progress thread at the head of its queue, the exchange resuming
//   where it stopped (QueuedCall::setup).
// - Errors are the progress thread's: the call fails (its error is the stream's), the
//   communicator is poisoned, and the caller returns as a queued call's does. Abort from
//   another thread releases the exchange's waits; destroy is refused while the caller is in
//   (api::CallScope), as for any call.
// - Calls with counts on the device (they wait for the stream), rejected calls and triggered
//   (captured) calls keep their paths.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "coll/count_exchange.h"

namespace rmacc {

// One call between the start of its count exchange and its enqueue (EnqueuedCalls::beginTask
// and endTask). The exchange reads `zeros` and `offsets` and writes `x` until it ends, so the
// setup is not moved meanwhile (QueuedCall holds it by pointer).
struct CallSetup {
  double t0 = 0;                   // monotonicSeconds when the setup began
  bool bad = false;                // rejected by this rank: it joins with zero counts
  bool dynamicRejected = false;    // device counts that do not fit
  std::vector<CopyDesc> writeBack; // device counts: recvcounts and rdispls to write back
  std::vector<CopyDesc> finish;    // staged blocks (and writeBack) to copy when the call ends
  std::vector<uint64_t> zeros;     // a rejected call's counts
  std::vector<uint64_t> offsets;   // by origin: where its block lands in this rank's target
  CountExchange::Result x;
};

}  // namespace rmacc
