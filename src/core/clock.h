// One monotonic clock for timeouts, per-call costs and traces (CLOCK_MONOTONIC, the clock the
// trace's stream and network events must share across processes of a node).
#pragma once

#include <time.h>

namespace rmacc {

inline double monotonicSeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

}  // namespace rmacc
