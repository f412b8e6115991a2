#include "coll/padded_calls.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "coll/collective.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"

namespace rmacc {

namespace {

// Uncaptured calls' mirrors: a slot is reused kRingSlots calls later, once it was checked; by
// then its stream has long passed it (RMACC_MAX_CALLS_IN_FLIGHT bounds the calls in flight).
constexpr size_t kRingSlots = 64;
constexpr auto kCheckEvery = std::chrono::milliseconds(20);

}  // namespace

// What a graph's destruction callback reaches: the pool while it exists.
struct PaddedLink {
  std::mutex mu;
  PaddedCalls* pool = nullptr;
};

// Host-visible words the stream fills after a call: sendcounts [n], recvcounts [n], then the
// stamp (the call's ticket; 1 for a graph's mirror, whose replays all write the same).
struct PaddedCalls::Mirror {
  std::unique_ptr<Allocation> mem;
  uint64_t* words = nullptr;
  volatile uint64_t* stamp = nullptr;
  uint64_t ticket = 0;  // what the stamp says once the call's counts are in; 0: unused
  size_t capacity = 0;
  bool checked = true;  // ring: this ticket's counts were read
  bool graph = false;
  bool retired = false;  // graph: its graphs were destroyed, nothing writes it again
  std::shared_ptr<PaddedLink> link;
};

PaddedCalls::PaddedCalls(Backend& backend, CollectiveEngine& engine, FailureSink& failures,
                         int rank, int nRanks, double timeoutS)
    : backend_(backend), engine_(engine), failures_(failures), rank_(rank), n_(nRanks),
      timeoutS_(timeoutS), link_(std::make_shared<PaddedLink>()) {
  link_->pool = this;
}

PaddedCalls::~PaddedCalls() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (checker_.joinable()) checker_.join();
  std::lock_guard<std::mutex> link(link_->mu);
  link_->pool = nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  size_t held = 0;
  for (Mirror* m : graphs_) {
    if (m->retired) {
      delete m;
      continue;
    }
    // A graph may replay it after this: its words stay allocated, and its destruction
    // callback deletes the rest (it may not free pinned memory itself).
    (void)m->mem.release();
    ++held;
  }
  if (held > 0)
    WARN("the communicator is destroyed while %zu padded AlltoAllV calls are in CUDA graphs that "
         "still exist: their count mirrors stay allocated for them", held);
}

std::vector<uint64_t> PaddedCalls::enqueue(Stream* user, const PaddedArgs& a) {
  // An earlier call's bad count fails this one, at the latest (its peers fail with it).
  check();
  std::string text;
  if (rmaccResult_t e = failures_.asyncError(&text)) throw Error(e, "communicator failed earlier: " + text);
  const uint64_t slot = a.rejected.empty() ? (uint64_t)a.capacity * a.esize : 0;
  AlltoallvArgs rows, counts;
  rows.sendbuff = a.sendbuff;
  rows.recvbuff = a.recvbuff;
  rows.callSeq = counts.callSeq = a.callSeq;
  rows.elementBytes = a.esize ? a.esize : 1;
  rows.rejected = counts.rejected = a.rejected;
  counts.sendbuff = a.sendcounts;
  counts.recvbuff = a.recvcounts;
  counts.elementBytes = sizeof(uint64_t);
  if (a.rejected.empty()) {
    rows.sendBytes.assign(n_, slot);
    rows.recvBytes.assign(n_, slot);
    counts.sendBytes.assign(n_, sizeof(uint64_t));
    counts.recvBytes.assign(n_, sizeof(uint64_t));
    for (int p = 0; p < n_; ++p) {
      rows.sendOffset.push_back(p * slot);
      rows.recvOffset.push_back(p * slot);
      counts.sendOffset.push_back(p * sizeof(uint64_t));
      counts.recvOffset.push_back(p * sizeof(uint64_t));
    }
  }
  // recvcounts starts at zero on the stream: a call that fails (a peer rejected it) writes no
  // count, and the mirror must not take what the caller's memory held for counts received. The
  // senders write it only once this stream has entered the call, after these stores (memory
  // operations, not a copy: a copy within one GPU could take the SMs).
  const bool armed = user && a.rejected.empty();
  if (armed) {
    std::vector<WriteDesc> clear(n_);
    for (int i = 0; i < n_; ++i) clear[i] = {reinterpret_cast<volatile uint64_t*>(a.recvcounts + i), 0};
    user->writeValues(clear.data(), clear.size());
  }
  std::vector<uint64_t> seqs;
  // A recorded call that a peer rejected throws rmaccInvalidUsage on every rank alike, as its
  // peers' (in_graph_calls.h): the counts' call still follows it everywhere, as rejected, so
  // that every rank makes the same engine calls. Other errors leave the communicator broken.
  try {
    seqs.push_back(engine_.alltoallv(user, std::move(rows)));
  } catch (const Error& e) {
    if (e.code() != rmaccInvalidUsage || !counts.rejected.empty()) throw;
    counts.rejected = std::string("the slots' call failed: ") + e.what();
    counts.sendBytes.clear(), counts.recvBytes.clear(), counts.sendOffset.clear(), counts.recvOffset.clear();
    try {
      engine_.alltoallv(nullptr, std::move(counts));
    } catch (const Error&) {
    }
    throw;
  }
  const bool rejected = !counts.rejected.empty();
  seqs.push_back(engine_.alltoallv(rejected ? nullptr : user, std::move(counts)));
  if (seqs[0] != 0 && seqs[1] == seqs[0] + 1) {
    std::lock_guard<std::mutex> lock(mu_);
    slotCalls_.push_back(seqs[0]);
    if (slotCalls_.size() > kRingSlots) slotCalls_.pop_front();
  }
  if (armed && !rejected) {
    Mirror* m = user->capturing() ? graphMirror(*user) : ringMirror();
    arm(*user, *m, a);
  }
  return seqs;
}

PaddedCalls::Mirror* PaddedCalls::ringMirror() {
  std::unique_lock<std::mutex> lock(mu_);
  if (ring_.empty()) {
    for (size_t i = 0; i < kRingSlots; ++i) {
      auto m = std::make_unique<Mirror>();
      m->mem = backend_.allocateHostVisible((2 * (size_t)n_ + 1) * sizeof(uint64_t));
      memset(m->mem->ptr(), 0, m->mem->size());
      m->words = static_cast<uint64_t*>(m->mem->ptr());
      m->stamp = m->words + 2 * n_;
      ring_.push_back(std::move(m));
    }
  }
  Mirror* m = ring_[nextRing_++ % kRingSlots].get();
  // Still unread: its stream passed that call long ago, so this wait is all but never taken.
  const double deadline = monotonicSeconds() + timeoutS_;
  while (!m->checked && __atomic_load_n(m->stamp, __ATOMIC_ACQUIRE) < m->ticket) {
    if (failures_.asyncError() != rmaccSuccess) break;
    if (monotonicSeconds() > deadline)
      RMACC_THROW(rmaccTimeout, "a padded AlltoAllV %zu calls back did not complete within %.1f s",
                  kRingSlots, timeoutS_);
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    lock.lock();
  }
  std::string bad = m->checked ? "" : overCapacity(*m);
  m->checked = true;
  lock.unlock();
  if (!bad.empty()) {
    failures_.poison(rmaccInvalidUsage, bad);
    RMACC_THROW(rmaccInvalidUsage, "%s", bad.c_str());
  }
  return m;
}

PaddedCalls::Mirror* PaddedCalls::graphMirror(Stream& user) {
  auto m = std::make_unique<Mirror>();
  // Allocating pinned memory is not allowed while a thread captures in global mode.
  backend_.runRelaxed(
      [&] { m->mem = backend_.allocateHostVisible((2 * (size_t)n_ + 1) * sizeof(uint64_t)); });
  memset(m->mem->ptr(), 0, m->mem->size());
  m->words = static_cast<uint64_t*>(m->mem->ptr());
  m->stamp = m->words + 2 * n_;
  m->graph = true;
  m->link = link_;
  Mirror* raw = m.get();
  std::lock_guard<std::mutex> lock(mu_);
  // Mirrors whose graphs are gone go now (not in the callback: no CUDA calls there).
  for (size_t i = 0; i < graphs_.size();) {
    if (graphs_[i]->retired) {
      delete graphs_[i];
      graphs_[i] = graphs_.back();
      graphs_.pop_back();
    } else {
      ++i;
    }
  }
  graphs_.push_back(m.release());
  user.tieToCapture(&PaddedCalls::onGraphDestroyed, raw);
  if (!checker_.joinable()) checker_ = std::thread([this] { watch(); });
  return raw;
}

// The copies read the counts where the call left them: its own sendcounts, and the words its
// senders' copies wrote into recvcounts, which the stream waited for.
void PaddedCalls::arm(Stream& user, Mirror& m, const PaddedArgs& a) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    m.capacity = a.capacity;
    m.ticket = m.graph ? 1 : ++nextTicket_;
    m.checked = m.graph;  // a graph's mirror is read at every check, never done with
  }
  const CopyDesc copies[2] = {{m.words, a.sendcounts, n_ * sizeof(uint64_t)},
                              {m.words + n_, a.recvcounts, n_ * sizeof(uint64_t)}};
  user.copy(copies, 2);
  user.writeValue(m.stamp, m.ticket);
}

std::string PaddedCalls::overCapacity(const Mirror& m) const {
  if (__atomic_load_n(m.stamp, __ATOMIC_ACQUIRE) < m.ticket) return "";
  for (int j = 0; j < n_; ++j)
    if (m.words[j] > m.capacity)
      return strprintf("rmaccAlltoAllvPadded: rank %d sent %llu elements to rank %d, more than "
                       "capacity %zu (only the capacity moved)", rank_,
                       (unsigned long long)m.words[j], j, m.capacity);
  for (int i = 0; i < n_; ++i)
    if (m.words[n_ + i] > m.capacity)
      return strprintf("rmaccAlltoAllvPadded: rank %d sent %llu elements to rank %d, more than "
                       "capacity %zu (only the capacity moved)", i,
                       (unsigned long long)m.words[n_ + i], rank_, m.capacity);
  return "";
}

void PaddedCalls::check() {
  std::string bad;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& m : ring_) {
      if (m->checked || __atomic_load_n(m->stamp, __ATOMIC_ACQUIRE) < m->ticket) continue;
      m->checked = true;
      if (bad.empty()) bad = overCapacity(*m);
    }
    for (Mirror* m : graphs_)
      if (!m->retired && bad.empty()) bad = overCapacity(*m);
  }
  // Outside the lock: poisoning aborts the engines, whose streams may be in enqueue's wait.
  if (!bad.empty() && failures_.asyncError() == rmaccSuccess) failures_.poison(rmaccInvalidUsage, bad);
}

void PaddedCalls::reported(uint64_t seq) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find(slotCalls_.begin(), slotCalls_.end(), seq);
    if (it == slotCalls_.end()) return;
    slotCalls_.erase(it);
  }
  engine_.takeCallError(seq + 1, nullptr);
}

void PaddedCalls::watch() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    wake_.wait_for(lock, kCheckEvery);
    if (stop_) break;
    lock.unlock();
    check();
    lock.lock();
  }
}

void PaddedCalls::onGraphDestroyed(void* p) {
  auto* m = static_cast<Mirror*>(p);
  std::shared_ptr<PaddedLink> keep = m->link;
  std::lock_guard<std::mutex> link(keep->mu);
  if (!keep->pool) {
    delete m;  // its words were left allocated by the pool's end (mem released)
    return;
  }
  std::lock_guard<std::mutex> lock(keep->pool->mu_);
  m->retired = true;
}

}  // namespace rmacc
