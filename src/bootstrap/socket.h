// A small RAII TCP socket for the control plane, and the addresses it binds and connects to.
// Every socket is non-blocking and close-on-exec; the "blocking" transfers below wait with
// poll(2) against a deadline, so no call in the bootstrap can hang past its timeout.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace rmacc::boot {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

inline Deadline deadlineAfter(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(seconds));
}
// Milliseconds left until `deadline` for poll(2): 0 when passed, rounded up otherwise.
int pollMsUntil(Deadline deadline);

// An address as it travels in the unique id and in the root's table (same layout as the tail
// of UniqueIdData). The port is in network byte order.
struct WireAddr {
  uint16_t family;
  uint16_t port;
  uint8_t addr[16];
};
static_assert(sizeof(WireAddr) == 20, "WireAddr is a wire format");

struct SockAddr {
  sockaddr_storage storage{};
  socklen_t len = 0;

  static SockAddr fromWire(const WireAddr& wire);  // throws rmaccInvalidArgument if malformed
  WireAddr toWire() const;
  int family() const { return storage.ss_family; }
  uint16_t port() const;  // host byte order
  void setPort(uint16_t port);
  std::string str() const;  // "1.2.3.4:5678" or "[::1]:5678"
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

// Where this process listens when nothing better is known: RMACC_BOOTSTRAP_ADDR (an IPv4 or
// IPv6 literal) if set, else the first up, non-loopback IPv4 interface, else 127.0.0.1.
// The port is 0 (the kernel picks one at bind).
SockAddr defaultListenAddress();
// RMACC_BOOTSTRAP_ADDR parsed, or false when it is unset; throws when it is malformed.
bool envBootstrapAddress(SockAddr* out);

// How a deadline-bounded transfer ended; system errors other than a closed peer throw.
enum class IoStatus { kOk, kTimeout, kClosed };

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { reset(); }
  Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset();

  // A listener bound to `addr` (port 0: the kernel's choice), with a backlog deep enough for
  // every rank of a large job to connect before anyone calls accept().
  static Socket listen(const SockAddr& addr);
  // Connects, waiting at most until `deadline`; throws rmaccTimeout, or rmaccRemoteError when
  // the peer refuses (its process is gone). `what` names the peer in messages.
  static Socket connect(const SockAddr& addr, Deadline deadline, const char* what);
  // The next pending connection, or an invalid Socket when none is waiting. When `error` is
  // given it receives EMFILE or ENFILE when the process is out of fds (else 0).
  Socket accept(int* error = nullptr) const;
  SockAddr localAddr() const;

  // Sends or receives exactly `bytes`, handling EINTR and partial transfers, until `deadline`.
  IoStatus sendAll(const void* data, size_t bytes, Deadline deadline) const;
  IoStatus recvAll(void* data, size_t bytes, Deadline deadline) const;
  // Two buffers in one go (a frame's header and payload), with MSG_NOSIGNAL.
  IoStatus sendAll2(const void* a, size_t aBytes, const void* b, size_t bBytes,
                    Deadline deadline) const;
  // One non-blocking read: >0 bytes read, 0 at end of stream (or reset), -1 when nothing is
  // available now. Other errors throw.
  ssize_t recvSome(void* data, size_t bytes) const;
  // Wakes any thread of either side blocked on this connection; the fd stays open.
  void shutdownBoth() const;

 private:
  int fd_ = -1;
};

// Constant-time comparison of secrets: timing must not reveal how many bytes matched.
bool secretsEqual(const uint8_t* a, const uint8_t* b, size_t bytes);

}  // namespace rmacc::boot
