// The cluster's resources in the fluid model, and FIFO servers for things that run a bounded
// number of jobs at once (copy engines, NIC queues, the proxy thread).
#pragma once

#include <deque>
#include <functional>
#include <unordered_map>
#include <vector>

#include "cluster.h"
#include "fluid.h"

namespace rmacc::sim {

// Runs at most `limit` jobs at once, the rest in arrival order. A job gets a `release` callback
// to call when it is done.
class Server {
 public:
  using Job = std::function<void(std::function<void()> release)>;
  explicit Server(int limit = 1) : limit_(limit) {}
  // urgent: ahead of the jobs already waiting (a proxy handles arrived completions before it
  // posts more puts: its loop polls the completion queue first).
  void submit(Job job, bool urgent = false);

 private:
  void startNext();
  int limit_, busy_ = 0;
  std::deque<Job> waiting_;
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
  // The proxy thread of `rank` that carries its writes to and from `peer`, and its index.
  Server& proxy(int rank, int peer);
  int proxyThread(int rank, int peer) const;
  int proxyThreads() const { return proxyThreads_; }

 private:
  struct Gpu {
    int ceOut, nvIn, local, pcieTx, pcieRx, nicTx, nicRx, spineUp = -1, spineDown = -1;
  };
  const Cluster& c_;
  std::vector<Gpu> gpu_;
  int fabric_ = -1;
  int proxyThreads_ = 1;
  std::vector<Server> ce_, nic_, proxy_;
  std::vector<QueuePairs> queuePairs_;
};

}  // namespace rmacc::sim
