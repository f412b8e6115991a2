// Hands data writes to the NIC at its line rate, in the order they come: the proxy threads' policy
// (src/net/proxy_issue.cc), in core/ because rmacc-sim models the proxy with the same class.
//
// A NIC serves the queue pairs that hold writes in turn, so writes posted together to several
// peers move side by side and all finish late: a relay's chunk then lands when the writer's
// later chunks do, and its forwards become the call's tail instead of overlapping the wire.
// The proxy therefore keeps the NIC's backlog short: it estimates when the NIC will have sent
// what it was given (each write's bytes at the line rate, from when it was posted or the NIC's
// previous estimate, whichever is later) and posts the next data write only once that time is
// at most `lead` away. Writes then leave in posting order with the NIC never idle, which is
// what a NIC with one queue would do. Zero-byte writes (signals, credits) take no wire time and
// are not paced. Where the estimate runs ahead of the wire (a slower receiver, a shared NIC),
// writes overlap as they would unpaced; a rate below the wire's would throttle, so the rate is
// the provider's link speed or one the user sets (RMACC_NET_PACE_GBPS).
//
// Times are in seconds in the proxy; any unit works where the rate and the lead use it too
// (rmacc-sim models the proxy with this class in µs, lab/sim/runner.cc).
//
// The proxy threads of a rank share one NIC, so they share one pacer: its estimate is an atomic
// that posted() advances. Two threads may both see mayPost() before either posted(), so the
// NIC can be given up to one write per thread at once beyond the lead; that bound is the price
// of not holding a lock across the provider call.
//
// They also keep the rank's posting order between them. Each thread's writes wait in its own
// queues, so whichever thread looked first once the pacer allowed would post its oldest write,
// and a later round's relay chunk could go before an earlier one: that chunk's forwards, and
// the credits behind them, would then wait on the later one (docs/decisions.md#posting-order).
// Every put gets a number in posting order (nextOrder(), ProxyQueue::post); a thread that holds
// data back says which is its oldest (waiting()), and a data write goes only while no other
// thread holds an older one back (first()). The oldest held write can always go once the
// pacer allows, so no thread waits for another for ever; a write not yet released, or one
// held for another reason (the provider, the outstanding cap), does not hold others back.
//
// Why pace at all, and the evidence: docs/decisions.md#nic-pacing.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace rmacc {

class NicPacer {
 public:
  // The lead: the NIC is given its next write this long before it should run dry, so that
  // posting and doorbell latency never leave it idle (rmacc-sim: 0 and 2 µs give the same
  // times, 5 µs 0.01 less at 16 nodes, 10 µs lets writes overlap again).
  static constexpr double kLeadS = 2e-6;

  // bytesPerSecond <= 0: pacing off (every write may go at once).
  explicit NicPacer(double bytesPerSecond = 0, double leadS = kLeadS)
      : rate_(bytesPerSecond), leadS_(leadS) {
    for (auto& w : waiting_) w.store(kNone, std::memory_order_relaxed);
  }
  NicPacer(const NicPacer& o) { *this = o; }
  NicPacer& operator=(const NicPacer& o) {
    rate_ = o.rate_, leadS_ = o.leadS_;
    freeAtS_.store(o.freeAtS_.load());
    nextOrder_.store(o.nextOrder_.load());
    for (size_t t = 0; t < kMaxThreads; ++t) waiting_[t].store(o.waiting_[t].load());
    return *this;
  }
  bool enabled() const { return rate_ > 0; }

  // When the next data write may be posted.
  double readyAt() const {
    return enabled() ? freeAtS_.load(std::memory_order_relaxed) - leadS_ : 0;
  }
  // Seconds until then (0: now).
  double waitS(double now) const { return std::max(0.0, readyAt() - now); }
  bool mayPost(double now) const { return waitS(now) == 0; }
  // Posting order (see above). Threads are numbered 0 .. kMaxThreads - 1; kNone: nothing held.
  static constexpr size_t kMaxThreads = 16;  // RMACC_PROXY_THREADS' largest
  static constexpr uint64_t kNone = UINT64_MAX;
  uint64_t nextOrder() { return nextOrder_.fetch_add(1, std::memory_order_relaxed); }
  // Thread `thread` holds back data writes, the oldest numbered `order` (kNone: none).
  void waiting(size_t thread, uint64_t order) {
    if (thread < kMaxThreads) waiting_[thread].store(order, std::memory_order_relaxed);
  }
  // What thread `thread` said it holds back last (kNone: nothing).
  uint64_t held(size_t thread) const {
    return thread < kMaxThreads ? waiting_[thread].load(std::memory_order_relaxed) : kNone;
  }
  // Thread `thread` posts its data write numbered `order` now. If that was the oldest it held
  // back, it holds back none older than `order` + 1 from here on: the siblings it kept waiting
  // may go at once, not only when its round ends, after this post and the round's completions
  // (docs/decisions.md#posting-order). Only the thread itself writes its word.
  void takenUp(size_t thread, uint64_t order) {
    if (order != kNone && held(thread) == order) waiting(thread, order + 1);
  }
  // Whether thread `thread`'s data write numbered `order` may go before the others' held ones.
  // Unpaced, writes go as they come (nothing is held back for time, so no order is kept).
  bool first(size_t thread, uint64_t order) const {
    if (!enabled()) return true;
    for (size_t t = 0; t < kMaxThreads; ++t)
      if (t != thread && waiting_[t].load(std::memory_order_relaxed) < order) return false;
    return true;
  }

  // A write of `bytes` was posted at `now`.
  void posted(size_t bytes, double now) {
    if (!enabled() || bytes == 0) return;
    double free = freeAtS_.load(std::memory_order_relaxed);
    while (!freeAtS_.compare_exchange_weak(free, std::max(free, now) + (double)bytes / rate_,
                                           std::memory_order_relaxed)) {
    }
  }

 private:
  double rate_;
  double leadS_;
  std::atomic<double> freeAtS_{0};  // when the NIC is estimated to have sent every write so far
  std::atomic<uint64_t> nextOrder_{0};
  std::array<std::atomic<uint64_t>, kMaxThreads> waiting_{};  // set to kNone by the constructor
};

}  // namespace rmacc
