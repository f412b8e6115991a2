// Sleeping on 64-bit signal counters that live in memory shared between processes.
//
// Linux futexes are 32-bit, so a waiter sleeps on the low 32-bit word of the counter. That is
// safe because every counter rmacc waits on only grows (DESIGN.md §1): the waiter re-reads the
// full 64-bit value after every wake-up and decides on that, never on the low word alone. The
// one case the low word misses, an increase by an exact multiple of 2^32 between the waiter's
// read and its FUTEX_WAIT, costs at most one wait slice: no wait sleeps longer than a slice.
// Every writer (storeAndWake) wakes unconditionally, so a change of the high word alone still
// wakes sleepers.
#pragma once

#include <cstdint>

namespace rmacc::os {

// How long one futex sleep lasts at most: bounds how late a timeout, an abort or a store that
// did not go through storeAndWake (a plain memcpy into a signal) is noticed.
constexpr double kWaitSliceS = 0.05;

inline uint64_t loadAcquire(const volatile uint64_t* addr) {
  return __atomic_load_n(const_cast<const uint64_t*>(addr), __ATOMIC_ACQUIRE);
}

// Release store of `value` (everything written before it becomes visible first), then wakes
// every thread of every process sleeping on `addr`.
void storeAndWake(volatile uint64_t* addr, uint64_t value);

// Wakes every sleeper on `addr` without storing (abort, shutdown).
void wakeAll(const volatile uint64_t* addr);

// Sleeps while *addr still equals `observed` (its low word, see above), for at most
// `timeoutS` seconds. Returns on a wake-up, a changed value, a signal or the timeout; the
// caller re-checks the full value. Never spins: a futex error other than the expected ones
// falls back to a plain sleep of `timeoutS`.
void sleepWhileEqual(const volatile uint64_t* addr, uint64_t observed, double timeoutS);

}  // namespace rmacc::os
