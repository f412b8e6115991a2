#include "coll/captured_calls.h"

#include <cstring>

#include "core/error.h"
#include "core/log.h"

namespace rmacc {

namespace {

constexpr size_t kFlagBytes = 128;   // the done flag's own cache line
constexpr size_t kSitesPerSlab = 8;  // pinned memory is allocated this many sites at a time

}  // namespace

// What a site's host function reaches: the pool while it exists. Held by the pool and by every
// site, so that a graph replayed after the communicator's end finds it empty instead of freed.
struct CapturedCalls::Link {
  std::mutex mu;
  CapturedCalls* pool = nullptr;
  void* engine = nullptr;
  Trigger trigger = nullptr;
};

CapturedCalls::CapturedCalls(Backend& backend, int nRanks, void* engine, Trigger trigger)
    : backend_(backend), n_(nRanks), link_(std::make_shared<Link>()) {
  link_->pool = this;
  link_->engine = engine;
  link_->trigger = trigger;
}

// Sites that graphs still hold stay allocated with their memory: a replay may still run their
// host function (which then finds the link empty) until the user destroys the graph.
CapturedCalls::~CapturedCalls() {
  {
    std::lock_guard<std::mutex> link(link_->mu);
    link_->pool = nullptr;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (graphSites_ > 0) {
    WARN("the communicator is destroyed while %zu of its captured calls are in CUDA graphs that "
         "still exist: replaying them now moves nothing and only releases the stream", graphSites_);
    for (auto& slab : slabs_) (void)slab.release();
    for (CapturedCall* s : sites_)
      if (!s->graph) delete s;
    return;
  }
  for (CapturedCall* s : sites_) delete s;
}

CapturedCall& CapturedCalls::acquire() {
  if (free_.empty()) {
    const size_t siteBytes = kFlagBytes + ((4 * (size_t)n_ * sizeof(uint64_t) + kFlagBytes - 1) /
                                           kFlagBytes) * kFlagBytes;
    slabs_.push_back(backend_.allocateHostVisible(kSitesPerSlab * siteBytes));
    char* base = static_cast<char*>(slabs_.back()->ptr());
    memset(base, 0, kSitesPerSlab * siteBytes);
    for (size_t i = 0; i < kSitesPerSlab; ++i) {
      auto* s = new CapturedCall;
      s->link = link_;
      s->done = reinterpret_cast<volatile uint64_t*>(base + i * siteBytes);
      s->counts = reinterpret_cast<uint64_t*>(base + i * siteBytes + kFlagBytes);
      sites_.push_back(s);
      free_.push_back(s);
    }
  }
  CapturedCall* s = free_.back();
  free_.pop_back();
  return *s;
}

std::pair<CapturedCall*, uint64_t> CapturedCalls::record(Stream& user, AlltoallvArgs args) {
  const bool graph = user.capturing();
  CapturedCall* site;
  uint64_t run = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (graph) {
      site = &acquire();
      site->graph = true;
      site->args = std::move(args);
      ++graphSites_;
    } else {
      auto [it, added] = perStream_.emplace(&user, nullptr);
      if (added) it->second = &acquire();
      site = it->second;
      site->queued.push_back(std::move(args));
      run = ++site->runsRecorded;
    }
  }
  const AlltoallvArgs& a = graph ? site->args : site->queued.back();
  const MemOpDesc reset{false, site->done, 0};
  user.memOps(&reset, 1);
  if (a.dynamic) {
    static_assert(sizeof(size_t) == sizeof(uint64_t), "counts travel as 64-bit words");
    const CopyDesc copies[2] = {{site->counts, a.dynamic->sendcounts, n_ * sizeof(uint64_t)},
                                {site->counts + n_, a.dynamic->sdispls, n_ * sizeof(uint64_t)}};
    user.copy(copies, 2);
  }
  user.hostFunction(&CapturedCalls::onHostFunction, site);
  const MemOpDesc wait{true, site->done, 1};
  user.memOps(&wait, 1);
  if (graph) user.tieToCapture(&CapturedCalls::onGraphDestroyed, site);
  return {site, run};
}

// The stream reached the call. The arguments are taken here, in stream order, so that a
// stream site's queued calls run in the order they were made.
void CapturedCalls::onHostFunction(void* p) {
  auto& site = *static_cast<CapturedCall*>(p);
  std::lock_guard<std::mutex> link(site.link->mu);
  CapturedCalls* pool = site.link->pool;
  if (!pool) {
    WARN("a captured rmacc call was replayed after its communicator was destroyed: nothing moved");
    // No backend left to wake anyone: only CUDA graphs outlive a communicator, and their
    // waits read the flag from the device.
    __atomic_store_n(site.done, (uint64_t)1, __ATOMIC_RELEASE);
    return;
  }
  AlltoallvArgs args;
  {
    std::lock_guard<std::mutex> lock(pool->mu_);
    if (site.graph) {
      args = site.args;
    } else {
      args = std::move(site.queued.front());
      site.queued.pop_front();
    }
  }
  site.link->trigger(site.link->engine, site, std::move(args));
}

void CapturedCalls::onGraphDestroyed(void* p) {
  auto* site = static_cast<CapturedCall*>(p);
  std::shared_ptr<Link> keep = site->link;
  std::lock_guard<std::mutex> link(keep->mu);
  CapturedCalls* pool = keep->pool;
  if (!pool) {
    delete site;  // its memory stays with the slabs the pool left behind
    return;
  }
  std::lock_guard<std::mutex> lock(pool->mu_);
  site->graph = false;
  site->args = AlltoallvArgs{};
  --pool->graphSites_;
  pool->free_.push_back(site);
}

void CapturedCalls::release(CapturedCall& site) { backend_.hostWrite(site.done, 1); }

void CapturedCalls::releaseAll() {
  std::lock_guard<std::mutex> lock(mu_);
  for (CapturedCall* s : sites_) release(*s);
}

}  // namespace rmacc
