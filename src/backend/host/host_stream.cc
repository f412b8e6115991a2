#include "backend/host/host_stream.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "os/futex.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "backend/host/host_stream_test_hook.h"

namespace rmacc::host {

namespace {

std::atomic<void (*)()> waitWakeHook{nullptr};

HostEvent& toHostEvent(Event& event) {
  auto* e = dynamic_cast<HostEvent*>(&event);
  RMACC_ARG_CHECK(e != nullptr, "event was not created by the host backend");
  return *e;
}

void checkAligned(const volatile uint64_t* addr) {
  // The futex word must be 4-byte aligned, and 64-bit atomics want 8.
  RMACC_ARG_CHECK(addr && ((uintptr_t)addr & 7) == 0, "signal address %p is not 8-byte aligned",
                  (const void*)addr);
}

[[noreturn]] void throwAborted(const char* what) {
  RMACC_THROW(rmaccRemoteError, "aborted (while %s)", what);
}

}  // namespace

void setWaitWakeHookForTest(void (*hook)()) { waitWakeHook.store(hook); }

void HostEvent::set(std::shared_ptr<StreamCore> stream, uint64_t seq) {
  std::lock_guard<std::mutex> lk(mutex_);
  stream_ = std::move(stream);
  seq_ = seq;
}

std::pair<std::shared_ptr<StreamCore>, uint64_t> HostEvent::get() {
  std::lock_guard<std::mutex> lk(mutex_);
  return {stream_, seq_};
}

HostStream::HostStream(std::shared_ptr<BackendState> backend)
    : backend_(std::move(backend)), core_(std::make_shared<StreamCore>()) {
  {
    std::lock_guard<std::mutex> lk(backend_->mutex);
    backend_->streams[handle()] = this;
  }
  try {
    worker_ = std::thread([this] { workerLoop(); });
  } catch (...) {
    std::lock_guard<std::mutex> lk(backend_->mutex);
    backend_->streams.erase(handle());
    throw;
  }
  pthread_setname_np(worker_.native_handle(), "rmacc-stream");
}

HostStream::~HostStream() {
  {
    std::lock_guard<std::mutex> lk(core_->mutex);
    core_->stopping = true;
  }
  core_->workReady.notify_one();
  worker_.join();
  // Unregistered only after the join: abort() may still wake this stream until here.
  std::lock_guard<std::mutex> lk(backend_->mutex);
  backend_->streams.erase(handle());
}

void HostStream::enqueue(Op op) {
  {
    std::lock_guard<std::mutex> lk(core_->mutex);
    core_->queue.push_back(std::move(op));
    ++core_->enqueued;
  }
  core_->workReady.notify_one();
}

void HostStream::copy(const CopyDesc* ops, size_t n) {
  if (n == 0) return;
  ++streamCallsOfThisThread();
  enqueue(CopyOp{std::vector<CopyDesc>(ops, ops + n)});
}

void HostStream::writeValue(volatile uint64_t* addr, uint64_t value) {
  checkAligned(addr);
  ++streamCallsOfThisThread();
  enqueue(WriteOp{addr, value});
}

void HostStream::writeValues(const WriteDesc* ops, size_t n) {
  if (n == 0) return;
  std::vector<MemOpDesc> m(n);
  for (size_t i = 0; i < n; ++i) m[i] = MemOpDesc{false, ops[i].addr, ops[i].value};
  memOps(m.data(), n);
}

void HostStream::memOps(const MemOpDesc* ops, size_t n) {
  if (n == 0) return;
  for (size_t i = 0; i < n; ++i) checkAligned(ops[i].addr);
  ++streamCallsOfThisThread();
  enqueue(MemOpsOp{std::vector<MemOpDesc>(ops, ops + n)});
}

void HostStream::waitValues(const WaitDesc* ops, size_t n) {
  if (n == 0) return;
  for (size_t i = 0; i < n; ++i) checkAligned(ops[i].addr);
  ++streamCallsOfThisThread();
  enqueue(WaitOp{std::vector<WaitDesc>(ops, ops + n)});
}

void HostStream::record(Event& event) {
  HostEvent& e = toHostEvent(event);
  ++streamCallsOfThisThread();
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lk(core_->mutex);
    seq = core_->enqueued;
  }
  e.set(core_, seq);
}

void HostStream::waitEvent(Event& event) {
  // Counted even when it enqueues nothing here: on CUDA it is a driver call all the same.
  ++streamCallsOfThisThread();
  auto [stream, seq] = toHostEvent(event).get();
  // Never recorded: nothing to wait for (as in CUDA). Our own earlier work: in-order already.
  if (!stream || stream == core_) return;
  enqueue(EventWaitOp{std::move(stream), seq});
}

void HostStream::hostCallback(std::function<void()> fn) {
  ++streamCallsOfThisThread();
  if (fn) enqueue(CallbackOp{std::move(fn)});
}

void HostStream::throwIfFailed() {
  if (core_->failedAt) throw Error(core_->error, core_->message);
}

void HostStream::synchronize() {
  ++streamCallsOfThisThread();
  std::unique_lock<std::mutex> lk(core_->mutex);
  // No deadline here: every op is bounded (waits by the timeout and abort, event waits by the
  // bounded ops of the stream they wait for), so the queue always drains.
  core_->changed.wait(lk, [&] { return core_->done == core_->enqueued; });
  throwIfFailed();
}

bool HostStream::query() {
  ++streamCallsOfThisThread();
  std::lock_guard<std::mutex> lk(core_->mutex);
  throwIfFailed();
  return core_->done == core_->enqueued;
}

void HostStream::wakeForAbort() {
  if (const volatile uint64_t* addr = waitingOn_.load()) os::wakeAll(addr);
  { std::lock_guard<std::mutex> lk(core_->mutex); }  // a waiter between check and wait sees it
  core_->changed.notify_all();
}

void HostStream::workerLoop() {
  for (;;) {
    Op op;
    uint64_t seq;
    bool skip;
    {
      std::unique_lock<std::mutex> lk(core_->mutex);
      core_->workReady.wait(lk, [&] { return !core_->queue.empty() || core_->stopping; });
      if (core_->queue.empty()) return;  // stopping, and everything enqueued has run
      op = std::move(core_->queue.front());
      core_->queue.pop_front();
      seq = core_->done + 1;
      skip = core_->failedAt != 0;  // sticky error: later ops are not executed
    }
    rmaccResult_t code = rmaccSuccess;
    std::string message;
    if (!skip) {
      try {
        execute(op);
      } catch (const Error& e) {
        code = e.code(), message = e.what();
      } catch (const std::exception& e) {
        code = rmaccInternalError, message = e.what();
      }
    }
    op = Op{};  // release the op's vectors and stream references outside the lock
    if (code != rmaccSuccess)
      WARN("host stream %p: op %llu failed, later ops are skipped: %s", (void*)this,
           (unsigned long long)seq, message.c_str());
    {
      std::lock_guard<std::mutex> lk(core_->mutex);
      if (code != rmaccSuccess) core_->failedAt = seq, core_->error = code, core_->message = message;
      core_->done = seq;
    }
    core_->changed.notify_all();
  }
}

void HostStream::execute(Op& op) {
  if (auto* c = std::get_if<CallbackOp>(&op)) return c->fn();
  // Counted before `aborted` is read (both sequentially consistent): either abort() sees this
  // worker busy and waits for it, or this worker sees the abort and touches nothing.
  struct Busy {
    std::atomic<int>& n;
    explicit Busy(std::atomic<int>& c) : n(c) { n.fetch_add(1); }
    ~Busy() { n.fetch_sub(1); }
  } busy(backend_->busyWorkers);
  if (auto* c = std::get_if<CopyOp>(&op)) return runCopies(*c);
  if (auto* w = std::get_if<WriteOp>(&op)) return os::storeAndWake(w->addr, w->value);
  if (auto* w = std::get_if<WaitOp>(&op)) return runWaits(*w);
  if (auto* m = std::get_if<MemOpsOp>(&op)) return runMemOps(*m);
  runEventWait(std::get<EventWaitOp>(op));
}

void HostStream::runCopies(const CopyOp& op) {
  // One thread: on the 2-core machines tests run on, helper threads would only compete with
  // the ranks; memcpy already runs at memory bandwidth for large copies.
  // A copy may land data in a window whose owner read it before a signal that reached the
  // writer through other processes (the landing zone's copies): see acquireStoredSignals.
  os::acquireStoredSignals();
  for (const CopyDesc& c : op.copies)
    if (c.bytes) memcpy(c.dst, c.src, c.bytes);
}

void HostStream::runWaits(const WaitOp& op) {
  double deadline = monotonicSeconds() + backend_->timeoutS;
  for (size_t i = 0; i < op.waits.size(); ++i) runWait(op.waits[i], deadline, i, op.waits.size());
}

void HostStream::runMemOps(const MemOpsOp& op) {
  double deadline = monotonicSeconds() + backend_->timeoutS;
  for (size_t i = 0; i < op.ops.size(); ++i) {
    const MemOpDesc& m = op.ops[i];
    if (m.wait) runWait(WaitDesc{m.addr, m.value}, deadline, i, op.ops.size());
    else os::storeAndWake(m.addr, m.value);
  }
}

void HostStream::runWait(const WaitDesc& w, double deadline, size_t index, size_t count) {
  // Published before the abort check, so abort() either is seen here or wakes our futex.
  waitingOn_.store(w.addr);
  for (;;) {
    // Before every load of the word: once the backend aborted, the memory it lives in may be
    // freed as soon as abort() returns (it waits only for workers already past this check).
    if (backend_->aborted.load()) {
      waitingOn_.store(nullptr);
      throwAborted("waiting for a signal");
    }
    const uint64_t v = os::loadAcquire(w.addr);
    if (v >= w.value) break;
    double left = deadline - monotonicSeconds();
    if (left <= 0) {
      waitingOn_.store(nullptr);
      RMACC_THROW(rmaccTimeout,
                  "host stream wait timed out after %.1f s: *%p = %llu, expected >= %llu "
                  "(op %zu of %zu)",
                  backend_->timeoutS, (const void*)w.addr, (unsigned long long)v,
                  (unsigned long long)w.value, index + 1, count);
    }
    os::sleepWhileEqual(w.addr, v, std::min(left, os::kWaitSliceS));
    if (auto hook = waitWakeHook.load()) hook();
  }
  waitingOn_.store(nullptr);
}

void HostStream::runEventWait(const EventWaitOp& op) {
  StreamCore& other = *op.stream;
  std::unique_lock<std::mutex> lk(other.mutex);
  while (other.done < op.seq) {
    if (backend_->aborted.load()) throwAborted("waiting for an event");
    // Sliced so that an abort of this backend is seen even when `other` belongs to another.
    other.changed.wait_for(lk, std::chrono::duration<double>(os::kWaitSliceS));
  }
  // The recorded work includes a failed op: this stream fails with the same code rather than
  // running on data that was never produced.
  if (other.failedAt && other.failedAt <= op.seq)
    throw Error(other.error, "the stream this one waited for failed: " + other.message);
}

}  // namespace rmacc::host
