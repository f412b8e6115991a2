// Runs one rank's part of a Plan on backend streams and the proxy: one executor for every
// backend (DESIGN.md §3). Each lane of the plan is an in-order stream; a dependency between
// ops of different lanes becomes a progress word the one stream writes and the other waits
// for (markProgress), or, on a lane that only waits, the waits themselves (see run); nothing
// else orders them.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "exec/engine_context.h"
#include "exec/local_copy.h"
#include "exec/trace.h"
#include "plan/plan.h"

namespace rmacc {

class RmaEngine;

// Where one call's Regions are, for this rank and its peers.
struct CallBuffers {
  const char* send = nullptr;               // this rank's send buffer
  char* recv = nullptr;                     // this rank's receive buffer
  std::vector<uint64_t> sendOffset;         // by destination: byte offset of the send block
  std::vector<uint64_t> recvOffset;         // by origin: byte offset of the receive block
  std::vector<PeerTarget> peerRecv;         // by rank: where to write its receive blocks
  std::vector<std::vector<uint64_t>> peerRecvOffset;  // [rank][origin]: offset in peerRecv
  char* relay = nullptr;                    // this rank's relay buffer
  std::vector<PeerTarget> peerRelay;        // by rank: relay buffers of other nodes' ranks
};

// What a finished call stores: its number into each of the engine's done flags, and 1 into its
// own flag when it has one (a call triggered by its stream: coll/captured_calls.h).
struct CallDone {
  std::vector<volatile uint64_t*> flags;
  uint64_t value = 0;
  volatile uint64_t* own = nullptr;
};

class Executor {
 public:
  Executor(const EngineContext& ctx, RmaEngine& rma);  // collective (the local copier's slots)
  ~Executor();

  // Enqueues this rank's ops (plan/rank_planner.h). Every stream the call uses first waits for
  // `start` (a flag the user's stream stores), which must follow the user's work before the
  // call AND the previous call's completion (the planner relies on it: carried credits, entry
  // signals, staging reuse; the user's stream waits for the previous call's done flag before
  // it stores `start`). When all are done, the last stream runs `finish` work (copies) then
  // stores the `done` flags.
  void run(const plan::RankPlan& plan, const CallBuffers& buffers, const WaitDesc& start,
           bool entryBarrier, const std::vector<CopyDesc>& finish, const CallDone& done,
           uint64_t callSeq);
  // The highest relay byte this rank has written into any peer's relay buffer (end offset),
  // over the communicator's life: measured, for the bound RMACC_RELAY_BYTES.
  // Any thread may ask while the progress thread runs calls.
  uint64_t relayHighWater() const { return relayHighWater_.load(std::memory_order_relaxed); }

  // Waits until every lane and the join stream ran or failed all their work (errors are the
  // calls' own to report: they are not thrown here).
  void drain();
  // Completes a call that moves nothing (rejected or mismatched counts), in call order, after
  // the `finish` copies (a dynamic call's counts written back). The flags of `done` are those
  // every call stores its number into.
  void complete(const CallDone& done, const std::vector<CopyDesc>& finish = {});

 private:
  // Consecutive ops of one stream that the backend takes in two calls: a batch of copies,
  // then one batch of stream memory ops (signals, ready flags, waits, done flags) in op order.
  struct Batch {
    Stream* stream = nullptr;
    std::vector<CopyDesc> copies;
    std::vector<MemOpDesc> memOps;
    // memOps holds a wait or a proxy put's ready flag: a later copy must not move ahead of it
    // (past a wait it would break a dependency; past a ready flag it would delay the put).
    bool ordered = false;
    bool readyLast = false;  // memOps ends with a proxy queue's ready flag (see join)
    size_t readyRun = 0;     // while readyLast: where that trailing run of ready stores starts
    bool empty() const { return copies.empty() && memOps.empty(); }
  };
  // The open batch of every stream of a call. Each stream keeps its own, so that ops of
  // another lane in between (the plan lists a node round's forwards, puts and waits side by
  // side) do not cut it: a round's data signals and the next round's waits go in one call.
  struct Batches {
    std::deque<Batch> open;  // a handful of streams; references stay valid as it grows
    Batch& of(Stream& s);
  };
  // A stream whose ops in this call are all waits with no dependency on another stream (the
  // wait lanes): it gets no backend call at all. Whoever depends on one of its waits adds the
  // waits up to it to its own memory ops instead of waiting for the stream's progress, which
  // holds exactly when that would have (the stream did nothing but wait for these monotone
  // values).
  struct WaitOnly {
    Stream* stream = nullptr;
    std::vector<WaitDesc> waits;  // in op order
  };
  // One call's bookkeeping (run and its helpers).
  struct Call {
    std::vector<Stream*> streamOf;  // by op
    std::vector<Stream*> used;      // streams that get work, in order of first use
    std::vector<WaitOnly> waitOnly;
    std::vector<int> waitOnlyOf;    // by op: index into waitOnly, or -1
    std::vector<size_t> waitsUpTo;  // by wait-only op: its stream's waits up to it
    // (stream, wait-only stream) -> how many of the latter's waits the former holds already
    std::map<std::pair<Stream*, int>, size_t> heldWaits;
    // By op: a proxy put whose batch goes to the backend right after it (proxyRunEnds).
    std::vector<char> runEnd;
  };
  Stream& streamFor(const plan::Op& op);
  void classify(const std::vector<plan::Op>& ops, Call& c);
  // Adds `op` to `batch` when it can join it (same stream, same kind); false otherwise.
  bool batchOp(Batch& batch, Stream& s, const plan::Op& op, const CallBuffers& b);
  bool batchProxyPut(Batch& batch, Stream& s, const plan::Op& op, const CallBuffers& b);
  bool postPut(Stream& s, const plan::Op& op, const CallBuffers& b, WriteDesc* ready);
  std::vector<FabricIov> gatherSources(const plan::Op& op, const CallBuffers& b) const;
  void noteRelayWrite(const plan::Op& op);
  void pushMemOp(Batch& batch, const MemOpDesc& m);
  void flush(Batch& batch);
  void flushAll(Batches& batches);
  void enqueueOp(Stream& s, const plan::Op& op, const CallBuffers& b);
  char* local(const plan::Loc& loc, const CallBuffers& b) const;
  // Where a CE put to a node-mate writes, through this rank's mapping of the peer's buffer.
  char* peerLocal(const plan::Op& op, const CallBuffers& b) const;
  Event& nextEvent();
  // Appends to `batch` the write of its stream's next progress value; returns the wait for it.
  WaitDesc markProgress(Batch& batch);
  void wait(Batch& batch, const WaitDesc& w);
  // Adds to `batch` the waits of wait-only stream `v` up to the first `upTo`.
  void holdWaits(Batch& batch, Call& c, int v, size_t upTo);
  void barrierGate(const WaitDesc& start, const std::vector<Stream*>& used);
  // Returns the stream it left open for finishCall.
  Stream& join(Batches& batches, Call& c);
  void finishCall(Batches& batches, Stream& last, const std::vector<CopyDesc>& finish,
                  const CallDone& done);

  const EngineContext ctx_;
  RmaEngine& rma_;
  bool serial_ = false;  // every op of a call on ceStreams_[0] (RMACC_LANES)
  std::vector<std::unique_ptr<Stream>> ceStreams_;  // CE puts, by destination
  std::unique_ptr<Stream> ceWait_;
  std::unique_ptr<Stream> proxyPut_;
  std::unique_ptr<Stream> proxyWait_;
  std::unique_ptr<Stream> local_;  // copies within this rank's device (beside the CE puts)
  std::unique_ptr<Stream> join_;   // entry barriers, and calls that move nothing
  std::vector<std::unique_ptr<Event>> events_;  // the entry barrier's (see nextEvent)
  // Per stream, the word its progress marks go to and the last value written (markProgress).
  struct Progress {
    volatile uint64_t* word = nullptr;
    uint64_t value = 0;
  };
  std::unique_ptr<Allocation> progressWords_;
  std::map<Stream*, Progress> progress_;
  size_t nextEvent_ = 0;
  bool anyCall_ = false;
  uint64_t lastDone_ = 0;  // the done value of the last call enqueued (complete() waits for it)
  // Streams whose last work in this call is a store of their proxy queue's ready flag: once
  // the flag holds that value, all their work is done (the join waits on it, not an event).
  std::map<Stream*, WaitDesc> readyTail_;
  std::atomic<uint64_t> relayHighWater_{0};  // written by the progress thread, read by anyone
  std::unique_ptr<LocalCopier> copier_;  // copies within this rank's device
  TraceWriter* trace_ = nullptr;  // the communicator's, when RMACC_TRACE_FILE is set
};

}  // namespace rmacc
