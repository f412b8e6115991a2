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

// Orders what follows after every storeAndWake this process made so far (an acquire of the
// release each storeAndWake makes on one process-wide counter first). Why: a signal this
// process writes may release another process (a node mate, which relays it over the network)
// whose answer comes back to a different thread of this process (the proxy, which hands a
// landed chunk to a copy stream). That order is real but runs through other processes and
// the kernel, where neither the C++ memory model nor ThreadSanitizer can follow it; the
// counter makes it an edge inside the process: the stream that writes into a window acquires
// it before copying (HostStream::runCopies), so its copy is ordered after the reads the
// application made before its last signal (docs/decisions.md#stored-signals-acquire).
void acquireStoredSignals();

// Wakes every sleeper on `addr` without storing (abort, shutdown).
void wakeAll(const volatile uint64_t* addr);

// Sleeps while *addr still equals `observed` (its low word, see above), for at most
// `timeoutS` seconds. Returns on a wake-up, a changed value, a signal or the timeout; the
// caller re-checks the full value. Never spins: a futex error other than the expected ones
// falls back to a plain sleep of `timeoutS`.
void sleepWhileEqual(const volatile uint64_t* addr, uint64_t observed, double timeoutS);

}  // namespace rmacc::os
