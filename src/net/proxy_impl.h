// The proxy's parts (internal to net/; NCCL's rma_proxy shape): per queue, puts are posted by
// the host thread, released by the stream through *ready, issued in order as fi_writedata
// pieces, and reported through *done in order. Incoming completion data becomes signal
// increments. One file a job:
//   proxy.cc           the host-thread side: queues, posting and checking puts, errors, start
//   proxy_progress.cc  the proxy thread's loop: completions, incoming data, release and retire
//   proxy_issue.cc     splitting puts into pieces and issuing them
//   landing_source.cc  a landing put's writes (chunk, then header) into a peer's zone
//   landing_target.cc  this rank's zone: finished copies become credits and signals
//   proxy_teardown.cc  flush, drain and stop
//   proxy_group.cc     several proxy threads, one per fabric endpoint, as one Proxy
//
// Thread ownership: Queue::posted_ is shared (its mutex); everything else below the "proxy
// thread only" lines is touched by the proxy thread alone, except in the destructor after the
// thread was joined.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/nic_pacer.h"
#include "net/proxy.h"
#include "net/proxy_backoff.h"
#include "net/signal_tally.h"

namespace rmacc::proxy_internal {

struct InFlight;

// One write in the provider's hands. The op context comes first: in FI_CONTEXT mode the
// provider owns those bytes until the completion, and the completion gives us this address.
// `put` is null for the proxy's own writes (landing credits), which own their Piece.
struct Piece {
  alignas(16) char opContext[kOpContextBytes];
  InFlight* put = nullptr;
};

// One write of a gathering put: from byte `offset` of source `source` on, `bytes` bytes over
// consecutive sources, landing at `at` in the put.
struct GatherSpan {
  uint32_t source = 0;
  size_t offset = 0;
  size_t bytes = 0;
  size_t at = 0;
};

// A put the stream released (seq <= *ready), from its first issue to its last completion.
struct InFlight {
  uint64_t seq = 0;
  ProxyPut put;
  size_t pieceBytes = 0;
  uint32_t nPieces = 0;
  uint32_t issued = 0;
  uint32_t completed = 0;
  uint32_t errored = 0;  // pieces the provider returned with an error completion
  double startS = 0;  // when it was released or became the queue's head: the timeout's origin
  double releasedS = 0;  // when the proxy saw the stream's release (for the trace)
  void* desc = nullptr;                   // local descriptor of the source
  // The proxy's own registrations of sources (FI_MR_LOCAL, or device memory with FI_MR_HMEM).
  std::vector<std::unique_ptr<MemoryRegion>> tempMrs;
  std::vector<GatherSpan> spans;          // a gathering put's writes, one per piece
  std::unique_ptr<Piece[]> pieces;
  bool predecessorsDone = true;  // see ProxyImpl::issue
  uint64_t value = 0;  // ProxyPut::writesValue: the value written (the provider copies it)
  // A landing put (ProxyPut::landing): each chunk is two writes, the chunk into a free slot of
  // the peer's zone and then the slot's header; nPieces counts writes, slotOf[c] is chunk c's.
  std::vector<int8_t> slotOf;
  bool landing() const { return put.landing.valid(); }
  // Bytes of plain piece i (the last one is short), and of a landing put's chunk c.
  size_t pieceLength(uint32_t i) const {
    return i + 1 == nPieces ? put.bytes - (size_t)i * pieceBytes : pieceBytes;
  }
  size_t landingChunkLength(uint32_t c) const {
    return std::min(pieceBytes, put.bytes - (size_t)c * pieceBytes);
  }
  bool fullyIssued() const { return issued == nPieces; }
  bool finished() const { return completed == nPieces; }
};

// Host-visible words: ready and done of one queue each on their own 64-byte line, since the
// stream writes one and the proxy the other.
constexpr size_t kWordStride = 8;
constexpr size_t kQueuesPerSlab = 32;
// At most this many pieces in the provider's hands: bounds CQ use and memory.
constexpr size_t kMaxOutstanding = 1024;
// The 8-bit piece count of ImmData.
constexpr size_t kMaxPieces = 255;

class ProxyImpl;

// What the proxy threads of a rank share (ProxyGroup): signal increments go through one lock,
// since a peer's writes may land on any of their endpoints, and data writes through one pacer,
// since they leave through one NIC.
struct ProxyShared {
  std::mutex signalLock;
  NicPacer pacer;
};

class Queue final : public ProxyQueue {
 public:
  Queue(ProxyImpl& proxy, volatile uint64_t* ready, volatile uint64_t* done)
      : proxy_(proxy), ready_(ready), done_(done) {}
  volatile uint64_t* ready() override { return ready_; }
  volatile uint64_t* done() override { return done_; }
  uint64_t post(const ProxyPut& put) override;

  ProxyImpl& proxy_;
  volatile uint64_t* const ready_;
  volatile uint64_t* const done_;

  std::mutex mutex_;  // guards posted_ and lastSeq_ (host thread vs proxy thread)
  std::deque<std::pair<uint64_t, ProxyPut>> posted_;
  uint64_t lastSeq_ = 0;
  std::atomic<uint64_t> lastPosted_{0};  // lastSeq_, readable by the proxy without the mutex

  // Proxy thread only.
  std::deque<std::unique_ptr<InFlight>> active_;  // released puts in seq order, until done
  size_t issueCursor_ = 0;                        // first entry of active_ not fully issued
  uint64_t lastTaken_ = 0;                        // seq of the last put moved to active_
  uint64_t lastDone_ = 0;
  // The logical landing put whose parts are being issued (parts of one put are consecutive):
  // its number at the peer and the chunks issued so far; 0 between puts.
  uint64_t openPutId_ = 0;
  uint32_t openPutChunks_ = 0;
};

// The source side of landing puts to one peer: which of its slots there are free, and its
// row of the proxy's header table (one header per slot, rewritten only once the slot came
// back); null until the first landing put to the peer.
struct LandingSource {
  uint64_t freeSlots = 0;  // bit per slot
  uint64_t nextPutId = 1;
  LandingHeader* headers = nullptr;
};

class ProxyImpl final : public Proxy {
 public:
  // Starts the proxy thread (proxy.cc).
  // Drives endpoint `ep` of `fabric`. `shared`: what the proxy threads of one rank share when
  // there are several (null: this one is the only writer of `signals` and paces alone).
  ProxyImpl(Fabric& fabric, int ep, Backend& backend, int rank, int nRanks,
            volatile uint64_t* signals, ProxyShared* shared, const ProxyOptions& options);
  ~ProxyImpl() override;

  int threads() const override { return 1; }
  ProxyQueue* createQueue(int thread) override;
  size_t maxPieceBytes() const override { return pieceMax_; }
  bool needsSourceRegistration() const override { return localReg_; }
  uint64_t sourceRegistrations() const override {
    return sourceRegistrations_.load(std::memory_order_relaxed);
  }
  uint64_t proxyThreadAllocations() const override {
    return proxyThreadAllocations_.load(std::memory_order_relaxed);
  }
  std::unique_ptr<MemoryRegion> registerMemory(void* ptr, size_t bytes) override {
    return fabric_.registerMemory(ptr, bytes, fabric_.hmem() ? cudaDeviceOf(ptr) : -1);
  }
  rmaccResult_t error(std::string* text) const override;
  void abort() override;
  void flush() override;
  // The next number of the rank's posting order (NicPacer::nextOrder).
  uint64_t nextPostOrder() { return pacer_.nextOrder(); }
  void setErrorHandler(std::function<void(rmaccResult_t, const std::string&)> fn) override {
    std::lock_guard<std::mutex> lock(errorMutex_);
    errorHandler_ = std::move(fn);
  }
  void attachLanding(LandingZone* zone, std::vector<RemoteRegion> peerSignals) override;

  // Host thread, from Queue::post: throws for a put that can never be carried out.
  void validate(const ProxyPut& put) const;
  // A put was posted: its ready store is probably near, so leave any long sleep.
  void kick();
  // Host thread, from Queue::post of the first landing put: every peer's landing headers
  // (landing_source.cc).
  void prepareLandingHeaders();

 private:
  void run();
  bool round();
  bool pollCompletions();
  void onRemoteData(uint32_t data);
  void refreshQueues();
  bool serviceQueue(Queue& q, double now);
  bool takeReleased(Queue& q, double now);
  bool issue(Queue& q);
  // Issues `f`'s writes until all are issued or something holds the next one back: the
  // provider (-FI_EAGAIN), the outstanding cap or unordered delivery (kHeld), or the pacer
  // (kPaced). `any`: set when a write went.
  enum class Issued { kAll, kHeld, kPaced };
  Issued issueThrough(Queue& q, InFlight& f, bool& any);
  void issueSignalsPastPaced(Queue& q, bool& any);
  bool issuePiece(InFlight& f);
  bool issueGatherPiece(InFlight& f);
  bool issueValue(InFlight& f);
  size_t valueIndex(const ProxyPut& put) const {
    return layout_.index(put.ctx, put.sigIdx, put.peer);
  }
  // After a write of `f`'s next piece: counts it when the provider took it (false: -FI_EAGAIN).
  bool posted(InFlight& f, bool accepted);
  void registerSources(InFlight& f);
  // How a gathering put is cut into writes: at most pieceMax_ bytes and iovLimit_ sources each.
  std::vector<GatherSpan> gatherSpans(const ProxyPut& put) const;
  bool issueLandingWrite(Queue& q, InFlight& f);
  LandingSource& landingSource(int peer, uint32_t slots);
  void raiseSignal(size_t slot, uint32_t fired, int src);
  bool serviceLanding();
  bool sendCredits();
  bool priorPartsDone(const Queue& q, size_t index) const;
  bool retire(Queue& q, double now);
  void checkTimeout(const Queue& q, double now);
  void fail(rmaccResult_t code, const std::string& text);
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  bool sleepFor(double seconds, double blindS = ProxyBackoff::kIdleCapS);
  void drain();
  // The CUDA device of memory at `ptr` for an FI_HMEM_CUDA registration; -1 for host memory
  // (the only kinds of memory the backends have today).
  int cudaDeviceOf(const void* ptr) const {
    const MemoryPlace at = backend_.placeOf(ptr);
    return at.kind == MemoryPlace::Kind::kCuda ? at.device : -1;
  }
  size_t piecesOf(size_t bytes) const { return bytes == 0 ? 1 : (bytes - 1) / pieceMax_ + 1; }
  size_t piecesOf(const ProxyPut& put) const {
    return put.gather.empty() ? piecesOf(put.bytes) : gatherSpans(put).size();
  }

  Fabric& fabric_;
  const int ep_;  // the fabric endpoint this proxy thread drives
  Backend& backend_;
  const int rank_;
  const int nRanks_;
  volatile uint64_t* const signals_;
  std::mutex* const signalLock_;  // null: no other proxy thread writes signals_
  const SignalLayout layout_;
  const double timeoutS_;
  const bool eagerPoll_;
  const decltype(ProxyOptions::trace) trace_;
  const bool ordered_;
  const bool localReg_;
  const size_t iovLimit_;
  size_t pieceMax_ = 0;
  NicPacer ownPacer_;       // unless the rank's threads share one (ProxyShared)
  NicPacer& pacer_;
  bool pacedHold_ = false;  // this round the pacer held a data write back (proxy thread only)
  uint64_t heldOrder_ = NicPacer::kNone;  // the oldest of them (proxy thread only)
  std::vector<int> pacedPeers_;  // issueSignalsPastPaced's scratch (proxy thread only)

  // Queues: created by any thread, read by the proxy thread through its snapshot mine_.
  std::mutex queuesMutex_;
  std::vector<std::unique_ptr<Queue>> queues_;
  std::vector<std::unique_ptr<Allocation>> slabs_;
  size_t slabUsed_ = kQueuesPerSlab;
  std::atomic<size_t> nQueues_{0};

  // Errors: first one wins.
  mutable std::mutex errorMutex_;
  std::atomic<bool> failed_{false};
  rmaccResult_t errorCode_ = rmaccSuccess;
  std::string errorText_;
  std::function<void(rmaccResult_t, const std::string&)> errorHandler_;

  // Sleep and stop. kick() writes the eventfd; the sleeping proxy polls it beside the CQ's
  // wait object, so a post, an abort or an incoming write all end a sleep at once.
  std::atomic<bool> stop_{false};
  std::atomic<bool> aborted_{false};
  int kickFd_ = -1;

  // Proxy thread only.
  std::vector<Queue*> mine_;
  SignalTally tally_;
  std::vector<LandingSource> landingSources_;  // by peer
  std::atomic<LandingZone*> landing_{nullptr};             // set once by attachLanding
  std::vector<RemoteRegion> peerSignals_;                  // written before landing_ is set
  std::deque<std::pair<int, int>> creditsDue_;             // (src, slot) not yet written
  // ProxyPut::writesValue: the last value written into each peer's counter, by
  // layout_.index(ctx, sig, peer), and on unordered endpoints whether that write is still in
  // flight (allocated with the proxy: its thread allocates nothing).
  std::vector<uint64_t> valuesWritten_;
  std::vector<uint8_t> valueInFlight_;
  size_t outstanding_ = 0;  // pieces posted, not completed
  bool awaitingRelease_ = false;  // a posted put waits for its stream to release it
  // For the destructor: after a round, whether every put a stream released is complete.
  std::atomic<bool> quiet_{true};
  std::atomic<uint64_t> rounds_{0};
  uint64_t eagains_ = 0;
  uint64_t piecesIssued_ = 0;
  std::atomic<uint64_t> sourceRegistrations_{0};  // written on the proxy thread, read by anyone
  std::atomic<uint64_t> proxyThreadAllocations_{0};  // likewise
  // Every peer's landing headers, registered once (prepareLandingHeaders, under the mutex);
  // the proxy thread reads them only for puts posted after they were made.
  std::mutex landingHeadersMu_;
  std::unique_ptr<Allocation> landingHeaders_;
  std::unique_ptr<MemoryRegion> landingHeadersMr_;

  std::thread thread_;  // last: starts after every member above exists
};

// Several proxy threads: one ProxyImpl (thread) per fabric endpoint, sharing
// the signal array under one lock and one NIC pacer (ProxyShared). Errors are the communicator's: the first thread to fail
// stops the others (abort) and reports once through the handler.
class ProxyGroup final : public Proxy {
 public:
  // Threads 0 .. threads - 1 drive the fabric's endpoints of those indices.
  ProxyGroup(Fabric& fabric, int threads, Backend& backend, int rank, int nRanks,
             volatile uint64_t* signals, const ProxyOptions& options);
  ~ProxyGroup() override;

  int threads() const override { return (int)threads_.size(); }
  ProxyQueue* createQueue(int thread) override;
  size_t maxPieceBytes() const override { return threads_[0]->maxPieceBytes(); }
  bool needsSourceRegistration() const override { return threads_[0]->needsSourceRegistration(); }
  uint64_t sourceRegistrations() const override;
  uint64_t proxyThreadAllocations() const override;
  std::unique_ptr<MemoryRegion> registerMemory(void* ptr, size_t bytes) override {
    return threads_[0]->registerMemory(ptr, bytes);  // the domain's: valid on every endpoint
  }
  rmaccResult_t error(std::string* text) const override;
  void abort() override;
  void flush() override;
  void setErrorHandler(std::function<void(rmaccResult_t, const std::string&)> fn) override;
  void attachLanding(LandingZone* zone, std::vector<RemoteRegion> peerSignals) override {
    threads_[0]->attachLanding(zone, std::move(peerSignals));
  }

 private:
  void failed(int thread, rmaccResult_t code, const std::string& text);

  ProxyShared shared_;
  mutable std::mutex errorMutex_;
  int firstFailed_ = -1;  // the thread whose error is the group's
  bool closing_ = false;  // the destructor is taking the threads down
  std::function<void(rmaccResult_t, const std::string&)> errorHandler_;
  std::vector<std::unique_ptr<ProxyImpl>> threads_;  // last: they use the members above
};

}  // namespace rmacc::proxy_internal
