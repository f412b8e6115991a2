// EnqueuedCalls' direct path (coll/direct_calls.h).
#include "coll/direct_calls.h"

#include "coll/enqueued_calls.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/test_hooks.h"

namespace rmacc {

// Calls that wait for their stream (device counts) or move nothing (rejected) keep the
// progress thread; so does every call when the caller is not to wait at all.
bool EnqueuedCalls::directEligible(const Stream* user, const AlltoallvArgs& args) const {
  return user && args.rejected.empty() && !args.dynamic && ctx_.cfg.enqueueWaitMs > 0;
}

// The caller holds the progress thread's claim (ProgressThread::queueOrClaim): no call is set up
// anywhere else until release().
void EnqueuedCalls::runDirect(Task& task) {
  const uint64_t seq = task.seq;
  // As long as a queued call's caller would wait for its enqueue (call()).
  const double deadline = monotonicSeconds() + ctx_.cfg.enqueueWaitMs * 1e-3;
  bool done = false;
  try {
    // As on the progress thread (Backend::enterInternalThread): the setup's own backend calls
    // are not held to a graph capture the user's threads may have in progress.
    ctx_.backend.runRelaxed([&] {
      task.setup = std::make_shared<CallSetup>();
      beginTask(task, *task.setup);
      done = counts_->advance(deadline);
      if (done) endTask(task, *task.setup);
    });
  } catch (const Error& e) {
    failTask(task, e.code(), e.what());
    done = true;
  } catch (const std::exception& e) {
    failTask(task, rmaccInternalError, e.what());
    done = true;
  }
  countCallPath(done ? CallPath::kDirect : CallPath::kHandedOff);
  progress_.release(seq, done ? nullptr : &task);
}

void EnqueuedCalls::failTask(const Task& task, rmaccResult_t code, const char* what) {
  // The exchange or the setup failed: the communicator cannot go on (a peer is gone or timed
  // out). Release everything waiting on it with the error.
  std::string text = strprintf("rank %d: AlltoAllv (collective call #%llu): %s", ctx_.rank,
                               (unsigned long long)task.args.callSeq, what);
  // Ranks out of step wait for each other until the timeout: say where each one is.
  if (code == rmaccTimeout && ctx_.failures.asyncError() == rmaccSuccess)
    text += "; where the ranks are: " + ctx_.failures.describeRanks();
  fail(task.seq, code, text);
  ctx_.failures.poison(code, text);
}

}  // namespace rmacc
