#include "exec/reaper.h"

namespace rmacc {

Reaper::Reaper() : thread_([this] { loop(); }) {}

Reaper::~Reaper() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void Reaper::release(std::shared_ptr<void> object) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back(std::move(object));
  }
  cv_.notify_one();
}

void Reaper::loop() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;
    std::shared_ptr<void> object = std::move(queue_.front());
    queue_.pop_front();
    lk.unlock();
    object.reset();  // the destructor runs here, outside the lock
    lk.lock();
  }
}

}  // namespace rmacc
