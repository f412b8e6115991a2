// The TCP control plane behind createTcpBootstrap (private to src/bootstrap).
//
// Setup: each rank binds a listener, says hello to the root, receives the table of every
// rank's listener, then builds a full mesh EAGERLY: rank i connects to every rank j < i and
// accepts every rank j > i, both ends presenting the id's secret. Eager, because a mesh of
// live connections is what lets a rank notice at once that any peer died (a lazy mesh would
// not see a peer it never talked to). It costs n-1 fds per rank: fine up to a few hundred
// ranks (check RLIMIT_NOFILE beyond that). The listener is closed once the mesh is complete.
//
// Traffic: frames (FrameHeader, payload) on the peer's connection. One reader thread per
// bootstrap polls every connection (sleeping in poll(2) when idle), reassembles frames and
// files them in per-(peer, tag) FIFO queues; receivers wait on a condition variable. Sends
// are written directly by the calling thread under a per-peer mutex.
//
// Thread safety: send and recv may be called from any number of threads at once. allGather
// and barrier must be called in the same order on every rank, and so not concurrently from
// several threads of one rank (their internal tags come from a per-bootstrap sequence).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/handshake.h"
#include "bootstrap/socket.h"

namespace rmacc::boot {

class TcpBootstrap final : public Bootstrap {
 public:
  // Connects, or throws (rmaccTimeout when a rank does not arrive within timeoutS).
  TcpBootstrap(const UniqueIdData& id, int rank, int nRanks, double timeoutS);
  ~TcpBootstrap() override;

  int rank() const override { return rank_; }
  int nRanks() const override { return nRanks_; }
  void allGather(void* data, size_t bytes) override;
  void barrier() override;
  void send(int peer, uint32_t tag, const void* data, size_t bytes) override;
  std::vector<char> recv(int peer, uint32_t tag) override;
  bool recvBy(int peer, uint32_t tag, double deadline, std::vector<char>& out) override;
  void abort() override;
  void abort(const std::string& reason) override;
  void setPeerLostHandler(PeerLostFn fn) override;
  void watchProcess(int peer, int pidfd) override;
  void leave() override;
  void setStatusProvider(std::function<std::string()> fn) override;
  std::vector<std::string> statusOfPeers(double waitS) override;

 private:
  struct Peer {
    Socket sock;        // invalid for this rank itself (its messages go straight to a queue)
    std::timed_mutex sendMu;  // one writer at a time keeps frames whole
    std::atomic<bool> closed{false};
    // Reader-thread state: the frame being reassembled.
    FrameHeader header{};
    size_t headerGot = 0;
    bool inPayload = false;
    std::vector<char> payload;
    size_t payloadGot = 0;
    // Guarded by mu_.
    std::unordered_map<uint32_t, std::deque<std::vector<char>>> queues;
    std::string closedWhy;
    std::atomic<bool> left{false};  // said goodbye: a later close is not a fault
    std::string abortReason;        // guarded by mu_: what the peer said when it aborted
    std::atomic<int> pidfd{-1};     // owned; readable once the peer's process exited
    std::atomic<bool> lostReported{false};
  };
  struct Frame {
    uint32_t tag;
    std::vector<char> payload;
  };
  using Taker = std::function<void(int peer, std::vector<char>& message)>;

  // Setup (tcp_bootstrap.cc).
  std::vector<WireAddr> rendezvous(const UniqueIdData& id, Socket* listener, Deadline deadline);
  void connectMesh(const std::vector<WireAddr>& table, const Socket& listener,
                   Deadline deadline);
  void connectLower(const std::vector<WireAddr>& table, Deadline deadline);
  void acceptHigher(const Socket& listener, Deadline deadline);
  void checkLowerReplies(Deadline deadline);
  PeerHello makeHello(int to) const;
  bool helloValid(const PeerHello& h, int from) const;

  // Traffic (tcp_bootstrap_io.cc).
  void startReader();
  void readerLoop();
  bool readPeer(int peer, std::vector<char>& stage);
  void parse(Peer& p, const char* data, size_t bytes, std::vector<Frame>& done);
  void deliver(int peer, std::vector<Frame>& frames);
  void markClosed(int peer, const std::string& why);
  // Control frames the reader handles itself (goodbye, abort reason, status); true if taken.
  bool control(int peer, Frame& f);
  void peerLost(int peer, const std::string& why);
  void sendToAll(uint32_t tag, const std::string& text, double waitS);
  void sendTagged(int peer, uint32_t tag, const void* data, size_t bytes);
  // Waits for one message with `tag` from each of `peers`, handing each to `take` as it comes.
  // With `until`: returns false once it passed with messages still missing (those taken
  // were handed over).
  bool collect(std::vector<int> peers, uint32_t tag, const Taker& take,
               const Deadline* until = nullptr);
  bool takeArrived(std::vector<int>& peers, uint32_t tag,
                   std::vector<std::pair<int, std::vector<char>>>& ready);
  [[noreturn]] void throwAborted() const;

  const int rank_;
  const int nRanks_;
  const double timeoutS_;
  uint8_t secret_[32];
  std::vector<std::unique_ptr<Peer>> peers_;  // by rank
  std::vector<int> others_;                   // every rank but this one, starting after it
  uint32_t collSeq_ = 0;                      // numbers internal collective tags

  std::mutex mu_;  // guards the queues and closedWhy; never nested with a sendMu
  std::condition_variable cv_;  // any message filed, any peer closed, abort
  std::atomic<bool> aborted_{false};

  Socket wake_;  // an eventfd that stops the reader thread or makes it rebuild its poll set
  std::atomic<bool> stop_{false};
  std::atomic<bool> rebuild_{false};
  std::mutex handlerMu_;  // held while a handler runs, so clearing one waits for it
  PeerLostFn lostFn_;
  std::function<std::string()> statusFn_;
  std::mutex statusMu_;  // one statusOfPeers at a time
  std::thread reader_;
};

}  // namespace rmacc::boot
