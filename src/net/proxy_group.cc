// Several proxy threads as one Proxy: one ProxyImpl per fabric endpoint (net/proxy_impl.h).
// A rank with many remote peers issues more writes than one thread can (NCCL runs a proxy
// thread per channel for the same reason); each thread owns its endpoint's queues and CQ.
#include "net/proxy_impl.h"

#include "core/error.h"
#include "core/log.h"

namespace rmacc::proxy_internal {

ProxyGroup::ProxyGroup(Fabric& fabric, int threads, Backend& backend, int rank, int nRanks,
                       volatile uint64_t* signals, const ProxyOptions& options) {
  shared_.pacer = NicPacer(options.paceBytesPerSecond);
  for (int t = 0; t < threads; ++t)
    threads_.push_back(std::make_unique<ProxyImpl>(fabric, t, backend, rank, nRanks, signals,
                                                   &shared_, options));
  // Once all exist: a handler reads threads_.
  for (int t = 0; t < (int)threads_.size(); ++t)
    threads_[t]->setErrorHandler(
        [this, t](rmaccResult_t code, const std::string& text) { failed(t, code, text); });
  INFO(kSubsysProxy, "rank %d: %zu proxy threads, each with its fabric endpoint", rank,
       threads_.size());
}

// Every thread finishes what its streams released before any stops: a stopped thread no longer
// progresses its endpoint, so a peer's writes still bound for it could not complete.
ProxyGroup::~ProxyGroup() {
  for (auto& t : threads_) t->flush();
  {
    std::lock_guard<std::mutex> lock(errorMutex_);
    closing_ = true;  // a thread failing from here on must not walk threads_ (failed)
  }
  threads_.clear();
}

ProxyQueue* ProxyGroup::createQueue(int thread) {
  RMACC_ARG_CHECK(thread >= 0 && thread < threads(), "queue of proxy thread %d; the proxy has %d",
                  thread, threads());
  return threads_[thread]->createQueue(0);
}

uint64_t ProxyGroup::sourceRegistrations() const {
  uint64_t n = 0;
  for (auto& t : threads_) n += t->sourceRegistrations();
  return n;
}

uint64_t ProxyGroup::proxyThreadAllocations() const {
  uint64_t n = 0;
  for (auto& t : threads_) n += t->proxyThreadAllocations();
  return n;
}

rmaccResult_t ProxyGroup::error(std::string* text) const {
  int first;
  {
    std::lock_guard<std::mutex> lock(errorMutex_);
    first = firstFailed_;
  }
  if (first >= 0) return threads_[first]->error(text);
  for (auto& t : threads_)  // aborted (by the caller), not failed
    if (rmaccResult_t code = t->error(text); code != rmaccSuccess) return code;
  return rmaccSuccess;
}

void ProxyGroup::abort() {
  for (auto& t : threads_) t->abort();
}

void ProxyGroup::flush() {
  for (auto& t : threads_) t->flush();
}

void ProxyGroup::setErrorHandler(std::function<void(rmaccResult_t, const std::string&)> fn) {
  std::lock_guard<std::mutex> lock(errorMutex_);
  errorHandler_ = std::move(fn);
}

// On thread `thread`: the first failure is the group's; the other threads stop issuing (their
// later waits fail as aborted; abort() only sets flags, so under the lock, which keeps the
// destructor from taking threads_ apart meanwhile) and the handler runs once.
void ProxyGroup::failed(int thread, rmaccResult_t code, const std::string& text) {
  std::function<void(rmaccResult_t, const std::string&)> handler;
  {
    std::lock_guard<std::mutex> lock(errorMutex_);
    if (firstFailed_ >= 0 || closing_) return;
    firstFailed_ = thread;
    handler = errorHandler_;
    for (size_t t = 0; t < threads_.size(); ++t)
      if ((int)t != thread) threads_[t]->abort();
  }
  if (handler) handler(code, text);
}

}  // namespace rmacc::proxy_internal
