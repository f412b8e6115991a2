// The device a rank drives, seen through four small classes (Gloo's transport shape):
// Backend (factory), Allocation/Mapping (memory peers of the node can map), Stream (CUDA
// stream semantics) and Event. The executor sees only this interface; backend/host/ and
// backend/cuda/ implement it with the same file names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "rmacc.h"

namespace rmacc {

// Bytes that identify an allocation to another process of the same node.
using ExportHandle = std::vector<char>;

// Memory this rank owns and can hand to peers of its node.
class Allocation {
 public:
  virtual ~Allocation() = default;
  virtual void* ptr() const = 0;
  virtual size_t size() const = 0;
  // What a peer passes to Backend::import() to map this memory.
  virtual ExportHandle exportHandle() const = 0;
};

// A peer's allocation mapped into this process; unmapped when destroyed.
class Mapping {
 public:
  virtual ~Mapping() = default;
  virtual void* ptr() const = 0;
  virtual size_t size() const = 0;
};

class Event {
 public:
  virtual ~Event() = default;
};

struct CopyDesc {
  void* dst;
  const void* src;
  size_t bytes;
};

struct WriteDesc {
  volatile uint64_t* addr;
  uint64_t value;
};

struct WaitDesc {
  const volatile uint64_t* addr;
  uint64_t value;  // wait until *addr >= value
};

// One op of Stream::memOps: a store (as writeValue) or a wait until *addr >= value (as
// waitValues).
struct MemOpDesc {
  bool wait;
  volatile uint64_t* addr;
  uint64_t value;
};

// Calls into backend streams made by the calling thread so far: every Stream call that
// enqueues work (a batch counts once), records or waits for an event, or synchronises. The
// engine reads it around a collective call's enqueue, so that tests and the INFO log see how
// many host calls one call costs (each is a driver call, 1.5-2.5 us under MPS on an H200).
uint64_t& streamCallsOfThisThread();

// An in-order queue of device work. Every call enqueues and returns; the work runs later, in
// the order enqueued. Calls on one Stream come from one thread at a time.
class Stream {
 public:
  virtual ~Stream() = default;
  // Copies (copy engine on CUDA); the batch may run concurrently within itself.
  virtual void copy(const CopyDesc* ops, size_t n) = 0;
  // Stores `value` at `addr` once all earlier work of this stream is complete and visible.
  virtual void writeValue(volatile uint64_t* addr, uint64_t value) = 0;
  // The stores of writeValue, in order, as one call where the device takes them together.
  virtual void writeValues(const WriteDesc* ops, size_t n) {
    for (size_t i = 0; i < n; ++i) writeValue(ops[i].addr, ops[i].value);
  }
  // Holds later work until every *addr >= value.
  virtual void waitValues(const WaitDesc* ops, size_t n) = 0;
  // Stores and waits as one call, in the given order: each op starts once the one before it
  // is done (cuStreamBatchMemOp takes both kinds). A call's signals, its waits for its peers'
  // and its done flags thus cost one host call instead of one per kind. Default: runs of
  // writeValues and waitValues.
  virtual void memOps(const MemOpDesc* ops, size_t n);
  virtual void record(Event& event) = 0;
  // Holds later work until the work recorded in `event` is complete.
  virtual void waitEvent(Event& event) = 0;
  // Runs `fn` on a CPU thread once all earlier work of this stream is done; later work waits
  // for it to return (cudaLaunchHostFunc). Used for traces only, never on the data path: fn
  // must not call back into the backend. Default: runs fn at enqueue time.
  virtual void hostCallback(std::function<void()> fn) { fn(); }
  // The same for a function that runs every time the work runs: under graph capture it becomes
  // a node of the graph, run at each replay, so `arg` must live as long as the graph
  // (tieToCapture). fn must not call the backend. Captured calls (coll/captured_calls.h).
  virtual void hostFunction(void (*fn)(void*), void* arg) {
    hostCallback([fn, arg] { fn(arg); });
  }
  // Under capture: `release(arg)` runs once no graph made from this capture exists any more, on
  // a thread of the backend's (it must not call the backend). Throws rmaccInternalError on a
  // stream that is not capturing.
  virtual void tieToCapture(void (*release)(void*), void* arg) {
    (void)release;
    (void)arg;
    RMACC_THROW(rmaccInternalError, "stream %p is not being captured", handle());
  }
  // Blocks the caller until all enqueued work is done. Throws Error: rmaccTimeout when a wait
  // did not finish within the timeout, the stored error when the stream failed.
  virtual void synchronize() = 0;
  // True when all enqueued work is done (throws like synchronize on failure).
  virtual bool query() = 0;
  // The rmaccStream_t users see (a cudaStream_t on CUDA).
  virtual void* handle() = 0;
  // True while the stream is being captured into a CUDA graph (cudaStreamBeginCapture).
  virtual bool capturing() { return false; }
};

// What a backend can do, asked by the layers above instead of comparing its name.
struct BackendCaps {
  // The NULL stream runs each op before the call returns (host backend): a call on it must
  // wait for its own completion, as no later stream op will.
  bool synchronousNullStream = false;
  // A copy from device memory to device memory of this one device needs the device's compute
  // units (CUDA runs it as a kernel on the SMs: exec/local_copy.h).
  bool deviceCopyUsesCompute = false;
  // Its device memory is worth offering to a GPU-direct (FI_HMEM) provider; host memory is
  // reachable by every provider anyway.
  bool networkMayTouchDeviceMemory = false;
  // A stream wait notices a store into its word that did not go through hostWrite (a NIC's
  // write): CUDA's waits poll memory; the host backend's sleep on a futex that only hostWrite
  // wakes, so they would notice it up to os::kWaitSliceS late.
  bool waitsSeeEveryStore = false;
};

// Where memory lives, as a network provider must be told when it registers it (libfabric's
// fi_hmem_iface and device id): generic code asks only whether it is on a device; the network
// layer maps the kind to its provider's interface.
struct MemoryPlace {
  enum class Kind { kHost, kCuda };
  Kind kind = Kind::kHost;
  int device = -1;  // the device's index among those of its kind; -1 for host memory
  bool onDevice() const { return kind != Kind::kHost; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  virtual BackendCaps caps() const = 0;
  // Names the physical device this backend drives, the same in every process that drives it
  // (CUDA: the GPU's UUID, so ranks sharing one GPU under MPS get the same name), or "" when
  // there is nothing to tell apart (host backend).
  virtual std::string deviceIdentity() const { return {}; }
  // rmaccMemAlloc memory: device memory, or shared memory on the host backend.
  virtual std::unique_ptr<Allocation> allocate(size_t bytes) = 0;
  virtual std::unique_ptr<Mapping> import(const ExportHandle& handle) = 0;
  // Memory the caller allocated (not through allocate()) that peers of the node can map with
  // import(): the handle of the allocation holding [ptr, ptr + bytes) and ptr's offset in it.
  // nullopt when it cannot be shared: peers then write into staging.
  virtual std::optional<std::pair<ExportHandle, size_t>> exportUserMemory(const void* /*ptr*/,
                                                                          size_t /*bytes*/) {
    return std::nullopt;
  }
  // Memory both this process's streams and its CPU threads read and write (signals written
  // by the proxy, ready/done flags): pinned and device-mapped host memory on CUDA.
  virtual std::unique_ptr<Allocation> allocateHostVisible(size_t bytes) = 0;
  // Memory the network can read and write without help (relay, staging for remote writers):
  // host memory; on CUDA without a GPU-direct provider, pinned host memory.
  virtual std::unique_ptr<Allocation> allocateNicVisible(size_t bytes) { return allocate(bytes); }
  // Whether the network can read and write `ptr` in place: host memory, or any memory once a
  // GPU-direct provider proved it can register this device's memory (setNetworkReachesDevice).
  bool nicAccessible(const void* ptr) const { return networkReachesDevice_ || isHostMemory(ptr); }
  void setNetworkReachesDevice(bool on) { networkReachesDevice_ = on; }
  // Where the memory at `ptr` lives (host memory unless the backend says otherwise).
  virtual MemoryPlace placeOf(const void* ptr) const {
    (void)ptr;
    return {};
  }
  // A stream for rmacc's own work (copies, signals, joins). The CUDA backend gives these a
  // priority user streams do not have, so that no user stream shares their hardware queues.
  virtual std::unique_ptr<Stream> createStream() = 0;
  // A stream handed to the user (rmaccStreamCreate): the device's default priority.
  virtual std::unique_ptr<Stream> createUserStream() { return createStream(); }
  // The Stream behind a user's rmaccStream_t; nullptr when it is not one this backend knows
  // (the caller reports rmaccInvalidArgument). NULL means the backend's default stream.
  virtual Stream* userStream(rmaccStream_t stream) = 0;
  virtual std::unique_ptr<Event> createEvent() = 0;
  // True when the CPU can read and write `ptr` directly (host memory).
  virtual bool isHostMemory(const void* ptr) const = 0;
  // True for memory of this backend's device (all memory on the host backend).
  virtual bool isDeviceMemory(const void* /*ptr*/) const { return true; }
  // A CPU thread's store of a value that streams may be waiting on (the proxy's signal
  // increments, done flags): a release store, plus waking the host backend's waiters.
  virtual void hostWrite(volatile uint64_t* addr, uint64_t value) = 0;
  // Releases every wait of every stream and makes them fail (rmaccCommAbort). Returns once no
  // stream reads a wait's word any more: the memory waits point at may be freed after it. May
  // be called more than once, from any thread but a stream's own host callback.
  virtual void abort() = 0;
  // Stores `value` at `addr` (host or device memory, this rank's or a mapped peer's) from the
  // CPU, for waits no stream tracks (those built into a CUDA graph: coll/in_graph_calls.h).
  // Works after abort(); never waits for a stream. Default: hostWrite.
  virtual void releaseWait(volatile uint64_t* addr, uint64_t value) { hostWrite(addr, value); }
  // Runs `fn` with this thread free to allocate and map memory while it captures a stream in
  // cudaStreamCaptureModeGlobal (CUDA: relaxed mode for the duration). fn enqueues nothing.
  virtual void runRelaxed(const std::function<void()>& fn) { fn(); }
  // Called once by each thread rmacc starts that uses the backend (progress, proxy), before
  // its first backend call. CUDA: such a thread is not held to a user's graph capture in
  // progress (cudaStreamCaptureModeGlobal would forbid it calls it needs, as NCCL's proxy
  // finds too).
  virtual void enterInternalThread() {}

 private:
  bool networkReachesDevice_ = false;
};

// The backend RMACC_BACKEND asks for: CUDA when built with it and a device is current.
std::unique_ptr<Backend> createBackend(double timeoutS);
std::unique_ptr<Backend> createHostBackend(double timeoutS);
std::unique_ptr<Backend> createCudaBackend(double timeoutS);  // nullptr without CUDA
bool cudaBackendAvailable();

}  // namespace rmacc
