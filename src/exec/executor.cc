#include "exec/executor.h"

#include <algorithm>
#include <map>

#include "core/comm.h"
#include "core/error.h"
#include "core/log.h"
#include "exec/rma.h"
#include "exec/signal_space.h"

namespace rmacc {

using plan::Lane;
using plan::Op;
using plan::OpKind;
using plan::Region;

Executor::Executor(Comm& comm) : comm_(comm) {
  Backend& be = comm.backend();
  // Serial lanes use one stream: every stream created takes one of the device's hardware
  // queues, and queues shared between streams order (and can block) each other's work.
  const bool serial = comm.cfg().serialLanes;
  for (int i = 0; i < (serial ? 1 : comm.cfg().ceStreams); ++i) ceStreams_.push_back(be.createStream());
  for (auto& s : ceStreams_) lanes_.push_back(s.get());
  if (!serial) {
    ceWait_ = be.createStream();
    proxyPut_ = be.createStream();
    proxyWait_ = be.createStream();
    lanes_.push_back(ceWait_.get());
    lanes_.push_back(proxyPut_.get());
    lanes_.push_back(proxyWait_.get());
  }
  join_ = be.createStream();
  joined_ = be.createEvent();
  trace_ = comm.trace();
}

Executor::~Executor() {
  // Work still queued references buffers about to go away: drain what can drain.
  for (Stream* s : lanes_) {
    try { s->synchronize(); } catch (...) {}
  }
  try { join_->synchronize(); } catch (...) {}
}

Event& Executor::nextEvent() {
  // Events are recycled every call: a waitEvent captures the event's latest record when it is
  // enqueued (CUDA semantics, mimicked by the host backend), so re-recording later is safe.
  if (nextEvent_ == events_.size()) events_.push_back(comm_.backend().createEvent());
  return *events_[nextEvent_++];
}

Stream& Executor::streamFor(const Op& op) {
  if (comm_.cfg().serialLanes) return *ceStreams_[0];
  switch (op.lane) {
    case Lane::kCePut: {
      // All CE ops towards one peer share a stream: its signal writes must stay in order.
      int peer = op.kind == OpKind::kCopy ? comm_.rank() : op.peer;
      return *ceStreams_[comm_.topo().localRankOf(peer) % ceStreams_.size()];
    }
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

void Executor::enqueueOp(Stream& s, const Op& op, const CallBuffers& b) {
  RmaEngine& rma = comm_.rma();
  auto local = [&](const plan::Loc& loc) -> char* {
    switch (loc.region) {
      case Region::kSend: return const_cast<char*>(b.send) + b.sendOffset[loc.block] + loc.offset;
      case Region::kRecv: return b.recv + b.recvOffset[loc.block] + loc.offset;
      case Region::kRelay: return b.relay + loc.offset;
      default: RMACC_THROW(rmaccInternalError, "op without a source region");
    }
  };
  switch (op.kind) {
    case OpKind::kCopy: {
      CopyDesc c{local(op.dst), local(op.src), op.bytes};
      if (op.bytes) s.copy(&c, 1);
      return;
    }
    case OpKind::kWait: {
      SignalWait w{op.peer, op.ctx, op.sigIdx, op.count};
      rma.wait(s, &w, 1);
      return;
    }
    case OpKind::kPut: {
      const void* src = op.bytes ? local(op.src) : nullptr;
      if (op.bytes == 0) {
        rma.signal(s, op.peer, op.ctx, op.sigIdx, /*waitDone=*/false);
      } else if (op.dst.region == Region::kRelay) {
        relayHighWater_ = std::max(relayHighWater_, op.dst.offset + op.bytes);
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

void Executor::run(const plan::RankPlan& plan, const CallBuffers& buffers, Event& start,
                   bool entryBarrier, const std::vector<CopyDesc>& finish,
                   volatile uint64_t* doneFlag, uint64_t doneValue, uint64_t callSeq) {
  const std::vector<Op>& ops = plan.ops;
  nextEvent_ = 0;

  // Every lane starts after the user's earlier work and after the previous call finished
  // (the planner relies on it: carried credits, entry signals, staging reuse).
  Event* gate = &start;
  if (entryBarrier) {
    join_->waitEvent(start);
    if (anyCall_) join_->waitEvent(*joined_);
    comm_.rma().barrier(*join_, kCtxEntry);
    gate = &nextEvent();
    join_->record(*gate);
  }
  for (Stream* s : lanes_) {
    s->waitEvent(*gate);
    if (anyCall_ && !entryBarrier) s->waitEvent(*joined_);
  }

  // Ops that a different stream depends on get an event recorded right after them.
  std::vector<Stream*> streamOf(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) streamOf[i] = &streamFor(ops[i]);
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
    for (int d : op.deps) {
      if (streamOf[d] == &s) continue;
      int& w = waited.emplace(std::make_pair(&s, streamOf[d]), -1).first->second;
      if (d <= w) continue;
      s.waitEvent(*after[d]);
      w = d;
    }
    TraceWriter::span(trace_, s, callSeq, op.batch, plan::laneName(op.lane), opName(op), op.peer,
                      op.bytes, [&] { enqueueOp(s, op, buffers); });
    if (crossDep[i]) {
      after[i] = &nextEvent();
      s.record(*after[i]);
    }
  }

  // Join: the sources of proxy puts must be free before the call counts as done.
  for (Stream* s : lanes_) {
    comm_.rma().waitProxyDone(*s);
    Event& e = nextEvent();
    s->record(e);
    join_->waitEvent(e);
  }
  if (!finish.empty()) join_->copy(finish.data(), finish.size());
  join_->writeValue(doneFlag, doneValue);
  join_->record(*joined_);
  anyCall_ = true;
}

void Executor::complete(volatile uint64_t* doneFlag, uint64_t doneValue) {
  join_->writeValue(doneFlag, doneValue);
}

}  // namespace rmacc
