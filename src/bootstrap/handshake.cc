#include "bootstrap/handshake.h"

#include <poll.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <vector>

#include "core/error.h"
#include "core/log.h"

namespace rmacc::boot {

namespace {

// A bound on connections that have not finished their hello yet, so that a flood of strangers
// cannot exhaust this process's fds; real ranks send their hello at once and leave the list.
constexpr size_t kMaxPending = 1024;

struct Pending {
  Socket sock;
  std::vector<char> hello;
  size_t got = 0;
};

enum class ReadResult { kComplete, kPartial, kDropped };

ReadResult readHello(Pending& p) {
  try {
    while (p.got < p.hello.size()) {
      ssize_t n = p.sock.recvSome(p.hello.data() + p.got, p.hello.size() - p.got);
      if (n == 0) return ReadResult::kDropped;
      if (n < 0) return ReadResult::kPartial;
      p.got += (size_t)n;
    }
    return ReadResult::kComplete;
  } catch (const std::exception& e) {
    return ReadResult::kDropped;  // an odd socket error concerns this connection only
  }
}

void acceptAll(const Socket& listener, size_t helloBytes, std::vector<Pending>& pending) {
  for (;;) {
    Socket s = listener.accept();
    if (!s.valid()) return;
    if (pending.size() >= kMaxPending) {
      WARN("bootstrap: %zu connections have not said hello; dropping a new one", pending.size());
      continue;
    }
    pending.push_back(Pending{std::move(s), std::vector<char>(helloBytes), 0});
  }
}

}  // namespace

bool acceptHellos(const Socket& listener, size_t helloBytes, const Deadline& deadline,
                  const std::function<void(Socket, const char* hello)>& onHello,
                  const std::function<bool()>& done) {
  std::vector<Pending> pending;
  std::vector<pollfd> fds;
  while (!done()) {
    int ms = pollMsUntil(deadline);
    if (ms == 0) return false;
    fds.assign(1, pollfd{listener.fd(), POLLIN, 0});
    for (const Pending& p : pending) fds.push_back(pollfd{p.sock.fd(), POLLIN, 0});
    int rc = poll(fds.data(), fds.size(), ms);
    if (rc < 0 && errno == EINTR) continue;
    RMACC_SYSCHECK(rc, "poll");
    // Backwards, so that erasing pending[i] leaves the indices still to visit unchanged.
    for (size_t i = pending.size(); i-- > 0;) {
      if (!fds[i + 1].revents) continue;
      ReadResult r = readHello(pending[i]);
      if (r == ReadResult::kPartial) continue;
      Pending p = std::move(pending[i]);
      pending.erase(pending.begin() + (ptrdiff_t)i);
      if (r == ReadResult::kComplete) onHello(std::move(p.sock), p.hello.data());
    }
    if (fds[0].revents) acceptAll(listener, helloBytes, pending);
  }
  return true;
}

}  // namespace rmacc::boot
