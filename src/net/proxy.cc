// The proxy thread (NCCL's rma_proxy shape): per queue, puts are posted by the host thread,
// released by the stream through *ready, issued in order as fi_writedata pieces, and reported
// through *done in order. Incoming completion data becomes signal increments.
//
// Thread ownership: Queue::posted_ is shared (its mutex); everything else below the "proxy
// thread only" lines is touched by the proxy thread alone, except in the destructor after the
// thread was joined.
#include "net/proxy.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <unordered_map>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "net/proxy_backoff.h"
#include "net/signal_tally.h"

namespace rmacc {
namespace {

uint64_t loadAcquire(volatile uint64_t* p) {
  return __atomic_load_n(const_cast<uint64_t*>(p), __ATOMIC_ACQUIRE);
}

struct InFlight;

// One write in the provider's hands. The op context comes first: in FI_CONTEXT mode the
// provider owns those bytes until the completion, and the completion gives us this address.
// `put` is null for the proxy's own writes (landing credits), which own their Piece.
struct Piece {
  alignas(16) char opContext[kOpContextBytes];
  InFlight* put = nullptr;
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
  std::unique_ptr<MemoryRegion> tempMr;   // the proxy's own registration (FI_MR_LOCAL)
  std::unique_ptr<Piece[]> pieces;
  bool predecessorsDone = true;  // see ProxyImpl::issue
  // A landing put (ProxyPut::landing): each chunk is two writes, the chunk into a free slot of
  // the peer's zone and then the slot's header; nPieces counts writes, slotOf[c] is chunk c's.
  std::vector<int8_t> slotOf;
  bool landing() const { return put.landing.valid(); }
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

// The source side of landing puts to one peer: which of its slots there are free, and the
// headers (registered here, one per slot, rewritten only once the slot came back).
struct LandingSource {
  uint64_t freeSlots = 0;  // bit per slot
  uint64_t nextPutId = 1;
  std::unique_ptr<Allocation> headers;
  std::unique_ptr<MemoryRegion> headersMr;
};

class ProxyImpl final : public Proxy {
 public:
  ProxyImpl(Fabric& fabric, Backend& backend, int rank, int nRanks, volatile uint64_t* signals,
            const ProxyOptions& options)
      : fabric_(fabric), backend_(backend), rank_(rank), nRanks_(nRanks), signals_(signals),
        layout_{nRanks}, timeoutS_(options.timeoutS), eagerPoll_(options.eagerPoll),
        trace_(options.trace), ordered_(fabric.orderedWrites()),
        localReg_(fabric.needsLocalRegistration()) {
    pieceMax_ = std::min(options.maxPieceBytes, fabric.maxMessageBytes());
    RMACC_ARG_CHECK(pieceMax_ > 0, "maximum put size must be positive");
    kickFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (kickFd_ < 0) RMACC_THROW(rmaccSystemError, "eventfd: %s", strerror(errno));
    thread_ = std::thread([this] { run(); });
  }
  ~ProxyImpl() override;

  ProxyQueue* createQueue() override;
  size_t maxPieceBytes() const override { return pieceMax_; }
  std::unique_ptr<MemoryRegion> registerMemory(void* ptr, size_t bytes) override {
    return fabric_.registerMemory(ptr, bytes, fabric_.hmem() ? backend_.deviceOrdinal(ptr) : -1);
  }
  rmaccResult_t error(std::string* text) const override;
  void abort() override;
  void flush() override;
  void setErrorHandler(std::function<void(rmaccResult_t, const std::string&)> fn) override {
    std::lock_guard<std::mutex> lock(errorMutex_);
    errorHandler_ = std::move(fn);
  }
  void attachLanding(LandingZone* zone, std::vector<RemoteRegion> peerSignals) override {
    RMACC_ENFORCE(!landing_.load() && zone && peerSignals.size() == (size_t)nRanks_,
                  "landing zone attached twice or without every rank's signal region");
    peerSignals_ = std::move(peerSignals);
    landing_.store(zone, std::memory_order_release);
  }

  // Host thread, from Queue::post: throws for a put that can never be carried out.
  void validate(const ProxyPut& put) const;
  // A put was posted: its ready store is probably near, so leave any long sleep.
  void kick();

 private:
  void run();
  bool round();
  bool pollCompletions();
  void onRemoteData(uint32_t data);
  void refreshQueues();
  bool serviceQueue(Queue& q, double now);
  bool takeReleased(Queue& q, double now);
  bool issue(Queue& q);
  bool issuePiece(InFlight& f);
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
  bool sleepFor(double seconds);
  void drain();
  size_t piecesOf(size_t bytes) const { return bytes == 0 ? 1 : (bytes - 1) / pieceMax_ + 1; }

  Fabric& fabric_;
  Backend& backend_;
  const int rank_;
  const int nRanks_;
  volatile uint64_t* const signals_;
  const SignalLayout layout_;
  const double timeoutS_;
  const bool eagerPoll_;
  const decltype(ProxyOptions::trace) trace_;
  const bool ordered_;
  const bool localReg_;
  size_t pieceMax_ = 0;

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
  std::unordered_map<int, LandingSource> landingSources_;  // by peer
  std::atomic<LandingZone*> landing_{nullptr};             // set once by attachLanding
  std::vector<RemoteRegion> peerSignals_;                  // written before landing_ is set
  std::deque<std::pair<int, int>> creditsDue_;             // (src, slot) not yet written
  size_t outstanding_ = 0;  // pieces posted, not completed
  bool awaitingRelease_ = false;  // a posted put waits for its stream to release it
  // For the destructor: after a round, whether every put a stream released is complete.
  std::atomic<bool> quiet_{true};
  std::atomic<uint64_t> rounds_{0};
  uint64_t eagains_ = 0;
  uint64_t piecesIssued_ = 0;

  std::thread thread_;  // last: starts after every member above exists
};

// ------------------------------------------------------------------------ host-thread side

uint64_t Queue::post(const ProxyPut& put) {
  proxy_.validate(put);
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    seq = ++lastSeq_;
    posted_.emplace_back(seq, put);
    lastPosted_.store(seq, std::memory_order_release);
  }
  proxy_.kick();
  return seq;
}

void ProxyImpl::validate(const ProxyPut& put) const {
  if (aborted_.load()) RMACC_THROW(rmaccInvalidUsage, "put posted to an aborted proxy");
  std::string text;
  rmaccResult_t code = error(&text);
  if (code != rmaccSuccess) RMACC_THROW(code, "the proxy failed earlier: %s", text.c_str());
  RMACC_ARG_CHECK(put.peer >= 0 && put.peer < nRanks_, "put to rank %d of %d", put.peer, nRanks_);
  RMACC_ARG_CHECK(put.ctx >= 0 && put.ctx < kNumContexts, "put with context %d (max %d)", put.ctx,
                  kNumContexts - 1);
  RMACC_ARG_CHECK(put.sigIdx >= 0 && put.sigIdx < RMACC_MAX_SIGNALS, "put with signal %d (max %d)",
                  put.sigIdx, RMACC_MAX_SIGNALS - 1);
  RMACC_ARG_CHECK(put.bytes == 0 || put.src, "put of %zu bytes from a null source", put.bytes);
  // Even a pure signal needs a registered target: tcp;ofi_rxm silently drops a write whose
  // key does not verify (measured), so the signal would be lost instead of failing.
  RMACC_ARG_CHECK(put.dst.size > 0, "put to rank %d without a registered target region",
                  put.peer);
  const uint64_t dstBytes = put.landing.valid() ? put.landing.windowBytes : put.dst.size;
  RMACC_ARG_CHECK(put.dstOffset <= dstBytes && put.bytes <= dstBytes - put.dstOffset,
                  "put of %zu bytes at offset %llu overruns rank %d's region of %llu bytes",
                  put.bytes, (unsigned long long)put.dstOffset, put.peer,
                  (unsigned long long)dstBytes);
  if (put.landing.valid()) {
    const LandingTarget& t = put.landing;
    RMACC_ARG_CHECK(put.bytes > 0, "a landing put needs bytes (a pure signal needs no slot)");
    RMACC_ARG_CHECK(t.slots > 0 && t.slots <= (uint32_t)kMaxLandingSlots && t.slotBytes > 0 &&
                        (t.sourceRow + 1) * t.rowBytes() <= t.region.size,
                    "rank %d's landing zone (%u slots of %llu bytes, row %u) does not fit its "
                    "region of %llu bytes", put.peer, t.slots, (unsigned long long)t.slotBytes,
                    t.sourceRow, (unsigned long long)t.region.size);
    return;  // chunks carry no piece count: each signals through its own header
  }
  size_t pieces = piecesOf(put.bytes) + put.priorPieces;
  RMACC_ARG_CHECK(put.final || put.priorPieces == 0, "a non-final part carries prior pieces");
  RMACC_ARG_CHECK(pieces <= kMaxPieces,
                  "put of %zu bytes needs %zu pieces of at most %zu bytes; the completion data "
                  "counts at most %zu",
                  put.bytes, pieces, pieceMax_, kMaxPieces);
}

void ProxyImpl::kick() {
  uint64_t one = 1;
  ssize_t rc = write(kickFd_, &one, sizeof(one));
  (void)rc;  // EAGAIN: the counter is already non-zero, the proxy will wake anyway
}

ProxyQueue* ProxyImpl::createQueue() {
  std::lock_guard<std::mutex> lock(queuesMutex_);
  if (slabUsed_ == kQueuesPerSlab) {
    slabs_.push_back(backend_.allocateHostVisible(kQueuesPerSlab * 2 * kWordStride * 8));
    slabUsed_ = 0;
  }
  auto* words = (volatile uint64_t*)slabs_.back()->ptr() + slabUsed_++ * 2 * kWordStride;
  words[0] = 0;
  words[kWordStride] = 0;
  queues_.push_back(std::make_unique<Queue>(*this, words, words + kWordStride));
  nQueues_.store(queues_.size(), std::memory_order_release);
  return queues_.back().get();
}

rmaccResult_t ProxyImpl::error(std::string* text) const {
  if (!failed()) return rmaccSuccess;
  std::lock_guard<std::mutex> lock(errorMutex_);
  if (text) *text = errorText_;
  return errorCode_;
}

void ProxyImpl::abort() {
  {
    std::lock_guard<std::mutex> lock(errorMutex_);
    if (!failed_.load()) {
      errorCode_ = rmaccInvalidUsage;
      errorText_ = strprintf("rank %d: the proxy was aborted", rank_);
      failed_.store(true, std::memory_order_release);
    }
  }
  aborted_.store(true);
  stop_.store(true, std::memory_order_release);
  kick();
}

void ProxyImpl::fail(rmaccResult_t code, const std::string& text) {
  std::function<void(rmaccResult_t, const std::string&)> handler;
  {
    std::lock_guard<std::mutex> lock(errorMutex_);
    if (failed_.load()) return;
    errorCode_ = code;
    errorText_ = text;
    failed_.store(true, std::memory_order_release);
    handler = errorHandler_;
  }
  WARN("proxy of rank %d failed (%s): %s", rank_, rmaccGetErrorString(code), text.c_str());
  if (handler) handler(code, text);
}

// ------------------------------------------------------------------------ proxy thread

void ProxyImpl::run() {
  pthread_setname_np(pthread_self(), "rmacc-proxy");
  // Timer slack 1 µs (default 50 µs), or the short back-off sleeps would all be 50 µs.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  ProxyBackoff backoff(eagerPoll_);
  while (!stop_.load(std::memory_order_acquire)) {
    bool busy = false;
    try {
      busy = round();
    } catch (const Error& e) {
      fail(e.code(), strprintf("rank %d: %s", rank_, e.what()));
    } catch (const std::exception& e) {
      fail(rmaccInternalError, strprintf("rank %d: proxy: %s", rank_, e.what()));
    }
    double now = monotonicSeconds();
    if (busy) {
      backoff.active(now);
      continue;
    }
    LandingZone* zone = landing_.load(std::memory_order_acquire);
    bool landingBusy = (zone && !zone->idle()) || !creditsDue_.empty();
    ProxyBackoff::Waiting waiting = awaitingRelease_                    ? ProxyBackoff::kRelease
                                    : outstanding_ > 0 || landingBusy ? ProxyBackoff::kWrites
                                                                        : ProxyBackoff::kNothing;
    double s = backoff.idle(now, waiting);
    // Woken by a post (its ready store is probably close) or by the network: poll eagerly.
    if (s > 0 && sleepFor(s)) backoff.active(monotonicSeconds());
  }
  INFO(kSubsysProxy, "proxy of rank %d stops: %llu pieces issued, %llu -FI_EAGAIN retries", rank_,
       (unsigned long long)piecesIssued_, (unsigned long long)eagains_);
}

// Sleeps up to `seconds`; returns true when kick() or the network cut the sleep short.
bool ProxyImpl::sleepFor(double seconds) {
  pollfd fds[2] = {{kickFd_, POLLIN, 0}, {fabric_.waitFd(), POLLIN, 0}};
  // Block on the CQ too only when the provider says nothing is pending (fi_trywait); else
  // a timed sleep, as for providers without a wait object.
  nfds_t n = fds[1].fd >= 0 && fabric_.readyToBlock() ? 2 : 1;
  timespec ts{(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
  int rc = ppoll(fds, n, &ts, nullptr);
  if (rc <= 0) return false;  // timed out (or EINTR: the next round looks anyway)
  uint64_t count;
  bool kicked = (fds[0].revents & POLLIN) && read(kickFd_, &count, sizeof(count)) > 0;
  return kicked || (n == 2 && fds[1].revents != 0);
}

// One pass over the CQ and every queue. Returns whether anything moved.
bool ProxyImpl::round() {
  bool busy = pollCompletions();
  busy |= serviceLanding();
  refreshQueues();
  double now = monotonicSeconds();
  awaitingRelease_ = false;
  bool quiet = true;
  for (Queue* q : mine_) {
    busy |= serviceQueue(*q, now);
    awaitingRelease_ |= q->lastPosted_.load(std::memory_order_acquire) > q->lastTaken_;
    quiet &= q->active_.empty() && loadAcquire(q->ready_) <= q->lastTaken_;
  }
  quiet_.store(quiet, std::memory_order_release);
  rounds_.fetch_add(1, std::memory_order_release);
  return busy;
}

void ProxyImpl::refreshQueues() {
  if (nQueues_.load(std::memory_order_acquire) == mine_.size()) return;
  std::lock_guard<std::mutex> lock(queuesMutex_);
  mine_.clear();
  for (auto& q : queues_) mine_.push_back(q.get());
}

bool ProxyImpl::pollCompletions() {
  Completion c[32];
  bool any = false;
  for (;;) {
    size_t n;
    try {
      n = fabric_.poll(c, 32);
    } catch (const Error& e) {
      // Name the peer when the failed entry was one of our pieces. The provider gave its
      // context back, so it no longer counts as outstanding (drain need not leak it).
      auto* piece = (Piece*)fabric_.lastErrorContext();
      if (!piece) throw;
      --outstanding_;
      if (!piece->put) {
        delete piece;
        RMACC_THROW(e.code(), "returning a landing slot failed: %s", e.what());
      }
      ++piece->put->errored;
      const ProxyPut& p = piece->put->put;
      RMACC_THROW(e.code(), "put of %zu bytes to rank %d (ctx %d, signal %d) failed: %s", p.bytes,
                  p.peer, p.ctx, p.sigIdx, e.what());
    }
    if (n == 0) return any;
    any = true;
    for (size_t i = 0; i < n; ++i) {
      if (c[i].kind == Completion::kRemoteData) {
        onRemoteData((uint32_t)c[i].data);
      } else {
        auto* piece = (Piece*)c[i].context;
        --outstanding_;
        if (piece->put) ++piece->put->completed;
        else delete piece;  // a landing credit
      }
    }
  }
}

void ProxyImpl::onRemoteData(uint32_t data) {
  ImmData d = ImmData::decode(data);
  if (d.src >= nRanks_ || d.kind > ImmKind::kCredit ||
      (d.kind == ImmKind::kSignal && d.ctx >= kNumContexts))
    RMACC_THROW(rmaccRemoteError, "malformed completion data 0x%08x (src %d of %d ranks)", data,
                d.src, nRanks_);
  switch (d.kind) {
    case ImmKind::kSignal: {
      size_t slot = layout_.index(d.ctx, d.sigIdx, d.src);
      raiseSignal(slot, tally_.add(slot, d.chunks), d.src);
      return;
    }
    case ImmKind::kLanding: {
      // A landing slot's chunk or header; the tally keys lie past the signal slots.
      LandingZone* zone = landing_.load(std::memory_order_acquire);
      if (!zone) RMACC_THROW(rmaccRemoteError, "rank %d put into a landing zone this rank lacks", d.src);
      size_t key = layout_.count() + (size_t)d.src * kMaxLandingSlots + d.slot();
      if (tally_.add(key, d.chunks)) zone->arrived(d.src, d.slot());
      return;
    }
    case ImmKind::kCredit: {
      auto it = landingSources_.find(d.src);
      if (it == landingSources_.end())
        RMACC_THROW(rmaccRemoteError, "rank %d returned landing slot %d this rank never used", d.src,
                    d.slot());
      it->second.freeSlots |= 1ull << d.slot();
      return;
    }
  }
}

void ProxyImpl::raiseSignal(size_t slot, uint32_t fired, int src) {
  if (fired == 0) return;
  if (trace_) trace_("net recv", src, 0, monotonicSeconds() * 1e6, 0);
  // The proxy is the only writer of its signal slots, so read-modify-write is race-free.
  uint64_t value = loadAcquire(&signals_[slot]) + fired;
  backend_.hostWrite(&signals_[slot], value);
}

// Target side: copies that finished free their slots (credits) and complete puts (signals).
bool ProxyImpl::serviceLanding() {
  LandingZone* zone = landing_.load(std::memory_order_acquire);
  if (!zone) return false;
  bool busy = zone->progress(
      [this](int src, int slot) { creditsDue_.emplace_back(src, slot); },
      [this](int src, int ctx, int sigIdx) {
        raiseSignal(layout_.index(ctx, sigIdx, src), 1, src);
      });
  return sendCredits() || busy;
}

bool ProxyImpl::sendCredits() {
  bool any = false;
  while (!creditsDue_.empty() && outstanding_ < kMaxOutstanding) {
    auto [src, slot] = creditsDue_.front();
    auto piece = std::make_unique<Piece>();
    const RemoteRegion& r = peerSignals_[src];
    if (!fabric_.write(src, nullptr, 0, nullptr, r.addrOf(0), r.key,
                       ImmData::encodeSlot(rank_, slot, 1, ImmKind::kCredit), piece.get()))
      break;  // -FI_EAGAIN: the next round retries
    (void)piece.release();  // the completion deletes it
    ++outstanding_;
    creditsDue_.pop_front();
    any = true;
  }
  return any;
}

bool ProxyImpl::serviceQueue(Queue& q, double now) {
  bool busy = takeReleased(q, now);
  if (!failed()) busy |= issue(q);
  busy |= retire(q, now);
  checkTimeout(q, now);
  return busy;
}

// Moves posted puts that the stream released (seq <= *ready) into active_.
bool ProxyImpl::takeReleased(Queue& q, double now) {
  uint64_t ready = loadAcquire(q.ready_);
  if (ready <= q.lastTaken_) return false;
  std::lock_guard<std::mutex> lock(q.mutex_);
  bool any = false;
  while (!q.posted_.empty() && q.posted_.front().first <= ready) {
    auto f = std::make_unique<InFlight>();
    f->seq = q.posted_.front().first;
    f->put = q.posted_.front().second;
    f->nPieces = (uint32_t)piecesOf(f->put.bytes);
    f->pieceBytes = pieceMax_;
    if (f->landing()) {
      f->pieceBytes = std::min<size_t>(pieceMax_, f->put.landing.slotBytes);
      size_t chunks = (f->put.bytes + f->pieceBytes - 1) / f->pieceBytes;
      f->nPieces = (uint32_t)(2 * chunks);
      f->slotOf.assign(chunks, -1);
    }
    f->startS = now;
    f->releasedS = now;
    q.posted_.pop_front();
    q.lastTaken_ = f->seq;
    q.active_.push_back(std::move(f));
    any = true;
  }
  return any;
}

// Issues released puts in seq order until the provider pushes back (-FI_EAGAIN), the
// outstanding cap is reached, or all are issued. A stalled queue never blocks the others.
bool ProxyImpl::issue(Queue& q) {
  bool any = false;
  while (q.issueCursor_ < q.active_.size()) {
    InFlight& f = *q.active_[q.issueCursor_];
    // The last part of a chunked put, on an unordered endpoint: its final piece may only go once
    // every earlier part landed (their completions mean delivery), as for a split put's pieces.
    f.predecessorsDone = ordered_ || f.put.priorPieces == 0 || priorPartsDone(q, q.issueCursor_);
    if (!f.pieces) {
      f.pieces.reset(new Piece[f.nPieces]);
      f.desc = f.put.srcDesc;
      if (!f.desc && f.put.bytes > 0 && (localReg_ || fabric_.deviceNeedsRegistration())) {
        // FI_MR_LOCAL wants every source registered, FI_MR_HMEM only device ones.
        void* src = const_cast<void*>(f.put.src);
        if (localReg_ || backend_.deviceOrdinal(src) >= 0) {
          f.tempMr = registerMemory(src, f.put.bytes);
          f.desc = f.tempMr->desc();
        }
      }
    }
    while (!f.fullyIssued()) {
      if (outstanding_ >= kMaxOutstanding) return any;
      if (!(f.landing() ? issueLandingWrite(q, f) : issuePiece(f))) return any;
      any = true;
    }
    ++q.issueCursor_;
  }
  return any;
}

// Whether every put of `q` before position `index` of active_ completed (the parts of a chunked
// put are consecutive in their queue, and active_ holds every released put not yet retired).
bool ProxyImpl::priorPartsDone(const Queue& q, size_t index) const {
  for (size_t i = 0; i < index; ++i)
    if (!q.active_[i]->finished()) return false;
  return true;
}

bool ProxyImpl::issuePiece(InFlight& f) {
  uint32_t i = f.issued;
  bool last = i + 1 == f.nPieces;
  // Unordered writes: the signalling piece goes last in time, once its siblings have landed
  // (their completions mean delivery, see Fabric::orderedWrites).
  if (last && !ordered_ && (f.completed < f.nPieces - 1 || !f.predecessorsDone)) return false;
  size_t offset = (size_t)i * f.pieceBytes;
  size_t len = last ? f.put.bytes - offset : f.pieceBytes;
  const char* src = f.put.bytes ? (const char*)f.put.src + offset : nullptr;
  const bool signals = last && f.put.final;
  uint32_t data = ImmData::encode(rank_, f.put.ctx, f.put.sigIdx,
                                  signals ? (int)(f.nPieces + f.put.priorPieces) : 0);
  Piece& piece = f.pieces[i];
  piece.put = &f;
  uint64_t remote = f.put.dst.addrOf(f.put.dstOffset + offset);
  if (!fabric_.write(f.put.peer, src, len, f.desc, remote, f.put.dst.key, data, &piece)) {
    ++eagains_;  // rxm connects lazily; the next round polls (progress) and retries
    return false;
  }
  ++f.issued;
  ++outstanding_;
  ++piecesIssued_;
  return true;
}

LandingSource& ProxyImpl::landingSource(int peer, uint32_t slots) {
  LandingSource& s = landingSources_[peer];
  if (!s.headers) {
    s.freeSlots = slots == 64 ? ~0ull : (1ull << slots) - 1;
    s.headers = backend_.allocateNicVisible(kMaxLandingSlots * kLandingHeaderBytes);
    s.headersMr = fabric_.registerMemory(s.headers->ptr(), s.headers->size());
  }
  return s;
}

// The next write of a landing put: a chunk into a free slot (none free: wait for a credit),
// or the header that makes the target copy it. On an unordered network the header waits until
// its chunk has landed, as a split put's signalling piece does.
bool ProxyImpl::issueLandingWrite(Queue& q, InFlight& f) {
  const LandingTarget& t = f.put.landing;
  LandingSource& s = landingSource(f.put.peer, t.slots);
  const uint32_t w = f.issued, chunk = w / 2;
  const size_t offset = (size_t)chunk * f.pieceBytes;
  const size_t len = std::min(f.pieceBytes, f.put.bytes - offset);
  Piece& piece = f.pieces[w];
  piece.put = &f;
  if (w % 2 == 0) {
    if (!s.freeSlots) return false;
    int slot = __builtin_ctzll(s.freeSlots);
    if (!fabric_.write(f.put.peer, (const char*)f.put.src + offset, len, f.desc,
                       t.region.addrOf(t.chunkOffset(slot)), t.region.key,
                       ImmData::encodeSlot(rank_, slot, 0, ImmKind::kLanding), &piece)) {
      ++eagains_;
      return false;
    }
    s.freeSlots &= ~(1ull << slot);
    f.slotOf[chunk] = (int8_t)slot;
  } else {
    if (!ordered_ && f.completed < w) return false;
    const int slot = f.slotOf[chunk];
    const bool lastOfPut = w + 1 == f.nPieces && f.put.final;
    auto& h = static_cast<LandingHeader*>(s.headers->ptr())[slot];
    h = LandingHeader{};
    h.dstAddr = t.windowBase + f.put.dstOffset + offset;
    h.bytes = len;
    h.putId = q.openPutId_ ? q.openPutId_ : s.nextPutId;
    h.putChunks = lastOfPut ? q.openPutChunks_ + 1 : 0;
    h.ctx = f.put.ctx;
    h.sigIdx = f.put.sigIdx;
    h.check = h.checksum();
    if (!fabric_.write(f.put.peer, &h, sizeof(h), s.headersMr->desc(),
                       t.region.addrOf(t.headerOffset(slot)), t.region.key,
                       ImmData::encodeSlot(rank_, slot, 2, ImmKind::kLanding), &piece)) {
      ++eagains_;
      return false;
    }
    if (!q.openPutId_) q.openPutId_ = s.nextPutId++;
    ++q.openPutChunks_;
    if (lastOfPut) q.openPutId_ = 0, q.openPutChunks_ = 0;
  }
  ++f.issued;
  ++outstanding_;
  ++piecesIssued_;
  return true;
}

// Publishes done = seq of the last put that completed with everything before it.
bool ProxyImpl::retire(Queue& q, double now) {
  uint64_t before = q.lastDone_;
  while (!q.active_.empty() && q.active_.front()->fullyIssued() &&
         q.active_.front()->finished()) {
    const InFlight& f = *q.active_.front();
    if (trace_) trace_("net put", f.put.peer, f.put.bytes, f.releasedS * 1e6, (now - f.releasedS) * 1e6);
    q.lastDone_ = f.seq;
    q.active_.pop_front();
    --q.issueCursor_;
  }
  if (q.lastDone_ == before) return false;
  // The timeout bounds how long the head makes no progress, not how long it queued behind
  // others: a deep queue of large puts on a slow link is not an error.
  if (!q.active_.empty()) q.active_.front()->startS = now;
  backend_.hostWrite(q.done_, q.lastDone_);
  return true;
}

void ProxyImpl::checkTimeout(const Queue& q, double now) {
  if (q.active_.empty() || failed()) return;
  const InFlight& f = *q.active_.front();
  if (now - f.startS <= timeoutS_) return;
  fail(rmaccTimeout,
       strprintf("rank %d: put #%llu of %zu bytes to rank %d (ctx %d, signal %d) not complete "
                 "after %.1f s (%u/%u pieces issued, %u completed): is rank %d alive?",
                 rank_, (unsigned long long)f.seq, f.put.bytes, f.put.peer, f.put.ctx,
                 f.put.sigIdx, now - f.startS, f.issued, f.nPieces, f.completed, f.put.peer));
}

// After the thread stopped: let pieces in the provider's hands complete, so that no op context
// we free can be written later. Whatever cannot complete (dead peer, abort) is leaked on
// purpose: freeing it would hand the provider dangling contexts.
void ProxyImpl::drain() {
  double limit = (aborted_.load() || failed()) ? 0.2 : std::min(timeoutS_, 5.0);
  double deadline = monotonicSeconds() + limit;
  while (outstanding_ > 0 && monotonicSeconds() < deadline) {
    try {
      if (!pollCompletions()) sleepFor(50e-6);
    } catch (const std::exception& e) {
      INFO(kSubsysProxy, "rank %d: while draining the proxy: %s", rank_, e.what());
    }
  }
  if (outstanding_ == 0) return;
  WARN("rank %d: %zu network writes still in flight at proxy teardown; leaking their state",
       rank_, outstanding_);
  for (auto& q : queues_)
    for (auto& f : q->active_)
      if (f->issued > f->completed + f->errored) (void)f.release();
}

void ProxyImpl::flush() {
  const double deadline = monotonicSeconds() + timeoutS_;
  const uint64_t from = rounds_.load(std::memory_order_acquire);
  while (!failed() && !aborted_.load() && monotonicSeconds() < deadline) {
    if (rounds_.load(std::memory_order_acquire) > from + 1 && quiet_.load(std::memory_order_acquire))
      break;
    kick();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

ProxyImpl::~ProxyImpl() {
  // A stream may be done while its last puts are still to be sent: finish every released put
  // before stopping, or a peer would wait forever for the final signal (seen: a barrier's).
  flush();
  stop_.store(true, std::memory_order_release);
  kick();
  if (thread_.joinable()) thread_.join();
  drain();
  close(kickFd_);
}

}  // namespace

std::unique_ptr<Proxy> startProxy(Fabric& fabric, Backend& backend, int rank, int nRanks,
                                  volatile uint64_t* signals, const ProxyOptions& options) {
  RMACC_ARG_CHECK(nRanks > 0 && nRanks <= kMaxRanks, "proxy for %d ranks (max %d)", nRanks,
                  kMaxRanks);
  RMACC_ARG_CHECK(rank >= 0 && rank < nRanks, "proxy for rank %d of %d", rank, nRanks);
  RMACC_ARG_CHECK(signals != nullptr, "proxy without a signal array");
  RMACC_ARG_CHECK(options.timeoutS > 0, "proxy timeout must be positive");
  return std::make_unique<ProxyImpl>(fabric, backend, rank, nRanks, signals, options);
}

}  // namespace rmacc
