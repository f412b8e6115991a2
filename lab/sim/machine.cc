#include "machine.h"

#include <algorithm>
#include <string>

namespace rmacc::sim {

void Server::submit(Job job) {
  waiting_.push_back(std::move(job));
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

void ProxyThread::arrive(Server::Job job) {
  arrived_.push_back(std::move(job));
  next();
}

void ProxyThread::release(Write w) {
  released_.push_back(std::move(w));
  next();
}

// The head of released_, when it is data, is the thread's oldest data write: it may go once the
// pacer allows and no sibling holds an older one back (NicPacer::first).
int ProxyThread::pick() const {
  std::vector<int> blocked;
  for (size_t i = 0; i < released_.size() && i <= kLookAhead; ++i) {
    const Write& w = released_[i];
    const bool free = std::find(blocked.begin(), blocked.end(), w.peer) == blocked.end();
    if (w.bytes == 0 && free) return (int)i;
    if (i == 0 && pacer_->mayPost(fluid_->now()) && pacer_->first(index_, w.seq)) return 0;
    if (free) blocked.push_back(w.peer);
  }
  return -1;
}

void ProxyThread::next() {
  if (busy_) return;
  const int i = pick();
  // A paced data write that may go goes before arrived completions (ProxyImpl::round: a write
  // the pacer held back and now lets go leaves before the round's completions are taken in).
  const bool dataNow = i == 0 && pacer_->enabled() && released_[0].bytes > 0;
  if (!arrived_.empty() && !dataNow) {
    Server::Job job = std::move(arrived_.front());
    arrived_.pop_front();
    busy_ = true;
    job([this] {
      busy_ = false;
      next();
    });
    return;
  }
  // The oldest data write it does not post now holds the siblings' younger ones back. Once it
  // holds a younger one or none, a sibling it held back may go at once, not only after this
  // thread spent its write's CPU (the library's threads: NicPacer::takenUp as they post).
  uint64_t held = NicPacer::kNone;
  for (size_t k = 0; k < released_.size() && held == NicPacer::kNone; ++k)
    if (released_[k].bytes > 0 && (int)k != i) held = released_[k].seq;
  const uint64_t before = pacer_->held(index_);
  pacer_->waiting(index_, held);
  if (held > before) fluid_->at(fluid_->now(), [this] { kickSiblings(); });
  if (i < 0) {
    // Only held data (a signal at the head always goes): look again once the pacer allows,
    // or when a sibling posts (it kicks us), or when a signal or a completion comes.
    if (!released_.empty() && !armed_ && pacer_->readyAt() > fluid_->now()) {
      armed_ = true;
      fluid_->at(pacer_->readyAt(), [this] {
        armed_ = false;
        next();
      });
    }
    return;
  }
  Write w = std::move(released_[i]);
  released_.erase(released_.begin() + i);
  busy_ = true;
  const double start = fluid_->now();
  fluid_->at(start + w.cpuUs, [this, w = std::move(w), start] {
    pacer_->posted(w.bytes, start);
    busy_ = false;
    w.issued();
    next();
    if (w.bytes > 0) kickSiblings();
  });
}

void ProxyThread::kickSiblings() {
  for (int t = 0; t < nSiblings_; ++t)
    if (&siblings_[t] != this) siblings_[t].next();
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
  // B/µs and µs: the library's pacer in the model's unit; a negative lead: not paced.
  pacers_.assign(n, c.paceLeadUs >= 0 ? NicPacer(c.nicGBps * kGB, c.paceLeadUs) : NicPacer());
  proxy_.reserve((size_t)n * proxyThreads_);  // no reallocation: threads point at siblings
  for (int g = 0; g < n; ++g)
    for (int t = 0; t < proxyThreads_; ++t) {
      proxy_.emplace_back(fluid, pacers_[g]);
      proxy_.back().setSiblings(t, &proxy_[(size_t)g * proxyThreads_], proxyThreads_);
    }
}

ProxyThread& Machine::proxy(int rank, int thread) {
  return proxy_[(size_t)rank * proxyThreads_ + thread];
}

int Machine::proxyThread(int writer, int target) const {
  return proxyThreadOf(writer / c_.gpusPerNode, target / c_.gpusPerNode, proxyThreads_, c_.nodes);
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
