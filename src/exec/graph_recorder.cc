#include "exec/graph_recorder.h"

#include <algorithm>

#include "core/error.h"
#include "plan/graph_plan.h"

namespace rmacc {

namespace {

constexpr size_t kMinChunk = 1 << 20;  // ring slots: at least this, at most 32 chunks
constexpr int kRingSlots = 2;

char* localOf(const plan::Loc& loc, const CallBuffers& b) {
  switch (loc.region) {
    case plan::Region::kSend: return const_cast<char*>(b.send) + b.sendOffset[loc.block] + loc.offset;
    case plan::Region::kRecv: return b.recv + b.recvOffset[loc.block] + loc.offset;
    default: RMACC_THROW(rmaccInternalError, "an in-graph op reads or writes a relay");
  }
}

}  // namespace

GraphRecorder::GraphRecorder(Backend& backend, const Topology& topo, int rank, bool ring)
    : backend_(backend),
      topo_(topo),
      rank_(rank),
      me_(topo.localRankOf(rank)),
      L_(topo.nodeSize(topo.nodeOf(rank))),
      ring_(ring) {}

GraphRecorder::~GraphRecorder() { lanes_.clear(); }  // a stream drains when it goes

Event& GraphRecorder::nextEvent() {
  if (nextEvent_ == events_.size())  // made during the capture, perhaps in global mode
    backend_.runRelaxed([&] { events_.push_back(backend_.createEvent()); });
  return *events_[nextEvent_++];
}

// Each signal's value is its count in this replay: a put's is the puts to that peer (and
// signal) so far, a wait's the signals it and the waits before it on this rank consume, as the
// executor's counters would be were they reset every call.
std::unique_ptr<GraphWork> GraphRecorder::prepare(const plan::RankPlan& plan, const CallBuffers& b,
                                                  const GraphFlags& f) {
  const std::string why = plan::graphPlanProblem(topo_, rank_, plan);
  if (!why.empty()) RMACC_THROW(rmaccInternalError, "in-graph call: %s", why.c_str());
  const int n = topo_.nRanks();
  auto w = std::make_unique<GraphWork>();
  // The replay's first store says it runs.
  w->start.push_back({false, f.finished, f.running});
  std::vector<uint64_t> entrySent(n, 0), dataSent(n, 0), entryAwaited(n, 0), dataAwaited(n, 0);
  std::vector<int> sendTo(n, -1);  // index in w->sends
  std::vector<int> senders;        // ranks whose data this rank waits for, in plan order
  for (const plan::Op& op : plan.ops) {
    const int p = op.peer;
    if (op.kind == plan::OpKind::kCopy) {
      w->self = {localOf(op.dst, b), localOf(op.src, b), op.bytes};
    } else if (op.kind == plan::OpKind::kWait) {
      if (plan::isEntrySignal(op)) {
        entryAwaited[p] += op.count;  // taken on the lane of the puts it gates (below)
      } else {
        if (dataAwaited[p] == 0) senders.push_back(p);
        dataAwaited[p] += op.count;
      }
    } else if (plan::isEntrySignal(op)) {
      w->start.push_back({false, f.peerEntry[p] + me_, ++entrySent[p]});
    } else {
      const int lp = topo_.localRankOf(p);
      if (sendTo[p] < 0) {
        sendTo[p] = (int)w->sends.size();
        GraphWork::Send s;
        s.lane = (lp - me_ - 1 + L_) % L_;
        if (!op.deps.empty())
          s.take = {{true, f.entry + lp, entryAwaited[p]}, {false, f.entry + lp, 0}};
        w->sends.push_back(std::move(s));
      }
      GraphWork::Send& s = w->sends[sendTo[p]];
      if (op.bytes > 0) {
        char* dst = static_cast<char*>(b.peerRecv[p].local) + b.peerRecvOffset[p][op.dst.block] +
                    op.dst.offset;
        s.copies.push_back({dst, localOf(op.src, b), op.bytes});
        w->bytes += op.bytes;
      }
      // A quiet put's count reaches the peer with the next put's write (plan::Op::quiet).
      s.dataWrite = {false, f.peerData[p] + me_, ++dataSent[p]};
    }
  }
  for (int p : senders) w->finish.push_back({true, f.data + topo_.localRankOf(p), dataAwaited[p]});
  for (int p : senders) w->finish.push_back({false, f.data + topo_.localRankOf(p), 0});
  w->finish.push_back({false, f.finished, f.idle});
  w->senders = senders.size();
  if (w->self.bytes > 0 && ring_) {
    w->chunk = std::max<size_t>(kMinChunk, (w->self.bytes + 31) / 32);
    w->chunk = std::min<size_t>(w->chunk, w->self.bytes);
    w->ring = backend_.allocateHostVisible(kRingSlots * w->chunk);
  }
  std::lock_guard<std::mutex> lock(mu_);
  while (lanes_.size() < (size_t)L_ + 1) lanes_.push_back(backend_.createStream());
  return w;
}

// One replay's work (the sequence in the header), on `user` and the lanes it forks.
void GraphRecorder::record(const GraphWork& w, Stream& user) {
  nextEvent_ = 0;
  user.memOps(w.start.data(), w.start.size());
  Event& fork = nextEvent();
  user.record(fork);
  std::vector<Event*> ends;
  for (const GraphWork::Send& s : w.sends) {
    Stream& lane = *lanes_[s.lane];
    lane.waitEvent(fork);
    if (!s.take.empty()) lane.memOps(s.take.data(), s.take.size());
    if (!s.copies.empty()) lane.copy(s.copies.data(), s.copies.size());
    lane.memOps(&s.dataWrite, 1);
    ends.push_back(&nextEvent());
    lane.record(*ends.back());
  }
  if (w.self.bytes > 0 && !w.ring) {
    user.copy(&w.self, 1);
  } else if (w.self.bytes > 0) {
    // Down to pinned slots on one lane, up on the other: slot k is refilled once its bytes
    // went up (exec/local_copy.h: same-device copies would take the SMs).
    Stream& down = *lanes_[L_ - 1];
    Stream& up = *lanes_[L_];
    down.waitEvent(fork);
    up.waitEvent(fork);
    Event* wentDown[kRingSlots];
    Event* wentUp[kRingSlots] = {};
    for (int k = 0; k < kRingSlots; ++k) wentDown[k] = &nextEvent(), wentUp[k] = &nextEvent();
    char* slots = static_cast<char*>(w.ring->ptr());
    for (size_t off = 0, k = 0; off < w.self.bytes; off += w.chunk, ++k) {
      const size_t len = std::min(w.chunk, w.self.bytes - off);
      char* slot = slots + (k % kRingSlots) * w.chunk;
      if (k >= (size_t)kRingSlots) down.waitEvent(*wentUp[k % kRingSlots]);
      const CopyDesc d{slot, static_cast<const char*>(w.self.src) + off, len};
      down.copy(&d, 1);
      down.record(*wentDown[k % kRingSlots]);
      up.waitEvent(*wentDown[k % kRingSlots]);
      const CopyDesc u{static_cast<char*>(w.self.dst) + off, slot, len};
      up.copy(&u, 1);
      up.record(*wentUp[k % kRingSlots]);
    }
    ends.push_back(&nextEvent());
    up.record(*ends.back());
  }
  for (Event* e : ends) user.waitEvent(*e);
  user.memOps(w.finish.data(), w.finish.size());
}

void GraphRecorder::drain() {
  std::vector<Stream*> lanes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& l : lanes_) lanes.push_back(l.get());
  }
  // Outside the lock: a lane may wait until a watchdog releases it (coll/in_graph_calls.h).
  for (Stream* l : lanes) try { l->synchronize(); } catch (...) {}
}

}  // namespace rmacc
