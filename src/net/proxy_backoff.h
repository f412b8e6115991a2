// How the proxy thread waits when a round found nothing to do (private to src/net).
//
// Incoming writes and posts end any sleep at once (the CQ's wait fd and the kick eventfd,
// proxy.cc); what nothing signals is the device releasing a posted put (it writes a word in
// host memory) and the provider's own progress (manual). So the proxy must come back to
// look, and how often is a trade between hop latency and the cores it takes:
//   - eager (cores to spare, as on GPU hosts): while a posted put awaits its release or
//     writes are in flight, re-poll without sleeping (yielding the core each round); every
//     µs slept there is added to a hop;
//   - otherwise (tests run 9 ranks with several threads each on 2 cores, where a polling
//     proxy takes the core from the very rank it waits for): a few rounds of re-polling,
//     then sched_yield, then sleeps doubling from 1 µs, capped by what the proxy waits for:
//       a release or our own writes in flight -> 100 µs,
//       active within the last 100 ms          -> 200 µs,
//       idle for longer                        -> 1 ms.
// Both modes sleep with the idle caps once nothing is pending.
#pragma once

#include <sched.h>

#include <algorithm>
#include <cmath>

namespace rmacc {

class ProxyBackoff {
 public:
  static constexpr int kSpinRounds = 8;
  static constexpr int kYieldRounds = 8;
  static constexpr double kInFlightCapS = 100e-6;
  static constexpr double kRecentCapS = 200e-6;
  static constexpr double kIdleCapS = 1e-3;
  static constexpr double kRecentWindowS = 0.1;

  explicit ProxyBackoff(bool eager = false) : eager_(eager) {}

  // Something happened: start over from spinning.
  void active(double now) {
    idleRounds_ = 0;
    lastActiveS_ = now;
  }

  // Nothing happened this round. Spins or yields itself and returns 0, or returns the seconds
  // the caller should sleep (interruptibly) before the next round.
  enum Waiting { kNothing, kWrites, kRelease };
  double idle(double now, Waiting waiting) {
    ++idleRounds_;
    if (idleRounds_ <= kSpinRounds) return 0;
    if (idleRounds_ <= kSpinRounds + kYieldRounds || (eager_ && waiting != kNothing)) {
      sched_yield();
      return 0;
    }
    int doublings = std::min(idleRounds_ - kSpinRounds - kYieldRounds - 1, 20);
    double cap = waiting != kNothing                         ? kInFlightCapS
                 : (now - lastActiveS_ < kRecentWindowS) ? kRecentCapS
                                                         : kIdleCapS;
    return std::min(cap, std::ldexp(1e-6, doublings));
  }

 private:
  bool eager_;
  int idleRounds_ = 0;
  double lastActiveS_ = 0;
};

}  // namespace rmacc
