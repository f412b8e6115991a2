// The cluster's resources in the fluid model, FIFO servers for things that run a bounded
// number of jobs at once (copy engines, NIC queues), and the proxy threads.
#pragma once

#include <deque>
#include <functional>
#include <unordered_map>
#include <vector>

#include "cluster.h"
#include "fluid.h"
#include "core/nic_pacer.h"

namespace rmacc::sim {

// Runs at most `limit` jobs at once, the rest in arrival order. A job gets a `release` callback
// to call when it is done.
class Server {
 public:
  using Job = std::function<void(std::function<void()> release)>;
  explicit Server(int limit = 1) : limit_(limit) {}
  void submit(Job job);

 private:
  void startNext();
  int limit_, busy_ = 0;
  std::deque<Job> waiting_;
};

// A proxy thread as src/net/proxy_progress.cc runs it, one job at a time: a data write that
// may go now first, then the completions of arrived writes (each round polls its CQ before its
// queues, after issuing what the pacer let go since the last round), then its released writes
// in their order, each once it may go (ProxyImpl::issue): a data write once the rank's pacer
// allows and no other thread of the rank holds an older data write back (NicPacer::first:
// the rank's posting order, here the plan's); a zero-byte write (credit, entry signal) at once
// unless an unissued write to its peer comes before it (issueSignalsPastPaced, which looks 64
// writes ahead). A write costs the thread its CPU when it is issued, so one the pacer holds
// costs nothing yet and signals behind it go first.
class ProxyThread {
 public:
  struct Write {
    int peer;
    uint64_t bytes;
    uint64_t seq;  // the rank's posting order
    double cpuUs;
    std::function<void()> issued;  // after its CPU: hand it to the NIC
  };
  ProxyThread(Fluid& fluid, NicPacer& pacer) : fluid_(&fluid), pacer_(&pacer) {}
  // Thread `index` of a rank whose threads are siblings[0 .. count): one that posts data
  // lets the others look again (one it held back may be the oldest now).
  void setSiblings(int index, ProxyThread* siblings, int count) {
    index_ = (size_t)index, siblings_ = siblings, nSiblings_ = count;
  }
  // An arrived write's completion to take in: a job that calls its release when done.
  void arrive(Server::Job job);
  void release(Write w);

 private:
  static constexpr size_t kLookAhead = 64;  // src/net/proxy_issue.cc
  void next();
  // The index in released_ of the write to issue now, or -1.
  int pick() const;
  // The siblings look again (one this thread held back may go now).
  void kickSiblings();
  Fluid* fluid_;
  NicPacer* pacer_;
  size_t index_ = 0;
  ProxyThread* siblings_ = nullptr;
  int nSiblings_ = 0;
  bool busy_ = false, armed_ = false;
  std::deque<Server::Job> arrived_;
  std::deque<Write> released_;
};

// A NIC's queue pairs: messages to one peer go one at a time, in order; at most `limit`
// peers' messages move at once, and a peer whose message ends goes to the back of the line
// (the NIC serves its queue pairs in turn).
class QueuePairs {
 public:
  explicit QueuePairs(int limit) : nic_(limit) {}
  void submit(int peer, Server::Job job);

 private:
  void offer(int peer);
  Server nic_;
  std::unordered_map<int, std::deque<Server::Job>> waiting_;  // head: on the NIC or offered
};

class Machine {
 public:
  Machine(Fluid& fluid, const Cluster& c);
  const Cluster& cluster() const { return c_; }

  // Paths of the three kinds of data movement.
  std::vector<int> cePath(int src, int dst) const;      // NVLink, or local copy when src == dst
  std::vector<int> netPath(int src, int dst) const;     // PCIe, NIC, spine if cross-rail, NIC, PCIe
  Server& ce(int gpu) { return ce_[gpu]; }
  // Queues a message from `gpu` to `peer` on gpu's NIC (Cluster::nicQueuePerPeer says how).
  void sendOnNic(int gpu, int peer, Server::Job job);
  // The index of the proxy thread that carries writes from `writer` to `target`, at both ends
  // (proxyThreadOf: the write lands on the endpoint of the same index), and thread `thread` of
  // `rank`.
  int proxyThread(int writer, int target) const;
  ProxyThread& proxy(int rank, int thread);
  int proxyThreads() const { return proxyThreads_; }

 private:
  struct Gpu {
    int ceOut, nvIn, local, pcieTx, pcieRx, nicTx, nicRx, spineUp = -1, spineDown = -1;
  };
  const Cluster& c_;
  std::vector<Gpu> gpu_;
  int fabric_ = -1;
  int proxyThreads_ = 1;
  std::vector<Server> ce_, nic_;
  std::vector<NicPacer> pacers_;  // [gpu]: shared by its proxy threads (Cluster::paceLeadUs)
  std::vector<ProxyThread> proxy_;
  std::vector<QueuePairs> queuePairs_;
};

}  // namespace rmacc::sim
