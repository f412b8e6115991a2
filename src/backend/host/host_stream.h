// Host-backend streams: CUDA stream semantics on a worker thread. Every call enqueues an op
// and returns; the worker runs the ops in order. Waits sleep on a futex (os/futex.h) in
// slices, so timeouts and abort are noticed; a failed op puts the stream in a sticky error
// state in which every later op is skipped, as a CUDA stream's sticky error does.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "backend/backend.h"

namespace rmacc::host {

class HostStream;

// What a backend shares with its streams; held by both, so either may go first.
struct BackendState {
  explicit BackendState(double t) : timeoutS(t) {}
  const double timeoutS;          // a waitValues op fails with rmaccTimeout after this long
  std::atomic<bool> aborted{false};  // set once by abort(); every wait then fails
  // Workers running an op other than a host callback (HostStream::execute): abort() returns
  // only once this is 0. Every wait checks `aborted` before each load of its word, so after
  // abort() no worker reads a wait's word again and the memory waits point at may go (the
  // communicator frees it right after an abort). Stores and copies still run after an abort:
  // their memory is theirs who enqueue them. Host callbacks are not counted: one may itself
  // abort (a failure it reports) and would then wait for itself.
  std::atomic<int> busyWorkers{0};
  std::mutex mutex;               // guards `streams`; taken before any StreamCore::mutex
  std::unordered_map<void*, HostStream*> streams;  // live streams by handle()
};

struct CopyOp { std::vector<CopyDesc> copies; };
struct WriteOp { volatile uint64_t* addr; uint64_t value; };
struct WaitOp { std::vector<WaitDesc> waits; };
struct StreamCore;
struct EventWaitOp { std::shared_ptr<StreamCore> stream; uint64_t seq; };
struct CallbackOp { std::function<void()> fn; };
struct MemOpsOp { std::vector<MemOpDesc> ops; };  // stores and waits, in order
using Op = std::variant<CopyOp, WriteOp, WaitOp, EventWaitOp, CallbackOp, MemOpsOp>;

// A stream's queue and progress. Shared with the events recorded on it, so that an event (and
// a waitEvent op in another stream) may outlive the stream.
struct StreamCore {
  std::mutex mutex;
  std::condition_variable workReady;  // the worker sleeps here when the queue is empty
  std::condition_variable changed;    // `done` advanced or abort: synchronize, waitEvent
  std::deque<Op> queue;
  uint64_t enqueued = 0;  // ops ever enqueued; op k (1-based) is the k-th
  uint64_t done = 0;      // ops executed or skipped; done <= enqueued, ops finish in order
  uint64_t failedAt = 0;  // the op that failed (1-based); 0 while the stream is healthy
  rmaccResult_t error = rmaccSuccess;
  std::string message;
  bool stopping = false;
};

// An event is a position in a stream: record() captures (stream, ops enqueued so far) at
// enqueue time, exactly as cudaEventRecord captures the work submitted before it, and
// waitEvent() copies that pair when it is enqueued, so re-recording later does not change
// what an already-enqueued wait waits for.
class HostEvent : public Event {
 public:
  void set(std::shared_ptr<StreamCore> stream, uint64_t seq);
  std::pair<std::shared_ptr<StreamCore>, uint64_t> get();

 private:
  std::mutex mutex_;  // record and waitEvent may come from different threads
  std::shared_ptr<StreamCore> stream_;
  uint64_t seq_ = 0;
};

class HostStream : public Stream {
 public:
  explicit HostStream(std::shared_ptr<BackendState> backend);
  // Lets the worker finish what was enqueued (cudaStreamDestroy semantics: pending work still
  // completes; waits stay bounded by the timeout and by abort), then joins it.
  ~HostStream() override;
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;

  void copy(const CopyDesc* ops, size_t n) override;
  void writeValue(volatile uint64_t* addr, uint64_t value) override;
  // One op each, as CUDA takes them in one cuStreamBatchMemOp.
  void writeValues(const WriteDesc* ops, size_t n) override;
  void memOps(const MemOpDesc* ops, size_t n) override;
  void waitValues(const WaitDesc* ops, size_t n) override;
  void record(Event& event) override;
  void waitEvent(Event& event) override;
  // Runs `fn` on the worker thread, in stream order (cudaLaunchHostFunc).
  void hostCallback(std::function<void()> fn) override;
  void synchronize() override;
  bool query() override;
  void* handle() override { return this; }

  // Called by the backend's abort(): wakes this stream's worker out of any sleep.
  void wakeForAbort();

 private:
  void enqueue(Op op);
  void workerLoop();
  void execute(Op& op);
  void runCopies(const CopyOp& op);
  void runWaits(const WaitOp& op);
  void runWait(const WaitDesc& w, double deadline, size_t index, size_t count);
  void runMemOps(const MemOpsOp& op);
  void runEventWait(const EventWaitOp& op);
  void throwIfFailed();  // caller holds core_->mutex

  std::shared_ptr<BackendState> backend_;
  std::shared_ptr<StreamCore> core_;
  // The counter the worker sleeps on right now, for abort's futex wake.
  std::atomic<const volatile uint64_t*> waitingOn_{nullptr};
  std::thread worker_;
};

}  // namespace rmacc::host
