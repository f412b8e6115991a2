// Destroys objects on a thread of its own. Unmapping a peer's memory (cudaIpcCloseMemHandle,
// cuMemUnmap) may wait for the device's queued work, and that work may wait for calls the
// progress thread has yet to enqueue: destroyed there, an evicted mapping stalled every rank
// for good (seen on an H200 at the 64th call, when the mapping cache first evicted). Here it
// waits while the progress thread goes on.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

namespace rmacc {

class Reaper {
 public:
  Reaper();
  ~Reaper();  // destroys what is left, then joins
  void release(std::shared_ptr<void> object);

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<void>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace rmacc
