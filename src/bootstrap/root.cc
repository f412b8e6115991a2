// The rendezvous root: createUniqueId binds a listener and leaves a detached thread that
// collects the hellos of one communicator's ranks, sends every rank the table of listener
// addresses, and exits. It holds no state shared with the rest of the process.
#include <pthread.h>
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/handshake.h"
#include "bootstrap/socket.h"
#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

namespace rmacc {

namespace {

using namespace boot;

// More ranks than any job this control plane could mesh; a larger nRanks is a corrupt hello.
constexpr uint32_t kMaxRanks = 1u << 20;

void fillRandom(uint8_t* out, size_t bytes) {
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = getrandom(out + got, bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    RMACC_SYSCHECK(n, "getrandom");
    got += (size_t)n;
  }
}

class Root {
 public:
  Root(Socket listener, const uint8_t* secret, double timeoutS)
      : listener_(std::move(listener)), timeoutS_(timeoutS) {
    memcpy(secret_, secret, sizeof(secret_));
  }

  // The thread's body; never throws.
  void run() {
    try {
      // The clock restarts when the first rank arrives, so that an id made long before the
      // ranks start still works; the root waits at most two timeouts in all.
      deadline_ = deadlineAfter(timeoutS_);
      // One loop for the whole rendezvous, failed or not: a hello the loop has already taken
      // in (accepted, or half read) when the rendezvous fails is then answered like any later
      // one, instead of being dropped with the loop's state while the root waits for it.
      bool complete = acceptHellos(
          listener_, sizeof(RootHello), deadline_,
          [this](Socket s, const char* hello) {
            if (failed_) return onLate(std::move(s), hello);
            onHello(std::move(s), hello);
            // Just failed: the ranks already here hear now, later ones as they arrive. Rank 0
            // hears last: its process usually hosts this thread (see giveUp) and may exit as
            // soon as it hears, which would leave the latecomers a bare EOF.
            if (failed_) rejectArrived(1, nRanks_);
          },
          [this] {
            return failed_ ? nRanks_ > 0 && arrived_ + answeredFailed_ >= nRanks_
                           : nRanks_ > 0 && arrived_ == nRanks_;
          },
          [this] { reportMissing(); });
      if (failed_) {
        rejectArrived(0, std::min(1u, nRanks_));
        return;
      }
      listener_.reset();  // refuse every later connection at once
      if (complete)
        sendTable();
      else
        giveUp();
    } catch (const std::exception& e) {
      WARN("bootstrap root: failed: %s", e.what());
    }
  }

 private:
  void onHello(Socket sock, const char* bytes) {
    RootHello h;
    memcpy(&h, bytes, sizeof(h));
    if (h.magic != RootHello::kMagic || !secretsEqual(h.secret, secret_, sizeof(secret_))) {
      WARN("bootstrap root: dropped a connection that did not present the id's secret");
      return;  // closing `sock` is the whole answer: a stranger learns nothing
    }
    if (h.flags & RootHello::kAbort) return onAbort(std::move(sock), h);
    if (h.nRanks == 0 || h.nRanks > kMaxRanks || h.rank >= h.nRanks)
      return reject(std::move(sock), h, "an invalid rank or rank count");
    if (nRanks_ == 0) {
      nRanks_ = h.nRanks;
      ranks_.resize(nRanks_);
      table_.resize(nRanks_);
      deadline_ = std::max(deadline_, deadlineAfter(timeoutS_));
    }
    if (h.nRanks != nRanks_) return reject(std::move(sock), h, "a different rank count");
    // at(): the index comes off the wire; should the check above ever be wrong, the root
    // fails (and every rank with it) instead of writing past its tables.
    if (ranks_.at(h.rank).valid()) return reject(std::move(sock), h, "a duplicate rank");
    if (h.listen.family != AF_INET && h.listen.family != AF_INET6)
      return reject(std::move(sock), h, "a malformed listener address");
    ranks_.at(h.rank) = std::move(sock);
    table_.at(h.rank) = h.listen;
    ++arrived_;
    INFO(kSubsysBoot, "bootstrap root: rank %u of %u arrived (%u so far)", h.rank, nRanks_,
         arrived_);
  }

  // Every kReportEveryS while ranks are missing, which ones (a rank that never started would
  // otherwise leave every process silent until the timeout). Logged in the process that made
  // the id, the only one that knows who has arrived.
  void reportMissing() {
    if (failed_ || nRanks_ == 0 || arrived_ == nRanks_) return;
    const Deadline now = Clock::now();
    if (nextReport_ == Deadline{}) {
      waitingSince_ = now;
      nextReport_ = deadlineAfter(kReportEveryS);
      return;
    }
    if (now < nextReport_) return;
    nextReport_ = deadlineAfter(kReportEveryS);
    const double waited = std::chrono::duration<double>(now - waitingSince_).count();
    WARN("bootstrap root: %u of %u ranks arrived after %.0f s; waiting for %s (gives up %.0f s "
         "after the first arrival: RMACC_TIMEOUT_S)", arrived_, nRanks_, waited,
         missingRanks().c_str(), timeoutS_);
  }

  // "rank 3" or "ranks 1, 4, 5, ..." (at most 16 named).
  std::string missingRanks() const {
    std::string list;
    int listed = 0;
    for (uint32_t r = 0; r < nRanks_ && listed < 16; ++r)
      if (!ranks_[r].valid()) list += (listed++ ? ", " : "") + std::to_string(r);
    if (nRanks_ - arrived_ > 16) list += ", ...";
    return (nRanks_ - arrived_ == 1 ? "rank " : "ranks ") + list;
  }

  // A rank that holds the secret but does not fit: tell it, so it fails at once and clearly.
  // The ranks that did fit cannot form the communicator either (one of theirs is missing or
  // confused): the rendezvous fails for every rank now, not at the timeout.
  void reject(Socket sock, const RootHello& h, const char* why) {
    WARN("bootstrap root: rejected rank %u of %u: %s (root expects %u ranks)", h.rank, h.nRanks,
         why, nRanks_);
    RootReply reply{RootReply::kRejected, nRanks_, arrived_, 0};
    (void)sock.sendAll(&reply, sizeof(reply), deadlineAfter(1.0));
    failed_ = true;
    ++answeredFailed_;
  }

  // A rank holding the secret failed before it could join: nobody can form the communicator,
  // so every rank that arrived (and, through the closed listener, every later one) fails now.
  void onAbort(Socket sock, const RootHello& h) {
    WARN("bootstrap root: rank %d of %d failed its init and aborted the rendezvous",
         (int)h.rank, (int)h.nRanks);
    RootReply reply{RootReply::kAborted, nRanks_, arrived_, 0};
    (void)sock.sendAll(&reply, sizeof(reply), deadlineAfter(1.0));
    failed_ = true;
    failStatus_ = RootReply::kAborted;
    ++answeredFailed_;
  }

  // Tells the ranks in [first, last) that arrived that the rendezvous failed, highest first.
  void rejectArrived(uint32_t first, uint32_t last) {
    RootReply reply{failStatus_, nRanks_, arrived_, 0};
    for (uint32_t r = last; r-- > first;)
      if (ranks_[r].valid()) (void)ranks_[r].sendAll(&reply, sizeof(reply), deadlineAfter(1.0));
  }

  // Ranks that arrive after the rendezvous failed are told why (rather than finding the port
  // closed, which reads as a dead root), until every rank has been answered or the deadline.
  void onLate(Socket sock, const char* bytes) {
    RootHello h;
    memcpy(&h, bytes, sizeof(h));
    if (h.magic != RootHello::kMagic || !secretsEqual(h.secret, secret_, sizeof(secret_))) return;
    bool valid = !(h.flags & RootHello::kAbort) && h.nRanks > 0 && h.nRanks <= kMaxRanks;
    if (nRanks_ == 0 && valid) nRanks_ = h.nRanks, ranks_.resize(nRanks_);
    ++answeredFailed_;
    if (valid && h.rank == 0 && h.nRanks == nRanks_ && !ranks_[0].valid()) {
      ranks_[0] = std::move(sock);  // answered last, by run()
      return;
    }
    RootReply reply{(h.flags & RootHello::kAbort) ? (uint32_t)RootReply::kAborted : failStatus_,
                    nRanks_, arrived_, 0};
    (void)sock.sendAll(&reply, sizeof(reply), deadlineAfter(1.0));
  }

  void sendTable() {
    RootReply reply{RootReply::kOk, nRanks_, arrived_, 0};
    Deadline deadline = deadlineAfter(timeoutS_);
    for (uint32_t r = nRanks_; r-- > 0;) {  // rank 0 last: see giveUp
      IoStatus st = ranks_[r].sendAll2(&reply, sizeof(reply), table_.data(),
                                       table_.size() * sizeof(WireAddr), deadline);
      // A rank that died after its hello: the others find out when they connect to it.
      if (st != IoStatus::kOk) WARN("bootstrap root: could not send the table to rank %u", r);
    }
    INFO(kSubsysBoot, "bootstrap root: all %u ranks arrived; table sent", nRanks_);
  }

  void giveUp() {
    if (nRanks_ == 0) {
      INFO(kSubsysBoot, "bootstrap root: no rank arrived within %.1f s; exiting", timeoutS_);
      return;
    }
    WARN("bootstrap root: gave up after %.1f s: %u of %u ranks arrived (missing: %s)", timeoutS_,
         arrived_, nRanks_, missingRanks().c_str());
    // The waiting ranks would time out by themselves; telling them lets them fail now with
    // the count, instead of on their own clock.
    // Rank 0 is answered last: its process usually hosts this thread, and may exit as soon
    // as it hears, before the others have (data already sent still arrives).
    RootReply reply{RootReply::kTimedOut, nRanks_, arrived_, 0};
    for (uint32_t r = nRanks_; r-- > 0;)
      if (ranks_[r].valid()) (void)ranks_[r].sendAll(&reply, sizeof(reply), deadlineAfter(1.0));
  }

  static constexpr double kReportEveryS = 10;

  Socket listener_;
  uint8_t secret_[32];
  double timeoutS_;
  Deadline deadline_;
  Deadline waitingSince_{}, nextReport_{};  // reportMissing's clock, from the first arrival
  uint32_t nRanks_ = 0;  // fixed by the first rank that presents the secret
  uint32_t arrived_ = 0;
  bool failed_ = false;  // a rank holding the secret was rejected: every rank fails
  uint32_t failStatus_ = RootReply::kRejected;  // what the failed rendezvous tells every rank
  uint32_t answeredFailed_ = 0;  // ranks answered one by one (rejected, aborting, late)
  std::vector<Socket> ranks_;   // by rank: the connection to answer on
  std::vector<WireAddr> table_;  // by rank: its listener
};

}  // namespace

void createUniqueId(rmaccUniqueId* id) {
  RMACC_ARG_CHECK(id != nullptr, "createUniqueId: id is NULL");
  double timeoutS = config().timeoutS;
  UniqueIdData data;
  memset(&data, 0, sizeof(data));
  data.magic = UniqueIdData::kMagic;
  fillRandom(data.secret, sizeof(data.secret));

  // Bind before returning so the id names a live port, and so a bad address fails here.
  Socket listener = Socket::listen(defaultListenAddress());
  SockAddr bound = listener.localAddr();
  WireAddr wire = bound.toWire();
  data.family = wire.family;
  data.port = wire.port;
  memcpy(data.addr, wire.addr, sizeof(data.addr));

  auto root = std::make_unique<Root>(std::move(listener), data.secret, timeoutS);
  std::thread([root = std::move(root)] {
    pthread_setname_np(pthread_self(), "rmacc-root");
    root->run();
  }).detach();

  memset(id->internal, 0, sizeof(id->internal));
  memcpy(id->internal, &data, sizeof(data));
  INFO(kSubsysBoot, "bootstrap root listening at %s (gives up after %.1f s)", bound.str().c_str(),
       timeoutS);
}

}  // namespace rmacc
