#include "coll/progress_thread.h"

#include <pthread.h>
#include <sys/prctl.h>

#include "coll/captured_calls.h"
#include "core/clock.h"

namespace rmacc {

void ProgressThread::start(Handler handler) {
  handler_ = std::move(handler);
  thread_ = std::thread([this] { loop(); });
}

void ProgressThread::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

uint64_t ProgressThread::queue(QueuedCall task,
                               const std::function<void(QueuedCall&)>& onNumbered, int waitMs) {
  std::unique_lock<std::mutex> lock(mu_);
  task.seq = ++nextSeq_;
  task.queuedAt = monotonicSeconds();
  onNumbered(task);
  const uint64_t seq = task.seq;
  queue_.push_back(std::move(task));
  cv_.notify_all();  // callers may wait on cv_ too
  if (waitMs > 0) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(waitMs);
    cv_.wait_until(lock, until, [&] { return enqueuedSeq_ >= seq || stop_; });
  }
  return seq;
}

void ProgressThread::queueTriggered(QueuedCall task, const std::function<bool()>& refuse,
                                    const std::function<void(CapturedCall&)>& onRefused) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_ || refuse()) {
    onRefused(*task.site);
    ++task.site->runsEnqueued;
    cv_.notify_all();
    return;
  }
  task.seq = ++nextSeq_;
  task.queuedAt = monotonicSeconds();
  queue_.push_back(std::move(task));
  cv_.notify_all();
}

void ProgressThread::waitForRun(CapturedCall& site, uint64_t run, int waitMs) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_until(lock, std::chrono::steady_clock::now() + std::chrono::milliseconds(waitMs),
                 [&] { return site.runsEnqueued >= run || stop_; });
}

uint64_t ProgressThread::lastNumbered() {
  std::lock_guard<std::mutex> lock(mu_);
  return nextSeq_;
}

bool ProgressThread::whileQuiet(uint64_t seq, const std::function<void()>& fn) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!queue_.empty() || nextSeq_ != seq) return false;
  fn();
  return true;
}

void ProgressThread::waitIdle() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !busy_ && (queue_.empty() || stop_); });
}

void ProgressThread::loop() {
  pthread_setname_np(pthread_self(), "rmacc-coll");  // what a user sees in top -H or gdb
  // Its short sleeps (device counts, quiet waits) should last what they ask for, not Linux's
  // default 50 us timer slack (the proxy thread does the same).
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  backend_.enterInternalThread();
  for (;;) {
    QueuedCall task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ with nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    handler_(task);
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_ = false;
      enqueuedSeq_ = task.seq;
      if (task.site) ++task.site->runsEnqueued;
    }
    cv_.notify_all();
  }
}

}  // namespace rmacc
