// TcpBootstrap setup: rendezvous with the root, then the eager full mesh (see tcp_bootstrap.h).
#include "bootstrap/tcp_bootstrap.h"

#include <cstring>
#include <string>

#include "core/error.h"
#include "core/log.h"

namespace rmacc {

namespace boot {

namespace {

constexpr auto kRootGrace = std::chrono::seconds(2);

std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size() && i < 16; ++i)
    s += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 16) s += ", ...";
  return s;
}

// A setup send or receive that did not complete: a timeout, or the peer went away.
void throwUnlessOk(IoStatus st, const std::string& what) {
  if (st != IoStatus::kOk)
    RMACC_THROW(st == IoStatus::kTimeout ? rmaccTimeout : rmaccRemoteError, "%s", what.c_str());
}

}  // namespace

TcpBootstrap::TcpBootstrap(const UniqueIdData& id, int rank, int nRanks, double timeoutS)
    : rank_(rank), nRanks_(nRanks), timeoutS_(timeoutS) {
  memcpy(secret_, id.secret, sizeof(secret_));
  auto start = Clock::now();
  // One clock for the whole setup: the caller asked for timeoutS, not timeoutS per step.
  Deadline deadline = deadlineAfter(timeoutS);
  Socket listener;
  std::vector<WireAddr> table = rendezvous(id, &listener, deadline);
  connectMesh(table, listener, deadline);
  for (int k = 1; k < nRanks_; ++k) others_.push_back((rank_ + k) % nRanks_);
  startReader();
  INFO(kSubsysBoot, "bootstrap: rank %d of %d connected in %.1f ms", rank_, nRanks_,
       std::chrono::duration<double, std::milli>(Clock::now() - start).count());
}

// Says hello to the root and returns the table of listeners; `listener` is this rank's.
std::vector<WireAddr> TcpBootstrap::rendezvous(const UniqueIdData& id, Socket* listener,
                                               Deadline deadline) {
  WireAddr rootWire{id.family, id.port, {}};
  memcpy(rootWire.addr, id.addr, sizeof(rootWire.addr));
  SockAddr rootAddr = SockAddr::fromWire(rootWire);
  Socket root;
  RootReply reply{};
  IoStatus st;
  // The root holds a connection that has not said hello only briefly, and under a flood of
  // strangers closes the oldest such first (handshake.cc): a rank descheduled between its
  // connect and its hello can be closed unheard. The root answers every hello it read, so a
  // close before any answer means it never heard this one: say it again on a new connection
  // (a root that is gone refuses it, which fails at once).
  do {
    root = Socket::connect(rootAddr, deadline, "the bootstrap root");
    if (!listener->valid()) {
      // Listen where the route to the root starts: an interface the other ranks can reach too.
      SockAddr mine;
      if (!envBootstrapAddress(&mine)) mine = root.localAddr();
      mine.setPort(0);
      *listener = Socket::listen(mine);
    }
    RootHello hello{};
    hello.magic = RootHello::kMagic;
    memcpy(hello.secret, secret_, sizeof(secret_));
    hello.rank = (uint32_t)rank_;
    hello.nRanks = (uint32_t)nRanks_;
    hello.listen = listener->localAddr().toWire();
    st = root.sendAll(&hello, sizeof(hello), deadline);
    // The root gives up on its own clock and tells every rank; waiting a little past our own
    // deadline for that verdict keeps the rank that hosts the root from timing out first and
    // taking the root down with its process, which would leave the others a bare EOF.
    if (st == IoStatus::kOk) st = root.recvAll(&reply, sizeof(reply), deadline + kRootGrace);
  } while (st == IoStatus::kClosed && Clock::now() < deadline);
  if (st == IoStatus::kTimeout)
    RMACC_THROW(rmaccTimeout, "rank %d: bootstrap timed out after %.1f s waiting for all %d ranks "
                "to reach the root at %s", rank_, timeoutS_, nRanks_, rootAddr.str().c_str());
  if (st == IoStatus::kClosed)
    RMACC_THROW(rmaccRemoteError, "rank %d: the bootstrap root at %s closed the connection before "
                "all ranks arrived", rank_, rootAddr.str().c_str());
  if (reply.status == RootReply::kAborted)
    RMACC_THROW(rmaccRemoteError, "rank %d: another rank failed its init (a bad argument or a "
                "local error: see its own error) and aborted the rendezvous", rank_);
  if (reply.status == RootReply::kTimedOut)
    RMACC_THROW(rmaccTimeout, "rank %d: bootstrap timed out: only %u of %u ranks reached the root "
                "within its timeout", rank_, reply.arrived, reply.nRanks);
  if (reply.status != RootReply::kOk || reply.nRanks != (uint32_t)nRanks_)
    RMACC_THROW(rmaccInvalidUsage, "rank %d of %d: rejected by the bootstrap root, which expects "
                "%u ranks (duplicate rank, or ranks disagree on nRanks?)", rank_, nRanks_,
                reply.nRanks);

  std::vector<WireAddr> table(nRanks_);
  st = root.recvAll(table.data(), table.size() * sizeof(WireAddr), deadline);
  throwUnlessOk(st, strprintf("rank %d: the bootstrap root did not send the whole table", rank_));
  return table;
}

void TcpBootstrap::connectMesh(const std::vector<WireAddr>& table, const Socket& listener,
                               Deadline deadline) {
  peers_.resize(nRanks_);
  for (auto& p : peers_) p = std::make_unique<Peer>();
  // Three phases, so that no rank waits on another's progress while holding up a third:
  // connecting and sending hellos needs nobody (the kernel completes connections in the
  // listen backlog), accepting needs only the higher ranks' first phase, and the replies
  // need only the lower ranks' second phase.
  connectLower(table, deadline);
  acceptHigher(listener, deadline);
  checkLowerReplies(deadline);
}

PeerHello TcpBootstrap::makeHello(int to) const {
  PeerHello h{};
  h.magic = PeerHello::kMagic;
  memcpy(h.secret, secret_, sizeof(secret_));
  h.from = (uint32_t)rank_;
  h.to = (uint32_t)to;
  h.nRanks = (uint32_t)nRanks_;
  return h;
}

bool TcpBootstrap::helloValid(const PeerHello& h, int from) const {
  return h.magic == PeerHello::kMagic && secretsEqual(h.secret, secret_, sizeof(secret_)) &&
         h.from == (uint32_t)from && h.to == (uint32_t)rank_ && h.nRanks == (uint32_t)nRanks_;
}

void TcpBootstrap::connectLower(const std::vector<WireAddr>& table, Deadline deadline) {
  for (int j = 0; j < rank_; ++j) {
    std::string name = strprintf("rank %d", j);
    Socket s = Socket::connect(SockAddr::fromWire(table[j]), deadline, name.c_str());
    PeerHello h = makeHello(j);
    throwUnlessOk(s.sendAll(&h, sizeof(h), deadline),
                  strprintf("rank %d: could not say hello to rank %d during bootstrap", rank_, j));
    peers_[j]->sock = std::move(s);
  }
}

void TcpBootstrap::acceptHigher(const Socket& listener, Deadline deadline) {
  int expected = nRanks_ - 1 - rank_;
  int arrived = 0;
  auto onHello = [&](Socket s, const char* bytes) {
    PeerHello h;
    memcpy(&h, bytes, sizeof(h));
    int from = (int)h.from;
    if (h.from <= (uint32_t)rank_ || h.from >= (uint32_t)nRanks_ || !helloValid(h, from) ||
        peers_[from]->sock.valid()) {
      WARN("bootstrap: rank %d dropped a connection that did not present the id's secret or "
           "a valid rank", rank_);
      return;
    }
    PeerHello reply = makeHello(from);
    throwUnlessOk(s.sendAll(&reply, sizeof(reply), deadline),
                  strprintf("rank %d: rank %d closed its connection during bootstrap", rank_, from));
    peers_[from]->sock = std::move(s);
    ++arrived;
  };
  if (acceptHellos(listener, sizeof(PeerHello), deadline, onHello,
                   [&] { return arrived == expected; }))
    return;
  std::vector<int> missing;
  for (int j = rank_ + 1; j < nRanks_; ++j)
    if (!peers_[j]->sock.valid()) missing.push_back(j);
  RMACC_THROW(rmaccTimeout, "rank %d: bootstrap timed out after %.1f s waiting for ranks %s to "
              "connect", rank_, timeoutS_, rankList(missing).c_str());
}

void TcpBootstrap::checkLowerReplies(Deadline deadline) {
  for (int j = 0; j < rank_; ++j) {
    PeerHello h{};
    IoStatus st = peers_[j]->sock.recvAll(&h, sizeof(h), deadline);
    if (st == IoStatus::kTimeout)
      RMACC_THROW(rmaccTimeout, "rank %d: bootstrap timed out after %.1f s waiting for rank %d "
                  "to accept", rank_, timeoutS_, j);
    if (st == IoStatus::kClosed)
      RMACC_THROW(rmaccRemoteError, "rank %d closed its connection during bootstrap", j);
    if (!helloValid(h, j))
      RMACC_THROW(rmaccRemoteError, "rank %d: the listener of rank %d did not present the id's "
                  "secret", rank_, j);
  }
}

}  // namespace boot

void abortRendezvous(const rmaccUniqueId& id, int rank, int nRanks) {
  using namespace boot;
  UniqueIdData data;
  memcpy(&data, id.internal, sizeof(data));
  if (data.magic != UniqueIdData::kMagic) return;  // no root to tell
  try {
    WireAddr rootWire{data.family, data.port, {}};
    memcpy(rootWire.addr, data.addr, sizeof(rootWire.addr));
    // Short: the root answers at once, and a root that is gone refuses at once.
    Deadline deadline = deadlineAfter(1.0);
    Socket root = Socket::connect(SockAddr::fromWire(rootWire), deadline, "the bootstrap root");
    RootHello hello{};
    hello.magic = RootHello::kMagic;
    memcpy(hello.secret, data.secret, sizeof(hello.secret));
    hello.rank = (uint32_t)rank;
    hello.nRanks = (uint32_t)nRanks;
    hello.flags = RootHello::kAbort;
    RootReply reply{};
    // Wait for the answer so the root has read the hello before this end closes.
    if (root.sendAll(&hello, sizeof(hello), deadline) == IoStatus::kOk)
      (void)root.recvAll(&reply, sizeof(reply), deadline);
    INFO(kSubsysBoot, "rank %d: told the bootstrap root that this rank's init failed", rank);
  } catch (const std::exception& e) {
    // The root is gone (the rendezvous already ended) or unreachable: nobody waits on it.
    INFO(kSubsysBoot, "rank %d: could not tell the bootstrap root that init failed: %s", rank,
         e.what());
  }
}

std::unique_ptr<Bootstrap> createTcpBootstrap(const rmaccUniqueId& id, int rank, int nRanks,
                                              double timeoutS) {
  UniqueIdData data;
  memcpy(&data, id.internal, sizeof(data));
  RMACC_ARG_CHECK(data.magic == UniqueIdData::kMagic,
                  "the unique id was not made by rmaccGetUniqueId (bad magic)");
  RMACC_ARG_CHECK(nRanks >= 1, "nRanks = %d: must be at least 1", nRanks);
  RMACC_ARG_CHECK(rank >= 0 && rank < nRanks, "rank = %d: must be in [0, %d)", rank, nRanks);
  RMACC_ARG_CHECK(timeoutS > 0, "timeout = %g s: must be positive", timeoutS);
  return std::make_unique<boot::TcpBootstrap>(data, rank, nRanks, timeoutS);
}

}  // namespace rmacc
