#include "runner.h"

#include <algorithm>
#include <memory>
#include <unordered_map>

#include "core/error.h"
#include "exec/trace.h"
#include "critical_path.h"
#include "machine.h"
#include "report_links.h"

namespace rmacc::sim {
namespace {

using plan::Lane;
using plan::Op;
using plan::OpKind;
using plan::Region;

class Run {
 public:
  Run(const plan::Plan& plan, const Cluster& c, const std::string& tracePath);
  Result go();

 private:
  struct Stream {
    std::vector<int> ops;
    size_t next = 0;
    bool busy = false;
    double wakeAt = -1;  // a pump is already scheduled for then (the head's enqueue time)
  };
  struct RankState {
    std::vector<int> streamOf;
    std::vector<Stream> streams;
    std::vector<int> depsLeft;
    std::vector<std::vector<int>> dependents;
    std::vector<uint64_t> threshold;  // kWait: absolute counter value it waits for
    std::vector<OpRecord> rec;
    std::vector<double> enqueueAt;
    int opsLeft = 0;
    int putsInFlight = 0;
    double doneAt = 0;
    OpRef last;                       // what finished last on this rank
    int64_t relayHeld = 0;
  };
  struct Counter {
    uint64_t value = 0;
    std::vector<int> waiters;  // op indices on the counter's rank
    OpRef lastFrom;
  };

  uint64_t key(int rank, int from, int ctx, int sig) const {
    return (((uint64_t)rank * n_ + from) << 16) | ((uint64_t)ctx << 4) | (uint64_t)sig;
  }
  int streamFor(int r, const Op& op) const;
  void setUp(int r);
  void pump(int r, int s);
  void start(int r, int i);
  void finish(int r, int i);
  void startCePut(int r, int i);
  void startProxyPut(int r, int i);
  void deliver(int to, int from, int ctx, int sig, OpRef by);
  void landRelay(int r, int64_t bytes);
  void checkDone(int r);
  void trace(int r, const Op& op, const char* lane, const char* name, double t0, double t1);

  const plan::Plan& plan_;
  const Cluster& c_;
  const int n_;
  Fluid fluid_;
  Machine machine_;
  std::vector<RankState> ranks_;
  std::unordered_map<uint64_t, Counter> counters_;
  std::vector<std::unique_ptr<TraceWriter>> traces_;
  uint64_t relayHighWater_ = 0;
  double hostEnd_ = 0;
};

Run::Run(const plan::Plan& plan, const Cluster& c, const std::string& tracePath)
    : plan_(plan), c_(c), n_(plan.topo.nRanks()), machine_(fluid_, c), ranks_(n_) {
  RMACC_ARG_CHECK(plan.topo.nNodes() == c.nodes && plan.topo.localSize() == c.gpusPerNode,
                  "the plan is for %d x %d ranks, the cluster has %d x %d GPUs",
                  plan.topo.nNodes(), plan.topo.localSize(), c.nodes, c.gpusPerNode);
  for (int r = 0; r < n_; ++r)
    RMACC_ARG_CHECK(plan.topo.nodeOf(r) == r / c.gpusPerNode,
                    "the simulator needs ranks in node blocks (rank %d is on node %d)", r,
                    plan.topo.nodeOf(r));
  if (!tracePath.empty())
    for (int r = 0; r < n_; ++r) traces_.push_back(std::make_unique<TraceWriter>(tracePath, r));
}

// The executor's mapping (src/exec/executor.cc): CE ops to one peer share a copy stream.
int Run::streamFor(int r, const Op& op) const {
  const int ce = c_.ceStreams;
  switch (op.lane) {
    case Lane::kCePut:
      return plan_.topo.localRankOf(op.kind == OpKind::kCopy ? r : op.peer) % ce;
    case Lane::kCeWait: return ce;
    case Lane::kProxyPut: return ce + 1;
    case Lane::kProxyWait: return ce + 2;
  }
  return ce;
}

void Run::setUp(int r) {
  RankState& st = ranks_[r];
  const auto& ops = plan_.ranks[r].ops;
  const size_t m = ops.size();
  st.streams.assign(c_.ceStreams + 3, {});
  st.streamOf.resize(m);
  st.depsLeft.resize(m);
  st.dependents.assign(m, {});
  st.threshold.assign(m, 0);
  st.rec.assign(m, {});
  st.enqueueAt.resize(m);
  st.opsLeft = (int)m;
  std::unordered_map<uint64_t, uint64_t> consumed;
  const double base = c_.hostFixedUs + c_.exchangeUsPerNode * (c_.nodes - 1) +
                      c_.planUsPerOp * (double)m;
  for (size_t i = 0; i < m; ++i) {
    const Op& op = ops[i];
    st.streamOf[i] = streamFor(r, op);
    st.streams[st.streamOf[i]].ops.push_back((int)i);
    st.depsLeft[i] = (int)op.deps.size();
    for (int d : op.deps) st.dependents[d].push_back((int)i);
    if (op.kind == OpKind::kWait)
      st.threshold[i] = consumed[key(r, op.peer, op.ctx, op.sigIdx)] += op.count;
    st.enqueueAt[i] = base + c_.enqueueUsPerOp * (double)(i + 1);
  }
  hostEnd_ = std::max(hostEnd_, m ? st.enqueueAt[m - 1] : base);
  if (m == 0) st.doneAt = base;
}

// Starts the head op of stream s of rank r when it may: stream idle, deps done, enqueued.
void Run::pump(int r, int s) {
  RankState& st = ranks_[r];
  Stream& q = st.streams[s];
  if (q.busy || q.next >= q.ops.size()) return;
  const int i = q.ops[q.next];
  if (st.depsLeft[i] > 0) return;
  const double now = fluid_.now();
  if (now < st.enqueueAt[i]) {
    if (q.wakeAt != st.enqueueAt[i]) {
      q.wakeAt = st.enqueueAt[i];
      fluid_.at(st.enqueueAt[i], [this, r, s] { pump(r, s); });
    }
    return;
  }
  OpRecord& rec = st.rec[i];
  if (rec.gateKind == Gate::kNone || st.enqueueAt[i] >= rec.gateAt) {
    rec.gateKind = Gate::kEnqueue;
    rec.gateAt = st.enqueueAt[i];
  }
  if (q.next > 0) {
    const int prev = q.ops[q.next - 1];
    if (st.rec[prev].end >= rec.gateAt) rec.gate(Gate::kStream, st.rec[prev].end, {r, prev});
  }
  q.busy = true;
  ++q.next;
  start(r, i);
}

void Run::start(int r, int i) {
  RankState& st = ranks_[r];
  const Op& op = plan_.ranks[r].ops[i];
  const double now = fluid_.now();
  st.rec[i].start = now;
  switch (op.kind) {
    case OpKind::kWait: {
      Counter& k = counters_[key(r, op.peer, op.ctx, op.sigIdx)];
      if (k.value >= st.threshold[i]) {
        fluid_.at(now + c_.memopUs, [this, r, i] { finish(r, i); });
      } else {
        k.waiters.push_back(i);
      }
      return;
    }
    case OpKind::kCopy:
    case OpKind::kPut:
      if (op.lane == Lane::kProxyPut) startProxyPut(r, i);
      else startCePut(r, i);
      return;
  }
}

// A copy-engine op: launch, the bytes over NVLink (or within the GPU), then the signal write.
void Run::startCePut(int r, int i) {
  const Op& op = plan_.ranks[r].ops[i];
  const int dst = op.kind == OpKind::kCopy ? r : op.peer;
  fluid_.at(fluid_.now() + c_.ceOpUs, [this, r, i, dst] {
    machine_.ce(r).submit([this, r, i, dst](std::function<void()> release) {
      const Op& op = plan_.ranks[r].ops[i];
      fluid_.transfer((double)op.bytes, machine_.cePath(r, dst), [this, r, i, release] {
        release();
        const Op& op = plan_.ranks[r].ops[i];
        if (op.src.region == Region::kRelay) landRelay(r, -(int64_t)op.bytes);
        if (op.dst.region == Region::kRelay) landRelay(op.peer, (int64_t)op.bytes);
        if (op.kind == OpKind::kCopy) {
          finish(r, i);
          return;
        }
        fluid_.at(fluid_.now() + c_.memopUs, [this, r, i] {
          finish(r, i);
          fluid_.at(fluid_.now() + c_.signalLatencyUs, [this, r, i] {
            const Op& op = plan_.ranks[r].ops[i];
            deliver(op.peer, r, op.ctx, op.sigIdx, {r, i});
          });
        });
      });
    });
  });
}

// A proxy put: the stream posts a descriptor (a memop) and moves on; the proxy issues it, the
// NIC moves it, the target's proxy applies the signal.
void Run::startProxyPut(int r, int i) {
  ++ranks_[r].putsInFlight;
  fluid_.at(fluid_.now() + c_.memopUs, [this, r, i] {
    finish(r, i);
    machine_.proxy(r).submit([this, r, i](std::function<void()> releaseProxy) {
      fluid_.at(fluid_.now() + c_.proxyOpUs, [this, r, i, releaseProxy] {
        releaseProxy();
        const Op& op = plan_.ranks[r].ops[i];
        machine_.nic(r).submit([this, r, i, peer = op.peer](std::function<void()> releaseNic) {
          const Op& op = plan_.ranks[r].ops[i];
          fluid_.transfer((double)op.bytes, machine_.netPath(r, peer), [this, r, i, releaseNic] {
            releaseNic();
            fluid_.at(fluid_.now() + c_.netLatencyUs, [this, r, i] {
              const Op& op = plan_.ranks[r].ops[i];
              if (op.src.region == Region::kRelay) landRelay(r, -(int64_t)op.bytes);
              machine_.proxy(op.peer).submit([this, r, i](std::function<void()> release) {
                fluid_.at(fluid_.now() + c_.proxyOpUs, [this, r, i, release] {
                  release();
                  const Op& op = plan_.ranks[r].ops[i];
                  if (op.dst.region == Region::kRelay) landRelay(op.peer, (int64_t)op.bytes);
                  ranks_[r].rec[i].arrival = fluid_.now();
                  // The put's life after its post: proxy, NIC queue, wire, remote proxy.
                  trace(r, op, "net", op.bytes ? "put" : "signal", ranks_[r].rec[i].end,
                        fluid_.now());
                  --ranks_[r].putsInFlight;
                  deliver(op.peer, r, op.ctx, op.sigIdx, {r, i});
                  checkDone(r);
                });
              }, /*urgent=*/true);
            });
          });
        });
      });
    });
  });
}

void Run::landRelay(int r, int64_t bytes) {
  int64_t& held = ranks_[r].relayHeld;
  held += bytes;
  relayHighWater_ = std::max<uint64_t>(relayHighWater_, (uint64_t)std::max<int64_t>(held, 0));
}

void Run::deliver(int to, int from, int ctx, int sig, OpRef by) {
  Counter& k = counters_[key(to, from, ctx, sig)];
  ++k.value;
  k.lastFrom = by;
  RankState& st = ranks_[to];
  auto& w = k.waiters;
  for (size_t q = 0; q < w.size();) {
    const int i = w[q];
    if (k.value < st.threshold[i]) {
      ++q;
      continue;
    }
    st.rec[i].gate(Gate::kSignal, fluid_.now(), by);
    fluid_.at(fluid_.now() + c_.memopUs, [this, to, i] { finish(to, i); });
    w[q] = w.back();
    w.pop_back();
  }
}

void Run::finish(int r, int i) {
  RankState& st = ranks_[r];
  const Op& op = plan_.ranks[r].ops[i];
  const double now = fluid_.now();
  st.rec[i].end = now;
  const char* name = op.kind == OpKind::kWait ? "wait"
                     : op.kind == OpKind::kCopy ? "copy"
                     : op.bytes ? "put" : "signal";
  trace(r, op, plan::laneName(op.lane), name, st.rec[i].start, now);
  const int s = st.streamOf[i];
  st.streams[s].busy = false;
  --st.opsLeft;
  st.last = {r, i};
  for (int d : st.dependents[i]) {
    st.rec[d].gate(Gate::kDep, now, {r, i});
    if (st.streamOf[d] == s) {
      --st.depsLeft[d];
    } else {
      fluid_.at(now + c_.eventUs, [this, r, d] {
        RankState& st = ranks_[r];
        if (--st.depsLeft[d] == 0) pump(r, st.streamOf[d]);
      });
    }
  }
  for (size_t q = 0; q < st.streams.size(); ++q) pump(r, (int)q);
  checkDone(r);
}

void Run::checkDone(int r) {
  RankState& st = ranks_[r];
  if (st.opsLeft == 0 && st.putsInFlight == 0) st.doneAt = std::max(st.doneAt, fluid_.now());
}

void Run::trace(int r, const Op& op, const char* lane, const char* name, double t0, double t1) {
  if (traces_.empty()) return;
  traces_[r]->op(0, op.batch, lane, name, op.peer, op.bytes, t0, t1 - t0);
}

Result Run::go() {
  for (int r = 0; r < n_; ++r) setUp(r);
  for (int r = 0; r < n_; ++r)
    for (size_t s = 0; s < ranks_[r].streams.size(); ++s) pump(r, (int)s);
  fluid_.run();
  Result res;
  std::vector<const std::vector<OpRecord>*> recs;
  for (int r = 0; r < n_; ++r) {
    const RankState& st = ranks_[r];
    RMACC_ENFORCE(st.opsLeft == 0 && st.putsInFlight == 0,
                  "rank %d stuck: %d ops left, %d puts in flight (a wait never satisfied)", r,
                  st.opsLeft, st.putsInFlight);
    res.timeUs = std::max(res.timeUs, st.doneAt);
    recs.push_back(&st.rec);
  }
  double total = 0;
  for (uint64_t b : plan_.bytes) total += (double)b;
  res.meanBytesPerRank = total / n_;
  res.algbw = res.timeUs > 0 ? res.meanBytesPerRank / res.timeUs / 1e3 : 0;
  res.busbw = res.algbw * (n_ - 1) / n_;
  res.hostUs = hostEnd_;
  res.relayHighWater = relayHighWater_;
  res.relayCapacity = plan_.relayBytes;
  res.critical = criticalPath(plan_, recs, res.timeUs);
  res.hostBound = res.critical.hostUs > 0.5 * res.timeUs;
  res.events = fluid_.events();
  summariseLinks(fluid_.resources(), res.timeUs, res);
  return res;
}

}  // namespace

Result simulate(const plan::Plan& plan, const Cluster& cluster, const std::string& tracePath) {
  cluster.validate();
  Run run(plan, cluster, tracePath);
  return run.go();
}

}  // namespace rmacc::sim
