// The proxy's host-thread side: starting it, queues, posting and checking puts, its errors.
#include "net/proxy_impl.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/log.h"

namespace rmacc::proxy_internal {

ProxyImpl::ProxyImpl(Fabric& fabric, int ep, Backend& backend, int rank, int nRanks,
                     volatile uint64_t* signals, ProxyShared* shared,
                     const ProxyOptions& options)
    : fabric_(fabric), ep_(ep), backend_(backend), rank_(rank), nRanks_(nRanks),
      signals_(signals), signalLock_(shared ? &shared->signalLock : nullptr), layout_{nRanks},
      timeoutS_(options.timeoutS), eagerPoll_(options.eagerPoll), trace_(options.trace),
      ordered_(fabric.orderedWrites()), localReg_(fabric.needsLocalRegistration()),
      iovLimit_(fabric.iovLimit()), ownPacer_(options.paceBytesPerSecond),
      pacer_(shared ? shared->pacer : ownPacer_), landingSources_(nRanks),
      valuesWritten_(layout_.count()), valueInFlight_(ordered_ ? 0 : layout_.count()) {
  pieceMax_ = std::min(options.maxPieceBytes, fabric.maxMessageBytes());
  RMACC_ARG_CHECK(pieceMax_ > 0, "maximum put size must be positive");
  kickFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (kickFd_ < 0) RMACC_THROW(rmaccSystemError, "eventfd: %s", strerror(errno));
  thread_ = std::thread([this] { run(); });
}

uint64_t Queue::post(const ProxyPut& put) {
  proxy_.validate(put);
  if (put.landing.valid()) proxy_.prepareLandingHeaders();
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    seq = ++lastSeq_;
    posted_.emplace_back(seq, put);
    posted_.back().second.order = proxy_.nextPostOrder();
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
  RMACC_ARG_CHECK(put.bytes == 0 || put.src || !put.gather.empty(),
                  "put of %zu bytes from a null source", put.bytes);
  if (!put.gather.empty()) {
    size_t total = 0;
    for (const FabricIov& g : put.gather) {
      RMACC_ARG_CHECK(g.src && g.bytes > 0, "a gathering put has an empty or null source");
      total += g.bytes;
    }
    RMACC_ARG_CHECK(total == put.bytes, "a gathering put's sources hold %zu bytes, the put %zu",
                    total, put.bytes);
    RMACC_ARG_CHECK(!put.landing.valid() && put.final && put.priorPieces == 0,
                    "a gathering put goes straight to a registered region, in one part");
  }
  if (put.writesValue) {
    RMACC_ARG_CHECK(put.bytes == 0 && put.gather.empty() && !put.landing.valid() && put.final &&
                        put.priorPieces == 0,
                    "a signal written as a value carries no data and goes in one write");
    RMACC_ARG_CHECK(fabric_.canWriteValues(), "provider %s cannot inject signal values",
                    fabric_.providerName().c_str());
    RMACC_ARG_CHECK(put.dst.size >= layout_.bytes(),
                    "a signal value to rank %d needs its signal array (%llu of %zu bytes)",
                    put.peer, (unsigned long long)put.dst.size, layout_.bytes());
  }
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
  size_t pieces = piecesOf(put) + put.priorPieces;
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

ProxyQueue* ProxyImpl::createQueue(int thread) {
  RMACC_ARG_CHECK(thread == 0, "queue of proxy thread %d; this proxy has one", thread);
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

}  // namespace rmacc::proxy_internal

namespace rmacc {

std::unique_ptr<Proxy> startProxy(Fabric& fabric, Backend& backend, int rank, int nRanks,
                                  volatile uint64_t* signals, const ProxyOptions& options) {
  RMACC_ARG_CHECK(nRanks > 0 && nRanks <= kMaxRanks, "proxy for %d ranks (max %d)", nRanks,
                  kMaxRanks);
  RMACC_ARG_CHECK(rank >= 0 && rank < nRanks, "proxy for rank %d of %d", rank, nRanks);
  RMACC_ARG_CHECK(signals != nullptr, "proxy without a signal array");
  RMACC_ARG_CHECK(options.timeoutS > 0, "proxy timeout must be positive");
  const int threads = options.threads == 0 ? fabric.endpoints() : options.threads;
  RMACC_ARG_CHECK(threads >= 1 && threads <= fabric.endpoints(),
                  "%d proxy threads on a fabric of %d endpoints", threads, fabric.endpoints());
  if (threads == 1)
    return std::make_unique<proxy_internal::ProxyImpl>(fabric, 0, backend, rank, nRanks, signals,
                                                       nullptr, options);
  return std::make_unique<proxy_internal::ProxyGroup>(fabric, threads, backend, rank, nRanks,
                                                      signals, options);
}

}  // namespace rmacc
