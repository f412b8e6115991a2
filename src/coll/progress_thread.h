// The communicator's progress thread (DESIGN.md §2): mechanism only, as a proxy is. It numbers
// the calls handed to it, queues them, and runs them one at a time, in number order, through
// the handler it was started with (coll/enqueued_calls.h: exchange, plan, enqueue).
//
// What must hold: a call's number is given, and what its caller's stream does for it is
// enqueued, under one lock (queue()'s `onNumbered`), so every stream sees the calls in number
// order; the ranks' calls then pair up by number (DESIGN.md §4.1). The handler never throws:
// a call that fails is the handler's to report.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "backend/backend.h"
#include "coll/call_args.h"

namespace rmacc {

struct CapturedCall;

// One call waiting for the progress thread.
struct QueuedCall {
  uint64_t seq = 0;
  AlltoallvArgs args;
  double queuedAt = 0;  // seconds (steady clock) when the call was enqueued
  uint64_t userCalls = 0;  // backend calls the caller's thread made to enqueue it
  CapturedCall* site = nullptr;  // a call triggered by its stream: its site
};

class ProgressThread {
 public:
  // Runs one call on the progress thread; must not throw.
  using Handler = std::function<void(QueuedCall&)>;

  explicit ProgressThread(Backend& backend) : backend_(backend) {}
  // Stops the thread once the calls queued have run.
  ~ProgressThread() { stop(); }
  void start(Handler handler);
  void stop();

  // Numbers `call` and queues it; `onNumbered` runs first, holding the lock, with the number in
  // `call.seq` (the caller's stream work goes there, see above). Then waits up to `waitMs`
  // (0: not at all) for the thread to have run it. Returns its number.
  uint64_t queue(QueuedCall call, const std::function<void(QueuedCall&)>& onNumbered,
                 int waitMs);
  // A captured call its stream has reached: numbered and queued now, in stream order. Refused
  // when the thread is stopping or `refuse()` says so: then `onRefused(site)` runs, holding the
  // lock, and the site counts the run as enqueued (waitForRun's waiters go on).
  void queueTriggered(QueuedCall call, const std::function<bool()>& refuse,
                      const std::function<void(CapturedCall&)>& onRefused);
  // Waits up to `waitMs` until `site` has had `run` runs enqueued (or the thread stops).
  void waitForRun(CapturedCall& site, uint64_t run, int waitMs);

  // The number the last call got (0: none yet).
  uint64_t lastNumbered();
  // Runs `fn` holding the lock (no call is numbered meanwhile) when call `seq` is the last one
  // numbered and nothing is queued: this rank is quiet. False, without running it, otherwise.
  bool whileQuiet(uint64_t seq, const std::function<void()>& fn);
  // Returns once no call is being run and none is queued (or the thread is stopping).
  void waitIdle();

 private:
  void loop();

  Backend& backend_;
  Handler handler_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<QueuedCall> queue_;
  bool stop_ = false;
  bool busy_ = false;  // the progress thread is running a call
  uint64_t enqueuedSeq_ = 0;  // the last call whose work the progress thread enqueued (or failed)
  uint64_t nextSeq_ = 0;
  std::thread thread_;
};

}  // namespace rmacc
