#include "exec/executor.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "core/log.h"
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
      const void* src = op.bytes ? local(op.src, b) : nullptr;
      if (op.bytes == 0) {
        rma.signal(s, op.peer, op.ctx, op.sigIdx, /*waitDone=*/false);
      } else if (op.dst.region == Region::kRelay) {
        uint64_t end = op.dst.offset + op.bytes;
        if (end > relayHighWater_.load(std::memory_order_relaxed))
          relayHighWater_.store(end, std::memory_order_relaxed);
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

// A CE put is a copy then a signal; consecutive CE puts, signals, waits and copies within the
// device of one stream become one batch of copies then one batch of memory ops, in op order:
// each signal still follows its own copy (and now the others of the batch too), copies to
// different places may run at once, and the waits keep their place among the signals. A copy
// joins a batch only while it holds no wait (it runs ahead of the batch's memory ops, which
// only delays their stores). Anything else (proxy puts, copies through the copy-engine loop)
// is enqueued on its own.
bool Executor::batchOp(Batch& batch, Stream& s, const Op& op, const CallBuffers& b) {
  const bool ce = op.kind == OpKind::kPut && ctx_.topo.sameNode(op.peer, ctx_.rank);
  const bool copy = op.kind == OpKind::kCopy && copier_->mode() == LocalCopyMode::kDirect;
  if (!ce && !copy && op.kind != OpKind::kWait) return false;
  if (!batch.empty() && batch.stream != &s) flush(batch);
  if ((copy || (ce && op.bytes)) && batch.waits) flush(batch);
  batch.stream = &s;
  if (op.kind == OpKind::kWait) {
    if (op.count) wait(batch, s, ctx_.signals.consume(op.peer, op.ctx, op.sigIdx, op.count));
    return true;
  }
  if (copy) {
    batch.copies.push_back({local(op.dst, b), local(op.src, b), op.bytes});
    return true;
  }
  if (op.bytes) {
    const PeerTarget& t = op.dst.region == Region::kRelay ? b.peerRelay[op.peer] : b.peerRecv[op.peer];
    uint64_t offset = op.dst.region == Region::kRelay
                          ? op.dst.offset
                          : b.peerRecvOffset[op.peer][op.dst.block] + op.dst.offset;
    batch.copies.push_back({static_cast<char*>(t.local) + offset, local(op.src, b), op.bytes});
  }
  WriteDesc sig = ctx_.signals.ceSignal(op.peer, op.ctx, op.sigIdx);
  batch.memOps.push_back({false, sig.addr, sig.value});
  return true;
}

void Executor::wait(Batch& batch, Stream& s, const WaitDesc& w) {
  if (!batch.empty() && batch.stream != &s) flush(batch);
  batch.stream = &s;
  batch.memOps.push_back({true, const_cast<volatile uint64_t*>(w.addr), w.value});
  batch.waits = true;
}

void Executor::flush(Batch& batch) {
  if (batch.empty()) return;
  Stream& s = *batch.stream;
  if (!batch.copies.empty()) s.copy(batch.copies.data(), batch.copies.size());
  if (!batch.memOps.empty()) s.memOps(batch.memOps.data(), batch.memOps.size());
  batch.copies.clear();
  batch.memOps.clear();
  batch.waits = false;
}

void Executor::run(const plan::RankPlan& plan, const CallBuffers& buffers, const WaitDesc& start,
                   bool entryBarrier, const std::vector<CopyDesc>& finish,
                   const std::vector<volatile uint64_t*>& done, uint64_t doneValue,
                   uint64_t callSeq) {
  const std::vector<Op>& ops = plan.ops;
  nextEvent_ = 0;

  // The streams this call uses, in order of first use; only they take part in it.
  std::vector<Stream*> streamOf(ops.size());
  std::vector<Stream*> used;
  for (size_t i = 0; i < ops.size(); ++i) {
    streamOf[i] = &streamFor(ops[i]);
    if (std::find(used.begin(), used.end(), streamOf[i]) == used.end()) used.push_back(streamOf[i]);
  }
  // The last stream joins the others, runs the finish copies and stores the done flags.
  if (used.empty()) used.push_back(join_.get());

  Batch batch;
  // Each stream's wait for the start joins its first batch (the entry signals, on one node
  // everything up to the data copies) instead of being a call of its own.
  std::vector<Stream*> started;
  auto startOn = [&](Stream& s) {
    if (std::find(started.begin(), started.end(), &s) != started.end()) return;
    started.push_back(&s);
    if (!entryBarrier) wait(batch, s, start);
  };
  if (entryBarrier) barrierGate(start, used);

  // Ops that a different stream depends on get an event recorded right after them.
  std::vector<char> crossDep(ops.size(), 0);
  for (size_t i = 0; i < ops.size(); ++i)
    for (int d : ops[i].deps)
      if (streamOf[d] != streamOf[i]) crossDep[d] = 1;
  std::vector<Event*> after(ops.size(), nullptr);
  // The latest op of stream B that stream A already waits for: older deps are implied.
  std::map<std::pair<Stream*, Stream*>, int> waited;

  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    Stream& s = *streamOf[i];
    startOn(s);
    for (int d : op.deps) {
      if (streamOf[d] == &s) continue;
      int& w = waited.emplace(std::make_pair(&s, streamOf[d]), -1).first->second;
      if (d <= w) continue;
      if (batch.stream == &s) flush(batch);
      s.waitEvent(*after[d]);
      w = d;
    }
    if (trace_ || !batchOp(batch, s, op, buffers)) {
      flush(batch);
      TraceWriter::span(trace_, s, callSeq, op.batch, plan::laneName(op.lane), opName(op),
                        op.peer, op.bytes, [&] { enqueueOp(s, op, buffers); });
    }
    if (crossDep[i]) {
      if (batch.stream == &s) flush(batch);
      after[i] = &nextEvent();
      s.record(*after[i]);
    }
  }
  for (Stream* s : used) startOn(*s);  // a call without ops: the join stream
  join(batch, used);
  finishCall(batch, *used.back(), finish, done, doneValue);
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
// stream's work done, before the call counts as done. On one stream (one node, serial lanes)
// this takes no event and no call of its own: its proxy wait, if any, joins the open batch.
void Executor::join(Batch& batch, const std::vector<Stream*>& used) {
  Stream& last = *used.back();
  if (used.size() > 1 || batch.stream != &last) flush(batch);
  for (Stream* s : used) {
    WaitDesc w;
    const bool proxyWait = rma_.proxyDoneWait(*s, &w);
    if (s == &last) {
      if (proxyWait) wait(batch, last, w);
      continue;
    }
    if (proxyWait) s->waitValues(&w, 1);
    Event& e = nextEvent();
    s->record(e);
    last.waitEvent(e);
  }
}

// The done flags go out in the last stream's open batch of memory ops, after its last waits.
void Executor::finishCall(Batch& batch, Stream& last, const std::vector<CopyDesc>& finish,
                          const std::vector<volatile uint64_t*>& done, uint64_t doneValue) {
  if (!batch.empty() && batch.stream != &last) flush(batch);
  if (!finish.empty()) {
    flush(batch);
    copier_->copy(last, finish.data(), finish.size());
  }
  batch.stream = &last;
  for (volatile uint64_t* flag : done) batch.memOps.push_back({false, flag, doneValue});
  flush(batch);
  lastDone_ = doneValue;
}

void Executor::complete(const std::vector<volatile uint64_t*>& done, uint64_t doneValue,
                        const std::vector<CopyDesc>& finish) {
  // After the previous call: its done flags must not be overtaken by this one's. Every flag
  // of `done` holds the last finished call's value, so waiting on one is enough.
  Batch batch;
  if (anyCall_ && !done.empty()) wait(batch, *join_, WaitDesc{done.back(), lastDone_});
  finishCall(batch, *join_, finish, done, doneValue);
  anyCall_ = true;
}

}  // namespace rmacc
