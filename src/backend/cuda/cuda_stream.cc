#include "backend/cuda/cuda_stream.h"

#include <algorithm>
#include <functional>
#include <chrono>
#include <thread>

namespace rmacc::cuda {

namespace {

// cuda.h documents cuStreamBatchMemOp's count as "less than 256" (NCCL and NVIDIA/mpi-acx#5
// quote 256 as the limit); 255 satisfies both readings.
constexpr size_t kMaxMemOpsPerCall = 255;

// synchronize() sleeps between polls, doubling from 5 us to 1 ms: short copies are seen done
// within a few microseconds, and a long wait costs the CPU nothing (ranks share cores).
constexpr auto kFirstSleep = std::chrono::microseconds(5);
constexpr auto kMaxSleep = std::chrono::microseconds(1000);

CUdeviceptr devPtr(const volatile void* p) { return (CUdeviceptr)(uintptr_t)p; }

}  // namespace

CudaEvent::CudaEvent(std::shared_ptr<BackendState> state) : state_(std::move(state)) {
  ContextGuard guard(*state_);
  // No timing: a timing event costs a timestamp write and serialises more than needed.
  RMACC_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
}

CudaEvent::~CudaEvent() {
  QuietContextGuard guard(*state_);
  if (event_) RMACC_CUDA_WARN(cudaEventDestroy(event_));
}

CudaStream::CudaStream(std::shared_ptr<BackendState> state, cudaStream_t stream, bool owned)
    : state_(std::move(state)), stream_(stream), owned_(owned) {
  std::lock_guard<std::mutex> lk(state_->mutex);
  state_->streams.insert(this);
}

CudaStream::~CudaStream() {
  {
    std::lock_guard<std::mutex> lk(state_->mutex);
    state_->streams.erase(this);
  }
  if (owned_) {
    // Returns at once; the driver frees the stream when its enqueued work is done.
    QuietContextGuard guard(*state_);
    RMACC_CUDA_WARN(cudaStreamDestroy(stream_));
  }
}

void CudaStream::checkNotAborted() const {
  if (state_->aborted.load()) RMACC_THROW(rmaccRemoteError, "aborted");
}

// cudaMemcpyBatchAsync refuses the legacy NULL stream, and under graph capture NCCL keeps to
// plain copies as well (batch copies there are not supported everywhere).
bool CudaStream::batchAllowed() {
  if (batchBroken_ || stream_ == nullptr || stream_ == cudaStreamLegacy) return false;
  return !capturing();
}

bool CudaStream::capturing() {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  RMACC_CUDA_CHECK(cudaStreamIsCapturing(stream_, &status));
  return status != cudaStreamCaptureStatusNone;
}

void CudaStream::copyLoop(const CopyDesc* ops, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (ops[i].bytes == 0) continue;
    ++streamCallsOfThisThread();
    // cudaMemcpyDefault: UVA tells the direction (D2D, peer over NVLink, H2D, D2H).
    RMACC_CUDA_CHECK(cudaMemcpyAsync(ops[i].dst, ops[i].src, ops[i].bytes, cudaMemcpyDefault,
                                     stream_));
  }
}

void CudaStream::copy(const CopyDesc* ops, size_t n) {
  checkNotAborted();
  ContextGuard guard(*state_);
  // Zero-byte copies are no-ops; the batch API may reject them, so they never reach it.
  dsts_.clear();
  srcs_.clear();
  sizes_.clear();
  for (size_t i = 0; i < n; ++i) {
    if (ops[i].bytes == 0) continue;
    dsts_.push_back(ops[i].dst);
    srcs_.push_back(ops[i].src);
    sizes_.push_back(ops[i].bytes);
  }
  size_t m = dsts_.size();
  if (m == 0) return;
  if (m == 1 || !batchAllowed()) {
    copyLoop(ops, n);
    return;
  }
  // One attribute set for the whole batch (NCCL's CE collectives use the same): sources are
  // read in stream order, i.e. after earlier work of this stream (a forward reads relay data
  // that a wait just released), and the copies should overlap compute rather than preempt it.
  // The copies of one batch may run concurrently with each other: the plan never puts
  // dependent copies in one batch.
  cudaMemcpyAttributes attr = {};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
  size_t attrIdx = 0;
  ++streamCallsOfThisThread();
  cudaError_t err = cudaMemcpyBatchAsync(dsts_.data(), srcs_.data(), sizes_.data(), m, &attr,
                                         &attrIdx, 1, stream_);
  if (err == cudaSuccess) return;
  (void)cudaGetLastError();
  // WARN, once per stream: the fallback is correct but slower, and should be seen.
  WARN("cudaMemcpyBatchAsync of %zu copies failed (%s); this stream now uses one "
       "cudaMemcpyAsync per copy",
       m, cudaGetErrorString(err));
  // A failed batch call enqueues nothing; and were some copies already done, doing them again
  // writes the same bytes (copies of one batch never overlap each other's destinations).
  copyLoop(ops, n);
  // The loop worked where the batch did not: the batch API itself is the problem here (old
  // driver, unsupported memory kind), so do not pay for a failing call every time.
  batchBroken_ = true;
}

// Memory ordering. A stream memory operation starts only when all earlier work of its stream
// has completed, and CU_STREAM_WRITE_VALUE_DEFAULT puts a memory fence before the store
// (like __threadfence_system(), scoped to the stream; the _NO_MEMORY_BARRIER flag is what
// would drop it, and v2 memops do not even offer it). So the bytes that earlier copies of this
// stream wrote, into local memory or into a peer GPU's memory over NVLink, are visible system
// wide before `value` is: a peer stream whose wait sees `value` starts its later work (a copy
// out of the received buffer) after the data is there, and a CPU thread that reads `value`
// with acquire semantics reads the data after it. Work on OTHER streams of this rank is not
// covered; the executor joins such work with an event first.
// `addr` is device memory (own or a peer's mapping) or host-visible memory of this backend;
// under UVA its address is the device address (checked when the host memory is allocated).
void CudaStream::writeValue(volatile uint64_t* addr, uint64_t value) {
  checkNotAborted();
  ContextGuard guard(*state_);
  ++streamCallsOfThisThread();
  RMACC_CU_CHECK(driver().cuStreamWriteValue64((CUstream)stream_, devPtr(addr), value,
                                      CU_STREAM_WRITE_VALUE_DEFAULT));
}

// Enqueues n memory operations, at most kMaxMemOpsPerCall a driver call; fill(i, op) sets op i.
// `last` (may be empty) adjusts the last op of each driver call.
void CudaStream::enqueueMemOps(size_t n, const std::function<void(size_t, CUstreamBatchMemOpParams&)>& fill,
                               const std::function<void(CUstreamBatchMemOpParams&)>& last) {
  ContextGuard guard(*state_);
  for (size_t base = 0; base < n; base += kMaxMemOpsPerCall) {
    size_t count = std::min(kMaxMemOpsPerCall, n - base);
    memOps_.assign(count, CUstreamBatchMemOpParams{});
    for (size_t i = 0; i < count; ++i) fill(base + i, memOps_[i]);
    if (last) last(memOps_.back());
    ++streamCallsOfThisThread();
    RMACC_CU_CHECK(driver().cuStreamBatchMemOp((CUstream)stream_, (unsigned)count, memOps_.data(), 0));
  }
}

// Memory operations of one batch run in order, each with the fence writeValue describes.
void CudaStream::writeValues(const WriteDesc* ops, size_t n) {
  checkNotAborted();
  enqueueMemOps(n, [&](size_t i, CUstreamBatchMemOpParams& p) {
    p.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    p.writeValue.address = devPtr(ops[i].addr);
    p.writeValue.value64 = ops[i].value;
    p.writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
  }, {});
}

void CudaStream::waitValues(const WaitDesc* ops, size_t n) {
  if (n == 0) return;
  {
    // Recorded before enqueueing, under the mutex abort() takes to set `aborted`: either
    // abort() sees these waits and releases them, or we see `aborted` and enqueue nothing.
    std::lock_guard<std::mutex> lk(state_->mutex);
    checkNotAborted();
    for (size_t i = 0; i < n; ++i) {
      auto [it, fresh] = pending_.emplace(ops[i].addr, ops[i].value);
      if (!fresh && cyclicLess(it->second, ops[i].value)) it->second = ops[i].value;
    }
  }
  enqueueMemOps(n, [&](size_t i, CUstreamBatchMemOpParams& p) {
    p.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
    p.waitValue.address = devPtr(ops[i].addr);
    p.waitValue.value64 = ops[i].value;
    p.waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;  // compares cyclically, see cyclicLess()
  }, [&](CUstreamBatchMemOpParams& p) {
    // Where the platform needs it, flush remote (NIC, GPUDirect RDMA) writes after the last
    // wait, so that data a proxy saw land before it bumped the counter is visible to the
    // copies that follow. Once per call is enough: the ops of one call run in order.
    if (state_->canFlushRemoteWrites) p.waitValue.flags |= CU_STREAM_WAIT_VALUE_FLUSH;
  });
}

// Stores and waits of one call in order; waits are recorded for abort() as in waitValues, and
// the last wait of each driver call flushes remote writes as there.
void CudaStream::memOps(const MemOpDesc* ops, size_t n) {
  if (n == 0) return;
  // A captured wait is not pending: it runs at replays (a captured call's own flag, which
  // its engine releases on abort: coll/captured_calls.h). Only user streams are captured.
  const bool captured = !owned_ && capturing();
  {
    std::lock_guard<std::mutex> lk(state_->mutex);
    checkNotAborted();
    for (size_t i = 0; i < n && !captured; ++i) {
      if (!ops[i].wait) continue;
      auto [it, fresh] = pending_.emplace(ops[i].addr, ops[i].value);
      if (!fresh && cyclicLess(it->second, ops[i].value)) it->second = ops[i].value;
    }
  }
  ContextGuard guard(*state_);
  for (size_t base = 0; base < n; base += kMaxMemOpsPerCall) {
    size_t count = std::min(kMaxMemOpsPerCall, n - base);
    memOps_.assign(count, CUstreamBatchMemOpParams{});
    CUstreamBatchMemOpParams* lastWait = nullptr;
    for (size_t i = 0; i < count; ++i) {
      const MemOpDesc& m = ops[base + i];
      CUstreamBatchMemOpParams& p = memOps_[i];
      if (m.wait) {
        p.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
        p.waitValue.address = devPtr(m.addr);
        p.waitValue.value64 = m.value;
        p.waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
        lastWait = &p;
      } else {
        p.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
        p.writeValue.address = devPtr(m.addr);
        p.writeValue.value64 = m.value;
        p.writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
      }
    }
    if (lastWait && state_->canFlushRemoteWrites) lastWait->waitValue.flags |= CU_STREAM_WAIT_VALUE_FLUSH;
    ++streamCallsOfThisThread();
    RMACC_CU_CHECK(driver().cuStreamBatchMemOp((CUstream)stream_, (unsigned)count, memOps_.data(), 0));
  }
}

void CudaStream::record(Event& event) {
  checkNotAborted();
  ContextGuard guard(*state_);
  ++streamCallsOfThisThread();
  RMACC_CUDA_CHECK(cudaEventRecord(static_cast<CudaEvent&>(event).event(), stream_));
}

void CudaStream::waitEvent(Event& event) {
  checkNotAborted();
  ContextGuard guard(*state_);
  ++streamCallsOfThisThread();
  RMACC_CUDA_CHECK(cudaStreamWaitEvent(stream_, static_cast<CudaEvent&>(event).event(), 0));
}

bool CudaStream::pollOnce() {
  cudaError_t err;
  {
    ContextGuard guard(*state_);
    err = cudaStreamQuery(stream_);
  }
  if (err == cudaErrorNotReady) return false;
  if (err != cudaSuccess) throwCudaError(err, "cudaStreamQuery", __FILE__, __LINE__);
  // Idle: every wait enqueued so far has been satisfied; abort() need not release them.
  std::lock_guard<std::mutex> lk(state_->mutex);
  pending_.clear();
  return true;
}

bool CudaStream::query() {
  ++streamCallsOfThisThread();
  bool done = pollOnce();
  checkNotAborted();
  return done;
}

// After abort() the stream still drains (abort released its waits) before the error is
// thrown, so that the caller may free the memory the stream was using.
// Traces only (the callback blocks the stream, and CUDA runs them on one driver thread).
void CudaStream::hostCallback(std::function<void()> fn) {
  auto* heap = new std::function<void()>(std::move(fn));
  ContextGuard guard(*state_);
  ++streamCallsOfThisThread();
  cudaError_t err = cudaLaunchHostFunc(
      stream_,
      [](void* p) {
        auto* f = static_cast<std::function<void()>*>(p);
        (*f)();
        delete f;
      },
      heap);
  if (err != cudaSuccess) {
    delete heap;
    throwCudaError(err, "cudaLaunchHostFunc", __FILE__, __LINE__);
  }
}

// Nothing owned here: under capture the host node runs fn(arg) at every replay.
void CudaStream::hostFunction(void (*fn)(void*), void* arg) {
  checkNotAborted();
  ContextGuard guard(*state_);
  ++streamCallsOfThisThread();
  RMACC_CUDA_CHECK(cudaLaunchHostFunc(stream_, fn, arg));
}

// A user object of the graph being captured: CUDA destroys it, and calls `release`, once the
// graph and every executable graph instantiated from it are gone (NoDestructorSync: the
// release only hands memory back to a pool, it need not wait for work to finish, which has
// finished before a graph can be destroyed anyway).
void CudaStream::tieToCapture(void (*release)(void*), void* arg) {
  ContextGuard guard(*state_);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  RMACC_CUDA_CHECK(cudaStreamGetCaptureInfo(stream_, &status, nullptr, &graph));
  RMACC_ENFORCE(status == cudaStreamCaptureStatusActive && graph != nullptr,
                "stream %p is not being captured", (void*)stream_);
  cudaUserObject_t object = nullptr;
  RMACC_CUDA_CHECK(cudaUserObjectCreate(&object, arg, release, 1, cudaUserObjectNoDestructorSync));
  RMACC_CUDA_CHECK(cudaGraphRetainUserObject(graph, object, 1, cudaGraphUserObjectMove));
}

void CudaStream::synchronize() {
  ++streamCallsOfThisThread();
  auto start = std::chrono::steady_clock::now();
  auto sleep = kFirstSleep;
  while (!pollOnce()) {
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > state_->timeoutS) {
      checkNotAborted();
      RMACC_THROW(rmaccTimeout,
                  "cuda stream %p: work not done after %.1f s (a wait never satisfied: a peer "
                  "failed or never signalled?)",
                  (void*)stream_, waited);
    }
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, kMaxSleep);
  }
  checkNotAborted();
}

}  // namespace rmacc::cuda
