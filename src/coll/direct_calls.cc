// CollectiveEngine's direct path (coll/direct_calls.h).
#include "coll/direct_calls.h"

#include "coll/collective.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/test_hooks.h"

namespace rmacc {

// Under mu_. Nothing ahead of the call may still be set up elsewhere: that is what keeps the
// calls in number order without the queue.
bool CollectiveEngine::directEligible(const Task& task, const Stream* user) const {
  return user && task.args.rejected.empty() && !task.args.dynamic && !task.site &&
         ctx_.cfg.enqueueWaitMs > 0 && queue_.empty() && !busy_ && !directActive_ && !stop_;
}

uint64_t CollectiveEngine::runDirect(Task task, std::unique_lock<std::mutex>& lock) {
  const uint64_t seq = task.seq;
  directActive_ = true;
  lock.unlock();
  // As long as a queued call's caller would wait for its enqueue (CollectiveEngine::alltoallv).
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
  lock.lock();
  directActive_ = false;
  // A call left unfinished goes first: every call queued meanwhile has a higher number.
  if (done) enqueuedSeq_ = seq;
  else queue_.push_front(std::move(task));
  lock.unlock();
  cv_.notify_all();
  return seq;
}

void CollectiveEngine::failTask(const Task& task, rmaccResult_t code, const char* what) {
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
