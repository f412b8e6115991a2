// Stopping the proxy: flush what streams released, stop the thread, and drain what the
// provider still holds.
#include "net/proxy_impl.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/log.h"

namespace rmacc::proxy_internal {

// After the thread stopped: let pieces in the provider's hands complete, so that no op context
// we free can be written later. Whatever cannot complete (dead or stopped peer, abort) is
// leaked on purpose, since freeing it would hand the provider dangling contexts, and the
// fabric is abandoned rather than closed (Fabric::abandon): its close would cancel those
// writes and whatever a peer was part way through writing to us. A failed or aborted proxy
// does not progress the network at all any more (proxy_progress.cc), so it drains nothing.
void ProxyImpl::drain() {
  const bool progressing = !aborted_.load() && !failed();
  const double deadline = monotonicSeconds() + std::min(timeoutS_, 5.0);
  while (progressing && outstanding_ > 0 && monotonicSeconds() < deadline) {
    try {
      if (!pollCompletions()) sleepFor(50e-6);
    } catch (const std::exception& e) {
      INFO(kSubsysProxy, "rank %d: while draining the proxy: %s", rank_, e.what());
    }
  }
  if (outstanding_ == 0) return;
  WARN("rank %d: %zu network writes still in flight at proxy teardown; leaking their state",
       rank_, outstanding_);
  // Kept reachable (never freed) along with the abandoned fabric, not a leak to LeakSanitizer.
  static auto* kept = new std::vector<std::unique_ptr<InFlight>>;
  static std::mutex keptMu;
  std::lock_guard<std::mutex> lock(keptMu);
  for (auto& q : queues_)
    for (auto& f : q->active_)
      if (f->issued > f->completed + f->errored) kept->push_back(std::move(f));
  fabric_.abandon();
}

void ProxyImpl::flush() {
  const double deadline = monotonicSeconds() + timeoutS_;
  const uint64_t from = rounds_.load(std::memory_order_acquire);
  while (!failed() && !aborted_.load() && monotonicSeconds() < deadline) {
    if (rounds_.load(std::memory_order_acquire) > from + 1 && quiet_.load(std::memory_order_acquire))
      break;
    kick();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

ProxyImpl::~ProxyImpl() {
  // A stream may be done while its last puts are still to be sent: finish every released put
  // before stopping, or a peer would wait forever for the final signal (seen: a barrier's).
  flush();
  stop_.store(true, std::memory_order_release);
  kick();
  if (thread_.joinable()) thread_.join();
  drain();
  close(kickFd_);
}

}  // namespace rmacc::proxy_internal
