// TcpBootstrap traffic: the reader thread, tagged send/recv and the collectives.
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>

#include "bootstrap/tcp_bootstrap.h"
#include "core/error.h"
#include "core/log.h"

namespace rmacc::boot {

namespace {

// The reader drains sockets through this much staging, so a small frame costs one recv(2)
// for header and payload together; larger payloads are read straight into their buffer.
constexpr size_t kStageBytes = 64 << 10;
// Reads per connection per wakeup, so that one busy peer cannot starve the others.
constexpr int kReadsPerTurn = 16;
// A frame larger than this is a corrupt stream, not a control message.
constexpr uint64_t kMaxFrameBytes = 1ull << 34;
// Collective tags count in the low 30 bits; the tags with bit 30 set are control frames the
// reader thread handles itself.
constexpr uint32_t kCollTagMask = (1u << 30) - 1;
constexpr uint32_t kControlTag = kBootstrapReservedTagBit | (1u << 30);
constexpr uint32_t kGoodbyeTag = kControlTag | 1;    // the sender leaves on purpose
constexpr uint32_t kAbortTag = kControlTag | 2;      // the sender aborts; payload: why
constexpr uint32_t kStatusAskTag = kControlTag | 3;  // "what are you doing?"
constexpr uint32_t kStatusTag = kControlTag | 4;     // the answer (text)

}  // namespace

TcpBootstrap::~TcpBootstrap() {
  if (!reader_.joinable()) return;
  stop_.store(true);
  uint64_t one = 1;
  while (::write(wake_.fd(), &one, sizeof(one)) < 0 && errno == EINTR) {
  }
  reader_.join();
  for (auto& p : peers_)
    if (p && p->pidfd.load() >= 0) ::close(p->pidfd.load());
}

// --- the reader thread

void TcpBootstrap::startReader() {
  int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  RMACC_SYSCHECK(fd, "eventfd");
  wake_ = Socket(fd);  // Socket only owns the fd here; it is never used as a socket
  reader_ = std::thread([this] { readerLoop(); });
}

void TcpBootstrap::readerLoop() {
  pthread_setname_np(pthread_self(), "rmacc-bootstrap");
  std::vector<char> stage(kStageBytes);
  std::vector<pollfd> fds;
  std::vector<int> owner;  // peer of fds[i]; -1 for the wake fd
  bool rebuild = true;
  try {
    while (!stop_.load()) {
      if (rebuild) {
        // Closed peers leave the set: a hung-up socket would otherwise poll ready forever.
        // owner: the peer of a connection, or -2 - peer for the peer's pidfd.
        fds.assign(1, pollfd{wake_.fd(), POLLIN, 0});
        owner.assign(1, -1);
        for (int p : others_) {
          if (peers_[p]->closed.load()) continue;
          fds.push_back(pollfd{peers_[p]->sock.fd(), POLLIN, 0});
          owner.push_back(p);
          if (peers_[p]->pidfd.load() < 0) continue;
          fds.push_back(pollfd{peers_[p]->pidfd.load(), POLLIN, 0});
          owner.push_back(-2 - p);
        }
        rebuild = false;
      }
      int rc = poll(fds.data(), fds.size(), -1);  // idle: sleep until traffic or stop
      if (rc < 0 && errno == EINTR) continue;
      RMACC_SYSCHECK(rc, "poll");
      if (fds[0].revents) {
        uint64_t v;
        while (::read(wake_.fd(), &v, sizeof(v)) > 0) {
        }
        if (rebuild_.exchange(false)) rebuild = true;
      }
      for (size_t i = 1; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        if (owner[i] >= 0) {
          if (!readPeer(owner[i], stage)) rebuild = true;
          continue;
        }
        // A peer's process exited: what it sent before is still read first.
        const int p = -2 - owner[i];
        if (!peers_[p]->closed.load()) readPeer(p, stage);
        markClosed(p, strprintf("rank %d's process exited (seen by its pidfd)", p));
        rebuild = true;
      }
    }
  } catch (const std::exception& e) {
    // The reader cannot throw at anyone: every waiter learns of it through its peer's state.
    WARN("bootstrap: rank %d: reader thread failed: %s", rank_, e.what());
    for (int p : others_) markClosed(p, strprintf("bootstrap reader failed: %s", e.what()));
  }
}

// Drains what `peer` has sent; false once its connection is closed.
bool TcpBootstrap::readPeer(int peer, std::vector<char>& stage) {
  Peer& p = *peers_[peer];
  std::vector<Frame> done;
  std::string closed;
  try {
    for (int turn = 0; turn < kReadsPerTurn; ++turn) {
      ssize_t n;
      size_t left = p.payload.size() - p.payloadGot;
      if (p.inPayload && left >= stage.size()) {
        n = p.sock.recvSome(p.payload.data() + p.payloadGot, left);
        if (n > 0) parse(p, nullptr, (size_t)n, done);
      } else {
        n = p.sock.recvSome(stage.data(), stage.size());
        if (n > 0) parse(p, stage.data(), (size_t)n, done);
      }
      if (n < 0) break;  // drained for now
      if (n == 0) {
        // After our own abort the end of stream is our shutdown, which says nothing about the
        // peer (it may be alive and merely silent).
        closed = aborted_.load() ? strprintf("connection to rank %d shut down by rank %d's abort",
                                             peer, rank_)
                                 : strprintf("rank %d closed its connection", peer);
        break;
      }
    }
  } catch (const std::exception& e) {
    closed = strprintf("rank %d: connection failed: %s", peer, e.what());
  }
  deliver(peer, done);  // frames that arrived before a close are still good
  if (closed.empty()) return true;
  markClosed(peer, closed);
  return false;
}

// Consumes `bytes` of stream: from `data`, or (data == nullptr) already read into p.payload.
void TcpBootstrap::parse(Peer& p, const char* data, size_t bytes, std::vector<Frame>& done) {
  for (;;) {
    if (!p.inPayload) {
      if (bytes == 0) return;
      size_t take = std::min(sizeof(p.header) - p.headerGot, bytes);
      memcpy(reinterpret_cast<char*>(&p.header) + p.headerGot, data, take);
      p.headerGot += take;
      data += take;
      bytes -= take;
      if (p.headerGot < sizeof(p.header)) return;
      if (p.header.flags != 0 || p.header.bytes > kMaxFrameBytes)
        throw std::runtime_error(strprintf("protocol error: frame header (flags %u, %llu bytes)",
                                           p.header.flags, (unsigned long long)p.header.bytes));
      p.payload.resize(p.header.bytes);
      p.payloadGot = 0;
      p.inPayload = true;
    }
    size_t take = std::min(p.payload.size() - p.payloadGot, bytes);
    if (data && take) {
      memcpy(p.payload.data() + p.payloadGot, data, take);
      data += take;
    }
    p.payloadGot += take;
    bytes -= take;
    if (p.payloadGot < p.payload.size()) return;
    done.push_back(Frame{p.header.tag, std::move(p.payload)});
    p.payload = {};
    p.payloadGot = 0;
    p.headerGot = 0;
    p.inPayload = false;
  }
}

void TcpBootstrap::deliver(int peer, std::vector<Frame>& frames) {
  if (frames.empty()) return;
  bool any = false;
  for (Frame& f : frames) {
    if (control(peer, f)) continue;
    std::lock_guard<std::mutex> lock(mu_);
    peers_[peer]->queues[f.tag].push_back(std::move(f.payload));
    any = true;
  }
  if (any) cv_.notify_all();
}

bool TcpBootstrap::control(int peer, Frame& f) {
  Peer& p = *peers_[peer];
  if (f.tag == kGoodbyeTag) {
    p.left.store(true);
    return true;
  }
  if (f.tag == kAbortTag) {
    std::string why(f.payload.begin(), f.payload.end());
    {
      std::lock_guard<std::mutex> lock(mu_);
      p.abortReason = why;
    }
    peerLost(peer, strprintf("rank %d aborted: %s", peer, why.c_str()));
    return true;
  }
  if (f.tag == kStatusAskTag) {
    std::string status;
    {
      std::lock_guard<std::mutex> lock(handlerMu_);
      status = statusFn_ ? statusFn_() : "no status";
    }
    try {
      sendTagged(peer, kStatusTag, status.data(), status.size());
    } catch (const std::exception&) {
      // The asker went away: nobody to answer.
    }
    return true;
  }
  return false;
}

void TcpBootstrap::markClosed(int peer, const std::string& why) {
  std::string text = why;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (peers_[peer]->closed.load()) return;
    if (!peers_[peer]->abortReason.empty())
      text = strprintf("rank %d aborted: %s", peer, peers_[peer]->abortReason.c_str());
    peers_[peer]->closedWhy = text;
    peers_[peer]->closed.store(true);
  }
  cv_.notify_all();
  INFO(kSubsysBoot, "bootstrap: rank %d: %s", rank_, text.c_str());
  if (!peers_[peer]->left.load()) peerLost(peer, text);
}

void TcpBootstrap::peerLost(int peer, const std::string& why) {
  if (aborted_.load() || stop_.load() || peers_[peer]->lostReported.exchange(true)) return;
  std::lock_guard<std::mutex> lock(handlerMu_);
  if (lostFn_ && !aborted_.load()) lostFn_(peer, why);
}

// --- point to point

void TcpBootstrap::throwAborted() const {
  RMACC_THROW(rmaccRemoteError, "rank %d: bootstrap aborted", rank_);
}

void TcpBootstrap::send(int peer, uint32_t tag, const void* data, size_t bytes) {
  RMACC_ARG_CHECK(peer >= 0 && peer < nRanks_, "send: peer %d is not in [0, %d)", peer, nRanks_);
  RMACC_ARG_CHECK(!(tag & kBootstrapReservedTagBit), "send: tag %#x is reserved", tag);
  RMACC_ARG_CHECK(data || bytes == 0, "send: data is NULL for %zu bytes", bytes);
  sendTagged(peer, tag, data, bytes);
}

std::vector<char> TcpBootstrap::recv(int peer, uint32_t tag) {
  RMACC_ARG_CHECK(peer >= 0 && peer < nRanks_, "recv: peer %d is not in [0, %d)", peer, nRanks_);
  RMACC_ARG_CHECK(!(tag & kBootstrapReservedTagBit), "recv: tag %#x is reserved", tag);
  std::vector<char> out;
  collect({peer}, tag, [&](int, std::vector<char>& m) { out = std::move(m); });
  return out;
}

void TcpBootstrap::sendTagged(int peer, uint32_t tag, const void* data, size_t bytes) {
  if (aborted_.load()) throwAborted();
  Peer& p = *peers_[peer];
  if (peer == rank_) {
    const char* c = static_cast<const char*>(data);
    std::vector<char> copy(c, c + bytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      p.queues[tag].push_back(std::move(copy));
    }
    cv_.notify_all();
    return;
  }
  if (p.closed.load()) RMACC_THROW(rmaccRemoteError, "rank %d closed its connection", peer);
  FrameHeader h{tag, 0, bytes};
  IoStatus st;
  {
    std::lock_guard<std::timed_mutex> lock(p.sendMu);
    st = p.sock.sendAll2(&h, sizeof(h), data, bytes, deadlineAfter(timeoutS_));
  }
  if (st == IoStatus::kOk) return;
  if (aborted_.load()) throwAborted();
  if (st == IoStatus::kClosed) RMACC_THROW(rmaccRemoteError, "rank %d closed its connection", peer);
  RMACC_THROW(rmaccTimeout, "rank %d: sending %zu bytes to rank %d timed out after %.1f s", rank_,
              bytes, peer, timeoutS_);
}

// Under mu_: moves the first queued message with `tag` of each of `peers` into `ready`, and
// drops those peers from `peers`. True when anything was taken.
bool TcpBootstrap::takeArrived(std::vector<int>& peers, uint32_t tag,
                               std::vector<std::pair<int, std::vector<char>>>& ready) {
  for (size_t i = peers.size(); i-- > 0;) {
    auto& queues = peers_[peers[i]]->queues;
    auto it = queues.find(tag);
    if (it == queues.end()) continue;
    ready.emplace_back(peers[i], std::move(it->second.front()));
    it->second.pop_front();
    if (it->second.empty()) queues.erase(it);  // tags are per call: don't let them pile up
    peers.erase(peers.begin() + (ptrdiff_t)i);
  }
  return !ready.empty();
}

void TcpBootstrap::collect(std::vector<int> peers, uint32_t tag, const Taker& take) {
  Deadline deadline = deadlineAfter(timeoutS_);
  std::vector<std::pair<int, std::vector<char>>> ready;
  while (!peers.empty()) {
    rmaccResult_t err = rmaccSuccess;
    std::string why;
    {
      std::unique_lock<std::mutex> lock(mu_);
      for (bool timedOut = false;;) {
        if (aborted_.load()) {
          err = rmaccRemoteError, why = strprintf("rank %d: bootstrap aborted", rank_);
          break;
        }
        // Take whatever has arrived; a peer that closed after sending still delivers.
        if (takeArrived(peers, tag, ready)) break;
        // Any peer we still need being gone fails the whole wait at once, not in turn.
        for (int p : peers)
          if (peers_[p]->closed.load()) err = rmaccRemoteError, why = peers_[p]->closedWhy;
        if (err != rmaccSuccess) break;
        if (timedOut) {
          err = rmaccTimeout;
          why = strprintf("rank %d: waiting for tag %#x from rank %d%s timed out after %.1f s",
                          rank_, tag, peers[0], peers.size() > 1 ? " and others" : "", timeoutS_);
          break;
        }
        timedOut = cv_.wait_until(lock, deadline) == std::cv_status::timeout;
      }
    }
    // Throw and copy outside the lock: the error path logs, the copy may be large.
    if (err != rmaccSuccess) RMACC_THROW(err, "%s", why.c_str());
    for (auto& [p, m] : ready) take(p, m);
    ready.clear();
  }
}

void TcpBootstrap::abort(const std::string& reason) {
  if (!aborted_.load()) sendToAll(kAbortTag, reason, 0.2);
  abort();
}

void TcpBootstrap::sendToAll(uint32_t tag, const std::string& text, double waitS) {
  FrameHeader h{tag, 0, text.size()};
  // One deadline for all peers, so that n peers cost at most waitS in all.
  Deadline deadline = deadlineAfter(waitS);
  for (int peer : others_) {
    Peer& p = *peers_[peer];
    if (p.closed.load()) continue;
    // Best effort: a sender stuck on a full connection keeps its lock; after the deadline,
    // skip that peer (it learns from the connection closing instead, without the reason). A
    // sender that merely holds the lock for a moment (the reader answering a status query,
    // which every rank sends when it times out) must not cost the peer the abort's reason:
    // skipping at once made survivors report "rank N closed its connection" and pass that on.
    std::unique_lock<std::timed_mutex> lock(p.sendMu, std::defer_lock);
    if (!lock.try_lock_until(deadline)) continue;
    (void)p.sock.sendAll2(&h, sizeof(h), text.data(), text.size(), deadline);
  }
}

void TcpBootstrap::leave() {
  if (!aborted_.load()) sendToAll(kGoodbyeTag, "", 1.0);
}

void TcpBootstrap::setPeerLostHandler(PeerLostFn fn) {
  std::lock_guard<std::mutex> lock(handlerMu_);
  lostFn_ = std::move(fn);
}

void TcpBootstrap::setStatusProvider(std::function<std::string()> fn) {
  std::lock_guard<std::mutex> lock(handlerMu_);
  statusFn_ = std::move(fn);
}

void TcpBootstrap::watchProcess(int peer, int pidfd) {
  if (peer < 0 || peer >= nRanks_ || peer == rank_ || pidfd < 0) {
    if (pidfd >= 0) ::close(pidfd);
    return;
  }
  int old = peers_[peer]->pidfd.exchange(pidfd);
  if (old >= 0) ::close(old);
  rebuild_.store(true);
  uint64_t one = 1;
  while (::write(wake_.fd(), &one, sizeof(one)) < 0 && errno == EINTR) {
  }
}

std::vector<std::string> TcpBootstrap::statusOfPeers(double waitS) {
  std::lock_guard<std::mutex> serial(statusMu_);
  std::vector<std::string> out(nRanks_);
  {
    std::lock_guard<std::mutex> lock(handlerMu_);
    out[rank_] = statusFn_ ? statusFn_() : "no status";
  }
  std::vector<int> asked;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int p : others_) peers_[p]->queues.erase(kStatusTag);  // answers to an earlier ask
  }
  for (int p : others_) {
    try {
      sendTagged(p, kStatusAskTag, nullptr, 0);
      asked.push_back(p);
    } catch (const std::exception& e) {
      out[p] = strprintf("not asked (%s)", e.what());
    }
  }
  Deadline deadline = deadlineAfter(waitS);
  std::vector<std::pair<int, std::vector<char>>> ready;
  std::unique_lock<std::mutex> lock(mu_);
  while (!asked.empty()) {
    takeArrived(asked, kStatusTag, ready);
    // Our abort shuts every connection down: who has not answered by then is silent, not gone.
    if (aborted_.load()) break;
    for (size_t i = asked.size(); i-- > 0;) {
      if (!peers_[asked[i]]->closed.load()) continue;
      out[asked[i]] = "gone (" + peers_[asked[i]]->closedWhy + ")";
      asked.erase(asked.begin() + (ptrdiff_t)i);
    }
    if (asked.empty() || cv_.wait_until(lock, deadline) == std::cv_status::timeout) break;
  }
  takeArrived(asked, kStatusTag, ready);
  for (auto& [p, m] : ready) out[p].assign(m.begin(), m.end());
  for (int p : asked)
    out[p] = aborted_.load() ? strprintf("not answering (no answer before rank %d aborted)", rank_)
                             : strprintf("not answering (no answer within %.1f s)", waitS);
  return out;
}

void TcpBootstrap::abort() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_.store(true);
  }
  cv_.notify_all();
  // Shutting the connections down unblocks our own senders and tells every peer at once,
  // so they fail now instead of after their timeout.
  for (int p : others_) peers_[p]->sock.shutdownBoth();
  INFO(kSubsysBoot, "bootstrap: rank %d aborted", rank_);
}

// --- collectives

void TcpBootstrap::allGather(void* data, size_t bytes) {
  RMACC_ARG_CHECK(data || bytes == 0, "allGather: data is NULL for %zu bytes", bytes);
  // A fresh tag per call: a fast rank's next collective never mixes with this one.
  uint32_t tag = kBootstrapReservedTagBit | (collSeq_++ & kCollTagMask);
  if (aborted_.load()) throwAborted();
  char* base = static_cast<char*>(data);
  // Direct exchange: n-1 sends and n-1 receives in one round. Latency is one hop; the order
  // starts after this rank so that not every rank writes to rank 0 first.
  for (int p : others_) sendTagged(p, tag, base + (size_t)rank_ * bytes, bytes);
  collect(others_, tag, [&](int p, std::vector<char>& m) {
    if (m.size() != bytes)
      RMACC_THROW(rmaccInvalidUsage, "allGather: rank %d contributed %zu bytes, rank %d %zu "
                  "(collective calls out of step?)", p, m.size(), rank_, bytes);
    if (bytes) memcpy(base + (size_t)p * bytes, m.data(), bytes);
  });
}

void TcpBootstrap::barrier() { allGather(nullptr, 0); }

}  // namespace rmacc::boot
