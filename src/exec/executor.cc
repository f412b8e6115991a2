#include "exec/executor.h"

#include <algorithm>
#include <functional>
#include <map>

#include "core/error.h"
#include "core/log.h"
#include "plan/completion_waits.h"
#include "plan/proxy_runs.h"
#include "exec/rma.h"
#include "exec/signal_space.h"

namespace rmacc {

using plan::Lane;
using plan::Op;
using plan::OpKind;
using plan::Region;

namespace {

// Copies within the device above this size get the local stream (see streamFor).
constexpr uint64_t kOwnStreamAbove = 1 << 20;

}  // namespace

Executor::Executor(const EngineContext& ctx, RmaEngine& rma) : ctx_(ctx), rma_(rma) {
  Backend& be = ctx_.backend;
  const Config& cfg = ctx_.cfg;
  // Serial lanes use one stream for the plan's ops: every stream a call touches costs event
  // hand-offs (host calls and device latency on every call), and every stream created takes
  // one of the device's hardware queues. Within a node nothing waits on the network, so
  // overlapping lanes buys nothing there.
  serial_ = cfg.lanes == Config::Lanes::kSerial ||
            (cfg.lanes == Config::Lanes::kAuto && ctx_.topo.nNodes() == 1);
  for (int i = 0; i < (serial_ ? 1 : cfg.ceStreams); ++i) ceStreams_.push_back(be.createStream());
  if (!serial_) {
    ceWait_ = be.createStream();
    proxyPut_ = be.createStream();
    proxyWait_ = be.createStream();
  }
  local_ = be.createStream();
  join_ = be.createStream();
  std::vector<Stream*> all{local_.get(), join_.get(), ceWait_.get(), proxyPut_.get(),
                           proxyWait_.get()};
  for (auto& s : ceStreams_) all.push_back(s.get());
  constexpr size_t kWordBytes = 64;  // a line each: the streams write them independently
  // Host-visible: written by streams, waited on by streams, zeroed (and released) by the CPU.
  progressWords_ = be.allocateHostVisible(all.size() * kWordBytes);
  char* words = static_cast<char*>(progressWords_->ptr());
  for (size_t i = 0; i < all.size(); ++i) {
    if (!all[i]) continue;
    auto* word = reinterpret_cast<volatile uint64_t*>(words + i * kWordBytes);
    be.hostWrite(word, 0);
    progress_[all[i]] = Progress{word, 0};
  }
  trace_ = ctx_.trace;
  LocalCopyMode mode = chooseLocalCopyMode(cfg.localCopy, be.caps());
  copier_ = std::make_unique<LocalCopier>(be, ctx_.bootstrap, ctx_.topo, ctx_.rank, mode,
                                          cfg.localCopySlotBytes, cfg.localCopySlots);
  INFO(kSubsysInit, "executor: %s lanes, %zu copy stream(s), local copies %s",
       serial_ ? "serial" : "split", ceStreams_.size(),
       mode == LocalCopyMode::kEngines ? "by copy engines" : "direct");
}

Executor::~Executor() {
  // Work still queued references buffers about to go away: drain what can drain.
  drain();
}

void Executor::drain() {
  for (auto* s : {ceWait_.get(), proxyPut_.get(), proxyWait_.get(), local_.get(), join_.get()})
    if (s) try { s->synchronize(); } catch (...) {}
  for (auto& s : ceStreams_) try { s->synchronize(); } catch (...) {}
}

Event& Executor::nextEvent() {
  // Events are recycled every call: a waitEvent captures the event's latest record when it is
  // enqueued (CUDA semantics, mimicked by the host backend), so re-recording later is safe.
  if (nextEvent_ == events_.size()) events_.push_back(ctx_.backend.createEvent());
  return *events_[nextEvent_++];
}

Stream& Executor::streamFor(const Op& op) {
  // A large copy within the device runs beside the CE puts, on a stream of its own; a small one
  // costs less than the hand-off to another stream (two more host calls and an event).
  if (op.kind == OpKind::kCopy && op.bytes > kOwnStreamAbove) return *local_;
  if (serial_ || op.kind == OpKind::kCopy) return *ceStreams_[0];
  switch (op.lane) {
    case Lane::kCePut:
      // All CE ops towards one peer share a stream: its signal writes must stay in order.
      return *ceStreams_[ctx_.topo.localRankOf(op.peer) % ceStreams_.size()];
    case Lane::kCeWait: return *ceWait_;
    case Lane::kProxyPut: return *proxyPut_;
    case Lane::kProxyWait: return *proxyWait_;
  }
  RMACC_THROW(rmaccInternalError, "unknown lane %d", (int)op.lane);
}

namespace {

const char* opName(const Op& op) {
  switch (op.kind) {
    case OpKind::kPut: return op.bytes ? "put" : "signal";
    case OpKind::kCopy: return "copy";
    case OpKind::kWait: return "wait";
  }
  return "?";
}

}  // namespace

char* Executor::peerLocal(const Op& op, const CallBuffers& b) const {
  const PeerTarget& t = op.dst.region == Region::kRelay ? b.peerRelay[op.peer] : b.peerRecv[op.peer];
  const uint64_t offset = op.dst.region == Region::kRelay
                              ? op.dst.offset
                              : b.peerRecvOffset[op.peer][op.dst.block] + op.dst.offset;
  return static_cast<char*>(t.local) + offset;
}

char* Executor::local(const plan::Loc& loc, const CallBuffers& b) const {
  switch (loc.region) {
    case Region::kSend: return const_cast<char*>(b.send) + b.sendOffset[loc.block] + loc.offset;
    case Region::kRecv: return b.recv + b.recvOffset[loc.block] + loc.offset;
    case Region::kRelay: return b.relay + loc.offset;
    default: RMACC_THROW(rmaccInternalError, "op without a source region");
  }
}

void Executor::enqueueOp(Stream& s, const Op& op, const CallBuffers& b) {
  RmaEngine& rma = rma_;
  switch (op.kind) {
    case OpKind::kCopy: {
      CopyDesc c{local(op.dst, b), local(op.src, b), op.bytes};
      copier_->copy(s, &c, 1);
      return;
    }
    case OpKind::kWait: {
      SignalWait w{op.peer, op.ctx, op.sigIdx, op.count};
      rma.wait(s, &w, 1);
      return;
    }
    case OpKind::kPut: {
      if (op.quiet) {  // a CE put: a later put to the peer on this stream writes the count
        CopyDesc c{peerLocal(op, b), local(op.src, b), op.bytes};
        s.copy(&c, 1);
        ctx_.signals.ceSignal(op.peer, op.ctx, op.sigIdx);
        return;
      }
      if (!op.gather.empty()) {
        const std::vector<FabricIov> srcs = gatherSources(op, b);
        rma.putGather(s, srcs.data(), srcs.size(), op.peer, b.peerRelay[op.peer], op.dst.offset,
                      op.ctx, op.sigIdx, /*waitDone=*/false);
        noteRelayWrite(op);
        return;
      }
      const void* src = op.bytes ? local(op.src, b) : nullptr;
      if (op.bytes == 0) {
        rma.signal(s, op.peer, op.ctx, op.sigIdx, /*waitDone=*/false);
      } else if (op.dst.region == Region::kRelay) {
        noteRelayWrite(op);
        rma.put(s, src, op.bytes, op.peer, b.peerRelay[op.peer], op.dst.offset, op.ctx,
                op.sigIdx, /*waitDone=*/false);
      } else {
        uint64_t offset = b.peerRecvOffset[op.peer][op.dst.block] + op.dst.offset;
        rma.put(s, src, op.bytes, op.peer, b.peerRecv[op.peer], offset, op.ctx, op.sigIdx,
                /*waitDone=*/false);
      }
      return;
    }
  }
}

// A CE put is a copy then a signal; consecutive CE puts, signals, waits, proxy puts and copies
// within the device of one stream become one batch of copies then one batch of memory ops, in
// op order: each signal still follows its own copy (and now the others of the batch too),
// copies to different places may run at once, and the waits and ready flags keep their place
// among the signals. A copy joins a batch only while it holds no wait or ready flag (it runs
// ahead of the batch's memory ops). A signal whose counter the batch already writes, while the
// batch's memory ops are all signal writes (no wait, ready flag or progress mark: `ordered`),
// raises that write's value instead of adding one: the copies of both ran before any of them
// (a relay's joined forwards of several chunks to one receiver cost one write, plan.h
// Options::joinForwardsBelow). A quiet put (plan.h Op::quiet) counts its signal and writes
// none: a later put to the same peer, on the same stream (streamFor), writes the count.
// Anything else (staged proxy puts, copies through the copy-engine loop) is enqueued on its own.
bool Executor::batchOp(Batch& batch, Stream& s, const Op& op, const CallBuffers& b) {
  const bool ce = op.kind == OpKind::kPut && ctx_.topo.sameNode(op.peer, ctx_.rank);
  const bool copy = op.kind == OpKind::kCopy && copier_->mode() == LocalCopyMode::kDirect;
  if (op.kind == OpKind::kPut && !ce) return batchProxyPut(batch, s, op, b);
  if (!ce && !copy && op.kind != OpKind::kWait) return false;
  if ((copy || (ce && op.bytes)) && batch.ordered) flush(batch);
  if (op.kind == OpKind::kWait) {
    if (op.count) wait(batch, ctx_.signals.consume(op.peer, op.ctx, op.sigIdx, op.count));
    return true;
  }
  if (copy) {
    batch.copies.push_back({local(op.dst, b), local(op.src, b), op.bytes});
    return true;
  }
  if (op.bytes) batch.copies.push_back({peerLocal(op, b), local(op.src, b), op.bytes});
  WriteDesc sig = ctx_.signals.ceSignal(op.peer, op.ctx, op.sigIdx);
  if (op.quiet) return true;  // a later put of this stream to the peer writes the count
  if (!batch.ordered)
    for (MemOpDesc& m : batch.memOps)
      if (m.addr == sig.addr) {
        m.value = sig.value;
        return true;
      }
  pushMemOp(batch, {false, sig.addr, sig.value});
  return true;
}

// A put to another node: posted to the proxy now, released by a store of the queue's ready
// flag in the batch. Consecutive puts of a stream thus cost one store per proxy queue between
// them, not a backend call each: a store to a flag already stored in the batch's trailing
// run of ready stores replaces that one (the proxy issues every post up to the value it
// reads, and nothing but ready stores ran in between, so the order within the run is free).
bool Executor::batchProxyPut(Batch& batch, Stream& s, const Op& op, const CallBuffers& b) {
  WriteDesc ready;
  if (!op.gather.empty()) {
    const std::vector<FabricIov> srcs = gatherSources(op, b);
    if (!rma_.postUnreleased(s, srcs.data(), srcs.size(), op.peer, b.peerRelay[op.peer],
                             op.dst.offset, op.ctx, op.sigIdx, &ready))
      return false;  // staged: enqueueOp stages it chunk by chunk
  } else if (!postPut(s, op, b, &ready)) {
    return false;
  }
  if (op.bytes && op.dst.region == Region::kRelay) noteRelayWrite(op);
  MemOpDesc* same = nullptr;
  if (batch.readyLast)
    for (size_t i = batch.readyRun; i < batch.memOps.size() && !same; ++i)
      if (batch.memOps[i].addr == ready.addr) same = &batch.memOps[i];
  if (same) {
    same->value = ready.value;
    // Keep the latest store last: join's readyTail_ waits on the last one for the whole run.
    std::swap(*same, batch.memOps.back());
  } else {
    const size_t at = batch.memOps.size();
    const bool run = batch.readyLast;
    pushMemOp(batch, {false, ready.addr, ready.value});
    if (!run) batch.readyRun = at;
    batch.ordered = true;
  }
  batch.readyLast = true;
  return true;
}

// A gathering op's sources in this call's send buffer.
std::vector<FabricIov> Executor::gatherSources(const Op& op, const CallBuffers& b) const {
  RMACC_ENFORCE(op.dst.region == Region::kRelay, "a gathering put that does not write a relay");
  std::vector<FabricIov> srcs;
  srcs.reserve(op.gather.size());
  for (const plan::Segment& g : op.gather) srcs.push_back({local(g.src, b), g.bytes, nullptr});
  return srcs;
}

void Executor::noteRelayWrite(const Op& op) {
  const uint64_t end = op.dst.offset + op.bytes;
  if (end > relayHighWater_.load(std::memory_order_relaxed))
    relayHighWater_.store(end, std::memory_order_relaxed);
}

// Posts a put of one source (or a signal) unreleased; false when it must be staged.
bool Executor::postPut(Stream& s, const Op& op, const CallBuffers& b, WriteDesc* ready) {
  const void* src = op.bytes ? local(op.src, b) : nullptr;
  PeerTarget signalOnly;
  const PeerTarget* t = &signalOnly;
  uint64_t offset = 0;
  if (op.bytes == 0) {
    signalOnly.remote = ctx_.signalTargets[op.peer];
  } else if (op.dst.region == Region::kRelay) {
    t = &b.peerRelay[op.peer];
    offset = op.dst.offset;
  } else {
    t = &b.peerRecv[op.peer];
    offset = b.peerRecvOffset[op.peer][op.dst.block] + op.dst.offset;
  }
  // staged (false): enqueueOp copies it out chunk by chunk
  return rma_.postUnreleased(s, src, op.bytes, op.peer, *t, offset, op.ctx, op.sigIdx, ready);
}

// A dependency between streams of a call is a memory op pair, not an event: the stream the
// dependency is on writes the next value of its progress word after the op (a write runs once
// all earlier work of its stream is done, copies included, and fences it), and the dependent
// stream waits for that value. Both join the streams' open batches, where an event record
// and an event wait are a backend call each and end both batches. The words only grow, from
// call to call; abort releases waits on them like any other.
WaitDesc Executor::markProgress(Batch& batch) {
  Progress& p = progress_.at(batch.stream);
  pushMemOp(batch, {false, p.word, ++p.value});
  batch.ordered = true;  // a later copy must not run ahead of the write
  return WaitDesc{p.word, p.value};
}

Executor::Batch& Executor::Batches::of(Stream& s) {
  for (Batch& b : open)
    if (b.stream == &s) return b;
  open.push_back(Batch{});
  open.back().stream = &s;
  return open.back();
}

void Executor::pushMemOp(Batch& batch, const MemOpDesc& m) {
  batch.memOps.push_back(m);
  batch.readyLast = false;
}

void Executor::wait(Batch& batch, const WaitDesc& w) {
  pushMemOp(batch, {true, const_cast<volatile uint64_t*>(w.addr), w.value});
  batch.ordered = true;
}

void Executor::flush(Batch& batch) {
  if (batch.empty()) return;
  Stream& s = *batch.stream;
  if (!batch.copies.empty()) s.copy(batch.copies.data(), batch.copies.size());
  if (!batch.memOps.empty()) s.memOps(batch.memOps.data(), batch.memOps.size());
  if (batch.readyLast)
    readyTail_[&s] = WaitDesc{batch.memOps.back().addr, batch.memOps.back().value};
  else
    readyTail_.erase(&s);
  batch.copies.clear();
  batch.memOps.clear();
  batch.ordered = batch.readyLast = false;
}

void Executor::flushAll(Batches& batches) {
  for (Batch& b : batches.open) flush(b);
}

// The streams of the call's ops; which of them only wait (WaitOnly). With a trace every stream
// runs its own ops, so that each op gets its span; so does a wait lane with completion waits on
// kOwnCompletionStreamFrom or more sources of other nodes (plan/completion_waits.h).
void Executor::classify(const std::vector<Op>& ops, Call& c) {
  c.streamOf.resize(ops.size());
  std::vector<Stream*> all;
  std::vector<char> onlyWaits;
  std::vector<int> remoteCompletions;  // by stream
  // Only where a stream may be wait-only (not with a trace or serial lanes, one node's case).
  const std::vector<char> completion =
      trace_ || serial_ ? std::vector<char>() : remoteCompletionWaits(ops, ctx_.topo, ctx_.rank);
  for (size_t i = 0; i < ops.size(); ++i) {
    Stream* s = c.streamOf[i] = &streamFor(ops[i]);
    size_t k = std::find(all.begin(), all.end(), s) - all.begin();
    if (k == all.size()) {
      all.push_back(s);
      onlyWaits.push_back(!trace_ && !serial_);
      remoteCompletions.push_back(0);
    }
    bool waits = ops[i].kind == OpKind::kWait;
    for (int d : ops[i].deps) waits = waits && c.streamOf[d] == s;
    if (!waits ||
        (!completion.empty() && completion[i] && ++remoteCompletions[k] == kOwnCompletionStreamFrom))
      onlyWaits[k] = 0;
  }
  std::vector<int> waitOnlyAt(all.size(), -1);
  for (size_t k = 0; k < all.size(); ++k) {
    if (!onlyWaits[k]) {
      c.used.push_back(all[k]);
      continue;
    }
    waitOnlyAt[k] = (int)c.waitOnly.size();
    c.waitOnly.push_back({all[k], {}});
  }
  c.waitOnlyOf.assign(ops.size(), -1);
  c.waitsUpTo.assign(ops.size(), 0);
  for (size_t i = 0; i < ops.size(); ++i)
    c.waitOnlyOf[i] = waitOnlyAt[std::find(all.begin(), all.end(), c.streamOf[i]) - all.begin()];
}

void Executor::holdWaits(Batch& batch, Call& c, int v, size_t upTo) {
  size_t& held = c.heldWaits.emplace(std::make_pair(batch.stream, v), 0).first->second;
  for (; held < upTo; ++held) wait(batch, c.waitOnly[v].waits[held]);
}

void Executor::run(const plan::RankPlan& plan, const CallBuffers& buffers, const WaitDesc& start,
                   bool entryBarrier, const std::vector<CopyDesc>& finish,
                   const CallDone& done, uint64_t callSeq) {
  const std::vector<Op>& ops = plan.ops;
  nextEvent_ = 0;
  readyTail_.clear();
  Call c;
  classify(ops, c);
  c.runEnd = proxyRunEnds(ops, c.streamOf, [&](const Op& op) {
    return op.kind == OpKind::kPut && !ctx_.topo.sameNode(op.peer, ctx_.rank);
  });
  // The last stream joins the others, runs the finish copies and stores the done flags.
  if (c.used.empty()) c.used.push_back(join_.get());

  Batches batches;
  // Each stream's wait for the start joins its first batch (the entry signals, on one node
  // everything up to the data copies) instead of being a call of its own.
  std::vector<Stream*> started;
  auto startOn = [&](Stream& s) {
    if (std::find(started.begin(), started.end(), &s) != started.end()) return;
    started.push_back(&s);
    if (!entryBarrier) wait(batches.of(s), start);
  };
  if (entryBarrier) barrierGate(start, c.used);

  // An op that a different stream depends on gets its stream's progress word written right
  // after it (see markProgress); of an op's deps on one stream only the latest needs one (the
  // stream ran the others before it).
  std::vector<char> crossDep(ops.size(), 0);
  for (size_t i = 0; i < ops.size(); ++i) {
    for (int d : ops[i].deps) {
      if (c.streamOf[d] == c.streamOf[i] || c.waitOnlyOf[d] >= 0) continue;
      bool latest = true;
      for (int e : ops[i].deps) latest = latest && (e <= d || c.streamOf[e] != c.streamOf[d]);
      if (latest) crossDep[d] = 1;
    }
  }
  std::vector<WaitDesc> after(ops.size());
  // The latest op of stream B that stream A already waits for: older deps are implied.
  std::map<std::pair<Stream*, Stream*>, int> waited;
  std::vector<int> deps;

  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    Stream& s = *c.streamOf[i];
    if (const int v = c.waitOnlyOf[i]; v >= 0) {
      if (op.count)
        c.waitOnly[v].waits.push_back(ctx_.signals.consume(op.peer, op.ctx, op.sigIdx, op.count));
      c.waitsUpTo[i] = c.waitOnly[v].waits.size();
      continue;
    }
    startOn(s);
    Batch& batch = batches.of(s);
    // Latest first: the progress mark of an op's latest dep on a stream covers its earlier ones
    // there.
    deps.assign(op.deps.begin(), op.deps.end());
    std::sort(deps.begin(), deps.end(), std::greater<int>());
    for (int d : deps) {
      if (c.streamOf[d] == &s) continue;
      if (c.waitOnlyOf[d] >= 0) {
        holdWaits(batch, c, c.waitOnlyOf[d], c.waitsUpTo[d]);
        continue;
      }
      int& w = waited.emplace(std::make_pair(&s, c.streamOf[d]), -1).first->second;
      if (d <= w) continue;
      wait(batch, after[d]);
      w = d;
    }
    if (!trace_ && batch.memOps.size() >= kFlushAtMemOps) flush(batch);
    if (trace_ || !batchOp(batch, s, op, buffers)) {
      // Enqueued on its own, and it may be staged in pieces: everything before it in op order
      // goes first, as the plan lists it.
      flushAll(batches);
      TraceWriter::span(trace_, s, callSeq, op.batch, plan::laneName(op.lane), opName(op),
                        op.peer, op.bytes, [&] { enqueueOp(s, op, buffers); });
      readyTail_.erase(&s);
    }
    if (crossDep[i]) after[i] = markProgress(batch);
    if (c.runEnd[i]) flush(batch);
  }
  for (Stream* s : c.used) startOn(*s);  // a call without ops: the join stream
  finishCall(batches, join(batches, c), finish, done);
  anyCall_ = true;
}

// RMACC_ENTRY_SYNC=barrier: every stream of the call starts after a barrier on the join stream,
// which itself starts at the call's start.
void Executor::barrierGate(const WaitDesc& start, const std::vector<Stream*>& used) {
  join_->waitValues(&start, 1);
  rma_.barrier(*join_, kCtxEntry);
  Event& gate = nextEvent();
  join_->record(gate);
  for (Stream* s : used) s->waitEvent(gate);
}

// The last stream joins the others: the sources of proxy puts must be free, and every other
// stream's work done, before the call counts as done. A stream whose work ends with its ready
// flag is done once the flag holds that value: the last stream waits for it (and for its
// puts' sources) among its memory ops; any other takes an event. The waits of wait-only streams
// that the last stream does not hold yet join its memory ops. On one stream (one node, serial
// lanes) this takes no call of its own: its proxy wait, if any, joins the open batch. The
// batch is left open on the last stream.
Stream& Executor::join(Batches& batches, Call& c) {
  // Whether s's work (flushed or still open) ends with its proxy queue's ready flag.
  auto readyTailed = [&](Stream* s) {
    const Batch& b = batches.of(*s);
    if (!b.empty()) return b.readyLast;
    return readyTail_.count(s) > 0;
  };
  Stream* last = c.used.back();
  for (auto it = c.used.rbegin(); it != c.used.rend(); ++it)
    if (!readyTailed(*it)) {
      last = *it;
      break;
    }
  Batch& tail = batches.of(*last);
  for (Stream* s : c.used) {
    if (s == last) continue;
    // Done once its ready flag holds its last value, else once its progress mark is written;
    // the mark goes in with the stream's open batch.
    Batch& own = batches.of(*s);
    if (!readyTailed(s)) wait(tail, markProgress(own));
    flush(own);
    if (auto ready = readyTail_.find(s); ready != readyTail_.end()) wait(tail, ready->second);
    for (const WaitDesc& w : rma_.proxyDoneWaits(*s)) wait(tail, w);
  }
  for (size_t v = 0; v < c.waitOnly.size(); ++v)
    holdWaits(tail, c, (int)v, c.waitOnly[v].waits.size());
  for (const WaitDesc& w : rma_.proxyDoneWaits(*last)) wait(tail, w);
  return *last;
}

// The done flags go out in the last stream's open batch of memory ops, after its last waits.
void Executor::finishCall(Batches& batches, Stream& last, const std::vector<CopyDesc>& finish,
                          const CallDone& done) {
  Batch& batch = batches.of(last);
  for (Batch& b : batches.open)
    if (&b != &batch) flush(b);
  if (!finish.empty()) {
    flush(batch);
    copier_->copy(last, finish.data(), finish.size());
  }
  for (volatile uint64_t* flag : done.flags) pushMemOp(batch, {false, flag, done.value});
  if (done.own) pushMemOp(batch, {false, done.own, 1});
  flush(batch);
  lastDone_ = done.value;
}

void Executor::complete(const CallDone& done, const std::vector<CopyDesc>& finish) {
  // After the previous call: its done flags must not be overtaken by this one's. Every flag
  // of `done` holds the last finished call's value, so waiting on one is enough.
  Batches batches;
  if (anyCall_ && !done.flags.empty())
    wait(batches.of(*join_), WaitDesc{done.flags.back(), lastDone_});
  finishCall(batches, *join_, finish, done);
  anyCall_ = true;
}

}  // namespace rmacc
