#include "bootstrap/socket.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

namespace rmacc::boot {

int pollMsUntil(Deadline deadline) {
  auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return ms > 1 << 30 ? 1 << 30 : (int)ms;
}

// --- addresses

SockAddr SockAddr::fromWire(const WireAddr& wire) {
  SockAddr a;
  if (wire.family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&a.storage);
    in->sin_family = AF_INET;
    in->sin_port = wire.port;
    memcpy(&in->sin_addr, wire.addr, 4);
    a.len = sizeof(sockaddr_in);
  } else if (wire.family == AF_INET6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = wire.port;
    memcpy(&in6->sin6_addr, wire.addr, 16);
    a.len = sizeof(sockaddr_in6);
  } else {
    RMACC_THROW(rmaccInvalidArgument, "address family %u is neither AF_INET nor AF_INET6",
                (unsigned)wire.family);
  }
  return a;
}

WireAddr SockAddr::toWire() const {
  WireAddr w{};
  w.family = (uint16_t)family();
  if (family() == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&storage);
    w.port = in->sin_port;
    memcpy(w.addr, &in->sin_addr, 4);
  } else {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage);
    w.port = in6->sin6_port;
    memcpy(w.addr, &in6->sin6_addr, 16);
  }
  return w;
}

uint16_t SockAddr::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
}

void SockAddr::setPort(uint16_t port) {
  if (family() == AF_INET)
    reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
  else
    reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
}

std::string SockAddr::str() const {
  char host[INET6_ADDRSTRLEN] = "?";
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, host,
              sizeof(host));
    return strprintf("%s:%u", host, port());
  }
  inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, host,
            sizeof(host));
  return strprintf("[%s]:%u", host, port());
}

bool envBootstrapAddress(SockAddr* out) {
  const std::string& addr = config().bootstrapAddr;
  if (addr.empty()) return false;
  const char* v = addr.c_str();
  SockAddr a;
  auto* in = reinterpret_cast<sockaddr_in*>(&a.storage);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
  if (inet_pton(AF_INET, v, &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
    a.len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, v, &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    a.len = sizeof(sockaddr_in6);
  } else {
    RMACC_THROW(rmaccInvalidArgument,
                "RMACC_BOOTSTRAP_ADDR='%s' is malformed: expected an IPv4 or IPv6 address", v);
  }
  *out = a;
  return true;
}

SockAddr defaultListenAddress() {
  SockAddr a;
  if (envBootstrapAddress(&a)) return a;
  auto* in = reinterpret_cast<sockaddr_in*>(&a.storage);
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.len = sizeof(sockaddr_in);
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return a;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    if (!(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK)) continue;
    in->sin_addr = reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr;
    INFO(kSubsysBoot, "bootstrap address: interface %s", i->ifa_name);
    break;
  }
  freeifaddrs(list);
  return a;
}

bool secretsEqual(const uint8_t* a, const uint8_t* b, size_t bytes) {
  uint8_t diff = 0;
  for (size_t i = 0; i < bytes; ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

// --- sockets

namespace {

Socket newSocket(int family) {
  int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  RMACC_SYSCHECK(fd, "socket");
  return Socket(fd);
}

void setNoDelay(int fd) {
  // Control messages are small and latency-bound: never let Nagle hold one back.
  int one = 1;
  RMACC_SYSCHECK(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)), "TCP_NODELAY");
}

bool isClosedErrno(int e) { return e == ECONNRESET || e == EPIPE || e == ENOTCONN; }

// Waits for `events` on fd; false when the deadline passed first.
bool waitFor(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = poll(&p, 1, pollMsUntil(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) RMACC_SYSCHECK(rc, "poll");
  }
}

}  // namespace

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void Socket::reset() {
  // close(2) is not retried on EINTR: on Linux the fd is released either way.
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Socket Socket::listen(const SockAddr& addr) {
  Socket s = newSocket(addr.family());
  int one = 1;
  RMACC_SYSCHECK(setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), "SO_REUSEADDR");
  if (::bind(s.fd(), addr.sa(), addr.len) != 0)
    RMACC_THROW(rmaccSystemError, "bind to %s failed: %s", addr.str().c_str(), strerror(errno));
  RMACC_SYSCHECK(::listen(s.fd(), SOMAXCONN), "listen");
  return s;
}

// The peer answered, with no: refused by a closed port, or reset by a listener that closed
// while the connection sat in its backlog (a root that has given up). Both are the remote
// side's doing, not this process's.
static rmaccResult_t connectErrorCode(int e) {
  return e == ECONNREFUSED || e == ECONNRESET ? rmaccRemoteError : rmaccSystemError;
}

// A listener whose accept queue is full drops SYNs, and the kernel retries a dropped SYN after
// 1, 2, 4, 8, 16 and 32 s. Under a flood of connections to the root (issue 17) the queue
// refills as soon as the root drains it, so a rank left to that backoff could wait a minute
// for a slot that frees up many times a second. A handshake that has not completed within
// kAttemptS is therefore started again with a fresh SYN; the wait grows to at most
// kMaxAttemptS so a slow network still completes its handshake.
constexpr double kAttemptS = 0.25, kMaxAttemptS = 1.0;

Socket Socket::connect(const SockAddr& addr, Deadline deadline, const char* what) {
  for (double attemptS = kAttemptS;; attemptS = std::min(2 * attemptS, kMaxAttemptS)) {
    Socket s = newSocket(addr.family());
    // Non-blocking: an interrupted connect carries on in the background like EINPROGRESS.
    int rc = ::connect(s.fd(), addr.sa(), addr.len);
    if (rc != 0 && errno != EINPROGRESS && errno != EINTR) {
      int e = errno;
      RMACC_THROW(connectErrorCode(e),
                  "connecting to %s at %s failed: %s", what, addr.str().c_str(), strerror(e));
    }
    if (rc != 0) {
      if (!waitFor(s.fd(), POLLOUT, std::min(deadline, deadlineAfter(attemptS)))) {
        if (Clock::now() < deadline) continue;
        RMACC_THROW(rmaccTimeout, "connecting to %s at %s timed out", what, addr.str().c_str());
      }
      int err = 0;
      socklen_t len = sizeof(err);
      RMACC_SYSCHECK(getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len), "getsockopt");
      if (err != 0)
        RMACC_THROW(connectErrorCode(err),
                    "connecting to %s at %s failed: %s", what, addr.str().c_str(), strerror(err));
    }
    setNoDelay(s.fd());
    return s;
  }
}

Socket Socket::accept(int* error) const {
  if (error) *error = 0;
  for (;;) {
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      Socket s(fd);
      setNoDelay(fd);
      return s;
    }
    if (errno == EINTR) continue;
    // Nothing pending, or a connection that died in the backlog: try again on the next poll.
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED || errno == EPROTO)
      return Socket();
    // Out of fds is survivable: the caller may close a stranger's connection and retry.
    if (errno == EMFILE || errno == ENFILE) {
      if (error) *error = errno;
      else WARN("bootstrap: accept failed: %s", strerror(errno));
      return Socket();
    }
    RMACC_SYSCHECK(-1, "accept4");
  }
}

SockAddr Socket::localAddr() const {
  SockAddr a;
  a.len = sizeof(a.storage);
  RMACC_SYSCHECK(getsockname(fd_, reinterpret_cast<sockaddr*>(&a.storage), &a.len), "getsockname");
  return a;
}

IoStatus Socket::sendAll(const void* data, size_t bytes, Deadline deadline) const {
  return sendAll2(data, bytes, nullptr, 0, deadline);
}

IoStatus Socket::sendAll2(const void* a, size_t aBytes, const void* b, size_t bBytes,
                          Deadline deadline) const {
  iovec iov[2] = {{const_cast<void*>(a), aBytes}, {const_cast<void*>(b), bBytes}};
  int first = 0;
  while (first < 2) {
    if (iov[first].iov_len == 0) {
      ++first;
      continue;
    }
    msghdr msg{};
    msg.msg_iov = iov + first;
    msg.msg_iovlen = 2 - first;
    ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (isClosedErrno(errno)) return IoStatus::kClosed;
      if (errno != EAGAIN && errno != EWOULDBLOCK) RMACC_SYSCHECK(-1, "sendmsg");
      if (!waitFor(fd_, POLLOUT, deadline)) return IoStatus::kTimeout;
      continue;
    }
    // Advance past what was written (possibly part of the first buffer only).
    for (size_t left = (size_t)n; left > 0 && first < 2;) {
      size_t take = left < iov[first].iov_len ? left : iov[first].iov_len;
      iov[first].iov_base = (char*)iov[first].iov_base + take;
      iov[first].iov_len -= take;
      left -= take;
      if (iov[first].iov_len == 0) ++first;
    }
  }
  return IoStatus::kOk;
}

IoStatus Socket::recvAll(void* data, size_t bytes, Deadline deadline) const {
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = recvSome((char*)data + got, bytes - got);
    if (n == 0) return IoStatus::kClosed;
    if (n > 0) {
      got += (size_t)n;
      continue;
    }
    if (!waitFor(fd_, POLLIN, deadline)) return IoStatus::kTimeout;
  }
  return IoStatus::kOk;
}

ssize_t Socket::recvSome(void* data, size_t bytes) const {
  for (;;) {
    ssize_t n = ::recv(fd_, data, bytes, 0);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return -1;
    if (isClosedErrno(errno) || errno == ETIMEDOUT) return 0;
    RMACC_SYSCHECK(-1, "recv");
  }
}

void Socket::shutdownBoth() const {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

}  // namespace rmacc::boot
