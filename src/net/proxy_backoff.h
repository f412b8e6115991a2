// How the proxy thread waits when a round found nothing to do (private to src/net).
//
// Incoming writes and posts end any sleep at once (the CQ's wait fd and the kick eventfd,
// proxy.cc); what nothing signals is the device releasing a posted put (it writes a word in
// host memory), the landing zone's copies finishing, and the provider's own progress (manual)
// where it has no wait fd. While one of those is pending the proxy must come back to look,
// and how often is a trade between hop latency and the cores it takes:
//   - eager (cores to spare, as on GPU hosts): while a posted put awaits its release or
//     writes are in flight, re-poll without sleeping (yielding the core each round); every
//     µs slept there is added to a hop;
//   - otherwise (tests run 9 ranks with several threads each on 2 cores, where a polling
//     proxy takes the core from the very rank it waits for): a few rounds of re-polling,
//     then sched_yield, then sleeps doubling from 1 µs, capped by what the proxy waits for:
//       a release or our own writes in flight -> 100 µs,
//       active within the last 100 ms          -> 200 µs,
//       idle for longer                        -> 1 ms.
// Once nothing is pending, both modes wait until woken (kUntilWoken): a post kicks the proxy
// and an incoming write turns the CQ's fd readable, so an idle communicator costs no CPU, where
// a timer, however slow, would cost every rank of a host a share of a core for nothing. Only
// where the CQ has no wait fd, or fi_trywait says the provider has work of its own, does the
// proxy fall back to the caps.
#pragma once

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace rmacc {

class ProxyBackoff {
 public:
  static constexpr int kSpinRounds = 8;
  static constexpr int kYieldRounds = 8;
  static constexpr double kInFlightCapS = 100e-6;
  static constexpr double kRecentCapS = 200e-6;
  static constexpr double kIdleCapS = 1e-3;
  static constexpr double kRecentWindowS = 0.1;
  // idle()'s answer when nothing is pending: sleep until a kick or the network ends it.
  static constexpr double kUntilWoken = std::numeric_limits<double>::infinity();

  explicit ProxyBackoff(bool eager = false) : eager_(eager) {}

  // Something happened: start over from spinning.
  void active(double now) {
    idleRounds_ = 0;
    lastActiveS_ = now;
  }

  // Nothing happened this round. Spins or yields itself and returns 0, or returns the seconds
  // the caller should sleep (interruptibly) before the next round: kUntilWoken once nothing is
  // pending (the caller bounds it by kIdleCapS where nothing would wake it).
  enum Waiting { kNothing, kWrites, kRelease };
  double idle(double now, Waiting waiting) {
    ++idleRounds_;
    if (idleRounds_ <= kSpinRounds) return 0;
    if (idleRounds_ <= kSpinRounds + kYieldRounds || (eager_ && waiting != kNothing)) {
      sched_yield();
      return 0;
    }
    if (waiting == kNothing) return kUntilWoken;
    int doublings = std::min(idleRounds_ - kSpinRounds - kYieldRounds - 1, 20);
    return std::min(kInFlightCapS, std::ldexp(1e-6, doublings));
  }

  // What bounds a kUntilWoken sleep where nothing would wake it (no CQ wait fd).
  double blindCapS(double now) const {
    return now - lastActiveS_ < kRecentWindowS ? kRecentCapS : kIdleCapS;
  }

 private:
  bool eager_;
  int idleRounds_ = 0;
  double lastActiveS_ = 0;
};

}  // namespace rmacc
