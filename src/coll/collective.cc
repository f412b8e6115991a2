#include "coll/collective.h"

#include "coll/captured_calls.h"
#include "coll/in_graph_calls.h"
#include "core/error.h"

namespace rmacc {

CollectiveEngine::CollectiveEngine(const EngineContext& ctx, RmaEngine& rma)
    : ctx_(ctx), progress_(ctx_.backend) {
  enqueued_ = std::make_unique<EnqueuedCalls>(ctx_, rma, progress_);
  inGraph_ = std::make_unique<InGraphCalls>(ctx_);
  captured_ = std::make_unique<CapturedCalls>(ctx_.backend, ctx_.nRanks, this,
                                              &CollectiveEngine::onTrigger);
  progress_.start([this](QueuedCall& task) { enqueued_->run(task); });
}

// The progress thread runs what is queued and stops; then the executor drains (its work
// references the captured calls' sites) before the sites go.
CollectiveEngine::~CollectiveEngine() {
  progress_.stop();
  enqueued_.reset();
}

void CollectiveEngine::abort() {
  enqueued_->abort();
  captured_->releaseAll();
  inGraph_->releaseAll();
}

// Which calls are triggered by their stream: those being captured; and, while a graph holds a
// captured call of this communicator, every call on a stream. A call numbered when it is made
// would otherwise overtake the replays its stream has yet to reach: its number would come
// before theirs though its stream runs it after them, and each would wait for the other.
bool CollectiveEngine::triggeredBy(Stream& user) {
  // The host backend's NULL stream runs the call before it returns: never triggered.
  if (!user.handle() && ctx_.backend.caps().synchronousNullStream) return false;
  return user.capturing() || ctx_.cfg.streamTriggerAlways || captured_->inGraphs();
}

uint64_t CollectiveEngine::alltoallv(Stream* user, AlltoallvArgs args) {
  if (user && inGraph_->takes(*user, args)) {
    try {
      if (inGraph_->record(*user, args)) return 0;
    } catch (const Error&) {
      if (args.rejected.empty()) throw;
      return 0;  // the caller reports its own rejection; its peers' calls failed with it
    }
  }
  if (user && triggeredBy(*user)) {
    auto [site, run] = captured_->record(*user, std::move(args));
    // Outside a capture the caller is still here: as for any call (below), wait a while for
    // the run's work to be enqueued, here once the stream reaches it.
    if (run && ctx_.cfg.enqueueWaitMs > 0) progress_.waitForRun(*site, run, ctx_.cfg.enqueueWaitMs);
    return 0;
  }
  return enqueued_->call(user, std::move(args));
}

void CollectiveEngine::onTrigger(void* engine, CapturedCall& site, AlltoallvArgs args) {
  static_cast<CollectiveEngine*>(engine)->trigger(site, std::move(args));
}

// The stream has reached a captured call: everything before it on the stream is done. The call
// gets its number now, in stream order (DESIGN.md §4.1: the ranks' calls must come in the same
// order). A communicator that failed or is closing releases the stream at once; the failure is
// what rmaccCommGetAsyncError reports.
void CollectiveEngine::trigger(CapturedCall& site, AlltoallvArgs args) {
  QueuedCall task;
  task.args = std::move(args);
  task.site = &site;
  progress_.queueTriggered(
      std::move(task), [&] { return ctx_.failures.asyncError() != rmaccSuccess; },
      [&](CapturedCall& s) { captured_->release(s); });
}

void CollectiveEngine::quiesce() {
  progress_.waitIdle();
  enqueued_->drain();
  inGraph_->drain();
}

}  // namespace rmacc
