#include "runner.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <unordered_map>

#include "core/error.h"
#include "core/signal_contexts.h"
#include "core/trace_file.h"
#include "plan/completion_waits.h"
#include "plan/proxy_runs.h"
#include "critical_path.h"
#include "machine.h"
#include "report_links.h"

namespace rmacc::sim {
namespace {

using plan::Lane;
using plan::Op;
using plan::OpKind;
using plan::Region;

bool isWaitLane(Lane lane) { return lane == Lane::kCeWait || lane == Lane::kProxyWait; }

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
    // Backend calls: consecutive ops of one stream that the executor hands over together
    // (groupCalls), in op order; every op is in one.
    std::vector<std::vector<int>> groups;
    std::vector<int> groupOf;
    std::vector<char> eventAfter;  // another stream depends on it: its progress word follows
    // What an op's memory op costs its stream: memopUs as a batch's first, else a batch item
    // (a wait right after a wait, setUp; a proxy put's ready-flag store, enqueue).
    std::vector<double> memopCostUs;
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
    std::vector<double> threadBusyUs;  // each proxy thread's CPU: writes it issued and took in
    std::unordered_map<int, int> nicQueued;  // messages to each peer in the NIC queue or on it
  };
  struct Counter {
    uint64_t value = 0;
    uint64_t held = 0;  // quiet puts' signals, which the next put's write carries (Op::quiet)
    std::vector<int> waiters;  // op indices on the counter's rank
    OpRef lastFrom;
  };

  uint64_t key(int rank, int from, int ctx, int sig) const {
    return (((uint64_t)rank * n_ + from) << 16) | ((uint64_t)ctx << 4) | (uint64_t)sig;
  }
  int streamFor(int r, const Op& op) const;
  void setUp(int r);
  void foldCompletionWaits(int r);
  void groupCalls(int r);
  double callCost(int r, const std::vector<int>& group) const;
  void enqueue(int r, double base);
  void pump(int r, int s);
  void start(int r, int g);
  void finish(int r, int i);
  void startCeCall(int r, int g);
  void writeSignals(int r, int g);
  void startProxyCall(int r, int g);
  void sendPut(int r, int i);
  int writesOf(int r, const Op& op) const;
  double proxyWork(int at, int r, int i);
  bool writtenAsValue(const Op& op) const;
  void land(int r, int i);
  void deliver(int to, int from, int ctx, int sig, OpRef by);
  void landRelay(int r, int64_t bytes);
  void checkDone(int r);
  void trace(int r, const Op& op, const char* lane, const char* name, double t0, double t1);

  const plan::Plan& plan_;
  const Cluster& c_;
  const int n_;
  // Copy streams: Cluster::ceStreams, but one on a single node, where the executor's lanes
  // are serial (RMACC_LANES auto) and it makes one.
  const int ceStreams_;
  Fluid fluid_;
  Machine machine_;
  std::vector<RankState> ranks_;
  std::unordered_map<uint64_t, Counter> counters_;
  std::vector<std::unique_ptr<TraceFile>> traces_;
  uint64_t relayHighWater_ = 0;
  double hostEnd_ = 0;
};

Run::Run(const plan::Plan& plan, const Cluster& c, const std::string& tracePath)
    : plan_(plan),
      c_(c),
      n_(plan.topo.nRanks()),
      ceStreams_(plan.topo.nNodes() == 1 ? 1 : c.ceStreams),
      machine_(fluid_, c),
      ranks_(n_) {
  if (c.maxMinSharing) fluid_.setSharing(Fluid::Sharing::kMaxMin);
  RMACC_ARG_CHECK(plan.topo.nNodes() == c.nodes && plan.topo.localSize() == c.gpusPerNode,
                  "the plan is for %d x %d ranks, the cluster has %d x %d GPUs",
                  plan.topo.nNodes(), plan.topo.localSize(), c.nodes, c.gpusPerNode);
  for (int r = 0; r < n_; ++r)
    RMACC_ARG_CHECK(plan.topo.nodeOf(r) == r / c.gpusPerNode,
                    "the simulator needs ranks in node blocks (rank %d is on node %d)", r,
                    plan.topo.nodeOf(r));
  if (!tracePath.empty())
    for (int r = 0; r < n_; ++r) traces_.push_back(std::make_unique<TraceFile>(tracePath, r));
}

// The executor's mapping (src/exec/executor.cc): CE ops to one peer share a copy stream.
int Run::streamFor(int r, const Op& op) const {
  const int ce = ceStreams_;
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
  st.streams.assign(ceStreams_ + 3, {});
  st.threadBusyUs.assign(machine_.proxyThreads(), 0);
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
  }
  foldCompletionWaits(r);
  groupCalls(r);
  st.memopCostUs.assign(m, c_.memopUs);
  enqueue(r, base);
  // A wait right after another wait of its stream shares that one's memory-op batch (one of up
  // to kFlushAtMemOps): a batch item (Cluster::waitBatchItemUs).
  for (const Stream& q : st.streams) {
    size_t run = 0;
    for (int i : q.ops) {
      if (ops[i].kind != OpKind::kWait || ops[i].count == 0) {
        run = 0;
        continue;
      }
      if (run++ % kFlushAtMemOps != 0) st.memopCostUs[i] = c_.waitBatchItemUs;
    }
  }
  if (m == 0) st.doneAt = base;
}

// A wait lane the executor folds into other streams (Executor::classify: fewer than
// kOwnCompletionStreamFrom completion waits on other nodes) has the waits that no other stream
// holds -- its trailing waits that nothing depends on -- joined to the last stream's final
// batch, after every stream's work: the first of them waits here for the last op of every
// other stream.
void Run::foldCompletionWaits(int r) {
  RankState& st = ranks_[r];
  const std::vector<char> remote = remoteCompletionWaits(plan_.ranks[r].ops, plan_.topo, r);
  for (int lane : {ceStreams_, ceStreams_ + 2}) {  // the CE-wait and proxy-wait lanes
    const std::vector<int>& ops = st.streams[lane].ops;
    int remoteWaits = 0;
    for (int i : ops) remoteWaits += remote[i];
    size_t tail = ops.size();
    while (tail > 0 && st.dependents[ops[tail - 1]].empty()) --tail;
    if (tail == ops.size() || remoteWaits >= kOwnCompletionStreamFrom) continue;
    const int first = ops[tail];
    for (int t = 0; t < (int)st.streams.size(); ++t) {
      if (t == ceStreams_ || t == ceStreams_ + 2 || st.streams[t].ops.empty()) continue;
      st.dependents[st.streams[t].ops.back()].push_back(first);
      ++st.depsLeft[first];
    }
  }
}

// The host enqueues op by op in plan order and pays for a backend call when its last op is in
// (the executor hands a batch over when it closes). A call's groups are the CE streams' backend
// calls; the proxy-put stream is different: the executor keeps one batch of memory ops open on
// it until a run of puts ends or the batch holds kFlushAtMemOps or the call ends (the rule of
// src/plan/proxy_runs.h, which this calls), a credit wait or a wait on another stream's progress being one more
// memory op in it and consecutive puts sharing one ready-flag store. So that stream's ops are
// handed over, and paid for, batch by batch; its groups only say which of its ops start
// together.
void Run::enqueue(int r, double base) {
  RankState& st = ranks_[r];
  const auto& ops = plan_.ranks[r].ops;
  const int proxyStream = ceStreams_ + 1;
  const std::vector<char> runEnd = proxyRunEnds(ops, st.streamOf, [&](const Op& op) {
    return op.kind == OpKind::kPut && !plan_.topo.sameNode(op.peer, r);
  });
  double host = base;
  std::vector<int> batch, deps;
  int memOps = 0;
  bool readyLast = false;
  std::vector<int> waited(st.streams.size(), -1);  // latest op of each stream already waited for
  auto handOver = [&] {
    if (memOps > 0) host += c_.enqueueMemopCallUs + c_.enqueueMemopItemUs * (memOps - 1);
    for (int j : batch) st.enqueueAt[j] = host;
    batch.clear();
    memOps = 0;
    readyLast = false;
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    host += c_.enqueueUsPerOp;
    const Op& op = ops[i];
    if (st.streamOf[i] != proxyStream) {
      const std::vector<int>& g = st.groups[st.groupOf[i]];
      if (g.back() == (int)i) host += callCost(r, g);
      st.enqueueAt[i] = host;
      continue;
    }
    if (memOps >= (int)kFlushAtMemOps) handOver();
    deps.assign(op.deps.begin(), op.deps.end());  // latest first, as the executor
    std::sort(deps.begin(), deps.end(), std::greater<int>());
    for (int d : deps) {
      const int t = st.streamOf[d];
      // Wait lanes pay for their waits as groups of their own (callCost).
      if (t == proxyStream || isWaitLane(ops[d].lane) || d <= waited[t]) continue;
      waited[t] = d;
      ++memOps;
      readyLast = false;
    }
    // A put's store leads its batch, or it is an item of it (or shares a store already there).
    if (op.kind != OpKind::kWait && (readyLast || memOps > 0))
      st.memopCostUs[i] = c_.memopBatchItemUs;
    if (op.kind == OpKind::kWait) {
      memOps += op.count > 0;
      readyLast = false;
    } else if (!readyLast) {
      ++memOps;
      readyLast = true;
    }
    if (st.eventAfter[i]) {  // its progress word, for a dependent on another stream
      ++memOps;
      readyLast = false;
    }
    batch.push_back((int)i);
    if (runEnd[i]) handOver();
  }
  handOver();
  hostEnd_ = std::max(hostEnd_, host);
}

// What the driver takes on the host for one backend call (Cluster's enqueue*Call/Item).
double Run::callCost(int r, const std::vector<int>& group) const {
  const auto& ops = plan_.ranks[r].ops;
  const Op& head = ops[group[0]];
  if (head.kind == OpKind::kWait) return c_.enqueueMemopItemUs * (double)group.size();
  auto batch = [](int k, double call, double item) { return k ? call + item * (k - 1) : 0.0; };
  int copies = 0, signals = 0;
  for (int i : group) {
    copies += ops[i].bytes > 0;
    signals += ops[i].kind == OpKind::kPut && !ops[i].quiet;
  }
  return batch(copies, c_.enqueueCopyCallUs, c_.enqueueCopyItemUs) +
         batch(signals, c_.enqueueMemopCallUs, c_.enqueueMemopItemUs);
}

// What src/exec/executor.cc hands the backend in one call (its Batch): a run of CE puts of one
// stream (one copy batch, then one batch of their signal writes), or a run of proxy puts (one
// store of the queue's ready flag). Each stream keeps its own open run, which ops of other
// streams in between do not end. A run ends where the executor flushes: an op of the stream of
// another kind; the op waits for an op of another stream it did not wait for yet (a wait on
// that stream's progress word, or a wait of the wait lanes, held among the memory ops: a copy
// does not pass either); the run's last op is one another stream depends on (its progress word
// is written after the latest such dep of each dependent, and a copy does not pass that
// either); or the op depends on a member. (The executor also flushes a batch of 16 memory
// ops; the model does not: it would only split a run of ready-flag stores.) Waits are calls
// of their own here: the executor folds the wait lanes into their dependents' batches, the
// model runs them on their streams with an event hop (eventUs: the progress word's write and
// wait).
void Run::groupCalls(int r) {
  RankState& st = ranks_[r];
  const auto& ops = plan_.ranks[r].ops;
  const int m = (int)ops.size(), nStreams = (int)st.streams.size();
  std::vector<char>& eventAfter = st.eventAfter;
  eventAfter.assign(m, 0);
  for (int i = 0; i < m; ++i)
    for (int d : ops[i].deps) {
      if (st.streamOf[d] == st.streamOf[i] || isWaitLane(ops[d].lane)) continue;
      bool latest = true;
      for (int e : ops[i].deps) latest = latest && (e <= d || st.streamOf[e] != st.streamOf[d]);
      if (latest) eventAfter[d] = 1;
    }
  auto classOf = [&](const Op& op) {
    return op.kind != OpKind::kPut ? 0 : op.lane == Lane::kCePut ? 1 : 2;
  };
  std::vector<int> open(nStreams, -1), waited((size_t)nStreams * nStreams, -1);
  st.groupOf.assign(m, -1);
  st.groups.clear();
  for (int i = 0; i < m; ++i) {
    const Op& op = ops[i];
    const int s = st.streamOf[i];
    bool joins = !isWaitLane(op.lane) && classOf(op) != 0 && open[s] >= 0 &&
                 classOf(ops[st.groups[open[s]][0]]) == classOf(op);
    for (int d : op.deps) {
      const int t = st.streamOf[d];
      if (t == s) {
        joins = joins && st.groupOf[d] != open[s];
        continue;
      }
      int& w = waited[(size_t)s * nStreams + t];
      if (d > w) {
        w = d;
        joins = false;
      }
    }
    if (!joins) {
      st.groups.emplace_back();
      open[s] = isWaitLane(op.lane) || classOf(op) == 0 ? -1 : (int)st.groups.size() - 1;
    }
    st.groups[joins ? open[s] : st.groups.size() - 1].push_back(i);
    st.groupOf[i] = joins ? open[s] : (int)st.groups.size() - 1;
    if (eventAfter[i]) open[s] = -1;  // recorded right after it
  }
}

// Starts the head call of stream s of rank r when it may: stream idle, every member's deps
// done, all of it enqueued.
void Run::pump(int r, int s) {
  RankState& st = ranks_[r];
  Stream& q = st.streams[s];
  if (q.busy || q.next >= q.ops.size()) return;
  const int i = q.ops[q.next], g = st.groupOf[i];
  const std::vector<int>& members = st.groups[g];
  for (int m : members)
    if (st.depsLeft[m] > 0) return;
  const double now = fluid_.now(), enqueued = st.enqueueAt[members.back()];
  if (now < enqueued) {
    if (q.wakeAt != enqueued) {
      q.wakeAt = enqueued;
      fluid_.at(enqueued, [this, r, s] { pump(r, s); });
    }
    return;
  }
  OpRecord& rec = st.rec[i];
  if (rec.gateKind == Gate::kNone || enqueued >= rec.gateAt) {
    rec.gateKind = Gate::kEnqueue;
    rec.gateAt = enqueued;
  }
  if (q.next > 0) {
    const int prev = q.ops[q.next - 1];
    if (st.rec[prev].end >= rec.gateAt) rec.gate(Gate::kStream, st.rec[prev].end, {r, prev});
  }
  // The call starts on its last condition, whichever member's it was: every member shows it.
  OpRecord gate = rec;
  for (int m : members)
    if (st.rec[m].gateAt > gate.gateAt) gate = st.rec[m];
  for (int m : members) {
    st.rec[m].gateAt = gate.gateAt;
    st.rec[m].gateKind = gate.gateKind;
    st.rec[m].gateBy = gate.gateBy;
  }
  q.busy = true;
  q.next += members.size();
  start(r, g);
}

void Run::start(int r, int g) {
  RankState& st = ranks_[r];
  const int i = st.groups[g][0];
  const Op& op = plan_.ranks[r].ops[i];
  const double now = fluid_.now();
  for (int m : st.groups[g]) st.rec[m].start = now;
  switch (op.kind) {
    case OpKind::kWait: {
      Counter& k = counters_[key(r, op.peer, op.ctx, op.sigIdx)];
      if (k.value >= st.threshold[i]) {
        fluid_.at(now + st.memopCostUs[i], [this, r, i] { finish(r, i); });
      } else {
        k.waiters.push_back(i);
      }
      return;
    }
    case OpKind::kCopy:
    case OpKind::kPut:
      if (op.lane == Lane::kProxyPut) startProxyCall(r, g);
      else startCeCall(r, g);
      return;
  }
}

// Copy-engine ops: one launch for the call's copies (each further one a batch item), the copies
// at once over NVLink (or within the GPU), then, once all of them are done, their signal writes
// in order.
void Run::startCeCall(int r, int g) {
  const std::vector<int>& members = ranks_[r].groups[g];
  auto pending = std::make_shared<int>(0);
  for (int m : members) *pending += plan_.ranks[r].ops[m].bytes > 0;
  if (*pending == 0) {
    writeSignals(r, g);
    return;
  }
  const double launch = c_.ceOpUs + c_.ceBatchItemUs * (*pending - 1);
  fluid_.at(fluid_.now() + launch, [this, r, g, pending] {
    for (int i : ranks_[r].groups[g]) {
      const Op& op = plan_.ranks[r].ops[i];
      if (op.bytes == 0) continue;
      const int dst = op.kind == OpKind::kCopy ? r : op.peer;
      machine_.ce(r).submit([this, r, g, i, dst, pending](std::function<void()> release) {
        const Op& op = plan_.ranks[r].ops[i];
        fluid_.transfer((double)op.bytes, machine_.cePath(r, dst), [this, r, g, i, pending, release] {
          release();
          const Op& op = plan_.ranks[r].ops[i];
          if (op.src.region == Region::kRelay) landRelay(r, -(int64_t)op.bytes);
          if (op.dst.region == Region::kRelay) landRelay(op.peer, (int64_t)op.bytes);
          if (--*pending == 0) writeSignals(r, g);
        });
      });
    }
  });
}

// The signal writes of a CE call, one memory-op batch (a local copy has none). Puts of the
// call to one signal of one peer share one write, at the first one's place, of the last one's
// value (src/exec/executor.cc batchOp): their copies all ran before any signal of the call. A
// quiet put writes none.
void Run::writeSignals(int r, int g) {
  double t = fluid_.now();
  int k = 0;
  // One write per signal counter: (peer, ctx, sig) and when it lands. A call holds a few.
  struct Written {
    int peer, ctx, sig;
    double at;
  };
  std::vector<Written> written;
  for (int i : ranks_[r].groups[g]) {
    const Op& op = plan_.ranks[r].ops[i];
    if (op.kind == OpKind::kCopy) {
      finish(r, i);
      continue;
    }
    if (op.quiet) {  // no write: the stream's next put to the peer carries its count
      ++counters_[key(op.peer, r, op.ctx, op.sigIdx)].held;
      finish(r, i);
      continue;
    }
    auto same = std::find_if(written.begin(), written.end(), [&](const Written& w) {
      return w.peer == op.peer && w.ctx == op.ctx && w.sig == op.sigIdx;
    });
    if (same == written.end()) {
      t += k++ == 0 ? c_.memopUs : c_.memopBatchItemUs;
      same = written.insert(written.end(), {op.peer, op.ctx, op.sigIdx, t});
    }
    fluid_.at(same->at, [this, r, i] {
      finish(r, i);
      fluid_.at(fluid_.now() + c_.signalLatencyUs, [this, r, i] {
        const Op& op = plan_.ranks[r].ops[i];
        deliver(op.peer, r, op.ctx, op.sigIdx, {r, i});
      });
    });
  }
}

// Proxy puts: the stream posts their descriptors with one store (a memop) and moves on. The
// store is an item of the memory-op batch the executor keeps open on the stream (enqueue):
// behind a credit wait or an earlier store of that batch it costs a batch item (bench/results §35).
void Run::startProxyCall(int r, int g) {
  RankState& st = ranks_[r];
  st.putsInFlight += (int)st.groups[g].size();
  fluid_.at(fluid_.now() + st.memopCostUs[st.groups[g][0]], [this, r, g] {
    for (int i : ranks_[r].groups[g]) {
      finish(r, i);
      sendPut(r, i);
    }
  });
}

// The writes a put takes on the network: one, or for a gather one per iovLimit runs of sources
// adjacent in the send buffer (blocks packed in rank order: a segment that ends its block and
// one that starts a later block, with only empty blocks between, are one run).
int Run::writesOf(int r, const Op& op) const {
  if (op.gather.empty()) return 1;
  int runs = 1;
  for (size_t k = 1; k < op.gather.size(); ++k) {
    const plan::Segment &a = op.gather[k - 1], &b = op.gather[k];
    bool adjacent = b.src.offset == 0 && b.src.block > a.src.block &&
                    a.src.offset + a.bytes == plan_.bytes[(size_t)r * n_ + a.src.block];
    for (int d = a.src.block + 1; adjacent && d < b.src.block; ++d)
      adjacent = plan_.bytes[(size_t)r * n_ + d] == 0;
    runs += !adjacent;
  }
  return (runs + c_.iovLimit - 1) / c_.iovLimit;
}

// The CPU time the proxy of rank `at` spends on put i of rank r (issuing or taking in its
// writes), counted in that proxy's busy time.
double Run::proxyWork(int at, int r, int i) {
  const Op& op = plan_.ranks[r].ops[i];
  const double us = c_.proxyOpUs * writesOf(r, op);
  RankState& st = ranks_[at];
  st.threadBusyUs[machine_.proxyThread(r, op.peer)] += us;
  return us;
}

// A posted proxy put: its proxy thread issues its writes when it may (ProxyThread), the NIC
// moves it, the target's proxy takes each write's completion and applies the signal.
void Run::sendPut(int r, int i) {
  const Op& put = plan_.ranks[r].ops[i];
  // Op index: the executor posts a rank's puts in plan order (the library's posting order).
  ProxyThread& out = machine_.proxy(r, machine_.proxyThread(r, put.peer));
  out.release({put.peer, put.bytes, (uint64_t)i, proxyWork(r, r, i), [this, r, i] {
    const Op& op = plan_.ranks[r].ops[i];
    auto wire = [this, r, i, peer = op.peer](std::function<void()> releaseNic) {
      const Op& op = plan_.ranks[r].ops[i];
      fluid_.transfer((double)op.bytes, machine_.netPath(r, peer), [this, r, i, peer,
                                                                    releaseNic] {
        releaseNic();
        --ranks_[r].nicQueued[peer];
        fluid_.at(fluid_.now() + c_.netLatencyUs, [this, r, i] {
          const Op& op = plan_.ranks[r].ops[i];
          if (op.src.region == Region::kRelay) landRelay(r, -(int64_t)op.bytes);
          if (writtenAsValue(op)) return land(r, i);
          ProxyThread& in = machine_.proxy(op.peer, machine_.proxyThread(r, op.peer));
          in.arrive([this, r, i](std::function<void()> release) {
            fluid_.at(fluid_.now() + proxyWork(plan_.ranks[r].ops[i].peer, r, i),
                      [this, r, i, release] {
              release();
              land(r, i);
            });
          });
        });
      });
    };
    // Data waits its turn on the NIC (Machine::sendOnNic: its peer's queue pair, or the one
    // FIFO); a signal to a peer with nothing of ours queued or on the wire goes at once, and
    // with an endpoint of its own whatever is queued.
    int& queued = ranks_[r].nicQueued[op.peer];
    ++queued;
    if (op.bytes == 0 && c_.signalsBypassNicQueue && (queued == 1 || c_.signalEndpoint))
      wire([] {});
    else machine_.sendOnNic(r, op.peer, wire);
  }});
}

// Credits and entry signals that the NIC writes as values (Cluster::signalWrites): no work
// for the target's proxy (src/exec/rma.cc makeProxyPut, net/signals.h pureSignalContext).
bool Run::writtenAsValue(const Op& op) const {
  return c_.signalWrites && op.bytes == 0 && pureSignalContext(op.ctx);
}

// A proxy put has landed at its target and its signal counts there.
void Run::land(int r, int i) {
  const Op& op = plan_.ranks[r].ops[i];
  if (op.dst.region == Region::kRelay) landRelay(op.peer, (int64_t)op.bytes);
  ranks_[r].rec[i].arrival = fluid_.now();
  // The put's life after its post: proxy, NIC queue, wire, remote proxy.
  trace(r, op, "net", op.bytes ? "put" : "signal", ranks_[r].rec[i].end, fluid_.now());
  --ranks_[r].putsInFlight;
  deliver(op.peer, r, op.ctx, op.sigIdx, {r, i});
  checkDone(r);
}

void Run::landRelay(int r, int64_t bytes) {
  int64_t& held = ranks_[r].relayHeld;
  held += bytes;
  relayHighWater_ = std::max<uint64_t>(relayHighWater_, (uint64_t)std::max<int64_t>(held, 0));
}

void Run::deliver(int to, int from, int ctx, int sig, OpRef by) {
  Counter& k = counters_[key(to, from, ctx, sig)];
  k.value += 1 + k.held;
  k.held = 0;
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
    fluid_.at(fluid_.now() + st.memopCostUs[i], [this, to, i] { finish(to, i); });
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
  if (st.groups[st.groupOf[i]].back() == i) st.streams[s].busy = false;  // the call is done
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
  res.proxyThreads = machine_.proxyThreads();
  std::vector<const std::vector<OpRecord>*> recs;
  for (int r = 0; r < n_; ++r) {
    const RankState& st = ranks_[r];
    RMACC_ENFORCE(st.opsLeft == 0 && st.putsInFlight == 0,
                  "rank %d stuck: %d ops left, %d puts in flight (a wait never satisfied)", r,
                  st.opsLeft, st.putsInFlight);
    res.timeUs = std::max(res.timeUs, st.doneAt);
    double rankUs = 0;
    for (double us : st.threadBusyUs) {
      rankUs += us;
      res.proxyThreadBusyMaxUs = std::max(res.proxyThreadBusyMaxUs, us);
    }
    res.proxyBusyMaxUs = std::max(res.proxyBusyMaxUs, rankUs);
    recs.push_back(&st.rec);
  }
  double total = 0;
  for (uint64_t b : plan_.bytes) total += (double)b;
  std::vector<double> out(c_.nodes, 0), in(c_.nodes, 0);
  for (int s = 0; s < n_; ++s)
    for (int d = 0; d < n_; ++d)
      if (s / c_.gpusPerNode != d / c_.gpusPerNode) {
        const double b = (double)plan_.bytes[(size_t)s * n_ + d];
        out[s / c_.gpusPerNode] += b;
        in[d / c_.gpusPerNode] += b;
      }
  for (int k = 0; k < c_.nodes; ++k)
    res.nodeBoundUs = std::max(res.nodeBoundUs, std::max(out[k], in[k]) /
                                                    (c_.gpusPerNode * c_.nicGBps * 1e3));
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
