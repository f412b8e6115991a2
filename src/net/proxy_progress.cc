// The proxy thread's loop: each round polls completions, turns incoming completion data into
// signals, takes the puts streams released, issues them (proxy_issue.cc) and retires the done.
#include "net/proxy_impl.h"

#include <poll.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "net/proxy_backoff.h"
#include "os/futex.h"

namespace rmacc::proxy_internal {

void ProxyImpl::run() {
  pthread_setname_np(pthread_self(), "rmacc-proxy");
  backend_.enterInternalThread();
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
    // A released put not yet complete counts even with nothing in the provider's hands: one
    // the provider refused (-FI_EAGAIN) is retried, and its timeout checked, only by a round.
    const bool released = outstanding_ > 0 || !quiet_.load(std::memory_order_relaxed);
    ProxyBackoff::Waiting waiting = awaitingRelease_              ? ProxyBackoff::kRelease
                                    : released || landingBusy ? ProxyBackoff::kWrites
                                                                : ProxyBackoff::kNothing;
    double s = backoff.idle(now, waiting);
    // A write the pacer holds may go at a known time: no later than then.
    if (pacedHold_) s = std::min(s, pacer_.waitS(now));
    // Woken by a post (its ready store is probably close) or by the network: poll eagerly.
    if (s > 0 && sleepFor(s, backoff.blindCapS(now))) backoff.active(monotonicSeconds());
  }
  pacer_.waiting((size_t)ep_, NicPacer::kNone);  // holds no other thread back once stopped
  INFO(kSubsysProxy, "proxy of rank %d stops: %llu pieces issued, %llu -FI_EAGAIN retries", rank_,
       (unsigned long long)piecesIssued_, (unsigned long long)eagains_);
}

// Sleeps up to `seconds` (ProxyBackoff::kUntilWoken: until woken); returns true when kick() or
// the network cut the sleep short. An unbounded sleep needs the CQ's fd in the set, or an
// incoming write would go unseen: without it the sleep lasts at most `blindS`.
bool ProxyImpl::sleepFor(double seconds, double blindS) {
  pollfd fds[2] = {{kickFd_, POLLIN, 0}, {fabric_.waitFd(ep_), POLLIN, 0}};
  // Block on the CQ too only when the provider says nothing is pending (fi_trywait); else
  // a timed sleep, as for providers without a wait object.
  nfds_t n = fds[1].fd >= 0 && !failed() && fabric_.readyToBlock(ep_) ? 2 : 1;
  if (n == 1) seconds = std::min(seconds, blindS);
  timespec ts{};
  const bool forever = std::isinf(seconds);
  if (!forever) ts = timespec{(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
  int rc = ppoll(fds, n, forever ? nullptr : &ts, nullptr);
  if (rc <= 0) return false;  // timed out (or EINTR: the next round looks anyway)
  uint64_t count;
  bool kicked = (fds[0].revents & POLLIN) && read(kickFd_, &count, sizeof(count)) > 0;
  return kicked || (n == 2 && fds[1].revents != 0);
}

// One pass over the CQ and every queue. Returns whether anything moved.
bool ProxyImpl::round() {
  bool busy = false;
  // A data write that the pacer held back last round and lets go now leaves before this
  // round's completions are taken in: each of those costs the thread about what a post does,
  // and the NIC would run dry behind them (docs/decisions.md#posting-order).
  if (pacedHold_ && pacer_.waitS(monotonicSeconds()) == 0 && !failed())
    for (Queue* q : mine_) busy |= issue(*q);
  // A failed proxy no longer progresses the network: nothing it could still learn would be
  // reported, and a peer dropping its connection part way through a write to us would make
  // the provider crash in the progress (Fabric::abandon says how).
  if (!failed()) {
    busy |= pollCompletions();
    busy |= serviceLanding();
  }
  refreshQueues();
  double now = monotonicSeconds();
  awaitingRelease_ = false;
  pacedHold_ = false;
  heldOrder_ = NicPacer::kNone;
  bool quiet = true;
  for (Queue* q : mine_) {
    busy |= serviceQueue(*q, now);
    awaitingRelease_ |= q->lastPosted_.load(std::memory_order_acquire) > q->lastTaken_;
    quiet &= q->active_.empty() && os::loadAcquire(q->ready_) <= q->lastTaken_;
  }
  pacer_.waiting((size_t)ep_, heldOrder_);
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
      n = fabric_.poll(ep_, c, 32);
    } catch (const Error& e) {
      // Name the peer when the failed entry was one of our pieces. The provider gave its
      // context back, so it no longer counts as outstanding (drain need not leak it).
      auto* piece = (Piece*)fabric_.lastErrorContext(ep_);
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
        if (!piece->put) {
          delete piece;  // a landing credit
          continue;
        }
        ++piece->put->completed;
        const ProxyPut& put = piece->put->put;
        if (put.writesValue && !ordered_) valueInFlight_[valueIndex(put)] = 0;
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
      if (d.src < 0 || d.src >= nRanks_ || !landingSources_[d.src].headers)
        RMACC_THROW(rmaccRemoteError, "rank %d returned landing slot %d this rank never used", d.src,
                    d.slot());
      landingSources_[d.src].freeSlots |= 1ull << d.slot();
      return;
    }
  }
}

void ProxyImpl::raiseSignal(size_t slot, uint32_t fired, int src) {
  if (fired == 0) return;
  if (trace_) trace_("net recv", src, 0, monotonicSeconds() * 1e6, 0);
  // Read-modify-write: race-free while this proxy is the slots' only writer, else under the
  // lock that the rank's proxy threads share.
  std::unique_lock<std::mutex> lock;
  if (signalLock_) lock = std::unique_lock<std::mutex>(*signalLock_);
  uint64_t value = os::loadAcquire(&signals_[slot]) + fired;
  backend_.hostWrite(&signals_[slot], value);
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
  uint64_t ready = os::loadAcquire(q.ready_);
  if (ready <= q.lastTaken_) return false;
  std::lock_guard<std::mutex> lock(q.mutex_);
  bool any = false;
  while (!q.posted_.empty() && q.posted_.front().first <= ready) {
    auto f = std::make_unique<InFlight>();
    f->seq = q.posted_.front().first;
    f->put = std::move(q.posted_.front().second);
    if (!f->put.gather.empty()) f->spans = gatherSpans(f->put);
    f->nPieces = f->spans.empty() ? (uint32_t)piecesOf(f->put.bytes) : (uint32_t)f->spans.size();
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

}  // namespace rmacc::proxy_internal
