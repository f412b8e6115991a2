#include "coll/in_graph_calls.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "coll/enqueued_calls.h"
#include "exec/graph_recorder.h"
#include "exec/local_copy.h"
#include "exec/signal_space.h"
#include "plan/graph_plan.h"

namespace rmacc {

namespace {

constexpr uint32_t kOfferTag = 0x49474f46;    // "IGOF"
constexpr uint32_t kVerdictTag = 0x49475644;  // "IGVD"
constexpr size_t kSlabBytes = 1 << 20;        // flags of many sites (one device allocation)
constexpr size_t kCacheSites = 8;             // RMACC_GRAPH_CALLS=always: calls kept

enum Status : uint32_t { kOk = 0, kUnmappable = 1, kRejected = 2 };

// A site's `finished` word: the replay's first store writes kRunning, its last kIdle; the
// watchdog turns kRunning into kSeen (compare-and-swap) and times the replay from then, so
// that a value of kSeen later means the same replay is still running.
constexpr uint64_t kRunning = 0, kIdle = 1, kSeen = 2;

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

}  // namespace

// What rank i tells node mate j about the call (one message each way).
struct InGraphCalls::Offer {
  uint64_t sendBytes = 0;   // i -> j
  uint64_t recvBytes = 0;   // j -> i, as i expects it
  uint64_t recvOffset = 0;  // where in i's recvbuff j's block goes
  uint64_t recvBase = 0;    // offset of recvbuff in the memory `recv` exports
  uint64_t flagOffset = 0;  // i's flags for this call, in the slab `flags` exports
  uint64_t argsHash = 0;    // i's whole call (RMACC_GRAPH_CALLS=always: the site to reuse)
  uint32_t status = kOk;
  char reason[200] = {};
  HandleRecord recv;
  HandleRecord flags;
};

struct Verdict {
  uint32_t status = kOk;
  char reason[256] = {};
};

// One call site: what one replay needs, fixed at capture.
struct InGraphCalls::Site {
  std::shared_ptr<Link> link;
  volatile uint64_t* ready = nullptr;     // [L]: entry signals, from each rank this one sends to
  volatile uint64_t* done = nullptr;      // [L]: data signals, from each rank that sends here
  volatile uint64_t* finished = nullptr;  // host-visible: kRunning, kSeen or kIdle
  double seenAt = 0;                      // when the watchdog saw the running replay first
  bool graph = false;                     // held by CUDA graphs until they are destroyed
  bool retired = false;                   // its graphs were destroyed: nothing runs it again
  std::unique_ptr<GraphWork> work;        // the call's plan, as one replay records it
  std::vector<std::shared_ptr<Mapping>> maps;  // peers' receive buffers and flags
};

// What a site's graph-destruction callback reaches: the pool while it exists.
struct InGraphCalls::Link {
  std::mutex mu;
  InGraphCalls* pool = nullptr;
};

InGraphCalls::InGraphCalls(const EngineContext& ctx)
    : ctx_(ctx),
      me_(ctx.topo.localRankOf(ctx.rank)),
      L_(ctx.topo.nodeSize(ctx.topo.nodeOf(ctx.rank))),
      ring_(chooseLocalCopyMode(ctx.cfg.localCopy, ctx.backend.caps()) == LocalCopyMode::kEngines),
      siteBytes_(2 * L_ * sizeof(uint64_t)),
      sitesPerSlab_(kSlabBytes / siteBytes_),
      link_(std::make_shared<Link>()),
      recorder_(std::make_unique<GraphRecorder>(ctx.backend, ctx.topo, ctx.rank, ring_)) {
  link_->pool = this;
}

// Sites that graphs still hold keep their memory (and their peers' mappings): a replay after
// the communicator's end needs nothing else (but nothing watches it any more).
InGraphCalls::~InGraphCalls() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  {
    std::lock_guard<std::mutex> link(link_->mu);
    link_->pool = nullptr;
  }
  recorder_.reset();  // its lanes drained: RMACC_GRAPH_CALLS=always runs work on them
  std::lock_guard<std::mutex> lock(mu_);
  size_t held = 0;
  for (Site* s : sites_) held += s->graph && !s->retired;
  if (held > 0) {
    WARN("the communicator is destroyed while %zu of its in-graph calls are in CUDA graphs that "
         "still exist: their memory stays allocated for them", held);
    for (Slab& slab : slabs_) (void)slab.flags.release(), (void)slab.finished.release();
  }
  for (Site* s : sites_) {
    if (s->graph && !s->retired) continue;  // a graph may still replay it: left allocated
    delete s;
  }
}

bool InGraphCalls::takes(Stream& user, const AlltoallvArgs& args) const {
  if (ctx_.cfg.graphCalls == GraphCalls::kTriggered || args.dynamic) return false;
  if (ctx_.topo.nNodes() != 1) return false;
  // The host backend's NULL stream runs each op as it is enqueued: no lanes beside it.
  if (!user.handle() && ctx_.backend.caps().synchronousNullStream) return false;
  return user.capturing() || ctx_.cfg.graphCalls == GraphCalls::kAlways;
}

void InGraphCalls::allocateFlags() {
  Slab slab;
  slab.flags = ctx_.backend.allocate(kSlabBytes);
  slab.finished = ctx_.backend.allocateHostVisible(sitesPerSlab_ * sizeof(uint64_t));
  slabs_.push_back(std::move(slab));  // both zeroed by the backend
}

// The trade (two messages with each node mate), then the site. Bootstrap messages with one
// tag arrive in the order sent, so consecutive captures pair up as the calls do.
bool InGraphCalls::record(Stream& user, const AlltoallvArgs& a) {
  std::lock_guard<std::mutex> capture(captureMu_);
  const int n = ctx_.nRanks;
  Bootstrap& boot = ctx_.bootstrap;

  // This rank's side: the slot a new site would take, its receive buffer's export.
  Offer mine;
  const Allocation* flagSlab = nullptr;
  size_t slot = 0;
  uint64_t hash = mix(mix(0, (uintptr_t)a.sendbuff), (uintptr_t)a.recvbuff);
  ctx_.backend.runRelaxed([&] {
    std::lock_guard<std::mutex> lock(mu_);
    if (nextSlot_ == slabs_.size() * sitesPerSlab_) allocateFlags();
    slot = nextSlot_;
    flagSlab = slabs_[slot / sitesPerSlab_].flags.get();
  });
  mine.flagOffset = (slot % sitesPerSlab_) * siteBytes_;
  mine.flags = HandleRecord::from(flagSlab->exportHandle());
  if (!a.rejected.empty()) {
    mine.status = kRejected;
    snprintf(mine.reason, sizeof(mine.reason), "%s", a.rejected.c_str());
  }
  uint64_t span = 0;
  for (int p = 0; p < n && mine.status == kOk; ++p) {
    hash = mix(mix(mix(mix(hash, a.sendBytes[p]), a.sendOffset[p]), a.recvBytes[p]), a.recvOffset[p]);
    if (p != ctx_.rank && a.recvBytes[p] > 0) span = std::max(span, a.recvOffset[p] + a.recvBytes[p]);
  }
  mine.argsHash = hash;
  if (mine.status == kOk && span > 0) {
    size_t off = 0;
    if (const Allocation* alloc = ctx_.memory.find(a.recvbuff, span, &off)) {
      mine.recv = HandleRecord::from(alloc->exportHandle());
      mine.recvBase = off;
    } else if (auto user = ctx_.backend.exportUserMemory(a.recvbuff, span)) {
      mine.recv = HandleRecord::from(user->first);
      mine.recvBase = user->second;
    } else {
      mine.status = kUnmappable;
      snprintf(mine.reason, sizeof(mine.reason), "rank %d's receive buffer cannot be mapped by its peers",
               ctx_.rank);
    }
  }
  // Copy engines read the sources: device memory, or any memory on the host backend.
  if (mine.status == kOk && !ctx_.backend.isDeviceMemory(a.sendbuff)) {
    mine.status = kUnmappable;
    snprintf(mine.reason, sizeof(mine.reason), "rank %d's send buffer is not device memory", ctx_.rank);
  }

  // Round 1: offers.
  std::vector<Offer> offers(n);
  for (int p = 0; p < n; ++p) {
    if (p == ctx_.rank) continue;
    Offer o = mine;
    o.sendBytes = a.sendBytes.empty() ? 0 : a.sendBytes[p];
    o.recvBytes = a.recvBytes.empty() ? 0 : a.recvBytes[p];
    o.recvOffset = a.recvOffset.empty() ? 0 : a.recvOffset[p];
    boot.send(p, kOfferTag, &o, sizeof(o));
  }
  Verdict v;
  auto verdictOf = [&](uint32_t status, const char* reason) {
    if (status > v.status) {
      v.status = status;
      snprintf(v.reason, sizeof(v.reason), "%s", reason);
    }
  };
  verdictOf(mine.status, mine.reason);
  for (int p = 0; p < n; ++p) {
    if (p == ctx_.rank) continue;
    std::vector<char> m = boot.recv(p, kOfferTag);
    if (m.size() != sizeof(Offer))
      RMACC_THROW(rmaccRemoteError, "rank %d sent a %zu-byte in-graph offer, expected %zu", p, m.size(),
                  sizeof(Offer));
    memcpy(&offers[p], m.data(), sizeof(Offer));
    Offer& o = offers[p];
    o.reason[sizeof(o.reason) - 1] = 0;
    verdictOf(o.status, o.reason);
    if (mine.status == kOk && o.status == kOk &&
        (o.sendBytes != a.recvBytes[p] || o.recvBytes != a.sendBytes[p])) {
      // In elements of this rank's datatype (bytes where a count is not a whole number).
      const uint64_t e = a.elementBytes ? a.elementBytes : 1;
      const bool whole = o.sendBytes % e == 0 && o.recvBytes % e == 0 && a.recvBytes[p] % e == 0 &&
                         a.sendBytes[p] % e == 0;
      const uint64_t unit = whole ? e : 1;
      const std::string why = strprintf(
          "counts disagree: rank %d sends %llu %s to rank %d, which expects %llu (and %llu back, "
          "where rank %d expects %llu)", p, (unsigned long long)(o.sendBytes / unit),
          whole ? "elements" : "bytes", ctx_.rank, (unsigned long long)(a.recvBytes[p] / unit),
          (unsigned long long)(a.sendBytes[p] / unit), p, (unsigned long long)(o.recvBytes / unit));
      verdictOf(kRejected, why.c_str());
    }
  }
  // Round 2: every rank's verdict, so that all take the same way.
  for (int p = 0; p < n; ++p)
    if (p != ctx_.rank) boot.send(p, kVerdictTag, &v, sizeof(v));
  Verdict all = v;
  for (int p = 0; p < n; ++p) {
    if (p == ctx_.rank) continue;
    std::vector<char> m = boot.recv(p, kVerdictTag);
    if (m.size() != sizeof(Verdict))
      RMACC_THROW(rmaccRemoteError, "rank %d sent a %zu-byte in-graph verdict", p, m.size());
    Verdict pv;
    memcpy(&pv, m.data(), sizeof(pv));
    pv.reason[sizeof(pv.reason) - 1] = 0;
    if (pv.status > all.status) all = pv;
  }
  if (all.status == kRejected) RMACC_THROW(rmaccInvalidUsage, "captured call: %s", all.reason);
  if (all.status == kUnmappable) {
    INFO(kSubsysColl, "captured call takes the triggered path: %s", all.reason);
    return false;
  }

  // The call, as every rank sees it: the site to reuse (always) or to build.
  uint64_t key = 0;
  for (int p = 0; p < n; ++p) key = mix(key, p == ctx_.rank ? hash : offers[p].argsHash);
  Site* site = user.capturing() ? nullptr : cached(key);
  if (!site) {
    ctx_.backend.runRelaxed([&] { site = build(a, offers, slot, key); });
    std::lock_guard<std::mutex> lock(mu_);
    ++nextSlot_;  // taken: build() used it
  }
  recorder_->record(*site->work, user);  // one record at a time: captureMu_
  if (user.capturing()) {
    site->graph = true;
    user.tieToCapture(&InGraphCalls::onGraphDestroyed, site);
  }
  return true;
}

InGraphCalls::Site* InGraphCalls::cached(uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = cache_.begin(); it != cache_.end(); ++it) {
    if (it->first != key) continue;
    cache_.splice(cache_.begin(), cache_, it);
    return it->second;
  }
  return nullptr;
}

// Maps the peers' memory and flags, plans the call (plan/graph_plan.h) and has the recorder
// work out one replay of the plan.
InGraphCalls::Site* InGraphCalls::build(const AlltoallvArgs& a, const std::vector<Offer>& offers,
                                        size_t slot, uint64_t key) {
  const int n = ctx_.nRanks;
  auto site = std::make_unique<Site>();
  site->link = link_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Slab& slab = slabs_[slot / sitesPerSlab_];
    char* base = static_cast<char*>(slab.flags->ptr()) + (slot % sitesPerSlab_) * siteBytes_;
    site->ready = reinterpret_cast<volatile uint64_t*>(base);
    site->done = site->ready + L_;
    site->finished = static_cast<volatile uint64_t*>(slab.finished->ptr()) + slot % sitesPerSlab_;
    *site->finished = kIdle;
  }
  // A peer's flags: its entry flags (ready), then its data flags (done), L each.
  GraphFlags f;
  f.entry = site->ready;
  f.data = site->done;
  f.peerEntry.assign(n, nullptr);
  f.peerData.assign(n, nullptr);
  f.finished = site->finished;
  f.running = kRunning;  // the replay's first store says it runs (the watchdog: watch())
  f.idle = kIdle;
  CallBuffers b;
  b.send = static_cast<const char*>(a.sendbuff);
  b.recv = static_cast<char*>(a.recvbuff);
  b.sendOffset = a.sendOffset;
  b.recvOffset = a.recvOffset;
  b.peerRecv.assign(n, PeerTarget{});
  b.peerRecvOffset.assign(n, {});
  for (int p = 0; p < n; ++p) {
    if (p == ctx_.rank || (a.recvBytes[p] == 0 && a.sendBytes[p] == 0)) continue;
    auto flags = ctx_.memory.importPeer(offers[p].flags.handle());
    site->maps.push_back(flags);
    f.peerEntry[p] = reinterpret_cast<volatile uint64_t*>(static_cast<char*>(flags->ptr()) +
                                                          offers[p].flagOffset);
    f.peerData[p] = f.peerEntry[p] + L_;
    if (a.sendBytes[p] == 0) continue;
    const Offer& o = offers[p];
    auto recv = ctx_.memory.importPeer(o.recv.handle());
    site->maps.push_back(recv);
    if (o.recvBase > recv->size() || o.recvOffset > recv->size() - o.recvBase ||
        o.recvBytes > recv->size() - o.recvBase - o.recvOffset)
      RMACC_THROW(rmaccRemoteError, "rank %d asked for %llu bytes at offset %llu of a %zu-byte buffer",
                  p, (unsigned long long)o.recvBytes, (unsigned long long)(o.recvBase + o.recvOffset),
                  recv->size());
    b.peerRecv[p].local = static_cast<char*>(recv->ptr()) + o.recvBase;
    b.peerRecvOffset[p].assign(n, 0);
    b.peerRecvOffset[p][ctx_.rank] = o.recvOffset;
  }
  const plan::RankPlan plan = plan::makeGraphPlan(ctx_.topo, planOptionsOf(ctx_.cfg, 1), ctx_.rank,
                                                  a.sendBytes, a.recvBytes);
  site->work = recorder_->prepare(plan, b, f);
  Site* s = site.release();
  std::lock_guard<std::mutex> lock(mu_);
  sites_.push_back(s);
  if (ctx_.cfg.graphCalls == GraphCalls::kAlways) {
    cache_.emplace_front(key, s);
    if (cache_.size() > kCacheSites) cache_.pop_back();  // kept in sites_: replays may be queued
  }
  if (!watchdog_.joinable()) watchdog_ = std::thread([this] { watch(); });
  const GraphWork& w = *s->work;
  INFO(kSubsysColl, "in-graph call: %zu sends (%llu bytes), %zu senders, self %zu bytes%s", w.sends.size(),
       (unsigned long long)w.bytes, w.senders, w.self.bytes, w.ring ? " through pinned slots" : "");
  return s;
}

void InGraphCalls::onGraphDestroyed(void* p) {
  auto* site = static_cast<Site*>(p);
  std::shared_ptr<Link> keep = site->link;
  std::lock_guard<std::mutex> link(keep->mu);
  // Nothing is freed here: this runs on CUDA's thread for user objects, where CUDA calls
  // (unmapping, freeing pinned memory) are not allowed. Without the pool the site stays
  // allocated, as its slabs do; with it, the site waits for the communicator's end.
  if (!keep->pool) return;
  std::lock_guard<std::mutex> lock(keep->pool->mu_);
  site->retired = true;
}

void InGraphCalls::release(Site& s) {
  for (int p = 0; p < L_; ++p) {
    ctx_.backend.releaseWait(s.ready + p, 1);
    ctx_.backend.releaseWait(s.done + p, 1);
  }
}

void InGraphCalls::drain() { recorder_->drain(); }

void InGraphCalls::releaseAll() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Site* s : sites_)
    if (__atomic_load_n(s->finished, __ATOMIC_ACQUIRE) != kIdle) release(*s);
}

// Replays that run past the timeout fail the communicator; once it has failed, every replay
// that waits is released (its bytes are not delivered; the error says why).
void InGraphCalls::watch() {
  pthread_setname_np(pthread_self(), "rmacc-watchdog");
  ctx_.backend.enterInternalThread();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::milliseconds(20));
    const bool failed = ctx_.failures.asyncError() != rmaccSuccess;
    std::string late;
    for (Site* s : sites_) {
      uint64_t state = kRunning;
      if (__atomic_compare_exchange_n(s->finished, &state, kSeen, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        s->seenAt = monotonicSeconds();  // a replay began since the last look
        state = kSeen;
      }
      if (state == kIdle) continue;
      if (failed) {
        release(*s);
        continue;
      }
      if (monotonicSeconds() - s->seenAt > ctx_.cfg.timeoutS && late.empty())
        late = strprintf("an in-graph AlltoAllV replay (%zu sends, %llu bytes) did not complete within "
                         "%.1f s: a rank of this node has not reached the same replay",
                         s->work->sends.size(), (unsigned long long)s->work->bytes, ctx_.cfg.timeoutS);
    }
    if (!late.empty()) {
      lock.unlock();  // poisoning aborts the engines, which release through this pool
      ctx_.failures.poison(rmaccTimeout, late);
      lock.lock();
    }
  }
}

}  // namespace rmacc
