#include "bootstrap/handshake.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <exception>
#include <vector>

#include "core/error.h"
#include "core/log.h"

namespace rmacc::boot {

namespace {

// Anyone who reaches the port can open connections and say nothing (issue 17: ~1,000 silent
// connections used to exhaust the accept loop and every rank's init failed). A connection
// that has not said hello is therefore held only briefly and only in bounded numbers: real
// ranks send their hello right after connecting, so it is usually complete when accepted.
// These bound strangers only; ranks that said hello leave the list at once (the caller keeps
// them), so the cap never limits the job's size.
constexpr size_t kMaxPending = 256;
constexpr double kHelloDeadlineS = 1.0;

struct Pending {
  Socket sock;
  std::vector<char> hello;
  size_t got = 0;
  Deadline expires;
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

// The accept loop's state: connections still owing their hello, oldest first (all get the
// same deadline, so the oldest also expires first).
class HelloCollector {
 public:
  HelloCollector(const Socket& listener, size_t helloBytes,
                 const std::function<void(Socket, const char*)>& onHello)
      : listener_(listener), helloBytes_(helloBytes), onHello_(onHello) {}
  ~HelloCollector() {
    if (expired_ || evicted_)
      WARN("bootstrap: closed %zu connections that sent no complete hello within %.1f s and %zu "
           "more to stay under %zu such connections (a port scan, or someone flooding the port?)",
           expired_, kHelloDeadlineS, evicted_, kMaxPending);
  }

  // Accepts what is queued; every new connection gets one read at once.
  void acceptAll() {
    outOfFds_ = false;
    for (;;) {
      int err = 0;
      Socket s = listener_.accept(&err);
      if (!s.valid()) {
        // Out of fds: a stranger's slot is worth less than the next connection.
        if ((err == EMFILE || err == ENFILE) && !pending_.empty()) {
          evictOldest();
          continue;
        }
        outOfFds_ = err == EMFILE || err == ENFILE;
        return;
      }
      Pending p{std::move(s), std::vector<char>(helloBytes_), 0, deadlineAfter(kHelloDeadlineS)};
      ReadResult r = readHello(p);
      if (r == ReadResult::kComplete) onHello_(std::move(p.sock), p.hello.data());
      if (r != ReadResult::kPartial) continue;
      if (pending_.size() >= kMaxPending) evictOldest();
      pending_.push_back(std::move(p));
    }
  }

  // Reads the pending connections that poll found ready (fds[i + 1] is pending_[i]).
  void readReady(const std::vector<pollfd>& fds) {
    // Backwards, so that erasing pending_[i] leaves the indices still to visit unchanged.
    for (size_t i = pending_.size(); i-- > 0;) {
      if (!fds[i + 1].revents) continue;
      ReadResult r = readHello(pending_[i]);
      if (r == ReadResult::kPartial) continue;
      Pending p = std::move(pending_[i]);
      pending_.erase(pending_.begin() + (ptrdiff_t)i);
      if (r == ReadResult::kComplete) onHello_(std::move(p.sock), p.hello.data());
    }
  }

  void expire() {
    Deadline now = Clock::now();
    while (!pending_.empty() && pending_.front().expires <= now) {
      pending_.pop_front();
      ++expired_;
    }
  }

  // The poll set: the listener (unless out of fds, when accepting would only fail again) and
  // every pending connection; and how long poll may sleep.
  int prepare(std::vector<pollfd>& fds, Deadline deadline) const {
    fds.assign(1, pollfd{outOfFds_ ? -1 : listener_.fd(), POLLIN, 0});
    for (const Pending& p : pending_) fds.push_back(pollfd{p.sock.fd(), POLLIN, 0});
    Deadline wake = deadline;
    if (!pending_.empty()) wake = std::min(wake, pending_.front().expires);
    int ms = pollMsUntil(wake);
    if (outOfFds_) ms = std::min(ms, 10);  // fds may free up without any event of ours
    return ms;
  }

 private:
  void evictOldest() {
    pending_.pop_front();
    ++evicted_;
  }

  const Socket& listener_;
  const size_t helloBytes_;
  const std::function<void(Socket, const char*)>& onHello_;
  std::deque<Pending> pending_;
  bool outOfFds_ = false;
  size_t expired_ = 0, evicted_ = 0;
};

}  // namespace

bool acceptHellos(const Socket& listener, size_t helloBytes, const Deadline& deadline,
                  const std::function<void(Socket, const char* hello)>& onHello,
                  const std::function<bool()>& done,
                  const std::function<void()>& waiting) {
  HelloCollector c(listener, helloBytes, onHello);
  std::vector<pollfd> fds;
  while (!done()) {
    if (pollMsUntil(deadline) == 0) return false;
    if (waiting) waiting();
    c.expire();
    int ms = c.prepare(fds, deadline);
    if (waiting) ms = std::min(ms, 1000);
    int rc = poll(fds.data(), fds.size(), ms);
    if (rc < 0 && errno == EINTR) continue;
    RMACC_SYSCHECK(rc, "poll");
    c.readReady(fds);
    if (fds[0].revents || fds[0].fd < 0) c.acceptAll();  // fd < 0: out of fds, try again
  }
  return true;
}

}  // namespace rmacc::boot
