// How the proxy thread waits when a round found nothing to do (private to src/net).
//
// Tests run 9 ranks with several threads each on 2 cores: a proxy that spins takes the core
// from the very rank it waits for. But the provider's progress is manual, so an idle proxy must
// still come back to poll the CQ (incoming writes, rxm connection setup), and a busy one must
// come back soon enough to keep the socket buffers moving. Hence exponential back-off:
//   - a few rounds of plain re-polling (work often arrives right after work),
//   - then sched_yield (hands the core to a runnable rank without sleeping),
//   - then sleeps doubling from 1 µs, capped by what the proxy is waiting for:
//       our own writes in flight          -> 100 µs (their progress needs our polls),
//       active within the last 100 ms     -> 200 µs,
//       idle for longer                   -> 1 ms.
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

  // Something happened: start over from spinning.
  void active(double now) {
    idleRounds_ = 0;
    lastActiveS_ = now;
  }

  // Nothing happened this round. Spins or yields itself and returns 0, or returns the seconds
  // the caller should sleep (interruptibly) before the next round.
  double idle(double now, bool writesInFlight) {
    ++idleRounds_;
    if (idleRounds_ <= kSpinRounds) return 0;
    if (idleRounds_ <= kSpinRounds + kYieldRounds) {
      sched_yield();
      return 0;
    }
    int doublings = std::min(idleRounds_ - kSpinRounds - kYieldRounds - 1, 20);
    double cap = writesInFlight                            ? kInFlightCapS
                 : (now - lastActiveS_ < kRecentWindowS) ? kRecentCapS
                                                         : kIdleCapS;
    return std::min(cap, std::ldexp(1e-6, doublings));
  }

 private:
  int idleRounds_ = 0;
  double lastActiveS_ = 0;
};

}  // namespace rmacc
