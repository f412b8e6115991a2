#include "os/futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cerrno>
#include <climits>

namespace rmacc::os {

namespace {

// The 32-bit word of the counter that carries its low bits (the futex word).
uint32_t* lowWord(const volatile uint64_t* addr) {
  auto* words = reinterpret_cast<uint32_t*>(const_cast<uint64_t*>(addr));
  return std::endian::native == std::endian::little ? words : words + 1;
}

timespec toTimespec(double s) {
  if (s < 0) s = 0;
  timespec ts;
  ts.tv_sec = (time_t)s;
  ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
  return ts;
}

// Not FUTEX_PRIVATE_FLAG: the counter may sit in a MAP_SHARED mapping another process waits
// on, and only shared futexes key on the underlying page rather than on our address space.
long futex(uint32_t* word, int op, uint32_t val, const timespec* timeout) {
  return syscall(SYS_futex, word, op, val, timeout, nullptr, 0);
}

}  // namespace

void wakeAll(const volatile uint64_t* addr) { futex(lowWord(addr), FUTEX_WAKE, INT_MAX, nullptr); }

namespace {
// Bumped (release) before every storeAndWake; see acquireStoredSignals. An RMW, so that one
// acquire orders after all earlier bumps of every thread (a release sequence), not the last.
std::atomic<uint64_t> storedSignals{0};
}  // namespace

void acquireStoredSignals() { (void)storedSignals.load(std::memory_order_acquire); }

void storeAndWake(volatile uint64_t* addr, uint64_t value) {
  // Before the store: whoever sees the value (here or in another process) comes after the bump.
  storedSignals.fetch_add(1, std::memory_order_release);
  __atomic_store_n(const_cast<uint64_t*>(addr), value, __ATOMIC_RELEASE);
  wakeAll(addr);
}

void sleepWhileEqual(const volatile uint64_t* addr, uint64_t observed, double timeoutS) {
  timespec ts = toTimespec(timeoutS);
  long rc = futex(lowWord(addr), FUTEX_WAIT, (uint32_t)observed, &ts);
  if (rc == 0 || errno == EAGAIN || errno == ETIMEDOUT || errno == EINTR) return;
  // EINVAL (misaligned word), ENOSYS, EFAULT...: sleep instead, so that the caller's loop
  // never turns into a spin.
  nanosleep(&ts, nullptr);
}

}  // namespace rmacc::os
