#include "machine.h"

#include <string>

namespace rmacc::sim {

void Server::submit(Job job, bool urgent) {
  if (urgent) waiting_.push_front(std::move(job));
  else waiting_.push_back(std::move(job));
  startNext();
}

void Server::startNext() {
  while (busy_ < limit_ && !waiting_.empty()) {
    Job job = std::move(waiting_.front());
    waiting_.pop_front();
    ++busy_;
    job([this] {
      --busy_;
      startNext();
    });
  }
}

Machine::Machine(Fluid& fluid, const Cluster& c) : c_(c) {
  const double kGB = 1e3;  // 1 GB/s in bytes per µs
  const int n = c.ranks();
  gpu_.resize(n);
  for (int g = 0; g < n; ++g) {
    const std::string id = "n" + std::to_string(g / c.gpusPerNode) + "g" +
                           std::to_string(g % c.gpusPerNode);
    Gpu& r = gpu_[g];
    r.ceOut = fluid.addResource(id + " ce-out", "ce-out", c.ceGBps * kGB);
    r.nvIn = fluid.addResource(id + " nvlink-in", "nvlink-in", c.ceGBps * kGB);
    r.local = fluid.addResource(id + " local-copy", "local-copy", c.localCopyGBps * kGB);
    r.pcieTx = fluid.addResource(id + " pcie-to-nic", "pcie-to-nic", c.pcieGBps * kGB);
    r.pcieRx = fluid.addResource(id + " pcie-from-nic", "pcie-from-nic", c.pcieGBps * kGB);
    r.nicTx = fluid.addResource(id + " nic-tx", "nic-tx", c.nicGBps * kGB);
    r.nicRx = fluid.addResource(id + " nic-rx", "nic-rx", c.nicGBps * kGB);
    if (c.crossRailPenalised) {
      r.spineUp = fluid.addResource(id + " cross-rail-tx", "cross-rail-tx", c.crossRailGBps * kGB);
      r.spineDown =
          fluid.addResource(id + " cross-rail-rx", "cross-rail-rx", c.crossRailGBps * kGB);
    }
  }
  if (c.fabricGBps > 0) fabric_ = fluid.addResource("fabric", "fabric", c.fabricGBps * kGB);
  ce_.assign(n, Server(c.ceConcurrent));
  nic_.assign(n, Server(c.nicQueues));
  queuePairs_.assign(n, QueuePairs(c.nicQueues));
  proxyThreads_ = c.proxyThreadsResolved();
  proxy_.assign((size_t)n * proxyThreads_, Server(1));
}

Server& Machine::proxy(int rank, int peer) {
  return proxy_[(size_t)rank * proxyThreads_ + proxyThread(rank, peer)];
}

int Machine::proxyThread(int rank, int peer) const {
  return proxyThreadOf(rank / c_.gpusPerNode, peer / c_.gpusPerNode, proxyThreads_);
}

void QueuePairs::submit(int peer, Server::Job job) {
  std::deque<Server::Job>& q = waiting_[peer];
  q.push_back(std::move(job));
  if (q.size() == 1) offer(peer);
}

void QueuePairs::offer(int peer) {
  nic_.submit([this, peer](std::function<void()> release) {
    Server::Job job = std::move(waiting_[peer].front());
    job([this, peer, release] {
      std::deque<Server::Job>& q = waiting_[peer];
      q.pop_front();
      release();
      if (!q.empty()) offer(peer);
    });
  });
}

void Machine::sendOnNic(int gpu, int peer, Server::Job job) {
  if (c_.nicQueuePerPeer) queuePairs_[gpu].submit(peer, std::move(job));
  else nic_[gpu].submit(std::move(job));
}

std::vector<int> Machine::cePath(int src, int dst) const {
  if (src == dst) return {gpu_[src].local};
  return {gpu_[src].ceOut, gpu_[dst].nvIn};
}

std::vector<int> Machine::netPath(int src, int dst) const {
  const Gpu &s = gpu_[src], &d = gpu_[dst];
  std::vector<int> path{s.pcieTx, s.nicTx, d.nicRx, d.pcieRx};
  if (c_.crossRailPenalised && src % c_.gpusPerNode != dst % c_.gpusPerNode) {
    path.push_back(s.spineUp);
    path.push_back(d.spineDown);
  }
  if (fabric_ >= 0) path.push_back(fabric_);
  return path;
}

}  // namespace rmacc::sim
